"""vLLM's KV cache layout, per rank: KV dtypes, page sizes, KV-cache groups, blocks per request and the bytes
of one block per pipeline stage (v1/kv_cache_interface.py, v1/core/kv_cache_planning.py, v1/core/kv_cache_utils.py
of vLLM 0.33.0). Every figure here is ``exact``: arithmetic vLLM does on numbers kvbudget knows exactly.
"""

from __future__ import annotations

import math
from functools import lru_cache

from ..._record import record, replace
from ...dtypes import KVDtype, parse_kv_dtype
from ...kvcache import tp_layers
from ...model.layers import MLA, ChunkedLocal, FullAttention, Layer, NoCache, RecurrentState, SlidingWindow, SparseIndexer
from ...model.spec import ModelSpec
from ...parallel import pp_partition
from ...units import element_type
from .dsa import is_dsa

# --- KV pages and groups -----------------------------------------------------------------------

# --kv-cache-dtype values and their bytes per element (config/cache.py CacheDType;
# utils/torch_utils.py STR_DTYPE_TO_TORCH_DTYPE). "auto" is the model's dtype.
_KV_DTYPES = {
    "auto": "", "bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32",
    "fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2", "fp8_inc": "fp8_e4m3",
    "fp8_per_token_head": "fp8_e4m3", "int8_per_token_head": "int8", "int4_per_token_head": "q4_0",
    "nvfp4": "nvfp4", "nvfp4_4over6": "nvfp4", "fp8_ds_mla": "fp8_e4m3",
}


@lru_cache(maxsize=64, typed=True)  # one record per (name, model dtype): a plan search asks thousands of times
def kv_cache_dtype(settings_dtype: str, model_dtype: str) -> KVDtype:
    """--kv-cache-dtype parsed once (case folded, as vLLM's choices are matched); "auto" is the model's dtype.
    Memoized."""
    return parse_kv_dtype(settings_dtype.strip().lower(), model_dtype, _KV_DTYPES,
                          f"unknown --kv-cache-dtype {settings_dtype!r}: use one of {', '.join(_KV_DTYPES)}")


