"""What a vLLM start that compiles its model afresh holds in the profiling run beyond the forward and the sampler.

From 0.21 (torch >= 2.9) vLLM turns on two Inductor options for every compiled model (config/compilation.py
``CompilationConfig.__post_init__``, 0.21.0-0.33.0): ``combo_kernels`` (horizontal fusion of independent kernels)
and ``benchmark_combo_kernel`` (0.33.0: unless Inductor is deterministic). vLLM compiles inside the profiling run:
the first call of the decorated model (compilation/decorators.py) traces it, and the split graph's pieces are
compiled before that call runs (compilation/backends.py ``PiecewiseCompileInterpreter``), all within
``memory_profiling`` (utils/mem_utils.py), whose "peak activation" is torch's allocated peak since the run began
less what is allocated after it. With ``benchmark_combo_kernel`` Inductor's scheduler decides each combo kernel by
timing it (torch 2.13 ``_inductor/scheduler.py`` ``create_combo_kernel_nodes`` -> ``speedup_by_combo_kernel``,
``codegen/triton.py`` ``benchmark_fused_nodes`` / ``benchmark_combo_kernel``): each candidate kernel's module is
run on arguments from its generated ``get_args()``, one ``rand_strided`` device tensor of full size per argument
(``codegen_kernel_benchmark``), graph inputs included. The candidates are the kernels of one level of the
graph's topological order (``_default_group_nodes_for_combo_kernels``); the first piece's first level holds the
kernels that read only graph inputs, among them the token-embedding lookup, which reads the whole embedding table:
its benchmark allocates a random table of that shape, per rank the padded vocabulary over TP
(``VocabParallelEmbedding``, padding 64) x hidden size in the model dtype, while nothing of the forward is
allocated. Which kernels share that level (the lookup needs one independent neighbour to be a candidate, e.g. the
rotary cache's gather from the positions) is Inductor's fusion decision, not read here without a GPU: the logged
peaks below are what says the lookup is benchmarked. No other weight of a dense decoder is read by a Triton kernel
(the GEMMs are extern kernels, not benchmarked), so the table is the largest tensor these benchmarks allocate. A start that loads the compiled graph from vLLM's cache ("Directly load the
compiled graph(s) ... from the cache") runs no Inductor scheduler and allocates none of it.

The embedding runs inside the compiled graph only for a text-only model: a multimodal one (a vision tower) is fed
``inputs_embeds`` computed outside it (v1/worker/gpu_model_runner.py ``_preprocess``, gpu/model_runner.py
``uses_inputs_embeds``), and only the first pipeline stage holds it.

Checked against the 0.27+ logs that print the breakdown (peak activation less the CUDA-graph estimate), no constant
fitted: 0.29.0 RTX 5090 Qwen2.5-7B 1.01 GiB logged, 152,064 x 3,584 x 2 B = 1.02 GiB (FP8 weights: 1.02 logged,
the embedding stays bf16); 0.31.0 A100-40GB Qwen2.5-Coder-1.5B 0.43 / 0.43; 0.29.0 RTX 5060 Ti Qwen3-4B 0.71 /
0.72; 0.29.0 RTX 5090 Qwen2.5-0.5B 0.22 / 0.25 (the one it overstates); the 0.30.0 start that loaded its graph
0.15, the source's forward and sampler 0.13.

The copy can also outlive the profiling run. ``memory_profiling`` counts as consumed whatever the process still
holds after its ``empty_cache()`` (free memory before the instance less free memory after the run). PyTorch's
caching allocator frees the random table into its cache, and without a split limit a later allocation that
persists past the run can be carved out of that freed block, which then pins the whole segment: ``empty_cache()``
cannot release it, so the table's bytes are counted once as consumed and once in the transient peak. vLLM 0.31.0
wraps the profiling run in ``_scoped_allocator_max_split(max_split_size_mb=20)`` for exactly this (v1/worker/
gpu_worker.py ``determine_available_memory``: "a later small allocation can be carved out of a freed multi-GiB
block and pin the whole segment past the empty_cache()"); the scope applies on CUDA only (``is_cuda()``), so ROCm
keeps the old behaviour. Only from 0.27 does a pinned segment count: 0.22-0.26 took the memory outside the
forward's peak as the growth of CUDA memory used outside torch's reserved pool (``non_torch_increase``), and the
pinned segment is inside that pool; 0.27.0 measures consumption by free memory (``total_consumed``, with the
transient peak above what is still allocated added), which counts it. Which allocation does the carving is the model runner's: the V2 model runner
(v1/worker/gpu/model_runner.py) allocates state during the run that the V1 runner made before it. The logs that
show both figures agree with no constant fitted: the 0.29.0 V2-runner starts count the table twice (consumed less
weights: RTX 5090 Qwen2.5-7B 1.36 GiB = 0.34 + 1.02, its FP8 run 1.42 = 0.40 + 1.02, Qwen2.5-0.5B 0.66 = 0.41 +
0.25, RTX 5060 Ti Qwen3-4B 0.95 = 0.23 + 0.72), the 0.31.0 V2 start once (A100 Qwen2.5-Coder-1.5B: 0.33 consumed
beside the weights), and cold V1-runner starts of 0.17-0.22 (H100 Qwen3-30B-A3B, Qwen2.5-Coder-14B, A100
Llama-3.1-8B) once.
"""

