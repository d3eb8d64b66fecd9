"""What llama.cpp's KV cache is made of, per layer: the K and V widths (n_embd_k_gqa, n_embd_v_gqa), recurrent
state rows, and ggml's row sizes in each cache type (``src/llama-kv-cache.cpp``, ``src/llama-memory-recurrent.cpp``,
``ggml_row_size``). ``policy.py`` lays these out over cells, streams and devices; ``check.py`` recomputes a log's
caches from them."""

from __future__ import annotations

from functools import lru_cache

from ..._record import record
from ...model.layers import MLA, ChunkedLocal, FullAttention, Layer, RecurrentState, SlidingWindow
from ...model.spec import ModelSpec
from ...units import InputError, element_type
from .calibration import mla_latent


@lru_cache(maxsize=1024, typed=True)  # pure and asked per layer of every plan: a few (type, width) pairs per model
def row_bytes(type_name: str, n: int) -> int:
    """ggml_row_size: bytes of a row of ``n`` elements."""
    t = element_type({"f32": "fp32", "f16": "fp16", "bf16": "bf16"}.get(type_name, type_name))
    if n % t.block_elems:
        raise InputError(f"a row of {n} elements is not a whole number of {type_name} blocks")
    return t.nbytes(n)


@record
class CacheLayer:
    """What llama.cpp keeps for one layer: the f32 bytes of one recurrent cell (0: an attention layer), the K and
    V row widths (n_embd_k_gqa, n_embd_v_gqa) and, for a layer in the SWA cache, its window (0: the full cache)."""

    layer: int  # its decoder layer
    state_bytes: int
    k_width: int
    v_width: int
    sliding: bool
    window: int


def cache_layer(layer: Layer, il: int, mla_v: bool, mla_latent: bool) -> CacheLayer | None:
    """The one place a layer kind becomes llama.cpp's cache rule (None: it keeps nothing). Chunked local attention
    goes to the SWA cache with its chunk as the window; MLA keeps one K row (latent + rope), and a V row of the
    latent where the build gives MLA a V tensor (``mla_v``); a build before llama.cpp's MLA cache (``mla_latent``
    false: before b5137, ``calibration.mla_latent``) keeps every head's decompressed K and V instead."""
    if isinstance(layer, RecurrentState):
        # f32 elements of one cell: conv state (n_embd_r) + SSM state (n_embd_s)
        row = (layer.conv_kernel - 1) * layer.conv_dim + layer.state_heads * layer.state_elems_per_head
        return CacheLayer(il, row * 4, 0, 0, False, 0)
    if isinstance(layer, MLA) and not mla_latent:
        heads = layer.decompressed()
        if heads is None:
            raise InputError(f"llama.cpp builds before b5137 cache MLA as every head's K and V, and this model's MLA "
                             f"layer ({layer.describe()}) does not give its head count, qk_nope_head_dim and "
                             "v_head_dim: give its config.json, or --llamacpp-build 5137 or later")
        layer = heads
    if isinstance(layer, MLA):
        k = layer.kv_lora_rank + layer.qk_rope_head_dim
        return CacheLayer(il, 0, k, layer.kv_lora_rank if mla_v else 0, False, 0) if k else None
    if isinstance(layer, FullAttention):
        k, v = layer.num_kv_heads * layer.head_dim, layer.num_kv_heads * layer.v_dim
        if not k:
            return None
        if isinstance(layer, SlidingWindow):
            return CacheLayer(il, 0, k, v, True, layer.window)
        if isinstance(layer, ChunkedLocal):
            return CacheLayer(il, 0, k, v, True, layer.chunk)
        return CacheLayer(il, 0, k, v, False, 0)
    return None


# What follows depends on the model (and the build's rules), never on the GPU or the context: memoized (bounded,
# typed, immutable results), so a plan search over GPU types and slot counts works each out once per model.
@lru_cache(maxsize=16, typed=True)
def _cache_layers(spec: ModelSpec, mla_v: bool, mla_latent: bool) -> tuple[tuple[int, int, int, int, bool, int], ...]:
    """Each layer that keeps something, in order, as the plain tuple of its ``CacheLayer`` (layer, state_bytes,
    k_width, v_width, sliding, window) that ``policy.py``'s loop over contexts unpacks. ``mla_v``: the build gives
    MLA a V tensor; ``mla_latent``: it caches MLA's latent (b5137 on). A GGUF converted for the latent cache does
    not load in a build before it: refused."""
    if not mla_latent and spec.model_type.startswith("gguf:") and any(isinstance(x, MLA) for x in spec.layers):
        raise InputError(f"{spec.name}: a GGUF made for llama.cpp's MLA cache (attention.key_length_mla) does not "
                         "load before b5137 (PR #12801): give --llamacpp-build 5137 or later, or a GGUF converted "
                         "before b5137")
    rules = (cache_layer(layer, il, mla_v, mla_latent) for layer, il in zip(spec.layers, spec.layer_of, strict=True))
    return tuple((r.layer, r.state_bytes, r.k_width, r.v_width, r.sliding, r.window) for r in rules if r is not None)


def mla_note(spec: ModelSpec, build: int) -> str:
    """What a build before llama.cpp's MLA cache keeps of the model's MLA layers ("" where it keeps the latent)."""
    mla = next((x for x in spec.layers if isinstance(x, MLA)), None)
    heads = mla.decompressed() if mla is not None and not mla_latent(build) else None
    if mla is None or heads is None:
        return ""
    return (f"build {build} predates llama.cpp's MLA cache (b5137, PR #12801): every head's K and V are cached "
            f"({heads.num_kv_heads} x {heads.head_dim} and {heads.num_kv_heads} x {heads.v_dim} a layer), not the "
            f"{mla.kv_lora_rank + mla.qk_rope_head_dim}-wide latent")


@lru_cache(maxsize=16, typed=True)
def _has_state(spec: ModelSpec) -> bool:
    return any(isinstance(x, RecurrentState) for x in spec.layers)
