"""vLLM's defaults that depend on the GPU and the release (max_num_batched_tokens, max_num_seqs, CUDA-graph
capture sizes), and the model of the memory vLLM measures at start-up besides the KV cache: non-torch memory,
the profiling run's activation peak, the rotary cache and CUDA-graph memory. The ``calibrated`` figures of a
plan: constants fitted on published start-up logs (tests/data/vllm_logs), with the error band seen there.
"""

from __future__ import annotations

from functools import lru_cache

from ..._record import record
from ...hardware import GPU, capability
from ...model.layers import MLA, FullAttention
from ...model.spec import ModelSpec
from ...units import GiB, InputError, element_type
from .settings import Release, VllmSettings, is_v1_alpha, minor_patch, release_minor, version_minor


@lru_cache(maxsize=4096)  # pure, of hashable arguments whose hashes the records keep: a search asks it for every plan
def batch_defaults(gpu: GPU, settings: VllmSettings, rel: Release, max_model_len: int) -> tuple[int, int]:
    """max_num_batched_tokens and max_num_seqs as vLLM fills them in (engine/arg_utils.py
    get_batch_defaults and _set_default_max_num_seqs_and_batched_tokens_args)."""
    server = settings.entrypoint != "llm"
    total = gpu.memory_bytes
    minor = release_minor(settings.version) if rel.key == "current" else 0
    # 0.29 added a tier for cards of 160 GiB or more (B200, B300, MI300X). The GB10 (DGX Spark, compute capability
    # 12.1) is on the small tier in every release: up to 0.32 platforms/cuda.py get_device_total_memory asks NVML,
    # which has no device memory for an integrated part, and arg_utils.py takes the exception as 0 bytes (a 0.13.0
    # GB10 log prints max_num_batched_tokens=2048); 0.33 reads the total from torch and keeps the GB10 small by name
    gb10 = capability(gpu) == 12.1
    if total >= 160 * GiB and minor >= 29:
        tokens, seqs = 16384, 1024
    elif total >= 70 * GiB and "a100" not in gpu.name.lower() and not gb10:
        tokens, seqs = (8192 if server else 16384), 1024
    else:
        tokens, seqs = (2048 if server else 8192), 256
    if rel.key == "v0":
        tokens, seqs = 2048, 256  # V0: SchedulerConfig defaults; chunked prefill off below 32K contexts
    if rel.blocks_log_line:  # the 0.7 V1 alpha (engine/arg_utils.py _override_v1_engine_args of 0.7.0-0.7.3)
        large = "h100" in gpu.name.lower() or "h200" in gpu.name.lower()
        tokens = (8192 if server else 16384) if large else (2048 if server else 8192)
        seqs = 1024  # EngineArgs: 256 if not envs.VLLM_USE_V1 else 1024
    user_tokens, user_seqs = settings.max_num_batched_tokens, settings.max_num_seqs
    if settings.performance_mode == "throughput":
        tokens, seqs = tokens * 2, seqs * 2
    seqs = user_seqs or seqs
    if user_tokens is None:
        if not chunked_prefill(settings, rel, max_model_len):
            tokens = max(max_model_len, tokens)
        tokens = min(seqs * max_model_len, tokens)
    else:
        tokens = user_tokens
        _scheduler_takes(settings, rel, tokens, max_model_len)
    return tokens, min(seqs, tokens)


def chunked_prefill(settings: VllmSettings, rel: Release, max_model_len: int) -> bool:
    """Whether the scheduler chunks prefills: --enable-chunked-prefill as given, else always in V1 and, in V0, for
    contexts over 32K (engine/arg_utils.py of 0.6-0.10)."""
    chunked = settings.enable_chunked_prefill
    return chunked if chunked is not None else (rel.key != "v0" or max_model_len > 32768)


