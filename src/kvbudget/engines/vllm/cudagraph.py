"""vLLM's estimate of CUDA-graph memory (0.21 on), by mechanism.

From vLLM 0.21 the worker takes an estimate of the CUDA graphs' memory out of the KV budget before it allocates
the cache (v1/worker/gpu_worker.py determine_available_memory: ``requested - non_kv_cache_memory -
cudagraph_memory_estimate``, unless VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0) and logs it as a utilization
("The current --gpu-memory-utilization=X is equivalent to --gpu-memory-utilization=Y without CUDA graph memory
profiling": (X - Y) x the GPU's total is the estimate, to four decimals).

The estimate (``profile_cudagraph_memory``, read in every release 0.21.0-0.33.0):
- which graphs: the dispatcher's capture list (v1/cudagraph_dispatcher.py initialize_cudagraph_keys). With the
  default mode FULL_AND_PIECEWISE, one PIECEWISE graph set per capture size (mixed batches) and one FULL graph per
  capture size from the decode query length up to decode query length x max_num_seqs (uniform decode batches);
  none with --enforce-eager (or cudagraph_mode NONE).
- how much: per mode the device-memory drop (``mem_get_info``) of capturing the largest size (``first_capture``)
  plus (graphs - 1) x the drop of the second-largest (``per_graph``, at least 1 MiB: "driver overhead");
  the modes' first captures overlay in one pool, so the largest is counted once (``max(shared) + sum(per_graph)``).
  The V2 model runner from 0.29 (v1/worker/gpu/cudagraph_utils.py profile_cudagraph_memory) measures its
  PIECEWISE graphs in full and extrapolates FULL graphs from two samples the same way: the same form.
- who runs it: the V1 model runner (v1/worker/gpu_model_runner.py) in every release; the V2 runner
  (v1/worker/gpu/model_runner.py) returns 0 up to 0.28 ("TBD whether we keep this API") and measures from 0.29.
  Which runner a model gets is the release's (config/vllm.py use_v2_model_runner, ``model_runner``). The worker
  calls it on CUDA only up to 0.25 (``current_platform.is_cuda()``), on ROCm too from 0.26 (``is_cuda_alike``).

kvbudget's model of the two measured terms:
- first capture: the largest capture size's forward buffers twice - the eager warm-up run of
  ``_warmup_and_capture`` leaves its blocks cached in the default pool (the loop empties the cache only once,
  before it starts), and the capture takes its own in the fresh profiling pool - with the profiling run's
  forward live set (calibration.forward_bytes: the source-read 0.8-0.20 form, an MoE model's fused-MoE workspace);
- every later graph: ``GRAPH_CAPTURE_BYTES``, a device-memory step per captured graph (set), fitted. The step is
  the driver's and the allocator's growth, which ``mem_get_info`` sees in whole pages, not the graph's kernels: the
  0.30.0 RTX 5060 Ti run (Qwen3-4B, 36 layers) and the 0.31.0 A100 run (Qwen2.5-1.5B, 28 layers) capture the same
  51 + 35 graphs and log 0.379 and 0.355 GiB, 0.02 GiB apart where a per-layer cost would put 0.09 GiB.
"""

from __future__ import annotations

from ..._record import record
from ...model.layers import MLA, ChunkedLocal, FullAttention, RecurrentState
from ...model.spec import ModelSpec
from ...units import MiB
from .settings import release_minor

# The device-memory step of one captured graph after the first (a PIECEWISE graph set or a FULL graph), fitted by
# least squares on the estimates logged by the two modelling-split rows that print one:
# v0.22.1_h100_qwen3-30b-a3b-2507_fp8-online_len8192_gmu0.92_mns64 (0.9200 - 0.9182 of 79.18 GiB, 18 + 10 later
# graphs) and v0.31.0_a100-40gb_qwen2.5-coder-1.5b_fp16_len16384 (0.9200 - 0.9110 of 39.49 GiB, 50 + 34 later
# graphs), each less kvbudget's first capture (14 and 58.5 MiB): 4.71 and 3.64 MiB a graph alone, 3.74 MiB together
# (tests/test_vllm_cudagraph.py recomputes the fit).
GRAPH_CAPTURE_BYTES = int(3.74 * MiB)
# profile_cudagraph_memory's floor on a later graph's step ("at least 1 MiB per graph for driver overhead";
# gpu_model_runner.py 0.21-0.33, gpu/cudagraph_utils.py _MIN_PER_GRAPH_BYTES 0.29-0.33)
MIN_PER_GRAPH_BYTES = 1 << 20

# Architectures the V2 model runner takes by default, by model_type (config/vllm.py
# DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES and _is_default_v2_model_runner_model)
_V2_0_22 = frozenset({"qwen3"})  # Qwen3ForCausalLM, not MoE, not quantized
_V2_0_23 = frozenset({"qwen3", "llama", "mistral"})  # not MoE, not quantized
_V2_0_24 = frozenset({"qwen3", "llama", "mistral", "deepseek_v2", "qwen2_moe", "granitemoe"})  # quantized too
_V2_MOE_0_25 = frozenset({"deepseek_v2", "qwen2_moe", "granitemoe"})  # 0.25-0.28: MoE models that take it


