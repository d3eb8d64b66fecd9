"""The ``kv`` question: bytes per token by layer kind, per sequence, and the B x S table."""

from __future__ import annotations

from collections.abc import Sequence

from ._record import record
from .kvcache import MAX_BATCH, MAX_CONTEXT, bytes_per_sequence, bytes_per_token, check_positive, check_tp, kv_element_type
from .model.layers import Layer
from .model.spec import ModelSpec

DEFAULT_CONTEXTS = (2048, 4096, 8192, 32768, 131072)
DEFAULT_BATCHES = (1, 8, 16, 32, 64)


@record
class KindRow:
    """Layers of one kind and shape, with their bytes."""

    kind: str
    layers: int
    detail: str
    bytes_per_token: int  # per token, all these layers together
    tokens_held: int  # tokens each of these layers keeps for the requested context
    bytes_per_sequence: int  # all these layers together, one sequence of the requested context


@record
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
    notes: tuple[str, ...] = ()  # how the model's config was read


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
    context = min(spec.max_context, MAX_CONTEXT) if context is None else context
    check_positive("--context", context, MAX_CONTEXT)
    check_positive("--batch", batch, MAX_BATCH)
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
        notes=spec.notes,
    )
