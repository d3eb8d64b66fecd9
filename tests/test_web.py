"""``kvbudget serve``: the real server (uvicorn on a free loopback port), its JSON against the CLI's --json for the same
inputs, its refusals, the API fuzzed against its own OpenAPI document, and the page in headless Chromium (Debian's
``chromium``, driven by Playwright; ``make test`` installs it when it is missing)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck, given, settings
from playwright.sync_api import Browser, Page, expect, sync_playwright

from kvbudget.cli import main
from kvbudget.web.app import create_app

ROOT = Path(__file__).resolve().parent.parent
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
QWEN_COMMAND = "vllm serve Qwen/Qwen3-8B --max-model-len 8192 --gpu-memory-utilization 0.85"


def run_server(app: Any) -> tuple[uvicorn.Server, threading.Thread, str]:
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    return server, thread, f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    server, thread, url = run_server(create_app())
    yield url
    server.should_exit = True
    thread.join(10)


def call(base: str, path: str, body: object = None, data: bytes | None = None) -> tuple[int, Any]:
    """(status, parsed JSON) of one request to the live server."""
    if body is not None:
        data = json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def cli_json(*argv: str) -> Any:
    code, out, err = cli(*argv, "--json")
    assert code == 0, err
    return json.loads(out)


def cli_error(*argv: str) -> str:
    code, _, err = cli(*argv)
    assert code == 2
    return err.strip().removeprefix("kvbudget: error: ")


# (endpoint, body, the same question on the command line)
SAME = [
    ("/api/kv", {"model": LLAMA, "context": "32K", "batch": 8}, ["kv", LLAMA, "--context", "32768", "--batch", "8"]),
    ("/api/fit", {"model": LLAMA, "gpu": "H100", "context": 32768}, ["fit", LLAMA, "--gpu", "H100", "--context", "32768"]),
    ("/api/fit", {"model": "qwen3-32b", "gpu": "L40S", "num_gpus": 2, "engine": "sglang", "context": "16K",
                  "options": {"mem_fraction_static": "0.8"}},
     ["fit", "qwen3-32b", "--gpu", "L40S", "--num-gpus", "2", "--engine", "sglang", "--context", "16K",
      "--mem-fraction-static", "0.8"]),
    ("/api/fit", {"model": LLAMA, "gpu": "A100-80GB", "engine": "textbook", "batch": 4, "units": "GB"},
     ["fit", LLAMA, "--gpu", "A100-80GB", "--engine", "textbook", "--batch", "4", "--units", "GB"]),
    ("/api/explain", {"command": QWEN_COMMAND, "gpu": "H100"}, ["explain", "--gpu", "H100", "--json", "--", *QWEN_COMMAND.split()]),
    ("/api/compare", {"model": LLAMA, "gpu": "H100", "context": 32768}, ["compare", LLAMA, "--gpu", "H100", "--context", "32768"]),
    ("/api/levers", {"model": LLAMA, "gpu": "L40S", "context": 32768, "options": {"gpu_memory_utilization": 0.85}},
     ["levers", LLAMA, "--gpu", "L40S", "--context", "32768", "--gpu-memory-utilization", "0.85"]),
    ("/api/plan", {"model": LLAMA, "concurrency": 32, "context": 32768, "gpus": "H100,L40S"},
     ["plan", LLAMA, "--concurrency", "32", "--context", "32768", "--gpus", "H100,L40S"]),
    ("/api/simulate", {"model": LLAMA, "gpu": "L4", "synthetic": "requests=100,rate=4,seed=3", "context": 8192},
     ["simulate", LLAMA, "--gpu", "L4", "--synthetic", "requests=100,rate=4,seed=3", "--context", "8192"]),
]


@pytest.mark.parametrize(("path", "body", "argv"), SAME, ids=[f"{p}-{i}" for i, (p, _, _) in enumerate(SAME)])
def test_answers_are_the_cli_json(base: str, path: str, body: dict[str, Any], argv: list[str]) -> None:
    status, doc = call(base, path, body)
    assert status == 200, doc
    expected = cli_json(*argv) if "--json" not in argv else json.loads(cli(*argv)[1])
    assert doc == expected


def test_catalogs_are_the_cli_json(base: str) -> None:
    for name in ("models", "gpus"):
        status, doc = call(base, f"/api/{name}")
        assert status == 200
        assert doc == cli_json(name)


def test_engines_list_their_options(base: str) -> None:
    status, doc = call(base, "/api/engines")
    assert status == 200
    vllm = next(e for e in doc if e["name"] == "vllm")
    assert vllm["fraction"] == "gpu_memory_utilization"
    assert any(o["dest"] == "max_num_seqs" and "fit" in o["commands"] for o in vllm["options"])


def test_partition_and_curve_come_from_the_same_plan(base: str) -> None:
    body = {"model": LLAMA, "gpu": "H100", "context": 32768}
    fit = call(base, "/api/fit", body)[1]
    status, part = call(base, "/api/partition", body)
    assert status == 200
    parts = {p["name"]: p["bytes"] for p in part["gpus"][0]}
    assert parts["KV cache"] == fit["available_kv_cache_bytes"]
    status, curve = call(base, "/api/kv/curve", {"model": LLAMA})
    assert status == 200
    kv = cli_json("kv", LLAMA, "--context", str(curve["points"][-1]["context"]))
    assert curve["points"][-1]["kv_bytes"] == kv["kv_bytes_per_sequence"]


@pytest.mark.parametrize(("path", "body", "argv"), [
    ("/api/fit", {"model": LLAMA, "gpu": "H1000"}, ["fit", LLAMA, "--gpu", "H1000"]),
    ("/api/fit", {"model": "llama-9000", "gpu": "H100"}, ["fit", "llama-9000", "--gpu", "H100"]),
    ("/api/fit", {"model": LLAMA, "gpu": "H100", "engine": "sglang", "options": {"gpu_memory_utilization": 0.8}},
     ["fit", LLAMA, "--gpu", "H100", "--engine", "sglang", "--gpu-memory-utilization", "0.8"]),
    ("/api/fit", {"model": LLAMA, "gpu": "H100", "num_gpus": 3, "tp": 2}, ["fit", LLAMA, "--gpu", "H100", "--num-gpus", "3", "--tp", "2"]),
    ("/api/explain", {"command": "ollama run llama3", "gpu": "H100"}, ["explain", "--gpu", "H100", "--", "ollama", "run", "llama3"]),
    ("/api/plan", {"model": LLAMA, "concurrency": 8, "context": 8192, "gpus": "H100", "kv_dtype": "int3"},
     ["plan", LLAMA, "--concurrency", "8", "--context", "8192", "--gpus", "H100", "--kv-dtype", "int3"]),
])
def test_bad_input_is_400_with_the_cli_message(base: str, path: str, body: dict[str, Any], argv: list[str]) -> None:
    status, doc = call(base, path, body)
    assert status == 400
    assert doc == {"error": cli_error(*argv)}


@pytest.mark.parametrize("body", [
    {"model": "/etc/passwd", "gpu": "H100"},
    {"model": "./config.json", "gpu": "H100"},
    {"model": LLAMA, "gpu": "H100", "options": {"profile": "/etc/hostname"}},
    {"model": "someone/not-in-the-catalog", "gpu": "H100"},
])
def test_no_files_and_no_hub_from_the_web(base: str, body: dict[str, Any]) -> None:
    status, doc = call(base, "/api/fit", body)
    assert status == 400
    assert "reads no files" in doc["error"] or "Hugging Face Hub" in doc["error"]


@pytest.mark.parametrize(("field", "value"), [("context", True), ("batch", False), ("tp", True), ("gpu_memory", True),
                                             ("context", 4096.0)])
def test_a_count_is_a_json_integer_or_the_cli_text(base: str, field: str, value: object) -> None:
    """pydantic's lax int read true as 1: {"context": true} planned a context of 1 token, 200 OK."""
    body = {"model": LLAMA, "gpu": "H100", field: value} if field != "gpu_memory" else {"model": LLAMA, field: value}
    status, doc = call(base, "/api/fit", body)
    assert status == 400 and doc["error"].startswith(f"{field}."), doc


