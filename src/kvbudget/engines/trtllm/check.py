"""Check a TensorRT-LLM start-up log against TensorRT-LLM's own arithmetic.

TensorRT-LLM (``_torch/pyexecutor/_util.py``, ``kvCacheManager.cpp``): ``available: A GiB`` (engine path) or ``available KV cache memory when
calculating max tokens: A GiB ... kv size [per token] is S`` (PyTorch backend), ``Number of blocks in
KV cache primary pool: N`` (1.x: ``primary blocks=N``), ``Allocated X GiB for max tokens in paged KV cache (T)``. Every logged
figure is rounded to 0.01 GB, so a recomputed figure counts as matching when it lies within what that
rounding allows. ``logscan.check_other_log`` runs this and SGLang's check on a log.
"""

from __future__ import annotations

import re

from ...units import GiB
from ..logscan import MAX_GB, NUM, LogText, Row, count, figure


def _pool(log: LogText) -> re.Match[str] | None:
    """The ``Allocated X GiB for max tokens in paged KV cache (T)`` line: the pool and its tokens."""
    return log.last("GiB for max tokens in paged KV cache (",
                    r"Allocated " + NUM + r" GiB for max tokens in paged KV cache \(" + NUM + r"\)")


def unrecomputable(log: LogText) -> str | None:
    """What a TensorRT-LLM log shows when it has nothing ``check_trtllm_log`` can recompute: its pool (or, before
    0.9, its tokens) with no line to check it against, or the executor's stop for lack of memory; None otherwise."""
    pool, legacy = _pool(log), log.last(" tokens in paged KV cache", r"Using " + NUM + r" tokens in paged KV cache")
    if pool or legacy:
        said = (f"{count(pool.group(2), 'TRT-LLM tokens'):,} tokens in {figure(pool.group(1), 'TRT-LLM KV pool (GiB)', 0, MAX_GB)} GiB"
                if pool else f"{count(legacy.group(1), 'TRT-LLM tokens'):,} tokens, pre-0.9 wording" if legacy else "")
        return (f"this TensorRT-LLM log prints its KV pool ({said}) but no line to recompute it from (blocks in the "
                "primary pool, or the available memory and fraction): compare it with kvbudget fit MODEL --gpu G "
                "--engine trtllm")
    if log.last("Executor creation failed due to insufficient GPU memory", r"Executor creation failed"):
        return ("this TensorRT-LLM run stopped before its KV pool ('Executor creation failed due to insufficient GPU "
                "memory'): kvbudget fit MODEL --gpu G --engine trtllm says whether the settings start")
    return None


def check_trtllm_log(log: LogText) -> list[Row]:
    """(figure, reported, recomputed, matches) for every TensorRT-LLM figure the log lets us recompute (none:
    an empty list)."""
    rows: list[Row] = []
    pool = _pool(log)
    if pool:
        x = figure(pool.group(1), "TRT-LLM KV pool (GiB)", 0, MAX_GB)
        t = count(pool.group(2), "TRT-LLM max tokens in paged KV cache")
        blocks = log.last("Number of blocks in KV cache primary pool: ", r"Number of blocks in KV cache primary pool: " + NUM)
        # 1.x (kvCacheManager.cpp) names the pool in one line instead: "... tokens per block=32, primary blocks=1444, ..."
        blocks = blocks or log.last("primary blocks=", r"primary blocks=" + NUM)
        tpb = (log.last("Number of tokens per block: ", r"Number of tokens per block: " + NUM)
               or log.last("tokens per block=", r"tokens per block=" + NUM))
        if blocks and tpb:
            n = count(blocks.group(1), "TRT-LLM blocks in KV cache primary pool")
            b = count(tpb.group(1), "TRT-LLM tokens per block", 1, 1 << 20)
            rows.append(("TRT-LLM tokens = blocks x tokens per block", t, n * b, t == n * b))
        avail = log.last("available: ", r"available: " + NUM + " GiB")
        frac = log.last(("free_gpu_memory_fraction", "freeGpuMemoryFraction", "kv_cache_free_gpu_mem_fraction"),
                        r"(?:free_gpu_memory_fraction|freeGpuMemoryFraction|kv_cache_free_gpu_mem_fraction)['\"]?[=: ]{1,8}"
                        + NUM)
        if avail and frac:
            a_gib = figure(avail.group(1), "TRT-LLM available memory (GiB)", 0, MAX_GB)
            fr = figure(frac.group(1), "TRT-LLM free_gpu_memory_fraction", 0, 1, lo_open=True)
            want = a_gib * fr
            rows.append(("TRT-LLM pool GiB = available x fraction", x, round(want, 2), abs(want - x) <= 0.005 * 2 + 0.01 * fr))
        per = log.last("available KV cache memory when calculating max tokens: ",
                       r"available KV cache memory when calculating max tokens: " + NUM
                       + r" GiB[^\n]{0,400}?kv size(?: per token)? is " + NUM)
        if per:
            a = figure(per.group(1), "TRT-LLM available KV cache memory (GiB)", 0, MAX_GB)
            s = figure(per.group(2), "TRT-LLM kv size per token", 0, 1e12, lo_open=True)
            most = int((a + 0.005) * GiB // s)
            rows.append(("TRT-LLM tokens <= available / kv size per token", t, most, t <= most))
    return rows
