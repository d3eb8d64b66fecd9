"""Check a TensorRT-LLM start-up log against TensorRT-LLM's own arithmetic.

TensorRT-LLM (``_torch/pyexecutor/_util.py``, ``kvCacheManager.cpp``): ``available: A GiB`` (engine path) or ``available KV cache memory when
calculating max tokens: A GiB ... kv size [per token] is S`` (PyTorch backend), ``Number of blocks in
KV cache primary pool: N`` (1.x: ``primary blocks=N``), ``Allocated X GiB for max tokens in paged KV cache (T)``. Every logged
figure is rounded to 0.01 GB, so a recomputed figure counts as matching when it lies within what that
rounding allows. ``logscan.check_other_log`` runs this and SGLang's check on a log.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...units import GiB, MiB
from ..logscan import MAX_GB, NUM, LogText, Row, count, figure

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from ..compared import OtherCheck
    from ..compared import Row as Compared
    from .log import TrtllmFigures
    from .policy import TrtllmPlan
    from .settings import TrtllmSettings


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


# The C++ runtime's "[MemUsageChange]" lines print sizes with binary units (memoryCounters.cpp bytesToString: B, KB,
# MB, GB, each 1024 of the one before); the engine size is in MiB (tllmRuntime.cpp "Loaded engine size").
_UNIT = {"B": 1, "KB": 1 << 10, "KIB": 1 << 10, "MB": 1 << 20, "MIB": 1 << 20, "GB": 1 << 30, "GIB": 1 << 30}


@dataclass(frozen=True)
class EngineMemory:
    """What a C++-runtime (engine) log says about the memory outside the KV cache, in bytes: the named parts
    TensorRT-LLM allocates before it measures the free memory (trtGptModelInflightBatching.cpp constructor: the
    engine, TensorRT's execution context, the runtime buffers, the decoder) and the measurement itself
    ("Memory usage when calculating max tokens in paged kv cache: total: T GiB, available: A GiB",
    kvCacheManager.cpp). ``rest`` is what no line names: the CUDA context, cuBLAS/cuBLASLt and NCCL, and any
    other process on the GPU."""

    total: float
    available: float
    engine: float
    execution_context: float
    runtime_buffers: float
    decoder: float

    @property
    def outside_kv(self) -> float:
        return self.total - self.available

    @property
    def named(self) -> float:
        return self.engine + self.execution_context + self.runtime_buffers + self.decoder

    @property
    def rest(self) -> float:
        return self.outside_kv - self.named


def _size(log: LogText, literal: str, pattern: str, name: str) -> float:
    """Bytes of the last "<number> <unit>" match of ``pattern`` (0 when the line is absent)."""
    m = log.last(literal, pattern)
    if m is None:
        return 0.0
    return figure(m.group(1), name, 0, MAX_GB * 1024) * _UNIT[m.group(2).upper()]


_PART_UNIT = r" ?([KMG]i?B|B)\b"
# The engine path's allocations before the pool is sized, as its lines print them: (name, literal, pattern)
_PARTS = (("execution context", "for execution context memory",
           r"Allocated " + NUM + _PART_UNIT + r" for execution context memory"),
          ("runtime buffers", "GPU memory for runtime buffers", r"Allocated " + NUM + _PART_UNIT + r" GPU memory for runtime buffers"),
          ("decoder", "GPU memory for decoder", r"Allocated " + NUM + _PART_UNIT + r" GPU memory for decoder"))


def engine_parts(log: LogText) -> dict[str, float]:
    """Bytes of each part the engine path's log names (the last line of each; every rank prints the same): the loaded
    engine (tllmRuntime.cpp "Loaded engine size: N MiB"), TensorRT's execution context, the runtime buffers and the
    decoder (trtGptModelInflightBatching.cpp); a part whose line is absent is left out."""
    out = {name: _size(log, literal, pattern, f"TRT-LLM {name}") for name, literal, pattern in _PARTS if log.has(literal)}
    engine = log.last("Loaded engine size: ", r"Loaded engine size: " + NUM + r" MiB")
    if engine is not None:
        out["loaded engine"] = figure(engine.group(1), "TRT-LLM loaded engine size (MiB)", 0, MAX_GB * 1024) * (1 << 20)
    return out


def engine_memory(log: LogText) -> EngineMemory | None:
    """The engine log's memory outside the KV cache by named part; None without the engine-size line and the
    total/available measurement (the PyTorch backend prints neither)."""
    from .log import rank_available

    usage = log.last("Memory usage when calculating max tokens in paged kv cache",
                     r"total: " + NUM + r" GiB, available: " + NUM + r" GiB")
    parts = engine_parts(log)
    if usage is None or "loaded engine" not in parts:
        return None
    total = figure(usage.group(1), "TRT-LLM total GPU memory (GiB)", 0, MAX_GB, lo_open=True) * GiB
    available = min(rank_available(log)) * GiB  # the smallest rank's: its free memory sized every rank's pool
    return EngineMemory(total, available, parts["loaded engine"], parts.get("execution context", 0.0),
                        parts.get("runtime buffers", 0.0), parts.get("decoder", 0.0))


def check_trtllm_log(log: LogText) -> list[Row]:
    """(figure, reported, recomputed, matches) for every TensorRT-LLM figure the log lets us recompute (none:
    an empty list)."""
    from .log import last_run, rank_available

    log = last_run(log)[1]
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
        # the engine path: the pool is fraction x the free memory of the rank with the least (kvCacheManager.cpp:
        # each rank's max tokens, then an allreduce MIN over the ranks)
        free = rank_available(log)
        avail = log.last("available: ", r"available: " + NUM + " GiB") if not free else None
        frac = log.last(("free_gpu_memory_fraction", "freeGpuMemoryFraction", "kv_cache_free_gpu_mem_fraction"),
                        r"(?:free_gpu_memory_fraction|freeGpuMemoryFraction|kv_cache_free_gpu_mem_fraction)['\"]?[=: ]{1,8}"
                        + NUM)
        a_gib = min(free) if free else figure(avail.group(1), "TRT-LLM available memory (GiB)", 0, MAX_GB) if avail else None
        if a_gib is not None and frac:
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
    parts = engine_memory(log)
    if parts is not None:
        # every named part is allocated before the free memory is measured, so together they fit in total -
        # available; what they leave is the unnamed rest (printed to 0.01: each figure carries its rounding)
        rows.append(("TRT-LLM GiB outside the KV cache (total - available) >= engine + execution context + runtime "
                     "buffers + decoder", round(parts.outside_kv / GiB, 2), round(parts.named / GiB, 2),
                     parts.named <= parts.outside_kv + 0.011 * GiB))
    return rows


_FREE_GAP_GIB = 1.0  # the free memory at sizing may sit this far from the log's, besides compared.far_apart's share


def engine_defaults(p: TrtllmPlan, s: TrtllmSettings, assumed: tuple[str, ...]) -> str:
    """Where an engine's batch and sequence limits were planned as defaults: what they cost in kvbudget's plan (the
    runtime buffers and decoder scale with max_batch_size x max_seq_len, fixed when the engine was built and printed
    by no line of a 0.9 to 0.19 runtime log but the TRTGptModel ones)."""
    names = {a.split(" ")[0] for a in assumed}
    if p.backend != "engine" or not names & {"max_batch_size", "max_seq_len"}:
        return ""
    held = p.runtime_buffers_bytes + p.decoder_bytes
    return (f" (of them, the engine's build limits cost most: runtime buffers and decoder {held / GiB:.2f} GiB for "
            f"max_batch_size {s.max_batch_size:,} x max_seq_len {p.max_seq_len:,} as planned; give the build's --max_batch_size and "
            "--max_seq_len after --)")


def defaults_off(rows: list[Compared], assumed: tuple[str, ...], more: str = "") -> list[str]:
    """A warning where settings were planned as defaults (``assumed``: not in the log) and the memory free when the
    pool is sized, or the KV tokens, as kvbudget plans them, are far from the log's own figure: the prediction then
    stands for the defaults, not for the run (an engine's build settings are baked into it and printed only by some
    releases)."""
    from ..compared import far_apart

    if not assumed:
        return []
    for r in rows:
        free = r.figure in ("free when the pool is sized (GiB)", "available KV cache memory (GiB)")
        if r.reported is None or r.predicted is None or not (free or r.figure.startswith("KV tokens")):
            continue
        if far_apart(r.predicted, r.reported, _FREE_GAP_GIB if free else 0):
            shown = f"{r.predicted:.2f} where the log shows {r.reported:.2f}" if free else \
                f"{r.predicted:,.0f} where the log shows {r.reported:,.0f}"
            return [f"{r.figure}: kvbudget plans {shown}, and {', '.join(a.split(' ')[0] for a in assumed)} "
                    f"{'is' if len(assumed) == 1 else 'are'} not in the log, so TensorRT-LLM's defaults were planned: "
                    "the prediction is for those defaults, not this run; give the run's settings after -- "
                    "(trtllm-serve flags, or the engine's build settings)" + more]
    return []


def logits_16_bit(logged: float | None, s: TrtllmSettings, vocab: int, seq: int) -> list[str]:
    """A line where the log's runtime buffers are what 16-bit logits give and not float32's: the engine was built with
    a 16-bit logits dtype (trtllm-build --logits_dtype; the checkpoint's PretrainedConfig default is 'float32',
    tensorrt_llm/models/modeling_utils.py), which kvbudget's engine_buffers does not take (its runtime buffers hold
    batch x beam x vocab float32 logits)."""
    from .policy import engine_buffers

    if logged is None:
        return []
    fp32 = engine_buffers(s.max_batch_size, s.max_beam_width, seq, vocab)[0]
    half = fp32 - s.max_batch_size * s.max_beam_width * vocab * 2
    near = 0.006 * GiB  # the line prints GiB to 0.01
    if abs(half - logged) > near or abs(fp32 - logged) <= near:
        return []
    return [f"the log's runtime buffers ({logged / GiB:.2f} GiB) are what 16-bit logits give for max_batch_size "
            f"{s.max_batch_size} x vocab {vocab:,} ({half / GiB:.2f} GiB, float32: {fp32 / GiB:.2f}): the engine was "
            "built with a 16-bit logits dtype, which kvbudget does not model (it plans float32 logits, the builder's "
            "default)"]


HELD = "held outside the KV pool: total - pool / fraction (GiB)"


def held_outside(figs: TrtllmFigures, p: TrtllmPlan, total_bytes: int) -> tuple[float, float] | None:
    """(the log's, kvbudget's) GiB held outside the KV pool when it was sized, where the log prints its pool but not the
    memory it was sized from: the pool is the fraction of what the peak leaves (``policy``), so total - pool / fraction
    is the peak (to a block and the pool's 0.01 GiB rounding; kvbudget's figure is its peak). None where the log prints
    the free or available memory itself (those rows compare it), or a max_tokens cap may have set the pool instead."""
    if figs.pool_gib is None or figs.available_gib is not None or figs.kv_available_gib is not None or p.error:
        return None
    if p.free_gpu_memory_fraction <= 0 or figs.pool_gib * GiB >= total_bytes or p.max_tokens_capped:
        return None
    total = figs.total_gib * GiB if figs.total_gib is not None else total_bytes
    return round((total - figs.pool_gib * GiB / p.free_gpu_memory_fraction) / GiB, 2), round(p.peak_bytes / GiB, 2)


def held_warning(logged: float, planned: float, fraction: tuple[float, float] | None = None) -> list[str]:
    """A line where the run held much more outside its KV pool than kvbudget's profiled peak: memory kvbudget does
    not model, most often another process's on the same GPU (both of TensorRT-LLM's paths size the pool from the
    device's free memory, cudaMemGetInfo / torch.cuda.mem_get_info, which every process's use lowers). ``fraction``:
    (the fraction planned, the GiB kvbudget's peak leaves) where no line shows the run's fraction: the gap is then as
    much a lower fraction's, which the line names with the one the pool would be of that memory."""
    if logged - planned < _FREE_GAP_GIB:
        return []
    if fraction is not None:
        planned_fraction, left = fraction
        implied = (1 - (logged - planned) / left) * planned_fraction if left > 0 else 0.0
        return [f"the log's pool implies {logged:.2f} GiB held outside it when it was sized at the fraction "
                f"{planned_fraction:g} kvbudget assumed, {logged - planned:.2f} GiB more than kvbudget's {planned:.2f} GiB "
                f"(weights and profiled peak): no line shows the run's free_gpu_memory_fraction, and the pool is "
                f"{implied:.2f} of the {left:.2f} GiB kvbudget's peak leaves; give -- --kv_cache_free_gpu_memory_fraction "
                "F if the run set one (else the memory is another process's on the same GPU, which kvbudget does not "
                "model)"]
    return [f"the log's pool implies {logged:.2f} GiB held outside it when it was sized, {logged - planned:.2f} GiB more "
            f"than kvbudget's {planned:.2f} GiB (weights and profiled peak): memory kvbudget does not model, such as "
            "another process on the same GPU (a desktop session on a display card; TensorRT-LLM sizes the pool from the "
            "device's free memory, which every process's use lowers); the smaller the pool, the larger the KV tokens' "
            "error it makes"]


def profiling_rows(figs: TrtllmFigures, p: TrtllmPlan) -> list[Compared]:
    """The PyTorch backend's profiling lines (KvCacheCreator, ``_torch/pyexecutor/_util.py``) beside kvbudget's terms,
    so a user sees which one is off: the weights ("Rank R uses X GB for model weights", model_engine.py), what the run
    allocated inside torch (activations, attention workspace, logits), the memory outside torch (used - torch's
    allocated after empty_cache: CUDA context, NCCL, the CUDA graphs the run held and the estimation pool, which the
    C++ manager allocates) and the peak (torch's peak + outside torch)."""
    from ..compared import row

    pairs = ((figs.weights_gib, "weights (GiB)", p.weights_bytes),
             (figs.dynamic_gib, "allocated inside torch in the profiling run (GiB)", p.activation_bytes),
             (figs.outside_torch_gib, "outside torch in profiling: CUDA context, NCCL, CUDA graphs, estimation pool (GiB)",
              p.non_torch_bytes + p.cuda_graph_bytes + p.temporary_kv_bytes),
             (figs.peak_gib, "peak during profiling, torch + outside (GiB)", p.peak_bytes + p.temporary_kv_bytes))
    return [row(name, logged, round(planned / GiB, 2)) for logged, name, planned in pairs if logged is not None]


AFTER_LOADING = "outside torch after loading: CUDA context, estimation pool, CUDA graphs (GiB)"
_AFTER_LOADING_GAP_GIB = 0.25  # a gap this large (or 1% of the device, if more) is worth a warning


def after_loading_planned(p: TrtllmPlan) -> int:
    """kvbudget's bytes for KvCacheCreator's "Memory used after loading model weights (outside torch)": the CUDA
    context (and NCCL above one rank), the estimation pool (the C++ KV cache manager's, made before the reading:
    py_executor_creator.py builds it, then the executor whose warmup captures the CUDA graphs, then estimates) and the
    CUDA graphs that warmup captured on it (``policy.graphs_in_estimation``)."""
    return p.non_torch_bytes + p.temporary_kv_bytes + p.cuda_graph_bytes


def after_loading_warning(figs: TrtllmFigures, p: TrtllmPlan, replanned: Callable[[int], TrtllmPlan],
                          total_bytes: int, launcher: str | None) -> list[str]:
    """A line where the log's memory outside torch after loading exceeds kvbudget's (``after_loading_planned``) by
    more than max(0.25 GiB, 1% of the device). KvCacheCreator (``_torch/pyexecutor/_util.py``, 0.20 to 1.2) takes it
    as the device's used memory (``torch.cuda.mem_get_info``: every process's) less torch's allocated bytes, after
    ``empty_cache``, so it holds what kvbudget does not model: a launching process's own CUDA context on the GPU (the
    0.20 trtllm-bench out-of-memory message lists one of 0.57 GiB), the kernels loaded into the worker's context, the
    cuBLAS/cuBLASLt handles and workspaces and the C++ runtime's own allocations; TensorRT-LLM's source does not
    establish their sizes, so they are not fitted. ``replanned(gap)``: the run planned with ``gap`` bytes more held,
    whose pool the line gives beside the log's."""
    if figs.after_loading_outside_gib is None:
        return []
    planned = after_loading_planned(p) / GiB
    gap = figs.after_loading_outside_gib - planned
    if figs.temporary_kv_gib is not None:  # the estimation pool cancels in the pool's sizing: compare the rest
        gap = (figs.after_loading_outside_gib - figs.temporary_kv_gib) - (planned - p.temporary_kv_bytes / GiB)
    if gap <= max(_AFTER_LOADING_GAP_GIB, 0.01 * total_bytes / GiB):
        return []
    q = replanned(round(gap * GiB))
    effect = ""
    if figs.tokens and q.starts:
        err = 100.0 * (q.max_tokens - figs.tokens) / figs.tokens
        effect = f"; planned with that much more held, the pool is {q.max_tokens:,} tokens ({err:+.2f}% against the log)"
    parent = (f"under {launcher} the launching process stays beside the worker, with its own CUDA context where it made "
              "one (the 0.20 trtllm-bench out-of-memory message lists it at 0.57 GiB), and " if launcher else "")
    return [f"the log's memory outside torch after loading the weights is {figs.after_loading_outside_gib:.2f} GiB and "
            f"kvbudget's {planned:.2f} GiB (CUDA context, estimation pool, CUDA graphs) is {gap:.2f} GiB less"
            f"{' once each side drops its own estimation pool, which the sizing adds back' if figs.temporary_kv_gib is not None else ''}: "
            "TensorRT-LLM's profiling counts the device's used memory, every process's, less what torch allocated "
            f"(_torch/pyexecutor/_util.py); {parent}the worker's loaded kernels, cuBLAS workspaces and C++ runtime "
            f"count there too, which kvbudget does not model{effect}; to plan with it, calibrate on this log "
            "(kvbudget calibrate LOG --out site.json) and give --profile site.json"]


def capture_warning(figs: TrtllmFigures, p: TrtllmPlan, total_bytes: int) -> list[str]:
    """A line where the CUDA graphs captured after the final pool (``policy.graphs_in_estimation``: the estimation run
    captured none) need more than the log's own figures leave: the pool takes fraction x (total - peak + the estimation
    pool), so (1 - fraction) x that is what stays free for the capture, besides the activations the estimation run
    freed. The need is ``capture.py``'s: the largest batch's graph pool held while the next batch runs eagerly before
    its own capture."""
    if not p.capture_after_pool_bytes or figs.peak_gib is None:
        return []
    total = figs.total_gib * GiB if figs.total_gib is not None else total_bytes
    left = (1 - p.free_gpu_memory_fraction) * (total - figs.peak_gib * GiB + (figs.temporary_kv_gib or 0) * GiB)
    if left >= p.capture_need_bytes:
        return []
    return [f"the fraction {p.free_gpu_memory_fraction:g} leaves {left / GiB:.2f} GiB after the final pool (1 - fraction of "
            f"the log's total - peak + estimation pool) for the CUDA graphs captured after it, which need "
            f"{p.capture_need_bytes / GiB:.2f} GiB or more (the largest graph's {p.capture_after_pool_bytes / GiB:.2f} GiB "
            "and the next batch's eager warmup beside it): the estimation run captured none (its pool has fewer "
            "blocks than the largest graph batch), so the pool was sized without them and the capture runs out of "
            "memory unless the estimation run's freed activations cover the rest (py_executor_creator.py builds the "
            "final pool, then a new executor captures the graphs); lower the fraction or cuda_graph_config "
            "max_batch_size"]


_RANK_GAP_GIB = 0.5  # ranks' free memory this far apart is worth a line (it moves every rank's pool by 0.45 GiB)


def _run_warnings(runs: int, figs: TrtllmFigures) -> list[str]:
    """What the log shows that kvbudget's one-run, one-rank plan does not: several runs in one log (the last is read),
    and ranks that had different free memory when the pool was sized (every rank's pool is the smallest rank's)."""
    out = []
    if runs > 1:
        out.append(f"the log holds {runs} TensorRT-LLM runs (a version or LLM API backend line after a KV pool line): "
                   "the last one is checked; give one run's lines to check another")
    least, most = figs.available_gib, figs.available_most_gib
    if least is not None and most is not None and most - least >= _RANK_GAP_GIB:
        out.append(f"the ranks had {least:.2f} to {most:.2f} GiB free when the pool was sized: TensorRT-LLM gives every "
                   f"rank the pool of the one with the least (kvCacheManager.cpp, an allreduce MIN over the ranks), so "
                   f"the {most - least:.2f} GiB that rank holds beyond another (another process on its GPU, or the "
                   "launching process's own CUDA context) shrinks every rank's pool; kvbudget plans one rank with nothing "
                   "else on its GPU")
    return out


def check_run(text: str, given: dict[str, Any]) -> OtherCheck:
    """``check`` of a TensorRT-LLM log: the run it shows (``log.read_run``: settings, release, device; the settings no
    line shows are the release's defaults, named in a note) planned by ``policy.plan``, each figure it printed beside
    kvbudget's, then the figures recomputed from each other (``check_trtllm_log``). ``given``: --model, --gpu,
    --gpu-memory, --trtllm-release and the words after -- (trtllm-serve's flags, or the whole launch command: its
    model where --model is not given, the release its image names where --trtllm-release is not)."""
    from ..._record import replace
    from ...inputs import excerpt
    from ...units import InputError
    from ..compared import OtherCheck, logged_model, row, run_devices, run_gpu, run_words, settings_items, starts_row
    from ..logscan import open_log
    from .figures import read_from_figures
    from .log import COMMAND_EXAMPLE, last_run, launcher, read_run, whole_command
    from .policy import given_release, plan, summary
    from .settings import TrtllmSettings

    runs, log = last_run(open_log(text, "TensorRT-LLM"))
    flags, whole = run_words(given.get("flags"), "TensorRT-LLM", COMMAND_EXAMPLE)
    command = flags if whole else []
    release, found, said_first = given_release(given.get("trtllm_release")), "--trtllm-release", list[str]()
    if whole:  # `-- [docker run ... nvcr.io/nvidia/tensorrt-llm/release:TAG] trtllm-serve MODEL ...`
        flags, release, found, said_first = whole_command(flags, release)
    run = read_run(log, flags, release, whole=whole, release_from=found)
    if command:
        run_devices(command, run.settings.tp * run.settings.pp, "TensorRT-LLM")
    model = given.get("model")
    warnings = [*said_first, *run.warnings, *_run_warnings(runs, run.figures)]
    notes = [f"TP {run.settings.tp} from {run.tp_from_ranks} (no line names TP; an excerpt that leaves ranks out shows "
             "fewer: give -- --tp_size N)"] if run.tp_from_ranks else []
    spec = logged_model(model, run.model, warnings)
    if model and run.model and model.strip("/").lower() != run.model.strip("/").lower():
        warnings.append(f"the log's command loads {excerpt(run.model, 60)}, planned as --model {excerpt(model, 60)}: "
                        "where the two checkpoints differ (a quantized one), so do the weights and the KV cache")
    figs = run.figures
    device = run_gpu(given.get("gpu"), given.get("gpu_memory"), run.gpu_name, figs.total_gib, None, "TensorRT-LLM")
    if figs.total_gib is not None and given.get("gpu_memory") is None and device is not None:
        notes.append(f"the GPU's memory: the {figs.total_gib:.2f} GiB total the log prints")
    rows: list[Any] = []
    p = None
    read: list[str] = []
    if spec is not None and device is None:
        warnings.append("the log does not say which GPU it ran on: give --gpu (or --gpu-memory) for kvbudget's prediction")
    if spec is not None and device is not None:
        p = plan(spec, device, run.settings)
        settings, assumed_now, read, from_figures = read_from_figures(spec, device, run.settings, p, figs, run.assumed)
        if settings != run.settings:
            run = replace(run, settings=settings, assumed=assumed_now)
            p = plan(spec, device, settings)
        warnings += from_figures
    notes += [f"not in the log, so TensorRT-LLM's defaults were planned: {', '.join(run.assumed)} (give them after --, "
              "as trtllm-serve flags or an --extra_llm_api_options file)"] if run.assumed else []
    notes += read + (list(p.notes) if p is not None else [])
    notes += [f"kvbudget's plan does not start: {p.error}"] if p is not None and p.error else []
    if spec is not None and device is not None and p is not None:
        if figs.tokens is not None:
            rows.append(row("KV tokens (max tokens in paged KV cache)", figs.tokens, p.max_tokens))
        if figs.pool_gib is not None:
            rows.append(row("KV pool (GiB)", figs.pool_gib, round(p.pool_bytes / GiB, 2)))
        if figs.blocks is not None:
            rows.append(row("blocks in the primary pool", figs.blocks, p.num_blocks))
        if figs.available_gib is not None and p.backend == "engine":
            rows.append(row("free when the pool is sized (GiB)", figs.available_gib,
                            round((device.memory_bytes - p.peak_bytes) / GiB, 2)))
        if figs.kv_available_gib is not None and p.backend == "pytorch":
            rows.append(row("available KV cache memory (GiB)", figs.kv_available_gib, round(p.available_bytes / GiB, 2)))
        if figs.per_token is not None:
            rows.append(row("KV bytes per token", figs.per_token, p.per_token_bytes))
        if p.backend == "engine":
            parts = engine_parts(log)
            rows += [row(f"{name} (MiB)", round(parts[name] / MiB, 2), round(planned / MiB, 2))
                     for name, planned in (("loaded engine", p.weights_bytes), ("execution context", p.execution_context_bytes),
                                           ("runtime buffers", p.runtime_buffers_bytes), ("decoder", p.decoder_bytes))
                     if name in parts]
            warnings += logits_16_bit(parts.get("runtime buffers"), run.settings, spec.dims.vocab_size, p.max_seq_len)
        if p.backend == "pytorch":
            rows += profiling_rows(figs, p)
            if figs.after_loading_outside_gib is not None:
                rows.append(row(AFTER_LOADING, figs.after_loading_outside_gib, round(after_loading_planned(p) / GiB, 2)))
            warnings += capture_warning(figs, p, device.memory_bytes)
            held_spec, held_settings, held_device = spec, run.settings, device
            warnings += after_loading_warning(
                figs, p, lambda gap: plan(held_spec, replace(held_device, memory_bytes=held_device.memory_bytes - gap),
                                          held_settings), device.memory_bytes, launcher(log))
        if figs.other_processes_gib:
            rows.append(row("other processes on the GPU at the out-of-memory error (GiB)", figs.other_processes_gib, 0.0))
            warnings.append(f"the out-of-memory message lists other processes holding {figs.other_processes_gib:.2f} GiB "
                            "on the GPU (under trtllm-bench or the LLM API, the launching process's own CUDA context; or "
                            "another program): TensorRT-LLM's profiling counts them as memory outside torch (it reads the "
                            "device's used memory), and kvbudget does not model them")
        held = held_outside(figs, p, device.memory_bytes)
        if held is not None:
            rows.append(row(HELD, *held))
            unknown = any(a.startswith("free_gpu_memory_fraction ") for a in run.assumed)
            warnings += held_warning(*held, (p.free_gpu_memory_fraction, (device.memory_bytes - p.peak_bytes) / GiB)
                                     if unknown else None)
        warnings += defaults_off(rows, run.assumed, engine_defaults(p, run.settings, run.assumed))
        if figs.started is not None:
            rows.append(starts_row(figs.started, p.starts))
    recomputed = check_trtllm_log(log)
    if not rows and not recomputed:
        said = unrecomputable(log)
        raise InputError((said.replace("compare it with kvbudget fit MODEL --gpu G --engine trtllm",
                                       "give --model and --gpu to compare it with kvbudget's prediction")
                          .replace("kvbudget fit MODEL --gpu G --engine trtllm says",
                                   "give --model and --gpu: kvbudget's prediction says"))
                         if said else "no TensorRT-LLM KV cache figures ('Allocated ... for max tokens in paged KV "
                         "cache') found in the log")
    return OtherCheck(engine="TensorRT-LLM", model=spec.name if spec is not None and device is not None else None,
                      gpu=device.name if device is not None and spec is not None else None,
                      release=run.settings.release or "current", settings=settings_items(run.settings, TrtllmSettings()),
                      read_from=run.read_from, rows=tuple(rows), recomputed=tuple(recomputed), notes=tuple(notes),
                      warnings=tuple(dict.fromkeys(warnings)), plan=summary(p) if p is not None else None,
                      device_bytes=device.memory_bytes if device is not None else None, assumed=run.assumed)