def _scheduler_takes(settings: VllmSettings, rel: Release, tokens: int, max_model_len: int) -> None:
    """SchedulerConfig's checks of a --max-num-batched-tokens the command gives (config/scheduler.py
    verify_max_model_len, 0.33.0; config.py SchedulerConfig._verify_args in 0.6-0.10): the engine stops at start-up
    with a ValueError where a batch holds fewer tokens than a whole prompt without chunked prefill, or fewer than the
    --max-num-seqs the command also gives (where it gives none, vLLM lowers the default to the tokens)."""
    if tokens < max_model_len and not chunked_prefill(settings, rel, max_model_len):
        raise InputError(f"vLLM stops at start-up: `ValueError: max_num_batched_tokens ({tokens}) is smaller than "
                         f"max_model_len ({max_model_len})` (chunked prefill is off): raise --max-num-batched-tokens to "
                         f"{max_model_len}, lower --max-model-len, or enable chunked prefill")
    if settings.max_num_seqs is not None and tokens < settings.max_num_seqs:
        raise InputError(f"vLLM stops at start-up: `ValueError: max_num_batched_tokens ({tokens}) must be greater than "
                         f"or equal to max_num_seqs ({settings.max_num_seqs})`: raise --max-num-batched-tokens or "
                         "lower --max-num-seqs")


def blackwell_ceiling(gpu: GPU) -> bool:
    """Whether vLLM's default largest capture size is 1024 on this GPU (0.28 on: compute capability 10.x, the B200,
    B300 and GB200 boards; config/vllm.py _set_cudagraph_sizes is_device_capability_family(100)), not 512."""
    return gpu.name.upper().startswith(("B200", "B300", "GB200"))


def capture_sizes(max_num_seqs: int, max_num_tokens: int, gpu: GPU) -> tuple[int, ...]:
    """CUDA-graph capture sizes with no compilation flags, as 0.28-0.30 choose them (config/vllm.py
    _set_cudagraph_sizes): 1, 2, 4, then steps of 8 below 256 and of 16 from 256, up to min(2 x max_num_seqs, 512)
    (1024 on Blackwell). The plans resolve them per release and flag (compile_flags.graph_plan)."""
    from .compile_flags import default_sizes

    top = min(2 * max_num_seqs, 1024 if blackwell_ceiling(gpu) else 512)
    return tuple(s for s in default_sizes(top, max_num_tokens, False) if s <= max_num_tokens)


# --- the non-KV memory model ---------------------------------------------------------------------

# Calibrated on the published start-up logs in tests/data/vllm_logs/ (tests/test_vllm_logs.py reports
# the fit and its error band). Values are per rank.
#
# Non-torch memory that vLLM counts after its start snapshot: cuBLAS/attention workspaces (logs:
# 0.03-0.35 GiB at TP=1), plus custom all-reduce and NCCL buffers at TP>1 (0.44 GiB at TP=2 in
# v0.11-0.12_80gb-x2_gpt-oss-120b_tp2_default).
#
# The two Llama-3.1-8B fits below come from releases that take their figure from the device's free memory, so it
# holds the PyTorch caching-allocator segments beside the bf16 weights' blocks (allocations.py segment_bytes: at TP 1,
# 18,341,888 B, the rotary cache's float32 temporaries' remainders); each constant is the logged figure less them,
# and the segments are added back per model where a release counts them (policy.py _segments).
FIT_LOG_SEGMENTS_BYTES = 18_341_888
NON_TORCH_TP1_BYTES = {
    # published 0.31.0 log, Llama-3.1-8B, A100 80GB: consumed 15.26 GiB, 14.99 GiB of weights, less the segments
    "current": int(0.27 * GiB) - FIT_LOG_SEGMENTS_BYTES,
    "v1": int(0.05 * GiB),  # v0.10.2dev_a100_qwen3-0.6b (0.54 GiB above the weights in all)
    "v0": int(0.05 * GiB),  # the increase over the worker's baseline: 0.03-0.05 in the 0.7-0.8 V0 logs
}
# vLLM 0.6.4 (worker.py determine_num_available_blocks) counts every byte on the device that torch did not
# allocate, the CUDA context and cuBLAS's workspace included: "non_torch_memory=0.35GiB" in both RTX 3090 logs
# (v0.6.4_rtx3090_llama3.1-8b); 0.4.3-0.6.3 measure from the worker's start and 0.6.5 on the increase over a
# baseline, so neither counts the context. The V1 worker of 0.7.0-0.9.0 does as 0.6.4 did
# (v1/worker/gpu_worker.py determine_available_memory: the torch peak plus ``mem_get_info`` used minus torch's
# allocated bytes, no baseline); 0.9.1 took 0.6.5's baseline snapshot (``memory_profiling``).
NON_TORCH_0_6_4_BYTES = int(0.35 * GiB) - FIT_LOG_SEGMENTS_BYTES  # 0.6.4 counts the segments too (allocations.py)
# What such a release counts on top of the increase the others count: the device's memory at the worker's start
CUDA_CONTEXT_BYTES = NON_TORCH_0_6_4_BYTES - NON_TORCH_TP1_BYTES["v0"]


