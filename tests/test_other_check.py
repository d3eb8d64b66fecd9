"""`kvbudget check` on SGLang and TensorRT-LLM logs: the run's settings read from the log itself, planned by kvbudget.

(1) Every corpus record (tests/data/sglang_logs, trtllm_logs) with a model, a GPU and settings: `check` given the
record's model and GPU, but the settings read from the LOG, predicts the KV tokens tools/accuracy.py's _pool() path
predicts from the record's JSON settings. Where the log does not show a setting the record knows (from the issue's
text, a dropped server_args line ...), the record is an expected difference with the reason, and, where the engine has a
flag for it, the same flags after -- bring the two together.
(2) Hand-made logs: a server_args line with odd values is refused in one line (exit 2), flags after -- override the
log, a release named in the log picks its rules, the JSON carries both tables.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import kvbudget
from kvbudget.engines import sglang, trtllm
from kvbudget.engines.sglang.check import check_run as sglang_check
from kvbudget.engines.trtllm.check import check_run as trtllm_check
from kvbudget.units import InputError

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
_spec = importlib.util.spec_from_file_location("kvbudget_accuracy_tool_check", ROOT / "tools" / "accuracy.py")
assert _spec is not None and _spec.loader is not None
accuracy = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = accuracy  # dataclasses look their module up
_spec.loader.exec_module(accuracy)


def _records() -> list[Path]:
    out = []
    for sub in ("sglang_logs", "trtllm_logs"):
        for log in sorted((DATA / sub).glob("*.log")):
            kb = json.loads(log.with_suffix(".json").read_text(encoding="utf-8"))["kvbudget"]
            if "model" in kb and "gpu" in kb and "settings" in kb:
                out.append(log)
    return out


# Records whose log does not show every setting the record's JSON plans with: the reason, and the engine's own flags
# (after --) that give the missing ones, where it has flags for them (None: it has none, e.g. a checkpoint's
# quantization, which TensorRT-LLM reads from the checkpoint, or a release kvbudget cannot be told on the command line)
EXPECTED: dict[str, tuple[str, list[str] | None]] = {
    "v0.5-era-feb2026_l40s_llama3.2-3b_mem0.2_hicache": (
        "mem_fraction_static 0.2 is in the run's server_args line, which the stored excerpt dropped",
        ["--mem-fraction-static", "0.2", "--context-length", "35000", "--cuda-graph-max-bs", "32"]),
    "v0.5-era-mar2026_24gb-x2_qwen3-14b_tp2_cpuoffload48": (
        "mem_fraction_static 0.65 is in the dropped server_args line (TP 2 is read from the ranks' tags)",
        ["--mem-fraction-static", "0.65"]),
    "v0.5-era-mar2026_80gb_qwen2.5-3b_no-cuda-graph": (
        "--disable-cuda-graph is in the dropped server_args line (the log only lacks the capture lines)",
        ["--disable-cuda-graph"]),
    "v0.5-era-sep2026_16gb_qwen2.5-7b-awq_no-cuda-graph": (
        "mem_fraction_static 0.82 and --disable-cuda-graph are in the dropped server_args line (awq is read from the "
        "weight loader's quant=)", ["--mem-fraction-static", "0.82", "--disable-cuda-graph"]),
    "v0.5.19_h100_qwen3-32b_mem0.90_ctx8192_gke-memory-saver": (
        "the server arguments (mem_fraction_static 0.90, context length 8192, custom all-reduce off) are in the "
        "deployment manifest, not the two quoted lines",
        ["--mem-fraction-static", "0.90", "--context-length", "8192", "--disable-custom-all-reduce"]),
    "v0.5.18_h100_qwen3-reranker-0.6b_mem0.3_no-radix": (
        "mem_fraction_static 0.3 is in the README's launch command, not the four quoted log lines",
        ["--mem-fraction-static", "0.3"]),
    "v0.5.6dev_b200_qwen2.5-vl-7b_piecewise": (
        "mem_fraction_static 0.7629746875 is in the run's ServerArgs line, which the stored excerpt lacks, and the GPU "
        "(B200) is named only in a CUTLASS message", ["--mem-fraction-static", "0.7629746875"]),
    "v0.13.0dev_a100-80gb-x2_llama3-8b-awq_engine_triton-tp2": (
        "the engine's build settings (TP 2, max_batch_size 8, max_seq_len 8000, max_num_tokens 4096, 64 tokens per "
        "block) and its AWQ weights are in the issue's text, not the excerpt", None),
    "v0.18dev_h100-x2_tinyllama-1.1b_pytorch_dynamo-disagg-tp2": (
        "TP 2 and free_gpu_memory_fraction 0.25 are in the example's configuration file, not the log, and the release "
        "(0.18: whole blocks rounded up) is not printed",
        ["--tp_size", "2", "--kv_cache_free_gpu_memory_fraction", "0.25"]),
    "v0.19.0_rtx5090_llama3.1-8b-fp8_engine_trtllm-serve": (
        "the FP8 engine's build settings (FP8 weights and KV, max_num_tokens 1024, max_seq_len 2048) are in the "
        "issue's text, not the excerpt", None),
    "v0.14-era_rtx-a4000_qwen2.5-coder-0.5b-int8wo_engine_defaults": (
        "the engine's build (trtllm-build defaults: max_batch_size 2048, max_seq_len 32,768, int8 weight-only weights) "
        "is established from the logged runtime and decoder buffers, not read from a build command", None),
    "v0.20.0_h100-sxm_llama3.1-8b-fp8_pytorch_trtllm-bench-kv095-mbs4096-oom": (
        "one block apart: check plans the device total the log prints (79.18 GiB, to 0.01), 1 MiB above the catalog's "
        "79.179 GiB that the record plans, and at fraction 0.95 the pool lands one block higher", None),
    "v0.20.0_h100pcie_llama3.1-8b-fp8_pytorch_trtllm-bench": (
        "the run's checkpoint is nvidia/Llama-3.1-8B-Instruct-FP8 (FP8 weights): the record plans the base model with "
        "fp8 weights, which the excerpt has no weights line to read from (its FP8 cache is read from the pool's bytes "
        "per token)", None),
    "v0.5_a10_llama-2-7b_engine_triton": (
        "the fraction 0.95 is the Triton model config's, not in the log (the build.py command's limits are read)", None),
    "v0.8_a100-80gb_llama2-7b-class-sq_engine_runpy-beam5": (
        "the engine's build settings (SmoothQuant int8, beam width 5, 128 tokens per block) are in the issue's "
        "text, not the excerpt", None),
    "v1.2.0rc2_rtx5060ti_qwen3-8b-fp8_pytorch_llmapi": (
        "the run's checkpoint is Qwen3-8B-FP8 and its max_batch_size 1 is set in the script, not the log", None),
}


def _planned_from_json(log: Path) -> int:
    """KV tokens as tools/accuracy.py's _pool() plans them, from the record's JSON settings."""
    kb = json.loads(log.with_suffix(".json").read_text(encoding="utf-8"))["kvbudget"]
    spec, gpu = kvbudget.load_model(kb["model"]), accuracy._device(kb)
    if log.parent.name == "sglang_logs":
        return int(sglang.plan(spec, gpu, sglang.SGLangSettings(**kb["settings"])).max_total_num_tokens)
    return int(trtllm.plan(spec, gpu, trtllm.TrtllmSettings(**kb["settings"])).max_tokens)


# kvbudget's own options the same records need besides the engine's flags (the release line the run used)
EXTRA = {"v0.18dev_h100-x2_tinyllama-1.1b_pytorch_dynamo-disagg-tp2": {"trtllm_release": "0.18"}}


def _checked(log: Path, flags: list[str] | None = None, extra: dict[str, str] | None = None) -> Any:
    kb = json.loads(log.with_suffix(".json").read_text(encoding="utf-8"))["kvbudget"]
    run = sglang_check if log.parent.name == "sglang_logs" else trtllm_check
    return run(log.read_text(encoding="utf-8"), {"model": kb["model"], "gpu": kb["gpu"], "flags": flags, **(extra or {})})


@pytest.mark.parametrize("log", _records(), ids=lambda p: p.stem)
def test_check_predicts_what_accuracy_plans(log: Path) -> None:
    want = _planned_from_json(log)
    c = _checked(log)
    got = c.plan.kv_tokens
    if not c.plan.starts and c.plan.error and "after the final KV pool" in c.plan.error:
        # TensorRT-LLM allocates this pool and fails after it (capture.py): a plan that does not start holds no
        # requests (EnginePlan), and the row the user reads is the pool the engine allocates before it fails
        got = next(int(r.predicted) for r in c.rows if r.figure.startswith("KV tokens") and r.predicted is not None)
        assert got > 0 and c.plan.kv_tokens == 0
    for r in c.rows:  # the row the user reads is the plan's (a log without its pool line has none)
        assert not r.figure.startswith("KV tokens") or r.predicted == got
    if log.stem in EXPECTED:
        reason, flags = EXPECTED[log.stem]
        assert got != want, f"{log.stem} now matches: drop it from EXPECTED ({reason})"
        if flags is not None:
            assert _checked(log, flags, EXTRA.get(log.stem)).plan.kv_tokens == want, (log.stem, flags)
    else:
        assert got == want, (log.stem, got, want, c.settings)


def test_expected_differences_are_corpus_records() -> None:
    stems = {p.stem for p in _records()}
    assert set(EXPECTED) <= stems
    assert len(stems) - len(EXPECTED) >= 15  # most records' settings are read from their logs


# --- hand-made SGLang logs -------------------------------------------------------------------------------

_SGLANG = """[2025-07-14 05:48:40] server_args=ServerArgs(model_path='meta-llama/Llama-3.1-8B-Instruct', tokenizer_mode='auto', \
tp_size={tp}, mem_fraction_static={frac}, chunked_prefill_size=8192, disable_cuda_graph=False, kv_cache_dtype='auto', \
piecewise_cuda_graph_max_bs=64, cuda_graph_max_bs=256)
[2025-07-14 05:48:41 TP0] Load weight begin. avail mem=78.63 GB
[2025-07-14 05:48:43 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.64 GB, mem usage=14.99 GB.
[2025-07-14 05:48:43 TP0] KV Cache is allocated. #tokens: 411826, K size: 25.14 GB, V size: 25.14 GB
[2025-07-14 05:49:02 TP0] max_total_num_tokens=411826, chunked_prefill_size=8192, max_prefill_tokens=16384
"""


def _sglang_log(tp: str = "1", frac: str = "0.8") -> str:
    return _SGLANG.format(tp=tp, frac=frac)


def test_server_args_are_read_through_the_command_reader() -> None:
    c = sglang_check(_sglang_log(frac="0.8"), {"gpu": "H100-SXM-80GB"})
    settings = dict(c.settings)
    # cuda_graph_max_bs 256, not piecewise_cuda_graph_max_bs' 64; the release line from the date (0.4.8 - 0.5.2)
    assert (settings["mem_fraction_static"], settings["cuda_graph_max_bs"], c.release) == (0.8, 256, "0.4.8")
    assert c.read_from == ("server_args",)
    spec = kvbudget.load_model("meta-llama/Llama-3.1-8B-Instruct")
    want = sglang.plan(spec, kvbudget.find_gpu("H100-SXM-80GB"),
                       sglang.SGLangSettings(version="0.4.8", mem_fraction_static=0.8, chunked_prefill_size=8192,
                                             cuda_graph_max_bs=256)).max_total_num_tokens
    assert c.plan.kv_tokens == want
    # the flags after -- are read through the same reader, SGLang's own spelling; one that sets what server_args
    # prints to another value is not this run's (hostile round 15: it was laid over the log's, and the logged run's
    # figures compared with a plan of a run that never happened, exit 0)
    same = sglang_check(_sglang_log(frac="0.8"), {"gpu": "H100-SXM-80GB", "flags": ["--mem-fraction-static", "0.80"]})
    assert dict(same.settings)["mem_fraction_static"] == 0.8 and same.plan.kv_tokens == want
    assert "the flags after --" in same.read_from
    with pytest.raises(InputError, match=r"set mem_fraction_static to 0\.7, but the log prints mem_fraction_static 0\.8"):
        sglang_check(_sglang_log(frac="0.8"), {"gpu": "H100-SXM-80GB", "flags": ["--mem-fraction-static", "0.7"]})


@pytest.mark.parametrize(("tp", "frac", "said"), [
    ("1", "1.5", "mem-fraction-static is 1.5"), ("0", "0.8", "--tp-size"), ("1", "nan", "mem-fraction-static"),
    ("1", "'high'", "mem-fraction-static"), ("99999999999999999999", "0.8", "--tp-size"),
])
def test_odd_server_args_are_refused_in_one_line(tp: str, frac: str, said: str) -> None:
    with pytest.raises(InputError) as err:
        sglang_check(_sglang_log(tp=tp, frac=frac), {"gpu": "H100-SXM-80GB"})
    message = str(err.value)
    assert message.startswith("the log's server_args: ") and said in message and "\n" not in message


def test_cli_refuses_an_odd_server_args_line_with_exit_2(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    log.write_text(_sglang_log(frac="-0.3"), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "kvbudget", "check", str(log), "--gpu", "H100"], capture_output=True,
                          text=True, timeout=120, env=_env())
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "server_args" in done.stderr and "Traceback" not in done.stderr


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def test_release_named_by_the_log() -> None:
    # a version the log names wins over its date; --sglang-version over both
    text = "pip: sglang==0.4.6.post5\n" + _sglang_log()
    assert sglang_check(text, {"gpu": "H100"}).release == "0.4"
    assert sglang_check(text, {"gpu": "H100", "sglang_version": "current"}).release == "current"
    assert sglang_check("Using KV cache dtype: torch.bfloat16\n" + _sglang_log(), {"gpu": "H100"}).release == "current"


def test_a_gpu_too_small_for_the_logged_free_memory_is_refused() -> None:
    with pytest.raises(InputError, match=r"78\.63 GB free before loading"):
        sglang_check(_sglang_log(), {"gpu": "L4"})


def test_without_a_gpu_the_log_is_recomputed_and_the_prediction_asked_for() -> None:
    c = sglang_check(_sglang_log(), {})
    assert not c.rows and c.recomputed and any("give --gpu" in w for w in c.warnings)
    with pytest.raises(InputError, match="give --model and --gpu"):
        sglang_check("[2025-07-14 05:49:02 TP0] max_total_num_tokens=411826, chunked_prefill_size=8192\n", {})
    with pytest.raises(InputError, match="no SGLang KV pool figure"):
        sglang_check("[2025-07-14 05:48:41 TP0] Load weight begin. avail mem=78.63 GB\n", {})


def test_older_flags_of_a_logged_command() -> None:
    # 0.4's --enable-ep-moe (experts over the TP group) and a flag 0.5.23 no longer has, in a logged command
    text = ("python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-R1 --tp 8 --enable-ep-moe "
            "--enable-flashinfer-trtllm-moe --mem-fraction-static 0.85\n"
            "[2025-08-01 21:05:24 TP0] max_total_num_tokens=980344, chunked_prefill_size=16384\n")
    c = sglang_check(text, {"gpu": "B200"})
    assert dict(c.settings)["ep_size"] == 8 and dict(c.settings)["mem_fraction_static"] == 0.85
    assert any("--enable-flashinfer-trtllm-moe" in w and "older" in w for w in c.warnings)


# --- TensorRT-LLM ----------------------------------------------------------------------------------------

def test_trtllm_settings_not_in_the_log_are_named() -> None:
    log = DATA / "trtllm_logs" / "v1.2.1_h100-sxm_qwen3-reranker-0.6b_pytorch_llmapi.log"
    c = trtllm_check(log.read_text(encoding="utf-8"), {"model": "Qwen/Qwen3-0.6B", "gpu": "H100-SXM-80GB"})
    assumed = next(n for n in c.notes if n.startswith("not in the log"))
    assert "free_gpu_memory_fraction 0.9" in assumed and "max_batch_size 2048" in assumed
    assert "backend pytorch" not in assumed  # "Using LLM with PyTorch backend" says it
    more = trtllm_check(log.read_text(encoding="utf-8"), {"model": "Qwen/Qwen3-0.6B", "gpu": "H100-SXM-80GB",
                                                          "flags": ["--kv_cache_free_gpu_memory_fraction", "0.5"]})
    assert more.plan.kv_tokens < c.plan.kv_tokens and "free_gpu_memory_fraction 0.9" not in " ".join(more.notes)


def test_trtllm_engine_log_reads_its_executor_lines() -> None:
    # trtllm-bench's engine run (0.12 docs): batch, length, tokens per block, fraction, dtypes and release from the log
    log = DATA / "trtllm_logs" / "v0.12.0dev_h100_llama2-7b-fp8_engine_trtllm-bench.log"
    c = trtllm_check(log.read_text(encoding="utf-8"), {"model": "meta-llama/Llama-2-7b-chat-hf", "gpu": "H100"})
    s = dict(c.settings)
    assert (s["backend"], s["free_gpu_memory_fraction"], s["max_batch_size"], s["max_seq_len"], s["tokens_per_block"],
            s["kv_cache_dtype"], s["quantization"]) == ("engine", 0.99, 4096, 4098, 64, "fp8", "fp8")
    assert c.release.startswith("0.12") and any(r.figure == "blocks in the primary pool" for r in c.rows)


def test_prose_naming_trtllm_serve_is_not_a_command() -> None:
    log = DATA / "trtllm_logs" / "v1.1.0rc3_dgx-spark-gb10_gpt-oss-120b_pytorch_trtllm-serve.log"
    c = trtllm_check(log.read_text(encoding="utf-8"), {})
    assert not any("launch command" in w for w in c.warnings)


def test_check_json_carries_both_tables(tmp_path: Path) -> None:
    log = DATA / "sglang_logs" / "v0.4.3.post4_l4x4_qwq-32b_tp4_default.log"
    done = subprocess.run([sys.executable, "-m", "kvbudget", "check", str(log), "--model", "Qwen/QwQ-32B", "--gpu", "L4",
                           "--json"], capture_output=True, text=True, timeout=120, env=_env())
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["engine"] == "SGLang" and doc["settings"]["tp"] == 4 and doc["release_line"] == "0.4"
    rows = {r["figure"]: r for r in doc["comparison"]}
    # the log's 46,611 tokens against kvbudget's 45,379 (tests/test_other_logs.py: -2.6%, the L4's CUDA context)
    assert rows["KV tokens (max_total_num_tokens)"]["reported"] == 46611
    assert rows["KV tokens (max_total_num_tokens)"]["predicted"] == doc["prediction"]["kv_tokens"]
    assert {r["figure"] for r in doc["recomputed_from_log"]} >= {"SGLang #tokens from the logged free memory"}


def test_check_options_for_the_release_are_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from kvbudget.cli import main

    trt = DATA / "trtllm_logs" / "v1.2.1_h100-sxm_qwen3-reranker-0.6b_pytorch_llmapi.log"
    assert main(["check", str(trt), "--model", "Qwen/Qwen3-0.6B", "--gpu", "H100", "--trtllm-release", "latest"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "latest" in err and "release" in err
    sg = DATA / "sglang_logs" / "v0.4.4dev_h100_llama3.1-8b_fa3.log"
    assert main(["check", str(sg), "--model", "llama-3.1-8b", "--gpu", "H100", "--sglang-version", "0.4.8", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["release_line"] == "0.4.8"
    assert main(["check", str(sg), "--gpu", "H100", "--trtllm-release", "0.20"]) == 2
    assert "--trtllm-release is not read for SGLang's log" in capsys.readouterr().err


def test_a_stand_in_model_is_said_once(capsys: pytest.CaptureFixture[str]) -> None:
    # the QwQ-32B 4 x L4 log names /home/model/Qwen/QwQ-32B (not on this machine): planned as the catalog's QwQ-32B,
    # said once although both the prediction and the recomputation use the model
    from kvbudget.cli import main

    assert main(["check", str(Path(__file__).parent / "data" / "sglang_logs" / "v0.4.3.post4_l4x4_qwq-32b_tp4_default.log"),
                 "--gpu", "L4"]) == 0
    err = capsys.readouterr().err
    assert err.count("planned as Qwen/QwQ-32B") == 1


def _defaults_warned(c: Any) -> bool:
    """The warning check gives where the log's own figures say the settings planned are not the run's."""
    return any("defaults were planned" in w or "figures imply mem_fraction_static" in w for w in c.warnings)


def _tokens_error(c: Any) -> float | None:
    return next((r.error_pct for r in c.rows if r.figure.startswith("KV tokens") and r.error_pct is not None), None)


@pytest.mark.parametrize("log", _records(), ids=lambda p: p.stem)
def test_check_says_when_settings_it_planned_are_not_the_runs(log: Path) -> None:
    """A log that lacks settings the run used (EXPECTED) and whose prediction is far off the logged pool (> 10%)
    carries a warning naming the settings planned as defaults or the fraction the log's figures imply; a log whose
    settings are all read carries none, and neither does the same log with its settings given after --."""
    c = _checked(log)
    err = _tokens_error(c)
    if log.stem not in EXPECTED:
        assert not _defaults_warned(c), (log.stem, c.warnings)
        return
    if err is not None and abs(err) > 10:
        assert _defaults_warned(c), (log.stem, err, c.warnings)
    flags = EXPECTED[log.stem][1]
    if flags is not None:
        assert not _defaults_warned(_checked(log, flags, EXTRA.get(log.stem))), log.stem


def test_implied_fraction_is_sglangs_pool_rule_inverted() -> None:
    """1 - (free after loading - pool) / free before loading: the hicache record's 44.11 / 37.97 GB and its two 1.34 GB
    buffers give the 0.2 its dropped server_args line set (the test fails if the rule is turned around)."""
    from kvbudget.engines.sglang.check import implied_fraction
    from kvbudget.engines.sglang.log import SGLangFigures

    figs = SGLangFigures(tokens=25169, k_gb=1.34, pre_load_gb=44.11, after_load_gb=37.97)
    assert implied_fraction(figs, 0.0) == pytest.approx(0.2000, abs=0.001)
    assert implied_fraction(SGLangFigures(tokens=25169, k_gb=1.34), 44.11) is None  # no free memory after loading


def test_a_log_of_sglangs_weight_loader_lines_only_is_read_as_sglangs() -> None:
    """The GKE record's two lines (the image pull and SGLang's 'Load weight end.') were taken for a vLLM log and
    refused with vLLM's figures named; they are SGLang's, and the refusal names SGLang's pool line."""
    log = DATA / "sglang_logs" / "v0.5.19_h100_qwen3-32b_mem0.90_ctx8192_gke-memory-saver.log"
    p = subprocess.run([sys.executable, "-m", "kvbudget", "check", str(log)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "SGLang KV pool figure" in p.stderr and "vLLM" not in p.stderr, p.stderr
    one = "Load weight end. elapsed=1.00 s, type=Qwen3ForCausalLM, avail mem=17.40 GB, mem usage=61.07 GB.\n"
    q = subprocess.run([sys.executable, "-m", "kvbudget", "check", "-"], input=one, capture_output=True, text=True, timeout=120)
    assert q.returncode == 2 and "SGLang" in q.stderr, q.stderr


def test_trtllm_bench_summary_with_tabs_is_read() -> None:
    """trtllm-bench's summary aligns its values with tabs ('TP Size:\\t\\t8', the 0.16 TP-8 record) or spaces (the
    0.12 record): both are read; with tabs the TP was missed and a 70B engine planned on one rank (no start)."""
    pool = "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 52.08 GiB for max tokens in paged KV cache (2730752).\n"
    for gap in ("\t\t", "         "):
        text = (f"[TensorRT-LLM] TensorRT-LLM version: 0.16.0\nTP Size:{gap}8\nKV Cache Dtype:{gap}FP8\n"
                f"Quantization:{gap}FP8\nKV Memory Percentage:{gap}90.00%\n{pool}")
        c = trtllm_check(text, {"model": "meta-llama/Llama-3.1-70B-Instruct", "gpu": "H100"})
        got = dict(c.settings)
        assert (got.get("tp"), got.get("kv_cache_dtype"), got.get("quantization")) == (8, "fp8", "fp8"), got
        assert got.get("free_gpu_memory_fraction", 0.9) == 0.9 and c.plan.starts
