"""vLLM's defaults that depend on the GPU and the release (max_num_batched_tokens, max_num_seqs, CUDA-graph
capture sizes), and the model of the memory vLLM measures at start-up besides the KV cache: non-torch memory,
the profiling run's activation peak, the rotary cache and CUDA-graph memory. The ``calibrated`` figures of a
plan: constants fitted on published start-up logs (tests/data/vllm_logs), with the error band seen there.
"""

from __future__ import annotations

from functools import lru_cache

from ..._record import record
from ...hardware import GPU
from ...model.layers import MLA, FullAttention
from ...model.spec import ModelSpec
from ...units import GiB, MiB, element_type
from .settings import Release, VllmSettings


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
# What vLLM's source sizes of it is small: custom all-reduce (distributed/device_communicators/custom_all_reduce.py
# CustomAllreduce.__init__) allocates per rank, outside torch, a metadata buffer of meta_size() + max_size and a data
# buffer of max_size (8 MiB each in 0.8.5 and 0.10.1; 0.33.0: the data buffer is max(max_size 8 MiB, all-gather
# 2 MiB, reduce-scatter 16 MiB) = 16 MiB), plus an 8 MiB torch rank_data tensor: ~0.02-0.03 GiB. In 0.33.0 it is
# allocated before the worker's start snapshot (v1/worker/gpu_worker.py init_device: init_worker_distributed_environment,
# then MemorySnapshot), so it is not in the non-torch figure at all; in 0.10.1 the snapshot comes first. The rest,
# NCCL's communicator buffers (pynccl.py only calls ncclCommInitRank; their size is NCCL's, by channels and peers),
# the source does not give: the TP>1 figure stays the one fitted above.
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