def counts_whole_device(rel_key: str, version: str) -> bool:
    """Whether the release counts the CUDA context (everything on the device torch did not allocate) as non-torch
    memory: V0 in 0.2.5-0.3.2 (worker.py profile_num_available_blocks: total minus free memory after the profiling
    run, read in 0.2.5, 0.2.7 and 0.3.0; 0.3.3 takes the worker's start as its baseline) and 0.6.4, V1 in
    0.7.0-0.9.0 (the 0.7 releases' V1 alpha, VLLM_USE_V1=1, included)."""
    rel = minor_patch(version)
    if rel is None:
        return False
    if rel_key == "v0":
        return rel == (6, 4) or (2, 5) <= rel < (3, 3)
    return rel_key == "v1" and (7, 0) <= rel <= (9, 0)


def counts_no_non_torch(rel_key: str, version: str) -> bool:
    """Whether the release counts no memory outside torch at all: V0 up to 0.2.4 sizes the KV cache from
    ``torch.cuda.max_memory_allocated()`` after the profiling run (worker/worker.py profile_num_available_blocks,
    0.2.4), so NCCL's buffers and the CUDA context come out of the headroom, not the cache."""
    rel = minor_patch(version)
    return rel_key == "v0" and rel is not None and rel <= (2, 4)


@lru_cache(maxsize=256)  # pure: a plan search asks it for every plan
def single_gpu_non_torch(rel_key: str, version: str) -> int:
    """Non-torch memory of a one-GPU run as the release counts it (0.6.4, 0.8.0-0.9.0 V1: the CUDA context too;
    up to 0.2.4: none)."""
    if counts_no_non_torch(rel_key, version):
        return 0
    if counts_whole_device(rel_key, version):
        return NON_TORCH_0_6_4_BYTES
    return NON_TORCH_TP1_BYTES[rel_key]


@lru_cache(maxsize=256)  # pure: a plan search asks it for every plan
def multi_gpu_non_torch(rel_key: str, version: str) -> int:
    """Non-torch memory of a rank of a TP/PP group (off NVSwitch, or NCCL connecting lazily): the fitted TP 2
    figure, plus the CUDA context where the release counts it (the 0.6.4.post1 TP 4 log prints 0.71 GiB); none up
    to 0.2.4."""
    if counts_no_non_torch(rel_key, version):
        return 0
    return NON_TORCH_TP_BYTES + (CUDA_CONTEXT_BYTES if counts_whole_device(rel_key, version) else 0)


# What vLLM's source sizes of it is small: custom all-reduce (distributed/device_communicators/custom_all_reduce.py
# CustomAllreduce.__init__) allocates per rank, outside torch, a metadata buffer of meta_size() + max_size and a data
# buffer of max_size (8 MiB each in 0.8.5 and 0.10.1; 0.33.0: the data buffer is max(max_size 8 MiB, all-gather
# 2 MiB, reduce-scatter 16 MiB) = 16 MiB), plus an 8 MiB torch rank_data tensor: ~0.02-0.03 GiB. In 0.33.0 it is
# allocated before the worker's start snapshot (v1/worker/gpu_worker.py init_device: init_worker_distributed_environment,
# then MemorySnapshot), so it is not in the non-torch figure at all; in 0.10.1 the snapshot comes first. The rest,
# NCCL's communicator buffers (pynccl.py only calls ncclCommInitRank; their size is NCCL's, by channels and peers),
# the source does not give: the TP>1 figure stays the one fitted above. V0 at TP 2 on A100s prints 1.54 GiB (0.7.2);
# NCCL 2.21's buffers on an NVLink pair give about half of it (nccl.py), so it is not refitted on that one row.
NON_TORCH_TP_BYTES = int(0.44 * GiB)


