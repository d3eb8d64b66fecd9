"""``make fuzz``: hypothesis on every reader of user input, for KVBUDGET_FUZZ_EXAMPLES examples each
(200 unless set). Each reader either returns or raises ``InputError``: never another exception, a
hang or a crash. A crash found here becomes a case of the hostile corpus (``tests/hostile/gen_*.py``).

Inputs are built from the real thing and then broken: catalog configs with fields replaced, GGUF and
safetensors headers with random counts and types, lines of the recorded engine logs with numbers
changed, launch commands from each engine's flags with odd values, prices and option files."""

from __future__ import annotations

import contextlib
import json
import os
import struct
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvbudget.units import InputError
from test_hostile_configs import _mutate  # catalog configs with fields dropped or replaced (tests/ is on the path)


def textbook_fit(*args: Any, **kwargs: Any) -> Any:
    """kvbudget.fit with the textbook partition (weights + KV + activations + overhead)."""
    import kvbudget

    return kvbudget.fit(*args, engine="textbook", **kwargs)

pytestmark = pytest.mark.fuzz
FUZZ = settings(max_examples=int(os.environ.get("KVBUDGET_FUZZ_EXAMPLES", 200)), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
DATA = Path(__file__).parent.parent / "data"


def _returns_or_input_error(call: Callable[[], object]) -> None:
    with contextlib.suppress(InputError):
        call()


def _in_file(data: bytes | str, name: str, call: Callable[[str], object]) -> None:
    with tempfile.TemporaryDirectory() as root:
        path = os.path.join(root, name)
        with open(path, "wb") as f:
            f.write(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
        _returns_or_input_error(lambda: call(path))


weird = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8), st.sampled_from(["false", "true", "auto", "", "NaN", "1e30"]),
    st.lists(st.one_of(st.integers(-3, 300), st.text(max_size=5), st.none()), max_size=6),
    st.dictionaries(st.text(max_size=6), st.integers(-3, 5), max_size=3),
)


# --- config.json, through the file reader and every step of kv ---------------------------------------

def _catalog_configs() -> dict[str, dict[str, Any]]:
    from kvbudget.model import catalog

    return {e.id: e.config for e in catalog.entries()}


CONFIGS = _catalog_configs()


@FUZZ
@given(st.sampled_from(sorted(CONFIGS)), st.data())
def test_config_json(model: str, data: st.DataObject) -> None:
    import kvbudget
    from kvbudget.model.hf_config import spec_from_config
    from kvbudget.model.resolve import read_config_file
    config = _mutate(CONFIGS[model], data)
    if data.draw(st.booleans()):  # and the keys a config may leave out
        key = data.draw(st.sampled_from(["layer_types", "sliding_window", "head_dim", "rope_scaling", "text_config"]))
        config[key] = data.draw(weird)
    text = json.dumps(config)
    if data.draw(st.booleans()):  # and break the text itself now and then
        cut = data.draw(st.integers(0, len(text)))
        text = text[:cut] + data.draw(st.sampled_from(["", "NaN", "]", "{", "\x00", "9" * 5000, '"'])) + text[cut:]

    def read(path: str) -> object:
        spec = spec_from_config(read_config_file(path), name=path)
        return kvbudget.kv(spec, context=4096, batch=2), textbook_fit(spec, gpu="H100", context=4096,
                                                                      weights_dtype="bf16")

    _in_file(text, "config.json", read)


# --- GGUF headers ----------------------------------------------------------------------------------

def _gguf_string(s: bytes) -> bytes:
    return struct.pack("<Q", len(s)) + s


@st.composite
def gguf_bytes(draw: st.DrawFn) -> bytes:
    """A GGUF header: magic, version, counts, then key/values of random types and tensor infos."""
    version = draw(st.sampled_from([1, 2, 3, 3, 3, 0, 2**32 - 1]))
    n_kv = draw(st.integers(0, 6))
    n_tensors = draw(st.integers(0, 4))
    out = b"GGUF" + struct.pack("<I", version)
    out += struct.pack("<QQ", draw(st.sampled_from([n_tensors, 2**63, 2**64 - 1])), draw(st.sampled_from([n_kv, 2**40])))
    keys = ["general.architecture", "llama.block_count", "llama.attention.head_count", "llama.embedding_length",
            "llama.attention.head_count_kv", "llama.context_length", "tokenizer.ggml.tokens", "llama.rope.dimension_count"]
    for _ in range(n_kv):
        out += _gguf_string(draw(st.sampled_from(keys)).encode())
        kind = draw(st.integers(0, 13))
        out += struct.pack("<I", kind)
        if kind == 8:  # string
            out += _gguf_string(draw(st.sampled_from([b"llama", b"qwen2", b"", b"\xff\xfe"])))
        elif kind == 9:  # array: type, count, items
            out += struct.pack("<IQ", draw(st.integers(0, 13)), draw(st.sampled_from([0, 3, 2**40, 2**64 - 1])))
            out += draw(st.binary(max_size=64))
        else:
            out += draw(st.binary(min_size=0, max_size=8))
    for i in range(n_tensors):
        out += _gguf_string(f"blk.{i}.attn_q.weight".encode())
        dims = draw(st.integers(0, 5))
        out += struct.pack("<I", dims)
        for _ in range(dims):
            out += struct.pack("<Q", draw(st.sampled_from([0, 1, 4096, 2**63, 2**64 - 1])))
        out += struct.pack("<IQ", draw(st.integers(0, 40)), draw(st.sampled_from([0, 32, 2**63])))
    return out + draw(st.binary(max_size=64))


