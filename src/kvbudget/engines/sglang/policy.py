"""SGLang's KV pool, per rank, as SGLang sizes it.

From SGLang's sources (the sglang 0.5.23 wheel on PyPI, paths under ``sglang/``):
``srt/arg_groups/memory_hook.py: handle_gpu_memory_settings`` (the default mem_fraction_static from
the nvidia-smi memory, chunked_prefill_size and CUDA-graph batch sizes; ``reserve_for_graph_mb``),
``mem_cache/kv_cache_configurator.py`` (rest = free after weights - pre-load free x (1 - fraction)),
``model_executor/pool_configurator.py`` (cell size, tokens rounded down to the page size),
``KVCacheConfigurator.resolve_max_num_reqs``. The 0.4 line defaulted mem_fraction_static by TP size.
"""

from __future__ import annotations

from functools import lru_cache

from ..._record import record, replace
from ...dtypes import parse_kv_dtype
from ...hardware import GPU
from ...kvcache import MAX_PARALLEL, check_positive, check_tp, serving_dtype
from ...model.layers import MLA, FullAttention, Layer, NoCache, RecurrentState, SlidingWindow, SparseIndexer
from ...model.spec import WEIGHTS_FIX, ModelSpec, checkpoint_format
from ...parallel import Stage, pp_partition, stages
from ...units import GiB, InputError, MiB
from ..base import Replica
from ..vllm.calibration import rotary_cache_bytes
from .archs import check_architecture
from .dsa import PAGE_SIZE as DSA_PAGE
from .dsa import cell_bytes, dsa_kv_dtype, is_dsa, sglang_layers
from .settings import KV_DTYPES, SGLangSettings, attn_dp

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from ...model.weights import WeightFormat
    from ..base import EnginePlan
    from ..site import SiteTerm

# Free memory the CUDA context and cuBLAS take before SGLang measures "pre_model_load_memory" on one GPU
# (calibrated on tests/data/sglang_logs: "Load weight begin. avail mem" vs the device total). A TP group's NCCL
# connections and custom all-reduce buffers come on top where comms.py models them.
CONTEXT_BYTES = int(0.55 * GiB)


@record
class SGLangPlan:
    model: str
    gpu: str
    version: str
    tp: int
    mem_fraction_static: float
    reserved_mib: float
    chunked_prefill_size: int
    cuda_graph_max_bs: int
    pre_load_bytes: int
    weights_bytes: int
    after_load_bytes: int
    rest_bytes: int
    cell_bytes: int
    page_size: int
    max_total_num_tokens: int
    swa_tokens: int
    mamba_cache_size: int
    k_size_bytes: int
    v_size_bytes: int
    max_running_requests: int
    context_len: int
    max_concurrency: float
    starts: bool
    error: str | None
    log_lines: tuple[str, ...]
    notes: tuple[str, ...]
    attn_tp: int = 1  # attention TP size: tp / dp under --enable-dp-attention, else tp
    attn_dp: int = 1  # attention data-parallel workers in the server, each with its own pool of max_total_num_tokens
    ep_size: int = 1  # expert-parallel size applied (1 for a dense model)
    comms_bytes: int = 0  # NCCL connections and custom all-reduce buffers held before the pre-load measurement
    unattributed_bytes: int = 0  # the rest of the TP group's init before that measurement (comms.py, fitted)
    late_comms_bytes: int = 0  # torch's communicator, connected after the measurement and before loading (0.4 line)
    allocator_bytes: int = 0  # the caching allocator's segments beyond the weights' bytes (allocations.py)


