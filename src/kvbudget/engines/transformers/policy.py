"""Plain Hugging Face transformers (``model.generate`` on one GPU): the weights in the model's dtype,
the cache exactly as ``kv_layout`` sizes it, and an estimate of the prefill's activations.

There is no budget rule: transformers takes memory as it goes. A dynamic cache grows with every token,
a static one is allocated for ``max_cache_len`` up front. The prefill runs the whole prompt of every
sequence in one forward pass (no chunking), which is what the activation estimate covers
(``textbook.activation_bytes`` with ``batch x context`` tokens; SDPA attention, no score matrix).
"""

from __future__ import annotations

from ..._record import record
from ...hardware import GPU
from ...kvcache import check_indexer_priced
from ...model.spec import ModelSpec, checkpoint_format
from ...model.weights import WeightFormat
from ...units import GiB, InputError, element_type, plural
from ..textbook import CUDA_CONTEXT_BYTES, activation_bytes
from . import kv_layout

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from ..base import EnginePlan


@record
class TransformersPlan:
    model: str
    gpu: str
    kind: str
    dtype: str
    batch: int
    context: int
    weights_bytes: int
    cache_bytes: int  # the cache at ``context`` tokens per sequence
    cache_per_sequence_bytes: int
    activation_bytes: int
    overhead_bytes: int
    total_bytes: int
    max_batch: int  # sequences of ``context`` tokens that fit beside the weights
    starts: bool
    fits: bool
    notes: tuple[str, ...]


def check_dtype(dtype: str) -> str:
    """A --weights-dtype transformers loads the model in (fp32, fp16, bf16), or one InputError."""
    name = element_type(dtype).name
    if name not in ("fp32", "fp16", "bf16"):
        raise InputError(f"transformers runs the model in fp32, fp16 or bf16, not {dtype}")
    return name


def plan(spec: ModelSpec, gpu: GPU, batch: int, context: int, dtype: str = "auto", kind: str = "dynamic") -> TransformersPlan:
    check_indexer_priced(spec, "transformers")
    if batch < 1 or context < 1:
        raise InputError("batch and context must be at least 1")
    name = spec.native_dtype if dtype.strip().lower() == "auto" else check_dtype(dtype)
    fmt = checkpoint_format(spec, "fix the config.json (transformers loads the checkpoint as it is stored)")
    if not fmt.quantized and fmt.name != "stored":
        fmt = WeightFormat(name, dense_dtype=name)
    weights = sum(fmt.tensor_bytes(t) for t in spec.inventory.tensors())
    cache = kv_layout.plan(spec, batch, context, name, kind)
    one = kv_layout.plan(spec, 1, context, name, kind)
    act = activation_bytes(spec, batch * context, batch, 1, True)
    total = weights + cache.total + act + CUDA_CONTEXT_BYTES
    free = gpu.memory_bytes - weights - CUDA_CONTEXT_BYTES
    per_seq = one.total + activation_bytes(spec, context, 1, 1, True)
    max_batch = max(free // per_seq, 0) if per_seq else 0
    fits = total <= gpu.memory_bytes
    notes = [
        f"the cache of the {plural(batch, 'requested sequence')} of {context:,} tokens: {cache.total:,} B = "
        f"{cache.total / GiB:.2f} GiB ({kind})",
        f"total {total / GiB:.2f} GiB of {gpu.memory_bytes / GiB:.2f} GiB: weights + cache + prefill activations + CUDA "
        f"context ({'fits' if fits else 'does not fit'})",
        *cache.notes,
        f"activations: an estimate of one unchunked prefill of {batch} x {context:,} tokens (SDPA attention)",
        f"CUDA context: {CUDA_CONTEXT_BYTES / GiB:.1f} GiB assumed",
    ]
    return TransformersPlan(
        model=spec.name, gpu=gpu.name, kind=kind, dtype=name, batch=batch, context=context, weights_bytes=weights,
        cache_bytes=cache.total, cache_per_sequence_bytes=one.total, activation_bytes=act,
        overhead_bytes=CUDA_CONTEXT_BYTES, total_bytes=total, max_batch=int(max_batch),
        starts=free > 0, fits=fits, notes=tuple(notes),
    )


def row(p: TransformersPlan) -> EnginePlan:
    """The figures every engine has, from a transformers plan."""
    from ..base import Part, engine_plan

    rule = ("grows by one token per sequence per step (DynamicCache)" if p.kind == "dynamic"
            else "allocated for max_cache_len up front (StaticCache)")
    # the cache of as many sequences as fit (no budget rule: memory is taken until it runs out)
    return engine_plan("transformers", p.weights_bytes, p.max_batch * p.cache_per_sequence_bytes, p.max_batch * p.context,
                     float(p.max_batch), p.context, p.starts, rule + "; no budget: sequences until memory runs out, "
                     "each with its unchunked prefill", "one K and one V tensor per layer",
                     parts=(Part("weights", p.weights_bytes, "modelled"), Part("cache", p.cache_bytes, "modelled"),
                            Part("prefill activations", p.activation_bytes, "estimate"),
                            Part("CUDA context", p.overhead_bytes, "estimate")))


# --- the engine interface (engines/base.py) ---------------------------------------------------------------

