"""What each lever buys under vLLM's own rules: one deployment re-planned for each change a user can make, with
the KV-cache bytes per GPU it frees (or costs) and the requests of the context it adds.

Levers: FP8 weights, 4-bit (AWQ) weights, an FP8 KV cache, half the context, one more TP step, one more
replica, a smaller ``max_num_seqs`` (fewer CUDA-graph sizes, a smaller profiling batch) and
``gpu_memory_utilization`` 0.03 up or down. A lever that does not apply (already FP8, TP already at the
heads' limit) is left out; one that stops the deployment from starting says so.
"""

from __future__ import annotations

from ..._record import replace
from ...hardware import GPU
from ...model.spec import ModelSpec
from ...units import InputError
from ..base import Lever
from .policy import VllmPlan, capacity, plan, weight_format
from .settings import VllmSettings

FP8_KV_DTYPES = ("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_ds_mla")  # vLLM's 8-bit caches (cache_dtype choices, 0.33.0)


def _concurrency(p: VllmPlan) -> int:
    if not p.starts:
        return 0
    pool, _ = capacity(p, 1)
    return min(pool, p.max_num_seqs)


def levers(spec: ModelSpec, gpu: GPU, base: VllmSettings, gpus_per_node: int | None = None) -> tuple[Lever, list[Lever]]:
    """The baseline as a row, and one row per lever that applies (TP steps within ``gpus_per_node``, by default
    the node the GPU comes in)."""
    gpus_per_node = gpus_per_node or gpu.gpus_per_node
    if base.max_model_len is None or base.max_model_len < 1:
        raise InputError("levers need a context (--context)")
    p0 = plan(spec, gpu, base)
    n0 = base.tensor_parallel_size * base.pipeline_parallel_size * base.data_parallel_size
    c0 = _concurrency(p0) * base.data_parallel_size

    out: list[Lever] = []

    def add(name: str, flag: str, s: VllmSettings) -> None:
        """One lever's row; a lever vLLM refuses outright (TP that does not split the KV heads ...) is left out."""
        try:  # noqa: SIM105 - contextlib costs a millisecond of start-up that `fit` pays
            out.append(row(name, flag, s))
        except InputError:
            pass

    def row(name: str, flag: str, s: VllmSettings, note: str = "") -> Lever:
        p = plan(spec, gpu, s)
        n = s.tensor_parallel_size * s.pipeline_parallel_size * s.data_parallel_size
        c = _concurrency(p) * s.data_parallel_size
        return Lever(name, flag, n, p.available_kv_cache_bytes, p.available_kv_cache_bytes - p0.available_kv_cache_bytes,
                     p.weights_bytes, c, c - c0, p.max_model_len, p.starts, note or (p.error or ""))

    baseline = Lever("as configured", "", n0, p0.available_kv_cache_bytes, 0, p0.weights_bytes, c0, 0,
                     p0.max_model_len, p0.starts, p0.error or "")
    if not weight_format(spec, base).quantized:  # a 16- or 32-bit checkpoint: the smaller formats are levers
        add("FP8 weights", "--quantization fp8", replace(base, quantization="fp8"))
        add("4-bit weights (AWQ)", "an AWQ checkpoint", replace(base, quantization="auto_awq"))
    if p0.kv_cache_dtype not in FP8_KV_DTYPES:
        add("FP8 KV cache", "--kv-cache-dtype fp8", replace(base, kv_cache_dtype="fp8"))
    half = base.max_model_len // 2
    if half >= 1:
        add("half the context", f"--max-model-len {half}", replace(base, max_model_len=half))
    tp = base.tensor_parallel_size * 2
    if tp <= gpus_per_node:
        add("one more TP step", f"--tensor-parallel-size {tp}", replace(base, tensor_parallel_size=tp))
    add("one more replica", f"--data-parallel-size {base.data_parallel_size + 1}",
        replace(base, data_parallel_size=base.data_parallel_size + 1))
    if p0.max_num_seqs > 64:
        seqs = max(p0.max_num_seqs // 4, 1)
        add("smaller max_num_seqs", f"--max-num-seqs {seqs}", replace(base, max_num_seqs=seqs))
    util = p0.utilization
    for delta in (0.03, -0.03):
        u = round(util + delta, 2)
        if 0 < u < 1:
            add(f"gpu_memory_utilization {u}", f"--gpu-memory-utilization {u}", replace(base, gpu_memory_utilization=u))
    return baseline, out