def test_a_pasted_command_reads_no_file(base: str) -> None:
    for command in ("vllm serve /etc", "llama-server -m /tmp/model.gguf", "trtllm-serve " + LLAMA + " --extra_llm_api_options /etc/hostname"):
        status, doc = call(base, "/api/explain", {"command": command, "gpu": "H100"})
        assert status == 400 and "reads no files" in doc["error"], (command, doc)


def test_a_pasted_config_is_read_as_content(base: str) -> None:
    from kvbudget.model import catalog

    entry = catalog.find(LLAMA)
    assert entry is not None
    config = dict(entry.config)
    status, doc = call(base, "/api/kv", {"config": config, "context": 8192})
    assert status == 200
    assert doc["kv_bytes_per_token"] == cli_json("kv", LLAMA, "--context", "8192")["kv_bytes_per_token"]
    assert doc["model"] == "config.json"


def test_limits(base: str) -> None:
    status, doc = call(base, "/api/fit", data=b'{"model": "' + b"x" * (1 << 20) + b'"}')
    assert status == 413 and "1,048,576" in doc["error"]
    import http.client

    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)  # streamed, no length said: counted as it comes
    conn.request("POST", "/api/fit", body=iter([b" " * 65536] * 32), headers={"content-type": "application/json"},
                 encode_chunked=True)
    response = conn.getresponse()
    assert response.status == 413 and "1,048,576" in json.loads(response.read())["error"]
    conn.close()
    status, doc = call(base, "/api/simulate", {"model": LLAMA, "gpu": "H100", "synthetic": "requests=100000,rate=8"})
    assert status == 400 and "at most 2,000" in doc["error"]
    status, doc = call(base, "/api/fit", {"model": LLAMA, "gpu": "H100", "context": [1]})
    assert status == 400 and doc["error"].startswith("context")
    status, doc = call(base, "/api/fit", {"model": LLAMA, "gpu": "H100", "contxt": 8192})
    assert status == 400 and "contxt" in doc["error"]