from __future__ import annotations

from ...model.spec import ModelSpec
from ...units import element_type

COMPILE_CACHES = ("cold", "warm")
VOCAB_PADDING = 64  # vLLM's DEFAULT_VOCAB_PADDING_SIZE (model_executor/layers/vocab_parallel_embedding.py)


def embedding_table_bytes(spec: ModelSpec, tp: int, dtype: str) -> int:
    """One rank's token-embedding table as VocabParallelEmbedding holds it: the vocabulary padded to 64, split over
    TP, times the hidden size, in the model dtype."""
    padded = -(-spec.dims.vocab_size // VOCAB_PADDING) * VOCAB_PADDING
    return -(-padded // tp) * spec.dims.hidden_size * element_type(dtype).nbytes(1)


def cold_compile_bytes(spec: ModelSpec, tp: int, dtype: str, *, first_stage: bool, compiled: bool,
                       cache: str) -> int:
    """The transient peak a fresh compile allocates in the profiling run (Inductor's benchmark of the first piece's
    embedding lookup: a random copy of the rank's embedding table); 0 when the start loads its compiled graph from
    the cache (``cache == "warm"``), when torch.compile is off, on a later pipeline stage, or for a multimodal model
    whose embedding runs outside the compiled graph."""
    if cache == "warm" or not compiled or not first_stage or spec.vision is not None:
        return 0
    return embedding_table_bytes(spec, tp, dtype)


SPLIT_LIMIT_MINOR = 31  # the first release that scopes max_split_size_mb around the profiling run (gpu_worker.py)
# The first release whose profiling counts what the process consumed by free memory (utils/mem_utils.py
# memory_profiling ``total_consumed``, 0.27.0); before it, memory outside the forward's peak was the growth of CUDA
# memory used outside torch's reserved pool (``non_torch_increase``), which a segment pinned inside that pool is not
FREE_MEMORY_MINOR = 27


def pinned_copy_bytes(cold: int, runner: str, minor: int, vendor: str) -> int:
    """The fresh compile's random table that stays counted as consumed after the profiling run (the module's last
    paragraph): ``cold`` (cold_compile_bytes) on the V2 model runner where the run has no allocator split limit
    (before 0.31, or on a GPU that is not CUDA) and the profiling counts consumption by free memory (0.27 on); 0
    otherwise."""
    if cold <= 0 or runner != "v2" or minor < FREE_MEMORY_MINOR:
        return 0
    if vendor == "nvidia" and minor >= SPLIT_LIMIT_MINOR:
        return 0
    return cold
