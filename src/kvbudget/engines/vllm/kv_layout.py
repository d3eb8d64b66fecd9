"""vLLM's KV cache layout, per rank: KV dtypes, page sizes, KV-cache groups, blocks per request and the bytes
of one block per pipeline stage (v1/kv_cache_interface.py, v1/core/kv_cache_planning.py, v1/core/kv_cache_utils.py
of vLLM 0.33.0). Every figure here is ``exact``: arithmetic vLLM does on numbers kvbudget knows exactly.
"""

from __future__ import annotations

import math
from functools import lru_cache

from ..._record import record
from ...model.layers import MLA, ChunkedLocal, FullAttention, Layer, RecurrentState, SlidingWindow
from ...model.spec import ModelSpec
from ...parallel import pp_partition
from ...units import InputError, element_type

# --- KV pages and groups -----------------------------------------------------------------------

# --kv-cache-dtype values and their bytes per element (config/cache.py CacheDType;
# utils/torch_utils.py STR_DTYPE_TO_TORCH_DTYPE). "auto" is the model's dtype.
_KV_DTYPES = {
    "auto": "", "bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32",
    "fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2", "fp8_inc": "fp8_e4m3",
    "fp8_per_token_head": "fp8_e4m3", "int8_per_token_head": "int8", "int4_per_token_head": "q4_0",
    "nvfp4": "nvfp4", "nvfp4_4over6": "nvfp4", "fp8_ds_mla": "fp8_e4m3",
}


def kv_cache_dtype_name(settings_dtype: str, spec: ModelSpec, model_dtype: str) -> str:
    key = settings_dtype.strip().lower()
    if key not in _KV_DTYPES:
        raise InputError(f"unknown --kv-cache-dtype {settings_dtype!r}: use one of {', '.join(_KV_DTYPES)}")
    return key if key != "auto" else model_dtype