def test_quick_answers_do_not_wait_for_a_search(base: str) -> None:
    """Plan searches run on worker threads: a fit asked while they run answers."""
    searches = [threading.Thread(target=call, args=(base, "/api/plan", {"model": "deepseek-v3", "concurrency": 64,
                                                                         "context": 32768})) for _ in range(2)]
    for t in searches:
        t.start()
    t0 = time.monotonic()
    status, _ = call(base, "/api/fit", {"model": LLAMA, "gpu": "H100"})
    quick = time.monotonic() - t0
    for t in searches:
        t.join(120)
    assert status == 200 and quick < 5


# ---- the API against its own OpenAPI document -------------------------------------------------------------


def test_api_fuzzed_against_its_openapi(base: str) -> None:
    """Every operation of /openapi.json, with bodies schemathesis draws from it (KVBUDGET_WEB_FUZZ_EXAMPLES each,
    default 20), each sent as drawn and again with a real model, GPU or command in it (so that the other fields
    reach the library, not only the model lookup): never a server error, and a refusal is always one line."""
    schema = schemathesis.openapi.from_url(base + "/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 12
    answered: dict[str, int] = {}

    def check(case: Any) -> None:
        response = case.call(timeout=60)
        assert response.status_code < 500, (case.path, case.body, response.text[:300])
        if response.status_code >= 400:
            doc = response.json()
            assert set(doc) == {"error"} and "\n" not in doc["error"], doc
        else:
            answered[case.path] = answered.get(case.path, 0) + 1

    for operation in operations:

        @settings(max_examples=int(os.environ.get("KVBUDGET_WEB_FUZZ_EXAMPLES", "20")), deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy())
        def one(case: Any) -> None:
            check(case)
            if isinstance(case.body, dict):
                real = {"command": QWEN_COMMAND} if "command" in case.body else {"model": LLAMA}
                if "/kv" not in case.path:
                    real["gpu"] = "H100"
                if "synthetic" in case.body:  # a short workload unless the drawn spec says how many
                    real["synthetic"] = f"requests=20,{case.body['synthetic']}"
                case.body = {**{k: v for k, v in case.body.items() if k != "config"}, **real}
                check(case)

        one()
    assert sum(answered.values()) >= 20, answered  # the drawn bodies did reach answers, not only refusals


# ---- the page, in headless Chromium --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "Debian's chromium is needed for the page's tests: make chromium (apt-get install chromium)"
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1360, "height": 1000})
    p = context.new_page()
    problems: list[str] = []
    p.on("pageerror", lambda e: problems.append(str(e)))
    p.on("console", lambda m: problems.append(m.text) if m.type == "error" and "status of 400" not in m.text else None)
    yield p
    context.close()
    assert not problems, problems


def figure(page: Page, id_: str) -> Any:
    return json.loads(page.get_attribute(f"#{id_}", "data-value") or "null")