def _prefill_graph_sizes(max_bs: int) -> list[int]:
    """generate_prefill_cuda_graph_batch_sizes."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32)) + list(range(576, 1025, 64))
             + list(range(1280, 4097, 256)) + list(range(4608, max_bs + 1, 512)))
    return [s for s in sizes if s <= max_bs]


def _tiers(gpu_mib: int | None, tp: int) -> tuple[int, int]:
    """chunked_prefill_size and decode CUDA-graph max_bs by nvidia-smi memory (memory_hook.py)."""
    if gpu_mib is None:
        return 4096, 160
    gib = 1024
    if gpu_mib < 20 * gib:
        return 2048, 8
    if gpu_mib < 35 * gib:
        return 4096, 48 if tp < 4 else 160
    if gpu_mib < 60 * gib:
        return 4096, 32 if tp < 4 else 160
    if gpu_mib < 160 * gib:
        return 8192, 256 if tp < 4 else 512
    return 16384, 512


OLD_LINES = ("0.4", "0.4.8")  # releases before 0.5.3's memory rules (no SWA pool, the fixed VLM factor)


def _checkpoint_kv_dtype(spec: ModelSpec, s: SGLangSettings, notes: list[str]) -> str:
    """--kv-cache-dtype as the release resolves it: from 0.5.3 "auto" is FP8 (float8_e4m3fn) for a checkpoint whose
    quantization config names kv_cache_quant_algo FP8, as ModelOpt's do (model_executor/model_runner.py of 0.5.3,
    mem_cache/kv_cache_dtype.py configure_kv_cache_dtype of 0.5.23; WeightFormat.sglang_auto_fp8 reads the config as
    SGLang does, not as vLLM does); the value as given otherwise."""
    fmt = spec.weight_format
    if s.kv_cache_dtype != "auto" or fmt is None or not fmt.sglang_auto_fp8:
        return s.kv_cache_dtype
    if s.quantization not in (None, "") and not s.quantization.startswith("modelopt"):
        return s.kv_cache_dtype
    if s.version in OLD_LINES:
        notes.append("the checkpoint's ModelOpt config names an FP8 KV cache, which SGLang before 0.5.3 does not take "
                     "for --kv-cache-dtype auto: the KV cache is in the model dtype")
        return s.kv_cache_dtype
    notes.append("--kv-cache-dtype auto: SGLang takes the checkpoint's ModelOpt KV format, FP8 (mem_cache/"
                 "kv_cache_dtype.py configure_kv_cache_dtype); give --kv-cache-dtype bf16 for a 16-bit cache")
    return "fp8_e4m3"


def _tiered_fraction(gpu_mib: int | None, s: SGLangSettings) -> float:
    """0.4.8 - 0.5.2 (srt/server_args.py ``__post_init__``): (memory - reserved) / memory, the reserve by the GPU's
    memory tier (2.8 GiB + parallel size / 10 below 35 GiB, 9.5 + parallel size / 2 below 90, 12 + that below 160, 32
    above), 4 GiB more under DP attention; 0.88 when the memory is unknown."""
    if gpu_mib is None:
        return 0.88
    n = s.tp * s.pp
    gib = 1024
    if gpu_mib < 35 * gib:
        reserved = (2.8 + n / 10) * gib
    elif gpu_mib < 90 * gib:
        reserved = (9.5 + n / 2) * gib
    elif gpu_mib < 160 * gib:
        reserved = (12 + n / 2) * gib
    else:
        reserved = 32.0 * gib
    if s.enable_dp_attention:
        reserved += 4 * gib
    return round((gpu_mib - reserved) / gpu_mib, 3)


def default_fraction(spec: ModelSpec, gpu_mib: int | None, s: SGLangSettings, chunk: int, max_bs: int) -> tuple[float, float]:
    """SGLang's default mem_fraction_static and the reserved MiB behind it."""
    if s.version == "0.4.8":
        return _tiered_fraction(gpu_mib, s), 0.0
    if s.version == "0.4":
        tp = s.tp
        frac = 0.79 if tp >= 16 else 0.81 if tp >= 8 else 0.85 if tp >= 4 else 0.87 if tp >= 2 else 0.88
        return frac, 0.0
    if gpu_mib is None:
        return 0.95, 0.0
    mla = any(isinstance(x, MLA) for x in spec.layers)
    reserved = 512 + max(chunk, 2048) * 1.5 + s.tp * s.pp / 8 * 1024
    graph = 0.0
    if not s.disable_cuda_graph:
        graph += 2 * max_bs
        if s.enable_dp_attention:
            graph += max_bs * s.dp * 3 + (max_bs * s.dp * 1.5 if max_bs > 300 else 0)
        graph += 1.5 * 1024 if mla else 8 * len(_prefill_graph_sizes(min(chunk, 8192) if mla else chunk))
    reserved += graph
    if gpu_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((gpu_mib - reserved) / gpu_mib, 3), reserved


