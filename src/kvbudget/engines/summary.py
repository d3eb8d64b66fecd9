"""One row per engine: the figures every engine's plan has, for `compare` and the common JSON keys."""

from __future__ import annotations

from .._record import record
from ..hardware import GPU
from ..model.spec import ModelSpec
from ..units import plural

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from .llamacpp import LlamaCppPlan
    from .sglang import SGLangPlan
    from .trtllm import TrtllmPlan
    from .vllm import VllmPlan


@record
class EngineRow:
    engine: str
    weights_bytes: int  # per GPU
    kv_budget_bytes: int  # what the engine gives the KV cache, per GPU
    kv_tokens: int  # tokens the pool holds (per engine instance)
    max_concurrency: float  # requests of the context at once
    context: int
    starts: bool
    budget_rule: str  # how the engine decides the budget
    unit: str  # the allocation unit


def row(engine: str, weights: int, kv_budget: int, kv_tokens: int, concurrency: float, context: int, starts: bool,
        rule: str, unit: str) -> EngineRow:
    """A row as the user reads it: an engine that does not start holds no KV cache, no token and no request
    (its own signed figures stay in its plan), and a budget is never negative."""
    if not starts:
        kv_budget, kv_tokens, concurrency = 0, 0, 0.0
    return EngineRow(engine, weights, max(kv_budget, 0), kv_tokens, concurrency, context, starts, rule, unit)


def vllm_row(p: VllmPlan) -> EngineRow:
    return row(
        "vllm", p.weights_bytes, p.available_kv_cache_bytes, p.kv_cache_tokens, p.max_concurrency, p.max_model_len,
        p.starts, f"{p.utilization:g} x total memory, minus the profiled weights, activations and CUDA graphs",
        f"blocks of {p.block_size} tokens",
    )


def sglang_row(p: SGLangPlan) -> EngineRow:
    return row(
        "sglang", p.weights_bytes, p.rest_bytes, p.max_total_num_tokens, p.max_concurrency, p.context_len,
        p.starts, f"free memory after weights minus (1 - {p.mem_fraction_static:.4g}) x free memory before loading",
        f"pages of {plural(p.page_size, 'token')}",
    )


def trtllm_row(p: TrtllmPlan) -> EngineRow:
    return row(
        "trtllm", p.weights_bytes, p.available_bytes, p.max_tokens, p.max_concurrency, p.max_seq_len, p.starts,
        "0.9 x the memory left after the profiled peak", f"blocks of {p.tokens_per_block} tokens",
    )


def llamacpp_row(p: LlamaCppPlan, context: int | None = None) -> EngineRow:
    """Requests at once: the slots (-np), as far as the cells hold ``context`` tokens each."""
    tokens = p.cells * p.n_stream
    length = context or p.n_ctx_seq
    per_slot = p.cells // length if p.unified else (p.n_seq_max if p.n_ctx_seq >= length else 0)
    weights, kv = p.weights_gpu_bytes, p.kv_gpu_bytes
    if len(p.device_bytes) > 1:  # layers split over GPUs: the fullest GPU's share
        k = max(range(len(p.device_bytes)), key=lambda d: p.device_bytes[d])
        kv = p.kv_device_bytes[k]
        weights = max(p.device_bytes[k] - kv - p.compute_bytes, 0)
    return row(
        "llama.cpp", weights, kv, tokens, float(min(p.n_seq_max, per_slot)),
        length, p.fits, "exactly n_ctx cells (-c); llama-server auto-fits n_ctx to free memory minus 1 GiB, 4 slots",
        "cells (n_ctx padded to 256)",
    )


def compare(spec: ModelSpec, gpu: GPU, context: int, tp: int = 1, kv_dtype: str = "auto",
            pp: int = 1) -> tuple[tuple[EngineRow, ...], tuple[tuple[str, str], ...]]:
    """The same model, GPU and context under each engine's defaults: the rows, and the engines left out
    with the reason. An engine that does not start holds no tokens and no requests."""
    from . import llamacpp, sglang, trtllm, vllm

    fp8 = kv_dtype.startswith("fp8")
    rows = [
        vllm_row(vllm.plan(spec, gpu, vllm.VllmSettings(max_model_len=context, tensor_parallel_size=tp,
                                                        pipeline_parallel_size=pp, kv_cache_dtype=kv_dtype))),
        sglang_row(sglang.plan(spec, gpu, sglang.SGLangSettings(context_length=context, tp=tp, pp=pp,
                                                                kv_cache_dtype="fp8_e4m3" if fp8 else "auto"))),
        trtllm_row(trtllm.plan(spec, gpu, trtllm.TrtllmSettings(tp=tp, pp=pp, kv_cache_dtype=kv_dtype, max_seq_len=context))),
    ]
    omitted: list[tuple[str, str]] = []
    ctk = "q8_0" if fp8 else "f16"
    # llama.cpp has no tensor parallelism: over several GPUs it splits the layers (-sm layer, -ts even)
    rows.append(llamacpp_row(llamacpp.plan(spec, gpu, llamacpp.LlamaCppSettings(
        n_ctx=0, type_k=ctk, type_v=ctk, flash_attn="on", devices=tp * pp)), context))
    if fp8:
        omitted.append(("transformers", "its KV caches hold the model's dtype; there is no fp8 cache"))
    elif tp * pp > 1:
        omitted.append(("transformers", "plain generate runs on one GPU here (kvbudget does not model device_map splits)"))
    else:
        from . import transformers_engine

        rows.append(transformers_engine.row(transformers_engine.plan(spec, gpu, 1, context)))
    return tuple(rows), tuple(omitted)
