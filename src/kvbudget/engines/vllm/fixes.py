"""Flags that would make a vLLM deployment start, or hold more: each one re-planned."""

from __future__ import annotations

from ..._record import replace
from ...hardware import GPU
from ...model.spec import ModelSpec
from ...units import InputError
from .levers import FP8_KV_DTYPES
from .policy import VllmPlan, plan
from .settings import VllmSettings, auto_fit_read


def suggestions(spec: ModelSpec, gpu: GPU, settings: VllmSettings, current: VllmPlan) -> list[tuple[str, VllmPlan]]:
    """Alternatives worth trying when the plan does not start or holds less than one request
    (or few), each with vLLM's figures for it."""
    if current.starts and current.max_concurrency >= 4:
        return []
    options: list[tuple[str, VllmSettings]] = []
    if current.estimated_max_model_len:
        options.append((f"--max-model-len {current.estimated_max_model_len}",
                        replace(settings, max_model_len=current.estimated_max_model_len)))
    elif not current.starts and auto_fit_read(settings.version):  # a release before 0.14 refuses the word
        options.append(("--max-model-len auto", replace(settings, max_model_len=-1)))
    if current.kv_cache_dtype not in FP8_KV_DTYPES and gpu.fp8 is not False:
        options.append(("--kv-cache-dtype fp8", replace(settings, kv_cache_dtype="fp8")))
    tp = settings.tensor_parallel_size * 2
    if spec.dims.num_attention_heads % tp == 0 and tp <= 8:
        options.append((f"--tensor-parallel-size {tp}", replace(settings, tensor_parallel_size=tp)))
    util = current.utilization
    if util < 0.95:
        options.append(("--gpu-memory-utilization 0.95", replace(settings, gpu_memory_utilization=0.95)))
    if not settings.enforce_eager and current.cudagraph_bytes:
        options.append(("--enforce-eager", replace(settings, enforce_eager=True)))
    if settings.quantization in (None, "", "auto") and not current.weights_format.startswith(("fp8", "awq", "gptq", "mxfp4", "nvfp4", "int8", "nf4")):
        options.append(("--quantization fp8", replace(settings, quantization="fp8")))
    out: list[tuple[str, VllmPlan]] = []
    for flags, alt in options:
        try:
            out.append((flags, plan(spec, gpu, alt)))
        except InputError:
            continue
    return out