@record
class ActivationModel:
    """Peak of the profiling run per token of the dummy batch (in elements of the model dtype, as
    multiples of the hidden size and of the per-rank MLP width) and per request (the sampler's bytes
    per vocabulary entry; ``None``: derived from the sampler's source, ``sampler_bytes``)."""

    hidden: float
    inter: float
    logits: float | None
    source: str
    peak: str = "sum"  # "max": the sampler runs after the forward's buffers are freed (the larger of the two)
    forward: str = "linear"  # "v0": the V0 decoder layer's live set read from its source (v0_forward_elements)


# vLLM >= 0.21's profiling run as its source allocates it (read in the 0.21.0-0.33.0 sources). Both model runners'
# profile_run (v1/worker/gpu_model_runner.py and v1/worker/gpu/model_runner.py) run the dummy forward of
# max_num_batched_tokens, keep its output (and the rows of the sampled tokens) and only then the dummy sampler, so
# torch's peak is the larger of the two stages, as in 0.8-0.20. The forward's live set is the 0.8-0.20 one:
# torch.compile (Inductor) still runs the MLP as the gate/up GEMM, one fused SiLU-and-multiply kernel and the down
# GEMM, each buffer freed after its last use (compilation/codegen.py frees the split graph's values after their last
# use too), so its widest point holds the residual and the normed input, the gate/up output and the activation's
# output; the V2 runner's profiling forward skips attention (skip_attn=True), never the widest point. The sampler's
# bytes per vocabulary entry depend on the runner and the release (sampler_bytes).
# It is what a start that loads its compiled graph from vLLM's cache measures (the 0.30.0 RTX 5060 Ti run: 0.13 GiB
# modelled, 0.15 GiB of transient peak logged). A start that compiles afresh also runs Inductor's compile-time
# benchmarks inside the profiling run, whose largest tensor is a random copy of the embedding table
# (compile_cache.py); the plan charges the larger of the two (policy.py).
PROFILING_RUN_CURRENT = ActivationModel(2.0, 3.0, None, "the 0.21-0.33 sources (gpu_model_runner.py, gpu/model_runner.py "
                                        "profile_run and _dummy_sampler_run)", "max")

ACTIVATION = {
    # The current line (0.21-0.33): the profiling run as the source allocates it, no fitted constant. Until the
    # cold-compile term (compile_cache.py) this was a fit on one published 0.31.0 log of Llama-3.1-8B on an A100 80GB
    # (1 x hidden + 1 x intermediate a token, 5.65 B a request and vocabulary entry), which stood for that start's
    # compile-time memory: the embedding-table copy gives its transient peak from the source (tests/test_vllm.py).
    "current": PROFILING_RUN_CURRENT,
    # 0.8-0.20: profile_run (v1/worker/gpu_model_runner.py) runs the dummy forward, returns its output and only
    # then the dummy sampler, so torch's peak is the larger of the two (as in V0). The forward's live set at its
    # widest point, the MLP of a torch.compile'd decoder layer: the residual and the normed input (2 x hidden),
    # the gate/up projection (2 x intermediate) and the activation's output (1 x intermediate) per token. The
    # sampler's peak is read from its source per path and batch (sampler_bytes): the 0.10.2 H100 log of
    # Qwen3-30B-A3B prints 5.58 GiB of peak activation, 1024 x 151936 x 38 B = 5.51 GiB of it the sort.
    "v1": ActivationModel(2.0, 3.0, None, "the 0.10.2 source (gpu_model_runner.py profile_run); PyTorch's CUDA sort",
                          "max"),
    # V0 runs eager PyTorch; its forward's live set is read from the source per release and model file
    # (v0_forward_elements): 3 x hidden + 3 x intermediate a token for Llama at TP 1, as the two 0.6.4 RTX 3090 runs
    # of Llama-3.1-8B show (2.07 GiB for 20000 tokens and 2.99 for 29000: 110 KB a token).
    # The V0 sampler (model_executor/layers/sampler.py, 0.7.3 and 0.8.5) converts the logits to fp32 and sorts the
    # full vocabulary of every dummy request (top-k vocab - 1, top-p 0.99), like V1's PyTorch path: its peak is
    # the sort's (sampler_bytes; the T4 log's 0.90 GiB for 192 requests x 128256 entries is 38.8 B an entry).
    # It runs after the forward's buffers are freed, so the peak is the larger of the two (the forward's output
    # kept for it).
    "v0": ActivationModel(3.0, 3.0, None, "the V0 source (model files, parallel_state.py); sampler from its source",
                          "max", "v0"),
}