def model_runner(spec: ModelSpec, minor: int, quantized: bool) -> str:
    """The GPU model runner vLLM 0.``minor`` starts for a generative model: "v2" (v1/worker/gpu/model_runner.py)
    or "v1" (v1/worker/gpu_model_runner.py), with VLLM_USE_V2_MODEL_RUNNER unset (config/vllm.py
    use_v2_model_runner of each release):
    - 0.21: V1;
    - 0.22: V2 for Qwen3ForCausalLM, 0.23 also Llama and Mistral, neither MoE nor quantized;
    - 0.24: V2 for those three and DeepseekV2, Qwen2Moe, GraniteMoe, quantized or not;
    - 0.25-0.28: V2 for every model that is neither hybrid (Mamba/linear-attention layers) nor attention-free, and
      not MoE unless DeepseekV2, Qwen2Moe or GraniteMoe (a few newer MoE architectures are not singled out here);
    - 0.29 on: V2 for every model whose features it supports (a few speculative methods, and DeepSeek V3.2/V4 on
      ROCm, keep V1: not modelled)."""
    if minor <= 21:
        return "v1"
    kind = spec.model_type
    moe = bool(spec.num_experts)
    if minor in (22, 23):
        return "v2" if kind in (_V2_0_22 if minor == 22 else _V2_0_23) and not moe and not quantized else "v1"
    if minor == 24:
        return "v2" if kind in _V2_0_24 else "v1"
    if minor <= 28:
        hybrid = any(isinstance(x, RecurrentState) for x in spec.layers)
        attention = any(isinstance(x, (FullAttention, MLA, ChunkedLocal)) for x in spec.layers)
        return "v2" if attention and not hybrid and (not moe or kind in _V2_MOE_0_25) else "v1"
    return "v2"


@record
class GraphEstimate:
    """vLLM's CUDA-graph estimate for one rank as kvbudget models it (``bytes``: what the worker subtracts)."""

    runner: str  # "v1" or "v2"
    piecewise: int  # PIECEWISE graph sets (one per capture size)
    full: int  # FULL decode graphs
    largest_piecewise: int  # tokens of the largest of each (0: none)
    largest_full: int
    first_capture: int  # the largest size's capture
    per_graph: int  # each later graph's step
    bytes: int
    why_none: str = ""  # why vLLM estimates nothing (an empty reason when it does)


def decode_sizes(sizes: tuple[int, ...], max_num_seqs: int, decode_query_len: int = 1) -> tuple[int, ...]:
    """The capture sizes that get a FULL decode graph (cudagraph_dispatcher.py initialize_cudagraph_keys): from the
    decode query length (1 + speculative tokens) up to that times max_num_seqs."""
    return tuple(s for s in sizes if decode_query_len <= s <= decode_query_len * max_num_seqs)


def estimate(spec: ModelSpec, piecewise: tuple[int, ...], full: tuple[int, ...], first_forward: int,
             version: str | None, quantized: bool, vendor: str) -> GraphEstimate:
    """vLLM's CUDA-graph estimate for the ``piecewise`` and ``full`` graphs' capture sizes of the resolved mode
    (compile_flags.graph_plan and graph_sizes: with the default FULL_AND_PIECEWISE, every capture size and the decode
    sizes; none with --enforce-eager or cudagraph_mode NONE). ``first_forward``: the forward buffers of the largest
    size of either (calibration.forward_bytes), whose capture is counted once (the modes' first captures overlay in one
    pool); ``vendor``: the GPU's ("amd" runs no estimate before 0.26)."""
    minor = release_minor(version)
    runner = model_runner(spec, minor, quantized)
    largest_piecewise, largest_full = piecewise[-1] if piecewise else 0, full[-1] if full else 0
    why = ""
    if piecewise or full:
        if vendor != "nvidia" and minor < 26:
            why = f"vLLM 0.{minor} profiles CUDA-graph memory on CUDA only (gpu_worker.py)"
        elif runner == "v2" and minor < 29:
            why = (f"vLLM 0.{minor}'s V2 model runner, which this model gets, estimates no CUDA-graph memory "
                   "(gpu/model_runner.py profile_cudagraph_memory returns 0)")
    if why or not (piecewise or full):
        return GraphEstimate(runner=runner, piecewise=len(piecewise), full=len(full),
                             largest_piecewise=largest_piecewise, largest_full=largest_full, first_capture=0,
                             per_graph=0, bytes=0, why_none=why)
    first = 2 * first_forward
    later = max(len(piecewise) - 1, 0) * GRAPH_CAPTURE_BYTES + max(len(full) - 1, 0) * max(
        GRAPH_CAPTURE_BYTES, MIN_PER_GRAPH_BYTES)
    return GraphEstimate(runner=runner, piecewise=len(piecewise), full=len(full), largest_piecewise=largest_piecewise,
                         largest_full=largest_full, first_capture=first, per_graph=GRAPH_CAPTURE_BYTES,
                         bytes=first + later)