def test_page_matches_the_cli(base: str, page: Page) -> None:
    page.goto(base + "/")
    expect(page.locator("#kv-cache-tokens")).not_to_have_attribute("data-value", "")  # the first answer is in
    page.fill("#model", LLAMA)
    page.fill("#gpu", "H100")
    page.select_option("#engine", "vllm")
    page.fill("#context", "32K")
    fit = cli_json("fit", LLAMA, "--gpu", "H100", "--context", "32768")
    kv = cli_json("kv", LLAMA, "--context", "32768")
    expect(page.locator("#num-gpu-blocks")).to_have_attribute("data-value", str(fit["num_gpu_blocks"]))
    expect(page.locator("#kv-per-sequence")).to_have_attribute("data-value", str(kv["kv_bytes_per_sequence"]))
    assert figure(page, "kv-cache-tokens") == fit["kv_cache_tokens"]
    assert figure(page, "max-concurrency") == fit["max_concurrency"]
    assert figure(page, "starts") is True
    assert figure(page, "kv-per-token") == kv["kv_bytes_per_token"]
    assert page.text_content("#launch-command") == fit["launch"]["command"]
    assert page.text_content("#log-lines") == "\n".join(fit["log_lines"])
    expect(page.locator("#levers tr")).to_have_count(len(fit["levers"]) + 1)
    kv_part = page.locator('#partition-svg rect[data-part="KV cache"]')
    assert kv_part.get_attribute("data-bytes") == str(fit["available_kv_cache_bytes"])
    expect(page.locator("#kv-plot-svg polyline")).to_have_count(1)
    expect(page.locator("#compare tr")).to_have_count(1 + len(cli_json("compare", LLAMA, "--gpu", "H100", "--context", "32768")["engines"]))
    expect(page.locator("#plan tr").first).to_be_visible(timeout=30_000)  # a full search: seconds under CI load
    page.wait_for_timeout(300)
    (ROOT / "docs/images").mkdir(exist_ok=True)
    page.screenshot(path=str(ROOT / "docs/images/web.png"), full_page=True)
    # the address holds the inputs: a fresh page opened on it shows the same answer
    shared = page.url
    assert "context=32K" in shared
    other = page.context.new_page()
    other.goto(shared)
    expect(other.locator("#num-gpu-blocks")).to_have_attribute("data-value", str(fit["num_gpu_blocks"]))
    other.close()


def test_page_reads_a_pasted_command_and_shows_errors(base: str, page: Page) -> None:
    page.goto(base + "/")
    expect(page.locator("#kv-cache-tokens")).not_to_have_attribute("data-value", "")
    explained = json.loads(cli("explain", "--gpu", "H100", "--json", "--", *QWEN_COMMAND.split())[1])
    page.fill("#launch", QWEN_COMMAND)
    expect(page.locator("#num-gpu-blocks")).to_have_attribute("data-value", str(explained["num_gpu_blocks"]))
    assert figure(page, "max-concurrency") == explained["max_concurrency"]
    page.fill("#launch", "")
    page.fill("#gpu", "H1000")
    expect(page.locator("#error")).to_have_text(cli_error("fit", LLAMA, "--gpu", "H1000"))
    page.fill("#gpu", "H100")
    expect(page.locator("#error")).to_be_hidden()


def test_the_serve_command(tmp_path: Path) -> None:
    """`kvbudget serve` as a user starts it: loopback, the page and the API; the CLI's own start-up imports no web
    framework."""
    import socket
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    probe = "import sys, kvbudget.cli; print(sorted(m for m in ('fastapi', 'uvicorn', 'starlette', 'pydantic') if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout.strip() == "[]"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "kvbudget", "serve", "--port", str(port)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                status, doc = call(f"http://127.0.0.1:{port}", "/api/engines")
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "kvbudget serve did not start"
                time.sleep(0.1)
        assert status == 200 and doc[0]["name"] == "vllm"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as response:
            html = response.read().decode()
            assert 'id="num-gpu-blocks"' in html and "default-src 'self'" in response.headers["content-security-policy"]
    finally:
        proc.terminate()
        out = proc.communicate(timeout=10)[0]
    assert f"http://127.0.0.1:{port}/" in out and "Traceback" not in out


