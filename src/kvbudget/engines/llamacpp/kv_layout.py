"""What llama.cpp's KV cache is made of, per layer: the K and V widths (n_embd_k_gqa, n_embd_v_gqa), recurrent
state rows, and ggml's row sizes in each cache type (``src/llama-kv-cache.cpp``, ``src/llama-memory-recurrent.cpp``,
``ggml_row_size``). ``policy.py`` lays these out over cells, streams and devices; ``check.py`` recomputes a log's
caches from them."""

from __future__ import annotations

from functools import lru_cache

from ...model.layers import MLA, ChunkedLocal, FullAttention, Layer, RecurrentState, SlidingWindow
from ...model.spec import ModelSpec
from ...units import InputError, element_type


@lru_cache(maxsize=1024, typed=True)  # pure and asked per layer of every plan: a few (type, width) pairs per model
def row_bytes(type_name: str, n: int) -> int:
    """ggml_row_size: bytes of a row of ``n`` elements."""
    t = element_type({"f32": "fp32", "f16": "fp16", "bf16": "bf16"}.get(type_name, type_name))
    if n % t.block_elems:
        raise InputError(f"a row of {n} elements is not a whole number of {type_name} blocks")
    return t.nbytes(n)


def _kv_dims(layer: Layer) -> tuple[int, int]:
    """n_embd_k_gqa and n_embd_v_gqa of a layer (MLA: K only)."""
    if isinstance(layer, MLA):
        return layer.kv_lora_rank + layer.qk_rope_head_dim, 0
    if isinstance(layer, FullAttention):
        return layer.num_kv_heads * layer.head_dim, layer.num_kv_heads * layer.v_dim
    return 0, 0


def _recurrent_row(layer: RecurrentState) -> int:
    """f32 elements of one cell: conv state (n_embd_r) + SSM state (n_embd_s)."""
    return (layer.conv_kernel - 1) * layer.conv_dim + layer.state_heads * layer.state_elems_per_head


# What follows depends on the model (and the build's rules), never on the GPU or the context: memoized (bounded,
# typed, immutable results), so a plan search over GPU types and slot counts works each out once per model.
@lru_cache(maxsize=16, typed=True)
def _cache_layers(spec: ModelSpec, mla_v: bool) -> tuple[tuple[int, int, int, int, bool, int], ...]:
    """Each layer that keeps something, in order: (decoder layer, f32 state bytes of one cell (recurrent; else 0),
    n_embd_k_gqa, n_embd_v_gqa, sliding, window or chunk). ``mla_v``: the build gives MLA a V tensor."""
    out = []
    for layer, il in zip(spec.layers, spec.layer_of, strict=True):
        if isinstance(layer, RecurrentState):
            out.append((il, _recurrent_row(layer) * 4, 0, 0, False, 0))
            continue
        dk, dv = _kv_dims(layer)
        if not dk:
            continue
        if isinstance(layer, MLA) and mla_v:
            dv = layer.kv_lora_rank
        sliding = isinstance(layer, (SlidingWindow, ChunkedLocal))
        w = (layer.window if isinstance(layer, SlidingWindow) else layer.chunk) if sliding else 0  # type: ignore[union-attr]
        out.append((il, 0, dk, dv, sliding, w))
    return tuple(out)


@lru_cache(maxsize=16, typed=True)
def _has_state(spec: ModelSpec) -> bool:
    return any(isinstance(x, RecurrentState) for x in spec.layers)
