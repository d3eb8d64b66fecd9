"""The textbook policy: the device's memory is weights + KV cache + activation workspace +
runtime overhead, and the KV cache gets whatever the other three leave.

No engine's own rules (utilization fraction, paged blocks, profiling) apply here; those live in
the engine modules. Every constant below is printed with the plan as an ``Assumption``.
"""

from __future__ import annotations

from .._bisect import largest
from .._record import field, record, replace
from ..hardware import GPU
from ..kvcache import MAX_BATCH, MAX_CONTEXT, bytes_per_sequence, check_tp, kv_element_type, serving_dtype
from ..model.spec import WEIGHTS_FIX, ModelSpec, checkpoint_format
from ..model.weights import WeightFormat, parse_weight_format
from ..parallel import Stage, stages
from ..units import GiB, InputError, element_type

# CUDA context and driver-side allocations that the process holds outside PyTorch's allocator.
# Source: SGLang's free memory before loading, after the CUDA context and NCCL are up: 78.81 of 79.19 GiB
# on an H100 at TP=1 (tests/data/sglang_logs/v0.4.1docs_h100_llama3.1-8b_default.log), more at TP>1 (137.29 of
# 139.8 GiB per H200 at TP=8, v0.5.4dev_h200x8_llama3.3-70b_tp8_piecewise.log) — taken as 0.5 GiB.
CUDA_CONTEXT_BYTES = GiB // 2
# Non-torch memory measured by llm-d on H100 with vLLM 0.11: 0.13 GiB at TP=1, 0.6 GiB at TP>=2
# (NCCL buffers). Source: llm-d planner, https://github.com/llm-d-incubation/llm-d-planner (capacity_planner.py).
NON_TORCH_TP1_BYTES = round(0.13 * GiB)
NON_TORCH_TP_BYTES = round(0.6 * GiB)
# Tokens in one forward step while prefilling: vLLM's max_num_batched_tokens for the OpenAI
# server on >=70 GiB GPUs (vLLM 0.33.0, vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults).
DEFAULT_PREFILL_CHUNK = 8192


@record
class Assumption:
    """One input of the plan that is not read from the model: what it is, and where it came from.
    ``nbytes`` is set when the value is an amount of memory (reports format it in their units)."""

    name: str
    value: str
    source: str
    nbytes: int | None = None


@record
class Deployment:
    """What the user asks to run: GPU, parallelism, formats and the workload."""

    gpu: GPU
    tp: int = 1
    pp: int = 1
    weights: str = "auto"
    kv_dtype: str = "auto"
    context: int | None = None
    batch: int = 1
    prefill_chunk: int = DEFAULT_PREFILL_CHUNK
    overhead_bytes: int | None = None
    activation_bytes: int | None = None
    weights_bytes: int | None = None  # measured weights per GPU, instead of computing them


# The `kvbudget fit --engine textbook` options it reads (their dests).
FIT_FLAGS = frozenset({"prefill_chunk", "overhead", "activation", "weights_memory", "tp", "pp", "num_gpus", "batch",
                       "kv_dtype", "weights_dtype"})


@record
class MemoryPlan:
    """Per-GPU partition of one deployment (the fullest pipeline stage), and what it allows."""

    model: str
    params: int
    gpu: str
    num_gpus: int
    tp: int
    pp: int
    stage: int
    stage_layers: tuple[int, int]  # first decoder layer, count
    total_bytes: int
    weights_bytes: int
    weights_by_role: tuple[tuple[str, int], ...]
    replicated_by_role: tuple[tuple[str, int], ...]  # weights every TP rank holds in full
    weights_format: str
    kept_16bit: tuple[str, ...]
    activation_bytes: int
    overhead_bytes: int
    kv_cache_bytes: int  # what is left for the KV cache
    kv_dtype: str
    context: int
    batch: int
    kv_per_sequence_bytes: int
    kv_needed_bytes: int
    max_batch: int | None  # None: the model keeps no per-sequence cache
    max_context: int
    max_context_capped: bool  # max_context is the model's own limit, not memory
    fits: bool
    verdict: str  # fits | kv_short | no_token | weights_exceed | no_cache (report.verdict words it)
    warnings: tuple[str, ...]
    assumptions: tuple[Assumption, ...] = field(default=())
    notes: tuple[str, ...] = ()  # how the model's config was read