def _attention_token_bytes(layer: Layer, kv_dtype: str, model_dtype: str, tp: int) -> int:
    """Bytes one token takes in one attention layer's page on one rank
    (v1/kv_cache_interface.py AttentionSpec.page_size_bytes / block_size)."""
    if isinstance(layer, MLA):
        if kv_dtype == "fp8_ds_mla":
            return 656  # 512 fp8 NoPE values + 16 bytes of scales + 64 bf16 RoPE values (MLAAttentionSpec)
        name = _KV_DTYPES.get(kv_dtype) or kv_dtype
        return layer.bytes_per_token(element_type(name), tp)
    assert isinstance(layer, FullAttention)
    heads = layer.kv_heads_per_rank(tp)
    if kv_dtype in ("fp8_per_token_head", "int8_per_token_head"):
        return heads * (layer.head_dim + layer.v_dim + 8)  # 1 byte per value + fp32 scale for K and V
    if kv_dtype == "int4_per_token_head":
        return heads * (layer.head_dim // 2 + layer.v_dim // 2 + 8)
    name = _KV_DTYPES.get(kv_dtype) or kv_dtype
    return layer.bytes_per_token(element_type(name), tp)


@record
class KVGroup:
    """One KV-cache group: layers that share a block table (v1/core/kv_cache_planning.py).
    ``page`` is one layer's bytes per block; every group's layers draw from one block pool."""

    kind: str  # full_attention | sliding_window | chunked_local | mla | recurrent_state
    layers: tuple[int, ...]  # indices into ModelSpec.layers (cache entries)
    page: int
    window: int = 0
    chunk: int = 0
    padding: int = 0  # padding layers added to make every group the same size


@record
class KVLayout:
    """Groups, block size and the bytes of one block across the largest group."""

    groups: tuple[KVGroup, ...]
    block_size: int
    group_size: int
    notes: tuple[str, ...] = ()


def _kind_of(layer: Layer, hybrid_manager: bool) -> str:
    if isinstance(layer, (SlidingWindow, ChunkedLocal)) and not hybrid_manager:
        return "full_attention"  # promoted to full attention (unify_hybrid_kv_cache_specs)
    return layer.kind


# The KV layout and the per-stage block bytes depend on the model, the KV dtype and the parallelism, never on
# the GPU: they are memoized (bounded, typed, immutable results), so a plan search computes each once per
# (dtype, TP, PP) instead of once per GPU type, and ``held``/``longest_context`` once per bisection.
@lru_cache(maxsize=64, typed=True)
def kv_layout(
    spec: ModelSpec, kv_dtype: str, model_dtype: str, tp: int, block_size: int, hybrid_manager: bool,
    align_mamba: bool,
) -> KVLayout:
    """vLLM's KV-cache groups for the whole model (get_kv_cache_groups), with its page sizes. Memoized."""
    notes: list[str] = []
    cache = [(i, layer) for i, layer in enumerate(spec.layers) if layer.kind != "no_cache"]
    if not cache:
        return KVLayout((), block_size, 0, ("attention-free model: no KV cache",))
    attn = [(i, layer) for i, layer in cache if not isinstance(layer, RecurrentState)]
    states = [(i, layer) for i, layer in cache if isinstance(layer, RecurrentState)]
    token_bytes = {i: _attention_token_bytes(layer, kv_dtype, model_dtype, tp) for i, layer in attn}
    state_page = max((layer.bytes_per_sequence(0, element_type(model_dtype), tp) for _, layer in states), default=0)
    if states and attn:
        # Platform._align_hybrid_block_size: raise the attention block size until one attention page
        # holds at least one Mamba state, in steps of the kernel alignment (16; 128 with MLA).
        per_token = max(token_bytes.values())
        align = max(16, block_size) * (8 if any(isinstance(x, MLA) for _, x in attn) else 1)
        needed = align * math.ceil(state_page / (align * per_token))
        if needed > block_size:
            notes.append(f"attention block size raised from {block_size} to {needed} tokens so that one page holds "
                         f"a Mamba state ({state_page:,} B), as vLLM does")
            block_size = needed
    # One spec per layer: (kind, page, window, chunk)
    specs: dict[int, tuple[str, int, int, int]] = {}
    for i, layer in attn:
        kind = _kind_of(layer, hybrid_manager)
        window = layer.window if isinstance(layer, SlidingWindow) and kind == "sliding_window" else 0
        chunk = layer.chunk if isinstance(layer, ChunkedLocal) and kind == "chunked_local" else 0
        specs[i] = (kind, block_size * token_bytes[i], window, chunk)
    if states:
        page = max((s[1] for s in specs.values()), default=state_page)
        if page > state_page and specs:
            notes.append(f"Mamba state page padded from {state_page:,} B to the attention page {page:,} B")
        for i, _ in states:
            specs[i] = ("recurrent_state", max(page, state_page), 0, 0)
    kinds = {s[0] for s in specs.values()}
    if len(set(specs.values())) == 1 or (kinds <= {"full_attention", "mla"} and len(kinds) == 1):
        # Uniform spec, or uniform type (same kind, different shapes): one group, page = sum.
        only = next(iter(specs.values()))
        total_page = sum(s[1] for s in specs.values())
        group = KVGroup(only[0], tuple(sorted(specs)), total_page // len(specs) if len(set(specs.values())) == 1 else 0,
                        only[2], only[3])
        if len(set(specs.values())) != 1:
            group = KVGroup(only[0], tuple(sorted(specs)), 0)
        return KVLayout((group,), block_size, len(specs), tuple(notes))
    # Hybrid: unify page sizes (unify_kv_cache_spec_page_size), then equal-size groups.
    max_page = max(s[1] for s in specs.values())
    for i, (kind, page, window, chunk) in list(specs.items()):
        if page != max_page:
            if max_page % page == 0 and kind != "recurrent_state":
                notes.append(f"{kind} layers use {max_page // page}x larger blocks to match the largest page")
            specs[i] = (kind, max_page, window, chunk)
    buckets: dict[tuple[str, int, int, int], list[int]] = {}
    for i in sorted(specs):
        buckets.setdefault(specs[i], []).append(i)
    sizes = [len(v) for v in buckets.values()]
    group_size = max(sizes) if max(sizes) < 1.5 * min(sizes) else min(sizes)
    groups: list[KVGroup] = []
    for (kind, page, window, chunk), members in buckets.items():
        n_groups = -(-len(members) // group_size)
        pad = n_groups * group_size - len(members)
        if pad:
            notes.append(f"{pad} padding layer(s) added to the {kind} groups (vLLM: 'Add {pad} padding layers')")
        for g in range(n_groups):
            groups.append(KVGroup(kind, tuple(members[g::n_groups]), page, window, chunk,
                                  pad if g == n_groups - 1 else 0))
    return KVLayout(tuple(groups), block_size, group_size, tuple(notes))


def blocks_per_request(group: KVGroup, max_len: int, block_size: int, in_flight: int, mamba_blocks: int) -> int:
    """Blocks one request at ``max_len`` tokens takes from one group (max_memory_usage_bytes / page)."""
    if group.kind == "recurrent_state":
        return mamba_blocks
    if group.kind == "sliding_window":
        return -(-min(group.window - 1 + in_flight, max_len) // block_size) + 1
    if group.kind == "chunked_local":
        return -(-min(group.chunk + in_flight, max_len) // block_size)
    return -(-max_len // block_size)


def layer_pages(spec: ModelSpec, layout: KVLayout, kv_dtype: str, model_dtype: str, tp: int) -> dict[int, int]:
    """Each cache layer's page in bytes, after page-size unification."""
    pages: dict[int, int] = {}
    for group in layout.groups:
        for i in group.layers:
            layer = spec.layers[i]
            pages[i] = group.page if group.page else layout.block_size * _attention_token_bytes(layer, kv_dtype, model_dtype, tp)
    return pages


def bytes_per_block(layout: KVLayout, pages: dict[int, int], layers: set[int] | None = None) -> int:
    """The largest group's bytes per block, over the layers a rank holds (_get_kv_cache_bytes_per_block)."""
    return max((sum(pages[i] for i in g.layers if layers is None or i in layers) for g in layout.groups), default=0)


@lru_cache(maxsize=128, typed=True)
def stage_block_bytes(spec: ModelSpec, layout: KVLayout, kv_dtype: str, model_dtype: str, tp: int,
                      pp: int) -> tuple[int, ...]:
    """Each pipeline stage's bytes per block: the largest group over the cache layers of that stage's decoder
    layers. Memoized, as ``kv_layout``."""
    pages = layer_pages(spec, layout, kv_dtype, model_dtype, tp)
    out = []
    first = 0
    for count in pp_partition(spec.num_layers, pp):
        here = {i for i in range(len(spec.layers)) if first <= spec.layer_of[i] < first + count}
        out.append(bytes_per_block(layout, pages, here))
        first += count
    return tuple(out)


@record
class ModelFacts:
    """What every plan of one model reads and no GPU changes: the parameter total, whether it has chunked
    local attention, whether it mixes Mamba states with attention."""

    params: int
    chunked: bool
    hybrid_mamba: bool


@lru_cache(maxsize=16, typed=True)
def model_facts(spec: ModelSpec) -> ModelFacts:
    """The GPU-independent facts of ``spec`` (memoized: the parameter total sums every tensor)."""
    return ModelFacts(
        params=spec.params, chunked=any(isinstance(x, ChunkedLocal) for x in spec.layers),
        hybrid_mamba=any(isinstance(x, RecurrentState) for x in spec.layers)
        and any(isinstance(x, (FullAttention, MLA)) for x in spec.layers))