SAMPLERS = ("flashinfer", "native")


def sampler_path(settings: VllmSettings, gpu: GPU, rel_key: str = "v1") -> str:
    """The top-k/top-p implementation the V1 sampler picks (v1/sample/ops/topk_topp_sampler.py
    TopKTopPSampler.__init__), by release:
    - 0.8-0.11: FlashInfer's kernels when the flashinfer package imports on a CUDA GPU (0.8.5: only below
      flashinfer 0.2.3), else the PyTorch-native sort. A plain ``pip install vllm`` lacks it (an optional extra; the
      project's Docker images have it), so the default is the sort (9 of the 14 corpus logs of 0.10-0.11 that say
      which print "FlashInfer is not available").
    - 0.12-0.20: FlashInfer's sampler is opt-in (VLLM_USE_FLASHINFER_SAMPLER=1; "available but disabled by
      default"), although flashinfer-python is a requirement of the wheel: the native path.
    - 0.21 on: VLLM_USE_FLASHINFER_SAMPLER defaults to on, on GPUs FlashInfer's backend supports.
    A log's own line ("FlashInfer is not available ...", "Using FlashInfer for top-p & top-k sampling"), the
    Docker image's install path in a 0.8-0.11 log, or VLLM_USE_FLASHINFER_SAMPLER says otherwise. ROCm takes
    the native path; V0's sampler (model_executor/layers/sampler.py) sorts in PyTorch unless
    VLLM_USE_FLASHINFER_SAMPLER=1."""
    if rel_key == "v0" or gpu.vendor != "nvidia":  # FlashInfer's sampler is taken on CUDA only
        return "native"
    if settings.sampler is not None:
        return settings.sampler
    minor = version_minor(settings.version)
    if minor is None:
        return "flashinfer" if rel_key == "current" else "native"
    return "flashinfer" if minor >= 21 else "native"


def sampler_may_differ(settings: VllmSettings, gpu: GPU, rel_key: str) -> bool:
    """True when the sampler path is the default's guess and a release line of optional FlashInfer
    (0.8-0.11 on NVIDIA) could run the other one."""
    if settings.sampler is not None or gpu.vendor != "nvidia" or rel_key != "v1" or is_v1_alpha(settings):
        return False  # (the 0.7 V1 alpha runs no sampler in its profiling run)
    minor = version_minor(settings.version)
    return minor is None or minor < 12


def sort_bytes(rows: int) -> int:
    """Bytes per element that ``torch.sort`` holds at once on CUDA while it sorts a [rows, vocab] fp32 tensor
    with its int64 indices (PyTorch 2.x aten/src/ATen/native/cuda/SortStable.cu launch_stable_sort_kernel): the
    outputs (fp32 values 4 + int64 indices 8) and what it allocates around CUB's sort, whose non-overwriting
    form keeps a third key buffer and a third value buffer in its temporary storage:
    - one row or >= 128 rows (segmented_sort_large_segments / segmented_sort_pairs): the int64 starting
      indices (8) and CUB's third buffers (4 + 8): 12 + 20 = 32;
    - 2 to 127 rows (segmented_sort_pairs_by_full_sort): two int2 (index, segment) arrays (8 + 8), the sorted
      keys (4) and CUB's third buffers (4 + 8 for the int2 values): 12 + 32 = 44."""
    return 44 if 1 < rows < 128 else 32


