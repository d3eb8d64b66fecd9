"""A Hub id outside the catalog: one try, a short timeout, one error line. Against real sockets on
loopback (a closed port, and a tiny HTTP server answering 404, 401 or a config.json), never the
real Hub. Time is bounded by an alarm, not asserted."""

from __future__ import annotations

import json
import signal
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from kvbudget.cli import main
from kvbudget.model import catalog
from kvbudget.model.hf_config import spec_from_config
from kvbudget.model.resolve import load_model

REPO = "acme-research/not-a-real-model-xyz"


class _Hang(Exception):
    pass


def _alarm(_signum: int, _frame: object) -> None:
    raise _Hang()


@pytest.fixture
def online(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """HF_HUB_OFFLINE unset (conftest sets it), and a 60 s alarm against any retry loop."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # read once at import, under conftest's offline switch
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # closed now: a connection is refused


def _server(status: int, body: bytes = b"", files: dict[str, tuple[int, bytes]] | None = None,
            ) -> tuple[ThreadingHTTPServer, list[str]]:
    """A Hub on loopback: config.json answers ``status`` with ``body``; ``files`` (name: (status, body)) the others;
    anything else 404."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            name = self.path.rsplit("/", 1)[-1]
            code, data = (status, body) if name == "config.json" else (files or {}).get(name, (404, b""))
            data = data if code == 200 else b'{"error": "Repository Not Found"}'
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("X-Repo-Commit", "0" * 40)
            self.end_headers()
            self.wfile.write(data)

        do_HEAD = do_GET

        def log_message(self, *_args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, list[str]]:
    try:
        code = main(args)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err.splitlines()


def test_offline_hub_id_is_one_line_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["kv", REPO], capsys)
    assert code == 2 and out == ""
    assert len(err) == 1 and "HF_HUB_OFFLINE" in err[0] and "config.json" in err[0] and "kvbudget models" in err[0]
    assert "fetching" not in err[0]


