"""TensorRT-LLM's paged KV cache: a fraction of the memory left after the profiled peak.

From TensorRT-LLM's sources (https://github.com/NVIDIA/TensorRT-LLM, main in 2026): PyTorch backend
``tensorrt_llm/_torch/pyexecutor/_util.py: KvCacheCreator`` (available = (total - peak + temporary
KV) x free_gpu_memory_fraction, 0.9 by default; tokens_per_block 32), per-token size
``resource_manager.py: KVCacheManager.get_cache_size_per_token`` (2 x head_dim x KV heads // TP x
layers x bytes, no max(1, ...); MLA: (kv_lora_rank + rope) x layers, not split), and the C++ engine
path ``kvCacheManager.cpp`` (free memory after the engine and its buffers x fraction, blocks of 64).
"""

from __future__ import annotations

from ..._record import record, replace
from ...dtypes import parse_kv_dtype
from ...hardware import GPU
from ...kvcache import check_tp, serving_dtype
from ...model.layers import MLA, FullAttention
from ...model.spec import ModelSpec
from ...model.weights import WeightFormat, parse_weight_format
from ...parallel import stages
from ...units import GiB, InputError
from ..base import Replica
from .settings import _KV_DTYPES, TrtllmSettings

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from ..base import EnginePlan

# Calibrated on tests/data/trtllm_logs (the peak of the profiling run above the weights: activations
# of max_num_tokens tokens and non-torch memory), per rank.
NON_TORCH_BYTES = int(0.6 * GiB)
ACT_BYTES_PER_TOKEN_HIDDEN = 8  # x hidden_size x 2 bytes per token of max_num_tokens


@record
class TrtllmPlan:
    model: str
    gpu: str
    backend: str
    tp: int
    weights_bytes: int
    peak_bytes: int
    available_bytes: int
    per_token_bytes: int
    tokens_per_block: int
    num_blocks: int
    max_tokens: int
    pool_bytes: int
    max_seq_len: int
    max_concurrency: float
    starts: bool
    error: str | None
    log_lines: tuple[str, ...]
    notes: tuple[str, ...]
    free_gpu_memory_fraction: float = 0.9  # the share of what the profiled peak leaves that the pool takes
    ep: int = 1  # moe_expert_parallel_size, as Mapping settles it
    moe_tp: int = 1  # moe_tensor_parallel_size, as Mapping settles it
    attention_dp: bool = False


def moe_sizes(s: TrtllmSettings) -> tuple[int, int]:
    """(moe_ep_size, moe_tp_size) as TensorRT-LLM's ``Mapping.__init__`` (``tensorrt_llm/mapping.py``: the same rule in every
    stored version, the older without cp_type, to main in 2026; the LLM API passes an unset size as -1, ``llm_args.py`` validate_parallel_config)
    settles them: neither given, every expert split over the TP ranks (moe_tp = tp, moe_ep = 1); one given, the
    other is tp // it; and their product must be tp."""
    for name, value in (("moe_expert_parallel_size", s.moe_ep), ("moe_tensor_parallel_size", s.moe_tp)):
        if value is not None and value < 1:
            raise InputError(f"TensorRT-LLM's {name} must be at least 1, got {value}")
    if s.moe_ep is None:
        mtp = s.tp if s.moe_tp is None else s.moe_tp
        ep = 1 if s.moe_tp is None else s.tp // s.moe_tp
    else:
        ep, mtp = s.moe_ep, s.tp // s.moe_ep if s.moe_tp is None else s.moe_tp
    if ep * mtp != s.tp:
        given = " and ".join(f"{name} {value}" for name, value in (("moe_expert_parallel_size", s.moe_ep),
                                                                   ("moe_tensor_parallel_size", s.moe_tp)) if value)
        raise InputError(f"TensorRT-LLM needs moe_tensor_parallel_size x moe_expert_parallel_size = tp_size ({s.tp}): "
                         f"{given} does not divide it (mapping.py); give a divisor of {s.tp}")
    return ep, mtp