def _attention_token_bytes(layer: Layer, kv: KVDtype, tp: int) -> int:
    """Bytes one token takes in one attention layer's page on one rank
    (v1/kv_cache_interface.py AttentionSpec.page_size_bytes / block_size)."""
    if isinstance(layer, MLA):
        if kv.name == "fp8_ds_mla":
            return 656  # 512 fp8 NoPE values + 16 bytes of scales + 64 bf16 RoPE values (MLAAttentionSpec)
        return layer.bytes_per_token(kv.element, tp)
    if isinstance(layer, SparseIndexer):  # its own uint8 MLAAttentionSpec, whatever the latent's dtype
        return layer.bytes_per_token(kv.element, tp)
    assert isinstance(layer, FullAttention)
    heads = layer.kv_heads_per_rank(tp)
    if kv.name in ("fp8_per_token_head", "int8_per_token_head"):
        return heads * (layer.head_dim + layer.v_dim + 8)  # 1 byte per value + fp32 scale for K and V
    if kv.name == "int4_per_token_head":
        return heads * (layer.head_dim // 2 + layer.v_dim // 2 + 8)
    return layer.bytes_per_token(kv.element, tp)


@record
class FullSpec:
    """Full attention (FullAttentionSpec): a request holds a block for every ``block_size`` tokens of its length.
    ``page``: one layer's bytes per block (0 in a group whose layers' pages differ: each layer keeps its own).
    ``scale``: this spec's blocks hold ``scale`` x the block size in tokens, where page-size unification grew its
    block instead of padding its page (unify_kv_cache_spec_page_size: a page that divides the largest one)."""

    page: int
    scale: int = 1
    kind = "full_attention"

    def blocks(self, max_len: int, block_size: int, in_flight: int, mamba_blocks: int) -> int:
        """Blocks one request of ``max_len`` tokens takes (max_memory_usage_bytes / page_size_bytes)."""
        return -(-max_len // (block_size * self.scale))


@record
class MLASpec(FullSpec):
    """Multi-head latent attention (MLAAttentionSpec): full attention over one latent "head"."""

    kind = "mla"


@record
class SlidingSpec:
    """Sliding-window attention (SlidingWindowSpec): the window - 1 tokens before the in-flight ones, plus one
    block for a window that starts mid-block."""

    page: int
    window: int
    scale: int = 1  # as FullSpec's
    kind = "sliding_window"

    def blocks(self, max_len: int, block_size: int, in_flight: int, mamba_blocks: int) -> int:
        return -(-min(self.window - 1 + in_flight, max_len) // (block_size * self.scale)) + 1


@record
class ChunkedSpec:
    """Chunked local attention (ChunkedLocalAttentionSpec): one chunk plus the in-flight tokens."""

    page: int
    chunk: int
    scale: int = 1  # as FullSpec's
    kind = "chunked_local"

    def blocks(self, max_len: int, block_size: int, in_flight: int, mamba_blocks: int) -> int:
        return -(-min(self.chunk + in_flight, max_len) // (block_size * self.scale))


@record
class MambaSpec:
    """A Mamba / linear-attention state (MambaSpec): a fixed number of state pages per request, whatever its
    length (``mamba_blocks``: 2 with prefix caching's "align" mode, else 1)."""

    page: int
    kind = "recurrent_state"

    def blocks(self, max_len: int, block_size: int, in_flight: int, mamba_blocks: int) -> int:
        return mamba_blocks


KVSpec = FullSpec | MLASpec | SlidingSpec | ChunkedSpec | MambaSpec


def kv_spec(layer: Layer, page: int, hybrid_manager: bool) -> KVSpec:
    """The one place a layer kind becomes vLLM's spec (the layers' get_kv_cache_spec). Without the hybrid KV cache
    manager, sliding-window and chunked layers are cached in full (unify_hybrid_kv_cache_specs)."""
    if isinstance(layer, RecurrentState):
        return MambaSpec(page)
    if isinstance(layer, (MLA, SparseIndexer)):  # the DSA indexer's cache is an MLAAttentionSpec too
        return MLASpec(page)
    if isinstance(layer, SlidingWindow) and hybrid_manager:
        return SlidingSpec(page, layer.window)
    if isinstance(layer, ChunkedLocal) and hybrid_manager:
        return ChunkedSpec(page, layer.chunk)
    return FullSpec(page)


@record
class KVGroup:
    """One KV-cache group: layers that share a block table and follow one spec (v1/core/kv_cache_planning.py).
    ``page`` is one layer's bytes per block; every group's layers draw from one block pool."""

    spec: KVSpec
    layers: tuple[int, ...]  # indices into ModelSpec.layers (cache entries)
    padding: int = 0  # padding layers added to make every group the same size

    @property
    def kind(self) -> str:
        """full_attention | sliding_window | chunked_local | mla | recurrent_state, as the reports print it."""
        return self.spec.kind

    @property
    def page(self) -> int:
        return self.spec.page


@record
class KVLayout:
    """Groups, block size and the bytes of one block across the largest group."""

    groups: tuple[KVGroup, ...]
    block_size: int
    group_size: int
    notes: tuple[str, ...] = ()


# The KV layout and the per-stage block bytes depend on the model, the KV dtype and the parallelism, never on
# the GPU: they are memoized (bounded, typed, immutable results), so a plan search computes each once per
# (dtype, TP, PP) instead of once per GPU type, and ``held``/``longest_context`` once per bisection.
@lru_cache(maxsize=64, typed=True)
def kv_layout(
    spec: ModelSpec, kv_dtype: KVDtype, model_dtype: str, tp: int, block_size: int, hybrid_manager: bool,
    align_mamba: bool,
) -> KVLayout:
    """vLLM's KV-cache groups for the whole model (get_kv_cache_groups), with its page sizes. Memoized."""
    notes: list[str] = []
    cache = [(i, layer) for i, layer in enumerate(spec.layers) if not isinstance(layer, NoCache)]
    if not cache:
        return KVLayout((), block_size, 0, ("attention-free model: no KV cache",))
    attn = [(i, layer) for i, layer in cache if not isinstance(layer, RecurrentState)]
    states = [(i, layer) for i, layer in cache if isinstance(layer, RecurrentState)]
    token_bytes = {i: _attention_token_bytes(layer, kv_dtype, tp) for i, layer in attn}
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
    specs: dict[int, KVSpec] = {i: kv_spec(layer, block_size * token_bytes[i], hybrid_manager) for i, layer in attn}
    if states:
        page = max((s.page for s in specs.values()), default=state_page)
        if page > state_page and specs:
            notes.append(f"Mamba state page padded from {state_page:,} B to the attention page {page:,} B")
        for i, layer in states:
            specs[i] = kv_spec(layer, max(page, state_page), hybrid_manager)
    types = {type(s) for s in specs.values()}
    if len(set(specs.values())) == 1 or (len(types) == 1 and types <= {FullSpec, MLASpec}):
        # Uniform spec, or uniform type (same kind, different shapes: each layer keeps its own page, the group's is 0)
        only = next(iter(specs.values()))
        group = KVGroup(only if len(set(specs.values())) == 1 else replace(only, page=0), tuple(sorted(specs)))
        return KVLayout((group,), block_size, len(specs), tuple(notes))
    # Hybrid: unify page sizes (unify_kv_cache_spec_page_size), then equal-size groups.
    max_page = max(s.page for s in specs.values())
    for i, rule in list(specs.items()):
        if rule.page != max_page:
            if max_page % rule.page == 0 and not isinstance(rule, MambaSpec):
                # vLLM multiplies the block size (tokens per block) of such a spec; a page that does not divide
                # the largest, and a Mamba state, is padded instead (page_size_padded)
                ratio = max_page // rule.page
                note = f"{rule.kind} layers use {ratio}x larger blocks to match the largest page"
                if note not in notes:
                    notes.append(note)
                specs[i] = replace(rule, page=max_page, scale=ratio)
            else:
                specs[i] = replace(rule, page=max_page)
    buckets: dict[KVSpec, list[int]] = {}
    for i in sorted(specs):
        buckets.setdefault(specs[i], []).append(i)
    sizes = [len(v) for v in buckets.values()]
    group_size = max(sizes) if max(sizes) < 1.5 * min(sizes) else min(sizes)
    groups: list[KVGroup] = []
    for rule, members in buckets.items():
        n_groups = -(-len(members) // group_size)
        pad = n_groups * group_size - len(members)
        if pad:
            notes.append(f"{pad} padding layer(s) added to the {rule.kind} groups (vLLM: 'Add {pad} padding layers')")
        for g in range(n_groups):
            groups.append(KVGroup(rule, tuple(members[g::n_groups]), pad if g == n_groups - 1 else 0))
    return KVLayout(tuple(groups), block_size, group_size, tuple(notes))


def blocks_per_request(group: KVGroup, max_len: int, block_size: int, in_flight: int, mamba_blocks: int) -> int:
    """Blocks one request at ``max_len`` tokens takes from one group (its spec's rule)."""
    return group.spec.blocks(max_len, block_size, in_flight, mamba_blocks)


def layer_pages(spec: ModelSpec, layout: KVLayout, kv_dtype: KVDtype, tp: int) -> dict[int, int]:
    """Each cache layer's page in bytes, after page-size unification."""
    pages: dict[int, int] = {}
    for group in layout.groups:
        for i in group.layers:
            layer = spec.layers[i]
            pages[i] = group.page if group.page else layout.block_size * _attention_token_bytes(layer, kv_dtype, tp)
    return pages


def bytes_per_block(layout: KVLayout, pages: dict[int, int], layers: set[int] | None = None) -> int:
    """The largest group's bytes per block, over the layers a rank holds (_get_kv_cache_bytes_per_block)."""
    return max((sum(pages[i] for i in g.layers if layers is None or i in layers) for g in layout.groups), default=0)


@lru_cache(maxsize=128, typed=True)
def stage_block_bytes(spec: ModelSpec, layout: KVLayout, kv_dtype: KVDtype, tp: int,
                      pp: int) -> tuple[int, ...]:
    """Each pipeline stage's bytes per block: the largest group over the cache layers of that stage's decoder
    layers. Memoized, as ``kv_layout``."""
    pages = layer_pages(spec, layout, kv_dtype, tp)
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
    local attention, whether it mixes Mamba states with attention, whether it has MLA and DeepSeek sparse
    attention (DSA) layers, and the layers a TP degree must split (``kvcache.tp_layers``)."""

    params: int
    chunked: bool
    hybrid_mamba: bool
    mla: bool = False
    dsa: bool = False
    tp_layers: tuple[Layer, ...] = ()


@lru_cache(maxsize=16, typed=True)
def model_facts(spec: ModelSpec) -> ModelFacts:
    """The GPU-independent facts of ``spec`` (memoized: the parameter total sums every tensor, the rest walks
    every layer)."""
    return ModelFacts(
        params=spec.params, chunked=any(isinstance(x, ChunkedLocal) for x in spec.layers),
        hybrid_mamba=any(isinstance(x, RecurrentState) for x in spec.layers)
        and any(isinstance(x, (FullAttention, MLA)) for x in spec.layers),
        mla=any(isinstance(x, MLA) for x in spec.layers), dsa=is_dsa(spec),
        tp_layers=tp_layers(spec))

