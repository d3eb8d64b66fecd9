"""vLLM's compilation and CUDA-graph flags (src/kvbudget/engines/vllm/compile_flags.py): each flag per release,
accepted or refused as that release's parser and config refuse it, the graphs it resolves to (config/vllm.py
_set_cudagraph_sizes, OPTIMIZATION_LEVEL_00-03, read in 0.21.0-0.33.0), and the estimate it moves (cudagraph.py's
formula recomputed by hand with the new sizes)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import kvbudget
from kvbudget.engines.vllm import VllmSettings, plan
from kvbudget.engines.vllm.calibration import forward_bytes
from kvbudget.engines.vllm.command import parse_vllm_command
from kvbudget.engines.vllm.compile_flags import graph_plan, graph_sizes
from kvbudget.engines.vllm.cudagraph import GRAPH_CAPTURE_BYTES
from kvbudget.engines.vllm.settings import CompileFlags
from kvbudget.units import InputError

DATA = Path(__file__).parent / "data" / "vllm_logs"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def _read(command: str, version: str) -> tuple[CompileFlags, tuple[str, ...]]:
    cmd = parse_vllm_command(command, VllmSettings(version=version))
    return cmd.settings.compile, cmd.warnings


@pytest.mark.parametrize(("version", "words", "expected"), [
    # 0.12 on: -O is the optimization level (utils/argparse_utils.py FlexibleArgumentParser.parse_args)
    ("0.33.0", "-O0", CompileFlags(optimization_level=0)),
    ("0.33.0", "-O 3", CompileFlags(optimization_level=3)),
    ("0.33.0", "-O=1", CompileFlags(optimization_level=1)),
    ("0.12.0", "--optimization-level 2", CompileFlags(optimization_level=2)),
    ("0.33.0", "--cudagraph-capture-sizes 1 2 4 8", CompileFlags(flag_sizes=(1, 2, 4, 8))),
    ("0.33.0", "--max-cudagraph-capture-size 64", CompileFlags(flag_max=64)),
    ("0.33.0", "--compilation-config '{\"cudagraph_mode\": \"full_decode_only\"}'",
     CompileFlags(cudagraph_mode="FULL_DECODE_ONLY")),
    ("0.33.0", "-cc '{\"mode\": \"none\", \"cudagraph_capture_sizes\": [4, 1], \"max_cudagraph_capture_size\": 4}'",
     CompileFlags(compile_mode=0, config_sizes=(4, 1), config_max=4)),
    ("0.33.0", "-cc.cudagraph_mode=PIECEWISE --compilation-config.mode 3", CompileFlags(compile_mode=3,
                                                                                         cudagraph_mode="PIECEWISE")),
    ("0.17.0", "-cc '{\"level\": 3}'", CompileFlags(compile_mode=3)),  # level: a deprecated alias of mode to 0.17
    ("0.12.0", "-O.level=3", CompileFlags(compile_mode=3)),  # 0.12 still rewrites -O.x to -cc.x (deprecated)
    # 0.9-0.11: -O is --compilation-config; -O3 is -O.level=3 (utils/__init__.py)
    ("0.11.0", "-O3", CompileFlags(compile_mode=3)),
    ("0.10.1", "-O.cudagraph_mode=FULL", CompileFlags(cudagraph_mode="FULL")),
    ("0.10.2", "-O '{\"full_cuda_graph\": true, \"cudagraph_capture_sizes\": [1, 2]}'",
     CompileFlags(full_cuda_graph=True, config_sizes=(1, 2))),
    # 0.6.5-0.8: -O N is the level (CompilationConfig.from_cli), other text a Python literal
    ("0.8.5", "-O3", CompileFlags(compile_mode=3)),
    ("0.8.5", "--compilation-config \"{'level': 0, 'use_cudagraph': False}\"",
     CompileFlags(compile_mode=0, use_cudagraph=False)),
    ("0.6.5", "-O 0", CompileFlags(compile_mode=0)),
])
def test_read_per_release(version: str, words: str, expected: CompileFlags) -> None:
    flags, warnings = _read(f"vllm serve {LLAMA} {words}", version)
    assert flags == expected
    assert not [w for w in warnings if "extra word" in w]  # was: "ignored extra word '2'" for the sizes


@pytest.mark.parametrize(("version", "words", "said"), [
    ("0.11.0", "--cudagraph-capture-sizes 1 2", "unrecognized arguments: --cudagraph-capture-sizes"),
    ("0.11.0", "--optimization-level 3", "unrecognized arguments: --optimization-level"),
    ("0.11.0", "--max-cudagraph-capture-size 64", "0.12.0 added it"),
    ("0.11.0", "-cc '{}'", "unrecognized arguments: -cc"),
    ("0.6.4", "-O3", "0.6.5 added it"),
    ("0.6.4", "--compilation-config 3", "unrecognized arguments: --compilation-config"),
    ("0.8.5", "--compilation-config.level 3", "dotted keys came with 0.9"),
    ("0.33.0", "-O5", "not an optimization level"),
    ("0.33.0", "-O '{\"level\": 3}'", "-cc"),  # 0.12 on, -O takes a level only
    ("0.33.0", "-O.level=3", "not an optimization level"),  # 0.13 on: -O.x is --optimization-level .x
    ("0.33.0", "-cc '{\"cudagraph_mode\": \"FUL\"}'", "not a CUDAGraphMode"),
    ("0.33.0", "-cc '{\"mode\": \"FAST\"}'", "VLLM_COMPILE"),
    ("0.33.0", "-cc '{\"bogus\": 1}'", "has no key 'bogus'"),  # extra="forbid" (0.13 on)
    ("0.18.0", "-cc '{\"level\": 3}'", "has no key 'level'"),  # level removed after 0.17
    ("0.33.0", "-cc '{cudagraph_mode: FULL}'", "not a JSON object"),
    ("0.33.0", "--cudagraph-capture-sizes 1 -2", "a capture size of -2"),
    ("0.33.0", "--cudagraph-capture-sizes 1 two", "invalid int value"),
    ("0.33.0", "--cudagraph-capture-sizes", "expected at least one argument"),
    ("0.33.0", "-cc '{\"cudagraph_capture_sizes\": [0, 8]}'", "a capture size of 0"),
    ("0.33.0", "--max-cudagraph-capture-size 6.5", "invalid int value"),
    ("0.33.0", "--cudagraph-capture-sizes 8 -cc '{\"cudagraph_capture_sizes\": [8]}'", "mutually exclusive"),
    ("0.33.0", "--max-cudagraph-capture-size 8 -cc.max_cudagraph_capture_size=8", "mutually exclusive"),
])
def test_refused_per_release(version: str, words: str, said: str) -> None:
    with pytest.raises(InputError, match=re.escape(said)):
        _read(f"vllm serve {LLAMA} {words}", version)


def test_keys_older_releases_pass_over() -> None:
    # up to 0.12 CompilationConfig is a plain (pydantic) dataclass: an unknown key is dropped, not refused
    flags, warnings = _read(f"vllm serve {LLAMA} -O '{{\"cudagraph_mode\": \"FULL\"}}'", "0.10.0")  # 0.10.1 added it
    assert flags == CompileFlags() and any("passes over" in w and "cudagraph_mode" in w for w in warnings)


def test_config_file(tmp_path: Path) -> None:
    path = tmp_path / "serve.yaml"
    path.write_text("compilation_config:\n  cudagraph_mode: PIECEWISE\n  pass_config:\n    enable_sp: true\n"
                    "cudagraph_capture_sizes: [1, 2, 4]\n", encoding="utf-8")
    flags, _ = _read(f"vllm serve {LLAMA} --config {path}", "0.33.0")
    assert flags == CompileFlags(cudagraph_mode="PIECEWISE", flag_sizes=(1, 2, 4), sequence_parallel=True)


def _plan_of(flags: CompileFlags, version: str = "0.33.0", mns: int = 1024, tokens: int = 8192,
             eager: bool = False, blackwell: bool = False) -> tuple[str, tuple[int, ...]]:
    g = graph_plan(flags, version, enforce_eager=eager, max_num_seqs=mns, max_num_tokens=tokens, blackwell=blackwell)
    return g.mode, g.sizes


DEFAULT = (1, 2, 4, *range(8, 256, 8), *range(256, 513, 16))  # 51 sizes up to min(2 x 1024, 512)


def test_modes_per_release() -> None:
    assert len(DEFAULT) == 51
    assert _plan_of(CompileFlags()) == ("FULL_AND_PIECEWISE", DEFAULT)
    assert _plan_of(CompileFlags(optimization_level=0)) == ("NONE", ())  # OPTIMIZATION_LEVEL_00
    assert _plan_of(CompileFlags(optimization_level=1)) == ("PIECEWISE", DEFAULT)
    assert _plan_of(CompileFlags(optimization_level=3)) == ("FULL_AND_PIECEWISE", DEFAULT)
    assert _plan_of(CompileFlags(cudagraph_mode="FULL"), eager=True) == ("NONE", ())  # --enforce-eager wins
    # a PIECEWISE part without VLLM_COMPILE: dropped from 0.30 (without_piecewise), the whole mode NONE before
    no_compile = CompileFlags(compile_mode=0, cudagraph_mode="FULL_AND_PIECEWISE")
    assert _plan_of(no_compile, "0.30.0")[0] == "FULL_DECODE_ONLY" and _plan_of(no_compile, "0.29.0")[0] == "NONE"
    assert _plan_of(CompileFlags(optimization_level=0, cudagraph_mode="FULL"))[0] == "FULL"
    assert _plan_of(CompileFlags(optimization_level=0, cudagraph_mode="PIECEWISE"), "0.33.0")[0] == "NONE"


def test_sizes() -> None:
    assert _plan_of(CompileFlags(flag_max=64))[1] == (1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64)
    assert _plan_of(CompileFlags(flag_max=100))[1][-1] == 96  # "Truncating max_cudagraph_capture_size to 96"
    assert _plan_of(CompileFlags(flag_sizes=(8, 1, 8, 9000)))[1] == (1, 8)  # deduplicated, > max tokens dropped
    assert _plan_of(CompileFlags(flag_sizes=(1, 2), config_max=2))[1] == (1, 2)
    with pytest.raises(InputError, match="should be consistent"):
        _plan_of(CompileFlags(flag_sizes=(1, 2), config_max=4))
    with pytest.raises(InputError, match="greater than or equal to 1"):
        _plan_of(CompileFlags(flag_max=0))
    assert _plan_of(CompileFlags(optimization_level=0, flag_max=0)) == ("NONE", ())  # no graphs: no assertion
    # the default largest size: 1024 on Blackwell from 0.28; max_num_seqs added to the list from 0.31
    assert _plan_of(CompileFlags(), "0.28.0", blackwell=True)[1][-1] == 1024
    assert _plan_of(CompileFlags(), "0.27.0", blackwell=True)[1][-1] == 512
    assert 100 in _plan_of(CompileFlags(), "0.31.0", mns=100)[1] and 100 not in _plan_of(CompileFlags(), "0.30.0", mns=100)[1]
    assert graph_sizes("FULL_DECODE_ONLY", (1, 8, 64, 128), 64) == ((), (1, 8, 64))
    assert graph_sizes("FULL", (1, 8, 64, 128), 64) == ((), (1, 8, 64, 128))


@pytest.mark.parametrize(("name", "mns", "tokens", "eager"), [
    ("v0.22.1_h100_qwen3-30b-a3b-2507_fp8-online_len8192_gmu0.92_mns64", 64, 8192, False),
    ("v0.26.1dev_a100-80gb_qwen3-coder-30b-a3b_len131072_mns16", 16, 8192, False),
    ("v0.31.0_a100-40gb_qwen2.5-coder-1.5b_fp16_len16384", 256, 8192, False),
    ("v0.12.0_rtx-pro-6000_qwen3-30b-a3b-2507_len4096_gmu0.85_eager", 1024, 8192, True),
])
def test_default_sizes_as_logged(name: str, mns: int, tokens: int, eager: bool) -> None:
    """The engine-config line of a real start-up log prints the list vLLM resolved (no compilation flags given)."""
    text = (DATA / f"{name}.log").read_text(encoding="utf-8")
    logged = [int(x) for x in re.findall(r"'cudagraph_capture_sizes': \[([0-9, ]*)\]", text)[-1].replace(",", " ").split()]
    mode = re.findall(r"'cudagraph_mode': <CUDAGraphMode\.([A-Z_]+)", text)[-1]
    version = re.match(r"v([0-9.]+?)(?:dev|_)", name)
    assert version is not None
    assert _plan_of(CompileFlags(), version.group(1).rstrip("."), mns, tokens, eager) == (mode, tuple(logged))


def _graphs(words: str, version: str = "0.33.0") -> kvbudget.engines.vllm.VllmPlan:
    spec, gpu = kvbudget.load_model(LLAMA), kvbudget.find_gpu("H100")
    return plan(spec, gpu, parse_vllm_command(f"vllm serve {LLAMA} {words}", VllmSettings(version=version)).settings)


def test_estimate_moves_by_the_formula() -> None:
    """cudagraph.py: first capture = 2 x the largest size's forward buffers, + (P - 1) + (F - 1) later graphs at
    GRAPH_CAPTURE_BYTES (Llama-3.1-8B on an H100, 0.33.0: max_num_seqs 1024, max_num_batched_tokens 8192)."""
    spec = kvbudget.load_model(LLAMA)
    default = _graphs("")

    def fwd(n: int) -> int:
        return forward_bytes(spec, n, 1, "bfloat16", 0)

    assert default.cudagraph_bytes == 2 * fwd(512) + 50 * GRAPH_CAPTURE_BYTES + 50 * GRAPH_CAPTURE_BYTES
    small = _graphs("--cudagraph-capture-sizes 1 2 4 8")
    assert small.cudagraph is not None and (small.cudagraph.piecewise, small.cudagraph.full) == (4, 4)
    assert small.cudagraph_bytes == 2 * fwd(8) + 3 * GRAPH_CAPTURE_BYTES + 3 * GRAPH_CAPTURE_BYTES
    # the KV cache gets exactly what the graphs no longer take (the rest of the budget is the same)
    assert small.available_kv_cache_bytes - default.available_kv_cache_bytes == \
        default.cudagraph_bytes - small.cudagraph_bytes > 0
    capped = _graphs("--max-cudagraph-capture-size 64")  # 11 sizes, all decode sizes (<= 1024)
    assert capped.cudagraph_bytes == 2 * fwd(64) + 10 * GRAPH_CAPTURE_BYTES * 2
    piecewise = _graphs("-O1")
    assert piecewise.cudagraph is not None and (piecewise.cudagraph.piecewise, piecewise.cudagraph.full) == (51, 0)
    assert piecewise.cudagraph_bytes == 2 * fwd(512) + 50 * GRAPH_CAPTURE_BYTES
    decode = _graphs("-cc '{\"cudagraph_mode\": \"FULL_DECODE_ONLY\"}' --max-num-seqs 64")  # 1..128 sizes, decode <= 64
    assert decode.cudagraph is not None and (decode.cudagraph.piecewise, decode.cudagraph.full) == (0, 11)
    assert decode.cudagraph_bytes == 2 * fwd(64) + 10 * GRAPH_CAPTURE_BYTES
    eager = _graphs("-O0")
    assert eager.cudagraph_bytes == 0
    assert eager.available_kv_cache_bytes == default.available_kv_cache_bytes + default.cudagraph_bytes
    assert eager.activation_bytes == default.activation_bytes  # torch.compile off: the same activation model


def test_before_0_21_no_figure_moves() -> None:
    base = _graphs("", "0.20.0")
    for words in ("-O0", "--cudagraph-capture-sizes 1 2", "-cc '{\"cudagraph_mode\": \"PIECEWISE\"}'"):
        p = _graphs(words, "0.20.0")
        assert p.available_kv_cache_bytes == base.available_kv_cache_bytes and p.cudagraph_bytes == 0
        assert any("after it sizes the KV cache" in n for n in p.notes)
    with pytest.raises(InputError, match="greater than or equal to 1"):  # 0.12-0.20 assert it too
        _graphs("--max-cudagraph-capture-size 0", "0.20.0")


def test_unmodelled_widens_the_band(capsys: pytest.CaptureFixture[str]) -> None:
    from kvbudget.cli import main

    assert main(["explain", "--gpu", "H100", "--num-gpus", "2", "--vllm-version", "0.25.0", "--", "vllm", "serve", LLAMA,
                 "-tp", "2", "-cc", '{"pass_config": {"enable_sp": true}}']) == 0
    out = capsys.readouterr().out
    assert "kvbudget does not model the memory it takes (the sequence-parallel pass" in out
    assert main(["explain", "--gpu", "H100", "--vllm-version", "0.33.0", "--", "vllm", "serve", LLAMA, "-O1"]) == 0
    out = capsys.readouterr().out
    assert "compilation flags read (-O1): vLLM 0.33.0 runs cudagraph_mode PIECEWISE, torch.compile on, 51 capture" in \
        " ".join(out.split())


def test_keys_file_and_its_writer() -> None:
    """compile_keys.json as tools/gen_vllm_compile_keys.py writes it, and the spans the module's docstring cites."""
    import importlib.util
    import json

    tool = Path(__file__).parent.parent / "tools" / "gen_vllm_compile_keys.py"
    spec = importlib.util.spec_from_file_location("gen_vllm_compile_keys", tool)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    source = ("class CompilationConfig:\n    level: int = 0\n    max_capture_size: int = field(default=None, init=False)\n"
              "    enabled: Counter[str] = field(default_factory=Counter,\n        init=False)\n"
              "    private: int = PrivateAttr\n    kinds: ClassVar[int] = 1\n    mode: int | None = None\n")
    assert module.init_fields(source) == ["level", "mode"]
    keys = json.loads((Path(module.OUT)).read_text(encoding="utf-8"))["keys"]
    assert keys["level"] == ["0.8.5", "0.17.0"] and keys["mode"][0] == keys["max_cudagraph_capture_size"][0] == "0.12.0"
    assert keys["cudagraph_mode"][0] == "0.10.1" and keys["full_cuda_graph"] == ["0.9.2", "0.11.0"]
    assert keys["use_cudagraph"] == ["0.8.5", "0.11.0"] and keys["cudagraph_capture_sizes"] == ["0.8.5", "0.33.0"]
