"""TensorRT-LLM's paged KV cache: a fraction of the memory left after the profiled peak.

From TensorRT-LLM's sources (https://github.com/NVIDIA/TensorRT-LLM, main in 2026): PyTorch backend
``tensorrt_llm/_torch/pyexecutor/_util.py: KvCacheCreator`` (available = (total - peak + temporary
KV) x free_gpu_memory_fraction, 0.9 by default; tokens_per_block 32), per-token size
``resource_manager.py: KVCacheManager.get_cache_size_per_token`` (2 x head_dim x KV heads // TP x
layers x bytes, no max(1, ...); MLA: (kv_lora_rank + rope) x layers, not split), and the C++ engine
path ``kvCacheManager.cpp`` (free memory after the engine and its buffers x fraction, blocks of 64).

The memory outside the pool, by mechanism and release line:

- C++ engine path (0.5 to 0.19 logs): ``trtGptModelInflightBatching.cpp``'s constructor loads the engine (its
  weights: "Loaded engine size"), creates TensorRT's execution context ("Allocated ... for execution context
  memory": the activations TensorRT's builder planned for max_num_tokens; TensorRT's, not in TensorRT-LLM's
  source, so kvbudget estimates it), the runtime buffers and the decoder (``engine_buffers``, exact; 0.10 to 0.13
  hold one more batch x vocab fp32 buffer, ``release_rules``), then the KV cache manager reads cudaMemGetInfo's
  free memory ("Memory usage when calculating max tokens in paged kv cache: total: T GiB, available: A GiB") and
  takes fraction x A, in whole blocks rounded down; a host pool of kv_cache_host_memory_bytes (the "secondary
  pool") adds no GPU memory. What no line names (CUDA context, cuBLAS, other processes) is NON_TORCH_BYTES, and
  above one rank NCCL's buffers (NON_TORCH_TP_BYTES, as on the PyTorch backend). The engine's weights hold a tied
  lm_head as its own copy of the embedding (``engine_weights``). Every rank's pool is the smallest rank's
  (``kvCacheManager.cpp``: an allreduce MIN of the ranks' max tokens); kvbudget plans one rank.
  ``check`` sets an engine log's total - available against its named parts (``check.engine_memory``).
- PyTorch backend (0.19 to main in 2026): ``KvCacheCreator`` (below) measures a peak after a dummy forward;
  the fraction applies to total - peak + the temporary pool. Its "non-torch" part is the device's used memory
  (``torch.cuda.mem_get_info``, every process's) minus torch's allocated bytes, so memory another process holds
  on the GPU (a desktop session on a consumer card) lowers the pool; torch's cache is emptied before each
  reading, so only what is allocated (and the CUDA-graph pools) counts. From 1.0 the estimate is also stored as
  ``kv_cache_config.max_gpu_total_bytes`` (capped by a user's value; main's ``_util.py``), and the final
  ``KVCacheManager.calculate_max_num_blocks`` (``resource_manager.py``) takes the smaller of the estimate's
  tokens and fraction x the free memory when the final pool is made (the weights, CUDA graphs and workspace still
  held then are in the peak too, so the estimate binds), in whole blocks (up to 1.1 rounded up, ``release_rules``).
  The sampler holds next to nothing before the estimate (the 1.0rc H200 log's component table: "Sampler: 110.70 /
  110.70" GiB).
  Its "Memory used after loading model weights (outside torch)" is the same device-wide reading before the dummy
  requests run (the estimation pool and the CUDA graphs already in it). Beyond kvbudget's CUDA context, the logs show
  0.9 GiB (0.20 trtllm-bench, H100) and 0.6 GiB (1.1 LLM API, RTX 6000 Ada) more there: a launching process's own
  CUDA context (the 0.20 out-of-memory message lists trtllm-bench's at 0.57 GiB), the worker's loaded kernels, cuBLAS
  and the C++ runtime's allocations. The source read does not establish their sizes, so they are not planned:
  ``check`` sets the figure beside kvbudget's and warns (``check.after_loading_warning``); ``calibrate`` takes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..._record import record, replace
from ...dtypes import parse_kv_dtype
from ...hardware import GPU
from ...kvcache import check_indexer_priced, check_tp, serving_dtype
from ...model.layers import MLA, FullAttention
from ...model.params import Inventory, Tensor
from ...model.spec import WEIGHTS_FIX, ModelSpec, checkpoint_format
from ...model.weights import WeightFormat, parse_weight_format
from ...parallel import stages
from ...units import GiB, InputError, excerpt
from ..base import Replica
from ..textbook import CUDA_CONTEXT_BYTES, NON_TORCH_TP_BYTES
from .capture import capture_check
from .settings import _KV_DTYPES, TrtllmSettings

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from ..base import EnginePlan
    from ..site import SiteTerm

# The C++ engine path's memory outside the engine and its buffers (CUDA context, cuBLAS, NCCL), calibrated on
# tests/data/trtllm_logs (engine rows), per rank.
NON_TORCH_BYTES = int(0.6 * GiB)

# --- the PyTorch backend's profiling run, from TensorRT-LLM's source ------------------------------------------
# KvCacheCreator (tensorrt_llm/_torch/pyexecutor/_util.py; in 0.19 the functions create_dummy_context_requests /
# estimate_max_kv_cache_tokens of the same file) runs after PyExecutor.__init__ has warmed the model up and captured
# its CUDA graphs (py_executor.py: model_engine.warmup in the constructor, in every release). It empties the torch
# cache, resets the peak, pushes dummy context requests of max_num_tokens tokens in all through the executor, then
# takes peak = torch's allocated_bytes.all.peak + (device used - torch allocated, after empty_cache) and
# available = (total - peak + the temporary KV pool) x free_gpu_memory_fraction: 0.19 to main in 2026 (0.20:
# _cal_max_tokens with alloc_kv_tokens x kv size; 1.0+, after PR #5933: _cal_max_memory with the pool's
# allocated_bytes). The temporary pool is counted in the peak (outside torch) and added back, so it cancels: what
# the pool is not given is the weights, every torch buffer alive before or made during the run, and the memory
# held outside torch.
# TensorRT-LLM's attention keeps one workspace for all layers, grown to the largest step and never shrunk; its
# context part begins with a cuBLAS workspace of CUBLAS_WORKSPACE_SIZE = 32 MiB (attentionOp.cpp
# getWorkspaceSizeForContext, workspaces[0]; the constant from cudaUtils.h, inherited from FasterTransformer).
CUBLAS_WORKSPACE_BYTES = 32 << 20
# CUDA graphs: on by default in the LLM API from 1.0 (llm_args.py: cuda_graph_config default_factory
# CudaGraphConfig), for batches up to 128 (the 1.1.0rc3 log in tests/data/trtllm_logs prints
# cuda_graph_max_batch_size=128 when only enable_padding was given); trtllm-bench sets max_batch_size instead
# (bench/benchmark/utils/general.py).
CUDA_GRAPH_MAX_BATCH = 128


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
    temporary_kv_bytes: int = 0  # PyTorch backend: the estimation pool, in TensorRT-LLM's printed peak
    max_tokens_capped: bool = False  # max_tokens, not the fraction, set the pool
    # the C++ engine path's allocations before the pool is sized (trtGptModelInflightBatching.cpp; 0 on PyTorch):
    # TensorRT's execution context (estimate), the runtime buffers and the decoder (engine_buffers)
    execution_context_bytes: int = 0
    runtime_buffers_bytes: int = 0
    decoder_bytes: int = 0
    # PyTorch backend: the CUDA graphs captured after the final pool (``graphs_in_estimation``; 0 where the estimation
    # run held them) and what the final pool leaves on the device (total - peak - pool)
    capture_after_pool_bytes: int = 0
    # and what the final capture needs at once (capture.py: the largest graph + the next batch's eager warmup)
    capture_need_bytes: int = 0
    left_after_pool_bytes: int = 0
    # PyTorch backend: the peak's memory outside torch (CUDA context, NCCL) and the CUDA graphs the estimation run held
    non_torch_bytes: int = 0
    cuda_graph_bytes: int = 0
    activation_bytes: int = 0  # the profiling run's activations, attention workspace and logits (inside torch)


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


def engine_weights(spec: ModelSpec) -> ModelSpec:
    """The model as a TensorRT engine holds its weights: a tied lm_head is a weight of its own.

    The C++ engine path builds from a TensorRT-LLM checkpoint, and the checkpoint converters write the tied
    embedding out twice: ``tensorrt_llm/models/llama/convert.py`` and ``models/qwen/convert.py`` (the 0.x line's
    converters, NVIDIA/TensorRT-LLM on GitHub) set ``weights['lm_head.weight']`` to a copy of the embedding when the Hugging Face
    config has ``tie_word_embeddings``, split over TP along the vocabulary (padded to a multiple of TP) and not
    weight-only quantized (only the layers' linears go through ``symmetric_quantize_last_axis_of_batched_matrix``);
    the engine keeps both unless the build shares them (``share_embedding_table``, off unless asked for). So the
    engine holds the embedding on its first stage and a vocab x hidden lm_head in the 16-bit dtype on its last,
    even for a single stage. The PyTorch backend (0.19 to main in 2026) shares them instead
    (``_torch/models/modeling_utils.py`` DecoderModelForCausalLM: ``self.lm_head.weight =
    self.model.embed_tokens.weight``): there the model is planned as read."""
    inv = spec.inventory
    if not inv.head or any(t.role == "lm_head" for t in inv.tail):
        return spec
    embedding = inv.head[0]
    head = Tensor("lm_head", embedding.rows, embedding.cols, split="vocab")
    return replace(spec, inventory=Inventory(inv.head, inv.layers, (*inv.tail, head)), pp_embedding="first")


def per_token_bytes(spec: ModelSpec, layers: tuple[object, ...], tp: int, nbytes: int) -> int:
    """get_cache_size_per_token: integer division of heads x head_dim by TP, no floor at one head."""
    total = 0
    for layer in layers:
        if isinstance(layer, MLA):
            total += (layer.kv_lora_rank + layer.qk_rope_head_dim) * nbytes
        elif isinstance(layer, FullAttention):
            total += 2 * (layer.head_dim * layer.num_kv_heads // tp) * nbytes
    return total


@dataclass(frozen=True)
class ReleaseRules:
    """Where TensorRT-LLM's arithmetic differs by release line (``TrtllmSettings.release``; None: the current source)."""

    penalty_logits_copy: bool  # engine path: PenaltyLayer keeps its own fp32 runtime-logits buffer (one more U)
    ceil_blocks: bool  # PyTorch backend: the final pool rounds max_tokens UP to whole blocks


def release_line(release: str | None) -> tuple[int, int] | None:
    """(major, minor) of a release string such as '0.13', '0.20.0' or '1.1.0rc3'; None for the current source."""
    if release is None or release.strip().lower() in ("", "current", "main"):
        return None
    m = re.fullmatch(r"v?(\d{1,2})\.(\d{1,3})(?:[.+-][a-z0-9]{1,24}|[a-z][a-z0-9]{0,23}){0,4}", release.strip().lower())
    if m is None:
        raise InputError(f"TensorRT-LLM release {excerpt(release)} is not a release line (give one such as 0.13, 0.20 or "
                         "1.1.0rc3)")
    major, minor = int(m.group(1)), int(m.group(2))
    if (major, minor) < (0, 5):  # planned with rules of releases that never were (0.1: a pool of its own size)
        raise InputError(f"TensorRT-LLM release {excerpt(release)} is older than its first release, 0.5.0 (October "
                         "2023): give the release the run used, such as 0.13, 0.20 or 1.1.0rc3")
    return major, minor


def given_release(value: object) -> str | None:
    """--trtllm-release as TrtllmSettings.release, checked as a release line (``release_line``) when given; an empty
    one (an unset shell variable: '--trtllm-release "$REL"') is refused, not planned as the current source unsaid."""
    if value is None:
        return None
    if not str(value).strip():
        raise InputError("--trtllm-release is empty: give the release whose rules apply (0.13, 0.20, 1.1.0rc3, or "
                         "current for the current source), or leave the option out")
    release_line(str(value))
    return str(value)


def release_key(release: str | None) -> str:
    """A release's line as a site profile's terms name it: 'major.minor', or 'current' for the current source."""
    line = release_line(release)
    return "current" if line is None else f"{line[0]}.{line[1]}"


def is_release_key(key: str) -> bool:
    """A site profile term's release as ``release_key`` writes one."""
    m = re.fullmatch(r"(\d{1,2})\.(\d{1,3})", key)
    return key == "current" or (m is not None and (int(m.group(1)), int(m.group(2))) >= (0, 5))  # 0.5.0: the first


def _site_held(gpu: GPU, s: TrtllmSettings, notes: list[str], modelled: int) -> int:
    """Memory a site profile says is held outside the pool on this GPU and release line (``--profile``: another
    process, a desktop session), which lowers the free memory both paths size the pool from."""
    from ..site import held_by_site

    key = release_key(s.release)
    return held_by_site(s.site, gpu, key, s.tp * s.pp, f"TensorRT-LLM {key}", "held outside the pool when it is sized",
                        notes, (modelled, "the profiled peak beyond the weights"))


def release_rules(release: str | None) -> ReleaseRules:
    """The per-release rules, each from TensorRT-LLM's source and checked against a log's printed figures.

    penalty_logits_copy (engine path, 0.10 to 0.13): ``cpp/tensorrt_llm/layers/penaltyLayer.cpp``
    ``PenaltyLayer::allocateBuffer`` of those releases allocates its own ``mRuntimeLogitsDevice`` (batch x tokens
    per step x beam x padded vocab x sizeof(float)) beside DynamicDecodeLayer's buffers; later sources keep one
    runtime-logits buffer for every layer in ``DecodingLayerWorkspace`` (``layers/decodingLayerWorkspace.cpp``).
    The 0.13 GLM-4 log's "Allocated 2.98 MB GPU memory for decoder" at batch 1, vocab 151,552 is 4U + one more U;
    the release that introduced the shared workspace is not established (after 0.13, by 0.19's figures).

    ceil_blocks (PyTorch backend, up to 1.1): ``tensorrt_llm/_torch/pyexecutor/resource_manager.py``
    ``KVCacheManager.calculate_max_num_blocks`` of 0.19 to 1.1 takes ``math.ceil(max_tokens / tokens_per_block)``
    blocks (the 0.20 log: 860,308 estimated tokens, 860,320 allocated; the 1.1.0rc3 log: 86,711 -> 86,720); main
    in 2026 takes ``int(max_tokens // tokens_per_block)``. Releases 1.2 on are taken as main (the change's release
    is not established; it moves the pool by under one block)."""
    line = release_line(release)
    return ReleaseRules(penalty_logits_copy=line is not None and (0, 10) <= line <= (0, 13),
                        ceil_blocks=line is not None and line <= (1, 1))


def engine_buffers(batch: int, beam: int, seq: int, vocab: int, penalty_logits_copy: bool = False) -> tuple[int, int]:
    """Bytes of the C++ runtime's "runtime buffers" and "decoder" allocations, made before the free
    memory is measured (trtGptModelInflightBatching.cpp constructor order). With U = batch x beam x
    vocab fp32 logits: runtime buffers = U (runtimeBuffers.cpp logits) + 24 x batch x beam x seq (cache
    indirection in transformerBuffers.cpp and decoderBuffers.cpp, in and out, int32; log-probs fp32;
    the slots' output ids and log-probs); decoder = 4U (decodingLayerWorkspace runtime logits, the top-k
    scratch, penaltyLayer workspace, decoderState embedding bias) + 16 x batch x seq (ids, parent ids,
    log-probs, tiled log-probs) + 64 KiB x batch (top-k's 1024 x 8 x 8-byte scratch); with
    ``penalty_logits_copy`` (0.10 to 0.13, ``release_rules``) one more U, PenaltyLayer's own runtime logits."""
    u = batch * beam * vocab * 4
    return u + 24 * batch * beam * seq, (5 if penalty_logits_copy else 4) * u + 16 * batch * beam * seq + 65536 * batch


def pool_blocks(max_tokens: int, tokens_per_block: int, ceil: bool = False) -> int:
    """The blocks of the final pool for ``max_tokens`` (``release_rules``: rounded up up to 1.1 on the PyTorch
    backend, down in the C++ engine path and on main)."""
    return -(-max_tokens // tokens_per_block) if ceil else max_tokens // tokens_per_block


def dummy_request_lengths(max_num_tokens: int, max_seq_len: int) -> tuple[int, ...]:
    """The prompt lengths of the profiling run's dummy requests: max_num_tokens tokens cut into prompts of
    min(max_num_tokens, max_seq_len - 1), each asking for one token (KvCacheCreator._create_dummy_context_requests,
    0.20 to main in 2026, called with net_max_seq_len - 1; 0.19's create_dummy_context_requests cut at max_seq_len
    for the TorchSampler). With attention DP (1.0+) the list is repeated tp_size times and shared out, so each rank
    still runs max_num_tokens tokens: the figures here are per rank."""
    step = max(1, min(max_num_tokens, max_seq_len - 1))
    full, rest = divmod(max_num_tokens, step)
    return (step,) * full + ((rest,) if rest else ())


def temporary_kv_tokens(lengths: tuple[int, ...], tokens_per_block: int, extra_per_request: int = 2) -> int:
    """Tokens of the small KV pool the profiling run gets (KvCacheCreator._get_token_num_for_estimation): each
    request's prompt + extra tokens, rounded up to whole blocks (requests share none). extra: 1 for the generated
    token, + 1 with the overlap scheduler (on by default; 1.0+; 0.20 added only the 1)."""
    return sum(-(-(n + extra_per_request) // tokens_per_block) for n in lengths) * tokens_per_block


def act_quant_bytes(weight_format: str) -> float:
    """Bytes per element of the quantized copy a quantized Linear makes of its input before the GEMM: FP8 (per
    tensor or per block) 1; NVFP4 half a byte plus one FP8 scale per 16 values; other formats quantize no
    activations (modules/linear.py, the FP8 and NVFP4 methods)."""
    return {"fp8": 1.0, "nvfp4": 0.5 + 1 / 16}.get(weight_format, 0.0)


def mlp_peak_bytes_per_token(hidden: int, intermediate: int, quant: float = 0.0, act: int = 2) -> int:
    """Activation bytes alive per token at the MLP's peak (GatedMLP.forward, modules/gated_mlp.py, 0.19 to main):
    the token embeddings (the model's forward keeps ``inputs_embeds`` referenced through the whole layer loop:
    ``hidden_states = inputs_embeds.to(self.dtype)`` in the _torch/models/modeling_*.py forwards), the layer's
    residual and the normed input (hidden each), gate_up_proj's output h1 (2 x intermediate), swiglu's h2
    (intermediate; h1 is still referenced while down_proj runs), down_proj's quantized copy of h2 (``quant`` bytes an
    element) and its output (hidden). ``intermediate`` is this rank's width; a MoE layer's expert rows count
    experts_per_token times (the fused MoE sizes its buffers for every routed row)."""
    return int((4 * hidden + 3 * intermediate) * act + quant * intermediate)


def logits_bytes(requests: int, vocab: int) -> int:
    """The logits of the profiling step: only each request's last token (LogitsProcessor.forward without
    return_context_logits), computed in 16 bits and converted to float32 for the sampler, both alive at once."""
    return requests * vocab * (2 + 4)


@dataclass(frozen=True)
class ProfilingPeak:
    """What the PyTorch backend's profiling run counts above the weights, per rank (bytes)."""

    tokens: int  # tokens in the profiling forward
    requests: int  # dummy requests (last-token logits)
    forward: int  # activations at the MLP's peak for ``tokens``
    workspace: int  # the attention workspace's context part: cuBLAS workspace + the Q buffer
    logits: int
    cuda_graphs: int  # the graph pool, where the estimation run captured it: one decode step of the largest batch
    non_torch: int  # CUDA context (and NCCL buffers above one rank)
    temporary_kv: int  # the estimation pool (counted in TensorRT-LLM's printed peak, then added back)
    # the graph pool where the estimation pool was too small to capture it (``graphs_in_estimation``): captured only
    # after the final pool, from what the fraction leaves; 0 where ``cuda_graphs`` holds it
    capture_after_pool: int = 0
    graph_batch: int = 0  # the largest batch a graph is captured for (0: graphs off)
    graph_per_sequence: int = 0  # one sequence's decode step in a graph or an eager run: MLP activations, logits

    @property
    def total(self) -> int:
        """The part of the peak that the pool does not get (the temporary KV pool cancels)."""
        return self.forward + self.workspace + self.logits + self.cuda_graphs + self.non_torch


def profiling_peak(spec: ModelSpec, s: TrtllmSettings, attn_tp: int, moe_tp: int, fmt: WeightFormat,
                   max_seq: int, per_token: int, tokens_per_block: int) -> ProfilingPeak:
    """The PyTorch backend's profiled peak above the weights, from the mechanism in KvCacheCreator (see the
    module constants): the forward of the dummy context requests, the attention workspace it leaves, the last-token
    logits, the CUDA-graph pool captured before the measurement and the memory outside torch."""
    d = spec.dims
    moe = spec.num_experts > 0
    # dense MLPs split over attention's TP (whole under attention DP); routed experts over moe_tp
    width = d.intermediate_size // (moe_tp if moe else attn_tp)
    per_tok = mlp_peak_bytes_per_token(d.hidden_size, width, act_quant_bytes(fmt.name))
    lengths = dummy_request_lengths(s.max_num_tokens, max_seq)
    tokens = sum(lengths)
    # Q buffer of the context FMHA (q_buf_2: max_num_tokens x local heads x head_dim, 16-bit; 1 byte with FP8
    # context FMHA, taken as 16-bit here)
    workspace = CUBLAS_WORKSPACE_BYTES + tokens * (d.num_attention_heads // attn_tp) * d.head_dim * 2
    graph_batch = min(CUDA_GRAPH_MAX_BATCH if s.cuda_graph_max_batch_size is None else s.cuda_graph_max_batch_size,
                      s.max_batch_size)
    per_sequence = per_tok + d.vocab_size * 6
    graphs = graph_batch * per_sequence if graph_batch > 0 else 0
    non_torch = CUDA_CONTEXT_BYTES + (NON_TORCH_TP_BYTES if s.tp * s.pp > 1 else 0)
    temp_tokens = temporary_kv_tokens(lengths, tokens_per_block)
    before = graphs if graphs_in_estimation(graph_batch, temp_tokens // tokens_per_block) else 0
    return ProfilingPeak(tokens, len(lengths), tokens * per_tok, workspace, logits_bytes(len(lengths), d.vocab_size),
                         before, non_torch, temp_tokens * per_token, graphs - before, max(graph_batch, 0),
                         per_sequence)


def graphs_in_estimation(graph_batch: int, estimation_blocks: int) -> bool:
    """Whether the estimation run holds the CUDA graphs when it measures its peak.

    The graphs are captured in PyExecutor's constructor (``model_engine.warmup``) twice: for the estimation pass, on
    its small pool, and again after the final pool (``py_executor_creator.py``, 0.20 to main in 2026: estimate_max_tokens,
    then build_managers for the final pool, ``_release_cuda_graphs``, then a new PyExecutor). The warmup captures the
    batch sizes largest first and stops at the first one whose dummy requests (one block each) the pool has no
    free blocks for (``model_engine.py``: ``get_cuda_graph_warmup_request`` returns None where
    ``available_blocks < batch_size``, and the loop returns; 1.x ``_capture_generation_cuda_graphs`` the same). So
    where the estimation pool has fewer blocks than the largest graph batch, no graph is captured before the peak is
    measured: the printed peak holds none (the 0.20 H100 trtllm-bench logs print the same peak, 11.77 and 11.86 GiB,
    for graphs to batch 2048 and 4096, whose pools differ by about 1.7 GiB), and the final capture takes its memory
    from what the fraction leaves after the final pool."""
    return graph_batch <= 0 or estimation_blocks >= graph_batch


def plan(spec: ModelSpec, gpu: GPU, s: TrtllmSettings) -> TrtllmPlan:
    check_tp(spec, s.tp)
    check_indexer_priced(spec, "TensorRT-LLM")
    if not 0 < s.free_gpu_memory_fraction < 1:
        raise InputError(f"free_gpu_memory_fraction must be in (0, 1), got {s.free_gpu_memory_fraction}")
    for name in ("max_batch_size", "max_num_tokens", "max_beam_width", "max_seq_len", "max_tokens", "tokens_per_block"):
        value = getattr(s, name)
        if value is not None and value < 1:
            raise InputError(f"TensorRT-LLM's {name} must be at least 1, got {value}")
    if s.cuda_graph_max_batch_size is not None and s.cuda_graph_max_batch_size < 0:
        raise InputError(f"TensorRT-LLM's cuda_graph_config max_batch_size must be at least 0, got "
                         f"{s.cuda_graph_max_batch_size}")
    if s.tokens_per_block is not None and s.tokens_per_block & (s.tokens_per_block - 1):
        raise InputError(f"TensorRT-LLM's tokens_per_block must be a power of two, got {s.tokens_per_block}")
    notes: list[str] = []
    if gpu.unified_memory:  # both paths size the pool from CUDA's free memory, which is the system's there
        from ...hardware import unified_note

        notes.append(unified_note(gpu))
    dtype = serving_dtype(spec)
    fmt = (checkpoint_format(spec, WEIGHTS_FIX) if s.quantization in (None, "")
           else parse_weight_format(s.quantization, dtype))
    if s.kv_cache_dtype.lower() == "auto" and s.quantization in (None, "") and fmt.kv_cache == "fp8":
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
    held = engine_weights(spec) if s.backend == "engine" else spec
    if held is not spec:
        notes.append("tie_word_embeddings: the engine stores the lm_head as a copy of the embedding (the checkpoint "
                     "converter writes both; the PyTorch backend would share them)")
    stage = max(stages(held, fmt, attn_tp, s.pp, s.tp // attn_tp, ep > 1, moe_tp if ep > 1 else 1),
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
    rules = release_rules(s.release)
    max_seq = s.max_seq_len or spec.max_context
    temporary_kv = act = runtime = decoder = capture = freed = non_torch = graphs = activations = 0
    prof: ProfilingPeak | None = None
    if s.backend == "engine":
        # the engine's execution-context memory (its activations for max_num_tokens, fixed at build time;
        # estimate: the MLP's gate and up outputs and four hidden-size tensors per token, in 16 bits)
        d = spec.dims
        act = s.max_num_tokens * (2 * d.intermediate_size // s.tp + 4 * d.hidden_size) * 2
        runtime, decoder = engine_buffers(s.max_batch_size, s.max_beam_width, max_seq, d.vocab_size,
                                          rules.penalty_logits_copy)
        # above one rank the engine's NCCL plugins open the group's communicator as the engine is deserialized, before
        # the pool is sized (cpp/tensorrt_llm/plugins/ncclPlugin: AllreducePlugin / AllgatherPlugin::initialize call
        # getComm(mGroup) unless building): NCCL's buffers, priced as on the PyTorch backend (NON_TORCH_TP_BYTES)
        nccl = NON_TORCH_TP_BYTES if s.tp * s.pp > 1 else 0
        peak = stage.weights_bytes + act + runtime + decoder + NON_TORCH_BYTES + nccl
        notes.append(f"engine runtime: execution context {act / GiB:.2f} GiB (estimate), runtime buffers "
                     f"{runtime / GiB:.2f} GiB and decoder {decoder / GiB:.2f} GiB for max_batch_size "
                     f"{s.max_batch_size} x max_seq_len {max_seq:,} (exact), CUDA context {NON_TORCH_BYTES / GiB:.1f} GiB"
                     + (f", NCCL buffers {nccl / GiB:.1f} GiB" if nccl else ""))
    else:
        prof = profiling_peak(spec, s, attn_tp, moe_tp, fmt, max_seq, per_token, tpb)
        peak = stage.weights_bytes + prof.total
        temporary_kv, capture, non_torch, graphs = prof.temporary_kv, prof.capture_after_pool, prof.non_torch, prof.cuda_graphs
        freed = prof.forward + prof.logits  # the estimation run's activations, freed before the final pool
        activations = prof.forward + prof.workspace + prof.logits
        notes.append(f"profiling run: {prof.requests} dummy request(s) of {prof.tokens:,} tokens in all; activations "
                     f"{prof.forward / GiB:.2f} GiB, attention workspace {prof.workspace / GiB:.2f} GiB, logits "
                     f"{prof.logits / GiB:.2f} GiB, CUDA graphs {prof.cuda_graphs / GiB:.2f} GiB, outside torch "
                     f"{prof.non_torch / GiB:.2f} GiB (estimates from TensorRT-LLM's source)"
                     + (f"; the CUDA graphs to batch {prof.graph_batch:,} ({capture / GiB:.2f} GiB) are captured after "
                        "the final pool: the estimation pool has fewer blocks than that batch, so its run captured none"
                        if capture else ""))
        if s.enable_attention_dp:
            notes.append("attention DP: the attention-DP communication buffers and padded CUDA graphs are not modelled")
    peak += _site_held(gpu, s, notes, peak - stage.weights_bytes)
    available = int((gpu.memory_bytes - peak) * s.free_gpu_memory_fraction)
    error = None
    capped = False
    if available <= 0 or per_token <= 0:
        tokens = blocks = 0
        error = "no GPU memory left for the KV cache after the weights and the profiled peak"
    else:
        tokens = available // per_token
        if s.max_tokens is not None and s.max_tokens < tokens:
            notes.append("both free_gpu_memory_fraction and max_tokens are set: the smaller value is used")
            tokens, capped = s.max_tokens, True
        blocks = pool_blocks(tokens, tpb, rules.ceil_blocks and s.backend == "pytorch")
    pool = blocks * tpb * per_token
    lines = []
    if s.backend == "pytorch":
        # TensorRT-LLM's printed peak holds the temporary pool, which its formula adds back
        lines.append(f"Peak memory during memory usage profiling (torch + non-torch): {(peak + temporary_kv) / GiB:.2f} "
                     f"GiB, available KV cache memory when calculating max tokens: {available / GiB:.2f} GiB, fraction "
                     f"is set {s.free_gpu_memory_fraction}, kv size per token is {per_token}. device total memory "
                     f"{gpu.memory_bytes / GiB:.2f} GiB, temporary kv cache memory during profiling "
                     f"{temporary_kv / GiB:.2f} GiB")
    else:
        free = gpu.memory_bytes - peak
        lines.append(f"[TensorRT-LLM][INFO] Memory usage when calculating max tokens in paged kv cache: total: "
                     f"{gpu.memory_bytes / GiB:.2f} GiB, available: {free / GiB:.2f} GiB")
        lines.append(f"[TensorRT-LLM][INFO] Number of blocks in KV cache primary pool: {blocks}")
    lines.append(f"[TensorRT-LLM][INFO] Number of tokens per block: {tpb}.")
    lines.append(f"[TensorRT-LLM][INFO] [MemUsageChange] Allocated {pool / GiB:.2f} GiB for max tokens in paged KV cache "
                 f"({blocks * tpb}).")
    left = max(gpu.memory_bytes - peak - pool, 0)  # what the final pool leaves (the fraction's share, to a block)
    need = 0
    if prof is not None and prof.graph_batch > 0 and error is None:
        # the final executor's capture (capture.py): the largest graph's pool held while the next batch runs eagerly
        cap = capture_check(prof.graph_batch, prof.graph_per_sequence, left, freed, graphs)
        need = cap.need
        if cap.fails:
            error = cap.error()
        elif capture:
            notes.append(cap.note())
    if blocks * tpb < max_seq and error is None:
        notes.append(f"the pool holds fewer tokens than max_seq_len {max_seq:,}: TRT-LLM reduces the attention window "
                     f"to {blocks * tpb:,} instead of failing")
    return TrtllmPlan(
        free_gpu_memory_fraction=s.free_gpu_memory_fraction, ep=ep, moe_tp=moe_tp, attention_dp=s.enable_attention_dp,
        temporary_kv_bytes=temporary_kv, max_tokens_capped=capped, execution_context_bytes=act,
        capture_after_pool_bytes=capture, capture_need_bytes=need, left_after_pool_bytes=left, non_torch_bytes=non_torch, cuda_graph_bytes=graphs,
        activation_bytes=activations,
        runtime_buffers_bytes=runtime, decoder_bytes=decoder,
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
             Part("profiled peak (activations)", max(p.peak_bytes - p.weights_bytes, 0),
                  "calibrated" if p.backend == "engine" else "estimate"),
             Part("KV pool", max(p.pool_bytes, 0), "modelled"))
    return engine_plan(
        "trtllm", p.weights_bytes, p.available_bytes, p.max_tokens, p.max_concurrency, p.max_seq_len, p.starts,
        f"{p.free_gpu_memory_fraction:g} x the memory left after the profiled peak", f"blocks of {p.tokens_per_block} tokens",
        p.error, p.log_lines, blocks=p.num_blocks, block_tokens=p.tokens_per_block, parts=parts,
    )


def replica(spec: ModelSpec, gpu: GPU, tp: int, pp: int, weights: str, kv: str, concurrency: int, context: int,
            version: str, fraction: float | None = None, site: tuple[SiteTerm, ...] = ()) -> Replica:
    """TensorRT-LLM (PyTorch backend, ``trtllm-serve``): whole requests of its paged pool
    (``max_tokens // context``), capped by ``max_batch_size``. ``version``: the release whose rules apply
    (--trtllm-release; "current": the current source); ``site``: a site profile's terms (--profile)."""
    if weights != "auto":  # trtllm-serve takes a pre-quantized checkpoint
        raise InputError("TensorRT-LLM is planned with the checkpoint's own weights (use --weights-dtype auto, or "
                         "pass a pre-quantized checkpoint)")
    from ..base import cap_raised_to_load

    fp8 = parse_kv_dtype(kv.lower(), serving_dtype(spec), _KV_DTYPES,  # an FP8 cache: TensorRT-LLM's (e4m3)
                         f"TensorRT-LLM's KV cache is one of {', '.join(_KV_DTYPES)}, not {kv!r}").is_fp8
    s = TrtllmSettings(tp=tp, pp=pp, max_seq_len=context, kv_cache_dtype="fp8" if fp8 else kv, site=site,
                       release=None if version == "current" else version)
    if fraction is not None:
        s = replace(s, free_gpu_memory_fraction=fraction)
    cap = s.max_batch_size  # TensorRT-LLM's cap is a setting, not a figure of its plan
    s, p, _ = cap_raised_to_load(s, lambda s: plan(spec, gpu, s), lambda p: p.max_tokens // context if p.starts else 0,
                                 lambda p: cap, "max_batch_size", concurrency)
    pool = p.max_tokens // context
    return Replica(min(pool, s.max_batch_size), "" if p.starts else p.error or "does not start", p.starts,
                   p.weights_bytes, p.pool_bytes, p.max_tokens, s.max_batch_size, s, s.free_gpu_memory_fraction)