@FUZZ
@given(st.one_of(gguf_bytes(), st.binary(max_size=200).map(lambda b: b"GGUF" + b)))
def test_gguf_header(data: bytes) -> None:
    from kvbudget.model.gguf_spec import spec_from_gguf

    _in_file(data, "model.gguf", spec_from_gguf)


# --- safetensors headers ----------------------------------------------------------------------------

tensor_entry = st.fixed_dictionaries({
    "dtype": st.one_of(st.sampled_from(["BF16", "F16", "F32", "I8", "U8", "F8_E4M3", "I32", "BOOL", "X9"]), weird),
    "shape": st.one_of(st.lists(st.integers(-2, 2**40), max_size=4), weird),
    "data_offsets": st.one_of(st.lists(st.integers(-5, 2**64), min_size=2, max_size=2), weird),
})
tensor_names = st.sampled_from(["model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
                                "model.layers.0.self_attn.k_proj.qweight", "lm_head.weight", "model.layers.x.mlp.scales",
                                "__metadata__", ""])


@FUZZ
@given(st.dictionaries(tensor_names, st.one_of(tensor_entry, weird), max_size=6), st.integers(-1, 2**40),
       st.booleans())
def test_safetensors_header(header: dict[str, Any], data_size: int, lie: bool) -> None:
    from kvbudget.model.safetensors_reader import parse_header, read_safetensors

    raw = json.dumps(header).encode()
    _returns_or_input_error(lambda: parse_header(raw, "fuzz", data_size))
    length = len(raw) if not lie else data_size
    _in_file(struct.pack("<Q", max(0, min(length, 2**64 - 1))) + raw, "model.safetensors", read_safetensors)


# --- engine logs: the recorded ones, lines shuffled and numbers changed --------------------------------

def _log_lines(folder: str) -> list[str]:
    lines: list[str] = []
    for path in sorted((DATA / folder).glob("*.log"))[:8]:
        lines += path.read_text(encoding="utf-8", errors="replace").splitlines()[:400]
    return lines or ["INFO"]


LOGS = {name: _log_lines(f"{name}_logs") for name in ("vllm", "sglang", "trtllm", "llamacpp")}
numbers = st.sampled_from(["0", "-1", "nan", "inf", "1e30", "9" * 400, "-0.0", "", "1,024", "0x10"])


@st.composite
def log_text(draw: st.DrawFn, engine: str) -> str:
    import re

    lines = draw(st.lists(st.sampled_from(LOGS[engine]), min_size=1, max_size=40))
    out = []
    for line in lines:
        if draw(st.booleans()):
            line = re.sub(r"\d+(\.\d+)?", lambda _m: draw(numbers), line, count=draw(st.integers(1, 3)))
        out.append(line)
    return "\n".join(out) + draw(st.sampled_from(["", "\n", "\n" * 500, "\x00", " " * 1000]))


@FUZZ
@given(log_text("vllm"))
def test_vllm_log(text: str) -> None:
    from kvbudget.engines.vllm.log import parse_vllm_log

    _returns_or_input_error(lambda: parse_vllm_log(text))


@FUZZ
@given(log_text("llamacpp"))
def test_llamacpp_log(text: str) -> None:
    from kvbudget.engines.llamacpp.check import check_caches
    from kvbudget.engines.llamacpp.log import parse_llamacpp_log

    _returns_or_input_error(lambda: check_caches(parse_llamacpp_log(text)))


@FUZZ
@given(st.one_of(log_text("sglang"), log_text("trtllm")))
def test_sglang_and_trtllm_logs(text: str) -> None:
    from kvbudget.engines.logscan import check_other_log

    _returns_or_input_error(lambda: check_other_log(text))


@FUZZ
@given(st.one_of(log_text("sglang"), log_text("trtllm")))
def test_sglang_and_trtllm_runs(text: str) -> None:
    """The settings, release and figures check reads from the same logs (engines/sglang/log.py, trtllm/log.py)."""
    from kvbudget.engines.logscan import open_log
    from kvbudget.engines.sglang.log import read_run as sglang_run
    from kvbudget.engines.trtllm.log import read_run as trtllm_run

    _returns_or_input_error(lambda: sglang_run(open_log(text, "SGLang")))
    _returns_or_input_error(lambda: trtllm_run(open_log(text, "TensorRT-LLM")))


# --- launch commands ------------------------------------------------------------------------------