def sampler_bytes(model: ActivationModel, path: str, dtype: str, reqs: int = 256, version: str | None = None,
                  runner: str = "v1", rel_key: str = "v1") -> float:
    """Bytes the profiling run's dummy sampler holds at its peak per request and vocabulary entry.

    V1 model runner (gpu_model_runner.py _dummy_sampler_run: temperature 0.5, top-p 0.9, top-k vocab - 1, so the full
    top-k/top-p path runs). Read from the 0.10.2 source: the lm_head's logits in the model dtype stay
    alive in the caller, the sampler's fp32 copy (sampler.py Sampler.forward; none of an fp32 model; the temperature
    divides it in place), then
    - native up to 0.16, and below 8 requests in 0.17-0.29 (topk_topp_sampler.py apply_top_k_top_p): the peak is
      the sort of the fp32 logits (``sort_bytes``: 32 or 44 B); the masks, softmax and scatter after it hold less;
    - FlashInfer (top_k_top_p_sampling_from_logits: the top-k-masked logits and their softmax), and native from 0.17
      at 8 requests or more and from 0.30 at any count (apply_top_k_top_p_triton masks the logits in place; then
      forward_native's softmax and random_sample's exponential noise): two more fp32 tensors, 4 + 4.
    From 0.21 (the current line, to 0.33) _dummy_sampler_run calls the sampler a second time with a
    torch.Generator, and TopKTopPSampler.forward_cuda takes forward_native for per-request generators: the native
    path runs whichever the first pass took, and its peak is never below FlashInfer's, so it is the one counted.

    V2 model runner (gpu/model_runner.py _dummy_sampler_run, 0.21-0.33): the dummy batch has no sampling parameters
    (gpu/sample/sampler.py: apply_sampling_params returns the logits as they are when no request needs logits
    processing, no top-k or top-p, gumbel_sample's Triton kernel reduces them keeping per-block partials only), so
    the logits in the model dtype alone. 0.33.0 adds a pass with SamplingParams.for_sampler_warmup (top-k 50,
    top-p 0.9, penalties, logprobs): apply_sampling_params' fp32 copy (penalties, temperature, min-p in place) and,
    on the FlashInfer path, FlashInfer's two fp32 tensors as above (the native path masks in place with the Triton
    kernel and computes the logprobs in a kernel: the copy alone).

    V0's sampler (model_executor/layers/sampler.py) takes the sort path."""
    if model.logits is not None:
        return model.logits
    width = element_type(dtype).nbytes(1)
    copy = width + (0 if width == 4 else 4)
    minor = version_minor(version)
    if rel_key == "current":
        minor = release_minor(version)
        if runner == "v2":
            if minor < 33:
                return width
            return copy + 4 + 4 if path == "flashinfer" else copy
        path = "native"  # the generator pass
    triton = minor is not None and minor >= 17 and (reqs >= 8 or minor >= 30)
    if path == "native" and not triton:
        return copy + sort_bytes(reqs)
    return copy + 4 + 4


# HF model types vLLM serves with model_executor/models/llama.py (registry.py of 0.6.4-0.8.5: Llama, Mistral, Aquila,
# InternLM, Xverse; phi3.py subclasses it), whose LlamaMLP rebinds its one name from 0.6.4 on (``x, _ =
# self.gate_up_proj(x); x = self.act_fn(x)``), so the gate/up output is freed before the down projection. Every other
# V0 model file (qwen2.py, gemma.py, deepseek_v2.py, ...; llama.py itself up to 0.6.3) keeps it in ``gate_up``.
LLAMA_MLP_TYPES = frozenset({"llama", "mistral", "aquila", "internlm", "xverse", "phi3"})


