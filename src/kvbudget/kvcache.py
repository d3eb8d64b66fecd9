"""KV-cache arithmetic over a model's layers: per token, per sequence, and the B x S table.

Everything here asks the layer kinds (``model/layers.py``) for their bytes and sums; it adds no
rule of its own beyond choosing the cache dtype.
"""

from __future__ import annotations

from collections.abc import Sequence

from .inputs import whole
from .model.layers import Layer, RecurrentState
from .model.spec import ModelSpec
from .units import ElementType, InputError, element_type


def serving_dtype(spec: ModelSpec) -> str:
    """The activation/KV dtype an engine runs with ``dtype=auto``: the checkpoint's, except
    that float32 checkpoints are served in bfloat16 (vLLM ``config/model.py:
    _resolve_auto_dtype`` downcasts float32 to the platform's first supported dtype)."""
    return "bf16" if spec.native_dtype == "fp32" else spec.native_dtype


def kv_element_type(spec: ModelSpec, kv_dtype: str = "auto") -> ElementType:
    """The KV-cache element type; ``auto`` follows the model's serving dtype."""
    return element_type(serving_dtype(spec) if kv_dtype.strip().lower() == "auto" else kv_dtype)


def bytes_per_token(layers: Sequence[Layer], dtype: ElementType, tp: int = 1) -> int:
    """Bytes one more token adds while every window is still filling."""
    return sum(layer.bytes_per_token(dtype, tp) for layer in layers)


def bytes_per_sequence(layers: Sequence[Layer], seq_len: int, dtype: ElementType, tp: int = 1) -> int:
    """Bytes one sequence of ``seq_len`` tokens holds across ``layers`` (per TP rank)."""
    return sum(layer.bytes_per_sequence(seq_len, dtype, tp) for layer in layers)


def check_positive(name: str, value: int, limit: int) -> None:
    """A whole number from 1 to ``limit`` (the limit: beyond any real deployment)."""
    whole(value, name, 1, limit)


MAX_CONTEXT = 1 << 27  # 134M tokens
MAX_BATCH = 1 << 20
MAX_PARALLEL = 1024  # TP or PP degree, GPUs in a deployment


def tp_layers(spec: ModelSpec) -> tuple[Layer, ...]:
    """The layers ``check_tp`` must look at: the first of each KV-head count and each distinct recurrent state, in
    layer order. Walking them refuses a TP degree with the same first error as walking every layer, so a search that
    checks many degrees on one model gathers them once."""
    seen: dict[tuple[int, Layer | None], Layer] = {}
    for layer in spec.layers:
        key = (getattr(layer, "num_kv_heads", 0), layer if isinstance(layer, RecurrentState) else None)
        seen.setdefault(key, layer)
    return tuple(seen.values())


def check_tp(spec: ModelSpec, tp: int, layers: Sequence[Layer] | None = None) -> None:
    """TP must split the attention heads evenly, and split or replicate the KV heads. ``layers``: ``tp_layers(spec)``
    where the caller has it (every layer of ``spec`` otherwise)."""
    check_positive("--tp", tp, MAX_PARALLEL)
    heads = spec.dims.num_attention_heads
    if heads % tp:
        divisors = [d for d in range(1, min(heads, 64) + 1) if heads % d == 0]
        raise InputError(
            f"--tp {tp} does not divide the {heads} attention heads of {spec.name}: use one of {divisors}"
        )
    for layer in spec.layers if layers is None else layers:
        kv = getattr(layer, "num_kv_heads", 0)
        if kv and kv % tp and tp % kv:
            raise InputError(f"--tp {tp} neither divides nor is a multiple of the {kv} KV heads of {spec.name}")
        state = layer if isinstance(layer, RecurrentState) else None
        if state is not None and (said := _state_split(state, tp)):
            fits = [d for d in range(1, 65) if heads % d == 0 and not _state_split(state, d)]
            raise InputError(f"--tp {tp} does not divide the {said} of {spec.name} (the engine stops at start-up): "
                             f"use one of {fits}")


def check_indexer_priced(spec: ModelSpec, engine: str) -> None:
    """Refuse a model with a DeepSeek sparse attention (DSA) indexer cache on an engine whose layout of it kvbudget
    does not model (one clear line rather than a figure without the indexer's keys)."""
    from .model.layers import SparseIndexer

    if any(isinstance(x, SparseIndexer) for x in spec.layers):
        raise InputError(f"{spec.name} uses DeepSeek sparse attention: kvbudget does not model how {engine} caches "
                         "its indexer keys; use --engine vllm or --engine sglang")


def _state_split(layer: RecurrentState, tp: int) -> str:
    """What of a Mamba / GatedDeltaNet layer ``tp`` ranks cannot split ("" when they can): vLLM 0.33.0 mamba_utils.py
    MambaStateShapeCalculator divides its heads and its convolution channels by TP (``divide`` asserts), Mamba-2's
    B/C groups first replicated up to whole groups per rank."""
    extra = 0 if not layer.groups or layer.groups % tp == 0 else tp - layer.groups
    for count, what in ((layer.state_heads, "state heads"),
                        (layer.conv_dim + 2 * extra * layer.group_state, "convolution channels")):
        if count % tp:
            return f"{count:,} {layer.variant} {what}"
    return ""