def test_unreachable_hub_is_one_try_and_one_line(online: None, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    code, out, err = _run(["kv", REPO], capsys)
    assert code == 2 and out == ""
    assert err[0] == "fetching config.json from the Hub…"
    assert len(err) == 2 and err[1].startswith("kvbudget: error: ") and "could not be reached" in err[1]
    assert "HF_HUB_OFFLINE" in err[1] and "./not-a-real-model-xyz/config.json" in err[1]


@pytest.mark.parametrize(("status", "words"), [(404, "HTTP 404"), (401, "HF_TOKEN"), (403, "gated"), (500, "HTTP 500")])
def test_hub_refusals_are_one_line(status: int, words: str, online: None, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    server, seen = _server(status)
    try:
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
        code, out, err = _run(["kv", REPO], capsys)
    finally:
        server.shutdown()
    assert code == 2 and out == ""
    assert err[0] == "fetching config.json from the Hub…" and len(err) == 2, err
    assert words in err[1] and "HF_HUB_OFFLINE" in err[1]
    assert seen == [f"/{REPO}/resolve/main/config.json"]  # one request, no retry


def test_hub_config_is_read_strictly(online: None, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    server, _ = _server(200, b'{"model_type": "llama", "hidden_size": NaN}')
    try:
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
        code, _, err = _run(["kv", REPO], capsys)
    finally:
        server.shutdown()
    assert code == 2 and len(err) == 2 and "not valid JSON" in err[1]


def test_hub_config_is_planned(online: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    entry = catalog.find("llama-3.1-8b")
    assert entry is not None
    server, seen = _server(200, json.dumps(entry.config).encode())
    try:
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
        code, out, err = _run(["kv", REPO, "--json"], capsys)
    finally:
        server.shutdown()
    assert code == 0, err
    assert err[0] == "fetching config.json from the Hub…"
    assert json.loads(out)["model"] == REPO and json.loads(out)["kv_bytes_per_token"] == 131072
    assert seen[0] == f"/{REPO}/resolve/main/config.json"


@pytest.mark.parametrize("ref", ["a/b c", "acme/" + "b" * 100, "acme/-b", "acme/b.", "acme/b--c", "acme/x\x00"])
def test_a_name_the_hub_refuses_is_one_line_before_any_fetch(ref: str, online: None, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """huggingface_hub's own repo-id check raised HFValidationError as a traceback (online, outside the cache)."""
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    for args in (["kv", ref], ["explain", "--gpu", "H100", "--", f"vllm serve '{ref}'"]):
        code, out, err = _run(args, capsys)
        assert code == 2 and out == "" and len(err) == 1, err
        assert "not a catalog name, a local path nor a Hugging Face id" in err[0]


# A re-published catalog model (a quantization, a copy under another owner): the Hub's config.json when the Hub
# answers, the catalog model it is named after when the Hub cannot be asked, and the Hub's refusal when it says no.
DERIVED = "someone-quantized/Qwen2.5-7B-Instruct-GPTQ-Int4"


def test_unreachable_hub_plans_a_republished_model_by_name(online: None, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    code, out, err = _run(["kv", DERIVED, "--json"], capsys)
    assert code == 0, err
    assert err[0] == "fetching config.json from the Hub…" and len(err) == 2
    assert err[1].startswith("kvbudget: warning: ") and "planned as Qwen/Qwen2.5-7B-Instruct" in err[1]
    assert "GPTQ 4-bit" in err[1] and "config.json" in err[1]
    doc = json.loads(out)
    assert doc["model"] == DERIVED and any("planned as Qwen/Qwen2.5-7B-Instruct" in n for n in doc["notes"])
    assert sum(row["count"] for row in doc["layers"]) == 28  # Qwen2.5-7B-Instruct's config.json


def test_a_hub_refusal_is_not_papered_over_by_the_name(online: None, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    server, _ = _server(404)
    try:
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
        code, out, err = _run(["kv", DERIVED], capsys)
    finally:
        server.shutdown()
    assert code == 2 and out == "" and "HTTP 404" in err[-1]


def test_the_hubs_config_wins_over_the_name(online: None, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    entry = catalog.find("qwen2.5-7b-instruct")
    assert entry is not None
    config = {**entry.config, "num_hidden_layers": 7}  # not what the name suggests: the file decides
    server, _ = _server(200, json.dumps(config).encode())
    try:
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
        code, out, err = _run(["kv", DERIVED, "--json"], capsys)
    finally:
        server.shutdown()
    assert code == 0 and not any("warning" in line for line in err), err
    assert sum(row["count"] for row in json.loads(out)["layers"]) == 7


MODELOPT_FP8 = {"producer": {"name": "modelopt", "version": "0.27.1"},
                "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8", "exclude_modules": ["lm_head"]}}


def test_a_hub_repos_hf_quant_config_is_its_quantization_config(online: None, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A ModelOpt 0.29 checkpoint keeps its quantization config in hf_quant_config.json beside a config.json without
    one (vLLM 0.33.0 transformers_utils/config.py reads it for a Hub id as for a folder). A local folder of it was
    read so; the same repo as a Hub id was planned as 16-bit weights (Qwen3-8B: 16.4 GB of bf16, exit 0)."""
    entry = catalog.find("Qwen/Qwen3-8B")
    assert entry is not None
    files = {"hf_quant_config.json": (200, json.dumps(MODELOPT_FP8).encode())}
    server, seen = _server(200, json.dumps(entry.config).encode(), files)
    try:
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
        code, _, err = _run(["kv", REPO], capsys)
        spec = load_model(REPO)
    finally:
        server.shutdown()
    assert code == 0 and err == ["fetching config.json from the Hub…"], err
    assert seen[:2] == [f"/{REPO}/resolve/main/config.json", f"/{REPO}/resolve/main/hf_quant_config.json"]
    assert spec.weight_format is not None and (spec.weight_format.name, spec.weight_format.kv_cache) == ("fp8", "fp8")
    assert spec.weight_format == spec_from_config({**entry.config, "quantization_config": MODELOPT_FP8}).weight_format


@pytest.mark.parametrize(("answer", "words"), [((500, b""), "HTTP 500 for its hf_quant_config.json"),
                                               ((200, b"[1]"), "hf_quant_config.json on the Hub does not hold a JSON object"),
                                               ((200, b'{"quantization": NaN}'), "not valid JSON")])
def test_a_hub_hf_quant_config_that_cannot_be_read_is_one_line(answer: tuple[int, bytes], words: str, online: None,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    entry = catalog.find("Qwen/Qwen3-8B")
    assert entry is not None
    server, _ = _server(200, json.dumps(entry.config).encode(), {"hf_quant_config.json": answer})
    try:
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
        code, out, err = _run(["kv", REPO], capsys)
    finally:
        server.shutdown()
    assert code == 2 and out == "" and len(err) == 2 and words in err[1], err


def test_a_hub_config_with_its_own_quantization_config_asks_for_no_other_file(
        online: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    entry = catalog.find("Qwen/Qwen3-8B-AWQ")
    assert entry is not None and entry.config.get("quantization_config")
    server, seen = _server(200, json.dumps(entry.config).encode())
    try:
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
        code, _, err = _run(["kv", REPO], capsys)
    finally:
        server.shutdown()
    assert code == 0 and seen == [f"/{REPO}/resolve/main/config.json"], (err, seen)