values = st.one_of(numbers, st.sampled_from(["auto", "fp8", "true", "false", "'", '"', "--", "=", "-", "a b"]),
                   st.text(max_size=6))


def _command(program: list[str], flags: list[str]) -> st.SearchStrategy[list[str]]:
    pair = st.tuples(st.sampled_from(flags), values).map(lambda fv: [fv[0], fv[1]] if "=" not in fv[1] else [f"{fv[0]}={fv[1]}"])
    return st.lists(pair, max_size=6).map(lambda pairs: program + [t for p in pairs for t in p])


VLLM_FLAGS = ["--tensor-parallel-size", "-tp", "--pipeline-parallel-size", "--max-model-len", "--gpu-memory-utilization",
              "--block-size", "--kv-cache-dtype", "--max-num-seqs", "--quantization", "--cpu-offload-gb",
              "--data-parallel-size", "--max-num-batched-tokens", "--tensor_parallel_size", "--enforce-eager", "--config"]
SGLANG_FLAGS = ["--tp", "--tp-size", "--pp-size", "--context-length", "--mem-fraction-static", "--kv-cache-dtype",
                "--max-running-requests", "--chunked-prefill-size", "--page-size", "--dp"]
TRTLLM_FLAGS = ["--tp_size", "--pp_size", "--max_seq_len", "--max_batch_size", "--kv_cache_free_gpu_memory_fraction",
                "--max_num_tokens", "--backend", "--extra_llm_api_options"]
LLAMACPP_FLAGS = ["-c", "--ctx-size", "-ngl", "--n-gpu-layers", "-ub", "-b", "-np", "--parallel", "-ts", "--tensor-split",
                  "-ctk", "-ctv", "--cache-type-k", "-fa", "--split-mode", "-m"]


@FUZZ
@given(st.one_of(_command(["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"], VLLM_FLAGS),
                 st.text(max_size=80).map(lambda t: "vllm serve m " + t)))
def test_vllm_command(command: list[str] | str) -> None:
    from kvbudget.engines.vllm.command import parse_vllm_command

    _returns_or_input_error(lambda: parse_vllm_command(command))


@FUZZ
@given(st.one_of(_command(["python", "-m", "sglang.launch_server", "--model-path", "m"], SGLANG_FLAGS),
                 _command(["trtllm-serve", "m"], TRTLLM_FLAGS), st.text(max_size=80).map(lambda t: "trtllm-serve m " + t)))
def test_sglang_and_trtllm_commands(command: list[str] | str) -> None:
    from kvbudget.engines.cmdscan import parse_other_command

    _returns_or_input_error(lambda: parse_other_command(command))


@FUZZ
@given(st.one_of(_command(["llama-server", "-m", "model.gguf"], LLAMACPP_FLAGS),
                 st.text(max_size=80).map(lambda t: "llama-server -m model.gguf " + t)))
def test_llamacpp_command(command: list[str] | str) -> None:
    from kvbudget.engines.llamacpp.command import parse_llamacpp_command

    _returns_or_input_error(lambda: parse_llamacpp_command(command))


# --- files named in commands and flags: prices, vLLM --config YAML, TensorRT-LLM options YAML ---------

price_line = st.tuples(st.sampled_from(["H100", "A100-80GB", "L4", "", "H9000", "gpu"]), values).map(lambda p: f"{p[0]},{p[1]}")


@FUZZ
@given(st.one_of(st.lists(price_line, max_size=6).map("\n".join),
                 st.dictionaries(st.sampled_from(["H100", "L4", "X", ""]), weird, max_size=4).map(json.dumps),
                 st.binary(max_size=100)))
def test_prices_file(data: str | bytes) -> None:
    from kvbudget.plan.prices import read_prices

    _in_file(data, "prices.txt", read_prices)


yaml_values = st.one_of(values, st.sampled_from(["[1, 2]", "{a: 1}", "&a [*a]", "*x", "!!python/object:os.system", "~",
                                                 ".nan", ".inf", "0o17", "1_000"]))
yaml_text = st.lists(st.tuples(st.sampled_from(["tensor-parallel-size", "max-model-len", "gpu-memory-utilization",
                                                "kv_cache_config", "max_batch_size", "free_gpu_memory_fraction",
                                                "model", "- item", "  nested"]), yaml_values),
                     max_size=6).map(lambda kv: "\n".join(f"{k}: {v}" for k, v in kv))


@FUZZ
@given(st.one_of(yaml_text, st.binary(max_size=100)))
def test_vllm_config_yaml(data: str | bytes) -> None:
    from kvbudget.engines.vllm.command import parse_vllm_command

    _in_file(data, "options.yaml", lambda path: parse_vllm_command(["vllm", "serve", "m", "--config", path]))


@FUZZ
@given(st.one_of(yaml_text, st.binary(max_size=100)))
def test_trtllm_options_yaml(data: str | bytes) -> None:
    from kvbudget.engines.cmdscan import parse_other_command

    _in_file(data, "options.yaml",
             lambda path: parse_other_command(["trtllm-serve", "m", "--extra_llm_api_options", path]))