def per_token_bytes(spec: ModelSpec, layers: tuple[object, ...], tp: int, nbytes: int) -> int:
    """get_cache_size_per_token: integer division of heads x head_dim by TP, no floor at one head."""
    total = 0
    for layer in layers:
        if isinstance(layer, MLA):
            total += (layer.kv_lora_rank + layer.qk_rope_head_dim) * nbytes
        elif isinstance(layer, FullAttention):
            total += 2 * (layer.head_dim * layer.num_kv_heads // tp) * nbytes
    return total


def engine_buffers(batch: int, beam: int, seq: int, vocab: int) -> tuple[int, int]:
    """Bytes of the C++ runtime's "runtime buffers" and "decoder" allocations, made before the free
    memory is measured (trtGptModelInflightBatching.cpp constructor order). With U = batch x beam x
    vocab fp32 logits: runtime buffers = U (runtimeBuffers.cpp logits) + 24 x batch x beam x seq (cache
    indirection in transformerBuffers.cpp and decoderBuffers.cpp, in and out, int32; log-probs fp32;
    the slots' output ids and log-probs); decoder = 4U (decodingLayerWorkspace runtime logits, the top-k
    scratch, penaltyLayer workspace, decoderState embedding bias) + 16 x batch x seq (ids, parent ids,
    log-probs, tiled log-probs) + 64 KiB x batch (top-k's 1024 x 8 x 8-byte scratch)."""
    u = batch * beam * vocab * 4
    return u + 24 * batch * beam * seq, 4 * u + 16 * batch * beam * seq + 65536 * batch


def plan(spec: ModelSpec, gpu: GPU, s: TrtllmSettings) -> TrtllmPlan:
    check_tp(spec, s.tp)
    if not 0 < s.free_gpu_memory_fraction < 1:
        raise InputError(f"free_gpu_memory_fraction must be in (0, 1), got {s.free_gpu_memory_fraction}")
    for name in ("max_batch_size", "max_num_tokens", "max_beam_width", "max_seq_len", "max_tokens", "tokens_per_block"):
        value = getattr(s, name)
        if value is not None and value < 1:
            raise InputError(f"TensorRT-LLM's {name} must be at least 1, got {value}")
    if s.tokens_per_block is not None and s.tokens_per_block & (s.tokens_per_block - 1):
        raise InputError(f"TensorRT-LLM's tokens_per_block must be a power of two, got {s.tokens_per_block}")
    notes: list[str] = []
    dtype = serving_dtype(spec)
    fmt = spec.weight_format if s.quantization in (None, "") else parse_weight_format(s.quantization, dtype)
    if fmt is None:
        raise InputError(f"{spec.name}: unknown weight format: give the quantization")
    if s.kv_cache_dtype == "auto" and s.quantization in (None, "") and fmt.kv_cache == "fp8":
        # "auto" takes the checkpoint's own KV quantization (llmapi/llm_utils.py: "Setting kv_cache_quant_algo=...
        # from HF quant config")
        s = replace(s, kv_cache_dtype="fp8")
        notes.append("the checkpoint's kv_cache_quant_algo FP8: TensorRT-LLM caches FP8 (kv_cache_dtype auto)")
    if not fmt.quantized and fmt.name != "stored":
        fmt = WeightFormat(dtype, dense_dtype=dtype)
    ep, moe_tp = moe_sizes(s)
    if ep > 1 and spec.num_experts % ep:
        raise InputError(f"{spec.name}: its {spec.num_experts} routed experts do not divide over moe_expert_parallel_size "
                         f"{ep} (TensorRT-LLM gives each rank num_experts // ep_size of them: fused_moe_cutlass.py)")
    # Attention DP (enable_attention_dp): every rank holds the attention (and the other non-expert weights) whole,
    # and the routed experts are shared by all tp ranks, split moe_ep x moe_tp: kvbudget's DP-group arithmetic
    # (parallel.stages with dp = tp). Without it the attention is split by TP. Routed experts: num_experts //
    # moe_ep_size per rank, each with intermediate_size // moe_tp_size (fused_moe_cutlass.py CutlassFusedMoE.__init__,
    # expert_size_per_partition and intermediate_size_per_partition).
    attn_tp = 1 if s.enable_attention_dp else s.tp
    stage = max(stages(spec, fmt, attn_tp, s.pp, s.tp // attn_tp, ep > 1, moe_tp if ep > 1 else 1),
                key=lambda st: st.weights_bytes)
    kv = parse_kv_dtype(s.kv_cache_dtype.lower(), dtype, _KV_DTYPES,
                        f"TensorRT-LLM's KV cache dtype is auto or fp8 in kvbudget's model, not {s.kv_cache_dtype!r}")
    nbytes = kv.element.nbytes(1)
    # with attention DP each rank caches every KV head of its own requests (resource_manager.py
    # get_cache_size_per_token: tp_size = 1 if mapping.enable_attention_dp else mapping.tp_size)
    per_token = per_token_bytes(spec, stage.layers, attn_tp, nbytes)
    if ep > 1 or s.enable_attention_dp:
        notes.append(f"MoE parallelism: moe_expert_parallel_size {ep} x moe_tensor_parallel_size {moe_tp}"
                     + (f"; attention DP: attention weights whole and every KV head on each of the {s.tp} ranks, "
                        f"each with its own requests (figures are per rank: the server holds {s.tp} x the requests)"
                        if s.enable_attention_dp else ""))
    if any(isinstance(x, FullAttention) and x.num_kv_heads < attn_tp for x in stage.layers):
        notes.append("TP exceeds the KV heads: TRT-LLM's per-token estimate divides heads x head_dim by TP without "
                     "a floor at one head (resource_manager.py)")
    tpb = s.tokens_per_block or (32 if s.backend == "pytorch" else 64)
    max_seq = s.max_seq_len or spec.max_context
    if s.backend == "engine":
        # the engine's execution-context memory (its activations for max_num_tokens, fixed at build time;
        # estimate: the MLP's gate and up outputs and four hidden-size tensors per token, in 16 bits)
        d = spec.dims
        act = s.max_num_tokens * (2 * d.intermediate_size // s.tp + 4 * d.hidden_size) * 2
        runtime, decoder = engine_buffers(s.max_batch_size, s.max_beam_width, max_seq, d.vocab_size)
        peak = stage.weights_bytes + act + runtime + decoder + NON_TORCH_BYTES
        notes.append(f"engine runtime: execution context {act / GiB:.2f} GiB (estimate), runtime buffers "
                     f"{runtime / GiB:.2f} GiB and decoder {decoder / GiB:.2f} GiB for max_batch_size "
                     f"{s.max_batch_size} x max_seq_len {max_seq:,} (exact), CUDA context {NON_TORCH_BYTES / GiB:.1f} GiB")
    else:
        act = s.max_num_tokens * ACT_BYTES_PER_TOKEN_HIDDEN * spec.dims.hidden_size * 2
        peak = stage.weights_bytes + act + NON_TORCH_BYTES
    available = int((gpu.memory_bytes - peak) * s.free_gpu_memory_fraction)
    error = None
    if available <= 0 or per_token <= 0:
        tokens = blocks = 0
        error = "no GPU memory left for the KV cache after the weights and the profiled peak"
    else:
        tokens = available // per_token
        if s.max_tokens is not None and s.max_tokens < tokens:
            notes.append("both free_gpu_memory_fraction and max_tokens are set: the smaller value is used")
            tokens = s.max_tokens
        blocks = tokens // tpb
    pool = blocks * tpb * per_token
    lines = []
    if s.backend == "pytorch":
        lines.append(f"Peak memory during memory usage profiling (torch + non-torch): {peak / GiB:.2f} GiB, available KV "
                     f"cache memory when calculating max tokens: {available / GiB:.2f} GiB, fraction is set "
                     f"{s.free_gpu_memory_fraction}, kv size per token is {per_token}.")
    else:
        free = gpu.memory_bytes - peak
        lines.append(f"[TensorRT-LLM][INFO] Memory usage when calculating max tokens in paged kv cache: total: "
                     f"{gpu.memory_bytes / GiB:.2f} GiB, available: {free / GiB:.2f} GiB")
        lines.append(f"[TensorRT-LLM][INFO] Number of blocks in KV cache primary pool: {blocks}")
    lines.append(f"[TensorRT-LLM][INFO] Number of tokens per block: {tpb}.")
    lines.append(f"[TensorRT-LLM][INFO] [MemUsageChange] Allocated {pool / GiB:.2f} GiB for max tokens in paged KV cache "
                 f"({blocks * tpb}).")
    if blocks * tpb < max_seq and error is None:
        notes.append(f"the pool holds fewer tokens than max_seq_len {max_seq:,}: TRT-LLM reduces the attention window "
                     f"to {blocks * tpb:,} instead of failing")
    return TrtllmPlan(
        free_gpu_memory_fraction=s.free_gpu_memory_fraction, ep=ep, moe_tp=moe_tp, attention_dp=s.enable_attention_dp,
        model=spec.name, gpu=gpu.name, backend=s.backend, tp=s.tp, weights_bytes=stage.weights_bytes, peak_bytes=peak,
        available_bytes=available, per_token_bytes=per_token, tokens_per_block=tpb, num_blocks=blocks,
        max_tokens=blocks * tpb, pool_bytes=pool, max_seq_len=max_seq,
        max_concurrency=blocks * tpb / max_seq if max_seq else 0.0, starts=error is None, error=error,
        log_lines=tuple(lines), notes=tuple(notes),
    )


# --- the engine interface (engines/base.py) ---------------------------------------------------------------


def summary(p: TrtllmPlan) -> EnginePlan:
    """The figures every engine has, from a TensorRT-LLM plan."""
    from ..base import Part, engine_plan

    parts = (Part("weights", p.weights_bytes, "modelled"),
             Part("profiled peak (activations)", max(p.peak_bytes - p.weights_bytes, 0), "calibrated"),
             Part("KV pool", max(p.pool_bytes, 0), "modelled"))
    return engine_plan(
        "trtllm", p.weights_bytes, p.available_bytes, p.max_tokens, p.max_concurrency, p.max_seq_len, p.starts,
        f"{p.free_gpu_memory_fraction:g} x the memory left after the profiled peak", f"blocks of {p.tokens_per_block} tokens",
        p.error, p.log_lines, blocks=p.num_blocks, block_tokens=p.tokens_per_block, parts=parts,
    )


def replica(spec: ModelSpec, gpu: GPU, tp: int, pp: int, weights: str, kv: str, concurrency: int, context: int,
            version: str, fraction: float | None = None) -> Replica:
    """TensorRT-LLM (PyTorch backend, ``trtllm-serve``): whole requests of its paged pool
    (``max_tokens // context``), capped by ``max_batch_size``."""
    del version
    if weights != "auto":  # trtllm-serve takes a pre-quantized checkpoint
        raise InputError("TensorRT-LLM is planned with the checkpoint's own weights (use --weights-dtype auto, or "
                         "pass a pre-quantized checkpoint)")
    from ..base import cap_raised_to_load

    fp8 = parse_kv_dtype(kv.lower(), serving_dtype(spec), _KV_DTYPES,  # an FP8 cache: TensorRT-LLM's (e4m3)
                         f"TensorRT-LLM's KV cache is one of {', '.join(_KV_DTYPES)}, not {kv!r}").is_fp8
    s = TrtllmSettings(tp=tp, pp=pp, max_seq_len=context, kv_cache_dtype="fp8" if fp8 else kv)
    if fraction is not None:
        s = replace(s, free_gpu_memory_fraction=fraction)
    cap = s.max_batch_size  # TensorRT-LLM's cap is a setting, not a figure of its plan
    s, p, _ = cap_raised_to_load(s, lambda s: plan(spec, gpu, s), lambda p: p.max_tokens // context if p.starts else 0,
                                 lambda p: cap, "max_batch_size", concurrency)
    pool = p.max_tokens // context
    return Replica(min(pool, s.max_batch_size), "" if p.starts else p.error or "does not start", p.starts,
                   p.weights_bytes, p.pool_bytes, p.max_tokens, s.max_batch_size, s, s.free_gpu_memory_fraction)