def weight_format(spec: ModelSpec, weights: str) -> WeightFormat:
    """The checkpoint's own format for ``auto``, else the one asked for."""
    if weights.strip().lower() == "auto":
        return checkpoint_format(spec, WEIGHTS_FIX)
    return parse_weight_format(weights, dense_dtype=serving_dtype(spec))


def activation_bytes(spec: ModelSpec, tokens: int, seqs: int, tp: int, last_stage: bool) -> int:
    """Peak activation of one forward step of ``tokens`` tokens over ``seqs`` sequences, per rank:
    residual, normed input and attention output (3 x hidden), the MLP's gate and up outputs
    (2 x intermediate / tp) in the serving dtype, and on the last stage fp32 logits for one
    token per sequence."""
    d = spec.dims
    width = element_type(serving_dtype(spec)).nbytes(1)
    hidden_states = tokens * (3 * d.hidden_size + 2 * (d.intermediate_size // tp)) * width
    logits = seqs * d.vocab_size * 4 if last_stage else 0
    return hidden_states + logits


def _stage_plan(
    spec: ModelSpec, dep: Deployment, stage: Stage, fmt: WeightFormat, dtype_name: str, context: int,
    total: int, overhead: int, assumptions: tuple[Assumption, ...],
) -> MemoryPlan:
    """The plan of one pipeline stage (of one TP rank)."""
    tp, chunk, limit = dep.tp, dep.prefill_chunk, spec.max_context
    last = stage.index == dep.pp - 1
    dtype = element_type(dtype_name)

    def act_for(batch: int, ctx: int) -> int:
        if dep.activation_bytes is not None:
            return dep.activation_bytes
        step = min(batch * ctx, chunk)
        return activation_bytes(spec, step, min(batch, step), tp, last)

    def kv_for(batch: int, ctx: int) -> int:
        return batch * bytes_per_sequence(stage.layers, ctx, dtype, tp)

    weights = stage.weights_bytes if dep.weights_bytes is None else dep.weights_bytes
    avail = total - weights - overhead  # for the KV cache and the activations together
    act = act_for(dep.batch, context)
    kv_budget = avail - act
    per_seq = kv_for(1, context)
    need = dep.batch * per_seq
    # The largest batch and context are searched with the activations they would need themselves.
    max_batch = None if not per_seq else largest(
        lambda b: kv_for(b, context) + act_for(b, context) <= avail, max(avail, 0) // per_seq)
    max_ctx = largest(lambda c: kv_for(dep.batch, c) + act_for(dep.batch, c) <= avail, limit)
    return MemoryPlan(
        model=spec.name, params=spec.params, gpu=dep.gpu.name, num_gpus=tp * dep.pp, tp=tp, pp=dep.pp,
        stage=stage.index, stage_layers=(stage.first_layer, stage.num_layers), total_bytes=total,
        weights_bytes=weights, weights_by_role=stage.weights_by_role, replicated_by_role=stage.replicated_by_role,
        weights_format=fmt.describe(), kept_16bit=_kept_16bit(fmt, stage),
        activation_bytes=act, overhead_bytes=overhead, kv_cache_bytes=kv_budget, kv_dtype=dtype.name,
        context=context, batch=dep.batch, kv_per_sequence_bytes=per_seq, kv_needed_bytes=need,
        max_batch=max_batch, max_context=max_ctx, max_context_capped=max_ctx == limit,
        fits=kv_budget >= 0 and need <= kv_budget, verdict="", warnings=(), assumptions=assumptions,
    )


def fit(spec: ModelSpec, dep: Deployment) -> MemoryPlan:
    """Split one GPU's memory for ``dep`` and find the largest batch and context it allows."""
    tp, pp = dep.tp, dep.pp
    check_tp(spec, tp)
    if pp <= 0 or pp > spec.num_layers:
        raise InputError(f"--pp {pp} must be between 1 and the model's {spec.num_layers} layers")
    context = min(spec.max_context, MAX_CONTEXT) if dep.context is None else dep.context
    if not 0 < context <= MAX_CONTEXT:
        raise InputError(f"--context must be between 1 and {MAX_CONTEXT:,}, got {context}")
    if not 0 < dep.batch <= MAX_BATCH:
        raise InputError(f"--batch must be between 1 and {MAX_BATCH:,}, got {dep.batch}")
    if dep.prefill_chunk <= 0:
        raise InputError(f"--prefill-chunk must be positive, got {dep.prefill_chunk}")
    fmt = weight_format(spec, dep.weights)
    dtype = kv_element_type(spec, dep.kv_dtype)
    total = dep.gpu.memory_bytes
    assumptions = [
        Assumption(
            "GPU memory", "the total CUDA reports",
            "--gpu-memory" if dep.gpu.custom else f"GPU catalog {dep.gpu.name}; its source: kvbudget gpus --json",
            total,
        ),
        Assumption("weights", fmt.describe(), "quantization_config" if dep.weights == "auto" and fmt.quantized else
                   ("checkpoint torch_dtype" if dep.weights == "auto" else "--weights-dtype")),
        Assumption("KV cache dtype", dtype.name, "--kv-dtype" if dep.kv_dtype != "auto" else "model dtype (auto)"),
    ]
    if dep.weights_bytes is not None:
        assumptions.append(Assumption("weights per GPU", "measured", "--weights-memory", dep.weights_bytes))
    if dep.activation_bytes is None:
        tokens = min(dep.batch * context, dep.prefill_chunk)
        assumptions.append(Assumption(
            "activation workspace",
            f"{tokens:,}-token step x (3 x hidden + 2 x intermediate/TP) x {serving_dtype(spec)} "
            f"+ {min(dep.batch, tokens):,} x vocab fp32 logits",
            f"prefill chunk {dep.prefill_chunk:,} tokens (vLLM's max_num_batched_tokens default, vllm/engine/arg_utils.py)",
        ))
    else:
        assumptions.append(Assumption("activation workspace", "given", "--activation", dep.activation_bytes))
    if dep.overhead_bytes is None:
        non_torch = NON_TORCH_TP_BYTES if tp * pp > 1 else NON_TORCH_TP1_BYTES
        overhead = CUDA_CONTEXT_BYTES + non_torch
        assumptions += [
            Assumption("CUDA context", "per process, outside PyTorch's allocator",
                       "SGLang logs 0.4-2.5 GiB below the total before loading (CUDA context, NCCL)", CUDA_CONTEXT_BYTES),
            Assumption("non-torch memory", "cuBLAS workspaces" + (", NCCL buffers" if tp * pp > 1 else ""),
                       f"llm-d planner's measurement, vLLM on H100 at TP{'>=2' if tp * pp > 1 else '=1'}", non_torch),
        ]
    else:
        overhead = dep.overhead_bytes
        assumptions.append(Assumption("runtime overhead", "given", "--overhead", overhead))

    plans = [
        _stage_plan(spec, dep, stage, fmt, dtype.name, context, total, overhead, tuple(assumptions))
        for stage in stages(spec, fmt, tp, pp)
    ]
    best = plans[0]
    for plan in plans[1:]:
        if _tighter(plan, best):
            best = plan
    shortest_context = min(plan.max_context for plan in plans)
    limit = spec.max_context
    best = replace(best, max_context=shortest_context, max_context_capped=shortest_context == limit)
    return _with_verdict(best, spec)


def _tighter(a: MemoryPlan, b: MemoryPlan) -> bool:
    """Whether stage ``a`` binds harder than ``b``: less KV room, or fewer sequences."""
    if (a.max_batch is None) != (b.max_batch is None):
        return a.max_batch is not None
    if a.max_batch is not None and b.max_batch is not None and a.max_batch != b.max_batch:
        return a.max_batch < b.max_batch
    return a.kv_cache_bytes < b.kv_cache_bytes


def _kept_16bit(fmt: WeightFormat, stage: Stage) -> tuple[str, ...]:
    if not fmt.quantized:
        return ()
    kept = [role for role, _ in stage.weights_by_role if role in ("embeddings", "lm_head", "norms", "router")]
    kept += sorted(fmt.skip_roles - set(kept))
    return (*tuple(kept), "biases", "conv kernels")


def _with_verdict(p: MemoryPlan, spec: ModelSpec) -> MemoryPlan:
    """Name the outcome; reports turn the code into words in the user's units."""
    warnings = []
    if p.context > spec.max_context:
        warnings.append(f"context {p.context:,} is beyond the model's max_position_embeddings {spec.max_context:,}")
    if p.kv_cache_bytes < 0:
        code = "weights_exceed"
    elif p.max_batch is None:
        code = "no_cache"
    elif p.max_batch == 0 and p.max_context == 0:
        code = "no_token"
    elif p.fits:
        code = "fits"
    else:
        code = "kv_short"
    return replace(p, verdict=code, warnings=tuple(warnings), notes=spec.notes)
