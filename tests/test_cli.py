"""Command-line tests for kvbudget: exit codes, one-line errors, the JSON schema and hand-checked numbers.

Every test runs offline: HF_HUB_OFFLINE=1 is set for all of them (``_offline`` below) and socket
connections are refused in-process, so a test that would reach the Hugging Face Hub fails
instead of downloading.

Hand-checked reference (the worked example "KV Cache Memory Calculation", quoted in tests/test_seeds.py):
Llama-3 8B has 32 layers, 8 KV heads, head_dim 4096 / 32 = 128, 2 bytes per element (bf16/fp16), so

    per token      = 2 (K and V) x 32 x 8 x 128 x 2 = 131,072 bytes  ("128 KB/token")
    8192 tokens    = 131,072 x 8192 = 1,073,741,824 bytes              ("1 GB")

meta-llama/Llama-3.1-8B-Instruct has the same attention shape (its config.json in the catalog:
num_hidden_layers 32, num_attention_heads 32, num_key_value_heads 8, hidden_size 4096, bfloat16).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import kvbudget
from kvbudget.cli import main

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
LLAMA_ALIAS = "llama-3.1-8b"

# Seed 003: 2 x L x H_kv x D_h x P = 2 x 32 x 8 x 128 x 2 bytes = "128 KB/token".
LLAMA_KV_PER_TOKEN = 2 * 32 * 8 * 128 * 2
# Seed 003: 128 KB/token x 8192 tokens = "1 GB".
LLAMA_KV_8K = LLAMA_KV_PER_TOKEN * 8192

GIB = 2**30


# --- helpers ----------------------------------------------------------------------------------


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        assert self.code == 0, self.err
        return json.loads(self.out)


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reaches the network: the Hub is told to stay offline and sockets refuse to connect."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")

    def refuse(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("a test tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):
    """Run ``kvbudget.cli.main`` in-process. argparse usage errors leave main() through
    SystemExit; their code is the exit code a shell would see."""

    def run(*args: object) -> Result:
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


def _subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    env["HF_HUB_OFFLINE"] = "1"
    env["HF_HUB_DISABLE_TELEMETRY"] = "1"
    env.pop("PYTHONWARNINGS", None)
    return env


def run_module(*args: object, timeout: float = 120) -> Result:
    """``python -m kvbudget ...`` in a child process."""
    proc = subprocess.run(
        [sys.executable, "-m", "kvbudget", *map(str, args)],
        capture_output=True, text=True, env=_subprocess_env(), timeout=timeout, check=False,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def assert_one_line_error(r: Result, *needles: str) -> str:
    """Exit code 2, nothing on stdout, exactly one line on stderr naming the problem, no traceback."""
    assert "Traceback" not in r.err, r.err
    assert r.code == 2, (r.code, r.err)
    assert r.out == "", r.out
    lines = r.err.splitlines()
    assert len(lines) == 1, r.err
    assert r.err.endswith("\n")
    line = lines[0]
    assert line.startswith("kvbudget: error: "), line
    for needle in needles:
        assert needle.lower() in line.lower(), f"{needle!r} not in {line!r}"
    return line


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def llama_like_config(**overrides: Any) -> dict[str, Any]:
    """A small config with Llama-3.1-8B's attention shape (32 layers, 32 heads, 8 KV heads,
    head_dim 4096/32 = 128, bf16) and a tiny vocabulary."""
    cfg: dict[str, Any] = {
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 1000,
        "max_position_embeddings": 131072,
        "torch_dtype": "bfloat16",
    }
    cfg.update(overrides)
    return cfg


# --- bad inputs: exit 2, one line, no traceback -----------------------------------------------


def _cfg_file(tmp_path: Path, text: str, name: str = "config.json") -> str:
    return str(write(tmp_path / name, text))


def _cfg_without(tmp_path: Path, key: str) -> str:
    cfg = llama_like_config()
    del cfg[key]
    return _cfg_file(tmp_path, json.dumps(cfg))


# Each case: id -> (argv builder taking tmp_path, substrings the one error line must contain).
BAD_INPUTS: dict[str, tuple[Any, tuple[str, ...]]] = {
    "unknown-model-typo": (lambda t: ["kv", "lama-3.1-8b"], ("unknown model", "lama-3.1-8b", "did you mean", LLAMA)),
    "unknown-model-fit": (lambda t: ["fit", "--engine", "textbook", "lama-3.1-8b", "--gpu", "H100"], ("unknown model", "did you mean", LLAMA)),
    "unknown-model-gibberish": (lambda t: ["kv", "zzqqxx"], ("unknown model", "zzqqxx")),
    "empty-model-name": (lambda t: ["kv", ""], ("empty model name",)),
    "unknown-gpu": (lambda t: ["fit", "--engine", "textbook", LLAMA_ALIAS, "--gpu", "H1000"], ("unknown GPU", "H1000", "did you mean", "H100")),
    "truncated-json": (
        lambda t: ["kv", _cfg_file(t, json.dumps(llama_like_config())[:57])],
        ("not valid JSON", "config.json"),
    ),
    "empty-file": (lambda t: ["kv", _cfg_file(t, "")], ("not valid JSON",)),
    "json-array": (lambda t: ["kv", _cfg_file(t, "[1, 2, 3]")], ("JSON object",)),
    "json-string": (lambda t: ["kv", _cfg_file(t, '"llama"')], ("JSON object",)),
    "not-utf8": (lambda t: ["kv", str(_write_bytes(t / "config.json", b"\xff\xfe\x00{"))], ("cannot read",)),
    "missing-num_hidden_layers": (lambda t: ["kv", _cfg_without(t, "num_hidden_layers")], ("missing field", "num_hidden_layers")),
    "missing-model_type": (lambda t: ["kv", _cfg_without(t, "model_type")], ("model_type",)),
    "missing-hidden_size-fit": (lambda t: ["fit", "--engine", "textbook", _cfg_without(t, "hidden_size"), "--gpu", "H100"], ("hidden_size",)),
    "hidden_size-string": (
        lambda t: ["kv", _cfg_file(t, json.dumps(llama_like_config(hidden_size="4096x")))],
        ("hidden_size", "integer"),
    ),
    "hidden_size-fraction": (
        lambda t: ["kv", _cfg_file(t, json.dumps(llama_like_config(hidden_size=4096.5)))],
        ("hidden_size", "integer"),
    ),
    "hidden_size-bool": (
        lambda t: ["kv", _cfg_file(t, json.dumps(llama_like_config(hidden_size=True)))],
        ("hidden_size", "integer"),
    ),
    "num_hidden_layers-negative": (
        lambda t: ["kv", _cfg_file(t, json.dumps(llama_like_config(num_hidden_layers=-2)))],
        ("num_hidden_layers", "positive"),
    ),
    "kv-heads-do-not-divide": (
        lambda t: ["kv", _cfg_file(t, json.dumps(llama_like_config(num_key_value_heads=5)))],
        ("KV heads",),
    ),
    "unknown-torch_dtype": (
        lambda t: ["kv", _cfg_file(t, json.dumps(llama_like_config(torch_dtype="float7")))],
        ("torch_dtype",),
    ),
    "folder-without-config": (lambda t: ["kv", str(_mkdir(t / "empty_model"))], ("config.json", "no such file")),
    "missing-path-json": (lambda t: ["kv", str(t / "nowhere" / "config.json")], ("no such file",)),
    "missing-relative-json": (lambda t: ["kv", "does-not-exist-here.json"], ("does-not-exist-here.json", "no such file")),
    "hub-id-offline": (
        lambda t: ["kv", "acme-research/not-a-real-model-xyz"],
        ("acme-research/not-a-real-model-xyz", "not in the catalog", "HF_HUB_OFFLINE", "config.json"),
    ),
    "hub-id-offline-fit": (
        lambda t: ["fit", "--engine", "textbook", "acme-research/not-a-real-model-xyz", "--gpu", "H100"],
        ("not in the catalog", "config.json"),
    ),
    "context-0": (lambda t: ["kv", LLAMA_ALIAS, "--context", "0"], ("--context", "positive")),
    "context-negative": (lambda t: ["kv", LLAMA_ALIAS, "--context", "-5"], ("--context",)),
    "context-not-a-number": (lambda t: ["kv", LLAMA_ALIAS, "--context", "long"], ("--context", "whole number")),
    "context-absurd-kv": (lambda t: ["kv", LLAMA_ALIAS, "--context", "10000000000"], ("--context",)),
    "context-absurd-fit": (lambda t: ["fit", "--engine", "textbook", LLAMA_ALIAS, "--gpu", "H100", "--context", "10000000000"], ("--context",)),
    "context-0-fit": (lambda t: ["fit", "--engine", "textbook", LLAMA_ALIAS, "--gpu", "H100", "--context", "0"], ("--context",)),
    "batch-0": (lambda t: ["kv", LLAMA_ALIAS, "--batch", "0"], ("--batch", "positive")),
    "batch-0-fit": (lambda t: ["fit", "--engine", "textbook", LLAMA_ALIAS, "--gpu", "H100", "--batch", "0"], ("--batch",)),
    "batch-absurd": (lambda t: ["kv", LLAMA_ALIAS, "--batch", "100000000"], ("--batch",)),
    "tp-3-on-32-heads": (lambda t: ["kv", LLAMA, "--tp", "3"], ("--tp 3", "32 attention heads")),
    "tp-3-on-32-heads-fit": (lambda t: ["fit", "--engine", "textbook", LLAMA, "--gpu", "H100", "--tp", "3"], ("--tp 3", "32 attention heads")),
    "tp-64-on-32-heads": (lambda t: ["kv", LLAMA, "--tp", "64"], ("--tp 64", "32 attention heads")),
    "gpu-memory-words": (lambda t: ["fit", "--engine", "textbook", LLAMA_ALIAS, "--gpu-memory", "lots"], ("--gpu-memory", "lots")),
    "gpu-memory-zero": (lambda t: ["fit", "--engine", "textbook", LLAMA_ALIAS, "--gpu-memory", "0GiB"], ("--gpu-memory", "positive")),
    "gpu-memory-negative": (lambda t: ["fit", "--engine", "textbook", LLAMA_ALIAS, "--gpu-memory", "-8GiB"], ("--gpu-memory",)),
    "gpu-and-gpu-memory": (lambda t: ["fit", "--engine", "textbook", LLAMA_ALIAS, "--gpu", "H100", "--gpu-memory", "48GiB"], ("--gpu",)),
    "num-gpus-vs-tp": (
        lambda t: ["fit", "--engine", "textbook", LLAMA_ALIAS, "--gpu", "H100", "--num-gpus", "8", "--tp", "3"],
        ("--num-gpus 8", "--tp 3"),
    ),
    "pp-beyond-layers": (lambda t: ["fit", "--engine", "textbook", LLAMA_ALIAS, "--gpu", "H100", "--pp", "64"], ("--pp 64",)),
    "kv-dtype-fp7": (lambda t: ["kv", LLAMA_ALIAS, "--kv-dtype", "fp7"], ("fp7", "data type")),
    "kv-dtype-fp7-fit": (lambda t: ["fit", "--engine", "textbook", LLAMA_ALIAS, "--gpu", "H100", "--kv-dtype", "fp7"], ("fp7",)),
    "weights-dtype-int3": (lambda t: ["fit", "--engine", "textbook", LLAMA_ALIAS, "--gpu", "H100", "--weights-dtype", "int3"], ("int3", "weights")),
    "overhead-negative": (lambda t: ["fit", "--engine", "textbook", LLAMA_ALIAS, "--gpu", "H100", "--overhead", "-1GiB"], ("--overhead",)),
    "units-bad": (lambda t: ["kv", LLAMA_ALIAS, "--units", "KB"], ("--units",)),
    "fit-without-gpu": (lambda t: ["fit", "--engine", "textbook", LLAMA_ALIAS], ("--gpu",)),
    "kv-without-model": (lambda t: ["kv"], ("model",)),
    "unknown-subcommand": (lambda t: ["frobnicate", LLAMA_ALIAS], ("frobnicate",)),
    "no-subcommand": (lambda t: [], ("command",)),
    "unknown-option": (lambda t: ["kv", LLAMA_ALIAS, "--fast"], ("--fast",)),
}


def _mkdir(path: Path) -> Path:
    path.mkdir()
    return path


def _write_bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("case", list(BAD_INPUTS), ids=list(BAD_INPUTS))
def test_bad_input_is_one_line_exit_2(cli, tmp_path: Path, case: str) -> None:
    build, needles = BAD_INPUTS[case]
    assert_one_line_error(cli(*build(tmp_path)), *needles)


def test_typo_suggests_the_right_model_first(cli) -> None:
    line = assert_one_line_error(cli("kv", "lama-3.1-8b"))
    suggestions = line.split("did you mean", 1)[1]
    assert suggestions.strip().startswith(LLAMA)


def test_missing_field_names_the_file(cli, tmp_path: Path) -> None:
    path = _cfg_without(tmp_path, "num_hidden_layers")
    line = assert_one_line_error(cli("kv", path), "num_hidden_layers")
    assert path in line


def test_hub_id_offline_never_imports_a_download(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """With HF_HUB_OFFLINE=1 a hub id outside the catalog fails before any download is tried."""
    import huggingface_hub

    def no_download(*_a: Any, **_k: Any) -> None:
        raise AssertionError("hf_hub_download called while HF_HUB_OFFLINE=1")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", no_download)
    line = assert_one_line_error(cli("kv", "acme-research/not-a-real-model-xyz"))
    assert "kvbudget kv ./not-a-real-model-xyz/config.json" in line  # the local-file alternative


# Known bugs: a config.json value that is not a usable integer, or an absurd one, escapes as
# a traceback (exit 1) instead of a one-line error with exit code 2.
BAD_CONFIG_VALUES = {
    # json.loads accepts NaN/Infinity; _Cfg.int calls int(value) on them, which raises a plain
    # ValueError / OverflowError that is not an InputError.
    "hidden_size-NaN": ('"hidden_size": NaN', "hidden_size"),
    "hidden_size-Infinity": ('"hidden_size": Infinity', "hidden_size"),
    "num_key_value_heads-Infinity": ('"num_key_value_heads": Infinity', "num_key_value_heads"),
    # An absurd layer count must be refused before any work is sized by it.
    "num_hidden_layers-absurd": ('"num_hidden_layers": 100000000000000000000', "num_hidden_layers"),
    # layer_types entries must be strings.
    "layer_types-nested-list": ('"layer_types": [["full_attention"], ["full_attention"]]', "layer_types"),
}


@pytest.mark.parametrize("case", list(BAD_CONFIG_VALUES), ids=list(BAD_CONFIG_VALUES))
def test_bad_config_values_are_one_line_errors(cli, tmp_path: Path, case: str) -> None:
    fragment, field = BAD_CONFIG_VALUES[case]
    key = fragment.split('"')[1]
    cfg = llama_like_config(num_hidden_layers=2)
    cfg.pop(key, None)
    text = json.dumps(cfg)[:-1] + ", " + fragment + "}"
    path = _cfg_file(tmp_path, text)
    assert_one_line_error(cli("kv", path, "--context", "16"), field)


def test_bad_config_value_subprocess_has_no_traceback(tmp_path: Path) -> None:
    cfg = llama_like_config(num_hidden_layers=2)
    del cfg["hidden_size"]
    text = json.dumps(cfg)[:-1] + ', "hidden_size": NaN}'
    path = _cfg_file(tmp_path, text)
    assert_one_line_error(run_module("kv", path, "--context", "16"), "hidden_size")


# --- real subprocesses --------------------------------------------------------------------------


def test_subprocess_success() -> None:
    r = run_module("kv", LLAMA_ALIAS, "--context", "8192", "--json")
    assert r.code == 0, r.err
    assert r.err == ""
    doc = json.loads(r.out)
    assert doc["kv_bytes_per_token"] == LLAMA_KV_PER_TOKEN
    assert doc["kv_bytes_per_sequence"] == LLAMA_KV_8K


def test_subprocess_fit_success() -> None:
    r = run_module("fit", "--engine", "textbook", LLAMA_ALIAS, "--gpu", "H100", "--context", "8192")
    assert r.code == 0, r.err
    assert r.err == ""
    assert "Verdict: fits" in r.out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["kv", "lama-3.1-8b"], "did you mean"),
        (["fit", "--engine", "textbook", LLAMA_ALIAS, "--gpu", "H1000"], "unknown GPU"),
        (["kv", LLAMA_ALIAS, "--context", "0"], "--context"),
        (["frobnicate"], "frobnicate"),
    ],
    ids=["typo-model", "unknown-gpu", "context-0", "unknown-subcommand"],
)
def test_subprocess_bad_input(args: list[str], needle: str) -> None:
    assert_one_line_error(run_module(*args), needle)


def test_subprocess_bad_config_file(tmp_path: Path) -> None:
    path = _cfg_file(tmp_path, '{"model_type": "llama", "hidden_size": 40')
    assert_one_line_error(run_module("kv", path), "not valid JSON")


def _console_script() -> Path | None:
    script = Path(sys.executable).parent / "kvbudget"
    return script if script.exists() else None


@pytest.mark.skipif(_console_script() is None, reason="console script not installed next to this Python")
def test_console_script() -> None:
    script = _console_script()
    assert script is not None
    ok = subprocess.run([str(script), "--version"], capture_output=True, text=True, env=_subprocess_env(), timeout=60, check=False)
    assert ok.returncode == 0
    assert ok.stdout.strip() == f"kvbudget {kvbudget.__version__}"
    bad = subprocess.run([str(script), "kv", "lama-3.1-8b"], capture_output=True, text=True, env=_subprocess_env(),
                         timeout=60, check=False)
    assert_one_line_error(Result(bad.returncode, bad.stdout, bad.stderr), "did you mean")


# --- hand-checked numbers -------------------------------------------------------------------------


def test_llama_kv_per_token_and_8k_sequence(cli) -> None:
    doc = cli("kv", LLAMA, "--context", "8192", "--json").json()
    assert doc["model"] == LLAMA
    assert doc["kv_bytes_per_token"] == 131072 == LLAMA_KV_PER_TOKEN  # worked example: "128 KB/token"
    assert doc["kv_bytes_per_sequence"] == 1073741824 == LLAMA_KV_8K  # worked example: "1 GB" for 8192 tokens
    assert doc["kv_bytes_total"] == LLAMA_KV_8K
    assert doc["kv_dtype"] == "bf16"
    assert doc["layers"] == [
        {"kind": "full_attention", "count": 32, "detail": doc["layers"][0]["detail"], "bytes_per_token": 131072,
         "tokens_held": 8192, "bytes_per_sequence": 1073741824},
    ]


def test_alias_and_id_agree(cli) -> None:
    a = cli("kv", LLAMA, "--context", "8192", "--json").json()
    b = cli("kv", LLAMA_ALIAS, "--context", "8192", "--json").json()
    assert a == b


def test_context_suffix_k(cli) -> None:
    # as vLLM reads --max-model-len (vllm/utils/argparse_utils.py human_readable_int): K binary, k decimal
    doc = cli("kv", LLAMA_ALIAS, "--context", "8K", "--json").json()
    assert doc["context"] == 8192
    assert doc["kv_bytes_per_sequence"] == LLAMA_KV_8K
    assert cli("kv", LLAMA_ALIAS, "--context", "8k", "--json").json()["context"] == 8000
    assert cli("kv", LLAMA_ALIAS, "--context", "25.6k", "--json").json()["context"] == 25600


def test_default_context_is_model_max(cli) -> None:
    doc = cli("kv", LLAMA_ALIAS, "--json").json()
    # config.json: max_position_embeddings 131072
    assert doc["context"] == doc["max_context"] == 131072
    assert doc["kv_bytes_per_sequence"] == 131072 * LLAMA_KV_PER_TOKEN


@pytest.mark.parametrize("dtype", ["fp8", "fp8_e4m3", "fp8_e5m2", "int8"])
def test_one_byte_kv_dtype_halves_it(cli, dtype: str) -> None:
    doc = cli("kv", LLAMA_ALIAS, "--context", "8192", "--kv-dtype", dtype, "--json").json()
    # 1 byte per element instead of bf16's 2: 2 x 32 x 8 x 128 x 1
    assert doc["kv_bytes_per_token"] == LLAMA_KV_PER_TOKEN // 2 == 65536
    assert doc["kv_bytes_per_sequence"] == LLAMA_KV_8K // 2


def test_fp32_kv_doubles_it(cli) -> None:
    doc = cli("kv", LLAMA_ALIAS, "--context", "8192", "--kv-dtype", "fp32", "--json").json()
    assert doc["kv_bytes_per_token"] == 2 * LLAMA_KV_PER_TOKEN


@pytest.mark.parametrize(
    ("tp", "expected"),
    [
        (1, 131072),
        (2, 131072 // 2),
        (4, 131072 // 4),  # 8 KV heads / 4 = 2 per rank
        (8, 131072 // 8),  # one KV head per rank
        # 32 attention heads % 16 == 0, so TP 16 is accepted; 8 KV heads < 16 ranks: each rank keeps
        # max(1, 8 // 16) = 1 replicated head -> 2 x 32 x 1 x 128 x 2 = 16384 (vLLM get_num_kv_heads).
        (16, 2 * 32 * 1 * 128 * 2),
        (32, 2 * 32 * 1 * 128 * 2),
    ],
)
def test_tensor_parallel_per_rank_kv(cli, tp: int, expected: int) -> None:
    doc = cli("kv", LLAMA, "--context", "8192", "--tp", tp, "--json").json()
    assert doc["tp"] == tp
    assert doc["kv_bytes_per_token"] == expected
    assert doc["kv_bytes_per_sequence"] == expected * 8192
    # engine rule: per-rank KV heads = max(1, kv_heads // tp)
    assert expected == 2 * 32 * max(1, 8 // tp) * 128 * 2


def test_tp16_is_accepted_by_fit_too(cli) -> None:
    doc = cli("fit", "--engine", "textbook", LLAMA, "--gpu", "H100", "--tp", "16", "--context", "8192", "--json").json()
    assert doc["tp"] == 16
    assert doc["num_gpus"] == 16
    assert doc["kv_per_sequence_bytes"] == 16384 * 8192


def test_local_config_file_and_folder_match_catalog(cli, tmp_path: Path) -> None:
    folder = _mkdir(tmp_path / "my-llama")
    path = write(folder / "config.json", json.dumps(llama_like_config()))
    by_file = cli("kv", path, "--context", "8192", "--json").json()
    by_folder = cli("kv", folder, "--context", "8192", "--json").json()
    for doc in (by_file, by_folder):
        assert doc["kv_bytes_per_token"] == LLAMA_KV_PER_TOKEN
        assert doc["kv_bytes_per_sequence"] == LLAMA_KV_8K


def test_batch_multiplies(cli) -> None:
    doc = cli("kv", LLAMA_ALIAS, "--context", "4096", "--batch", "16", "--json").json()
    # worked example: 128 KB/token x 4096 tokens = 512 MB per request
    assert doc["kv_bytes_per_sequence"] == LLAMA_KV_PER_TOKEN * 4096 == 512 * 2**20
    assert doc["kv_bytes_total"] == 16 * 512 * 2**20


# --- kv --json schema and internal consistency -------------------------------------------------

KV_MODELS = [
    LLAMA_ALIAS,  # full attention
    "gemma-2-9b",  # sliding + full
    "gpt-oss-20b",  # sliding (128) + full
    "deepseek-v2-lite",  # MLA
    "jamba-v0.1",  # Mamba + attention
    "qwen3-next-80b-a3b",  # GatedDeltaNet + attention
    "llama-4-scout",  # chunked local + full
    "falcon-7b",  # multi-query
]


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


@pytest.mark.parametrize("model", KV_MODELS)
@pytest.mark.parametrize(("context", "batch"), [(8192, 3), (100, 1)])
def test_kv_json_schema_and_consistency(cli, model: str, context: int, batch: int) -> None:
    doc = cli("kv", model, "--context", context, "--batch", batch, "--json").json()
    for key in ("model", "params", "kv_bytes_per_token", "kv_bytes_per_sequence", "kv_bytes_total", "layers", "table"):
        assert key in doc, key
    assert isinstance(doc["model"], str)
    assert doc["model"]
    for key in ("params", "kv_bytes_per_token", "kv_bytes_per_sequence", "kv_bytes_total"):
        assert _is_int(doc[key]), (key, doc[key])
    assert doc["params"] > 0
    assert doc["context"] == context
    assert doc["batch"] == batch
    assert doc["kv_bytes_total"] == batch * doc["kv_bytes_per_sequence"]

    layers = doc["layers"]
    assert isinstance(layers, list)
    assert layers
    for row in layers:
        for key in ("kind", "count", "bytes_per_token", "tokens_held", "bytes_per_sequence"):
            assert key in row, key
        assert isinstance(row["kind"], str)
        for key in ("count", "bytes_per_token", "tokens_held", "bytes_per_sequence"):
            assert _is_int(row[key]), (key, row[key])
            assert row[key] >= 0
        assert row["count"] > 0
        assert row["tokens_held"] <= context
        if row["bytes_per_token"]:  # attention-like: bytes grow with the tokens held
            assert row["bytes_per_sequence"] == row["tokens_held"] * row["bytes_per_token"]
    assert sum(r["bytes_per_token"] for r in layers) == doc["kv_bytes_per_token"]
    assert sum(r["bytes_per_sequence"] for r in layers) == doc["kv_bytes_per_sequence"]

    table = doc["table"]
    contexts, batches, cells = table["contexts"], table["batches"], table["bytes"]
    assert all(_is_int(c) for c in contexts)
    assert all(_is_int(b) for b in batches)
    assert contexts == sorted(contexts)
    assert batches == sorted(batches)
    assert context in contexts
    assert batch in batches
    assert len(cells) == len(batches)
    for b, row in zip(batches, cells, strict=True):
        assert len(row) == len(contexts)
        assert all(_is_int(v) for v in row)
        first_row = cells[0]
        # each row is its batch size times the batch-1 row (smallest batch is 1)
        assert batches[0] == 1
        assert row == [b * v for v in first_row]
        assert row == sorted(row)  # more context never needs fewer bytes
    assert cells[batches.index(batch)][contexts.index(context)] == doc["kv_bytes_total"]


def test_kv_table_matches_formula_for_llama(cli) -> None:
    doc = cli("kv", LLAMA_ALIAS, "--context", "8192", "--json").json()
    t = doc["table"]
    for b, row in zip(t["batches"], t["bytes"], strict=True):
        for c, v in zip(t["contexts"], row, strict=True):
            assert v == b * c * LLAMA_KV_PER_TOKEN  # worked example: 2 x B x S x L x H_kv x D_h x P


def test_context_beyond_model_limit_warns(cli) -> None:
    doc = cli("kv", LLAMA_ALIAS, "--context", "262144", "--json").json()
    assert doc["kv_bytes_per_sequence"] == 262144 * LLAMA_KV_PER_TOKEN
    assert any("max_position_embeddings" in w for w in doc["warnings"])


# --- fit --json schema and internal consistency ------------------------------------------------

MEMORY_PARTS = ("weights_bytes", "kv_cache_bytes", "activation_bytes", "overhead_bytes")


def check_fit_doc(doc: dict[str, Any]) -> None:
    for key in ("params", "memory", "max_batch", "max_context", "fits", "warnings", "assumptions", "verdict"):
        assert key in doc, key
    assert _is_int(doc["params"])
    assert doc["params"] > 0
    mem = doc["memory"]
    for key in ("total_bytes", *MEMORY_PARTS):
        assert _is_int(mem[key]), (key, mem[key])
    assert mem["total_bytes"] > 0
    for key in ("weights_bytes", "activation_bytes", "overhead_bytes"):
        assert mem[key] >= 0
    # the parts add up to the GPU; where weights, activations and overhead exceed it, the KV cache is 0 and the
    # excess is short_bytes
    assert mem["kv_cache_bytes"] >= 0 and doc["short_bytes"] >= 0 and not (mem["kv_cache_bytes"] and doc["short_bytes"])
    assert sum(mem[k] for k in MEMORY_PARTS) - doc["short_bytes"] == mem["total_bytes"]
    assert _is_int(doc["kv_per_sequence_bytes"])
    assert _is_int(doc["kv_needed_bytes"])
    assert doc["kv_needed_bytes"] == doc["batch"] * doc["kv_per_sequence_bytes"]
    assert isinstance(doc["fits"], bool)
    assert isinstance(doc["verdict"], str)
    assert doc["verdict"]
    assert doc["verdict"].startswith("fits" if doc["fits"] else "does not fit")
    if "verdict_code" in doc:  # machine-readable outcome next to the sentence
        assert (doc["verdict_code"] in ("fits", "no_cache")) == doc["fits"]
    assert isinstance(doc["warnings"], list)
    assert all(isinstance(w, str) for w in doc["warnings"])
    assert isinstance(doc["assumptions"], list)
    assert doc["assumptions"]
    for a in doc["assumptions"]:
        assert set(a) >= {"name", "value", "source"}
        assert all(isinstance(a[k], str) and a[k] for k in ("name", "value"))
    assert _is_int(doc["max_context"])
    assert doc["max_context"] >= 0

    per_seq = doc["kv_per_sequence_bytes"]
    if not doc["short_bytes"]:
        assert _is_int(doc["max_batch"])
        mb = doc["max_batch"]
        # KV for max_batch sequences fits beside their own activations (test_fit checks the round trip)
        avail = mem["total_bytes"] - mem["weights_bytes"] - mem["overhead_bytes"]
        assert mb * per_seq <= avail < (mb + 1) * per_seq + avail
        assert doc["fits"] == (doc["batch"] <= mb)
    else:  # weights, activations and overhead alone exceed the GPU
        assert doc["max_batch"] == 0
        assert doc["max_context"] == 0
        assert doc["fits"] is False


FIT_CASES = {
    "8b-h100-8k": [LLAMA_ALIAS, "--gpu", "H100", "--context", "8192"],
    "8b-h100-default-context": [LLAMA_ALIAS, "--gpu", "H100"],
    "8b-h100-batch-too-big": [LLAMA_ALIAS, "--gpu", "H100", "--context", "8192", "--batch", "200"],
    "8b-a100-fp8": [LLAMA_ALIAS, "--gpu", "a100-80gb", "--context", "4096", "--kv-dtype", "fp8", "--weights-dtype", "fp8"],
    "8b-48gib-tp2": [LLAMA_ALIAS, "--gpu-memory", "48GiB", "--tp", "2", "--context", "32768", "--batch", "4"],
    "70b-4090-does-not-fit": ["llama-3.1-70b", "--gpu", "rtx4090", "--context", "8192"],
    "70b-h100-tp4-pp2": ["llama-3.1-70b", "--gpu", "H100", "--num-gpus", "8", "--pp", "2", "--context", "8192"],
    "gemma2-l4": ["gemma-2-9b", "--gpu", "L4", "--context", "8192"],
    "deepseek-lite-mi300x": ["deepseek-v2-lite", "--gpu", "MI300X", "--context", "16384", "--batch", "8"],
    "jamba-h200": ["jamba-v0.1", "--gpu", "H200", "--context", "65536"],
    "overrides": [LLAMA_ALIAS, "--gpu", "H100", "--context", "8192", "--overhead", "4GiB", "--activation", "0",
                  "--weights-memory", "14.99GiB"],
}


@pytest.mark.parametrize("case", list(FIT_CASES), ids=list(FIT_CASES))
def test_fit_json_schema_and_consistency(cli, case: str) -> None:
    doc = cli("fit", "--engine", "textbook", *FIT_CASES[case], "--json").json()
    check_fit_doc(doc)


def test_fit_llama_h100_numbers(cli) -> None:
    doc = cli("fit", "--engine", "textbook", LLAMA, "--gpu", "H100", "--context", "8192", "--json").json()
    check_fit_doc(doc)
    assert doc["kv_per_sequence_bytes"] == LLAMA_KV_8K  # worked example: "1 GB" per 8192-token request
    assert doc["fits"] is True
    assert doc["max_batch"] >= 1
    kv_doc = cli("kv", LLAMA, "--context", "8192", "--json").json()
    assert doc["params"] == kv_doc["params"]
    # bf16 weights of an ~8.03B-parameter model: 2 bytes each
    assert doc["memory"]["weights_bytes"] == pytest.approx(2 * doc["params"], rel=0.01)


def test_fit_max_context_is_tight(cli) -> None:
    doc = cli("fit", "--engine", "textbook", LLAMA_ALIAS, "--gpu", "L4", "--batch", "4", "--context", "8192", "--json").json()
    check_fit_doc(doc)
    kv, b, mc = doc["memory"]["kv_cache_bytes"], doc["batch"], doc["max_context"]
    assert not doc["max_context_is_model_limit"]
    # full attention: b sequences of s tokens need b x s x 131072 bytes (per GPU, TP 1)
    assert b * mc * LLAMA_KV_PER_TOKEN <= kv < b * (mc + 1) * LLAMA_KV_PER_TOKEN


def test_fit_batch_too_big_does_not_fit(cli) -> None:
    doc = cli("fit", "--engine", "textbook", LLAMA_ALIAS, "--gpu", "H100", "--context", "8192", "--batch", "200", "--json").json()
    assert doc["fits"] is False
    assert doc["max_batch"] < 200
    assert doc["verdict"].startswith("does not fit")


def test_fit_gpu_memory_and_overrides(cli) -> None:
    doc = cli("fit", "--engine", "textbook", LLAMA_ALIAS, "--gpu-memory", "48GiB", "--overhead", "4GiB", "--activation", "2GiB",
              "--weights-memory", "15GiB", "--context", "8192", "--json").json()
    check_fit_doc(doc)
    mem = doc["memory"]
    assert mem["total_bytes"] == 48 * GIB
    assert mem["overhead_bytes"] == 4 * GIB
    assert mem["activation_bytes"] == 2 * GIB
    assert mem["weights_bytes"] == 15 * GIB
    assert mem["kv_cache_bytes"] == (48 - 4 - 2 - 15) * GIB
    # 27 GiB of KV at 1 GiB per 8192-token sequence (worked example: "1 GB")
    assert doc["max_batch"] == 27


def test_fit_tp_splits_kv_and_weights(cli) -> None:
    one = cli("fit", "--engine", "textbook", LLAMA_ALIAS, "--gpu", "H100", "--context", "8192", "--json").json()
    two = cli("fit", "--engine", "textbook", LLAMA_ALIAS, "--gpu", "H100", "--num-gpus", "2", "--context", "8192", "--json").json()
    check_fit_doc(two)
    assert two["tp"] == 2
    assert two["num_gpus"] == 2
    assert two["kv_per_sequence_bytes"] == LLAMA_KV_8K // 2
    assert two["memory"]["weights_bytes"] < one["memory"]["weights_bytes"]


def test_fit_num_gpus_with_pp(cli) -> None:
    doc = cli("fit", "--engine", "textbook", "llama-3.1-70b", "--gpu", "H100", "--num-gpus", "8", "--pp", "2", "--json").json()
    assert (doc["tp"], doc["pp"], doc["num_gpus"]) == (4, 2, 8)


def test_fit_fp8_kv_halves_per_sequence(cli) -> None:
    doc = cli("fit", "--engine", "textbook", LLAMA_ALIAS, "--gpu", "H100", "--context", "8192", "--kv-dtype", "fp8", "--json").json()
    assert doc["kv_per_sequence_bytes"] == LLAMA_KV_8K // 2


def test_fit_fp8_weights_are_smaller(cli) -> None:
    bf16 = cli("fit", "--engine", "textbook", LLAMA_ALIAS, "--gpu", "H100", "--context", "8192", "--json").json()
    fp8 = cli("fit", "--engine", "textbook", LLAMA_ALIAS, "--gpu", "H100", "--context", "8192", "--weights-dtype", "fp8", "--json").json()
    check_fit_doc(fp8)
    assert fp8["memory"]["weights_bytes"] < bf16["memory"]["weights_bytes"]
    assert fp8["max_batch"] > bf16["max_batch"]


# --- text output and units -----------------------------------------------------------------------

_GB_FIGURE = re.compile(r"\d GB\b")
_GIB_FIGURE = re.compile(r"\d GiB\b")


def test_kv_text_default_units_gib(cli) -> None:
    r = cli("kv", LLAMA_ALIAS, "--context", "8192")
    assert r.code == 0
    assert r.err == ""
    assert "1.00 GiB" in r.out  # worked example: 8192 tokens -> "1 GB" (1 GiB = 1024 MB)
    assert "Total KV cache (GiB)" in r.out
    assert "131,072" in r.out
    assert not _GB_FIGURE.search(r.out)


def test_kv_text_units_gb(cli) -> None:
    r = cli("kv", LLAMA_ALIAS, "--context", "8192", "--units", "GB")
    assert r.code == 0
    assert "1.07 GB" in r.out  # 1,073,741,824 bytes / 1e9
    assert "Total KV cache (GB)" in r.out
    assert "GiB" not in r.out


def test_fit_text_sections(cli) -> None:
    r = cli("fit", "--engine", "textbook", LLAMA_ALIAS, "--gpu", "H100", "--context", "8192")
    assert r.code == 0
    assert r.err == ""
    lines = r.out.splitlines()
    assert "Assumptions:" in lines
    after = lines[lines.index("Assumptions:") + 1:]
    assert after[0].startswith("  - ")
    verdicts = [line for line in lines if line.startswith("Verdict:")]
    assert len(verdicts) == 1
    assert verdicts[0].startswith("Verdict: fits")
    assert _GIB_FIGURE.search(r.out)
    assert not _GB_FIGURE.search(r.out)


def test_fit_text_units_gb(cli) -> None:
    r = cli("fit", "--engine", "textbook", LLAMA_ALIAS, "--gpu", "H100", "--context", "8192", "--units", "GB")
    assert r.code == 0
    assert "Verdict:" in r.out
    assert "Assumptions:" in r.out
    table = r.out.split("Weights by role", 1)[0]
    assert _GB_FIGURE.search(table)
    assert "GiB" not in table
    assert re.search(r"^part\s+GB\s+share$", table, re.MULTILINE)


@pytest.mark.parametrize("units", ["GB", "GiB"])
def test_fit_verdict_follows_units(cli, units: str) -> None:
    r = cli("fit", "--engine", "textbook", LLAMA_ALIAS, "--gpu", "H100", "--context", "8192", "--units", units)
    assert r.code == 0
    verdict = next(line for line in r.out.splitlines() if line.startswith("Verdict:"))
    other = "GiB" if units == "GB" else "GB"
    assert re.search(rf"\d {units}\b", verdict)
    assert not re.search(rf"\d {other}\b", verdict)
    gpu_memory = next(line for line in r.out.splitlines() if line.startswith("  - GPU memory:"))
    assert re.search(rf"^  - GPU memory: [\d.,]+ {units}\b", gpu_memory)


def test_fit_json_verdict_follows_units(cli) -> None:
    gb = cli("fit", "--engine", "textbook", LLAMA_ALIAS, "--gpu", "H100", "--context", "8192", "--units", "GB", "--json").json()
    gib = cli("fit", "--engine", "textbook", LLAMA_ALIAS, "--gpu", "H100", "--context", "8192", "--json").json()
    assert "1.07 GB" in gb["verdict"]  # 1,073,741,824 bytes / 1e9
    assert "1.00 GiB" in gib["verdict"]
    # byte figures do not depend on the display unit
    assert gb["memory"] == gib["memory"]


def test_fit_text_does_not_fit(cli) -> None:
    r = cli("fit", "--engine", "textbook", "llama-3.1-70b", "--gpu", "rtx4090", "--context", "8192")
    assert r.code == 0  # a plan that does not fit is an answer, not an input error
    assert "Verdict: does not fit" in r.out


# --- catalogs, version, help ---------------------------------------------------------------------


def test_models_json(cli) -> None:
    doc = cli("models", "--json").json()
    assert isinstance(doc, list)
    assert len(doc) >= 50
    ids = [e["id"] for e in doc]
    assert len(set(ids)) == len(ids)
    assert LLAMA in ids
    for e in doc:
        assert _is_int(e["params"]), e
        assert e["params"] > 0, e
    llama = next(e for e in doc if e["id"] == LLAMA)
    assert LLAMA_ALIAS in llama["aliases"]
    # official figure 8.03B (catalog's official_params)
    assert llama["params"] == pytest.approx(8.03e9, rel=0.005)


def test_gpus_json(cli) -> None:
    doc = cli("gpus", "--json").json()
    assert isinstance(doc, list)
    assert len(doc) >= 30
    names = [g["name"] for g in doc]
    assert len(set(names)) == len(names)
    for g in doc:
        assert _is_int(g["memory_bytes"]), g
        assert g["memory_bytes"] > 0, g


@pytest.mark.parametrize("command", ["models", "gpus"])
def test_catalog_text(cli, command: str) -> None:
    r = cli(command)
    assert r.code == 0
    assert r.err == ""
    assert len(r.out.splitlines()) > 30


def test_every_catalog_model_gives_kv_numbers(cli) -> None:
    for entry in cli("models", "--json").json():
        doc = cli("kv", entry["id"], "--context", "4096", "--json").json()
        assert doc["kv_bytes_per_sequence"] > 0, entry["id"]
        assert sum(r["bytes_per_sequence"] for r in doc["layers"]) == doc["kv_bytes_per_sequence"]


def test_version(cli) -> None:
    r = cli("--version")
    assert r.code == 0
    assert r.out.strip() == f"kvbudget {kvbudget.__version__}"
    assert kvbudget.__version__ == "0.1.0"


@pytest.mark.parametrize("argv", [["--help"], ["fit", "--engine", "textbook", "--help"], ["kv", "--help"], ["models", "--help"], ["gpus", "--help"]])
def test_help_exits_0(cli, argv: list[str]) -> None:
    r = cli(*argv)
    assert r.code == 0
    assert "usage:" in r.out
    assert r.err == ""


def test_fit_help_lists_options(cli) -> None:
    out = cli("fit", "--engine", "textbook", "--help").out
    for opt in ("--gpu", "--gpu-memory", "--num-gpus", "--tp", "--pp", "--kv-dtype", "--weights-dtype", "--context",
                "--batch", "--json", "--units"):
        assert opt in out


@pytest.mark.parametrize("zero", ["0", "0GiB", "0GB"])
def test_zero_overhead_and_activation_accepted(cli, zero: str) -> None:
    doc = cli("fit", "--engine", "textbook", LLAMA_ALIAS, "--gpu-memory", "48GiB", "--context", "8192", "--overhead", zero, "--activation", zero,
              "--json").json()
    assert doc["memory"]["overhead_bytes"] == 0
    assert doc["memory"]["activation_bytes"] == 0


@pytest.mark.parametrize("zero", ["0MiB", "0 GiB", "0gib", "0.0GiB"])
def test_zero_overhead_any_spelling(cli, zero: str) -> None:
    doc = cli("fit", "--engine", "textbook", LLAMA_ALIAS, "--gpu-memory", "48GiB", "--context", "8192", "--overhead", zero, "--json").json()
    assert doc["memory"]["overhead_bytes"] == 0


def test_explain_reads_a_quoted_command_with_kvbudgets_options_after_it(cli) -> None:
    """``kvbudget explain "vllm serve M ..." --gpu L4``: the options after the quoted command are kvbudget's, and the
    answer is the one the ``--`` form gives; a quoted option value (``--gpu-memory "48 GiB"``) is not a command."""
    after = cli("explain", "vllm serve Qwen/Qwen3-8B --max-model-len 8192", "--gpu", "L4", "--json")
    dashed = cli("explain", "--gpu", "L4", "--json", "--", "vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "8192")
    assert after.code == dashed.code == 0, after.err
    assert json.loads(after.out) == json.loads(dashed.out)
    assert json.loads(after.out)["max_model_len"] == 8192
    spaced = cli("explain", "--gpu-memory", "48 GiB", "vllm serve Qwen/Qwen3-8B")
    assert spaced.code == 0, spaced.err
    assert "48.00 GiB" in spaced.out
    missing = cli("explain", "vllm serve Qwen/Qwen3-8B")
    assert missing.code == 2 and "--gpu" in missing.err


def test_misspelt_flag_names_the_nearest_and_the_subcommand_help(cli) -> None:
    """argparse alone says only 'unrecognized arguments' and points at the top-level help; kvbudget names the
    nearest flag of the subcommand the user ran and that subcommand's --help."""
    line = assert_one_line_error(cli("fit", "llama-3.1-8b", "--gpu", "H100", "--contxt", "8192"))
    assert "unrecognized arguments: --contxt 8192" in line
    assert "did you mean --context?" in line
    assert "`kvbudget fit --help`" in line
    bare = assert_one_line_error(cli("kv", "llama-3.1-8b", "--zzzz", "3"))
    assert "did you mean" not in bare and "`kvbudget kv --help`" in bare