@lru_cache(maxsize=16, typed=True)  # a scan of every tensor, the same on every GPU type a search plans
def _vision_encoder(spec: ModelSpec) -> tuple[int, int] | None:
    """(layers, hidden size) of the model's ViT, from its fused QKV weights, or None. Memoized (bounded)."""
    for t in spec.inventory.tensors():
        if t.role == "vision" and t.linear and t.rows == 3 * t.cols:
            return t.count, t.cols
    return None


# --mamba-ssm-dtype's choices (server_args.py 0.5.9 - 0.5.23; 0.5.2 - 0.5.8 took bfloat16 and float32) as kvbudget's dtypes
_SSM_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def pool_of(layer: Layer, old: bool) -> str:
    """The one place a layer kind meets SGLang's pools (mem_cache/memory_pool.py): "full" (MHATokenToKVPool, or
    MLATokenToKVPool; chunked local attention is cached in full), "swa" (the sliding-window part of SWAKVPool;
    the 0.4 line (``old``) had none and gave sliding layers full-length buffers), "mamba" (MambaPool) or ""
    (nothing cached)."""
    if isinstance(layer, RecurrentState):
        return "mamba"
    if isinstance(layer, SlidingWindow) and not old:
        return "swa"
    if isinstance(layer, (FullAttention, MLA, SparseIndexer)):  # a DSA indexer's keys sit in the DSA pool
        return "full"
    return ""


# Model families whose input embedding is split over the attention-TP group under DP attention
# (``VocabParallelEmbedding(use_attn_tp_group=is_dp_attention_enabled())`` in sglang 0.5.23 ``models/qwen2.py``,
# ``qwen2_moe.py`` (Qwen3-MoE's model), ``qwen3_next.py``, ``glm4_moe.py``, ``gpt_oss.py``, ``llama4.py``,
# ``minimax_m2.py``; ``layers/vocab_parallel_embedding.py: get_embedding_tp_kwargs`` for ``deepseek_v2.py``).
# Others (``models/llama.py``) keep it over the whole TP group.
_ATTN_TP_EMBEDDING = frozenset({"deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "qwen2", "qwen3", "qwen2_moe",
                                "qwen3_moe", "qwen3_next", "glm4", "glm4_moe", "gpt_oss", "llama4", "llama4_text",
                                "minimax_m2"})


def parallel_layout(spec: ModelSpec, s: SGLangSettings) -> tuple[int, int]:
    """(attention TP size, expert-parallel size) of one SGLang server, checked as sglang 0.5.23 checks them.

    ``--enable-dp-attention --dp N``: ``tp_size`` stays the world size and attention runs on
    ``attn_tp_size = tp_size // N`` ranks (``runtime_context.py: derive_parallel_widths``; ``tp_size %
    attn_dp_size == 0`` is asserted in ``arg_groups/parallel_hook.py: _handle_data_parallelism``).
    ``--ep-size E``: ``moe_tp_size = tp_size // E`` (``derive_parallel_widths``), so E must divide tp
    (``model_runner_components/moe_ep_setup.py: check_quantized_moe_compatibility`` says so; a larger E leaves
    moe_tp_size 0), and every rank holds ``num_experts // E`` routed experts: ``FusedMoE.__init__``
    (``layers/moe/fused_moe_triton/layer.py``) asserts they divide evenly."""
    check_positive("--tp", s.tp, MAX_PARALLEL)
    check_positive("--dp", s.dp, MAX_PARALLEL)
    check_positive("--ep-size", s.ep_size, MAX_PARALLEL)
    a_dp = attn_dp(s)
    if s.tp % a_dp:
        raise InputError(f"--dp {s.dp} with --enable-dp-attention must divide --tp {s.tp} (SGLang asserts "
                         "tp_size % attn_dp_size == 0: attention runs on tp / dp GPUs of each group)")
    ep = s.ep_size
    if ep > 1 and s.tp % ep:
        raise InputError(f"--ep-size {ep} must divide --tp {s.tp} (SGLang splits each expert over "
                         f"tp_size // ep_size ranks)")
    if ep > 1 and spec.num_experts and spec.num_experts % ep:
        raise InputError(f"--ep-size {ep} does not divide the {spec.num_experts} routed experts of {spec.name} "
                         "(SGLang's FusedMoE gives every rank the same number of experts)")
    return s.tp // a_dp, ep if spec.num_experts else 1