def v0_forward_elements(spec: ModelSpec, tokens: int, tp: int, version: str | None, moe_elements: int = 0) -> int:
    """Elements the V0 profiling forward of ``tokens`` tokens holds at its widest point on one rank, from the source
    (model_executor/models/llama.py and qwen2.py, distributed/parallel_state.py; 0.2.4, 0.4.3, 0.6.3.post1, 0.6.4,
    0.7.2, 0.8.5). Through every decoder layer after the first three hidden-sized tensors are alive: the layer's
    input (the model's ``for`` loop still names it while the layer runs; the input norm works in place), the
    residual and the MLP's input. Then the MLP's larger point:
    - after the activation: the gate/up output (2 x intermediate / TP) and the activation's output (1 x);
    - in the down projection: the activation's output, the gate/up output where the model file keeps it
      (``LLAMA_MLP_TYPES`` from 0.6.4 free it), the projection's output (hidden) and, at TP >= 2 from 0.6.5, the
      all-reduce's output: ``GroupCoordinator.all_reduce`` is out of place from 0.6.5 (pynccl.py all_reduce returns
      a new tensor), in place up to 0.6.4 for tensors larger than the custom all-reduce's 8 MiB.
    An MoE model's MLP is its fused-MoE workspace (``moe_elements``, its output included), plus the all-reduce's
    output. Where the release is not named the newest V0 (0.7-0.10) is assumed."""
    d = spec.dims
    rel = minor_patch(version)
    copy = d.hidden_size if tp > 1 and (rel is None or rel >= (6, 5)) else 0
    base = 3 * d.hidden_size
    if moe_elements:
        return tokens * (base + copy) + moe_elements
    inter = d.intermediate_size // tp
    frees = spec.model_type in LLAMA_MLP_TYPES and (rel is None or rel >= (6, 4))
    at_activation = base + 2 * inter + inter
    at_down = base + (0 if frees else 2 * inter) + inter + d.hidden_size + copy
    return tokens * max(at_activation, at_down)


def cublas_workspace_bytes(gpu: GPU) -> int:
    """PyTorch's cuBLAS workspace, taken from its caching allocator by the first matmul of the profiling run and kept
    (aten/src/ATen/cuda/CublasHandlePool.cpp parseChosenWorkspaceSize, torch 2.1-2.5): ``:4096:2:16:8`` =
    8,519,680 bytes, 32 MiB on compute capability 9.0 (a GPU known only by its memory: the smaller); none counted
    off NVIDIA."""
    if gpu.vendor != "nvidia":
        return 0
    return 32 * 1024 * 1024 if capability(gpu) == 9.0 else 4096 * 1024 * 2 + 16 * 1024 * 8


