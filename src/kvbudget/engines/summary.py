"""One row per engine: the figures every engine's plan has, for `compare` and the common JSON keys."""

from __future__ import annotations

from .._record import record
from ..hardware import GPU
from ..model.spec import ModelSpec

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


def vllm_row(p: VllmPlan) -> EngineRow:
    return EngineRow(
        "vllm", p.weights_bytes, p.available_kv_cache_bytes, p.kv_cache_tokens, p.max_concurrency, p.max_model_len,
        p.starts, f"{p.utilization:g} x total memory, minus the profiled weights, activations and CUDA graphs",
        f"blocks of {p.block_size} tokens",
    )


def sglang_row(p: SGLangPlan) -> EngineRow:
    return EngineRow(
        "sglang", p.weights_bytes, max(p.rest_bytes, 0), p.max_total_num_tokens, p.max_concurrency, p.context_len,
        p.starts, f"free memory after weights minus (1 - {p.mem_fraction_static:g}) x free memory before loading",
        f"pages of {p.page_size:,} token" + ("" if p.page_size == 1 else "s"),
    )


def trtllm_row(p: TrtllmPlan) -> EngineRow:
    return EngineRow(
        "trtllm", p.weights_bytes, p.available_bytes, p.max_tokens, p.max_concurrency, p.max_seq_len, p.starts,
        "0.9 x the memory left after the profiled peak", f"blocks of {p.tokens_per_block} tokens",
    )


def llamacpp_row(p: LlamaCppPlan, context: int | None = None) -> EngineRow:
    """Requests at once: the slots (-np), as far as the cells hold ``context`` tokens each."""
    tokens = p.cells * p.n_stream
    length = context or p.n_ctx_seq
    per_slot = p.cells // length if p.unified else (p.n_seq_max if p.n_ctx_seq >= length else 0)
    return EngineRow(
        "llama.cpp", p.weights_gpu_bytes, p.kv_gpu_bytes, tokens, float(min(p.n_seq_max, per_slot)),
        length, p.fits, "exactly n_ctx cells (-c); llama-server auto-fits n_ctx to free memory minus 1 GiB, 4 slots",
        "cells (n_ctx padded to 256)",
    )


def compare(spec: ModelSpec, gpu: GPU, context: int, tp: int = 1, kv_dtype: str = "auto") -> tuple[EngineRow, ...]:
    """The same model, GPU and context under each engine's defaults."""
    from . import llamacpp, sglang, trtllm, vllm

    rows = [
        vllm_row(vllm.plan(spec, gpu, vllm.VllmSettings(max_model_len=context, tensor_parallel_size=tp,
                                                        kv_cache_dtype=kv_dtype))),
        sglang_row(sglang.plan(spec, gpu, sglang.SGLangSettings(context_length=context, tp=tp,
                                                                kv_cache_dtype="fp8_e4m3" if kv_dtype.startswith("fp8") else "auto"))),
        trtllm_row(trtllm.plan(spec, gpu, trtllm.TrtllmSettings(tp=tp, kv_cache_dtype=kv_dtype, max_seq_len=context))),
    ]
    if tp == 1:
        ctk = "q8_0" if kv_dtype.startswith("fp8") else "f16"
        rows.append(llamacpp_row(llamacpp.plan(spec, gpu, llamacpp.LlamaCppSettings(
            n_ctx=0, type_k=ctk, type_v=ctk, flash_attn="on")), context))
        if not kv_dtype.startswith("fp8"):  # transformers has no fp8 cache
            from . import transformers_engine

            rows.append(transformers_engine.row(transformers_engine.plan(spec, gpu, 1, context)))
    return tuple(rows)