def test_allow_hub_asks_the_hub_and_the_seal_stays_in_its_request(base: str, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """With --allow-hub a Hub id goes to the Hub reader (offline here: its own message, not the server's refusal);
    the seal holds inside each request only: the same process still reads a config.json path from Python."""
    from kvbudget import api
    from kvbudget.model import catalog

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    server, thread, url = run_server(create_app(allow_hub=True))
    try:
        status, doc = call(url, "/api/kv", {"model": "someone/not-in-the-catalog"})
        assert status == 400 and "looks nothing up" not in doc["error"] and "HF_HUB_OFFLINE" in doc["error"]
        status, doc = call(url, "/api/kv", {"model": "/etc/passwd"})
        assert status == 400 and "reads no files" in doc["error"]
    finally:
        server.should_exit = True
        thread.join(10)
    entry = catalog.find(LLAMA)
    assert entry is not None
    path = tmp_path / "config.json"
    path.write_text(json.dumps(entry.config))
    assert call(base, "/api/kv", {"model": str(path)})[0] == 400
    assert api.kv(str(path), context=8192).bytes_per_token == cli_json("kv", LLAMA, "--context", "8192")["kv_bytes_per_token"]


def test_diagnose_reads_pasted_pages_as_the_cli_reads_the_files(base: str) -> None:
    """/api/diagnose takes the pages as text (the server fetches no URL and reads no file): the same findings and
    figures as `diagnose --metrics FILE --dcgm FILE --expect ... --json`, apart from when the page was read."""
    data = Path(__file__).parent / "data" / "metrics"
    body = {"metrics": (data / "vllm-0.33-busy.prom").read_text(), "dcgm": (data / "dcgm-h100-full.prom").read_text(),
            "model": "Qwen/Qwen3-8B", "gpu": "H100", "context": 8192}
    status, doc = call(base, "/api/diagnose", body)
    assert status == 200, doc
    want = cli_json("diagnose", "--metrics", str(data / "vllm-0.33-busy.prom"), "--dcgm", str(data / "dcgm-h100-full.prom"),
                    "--expect", "Qwen/Qwen3-8B", "--gpu", "H100", "--context", "8192")
    for key in ("servers", "expected"):
        assert doc[key] == want[key], key
    assert [{**g, "source": ""} for g in doc["gpus"]] == [{**g, "source": ""} for g in want["gpus"]]  # but its name
    strip = [(d["name"], d["severity"], d["subject"]) for d in doc["diagnoses"]]
    assert strip == [(d["name"], d["severity"], d["subject"]) for d in want["diagnoses"]]
    status, doc = call(base, "/api/diagnose", {"metrics": "<html>not metrics</html>"})
    assert status == 400 and "\n" not in doc["error"]
    status, doc = call(base, "/api/diagnose", {"metrics": (data / "vllm-0.33-busy.prom").read_text(), "model": "qwen3-8b"})
    assert status == 400 and "needs its GPU" in doc["error"]
    # the plan's fields without a model were ignored (the page's figures, 200), as if they had been read
    for extra in ({"context": 4096}, {"engine": "sglang"}, {"tp": 2}, {"gpu": "H100"}, {"kv_dtype": "fp8"},
                  {"options": {"gpu_memory_utilization": 0.5}}):
        status, doc = call(base, "/api/diagnose", {"metrics": (data / "vllm-0.33-busy.prom").read_text(), **extra})
        name = next(iter(extra["options"])) if "options" in extra else next(iter(extra))
        assert status == 400 and doc["error"].startswith(f"{name} is read with a model and gpu"), doc


@pytest.mark.parametrize(("data", "kind", "status", "words"), [
    (b'{"model": "llama-3.1-8b",', "application/json", 400, "the body is not valid JSON (Expecting property name"),
    (b'{"model": "llama-3.1-8b"}', "text/plain", 415, "Content-Type: application/json (got 'text/plain')"),
    (b"model=llama-3.1-8b", "application/x-www-form-urlencoded", 415, "Content-Type: application/json"),
    (b'{"model": "llama-3.1-8b"}', "", 415, "Content-Type: application/json (it has none)"),
    (b'{"model": ' + b"[" * 5000 + b"]" * 5000 + b"}", "application/json", 400, "nested too deeply"),
    (b'{"model": "llama-3.1-8b", "context": ' + b"9" * 5000 + b"}", "application/json", 400, "thousands of digits"),
    ('{"model": "llamé"}'.encode("latin-1"), "application/json; charset=latin-1", 400, "not UTF-8 text"),
    (b"[1, 2]", "application/json", 400, "one JSON object"),
    # a key given twice was read as its last value (json keeps the last): the answer for another model, 200
    (b'{"model": "llama-3.1-8b", "model": "qwen3-8b"}', "application/json", 400, "the body gives 'model' twice"),
    (b'{"model": "llama-3.1-8b", "config": {"a": 1, "a": 2}}', "application/json", 400, "gives 'a' twice"),
])
def test_a_body_that_is_not_one_json_object_is_one_error_line(base: str, data: bytes, kind: str, status: int,
                                                              words: str) -> None:
    """Bodies FastAPI read as no body ('Input should be a valid dictionary' for JSON sent as text/plain or a form)
    or failed on with {"detail": "There was an error parsing the body"} (deep nesting, a 5,000-digit integer,
    latin-1 bytes): each is now {"error": one line naming the problem}."""
    import http.client

    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("POST", "/api/kv", body=data, headers={"content-type": kind} if kind else {})
    response = conn.getresponse()
    doc = json.loads(response.read())
    conn.close()
    assert response.status == status and set(doc) == {"error"} and words in doc["error"]
