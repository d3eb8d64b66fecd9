"""vLLM's plan: its memory accounting, per rank, as vLLM itself does it, from the release and settings
(``settings.py``), the KV layout (``kv_layout.py``) and the calibrated non-KV memory (``calibration.py``).

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

from ..._record import record, replace
from ...hardware import GPU
from ...kvcache import check_tp, serving_dtype
from ...model.spec import ModelSpec
from ...model.weights import WeightFormat, parse_weight_format
from ...parallel import stages
from ...units import GiB, InputError, element_type
from ..base import Replica
from .calibration import (
    ACTIVATION,
    NON_TORCH_TP1_BYTES,
    NON_TORCH_TP_BYTES,
    activation_peak,
    batch_defaults,
    capture_sizes,
    cudagraph_bytes,
    rotary_cache_bytes,
)
from .kv_layout import KVGroup, blocks_per_request, kv_cache_dtype_name, kv_layout, model_facts, stage_block_bytes
from .settings import Release, VllmSettings, release

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from ..base import EnginePlan, Setup


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
    from ...hardware import capability

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
    from ..base import engine_plan

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
    from ..base import cap_raised_to_load

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
