"""vLLM's memory accounting, per rank, as vLLM itself does it.

Read from vLLM 0.33.0's Python sources (paths relative to the ``vllm`` package) and written in
our own words; the file and function behind each rule are named where it is applied. The figures this
module produces are the ones vLLM logs at start-up: ``Available KV cache memory``, ``GPU KV cache
size: N tokens``, ``Maximum concurrency for L tokens per request: C x`` (and ``# GPU blocks`` on
the V0 line), or the error it stops with.

Three kinds of figures, tagged in the plan:
- ``exact``: arithmetic vLLM does on numbers kvbudget knows exactly (pages, blocks, groups);
- ``modelled``: a model of something vLLM measures (weights loaded);
- ``calibrated``: a model whose constants were fitted on published start-up logs
  (activation peak, non-torch memory, CUDA-graph memory), with the error band seen there.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

from .._record import record, replace
from ..hardware import GPU
from ..kvcache import check_tp, serving_dtype
from ..model.layers import MLA, ChunkedLocal, FullAttention, Layer, RecurrentState, SlidingWindow
from ..model.spec import ModelSpec
from ..model.weights import WeightFormat, parse_weight_format
from ..parallel import pp_partition, stages
from ..units import GiB, InputError, MiB, element_type
from .base import Replica

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from .base import EnginePlan, Setup

# --- release lines -----------------------------------------------------------------------------


@record
class Release:
    """How one line of vLLM releases accounts for memory."""

    key: str
    label: str
    default_utilization: float
    cudagraph_subtracted: bool  # CUDA-graph memory estimated and taken from the KV budget (>= 0.21)
    in_flight_batches: int  # batches a sliding-window reservation covers (2: async scheduling)
    v0_blocks: bool  # V0 engine: one block holds every layer, "# GPU blocks" report
    combined_log_line: bool  # "GPU KV cache size: N tokens, Maximum concurrency ..." on one line


RELEASES: dict[str, Release] = {
    # config/cache.py CacheConfig.gpu_memory_utilization default 0.92; gpu_worker.py subtracts
    # profile_cudagraph_memory(); config/vllm.py max_concurrent_batches = 2 with async scheduling;
    # v1/core/kv_cache_utils.py update_kv_cache_capacity logs one combined line.
    "current": Release("current", "vLLM >= 0.21 (V1, CUDA-graph memory profiled)", 0.92, True, 2, False, True),
    # Before 0.21: utilization 0.90, graphs not subtracted (users left headroom), sliding windows
    # reserve one batch of in-flight tokens (utils/memory_profiling of the 0.6-0.20 sources; sliding-window
    # max_memory_usage_bytes of that time: min(W - 1 + max_num_batched_tokens, L)).
    "v1": Release("v1", "vLLM 0.8-0.20 (V1 engine)", 0.90, False, 1, False, False),
    # V0 engine (<= 0.7, and 0.8-0.10 with VLLM_USE_V1=0): num_gpu_blocks = available //
    # (block_size x layers x 2 x heads x head_dim x bytes); logs "# GPU blocks: N".
    "v0": Release("v0", "vLLM V0 engine (<= 0.7)", 0.90, False, 1, True, False),
}


def release(version: str | None) -> Release:
    """The release line of a version string (``0.33.0``, ``v0.6.3.post1``, ``current``, ``v1``, ``v0``)."""
    if version is None or version in ("", "current", "latest"):
        return RELEASES["current"]
    key = version.strip().lower()
    if key in RELEASES:
        return RELEASES[key]
    parts = key.lstrip("v").split(".")
    try:
        major, minor = int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        raise InputError(f"unknown vLLM version {version!r}: give e.g. 0.33.0, 0.10.1, 0.6.3, or current/v1/v0") from None
    if major > 0 or minor >= 21:
        return RELEASES["current"]
    if minor >= 8:
        return RELEASES["v1"]
    return RELEASES["v0"]


# --- settings ----------------------------------------------------------------------------------


@record
class VllmSettings:
    """The memory-relevant engine arguments (``None``: vLLM's default for the release and GPU)."""

    version: str = "current"
    gpu_memory_utilization: float | None = None
    max_model_len: int | None = None  # -1: auto-fit ("--max-model-len auto")
    block_size: int | None = None
    kv_cache_dtype: str = "auto"
    dtype: str = "auto"
    quantization: str | None = None  # None: the checkpoint's own format
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enable_chunked_prefill: bool | None = None
    enable_prefix_caching: bool | None = None
    enforce_eager: bool = False
    kv_cache_memory_bytes: int | None = None
    num_gpu_blocks_override: int | None = None
    disable_hybrid_kv_cache_manager: bool = False
    entrypoint: str = "serve"  # serve (OpenAI server) | llm (the LLM class)
    performance_mode: str | None = None
    cpu_offload_bytes: int = 0  # --cpu-offload-gb: weights kept in host memory, per GPU
    allow_long_max_model_len: bool = False  # VLLM_ALLOW_LONG_MAX_MODEL_LEN=1
    estimate_cudagraphs: bool = True  # VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS (default 1)
    chunked_local_hybrid: bool = False  # VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1


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


# --- batch defaults, capture sizes, max_model_len ------------------------------------------------


def batch_defaults(gpu: GPU, settings: VllmSettings, rel: Release, max_model_len: int) -> tuple[int, int]:
    """max_num_batched_tokens and max_num_seqs as vLLM fills them in (engine/arg_utils.py
    get_batch_defaults and _set_default_max_num_seqs_and_batched_tokens_args)."""
    server = settings.entrypoint != "llm"
    total = gpu.memory_bytes
    if total >= 160 * GiB and rel.key == "current":
        tokens, seqs = 16384, 1024
    elif total >= 70 * GiB and "a100" not in gpu.name.lower():
        tokens, seqs = (8192 if server else 16384), 1024
    else:
        tokens, seqs = (2048 if server else 8192), 256
    if rel.key == "v0":
        tokens, seqs = 2048, 256  # V0: SchedulerConfig defaults; chunked prefill off below 32K contexts
    user_tokens, user_seqs = settings.max_num_batched_tokens, settings.max_num_seqs
    if settings.performance_mode == "throughput":
        tokens, seqs = tokens * 2, seqs * 2
    seqs = user_seqs or seqs
    if user_tokens is None:
        chunked = settings.enable_chunked_prefill
        if chunked is None:
            chunked = rel.key != "v0" or max_model_len > 32768
        if not chunked:
            tokens = max(max_model_len, tokens)
        tokens = min(seqs * max_model_len, tokens)
    else:
        tokens = user_tokens
    return tokens, min(seqs, tokens)


def capture_sizes(max_num_seqs: int, max_num_tokens: int, gpu: GPU) -> tuple[int, ...]:
    """CUDA-graph capture sizes (config/vllm.py _set_cudagraph_sizes): 1, 2, 4, then steps of 8
    below 256 and of 16 from 256, up to min(2 x max_num_seqs, 512) (1024 on Blackwell)."""
    ceiling = 1024 if gpu.name.upper().startswith(("B200", "B300", "GB200")) else 512
    top = min(2 * max_num_seqs, ceiling)
    sizes = [i for i in (1, 2, 4) if i <= top]
    sizes += list(range(8, min(top + 1, 256), 8))
    sizes += list(range(256, top + 1, 16))
    if max_num_tokens <= top and max_num_tokens not in sizes:
        sizes.append(max_num_tokens)
    return tuple(s for s in sorted(sizes) if s <= max_num_tokens)


# --- the non-KV memory model ---------------------------------------------------------------------

# Calibrated on the published start-up logs in tests/data/vllm_logs/ (tests/test_vllm_logs.py reports
# the fit and its error band). Values are per rank.
#
# Non-torch memory that vLLM counts after its start snapshot: cuBLAS/attention workspaces (logs:
# 0.03-0.35 GiB at TP=1), plus custom all-reduce and NCCL buffers at TP>1 (0.44 GiB at TP=2 in
# v0.11-0.12_80gb-x2_gpt-oss-120b_tp2_default).
NON_TORCH_TP1_BYTES = {
    "current": int(0.27 * GiB),  # published 0.2x log, Llama-3.1-8B, 80 GB: consumed 15.26 GiB = 14.99 loaded + 0.27
    "v1": int(0.05 * GiB),  # v0.10.2dev_a100_qwen3-0.6b (0.54 GiB above the weights in all)
    "v0": int(0.2 * GiB),  # 0.35 GiB in v0.6.4_rtx3090_llama3.1-8b, 0.03-0.05 in the 0.7-0.8 V0 logs
}
NON_TORCH_TP_BYTES = int(0.44 * GiB)


@record
class ActivationModel:
    """Peak of the profiling run per token of the dummy batch (in elements of the model dtype, as
    multiples of the hidden size and of the per-rank MLP width) and per request (fp32 logits of
    the vocabulary, as a multiple)."""

    hidden: float
    inter: float
    logits: float
    source: str


ACTIVATION = {
    # V1 with torch.compile fuses the MLP: 1 x hidden + 1 x intermediate per token; the sampler
    # holds ~2 logits tensors at once in the current line (a published start-up log of Llama-3.1-8B-Instruct
    # on an 80 GB GPU at utilization 0.92: activation peak + CUDA-graph estimate 1.44 GiB with 1024 x 128256
    # fp32 logits; "Available KV cache memory: 56.21 GiB", "GPU KV cache size: 460,496 tokens").
    "current": ActivationModel(1.0, 1.0, 2.0, "a published vLLM log of Llama-3.1-8B on an 80 GB GPU"),
    # 0.8-0.20: same forward; the sampler of that time held ~3.4 logits tensors (gpt-oss-120b TP2
    # log: 0.69 GiB peak activation for 256 x 201088 logits; Qwen3-0.6B A100 log).
    "v1": ActivationModel(1.0, 1.0, 3.4, "v0.11-0.12_80gb-x2_gpt-oss-120b_tp2_default, v0.10.2dev_a100_qwen3-0.6b"),
    # V0 runs eager PyTorch: ~3 x hidden + 3 x intermediate per token (Llama-3.1-8B on an RTX 3090:
    # 2.07 GiB for 20000 tokens and 2.99 GiB for 29000, i.e. 110.7 KB per token).
    "v0": ActivationModel(3.0, 3.0, 1.0, "v0.6.4_rtx3090_llama3.1-8b (two runs)"),
}
GRAPH_BYTES_PER_LAYER = int(0.11 * MiB)  # CUDA-graph memory per capture size and decoder layer (same log)


@lru_cache(maxsize=16, typed=True)
def rotary_cache_bytes(spec: ModelSpec, dtype: str) -> int:
    """vLLM's rotary embedding cos/sin cache: max positions x rotary dim in the model dtype
    (model_executor/layers/rotary_embedding: cos_sin_cache); counted in 'Model loading took'."""
    if not any(isinstance(x, (FullAttention, MLA)) for x in spec.layers):
        return 0
    dim = next((x.qk_rope_head_dim for x in spec.layers if isinstance(x, MLA)), spec.dims.head_dim)
    return spec.max_context * dim * element_type(dtype).nbytes(1)


def activation_peak(spec: ModelSpec, tokens: int, reqs: int, tp: int, dtype: str, last_stage: bool,
                    model: ActivationModel) -> int:
    """Peak of vLLM's profiling run above the weights: the dummy forward of ``tokens`` tokens
    (hidden- and MLP-sized buffers, per rank) and, on the last stage, the sampler over one token
    per request (fp32 logits of the full vocabulary)."""
    width = element_type(dtype).nbytes(1)
    d = spec.dims
    forward = tokens * (model.hidden * d.hidden_size + model.inter * (d.intermediate_size // tp)) * width
    sampler = model.logits * reqs * d.vocab_size * 4 if last_stage else 0
    return int(forward + sampler)


def cudagraph_bytes(sizes: tuple[int, ...], stage_layers: int) -> int:
    """vLLM's estimate of CUDA-graph memory (GPUModelRunner.profile_cudagraph_memory)."""
    return len(sizes) * stage_layers * GRAPH_BYTES_PER_LAYER


# --- the plan ----------------------------------------------------------------------------------


@record
class Figure:
    """A number with its provenance: exact, modelled or calibrated (with its error band)."""

    value: float
    provenance: str
    band: str = ""


@record
class VllmPlan:
    """What vLLM does with one deployment, per rank, and the lines it logs."""

    model: str
    params: int
    gpu: str
    release: str
    version_line: str
    tp: int
    pp: int
    dp: int
    total_bytes: int
    utilization: float
    requested_bytes: int
    weights_bytes: int  # per rank, fullest stage
    model_loading_bytes: int  # weights + rotary cache: "Model loading took X GiB"
    non_torch_bytes: int
    activation_bytes: int
    cudagraph_bytes: int
    available_kv_cache_bytes: int  # "Available KV cache memory" (per rank, the binding one)
    kv_cache_dtype: str
    block_size: int
    num_gpu_blocks: int
    bytes_per_block: int
    blocks_per_request: int
    max_model_len: int
    max_model_len_auto: bool
    kv_cache_tokens: int
    max_concurrency: float
    starts: bool
    error: str | None
    estimated_max_model_len: int | None
    max_num_seqs: int
    max_num_batched_tokens: int
    groups: tuple[KVGroup, ...]
    in_flight_tokens: int  # tokens a sliding-window or chunked reservation adds (max_in_flight_tokens)
    mamba_blocks: int  # state pages per request (2 with prefix caching's "align" mode)
    derived_max_model_len: int
    provenance: tuple[tuple[str, Figure], ...]
    log_lines: tuple[str, ...]
    notes: tuple[str, ...]
    weights_format: str
    # per pipeline stage (one TP rank of it): model loading, KV pool (blocks x that stage's block bytes),
    # activation peak, CUDA graphs; every stage also holds non_torch_bytes
    stage_memory: tuple[tuple[int, int, int, int], ...] = ()


def _gib(n: int | float) -> str:
    return f"{round(n / GiB, 2)}"  # vLLM format_gib: round(bytes / 2^30, 2)


# The lowest compute capability each weight format's kernels run on (vLLM: QuantizationConfig.get_min_capability
# of Fp8Config 80 (Marlin W8A16 on Ampere, native from 8.9), AWQConfig 75, GPTQConfig 60, BitsAndBytesConfig 70,
# Mxfp4Config 80, ModelOpt NVFP4 80 through Marlin).
MIN_CAPABILITY = {"fp8": 8.0, "awq": 7.5, "gptq": 6.0, "nf4": 7.0, "mxfp4": 8.0, "nvfp4": 8.0}


def check_capability(fmt: WeightFormat, gpu: GPU) -> None:
    """vLLM refuses a quantization method the GPU's compute capability cannot run."""
    from ..hardware import capability

    need = MIN_CAPABILITY.get(fmt.name)
    have = capability(gpu)
    if need is not None and have is not None and have < need:
        raise InputError(f"{fmt.name} weights need compute capability {need} in vLLM; {gpu.name} has {have}")


def _weights(spec: ModelSpec, settings: VllmSettings) -> WeightFormat:
    if settings.quantization in (None, "", "auto", "none"):
        if spec.weight_format is None:
            raise InputError(f"{spec.name}: the checkpoint's quantization_config is not one kvbudget reads: "
                             "give --quantization (e.g. fp8, awq, gptq)")
        dense = serving_dtype(spec) if settings.dtype == "auto" else element_type(settings.dtype).name
        if not spec.weight_format.quantized:
            return WeightFormat(dense, dense_dtype=dense)
        return spec.weight_format
    return parse_weight_format(settings.quantization, dense_dtype=serving_dtype(spec))


def _vllm_loading(fmt: WeightFormat, notes: list[str]) -> WeightFormat:
    """How vLLM lays the weights out when it loads them, where that differs from the checkpoint."""
    if fmt.name == "mxfp4" and "experts" not in fmt.skip_roles:
        # fused_moe/oracle/mxfp4.py: the Marlin and TRT-LLM MoE kernels pad the hidden size to a multiple
        # of 256 and the per-rank intermediate size to a multiple of 128 (gpt-oss: 2880 -> 3072 and 2944).
        notes.append("MXFP4 experts padded as vLLM's MoE kernels load them (hidden to x256, intermediate to x128)")
        return replace(fmt, expert_padding=(256, 128))
    return fmt


def plan(spec: ModelSpec, gpu: GPU, settings: VllmSettings) -> VllmPlan:
    """Predict vLLM's start-up memory figures for ``spec`` on ``gpu`` with ``settings``."""
    rel = release(settings.version)
    notes: list[str] = []
    tp, pp, dp = settings.tensor_parallel_size, settings.pipeline_parallel_size, settings.data_parallel_size
    check_tp(spec, tp)
    if pp < 1 or pp > spec.num_layers:
        raise InputError(f"--pipeline-parallel-size {pp} must be between 1 and the model's {spec.num_layers} layers")
    util = settings.gpu_memory_utilization if settings.gpu_memory_utilization is not None else rel.default_utilization
    if not 0 < util <= 1:
        raise InputError(f"--gpu-memory-utilization must be in (0, 1], got {util}")
    model_dtype = serving_dtype(spec) if settings.dtype == "auto" else element_type(settings.dtype).name
    kv_dtype = kv_cache_dtype_name(settings.kv_cache_dtype, spec, model_dtype)
    derived_len = spec.max_context
    auto_len = settings.max_model_len == -1
    max_len = (spec.default_context or derived_len) if settings.max_model_len in (None, -1) else settings.max_model_len
    if max_len <= 0:
        raise InputError(f"--max-model-len must be positive or auto, got {max_len}")
    if max_len > derived_len and not settings.allow_long_max_model_len:
        raise InputError(
            f"--max-model-len {max_len:,} is greater than the derived max_model_len ({derived_len:,}) of {spec.name}; "
            "vLLM refuses it (set VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 to override)")
    tokens, seqs = batch_defaults(gpu, settings, rel, max_len)
    reqs = min(tokens, seqs)
    fmt = _vllm_loading(_weights(spec, settings), notes)
    check_capability(fmt, gpu)
    facts = model_facts(spec)
    chunked = facts.chunked
    hybrid_manager = not settings.disable_hybrid_kv_cache_manager and (not chunked or settings.chunked_local_hybrid)
    if chunked and not hybrid_manager:
        notes.append("chunked local attention: vLLM disables the hybrid KV cache manager and caches every layer "
                     "in full (config/vllm.py; VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE)")
    block_size = settings.block_size or 16
    hybrid_mamba = facts.hybrid_mamba
    prefix = settings.enable_prefix_caching if settings.enable_prefix_caching is not None else True
    align = hybrid_mamba and prefix and rel.key == "current"
    layout = kv_layout(spec, kv_dtype, model_dtype, tp, block_size, hybrid_manager, align)
    notes += layout.notes
    block_size = layout.block_size
    block_bytes = stage_block_bytes(spec, layout, kv_dtype, model_dtype, tp, pp)
    in_flight = rel.in_flight_batches * tokens if pp == 1 else pp * tokens
    mamba_blocks = 2 if align else 1

    def per_request(length: int) -> int:
        return sum(blocks_per_request(g, length, block_size, in_flight, mamba_blocks) for g in layout.groups)

    total = gpu.memory_bytes
    requested = math.ceil(total * util)
    rotary = rotary_cache_bytes(spec, model_dtype)
    graphs_counted = rel.cudagraph_subtracted and settings.estimate_cudagraphs and not settings.enforce_eager
    sizes = capture_sizes(seqs, tokens, gpu) if graphs_counted else ()
    stage_list = stages(spec, fmt, tp, pp)
    non_torch = NON_TORCH_TP_BYTES if tp * pp > 1 else NON_TORCH_TP1_BYTES[rel.key]
    per_stage = []
    for st, bpb in zip(stage_list, block_bytes, strict=True):
        weights = max(st.weights_bytes - settings.cpu_offload_bytes, 0) + rotary
        act = activation_peak(spec, tokens, reqs, tp, model_dtype, st.index == pp - 1, ACTIVATION[rel.key])
        graphs = cudagraph_bytes(sizes, st.num_layers)
        if settings.kv_cache_memory_bytes is not None:
            available = settings.kv_cache_memory_bytes
        else:
            available = requested - weights - non_torch - act - graphs
        per_stage.append((st, bpb, weights, act, graphs, available))
    # vLLM sizes every rank's pool to the smallest (get_kv_cache_configs); report that rank.
    blocks = [(avail // bpb if bpb else 1) for _, bpb, _, _, _, avail in per_stage]
    k = min(range(len(per_stage)), key=lambda j: blocks[j])
    st, bpb, weights, act, graphs, available = per_stage[k]
    if settings.num_gpu_blocks_override is not None and bpb:
        notes.append(f"Overriding num_gpu_blocks={max(blocks[k], 0)} with num_gpu_blocks_override={settings.num_gpu_blocks_override}")
        available = settings.num_gpu_blocks_override * bpb
        blocks = [settings.num_gpu_blocks_override] * len(blocks)
    num_blocks = max(min(blocks), 0)
    error: str | None = None
    load_oom = None if settings.kv_cache_memory_bytes is not None else next(
        (w for _, _, w, _, _, _ in per_stage if w + non_torch > total), None)
    estimated: int | None = None
    check = available - bpb  # one block is the null block (v1/core/block_pool.py)
    if rel.v0_blocks:
        check = available
    if load_oom is not None:
        # The weights do not fit in the device at all: torch raises OutOfMemoryError while the model
        # loads (v1/worker/gpu_model_runner.py load_model), before any KV cache is sized.
        error = (f"CUDA out of memory while loading the model: {_gib(load_oom)} GiB of weights per GPU + "
                 f"{_gib(non_torch)} GiB CUDA context > {_gib(total)} GiB")
        available = min(available, 0)
        num_blocks = 0
    elif layout.groups and available <= 0:
        error = ("No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing "
                 "the engine.")
    elif layout.groups:
        def fits(length: int) -> bool:
            return bpb * per_request(length) <= check

        if auto_len:
            best = _largest_len(fits, derived_len)
            if best == 0:
                error = "Cannot auto-fit max_model_len: not enough GPU memory available to serve even a single token."
            else:
                if best < max_len:
                    notes.append(f"Auto-fit max_model_len: reduced from {max_len} to {best} to fit in available KV "
                                 f"cache memory ({_gib(check)} GiB GPU)")
                max_len = best
        elif not fits(max_len):
            estimated = _largest_len(fits, max_len)
            need = bpb * per_request(max_len)
            est = f"Based on the available memory, the estimated maximum model length is {estimated}. " if estimated else ""
            error = (f"To serve at least one request with the model's max seq len ({max_len}), ({_gib(need)} GiB KV "
                     f"cache is needed, which is larger than the available KV cache memory ({_gib(check)} GiB). {est}"
                     "Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.")
    per_req = per_request(max_len) if layout.groups else 0
    concurrency = num_blocks / per_req if per_req else 0.0
    kv_tokens = int(concurrency * max_len)
    if rel.key == "v1" and layout.groups:
        # 0.8-0.20 printed num_blocks // num_groups x block_size (v1/core/kv_cache_utils.py of those releases)
        kv_tokens = num_blocks // len(layout.groups) * block_size
    if rel.v0_blocks:
        kv_tokens = num_blocks * block_size
        concurrency = kv_tokens / max_len
    lines = _log_lines(rel, weights, available, num_blocks, kv_tokens, concurrency, max_len, error, total, util)
    if load_oom is not None:
        lines = (f"torch.OutOfMemoryError: {error}",)
    band = ("calibrated on 22 published logs (tests/data/vllm_logs): KV tokens median error 1.6%, "
            "worst 8.4% outside the explained outliers")
    provenance = (
        ("total_bytes", Figure(total, "exact", gpu.memory_source[:80])),
        ("weights_bytes", Figure(weights, "modelled", "weights from the config and format, + rotary cache")),
        ("non_torch_bytes", Figure(non_torch, "calibrated", band)),
        ("activation_bytes", Figure(act, "calibrated", band)),
        ("cudagraph_bytes", Figure(graphs, "calibrated" if graphs else "exact", band if graphs else "")),
        ("available_kv_cache_bytes", Figure(available, "calibrated" if settings.kv_cache_memory_bytes is None else "exact")),
        ("bytes_per_block", Figure(bpb, "exact", "pages and groups as v1/core/kv_cache_planning.py")),
        ("num_gpu_blocks", Figure(num_blocks, "calibrated" if settings.num_gpu_blocks_override is None else "exact")),
    )
    return VllmPlan(
        model=spec.name, params=facts.params, gpu=gpu.name, release=rel.key, version_line=rel.label,
        tp=tp, pp=pp, dp=dp, total_bytes=total, utilization=util, requested_bytes=requested,
        weights_bytes=st.weights_bytes, model_loading_bytes=weights, non_torch_bytes=non_torch,
        activation_bytes=act, cudagraph_bytes=graphs, available_kv_cache_bytes=available,
        kv_cache_dtype=kv_dtype, block_size=block_size, num_gpu_blocks=num_blocks, bytes_per_block=bpb,
        blocks_per_request=per_req, max_model_len=max_len, max_model_len_auto=auto_len,
        kv_cache_tokens=kv_tokens, max_concurrency=concurrency, starts=error is None, error=error,
        estimated_max_model_len=estimated, max_num_seqs=seqs, max_num_batched_tokens=tokens,
        groups=layout.groups, in_flight_tokens=in_flight, mamba_blocks=mamba_blocks, derived_max_model_len=derived_len,
        provenance=provenance, log_lines=lines, notes=tuple(notes),
        weights_format=fmt.describe(),
        stage_memory=tuple((w, max(num_blocks, 0) * b, a, g) for _, b, w, a, g, _ in per_stage),
    )


def request_blocks(p: VllmPlan, length: int) -> int:
    """Blocks one request of ``length`` tokens takes from the pool of plan ``p``."""
    return sum(blocks_per_request(g, length, p.block_size, p.in_flight_tokens, p.mamba_blocks) for g in p.groups)


def capacity(p: VllmPlan, batch: int) -> tuple[int, int]:
    """The most requests of ``p.max_model_len`` tokens the pool holds at once, and the longest
    length (up to what the model takes) at which ``batch`` requests fit in the pool."""
    if not p.groups or not p.starts:
        return 0, 0
    most = p.num_gpu_blocks // max(request_blocks(p, p.max_model_len), 1)
    longest = _largest_len(lambda n: batch * request_blocks(p, n) <= p.num_gpu_blocks, p.derived_max_model_len)
    return most, longest


def _largest_len(fits: Callable[[int], bool], hi: int) -> int:
    """vLLM's binary search over 1..hi for the longest length that fits (0: not even one token)."""
    if not fits(1):
        return 0
    lo, best = 1, 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if fits(mid):
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best


def _log_lines(rel: Release, loading: int, available: int, blocks: int, tokens: int, conc: float, max_len: int,
               error: str | None, total: int, util: float) -> tuple[str, ...]:
    lines = [f"Model loading took {_gib(loading)} GiB memory"]
    if rel.v0_blocks:
        lines.append(f"the current vLLM instance can use total_gpu_memory ({_gib(total)}GiB) x gpu_memory_utilization "
                     f"({util:.2f}) = {_gib(total * util)}GiB")
        if error is None:
            lines += [f"# GPU blocks: {blocks}, # CPU blocks: (not modelled)",
                      f"Maximum concurrency for {max_len} tokens per request: {conc:.2f}x"]
    else:
        lines.append(f"Available KV cache memory: {_gib(available)} GiB")
        if error is None:
            if rel.combined_log_line:
                lines.append(f"GPU KV cache size: {tokens:,} tokens, Maximum concurrency for {max_len:,} tokens per "
                             f"request: {conc:.2f}x")
            else:
                lines += [f"GPU KV cache size: {tokens:,} tokens",
                          f"Maximum concurrency for {max_len:,} tokens per request: {conc:.2f}x"]
    if error:
        lines.append(f"ValueError: {error}")
    return tuple(lines)


# --- the engine interface (engines/base.py) ---------------------------------------------------------------


def summary(p: VllmPlan) -> EnginePlan:
    """The figures every engine has, from a vLLM plan."""
    from .base import engine_plan

    return engine_plan(
        "vllm", p.weights_bytes, p.available_kv_cache_bytes, p.kv_cache_tokens, p.max_concurrency, p.max_model_len,
        p.starts, f"{p.utilization:g} x total memory, minus the profiled weights, activations and CUDA graphs",
        f"blocks of {p.block_size} tokens", p.error, p.log_lines,
    )


def _short(p: VllmPlan, gpu: GPU) -> str:
    if p.error and "KV cache" in p.error and p.available_kv_cache_bytes > 0:
        need = p.blocks_per_request * p.bytes_per_block - p.available_kv_cache_bytes
        return f"KV cache short by {need / GiB:.2f} GiB for one request on {gpu.name}"
    if p.available_kv_cache_bytes <= 0:
        return f"weights ({p.weights_bytes / GiB:.2f} GiB per GPU) leave no room for the KV cache on {gpu.name}"
    return p.error or "does not start"


def replica(spec: ModelSpec, gpu: GPU, tp: int, pp: int, weights: str, kv: str, concurrency: int, context: int,
            version: str, fraction: float | None = None) -> Replica:
    """vLLM: whole requests of the pool's blocks (``vllm.capacity``), capped by ``max_num_seqs``."""
    from .base import cap_raised_to_load

    s, p, pool = cap_raised_to_load(
        VllmSettings(version=version, max_model_len=context, tensor_parallel_size=tp, pipeline_parallel_size=pp,
                     quantization=None if weights == "auto" else weights, kv_cache_dtype=kv, gpu_memory_utilization=fraction),
        lambda s: plan(spec, gpu, s), lambda p: capacity(p, 1)[0] if p.starts else 0, lambda p: p.max_num_seqs,
        "max_num_seqs", concurrency)
    reason = "" if p.starts else _short(p, gpu)
    return Replica(min(pool, p.max_num_seqs), reason, p.starts, p.weights_bytes, p.available_kv_cache_bytes,
                   p.kv_cache_tokens, p.max_num_seqs, s, p.utilization)


class _Vllm:
    name, label = "vllm", "vLLM"
    multi_node, pipeline = True, True  # launch files across nodes; pipeline stages
    pooled, lever_load, tensor_parallel, launch_hint = True, 1, True, ""
    kv_levers: tuple[str, ...] = ("fp8",)
    # the `kvbudget fit` options it reads (their dests), and what to give instead of another engine's
    fit_flags = frozenset({"vllm_version", "gpu_memory_utilization", "max_num_batched_tokens", "block_size",
                           "enforce_eager", "dp", "max_num_seqs", "tp", "pp", "num_gpus", "batch", "kv_dtype", "weights_dtype"})
    fit_instead = tuple({"mem_fraction_static": "--gpu-memory-utilization", "free_gpu_memory_fraction": "--gpu-memory-utilization",
                   "np": "--max-num-seqs", "overhead": "--gpu-memory-utilization", "weights_memory": "--engine textbook"}.items())

    def plan(self, spec: ModelSpec, gpu: GPU, setup: Setup) -> EnginePlan:
        return summary(plan(spec, gpu, VllmSettings(max_model_len=setup.context, tensor_parallel_size=setup.tp,
                                                    pipeline_parallel_size=setup.pp, kv_cache_dtype=setup.kv_dtype)))

    replica = staticmethod(replica)


ENGINE = _Vllm()
