"""`kvbudget check` on TensorRT-LLM PyTorch-backend logs: the memory outside torch after loading the weights
(KvCacheCreator, ``_torch/pyexecutor/_util.py``: the device's used memory, every process's, less torch's allocated
bytes) beside kvbudget's CUDA context, estimation pool and CUDA graphs, and the warning where the log's is larger than
kvbudget models by more than max(0.25 GiB, 1% of the device), with the pool planned with that memory held."""

from __future__ import annotations

import re
from pathlib import Path

from kvbudget.engines.logscan import open_log
from kvbudget.engines.trtllm.check import AFTER_LOADING, check_run
from kvbudget.engines.trtllm.log import launcher, read_run

LOGS = Path(__file__).parent / "data" / "trtllm_logs"
BENCH = (LOGS / "v0.20.0_h100-sxm_llama3.1-8b-fp8_pytorch_trtllm-bench-kv090-isl128-osl256.log").read_text(encoding="utf-8")
ADA = (LOGS / "v1.1.0_rtx6000ada_tinyllama-1.1b_pytorch_trtllm-serve_defaults.log").read_text(encoding="utf-8")
LLAMA8 = {"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100-SXM-80GB"}
TINY = {"model": "TinyLlama/TinyLlama-1.1B-Chat-v1.0", "gpu": "RTX-6000-Ada-48GB"}


def _row(c: object, name: str) -> tuple[float | None, float | None]:
    return next((r.reported, r.predicted) for r in c.rows if r.figure.startswith(name))  # type: ignore[attr-defined]


def _warning(c: object) -> str | None:
    return next((w for w in c.warnings if "after loading the weights" in w), None)  # type: ignore[attr-defined]


def test_the_after_loading_line_is_read_apart_from_the_profiling_one() -> None:
    figs = read_run(open_log(BENCH, "TensorRT-LLM")).figures
    assert figs.after_loading_outside_gib == 1.71  # "... (outside torch) in memory usage profiling: 1.71 GiB"
    assert figs.outside_torch_gib == 1.86  # "Memory used outside torch (e.g., NCCL and CUDA graphs) ...: 1.86 GiB"


def test_the_launcher_from_its_own_lines() -> None:
    assert launcher(open_log(BENCH, "TensorRT-LLM")) == "trtllm-bench"  # its heuristics / report lines
    assert launcher(open_log(ADA, "TensorRT-LLM")) == "the LLM API"  # only the LLM's backend line


def test_the_row_and_the_warning_on_the_0_20_trtllm_bench_log() -> None:
    c = check_run(BENCH, LLAMA8)
    logged, planned = _row(c, AFTER_LOADING)
    # kvbudget: the CUDA context (0.50 GiB) and its 0.30 GiB estimation pool; the graphs to batch 2048 are captured
    # after the final pool (the estimation pool has fewer blocks), so none
    assert logged == 1.71 and planned == 0.80
    w = _warning(c)
    assert w is not None and "0.91 GiB less" in w and "under trtllm-bench" in w and "kvbudget calibrate" in w
    # the pool planned with the 0.91 GiB held: 0.9 x 0.91 GiB less, nearer the log's 1,009,696 than kvbudget's +1.61%
    tokens = int(re.search(r"the pool is ([0-9,]+) tokens", w).group(1).replace(",", ""))  # type: ignore[union-attr]
    plain = int(_row(c, "KV tokens")[1])  # type: ignore[arg-type]
    assert abs((plain - tokens) * 65536 / 2**30 - 0.9 * 0.91) < 0.01
    assert abs(tokens - 1_009_696) < abs(plain - 1_009_696)


def test_the_estimation_pool_cancels_in_the_gap() -> None:
    # the 1.1 log's 1.38 GiB estimation pool (65,536 tokens) is not kvbudget's; it cancels in the sizing, so the gap
    # is (2.49 - 1.38) - (kvbudget's 0.70 - its own pool): 0.58 GiB, above 1% of 47.37 GiB
    c = check_run(ADA, TINY)
    w = _warning(c)
    assert w is not None and "0.58 GiB less" in w and "under the LLM API" in w


def test_no_warning_within_a_quarter_gib_or_one_percent() -> None:
    # 1.50 - 0.30 = 1.20 GiB against kvbudget's 0.50: 0.70 GiB, under 1% of the H100's 79.18 GiB
    near = BENCH.replace("(outside torch) in memory usage profiling: 1.71 GiB", "(outside torch) in memory usage profiling: 1.50 GiB")
    c = check_run(near, LLAMA8)
    assert _row(c, AFTER_LOADING)[0] == 1.50 and _warning(c) is None
    # a log without the line has no row and no warning
    bare = "\n".join(line for line in BENCH.splitlines() if "after loading model weights (outside" not in line)
    c = check_run(bare, LLAMA8)
    assert all(r.figure != AFTER_LOADING for r in c.rows) and _warning(c) is None
