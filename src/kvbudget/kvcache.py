"""KV-cache arithmetic over a model's layers: per token, per sequence, and the B x S table.

Everything here asks the layer kinds (``model/layers.py``) for their bytes and sums; it adds no
rule of its own beyond choosing the cache dtype.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .model.layers import Layer
from .model.spec import ModelSpec
from .units import ElementType, InputError, element_type

DEFAULT_CONTEXTS = (2048, 4096, 8192, 32768, 131072)
DEFAULT_BATCHES = (1, 8, 16, 32, 64)


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


@dataclass(frozen=True)
class KindRow:
    """Layers of one kind and shape, with their bytes."""

    kind: str
    layers: int
    detail: str
    bytes_per_token: int  # per token, all these layers together
    tokens_held: int  # tokens each of these layers keeps for the requested context
    bytes_per_sequence: int  # all these layers together, one sequence of the requested context


@dataclass(frozen=True)
class KVReport:
    """KV-cache bytes of one model for a cache dtype and TP degree (figures are per GPU)."""

    model: str
    params: int
    kv_dtype: str
    tp: int
    context: int
    batch: int
    rows: tuple[KindRow, ...]
    bytes_per_token: int
    bytes_per_sequence: int
    total_bytes: int
    contexts: tuple[int, ...]
    batches: tuple[int, ...]
    table: tuple[tuple[int, ...], ...]  # table[i][j]: batches[i] sequences of contexts[j] tokens
    max_context: int
    warnings: tuple[str, ...] = ()


def _check_positive(name: str, value: int, limit: int) -> None:
    if value <= 0:
        raise InputError(f"{name} must be a positive integer, got {value}")
    if value > limit:
        raise InputError(f"{name} {value:,} is beyond any real deployment (limit {limit:,})")


MAX_CONTEXT = 1 << 27  # 134M tokens
MAX_BATCH = 1 << 20


def check_tp(spec: ModelSpec, tp: int) -> None:
    """TP must split the attention heads evenly, and split or replicate the KV heads."""
    _check_positive("--tp", tp, 1024)
    heads = spec.dims.num_attention_heads
    if heads % tp:
        divisors = [d for d in range(1, heads + 1) if heads % d == 0 and d <= 64]
        raise InputError(
            f"--tp {tp} does not divide the {heads} attention heads of {spec.name}: use one of {divisors}"
        )
    for layer in spec.layers:
        kv = getattr(layer, "num_kv_heads", 0)
        if kv and kv % tp and tp % kv:
            raise InputError(f"--tp {tp} neither divides nor is a multiple of the {kv} KV heads of {spec.name}")


def kv_report(
    spec: ModelSpec,
    context: int | None = None,
    batch: int = 1,
    kv_dtype: str = "auto",
    tp: int = 1,
    contexts: Sequence[int] | None = None,
    batches: Sequence[int] | None = None,
) -> KVReport:
    """Bytes per token by layer kind, bytes per sequence, and total KV over batches x contexts."""
    context = spec.max_context if context is None else context
    _check_positive("--context", context, MAX_CONTEXT)
    _check_positive("--batch", batch, MAX_BATCH)
    check_tp(spec, tp)
    dtype = kv_element_type(spec, kv_dtype)
    groups: dict[tuple[str, str], list[Layer]] = {}
    for layer in spec.layers:
        groups.setdefault((layer.kind, layer.describe()), []).append(layer)
    rows = tuple(
        KindRow(
            kind=kind,
            layers=len(layers),
            detail=detail,
            bytes_per_token=bytes_per_token(layers, dtype, tp),
            tokens_held=layers[0].tokens_held(context),
            bytes_per_sequence=bytes_per_sequence(layers, context, dtype, tp),
        )
        for (kind, detail), layers in groups.items()
    )
    ctxs = tuple(sorted({c for c in (contexts or DEFAULT_CONTEXTS) if c <= spec.max_context} | {context}))
    bs = tuple(sorted(set(batches or DEFAULT_BATCHES) | {batch}))
    per_seq = {c: bytes_per_sequence(spec.layers, c, dtype, tp) for c in ctxs}
    warnings = []
    if context > spec.max_context:
        warnings.append(f"context {context:,} is beyond the model's max_position_embeddings {spec.max_context:,}")
    return KVReport(
        model=spec.name,
        params=spec.params,
        kv_dtype=dtype.name,
        tp=tp,
        context=context,
        batch=batch,
        rows=rows,
        bytes_per_token=bytes_per_token(spec.layers, dtype, tp),
        bytes_per_sequence=per_seq[context],
        total_bytes=batch * per_seq[context],
        contexts=ctxs,
        batches=bs,
        table=tuple(tuple(b * per_seq[c] for c in ctxs) for b in bs),
        max_context=spec.max_context,
        warnings=tuple(warnings),
    )