def rank_stages(spec: ModelSpec, fmt: WeightFormat, s: SGLangSettings) -> tuple[Stage, ...]:
    """The pipeline stages of one GPU, priced as sglang 0.5.23 splits the weights.

    Without DP attention or expert parallelism: ``parallel.stages`` over the TP group. Under DP attention
    the attention (and linear-attention) projections split over ``attn_tp_size`` ranks (``models/qwen3_moe.py:
    Qwen3MoeAttention``, ``models/deepseek_v2.py`` MLA: ``parallel_group="attn_tp"``; replicated kv_a / q_a
    stay whole), and so does the input embedding of the families in ``_ATTN_TP_EMBEDDING``; the lm_head
    (``ParallelLMHead``, ``enable_dp_lm_head`` off by default), dense MLPs (``moe_dense_tp_size`` None) and
    shared experts (``DeepseekV2MLP(parallel_group="tp")``) stay split over all tp ranks. With ``--ep-size E``
    each rank holds ``num_experts // E`` whole routed experts split ``tp // E`` ways (``FusedMoE.__init__``:
    ``_num_local_routed``, ``intermediate_size_per_partition``); shared experts stay tensor-parallel
    (DeepSeek-V3's shared-expert fusion is off under EP on NVIDIA: ``DeepseekV2ForCausalLM.
    shared_experts_fusion_disable_reason``). Per rank that is the same expert bytes as plain TP up to rounding."""
    attn_tp, ep = parallel_layout(spec, s)
    base = stages(spec, fmt, s.tp, s.pp)
    if attn_tp == s.tp and ep == 1:
        return base
    attn = stages(spec, fmt, attn_tp, s.pp) if attn_tp != s.tp else base
    moe = stages(spec, fmt, s.tp // ep, s.pp) if ep > 1 else base
    by_attn = ("attention", "mamba") + (("embeddings",) if spec.model_type in _ATTN_TP_EMBEDDING else ())
    out = []
    for b, a, m in zip(base, attn, moe, strict=True):
        roles = dict(b.weights_by_role)
        for role in by_attn:
            roles[role] = dict(a.weights_by_role).get(role, 0)
        if ep > 1:  # the experts of ep ranks' share at moe_tp = tp / ep, of which this rank keeps 1 / ep
            roles["experts"] = dict(m.weights_by_role).get("experts", 0) * (spec.num_experts // ep) // spec.num_experts
        out.append(replace(b, weights_bytes=sum(roles.values()), weights_by_role=tuple((r, v) for r, v in roles.items() if v),
                           replicated_by_role=()))
    return tuple(out)


def plan(spec: ModelSpec, gpu: GPU, s: SGLangSettings) -> SGLangPlan:
    attn_tp, ep = parallel_layout(spec, s)
    a_dp = s.tp // attn_tp
    check_tp(spec, attn_tp)  # heads split over the attention-TP group (all tp ranks without DP attention)
    pp_partition(spec.num_layers, s.pp)  # more stages than layers is refused before anything is sized
    notes: list[str] = []
    check_architecture(spec.architecture, s.version, spec.name, notes)
    spec = sglang_layers(spec, notes)  # a DSA model's indexers where SGLang builds them
    gpu_mib = gpu.nvidia_smi_mib or (round(gpu.memory_bytes / MiB) if not gpu.custom else None)
    chunk, max_bs = _tiers(gpu_mib, s.tp)
    chunk = s.chunked_prefill_size or chunk
    max_bs = s.cuda_graph_max_bs or max_bs
    if s.max_running_requests and max_bs > s.max_running_requests:
        max_bs = s.max_running_requests
    frac, reserved = default_fraction(spec, gpu_mib, s, chunk, max_bs)
    vit = _vision_encoder(spec)
    if s.mem_fraction_static is not None:
        frac, reserved = s.mem_fraction_static, 0.0
    elif vit is not None:  # memory_hook.py adjust_mem_fraction_for_vlm: room for the image encoder
        vit_layers, vit_hidden = vit
        factor = 0.95
        if s.version not in OLD_LINES:  # later releases scale it by the encoder's size against ViT-L/14
            factor *= max(0.8, min(1.05, 1.0 - 0.1 * (vit_layers * vit_hidden**2 / (24 * 1024**2) - 1.0)))
        frac = frac * factor
        notes.append(f"default mem_fraction_static scaled by {factor:.4f} for the vision encoder")
    if not 0 < frac < 1:
        if s.mem_fraction_static is not None:
            raise InputError(f"--mem-fraction-static must be in (0, 1), got {frac}")
        raise InputError(f"SGLang's default mem_fraction_static works out to {frac:.3f} on {gpu.name} at TP={s.tp} PP={s.pp} "
                         "(server_args.py reserves more than the GPU has): give --mem-fraction-static")
    model_dtype = serving_dtype(spec)
    dsa = is_dsa(spec)
    asked = _checkpoint_kv_dtype(spec, s, notes)
    kv_name = dsa_kv_dtype(spec, gpu, asked, s.version in OLD_LINES, notes) if dsa else asked
    kv = parse_kv_dtype(kv_name, model_dtype, KV_DTYPES,
                        f"SGLang's --kv-cache-dtype is one of {', '.join(KV_DTYPES)}, not {s.kv_cache_dtype!r}").element
    from ...model.weights import WeightFormat, parse_weight_format

    fmt = (checkpoint_format(spec, WEIGHTS_FIX) if s.quantization in (None, "")
           else parse_weight_format(s.quantization, model_dtype))
    if not fmt.quantized and fmt.name != "stored":
        fmt = WeightFormat(model_dtype, dense_dtype=model_dtype)
    stage = max(rank_stages(spec, fmt, s), key=lambda st: st.weights_bytes)
    from .allocations import allocator_overhead

    # the caching allocator's segments around this rank's shards, counted in SGLang's "mem usage" (allocations.py)
    alloc = allocator_overhead(spec, fmt, s.tp) if s.pp == 1 and attn_tp == s.tp and ep == 1 else 0
    weights = stage.weights_bytes + rotary_cache_bytes(spec, model_dtype) + alloc
    from .comms import communicator_bytes, torch_communicator_bytes, unattributed_bytes

    comms = communicator_bytes(gpu, s)  # the TP group's buffers, held before min_per_gpu_memory is taken
    extra = unattributed_bytes(gpu, s)  # the rest of the group's init before it, fitted (comms.py)
    late = torch_communicator_bytes(gpu, s)  # torch's communicator: after the measurement, before loading (0.4)
    pre = gpu.memory_bytes - CONTEXT_BYTES - comms - extra - _site_held(gpu, s, notes, CONTEXT_BYTES + comms + extra)
    if gpu.unified_memory:
        from ...hardware import unified_note

        notes.append(unified_note(gpu))
    if comms:
        from ..vllm.nccl import connection_bytes

        ca = " and custom all-reduce buffers" if comms > connection_bytes(s.tp) else ""
        notes.append(f"TP group: {comms / GiB:.2f} GiB of NCCL connections{ca} and {extra / GiB:.2f} GiB more "
                     "(fitted to a published 8 x H200 log, unattributed) per GPU before the free memory is measured "
                     "(pynccl's communicator, NCCL_CUMEM_ENABLE=0)")
    if late:
        notes.append(f"TP group: torch's NCCL communicator ({late / GiB:.2f} GiB) connects after the free memory is "
                     "measured (the minimum over the group is a GPU all-reduce up to 0.4.6): off the pool in full")
    if round(alloc / GiB, 2):  # where it shows in the logged GB
        notes.append(f"weights: {alloc / MiB:.0f} MiB of PyTorch caching-allocator segments around this rank's shards")
    after = pre - late - weights
    slack = pre * (1 - frac)
    rest = int(after - slack)
    page = s.page_size or (DSA_PAGE if dsa else 1)  # default page size 1 (arg_groups/overrides.py); some attention backends force 32-128
    layers = stage.layers
    # SGLang 0.4 gave sliding-window layers a full-length pool like every other layer (no SWA pool yet)
    old = s.version in OLD_LINES
    pools: dict[str, list[Layer]] = {"full": [], "swa": [], "mamba": [], "": []}
    for x in layers:
        # a layer that reads another's KV (Gemma 4's num_kv_shared_layers) still gets a buffer of its own: SGLang
        # 0.5.23 sizes its pools by full_attention_layer_ids / swa_attention_layer_ids, every layer of each type
        # (configs/model_config.py get_hybrid_layer_ids), and only the attention call reads the owner's layer id
        x = x.shared if isinstance(x, NoCache) and x.shared is not None else x
        pools[pool_of(x, old)].append(x)
    full, swa, mamba = pools["full"], pools["swa"], pools["mamba"]
    # model_executor/pool_configurator.py (_compute_cell_size): KV heads per rank of the attention-TP group; an
    # MLA latent is whole on every rank. Under DP attention each of the tp / attn_tp groups keeps its own pool
    # for its own requests.
    per_full = cell_bytes(full, kv, gpu) if dsa else sum(x.bytes_per_token(kv, attn_tp) for x in full)
    per_swa = sum(x.bytes_per_token(kv, attn_tp) for x in swa)
    mamba_size = 0
    if mamba:
        ssm = _SSM_DTYPES.get(s.mamba_ssm_dtype)
        if ssm is None:
            raise InputError(f"SGLang's --mamba-ssm-dtype is one of {', '.join(_SSM_DTYPES)}, not {s.mamba_ssm_dtype!r}")
        per_req = sum(replace(x, state_dtype=ssm).bytes_per_sequence(0, kv, attn_tp)
                      for x in mamba if isinstance(x, RecurrentState))
        q = s.mamba_full_memory_ratio
        budget = rest * q / (1 + q)
        mamba_size = max(int((budget - per_req) // per_req), 0)
        rest -= (mamba_size + 1) * per_req
        notes.append(f"Mamba state pool of {mamba_size} slots ({per_req:,} B each) taken from the KV budget")
    cell = per_full + s.swa_full_tokens_ratio * per_swa
    error = None
    load_oom = weights > pre - late  # more weights than the GPU has free: torch fails while they load
    if load_oom or rest <= 0 or cell <= 0:
        tokens = 0
        # sglang 0.5.23, srt/model_executor/pool_configurator.py (__post_init__): the pool's check
        error = ("CUDA out of memory while loading the weights" if load_oom else
                 f"Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static={frac}"
                 if rest <= 0 else "attention-free model")
    else:
        tokens = int(rest // cell) // page * page
        if s.max_total_tokens is not None and s.max_total_tokens < tokens:
            tokens = s.max_total_tokens // page * page
    swa_tokens = int(s.swa_full_tokens_ratio * tokens) // page * page if swa else 0
    context = s.context_length or spec.max_context
    # each layer's buffers hold max_total_num_tokens + one page of padding (mem_cache/memory_pool.py)
    mla = bool(full) and isinstance(full[0], MLA)
    k_size = per_full * (tokens + page) if mla else per_full // 2 * (tokens + page)
    v_size = 0 if mla else k_size
    est = min(max(int(tokens / context * 512), 2048), 4096)
    # KVCacheConfigurator.resolve_max_num_reqs: per attention-DP worker
    reqs = min(max(1, s.max_running_requests // a_dp), tokens // 2) if s.max_running_requests else min(est, tokens // 2)
    starts = error is None and tokens > 0
    if a_dp > 1:
        # parallel_hook.py (_handle_data_parallelism) divides chunked_prefill_size by attn_dp_size after
        # memory_hook.py has sized the reserve from the undivided one
        notes.append(f"DP attention: {a_dp} DP ranks of {attn_tp} GPU{'s' if attn_tp > 1 else ''} each, every one with its own "
                     f"pool of {tokens:,} tokens and at most {max(reqs, 0):,} running requests (the server holds {a_dp} x that)")
    if ep > 1:
        notes.append(f"expert parallelism: {spec.num_experts // ep} of {spec.num_experts} routed experts per GPU, "
                     f"each split {s.tp // ep} way{'s' if s.tp // ep > 1 else ''}")
    elif s.ep_size > 1:
        notes.append(f"--ep-size {s.ep_size} ignored: {spec.name} has no routed experts")
    lines = [f"Load weight begin. avail mem={(pre - late) / GiB:.2f} GB"]
    if load_oom:
        lines.append(f"torch.OutOfMemoryError: CUDA out of memory while loading the weights "
                     f"({weights / GiB:.2f} GB of weights, {(pre - late) / GiB:.2f} GB free)")
    else:
        lines.append(f"Load weight end. avail mem={after / GiB:.2f} GB, mem usage={weights / GiB:.2f} GB.")
    if starts:
        dtype = {"bf16": "torch.bfloat16", "fp16": "torch.float16", "fp8_e4m3": "torch.float8_e4m3fn",
                 "fp8_e5m2": "torch.float8_e5m2"}.get(kv.name, kv.name)
        if v_size:
            lines.append(f"KV Cache is allocated. dtype: {dtype}, #tokens: {tokens}, K size: {k_size / GiB:.2f} GB, "
                         f"V size: {v_size / GiB:.2f} GB")
        else:
            lines.append(f"KV Cache is allocated. dtype: {dtype}, #tokens: {tokens}, KV size: {k_size / GiB:.2f} GB")
        lines.append(f"max_total_num_tokens={tokens}, chunked_prefill_size={chunk // a_dp}, max_prefill_tokens=16384, "
                     f"max_running_requests={reqs}, context_len={context}")
    elif error and not load_oom:
        lines.append(f"RuntimeError: {error}")
    return SGLangPlan(
        model=spec.name, gpu=gpu.name, version=s.version, tp=s.tp, mem_fraction_static=frac, reserved_mib=reserved,
        chunked_prefill_size=chunk, cuda_graph_max_bs=max_bs, pre_load_bytes=pre, weights_bytes=weights,
        after_load_bytes=after, rest_bytes=rest, cell_bytes=int(cell), page_size=page, max_total_num_tokens=tokens,
        swa_tokens=swa_tokens, mamba_cache_size=mamba_size, k_size_bytes=k_size, v_size_bytes=v_size,
        max_running_requests=max(reqs, 0), context_len=context,
        max_concurrency=tokens / context if context else 0.0, starts=starts, error=error, log_lines=tuple(lines),
        attn_tp=attn_tp, attn_dp=a_dp, ep_size=ep, comms_bytes=comms, unattributed_bytes=extra,
        late_comms_bytes=late, allocator_bytes=alloc,
        notes=tuple(notes) + ((f"default mem_fraction_static {frac:.4g} = (nvidia-smi {gpu_mib} MiB - reserved "
                               f"{reserved:.0f} MiB) / {gpu_mib} MiB",) if reserved else ()),
    )


def _site_held(gpu: GPU, s: SGLangSettings, notes: list[str], modelled: int) -> int:
    """Memory a site profile says is held outside the server on this GPU and release line (``--profile``: a desktop,
    WSL2's host, another process), off the free memory SGLang measures before loading and sizes its pool from."""
    from ..site import held_by_site

    return held_by_site(s.site, gpu, s.version, s.tp * s.pp, f"SGLang's {s.version} line",
                        "held outside the server: off the free memory before loading", notes,
                        (modelled, "the CUDA context and the TP group's buffers before loading"))


# --- the engine interface (engines/base.py) ---------------------------------------------------------------


def summary(p: SGLangPlan) -> EnginePlan:
    """The figures every engine has, from an SGLang plan."""
    from ...units import plural
    from ..base import Part, engine_plan

    # what mem_fraction_static leaves out of the pool: activations, CUDA graphs and the rest, as one reserve
    reserve = max(p.pre_load_bytes - p.late_comms_bytes - p.weights_bytes - max(p.rest_bytes, 0), 0)
    parts: tuple[Part, ...] = (Part("weights", p.weights_bytes, "modelled"),
                               Part("KV pool", max(p.rest_bytes, 0), "modelled"),
                               Part("reserved (1 - mem_fraction_static)", reserve, "modelled"))
    if p.comms_bytes or p.late_comms_bytes:
        parts += (Part("NCCL and custom all-reduce", p.comms_bytes + p.late_comms_bytes, "modelled"),)
    if p.unattributed_bytes:
        parts += (Part("TP init, unattributed", p.unattributed_bytes, "calibrated"),)
    return engine_plan(
        "sglang", p.weights_bytes, p.rest_bytes, p.max_total_num_tokens, p.max_concurrency, p.context_len,
        p.starts, f"free memory after weights minus (1 - {p.mem_fraction_static:.4g}) x free memory before loading",
        f"pages of {plural(p.page_size, 'token')}", p.error, p.log_lines, cap=p.max_running_requests,
        blocks=p.max_total_num_tokens // max(p.page_size, 1), block_tokens=p.page_size, parts=parts,
        pools=p.attn_dp,  # --enable-dp-attention: a pool and a scheduler per DP rank
    )


def replica(spec: ModelSpec, gpu: GPU, tp: int, pp: int, weights: str, kv: str, concurrency: int, context: int,
            version: str, fraction: float | None = None, site: tuple[SiteTerm, ...] = ()) -> Replica:
    """SGLang: the requests whose tokens fit in its pool (``max_total_num_tokens // context``), capped by
    ``max_running_requests``. ``version``: SGLang's release line (0.4; anything else: the current one); ``site``:
    a site profile's terms (--profile)."""
    kv_name = "fp8_e4m3" if kv == "fp8" else kv  # kvbudget's fp8: SGLang's e4m3
    from ..base import cap_raised_to_load

    s, p, pool = cap_raised_to_load(
        SGLangSettings(version=version if version in OLD_LINES else "current", tp=tp, pp=pp, context_length=context,
                       kv_cache_dtype=kv_name,
                       quantization=None if weights == "auto" else weights, mem_fraction_static=fraction, site=site),
        lambda s: plan(spec, gpu, s), lambda p: p.max_total_num_tokens // context if p.starts else 0,
        lambda p: p.max_running_requests, "max_running_requests", concurrency)
    pool = p.max_total_num_tokens // context
    return Replica(min(pool, p.max_running_requests), "" if p.starts else p.error or "does not start", p.starts,
                   p.weights_bytes, max(p.rest_bytes, 0), p.max_total_num_tokens, p.max_running_requests, s,
                   p.mem_fraction_static)