def moe_workspace_elements(spec: ModelSpec, tokens: int, tp: int, expert_parallel: bool, rel_key: str) -> int:
    """Elements of the fused-MoE kernel's buffers for ``tokens`` tokens on one rank
    (model_executor/layers/fused_moe/fused_moe.py fused_experts_impl, 0.10.1 and 0.33.0): ``cache13`` of
    M x top_k x max(N, K) (N = 2 x the expert width on the rank, K = hidden), ``intermediate_cache2`` of
    M x top_k x N/2 and the output M x K; M is the tokens, capped at VLLM_FUSED_MOE_CHUNK_SIZE (32768) before
    0.21. With expert parallelism each rank holds whole experts (N is not split by TP)."""
    if not spec.num_experts or not spec.expert_intermediate_size:
        return 0
    m = min(tokens, 32768) if rel_key == "v1" else tokens
    n = 2 * spec.expert_intermediate_size // (1 if expert_parallel else tp)
    k = spec.dims.hidden_size
    return m * spec.experts_per_token * (max(n, k) + n // 2) + m * k


@lru_cache(maxsize=16, typed=True)
def rotary_cache_bytes(spec: ModelSpec, dtype: str) -> int:
    """vLLM's rotary embedding cos/sin cache: max positions x rotary dim in the model dtype
    (model_executor/layers/rotary_embedding: cos_sin_cache); counted in 'Model loading took'."""
    positions, dim = rotary_shape(spec)
    return positions * dim * element_type(dtype).nbytes(1)


def rotary_shape(spec: ModelSpec) -> tuple[int, int]:
    """The positions and rotary dimension of vLLM's cos/sin cache (``rotary_cache_bytes``); (0, 0) for a model
    without attention."""
    if not any(isinstance(x, (FullAttention, MLA)) for x in spec.layers):
        return 0, 0
    return spec.max_context, next((x.qk_rope_head_dim for x in spec.layers if isinstance(x, MLA)), spec.dims.head_dim)


@lru_cache(maxsize=4096)  # pure, of hashable arguments: a plan search asks it alike for every GPU type
def activation_peak(spec: ModelSpec, tokens: int, reqs: int, tp: int, dtype: str, last_stage: bool,
                    model: ActivationModel, sampler: str = "flashinfer", moe_elements: int = 0,
                    version: str | None = None, forward_extra: int = 0, workspace: int = 0,
                    runner: str = "v1", rel_key: str = "v1") -> int:
    """Peak of vLLM's profiling run above the weights: the dummy forward of ``tokens`` tokens
    (hidden- and MLP-sized buffers per rank; an MoE model's MLP is its fused-MoE workspace,
    ``moe_elements``) and, on the last stage, the sampler over one token per request (``sampler_bytes``
    per vocabulary entry).
    ``forward_extra``: bytes the forward alone holds besides (a plain AWQ/GPTQ kernel's 16-bit weight copy);
    ``workspace``: bytes allocated on the first matmul and kept through the peak (``cublas_workspace_bytes``);
    ``runner``: the current line's model runner (cudagraph.model_runner), whose sampler pass differs. With
    ``peak == "max"`` the current line also keeps the sampled rows (hidden_states[logits_indices], one a request)
    for the sampler."""
    width = element_type(dtype).nbytes(1)
    d = spec.dims
    if model.forward == "v0":
        forward = v0_forward_elements(spec, tokens, tp, version, moe_elements) * width
    else:
        mlp = moe_elements if moe_elements else model.inter * tokens * (d.intermediate_size // tp)
        forward = int((tokens * model.hidden * d.hidden_size + mlp) * width)
    forward += forward_extra
    per_entry = sampler_bytes(model, sampler, dtype, reqs, version, runner, rel_key) if last_stage else 0.0
    if model.peak == "max":
        rows = tokens + (reqs if rel_key == "current" and last_stage else 0)
        held = rows * d.hidden_size * width  # the forward's output (and the sampled rows), kept for the sampler
        return int(max(forward, held + per_entry * reqs * d.vocab_size)) + workspace
    return int(forward + per_entry * reqs * d.vocab_size) + workspace


def v1_alpha_activation(dtype: str) -> ActivationModel:
    """The 0.7 V1 alpha's profiling run (v1/worker/gpu_model_runner.py profile_run of 0.7.0-0.7.3): the dummy forward
    of max_num_batched_tokens (torch.compile'd as in 0.8-0.20: ACTIVATION["v1"]'s live set), then the lm_head's logits
    in the model dtype and no sampler ("TODO(woosuk): Consider the memory usage of the sampler"): the forward's
    output kept and one logits row per dummy request at the model dtype's width, the larger of the two stages."""
    return ActivationModel(2.0, 3.0, float(element_type(dtype).nbytes(1)),
                           "the 0.7.0-0.7.3 source (v1/worker/gpu_model_runner.py profile_run: logits, no sampler)", "max")


def v1_alpha_logit_rows(version: str, tokens: int, seqs: int) -> int:
    """Rows of the 0.7 V1 alpha's dummy logits: every token of the batch up to 0.7.2 (compute_logits on the whole
    hidden states), one per dummy request in 0.7.3 (the last token of each of min(max_num_seqs, tokens) requests)."""
    rel = minor_patch(version)
    return min(tokens, seqs) if rel is not None and rel >= (7, 3) else tokens


def forward_bytes(spec: ModelSpec, tokens: int, tp: int, dtype: str, moe_elements: int = 0) -> int:
    """The dummy forward's live set at its widest point for ``tokens`` tokens on one rank, as the 0.8-0.20 profiling
    run holds it (ACTIVATION["v1"], read from the 0.10.2 source): the residual and the normed input, the gate/up
    projection and the activation's output per token; an MoE model's MLP is its fused-MoE workspace
    (``moe_elements``). The CUDA-graph estimate's first capture holds it (cudagraph.py)."""
    model = ACTIVATION["v1"]
    d = spec.dims
    mlp = moe_elements if moe_elements else model.inter * tokens * (d.intermediate_size // tp)
    return int((tokens * model.hidden * d.hidden_size + mlp) * element_type(dtype).nbytes(1))
