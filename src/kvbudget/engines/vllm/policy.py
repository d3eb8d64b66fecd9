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
from functools import lru_cache

from ..._record import record, replace
from ...dtypes import KVDtype
from ...hardware import GPU, capability
from ...kvcache import check_tp, serving_dtype
from ...model.layers import MLA, FullAttention
from ...model.spec import ModelSpec
from ...model.weights import WeightFormat, dense_format
from ...parallel import pp_partition, stages
from ...units import GiB, InputError, MiB, element_type
from ..base import Replica, cap_raised_to_load
from ..site import site_bytes
from . import context_parallel, eplb, kv_connector, mm_memory
from .allocations import counts_segments, segment_bytes
from .archs import check_architecture
from .calibration import (
    ACTIVATION,
    CUDA_CONTEXT_BYTES,
    NON_TORCH_TP_BYTES,
    PROFILING_RUN_CURRENT,
    SAMPLERS,
    activation_peak,
    batch_defaults,
    blackwell_ceiling,
    counts_whole_device,
    cublas_workspace_bytes,
    forward_bytes,
    moe_workspace_elements,
    multi_gpu_non_torch,
    rotary_cache_bytes,
    sampler_bytes,
    sampler_may_differ,
    sampler_path,
    single_gpu_non_torch,
    v1_alpha_activation,
    v1_alpha_logit_rows,
)
from .compile_cache import COMPILE_CACHES, cold_compile_bytes, pinned_copy_bytes
from .compile_flags import GraphPlan, describe, graph_plan, graph_sizes
from .context_parallel import request_blocks as dcp_request_blocks
from .cudagraph import GraphEstimate, estimate, model_runner
from .dsa import BLOCK_SIZE as DSA_BLOCK
from .dsa import dsa_kv_dtype
from .encoder_profile import EncoderPass, profile_pass
from .head_sizes import check_head_sizes
from .kv_connector import keeps_hybrid_manager
from .kv_dtypes import kv_dtype_runs, kv_dtype_taken
from .kv_layout import KVGroup, KVLayout, ModelFacts, kv_cache_dtype, kv_layout, model_facts, stage_block_bytes
from .mm_memory import ipc_error
from .nccl import EAGER_INIT_UNATTRIBUTED, eager_nvswitch_bytes, link_note, nccl_line, on_nvswitch
from .quant import act_dtype_taken, dequant_bytes, int4_kernel, loaded_format, stand_in_note
from .settings import (
    RELEASES,
    Release,
    VllmSettings,
    minor_patch,
    release,
    release_minor,
    settings_release,
    unread_release,
    version_minor,
)
from .speculative import drafter_buffers

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from ...parallel import Stage
    from ..base import EnginePlan
    from .eplb import EplbMemory
    from .lora import LoraMemory


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
    ep: int = 1  # expert-parallel group (DP x TP with --enable-expert-parallel on an MoE model; 1: none)
    lora_bytes: int = 0  # --enable-lora: the adapter slots of the binding rank (lora.py), inside model_loading_bytes
    cudagraph: GraphEstimate | None = None  # >= 0.21: vLLM's CUDA-graph estimate, how kvbudget models it (cudagraph.py)
    dcp: int = 1  # --decode-context-parallel-size: ranks of a TP group each storing 1/dcp of a request's tokens
    eplb_bytes: int = 0  # --enable-eplb: redundant experts (+ EPLB's state from 0.20) in model_loading_bytes (eplb.py)
    mm_ipc_bytes: int = 0  # --mm-ipc-gpu-memory-gb: taken from the available KV cache memory after it is logged
    load_fails: bool = False  # the weights alone do not fit: torch stops while loading, before any KV cache is sized


def _gib(n: int | float) -> str:
    return f"{round(n / GiB, 2)}"  # vLLM format_gib: round(bytes / 2^30, 2)


# The lowest compute capability each weight format's kernels run on (vLLM: QuantizationConfig.get_min_capability
# of Fp8Config 80 (Marlin W8A16 on Ampere, native from 8.9), AWQConfig 75, GPTQConfig 60, BitsAndBytesConfig 70,
# Mxfp4Config 80, ModelOpt NVFP4 80 through Marlin).
MIN_CAPABILITY = {"fp8": 8.0, "awq": 7.5, "gptq": 6.0, "nf4": 7.0, "mxfp4": 8.0, "nvfp4": 8.0}


def check_capability(fmt: WeightFormat, gpu: GPU) -> None:
    """vLLM refuses a quantization method the GPU's compute capability cannot run."""
    need = MIN_CAPABILITY.get(fmt.name)
    have = capability(gpu)
    if need is not None and have is not None and have < need:
        raise InputError(f"{fmt.name} weights need compute capability {need} in vLLM; {gpu.name} has {have}")


def weight_format(spec: ModelSpec, settings: VllmSettings) -> WeightFormat:
    """The weight format vLLM loads for ``settings``: the checkpoint's (in the serving dtype), or --quantization's
    (``quant.loaded_format``)."""
    dense = serving_dtype(spec) if settings.dtype == "auto" else element_type(settings.dtype).name
    return loaded_format(spec, settings.quantization, dense)


def _checkpoint_kv_dtype(spec: ModelSpec, settings: VllmSettings, notes: list[str]) -> str:
    """--kv-cache-dtype as the release resolves it: from 0.14 "auto" is a ModelOpt checkpoint's own KV format
    (engine/arg_utils.py create_engine_config -> utils/torch_utils.py resolve_kv_cache_dtype_string, which reads the
    checkpoint's quantization_config, not --quantization); the value as given otherwise."""
    fmt = spec.weight_format
    if settings.kv_cache_dtype.strip().lower() != "auto" or fmt is None or not fmt.vllm_auto_kv:
        return settings.kv_cache_dtype
    minor = release_minor(settings.version)
    if minor < 14:
        notes.append(f"the checkpoint's ModelOpt config names a {fmt.vllm_auto_kv} KV cache, which vLLM 0.{minor} "
                     "does not take for --kv-cache-dtype auto (from 0.14 it does): the KV cache is in the model dtype")
        return settings.kv_cache_dtype
    notes.append(f"--kv-cache-dtype auto: vLLM 0.{minor} takes the checkpoint's ModelOpt KV format, {fmt.vllm_auto_kv} "
                 "(utils/torch_utils.py resolve_kv_cache_dtype_string); give --kv-cache-dtype bfloat16 for a 16-bit cache")
    return fmt.vllm_auto_kv


def _vllm_loading(fmt: WeightFormat, notes: list[str]) -> WeightFormat:
    """How vLLM lays the weights out when it loads them, where that differs from the checkpoint."""
    if fmt.name == "mxfp4" and "experts" not in fmt.skip_roles:
        # fused_moe/oracle/mxfp4.py: the Marlin and TRT-LLM MoE kernels pad the hidden size to a multiple
        # of 256 and the per-rank intermediate size to a multiple of 128 (gpt-oss: 2880 -> 3072 and 2944).
        notes.append("MXFP4 experts padded as vLLM's MoE kernels load them (hidden to x256, intermediate to x128)")
        return replace(fmt, expert_padding=(256, 128))
    return fmt


# --- the plan, step by step -------------------------------------------------------------------------------
#
# vLLM 0.33.0 sizes its KV cache in v1/core/kv_cache_utils.py once the worker has measured what the model
# leaves free (v1/worker/gpu_worker.py determine_available_memory): get_kv_cache_groups (the groups, their
# page sizes unified) -> _get_kv_cache_bytes_per_block on each worker's layers -> get_num_blocks per worker,
# the smallest kept and may_override_num_blocks applied (get_kv_cache_configs) -> check_enough_kv_cache_memory
# (or _auto_fit_max_model_len) -> get_max_concurrency_for_kv_cache_config and _report_kv_cache_config.
# ``plan`` takes the same steps, one private function each, after ``_resolve`` has filled in the settings.

# One pipeline stage's memory: the stage, its bytes per block, model loading (weights + rotary cache), the
# activation peak, CUDA graphs, and the KV cache memory it has
_StageMemory = tuple["Stage", int, int, int, int, int]


@record
class _Resolved:
    """The settings as vLLM fills them in (engine/arg_utils.py, config/): the release line, the parallel
    layout, the memory fraction, the dtypes, max_model_len, the batch sizes, the weights as loaded, and the
    KV cache manager's mode."""

    rel: Release
    tp: int
    pp: int
    dp: int
    util: float
    model_dtype: str
    kv_dtype: KVDtype
    derived_len: int
    auto_len: bool
    max_len: int
    tokens: int  # max_num_batched_tokens
    seqs: int  # max_num_seqs
    fmt: WeightFormat
    params: int
    hybrid_manager: bool
    block_size: int  # as asked (the hybrid alignment of ``kv_layout`` may raise it)
    align: bool  # prefix caching's "align" mode for Mamba states
    in_flight: int  # tokens a sliding-window or chunked reservation adds (max_in_flight_tokens)
    mamba_blocks: int  # state pages per request


def _block_size(mla: bool, gpu: GPU, rel: Release, notes: list[str]) -> int:
    """The KV block size vLLM picks when --block-size is not given: 16, unless an MLA model's attention backend on
    this GPU takes other sizes. 0.8-0.20 (platforms/cuda.py check_and_update_config of 0.8.5 and 0.10.1): FlashMLA
    on Hopper forces 64 ("Forcing kv cache block size to 64 for FlashMLA backend"), CUTLASS MLA on Blackwell 128.
    0.21 and later (0.33.0 platforms/cuda.py _get_backend_priorities, interface.py
    _preferred_block_size_for_backends): the first backend that runs is FlashAttention MLA on Hopper (multiples of
    16: 16 stays) and FlashInfer MLA on Blackwell (32 or 64: the smallest, 32)."""
    if rel.key == "v0" or not mla:
        return 16
    major = gpu.compute_capability.split(".")[0]
    size = {("v1", "9"): 64, ("v1", "10"): 128, ("current", "10"): 32}.get((rel.key, major), 16)
    if size != 16:
        backend = {64: "FlashMLA", 128: "CUTLASS_MLA", 32: "FlashInfer MLA"}[size]
        notes.append(f"MLA attention on {gpu.name}: vLLM's {backend} backend sets the KV block size to {size}")
    return size


def _in_flight_batches(rel: Release, settings: VllmSettings, pp: int) -> int:
    """Batches of max_num_batched_tokens a sliding window reserves room for (vLLM 0.33.0 config/vllm.py
    max_concurrent_batches): PP stages fill the pipeline; async scheduling (the default from 0.21, with the V2
    model runner, config/vllm.py use_v2_model_runner) keeps one batch more, pp + 1. Before 0.21 async scheduling
    was opt-in and, with PP, not supported: pp batches."""
    async_on = settings.async_scheduling if settings.async_scheduling is not None else rel.in_flight_batches == 2
    if rel.key != "current":
        return 2 if async_on and pp == 1 else pp
    return pp + 1 if async_on else pp


@record
class _Settled:
    """What vLLM makes of the settings before it looks at the GPU (engine/arg_utils.py, config/): the release line,
    the memory fraction, --kv-cache-dtype as the release resolves it, max_model_len, the weights as loaded and the KV
    cache manager's mode; worked out once per model and settings (``settled``: a search asks it alike for every GPU
    type) and replayed by ``_resolve`` step by step among the GPU's own checks, in vLLM's order: each step's notes
    (``said``) and the first refusal at the step that makes it (``refused_at``; the values of the later steps are
    then not worked out: placeholders)."""

    said: tuple[tuple[str, ...], ...]  # the notes of each step (SETTLED_STEPS of them)
    refusal: InputError | None = None
    refused_at: int = -1  # the step whose check refuses the settings (-1: none)
    rel: Release = RELEASES["current"]
    facts: ModelFacts | None = None
    util: float = 0.0
    asked: str = "auto"  # --kv-cache-dtype as the release resolves it (the checkpoint's ModelOpt format from 0.14)
    derived_len: int = 0
    auto_len: bool = False
    max_len: int = 0
    fmt: WeightFormat | None = None
    hybrid_manager: bool = False
    align: bool = False
    in_flight_batches: int = 0
    speculative_states: int = 0


SETTLED_STEPS = 6  # the steps of ``settled``, between which ``_resolve`` runs the GPU's checks


@lru_cache(maxsize=1024)  # pure, of hashable arguments (the settings' hash is kept on the record)
def settled(spec: ModelSpec, settings: VllmSettings) -> _Settled:
    """The GPU-independent part of ``_resolve`` for ``settings``, in six steps: (0) the release line, the architecture,
    the sampler and compile-cache names, TP and PP, the memory fraction; (1) --kv-cache-dtype as the release takes and
    resolves it; (2) max_model_len; (3) the weights as vLLM loads them; (4) the hybrid KV cache manager and the other
    flags' refusals (``_check_extras``); (5) the Mamba state pages speculative decoding adds."""
    said: list[list[str]] = [[] for _ in range(SETTLED_STEPS)]
    got: dict[str, object] = {}
    step = 0
    try:
        notes = said[0]
        rel = got["rel"] = settings_release(settings)
        if (later := unread_release(settings.version)) is not None:
            notes.append(later)
        check_architecture(spec.architecture, settings.version, spec.name, notes)
        if settings.sampler is not None and settings.sampler not in SAMPLERS:
            raise InputError(f"sampler {settings.sampler!r} is not one vLLM has: give one of {', '.join(SAMPLERS)}")
        if settings.compile_cache not in COMPILE_CACHES:
            raise InputError(f"compile cache {settings.compile_cache!r} is not a state kvbudget knows: give one of "
                             f"{', '.join(COMPILE_CACHES)}")
        tp, pp = settings.tensor_parallel_size, settings.pipeline_parallel_size
        facts = got["facts"] = model_facts(spec)
        check_tp(spec, tp, facts.tp_layers)
        if pp < 1 or pp > spec.num_layers:
            raise InputError(f"--pipeline-parallel-size {pp} must be between 1 and the model's {spec.num_layers} layers")
        util = settings.gpu_memory_utilization if settings.gpu_memory_utilization is not None else rel.default_utilization
        if not 0 < util <= 1:
            raise InputError(f"--gpu-memory-utilization must be in (0, 1], got {util}")
        got["util"] = util
        step = 1  # (the model dtype on the GPU comes first)
        # the value as the release takes it (as written): fit's --kv-dtype and the API reach vLLM's rules here; a launch
        # command's --kv-cache-dtype was checked as it was read
        kv_dtype_taken(settings.kv_cache_dtype, settings.version, "--kv-dtype")
        got["asked"] = _checkpoint_kv_dtype(spec, settings, said[1])
        step = 2  # (an attention backend that holds it on the GPU comes first)
        derived_len = spec.max_context
        if settings.rope_scaling is not None:  # --rope-scaling / --hf-overrides (rope.py)
            from .rope import derived_len as rope_len
            derived_len, rope_said = rope_len(settings.rope_scaling, spec.max_context, version_minor(settings.version))
            said[2].append(rope_said)
        default_len = derived_len if settings.rope_scaling is not None else (spec.default_context or derived_len)
        max_len = default_len if settings.max_model_len in (None, -1) else settings.max_model_len
        if max_len <= 0:
            raise InputError(f"--max-model-len must be positive or auto, got {max_len}")
        if max_len > derived_len and not settings.allow_long_max_model_len:
            raise InputError(
                f"--max-model-len {max_len:,} is greater than the derived max_model_len ({derived_len:,}) of "
                f"{spec.name}; vLLM refuses it (set VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 to override)")
        got.update(derived_len=derived_len, auto_len=settings.max_model_len == -1, max_len=max_len)
        step = 3  # (the batch sizes on the GPU come first)
        got["fmt"] = _vllm_loading(weight_format(spec, settings), said[3])
        step = 4  # (whether the GPU runs that format comes first)
        chunked = facts.chunked
        hybrid_manager = not settings.disable_hybrid_kv_cache_manager and (not chunked or settings.chunked_local_hybrid)
        _check_extras(spec, settings)
        if hybrid_manager and not keeps_hybrid_manager(settings.kv_connector, settings.version):
            hybrid_manager = False  # kv_connector.py: a connector without SupportsHMA turns it off
        if chunked and not hybrid_manager:
            said[4].append("chunked local attention: vLLM disables the hybrid KV cache manager and caches every layer "
                           "in full (config/vllm.py; VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE)")
        prefix = settings.enable_prefix_caching if settings.enable_prefix_caching is not None else True
        got.update(hybrid_manager=hybrid_manager, align=facts.hybrid_mamba and prefix and rel.key == "current",
                   in_flight_batches=_in_flight_batches(rel, settings, pp))
        step = 5  # (the GPU's block size comes first)
        got["speculative_states"] = _speculative_states(facts.hybrid_mamba, rel, settings, said[5])
    except InputError as exc:
        return _Settled(tuple(tuple(n) for n in said), exc, step, **got)  # type: ignore[arg-type]
    return _Settled(tuple(tuple(n) for n in said), **got)  # type: ignore[arg-type]


def _replay(s: _Settled, step: int, notes: list[str]) -> None:
    """Step ``step`` of the settled settings in the plan's course: its notes, or the refusal it makes."""
    notes += s.said[step]
    if s.refused_at == step and s.refusal is not None:
        raise s.refusal.with_traceback(None)  # raised afresh each time it is replayed


def _resolve(spec: ModelSpec, gpu: GPU, settings: VllmSettings, notes: list[str]) -> _Resolved:
    """Check the settings and fill in vLLM's defaults for the release and the GPU: the memory fraction,
    the dtypes, max_model_len (``-1``: auto-fit, decided by ``_checks``), max_num_batched_tokens and
    max_num_seqs (``batch_defaults``), the weights as vLLM loads them (a format the GPU cannot run is
    refused), and whether the hybrid KV cache manager runs. What does not depend on the GPU is ``settled``'s,
    replayed in its place among the GPU's checks."""
    s = settled(spec, settings)
    _replay(s, 0, notes)
    rel, facts, asked = s.rel, s.facts, s.asked
    assert facts is not None  # worked out in step 0, which passed
    model_dtype = _model_dtype(spec, settings, gpu, notes)
    _replay(s, 1, notes)
    # an attention backend that holds the KV-cache dtype on this GPU
    if said := kv_dtype_runs(asked, settings.version, gpu, spec.dims.head_dim, facts.mla):
        notes.append(said)
    check_head_sizes(spec, gpu, settings, rel.key, model_dtype, asked)  # an attention backend for each head size
    dsa = facts.dsa
    kv_name = dsa_kv_dtype(spec, asked, gpu, rel.key == "current", notes) if dsa else asked
    kv_dtype = kv_cache_dtype(kv_name, model_dtype)
    _replay(s, 2, notes)
    tokens, seqs = batch_defaults(gpu, settings, rel, s.max_len)
    _replay(s, 3, notes)
    fmt = s.fmt
    assert fmt is not None  # worked out in step 3, which passed
    check_capability(fmt, gpu)
    if settings.dtype != "auto" or (spec.weight_format is not None and spec.weight_format.quantized):
        # (a 16-bit checkpoint priced as its AWQ or GPTQ version, a what-if, keeps its own dtype)
        act_dtype_taken(fmt, settings.quantization, gpu, settings.version, model_dtype)
    _replay(s, 4, notes)
    block_size = settings.block_size or (DSA_BLOCK if dsa else _block_size(facts.mla, gpu, rel, notes))
    _replay(s, 5, notes)
    return _Resolved(  # positional: a plan search builds one a plan (keywords cost a dict of them on every call)
        rel, settings.tensor_parallel_size, settings.pipeline_parallel_size, settings.data_parallel_size, s.util,
        model_dtype, kv_dtype, s.derived_len, s.auto_len, s.max_len, tokens, seqs, fmt, facts.params, s.hybrid_manager,
        block_size, s.align, s.in_flight_batches * tokens, (2 if s.align else 1) + s.speculative_states)


def _model_dtype(spec: ModelSpec, settings: VllmSettings, gpu: GPU, notes: list[str]) -> str:
    """The dtype vLLM runs the model in: --dtype, or the checkpoint's; a GPU below compute capability 8.0 has no
    bfloat16 (platforms/cuda.py supported_dtypes): "auto" falls back to float16 with a warning
    (config/model.py _resolve_auto_dtype) and an explicit bfloat16 stops the worker (check_if_supports_dtype)."""
    cap = capability(gpu)
    low = gpu.vendor == "nvidia" and cap is not None and cap < 8.0
    if settings.dtype != "auto":
        name = element_type(settings.dtype).name
        if name == "bf16" and low:
            raise InputError(f"vLLM stops: 'Bfloat16 is only supported on GPUs with compute capability of at least 8.0'; "
                             f"{gpu.name} has {cap}: use --dtype half")
        return name
    name = serving_dtype(spec)
    if name == "bf16" and low:
        notes.append(f"{gpu.name} (compute capability {cap}) has no bfloat16: vLLM falls back to float16 for "
                     f"{spec.name}'s bfloat16 weights (same bytes)")
        return "fp16"
    return name


def _speculative_states(hybrid_mamba: bool, rel: Release, settings: VllmSettings, notes: list[str]) -> int:
    """Extra Mamba state pages per request under speculative decoding: 0.33.0's MambaSpec holds
    ``num_speculative_blocks = num_speculative_tokens`` more (model_executor/layers/mamba/abstract.py
    get_kv_cache_spec; kv_cache_interface.py max_memory_usage_bytes), whatever the method. Not in 0.10.1's
    MambaSpec: counted on the >= 0.21 line only."""
    n = settings.num_speculative_tokens if settings.speculative_method else 0
    if not (n and hybrid_mamba and rel.key == "current"):
        return 0
    notes.append(f"speculative decoding: each request holds {n} more Mamba state page(s), one per draft token "
                 "(vLLM MambaSpec num_speculative_blocks)")
    return n


def _groups(spec: ModelSpec, r: _Resolved, notes: list[str]) -> KVLayout:
    """Step 1, groups and page sizes (kv_cache_utils.py get_kv_cache_groups, with unify_hybrid_kv_cache_specs
    and unify_kv_cache_spec_page_size; the attention block size raised to hold a Mamba state first): the
    KV-cache groups of the whole model and the block size they use (``kv_layout``, memoized)."""
    layout = kv_layout(spec, r.kv_dtype, r.model_dtype, r.tp, r.block_size, r.hybrid_manager, r.align)
    notes += layout.notes
    return layout


def _page_bytes(spec: ModelSpec, layout: KVLayout, r: _Resolved) -> tuple[int, ...]:
    """Step 2, the page size each worker allocates (kv_cache_utils.py _project_kv_cache_groups_to_worker and
    _get_kv_cache_bytes_per_block): the largest group's bytes per block over the layers of each pipeline
    stage (``stage_block_bytes``, memoized)."""
    return stage_block_bytes(spec, layout, r.kv_dtype, r.tp, r.pp)


def _request_blocks(groups: tuple[KVGroup, ...], block_size: int, in_flight: int, mamba_blocks: int, length: int,
                    dcp: int = 1) -> int:
    """Blocks one request of ``length`` tokens takes from the pool, over every group (max_memory_usage_bytes); with
    decode context parallelism a full-attention or MLA group holds 1/dcp of the tokens on a rank (context_parallel.py)."""
    if dcp > 1:
        return dcp_request_blocks(groups, block_size, in_flight, mamba_blocks, length, dcp)
    return sum(g.spec.blocks(length, block_size, in_flight, mamba_blocks) for g in groups)


def _check_extras(spec: ModelSpec, settings: VllmSettings) -> None:
    """vLLM's refusals of EPLB, decode context parallelism and --mm-ipc-gpu-memory-gb (eplb.py, context_parallel.py,
    mm_memory.py)."""
    eplb.check(spec, settings)
    context_parallel.check(spec, settings)
    mm_memory.check_ipc(settings)


def _nvswitch_nccl(gpu: GPU, settings: VllmSettings, r: _Resolved) -> int | None:
    """NCCL's memory per rank on an NVSwitch board at three or more TP ranks, for the releases that connect NCCL
    eagerly (nccl.py); None elsewhere (kvbudget charges the two-GPU figure there)."""
    if r.pp != 1 or r.tp < 3 or not on_nvswitch(gpu.name):
        return None
    return eager_nvswitch_bytes(settings.version, r.tp, int(capability(gpu) or 9.0), settings.nccl_cumem,
                                settings.nccl_nvls)


def _available(spec: ModelSpec, gpu: GPU, settings: VllmSettings, r: _Resolved, block_bytes: tuple[int, ...],
               dequant: int, segments: tuple[int, int, bool], run: _ProfilingRun | None,
               encoder: EncoderPass | None = None, lora: LoraMemory | None = None,
               eplb: EplbMemory | None = None, extras: _Extras | None = None) -> tuple[int, int, int, list[_StageMemory]]:
    """What each worker has for its KV cache before kv_cache_utils.py runs (gpu_worker.py
    determine_available_memory): utilization x total memory, minus the weights loaded (with the rotary
    cache, less what --cpu-offload-gb keeps on the host, and the allocator's ``segments``: ``_segments``), non-torch
    memory, the profiling run's activation peak and the CUDA-graph estimate (``run``: ``_profiling_run``), per
    pipeline stage; or --kv-cache-memory as given. The GPU's total, the requested bytes, the non-torch bytes and each
    stage's memory."""
    rel = r.rel
    total = gpu.memory_bytes
    requested = math.ceil(total * r.util)
    rotary = rotary_cache_bytes(spec, r.model_dtype)
    graph_estimate = run.estimate if run is not None else None
    graphs_counted = graph_estimate is not None and settings.estimate_cudagraphs
    # every DP engine holds the attention (split by its own TP) and, of an MoE model, its share of the experts
    stage_list = stages(spec, r.fmt, r.tp, r.pp, r.dp, settings.enable_expert_parallel)
    non_torch = (multi_gpu_non_torch(rel.key, settings.version) if r.tp * r.pp > 1
                 else single_gpu_non_torch(rel.key, settings.version))
    nccl = _nvswitch_nccl(gpu, settings, r)
    if nccl is not None:  # NCCL's buffers by mechanism (nccl.py) on top of the one-GPU figure
        non_torch = single_gpu_non_torch(rel.key, settings.version) + nccl
    extra = site_bytes(settings.site, gpu.name, rel.key, r.tp * r.pp)[0] if settings.site else 0  # a site profile
    if abs(extra) > total // 4:  # no site spends a quarter of a GPU outside the model: a profile of another GPU
        raise InputError(f"--profile: its term for {gpu.name} is {extra / GiB:+.2f} GiB, more than a quarter of the GPU: "
                         "recalibrate with the GPU the logs ran on (kvbudget calibrate LOG ... --gpu G)")
    inside, beside, counted = segments
    non_torch = max(non_torch + extra, 0) + (beside if counted else 0)
    if extras is not None:  # a KV connector's buffer built before the measurement, on a release that counts it
        non_torch += extras.connector
    rows, act_model = min(r.tokens, r.seqs), ACTIVATION[rel.key]
    if rel.blocks_log_line:  # the 0.7 V1 alpha: logits, no sampler
        rows = v1_alpha_logit_rows(settings.version, r.tokens, r.seqs)
        act_model = v1_alpha_activation(r.model_dtype)
    moe = moe_workspace_elements(spec, r.tokens, r.tp, settings.enable_expert_parallel, rel.key)
    cold = run.cold if run is not None else 0  # the first stage's, once
    pinned = run.pinned if run is not None else 0
    if r.pp == 1:  # the first stage's consumed memory, which a one-stage run reports as its non-torch memory
        non_torch += pinned
    per_stage: list[_StageMemory] = []
    for st, bpb in zip(stage_list, block_bytes, strict=True):
        weights = max(st.weights_bytes - settings.cpu_offload_bytes, 0) + rotary + inside
        if lora is not None:  # the adapter slots: built inside load_model's DeviceMemoryProfiler (lora.py)
            weights += lora.per_stage[st.index]
        if eplb is not None:  # redundant experts; EPLB's state where load_model's profiler holds it (eplb.py)
            weights += eplb.redundant_weights[st.index] + (eplb.state[st.index] if eplb.state_counted else 0)
        if extras is not None and st.index == 0:  # --mm-encoder-tp-mode data: the whole vision tower (mm_memory.py)
            weights += extras.tower
        if run is not None:  # the source's profiling run, or a fresh compile's benchmark before it if larger
            act = max(run.last if st.index == r.pp - 1 else run.earlier, cold if st.index == 0 else 0)
        else:
            act = activation_peak(spec, r.tokens, rows, r.tp, r.model_dtype, st.index == r.pp - 1, act_model,
                                  sampler_path(settings, gpu, rel.key), moe, settings.version, dequant,
                                  cublas_workspace_bytes(gpu) if rel.key == "v0" else 0)
        if encoder is not None:  # the vision encoder's pass: its stage or the text stage with its tensors held
            act = encoder.peak(act)
        if lora is not None:
            act += lora.activation
        if eplb is not None:  # the dummy rearrangement's buffer, after the forward has freed its intermediates
            act = max(act, eplb.profile_buffer[st.index])
        if st.index == r.pp - 1 and settings.speculative_draft is not None:  # the proposer's (speculative.py)
            act += drafter_buffers(settings.speculative_draft, r.tokens, element_type(r.model_dtype).nbytes(1))
        graphs = graph_estimate.bytes if graph_estimate is not None and graphs_counted else 0
        if settings.kv_cache_memory_bytes is not None:
            available = settings.kv_cache_memory_bytes
        else:
            available = requested - weights - non_torch - act - graphs
            if r.pp > 1 and st.index == 0:
                available -= pinned
        if extras is not None:  # --mm-ipc-gpu-memory-gb: taken after "Available KV cache memory" is logged
            available -= extras.ipc
        per_stage.append((st, bpb, weights, act, graphs, available))
    return total, requested, non_torch, per_stage


@record
class _Extras:
    """Memory of three flags beside the main accounting: the vision tower whole on every rank in data mode (stage 0;
    mm_memory.py), a KV connector's buffer that the release counts as non-torch memory (kv_connector.py), and
    --mm-ipc-gpu-memory-gb's carve-out from the KV cache memory (mm_memory.py)."""

    tower: int = 0
    connector: int = 0
    ipc: int = 0


_NO_EXTRAS = _Extras()  # none of the three flags: what most plans have

SEGMENTS_NOTED = 64 * MiB  # the allocator's share of the weights a plan's notes name


def _segments(spec: ModelSpec, settings: VllmSettings, r: _Resolved) -> tuple[int, int, bool]:
    """What PyTorch's caching allocator holds around the rank's weights beyond their bytes (allocations.py): inside
    the tensors' blocks (in "Model loading took" in every release), beside them, and whether the release counts the
    part beside them (the releases that read the device's free memory: 0.2.5-0.6.4, 0.7.0-0.9.0 V1, 0.27 on). Where
    the rank builds the whole model as loaded: one pipeline stage, nothing offloaded, an MoE model's experts split by
    TP alone, no speculative draft or MTP layers (built after the target, sharing its rotary cache where the
    parameters match); else nothing."""
    counted = counts_segments(r.rel.key, settings.version)
    if (r.pp > 1 or settings.cpu_offload_bytes or (spec.num_experts and (r.dp > 1 or settings.enable_expert_parallel))
            or settings.speculative_draft is not None or settings.speculative_method == "mtp"):
        return 0, 0, counted
    fmt = r.fmt
    if not fmt.quantized and fmt.name != "stored":
        fmt = dense_format(r.model_dtype)
    return (*segment_bytes(spec, fmt, r.tp, r.model_dtype), counted)


@record
class _ProfilingRun:
    """The >= 0.21 profiling run and CUDA-graph estimate of one plan, worked out once (``_profiling_run``) and read by
    the memory accounting, the notes and the provenance alike."""

    graphs: GraphPlan  # the CUDA-graph mode and capture sizes the compilation flags resolve to
    estimate: GraphEstimate  # vLLM's CUDA-graph estimate of them
    runner: str  # the model runner the release starts for the model ("v1" or "v2")
    last: int  # the source's profiling-run peak on the last pipeline stage (with the dummy sampler pass)
    earlier: int  # the same on an earlier stage (0 with one stage)
    cold: int  # the fresh compile's embedding copy on the first stage, under the settings' compile cache
    fresh: int  # the same on a start that compiles afresh (--vllm-compile-cache cold)
    pinned: int  # ``cold`` still counted as consumed after the run (compile_cache.pinned_copy_bytes)


def _profiling_run(spec: ModelSpec, gpu: GPU, settings: VllmSettings, r: _Resolved, dequant: int) -> _ProfilingRun | None:
    """The >= 0.21 line's profiling run (None before 0.21), from what it depends on (``profiling_run``)."""
    if not r.rel.cudagraph_subtracted:
        return None
    return profiling_run(spec, settings, r.rel.key, r.tp, r.pp, r.tokens, r.seqs, r.model_dtype, _quantized(settings, r),
                         blackwell_ceiling(gpu), gpu.vendor, sampler_path(settings, gpu, r.rel.key), dequant)


@lru_cache(maxsize=1024)  # pure, of small hashable arguments: a search asks it alike for every GPU type of a batch tier
def profiling_run(spec: ModelSpec, settings: VllmSettings, rel_key: str, tp: int, pp: int, tokens: int, seqs: int,
                  model_dtype: str, quantized: bool, blackwell: bool, vendor: str, sampler: str,
                  dequant: int) -> _ProfilingRun:
    """The >= 0.21 profiling run of ``settings`` (its release line ``rel_key``, TP and PP) with max_num_batched_tokens
    ``tokens`` and max_num_seqs ``seqs`` in ``model_dtype``, on a GPU of ``vendor`` whose default capture sizes reach
    1024 or not (``blackwell``: calibration.blackwell_ceiling) and whose sampler path is ``sampler``
    (calibration.sampler_path); ``dequant``: a plain AWQ / GPTQ kernel's copy (``_dequant``)."""
    graphs = _graph_plan(spec, settings, seqs, tokens, blackwell, quantized)
    runner = model_runner(spec, release_minor(settings.version), quantized)
    moe = moe_workspace_elements(spec, tokens, tp, settings.enable_expert_parallel, rel_key)

    def source(last_stage: bool) -> int:
        # the peak as vLLM's source allocates it (calibration.PROFILING_RUN_CURRENT), with the dummy sampler pass (on
        # the last stage) of the model runner the release starts for the model; the plan charges the larger of it and
        # the fresh compile's copy
        return activation_peak(spec, tokens, min(tokens, seqs), tp, model_dtype, last_stage, PROFILING_RUN_CURRENT,
                               sampler, moe, settings.version, dequant, 0, runner, rel_key)

    def cold(cache: str) -> int:
        # the compile-time peak on the first stage of a start that compiles afresh (compile_cache.py): Inductor's
        # benchmark of the embedding lookup, a random copy of the rank's embedding table; 0 with a warm cache
        return cold_compile_bytes(spec, tp, model_dtype, first_stage=True, compiled=graphs.compiled, cache=cache)

    return _ProfilingRun(
        graphs=graphs, estimate=_graph_estimate(spec, settings, rel_key, tp, seqs, model_dtype, graphs, quantized, vendor),
        runner=runner, last=source(True), earlier=source(False) if pp > 1 else 0, cold=cold(settings.compile_cache),
        fresh=cold("cold"), pinned=pinned_copy_bytes(cold(settings.compile_cache), runner,
                                                     release_minor(settings.version), vendor))


def _graph_estimate(spec: ModelSpec, settings: VllmSettings, rel_key: str, tp: int, seqs: int, model_dtype: str,
                    graphs: GraphPlan, quantized: bool, vendor: str) -> GraphEstimate:
    """vLLM's CUDA-graph estimate (>= 0.21; cudagraph.py), computed whether or not VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS
    applies it (the worker logs it either way), for the mode and capture sizes the compilation flags resolve to
    (``graphs``: compile_flags.graph_plan)."""
    query = 1 + (settings.num_speculative_tokens if settings.speculative_method else 0)
    piecewise, full = graph_sizes(graphs.mode, graphs.sizes, seqs, query)
    largest = max(piecewise[-1:] + full[-1:], default=0)
    first = 0
    if largest:
        moe = moe_workspace_elements(spec, largest, tp, settings.enable_expert_parallel, rel_key)
        first = forward_bytes(spec, largest, tp, model_dtype, moe)
    return estimate(spec, piecewise, full, first, settings.version, quantized, vendor)


def _graph_plan(spec: ModelSpec, settings: VllmSettings, seqs: int, tokens: int, blackwell: bool,
                quantized: bool) -> GraphPlan:
    """The CUDA-graph mode and capture sizes vLLM resolves the command's flags to (compile_flags.py)."""
    return graph_plan(settings.compile, settings.version, enforce_eager=settings.enforce_eager, max_num_seqs=seqs,
                      max_num_tokens=tokens, blackwell=blackwell,
                      runner=model_runner(spec, release_minor(settings.version), quantized),
                      performance_mode=settings.performance_mode)


def _compile_note(spec: ModelSpec, gpu: GPU, settings: VllmSettings, r: _Resolved, notes: list[str]) -> None:
    """What the plan says of the compilation and CUDA-graph flags read (``explain``): the graphs they resolve to from
    0.21, or, before, that the graphs come after the KV cache is sized. From 0.12 the sizes are checked as vLLM checks
    them (the same _set_cudagraph_sizes assertions) whatever the release line."""
    flags = settings.compile
    if not flags.given:
        return
    read = describe(flags, settings.version)
    shown = settings.version if version_minor(settings.version) is not None else "0.33"
    graphs = (_graph_plan(spec, settings, r.seqs, r.tokens, blackwell_ceiling(gpu), _quantized(settings, r))
              if release_minor(settings.version) >= 12 else None)
    if graphs is None or not r.rel.cudagraph_subtracted:
        notes.append(f"compilation flags read ({read}): vLLM {shown} captures its CUDA graphs after it sizes the KV "
                     "cache (gpu_model_runner.py capture_model), so they change no figure here; the graphs' memory "
                     "comes out of what the KV cache leaves")
        return
    sizes = graphs.sizes
    span = f"{len(sizes)} capture size{'s' if len(sizes) != 1 else ''} ({sizes[0]}-{sizes[-1]})" if sizes else "no CUDA graphs"
    notes.append(f"compilation flags read ({read}): vLLM {shown} runs cudagraph_mode {graphs.mode}, torch.compile "
                 f"{'on' if graphs.compiled else 'off'}, {span}" + (f" [{graphs.why}]" if graphs.why else "")
                 + ("; torch.compile off leaves kvbudget's activation peak as it is (as with --enforce-eager)"
                    if not graphs.compiled else ""))


def _pinned_copy(run: _ProfilingRun, settings: VllmSettings, gpu: GPU, cold: int) -> int:
    """The fresh compile's random embedding table (``cold``: the run's) still counted as consumed after the
    profiling run (compile_cache.pinned_copy_bytes: the V2 model runner without the allocator split limit of 0.31)."""
    return pinned_copy_bytes(cold, run.runner, release_minor(settings.version), gpu.vendor)


def _compile_cache_note(run: _ProfilingRun, settings: VllmSettings, gpu: GPU, notes: list[str]) -> None:
    """What the torch.compile cache changes (compile_cache.py): a first start compiles afresh, a later one with the
    same model, flags and release loads the compiled graph from ~/.cache/vllm/torch_compile_cache."""
    cold, source = run.fresh, run.last
    pinned = _pinned_copy(run, settings, gpu, cold)
    if cold <= source and not pinned:  # nothing to say: no compile, no embedding in the graph, or the run holds more
        return
    gap = f"{(max(cold - source, 0) + pinned) / GiB:.2f} GiB"
    if settings.compile_cache == "cold":
        kept = (f", and this release's {run.runner.upper()} "
                "model runner keeps its freed segment pinned past the run (no allocator split limit before vLLM 0.31 "
                "on CUDA), so it is counted again as consumed memory" if pinned else "")
        notes.append(f"torch.compile: a first start compiles afresh, inside the profiling run, and Inductor's benchmark "
                     f"of the embedding lookup holds a {cold / GiB:.2f} GiB random copy of the embedding table there"
                     f"{kept}; a start that loads the compiled graph from vLLM's cache (its log: 'Directly load the compiled graph') "
                     f"has {gap} more KV cache (--vllm-compile-cache warm)")
    else:
        notes.append(f"torch.compile: the compiled graph assumed loaded from vLLM's cache; a start that compiles afresh "
                     f"(the first with this model, flags and release) has {gap} less KV cache (--vllm-compile-cache "
                     "cold)")


def _activation_band(gpu: GPU, settings: VllmSettings, r: _Resolved, run: _ProfilingRun | None, band: str) -> str:
    """The activation figure's provenance note: the sampler path of 0.8-0.20, the source's own figure >= 0.21."""
    if r.rel.key == "v1" and not r.rel.blocks_log_line:
        path = "PyTorch-native sort" if sampler_path(settings, gpu, r.rel.key) == "native" else "FlashInfer"
        return f"{band}; the sampler's part from vLLM's source, {path} path"
    if run is not None:
        source, cold = run.last, run.cold
        text = (f"{band}; vLLM's source: {source / GiB:.2f} GiB allocated in the profiling run (the forward, then the "
                f"{run.runner.upper()} model runner's dummy sampler)")
        if cold:
            text += (f", or {cold / GiB:.2f} GiB if larger: torch.compile compiling afresh inside it (Inductor's "
                     "benchmark of the embedding lookup on a random copy of the embedding table)")
        return text
    return band


def _quantized(settings: VllmSettings, r: _Resolved) -> bool:
    """Whether the weights are quantized (which model runner a 0.22-0.23 release starts depends on it)."""
    return r.fmt.name not in ("bf16", "fp16", "fp32") or settings.quantization is not None


def _graph_band(g: GraphEstimate) -> str:
    """The CUDA-graph figure's provenance: what is counted, and how."""
    return (f"vLLM's estimate (profile_cudagraph_memory, {g.runner.upper()} model runner): {g.piecewise} PIECEWISE "
            f"(largest {g.largest_piecewise}) + {g.full} FULL graphs; first capture = the largest size's forward twice "
            f"({g.first_capture / MiB:.0f} MiB), each later graph {g.per_graph / MiB:.2f} MiB (fitted on two logs)")


def _dequant(spec: ModelSpec, gpu: GPU, settings: VllmSettings, r: _Resolved) -> int:
    """Bytes the plain AWQ or GPTQ kernel adds to the profiling run's peak (quant.py): the 16-bit copy of the
    largest quantized weight on a rank; 0 with Marlin or other formats."""
    kernel = int4_kernel(r.fmt, settings.quantization, gpu, settings.version)
    return dequant_bytes(spec, r.fmt, kernel, r.tp, r.tokens)


def _blocks(per_stage: list[_StageMemory], settings: VllmSettings, notes: list[str]) -> tuple[int, int, int]:
    """Step 3, blocks (kv_cache_utils.py get_num_blocks on each worker; get_kv_cache_configs sizes every
    rank's pool to the smallest; may_override_num_blocks applies --num-gpu-blocks-override): the binding
    stage, its KV cache memory (the override's blocks x bytes per block, when given) and the blocks of the
    pool (never negative)."""
    blocks = [(avail // bpb if bpb else 1) for _, bpb, _, _, _, avail in per_stage]
    k = min(range(len(per_stage)), key=lambda j: blocks[j])
    _, bpb, _, _, _, available = per_stage[k]
    if settings.num_gpu_blocks_override is not None and bpb:
        notes.append(f"Overriding num_gpu_blocks={max(blocks[k], 0)} with num_gpu_blocks_override={settings.num_gpu_blocks_override}")
        available = settings.num_gpu_blocks_override * bpb
        blocks = [settings.num_gpu_blocks_override] * len(blocks)
    return k, available, max(min(blocks), 0)


def _checks(r: _Resolved, settings: VllmSettings, layout: KVLayout, per_stage: list[_StageMemory], non_torch: int,
            total: int, bpb: int, available: int, num_blocks: int, per_request: Callable[[int], int],
            notes: list[str]) -> tuple[str | None, int, int | None, int | None, int, int]:
    """Step 4, checks: weights that do not fit the device fail while the model loads (before any KV cache
    is sized); else kv_cache_utils.py check_enough_kv_cache_memory (no memory at all; one request of
    max_model_len must fit, one block being the null block of v1/core/block_pool.py; V0 has no null block)
    with estimate_max_model_len's suggestion, or, for --max-model-len auto, _auto_fit_max_model_len. The
    error vLLM stops with (None: it starts), max_model_len, the estimated max_model_len, the weights that
    did not load, and the KV cache memory and blocks, both none after a failed load."""
    max_len = r.max_len
    error: str | None = None
    load_oom = None if settings.kv_cache_memory_bytes is not None else next(
        (w for _, _, w, _, _, _ in per_stage if w + non_torch > total), None)
    estimated: int | None = None
    if load_oom is not None:
        # The weights do not fit in the device at all: torch raises OutOfMemoryError while the model
        # loads (v1/worker/gpu_model_runner.py load_model), before any KV cache is sized.
        error = (f"CUDA out of memory while loading the model: {_gib(load_oom)} GiB of weights per GPU + "
                 f"{_gib(non_torch)} GiB CUDA context > {_gib(total)} GiB")
        available = min(available, 0)
        num_blocks = 0
    elif layout.groups and r.auto_len and available <= 0:
        error = _NO_MEMORY
    elif layout.groups:
        check, fits = _check_memory(r.rel, bpb, available, per_request)
        if r.auto_len:
            best = _largest_len(fits, r.derived_len)
            if best == 0:
                error = "Cannot auto-fit max_model_len: not enough GPU memory available to serve even a single token."
            else:
                if best < max_len:
                    notes.append(f"Auto-fit max_model_len: reduced from {max_len} to {best} to fit in available KV "
                                 f"cache memory ({_gib(check)} GiB GPU)")
                max_len = best
        else:
            kind, estimated = _enough_memory(r.rel, bpb, available, max_len, per_request)
            if kind == "too_small" and r.rel.v0_blocks:
                # V0 (worker/worker.py raise_if_cache_size_invalid, 0.6-0.10.1): max_model_len against the
                # tokens of the blocks, with no estimate of the length that would fit
                error = (f"The model's max seq len ({max_len}) is larger than the maximum number of tokens that can "
                         f"be stored in KV cache ({r.block_size * num_blocks}). Try increasing "
                         "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.")
            elif kind == "too_small":
                need = bpb * per_request(max_len)
                est = (f"Based on the available memory, the estimated maximum model length is {estimated}. "
                       if estimated else "")
                error = (f"To serve at least one request with the model's max seq len ({max_len}), ({_gib(need)} GiB KV "
                         f"cache is needed, which is larger than the available KV cache memory ({_gib(check)} GiB). "
                         f"{est}Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
                         "initializing the engine.")
            elif kind == "no_memory":
                error = _NO_MEMORY
    return error, max_len, estimated, load_oom, available, num_blocks


_NO_MEMORY = ("No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing "
              "the engine.")


def _check_memory(rel: Release, bpb: int, available: int,
                  per_request: Callable[[int], int]) -> tuple[int, Callable[[int], bool]]:
    """The memory the admission check plans against (get_kv_cache_configs reserves the null block that
    v1/core/block_pool.py holds back; V0 has none) and whether one request of a length fits in it
    (_max_memory_usage_bytes_from_groups: bytes per block x the blocks of every group)."""
    check = available if rel.v0_blocks else available - bpb

    def fits(length: int) -> bool:
        return bpb * per_request(length) <= check

    return check, fits


def _enough_memory(rel: Release, bpb: int, available: int, max_len: int,
                   per_request: Callable[[int], int]) -> tuple[str | None, int | None]:
    """kv_cache_planning.py _check_enough_kv_cache_memory for a fixed max_model_len: ``"no_memory"`` (none
    at all), ``"too_small"`` with _estimate_max_model_len_from_groups' binary search (0: not one token),
    or ``None`` when one request of max_model_len fits. "None at all" is judged on the memory left once the
    null block is reserved: get_kv_cache_configs passes ``available - bytes per block`` to
    _check_enough_kv_cache_memory, whose first test is ``available_memory <= 0``, so a pool of at most one
    block has no memory rather than too little."""
    check, fits = _check_memory(rel, bpb, available, per_request)
    if check <= 0:
        return "no_memory", None
    if not fits(max_len):
        return "too_small", _largest_len(fits, max_len)
    return None, None


@record
class KVPoolFit:
    """What vLLM's planner makes of one rank's KV cache memory for a fixed max_model_len: the blocks of the
    pool, the error it stops with (``"no_memory"``, ``"too_small"``; None: it starts), the estimated maximum
    model length of a too-small pool (0: none given), the "GPU KV cache size" tokens and the maximum
    concurrency."""

    num_blocks: int
    error: str | None
    estimated_max_model_len: int
    kv_cache_tokens: int
    max_concurrency: float


def kv_pool_fit(layout: KVLayout, bytes_per_block: int, available: int, max_len: int, in_flight: int,
                mamba_blocks: int, version: str = "current") -> KVPoolFit:
    """``plan``'s steps 3-5 (blocks, checks, capacity) on ``available`` KV cache bytes given directly, for one
    pipeline stage and no block override: what tests/test_vllm_oracle.py compares with vLLM's own planner."""
    rel = release(version)

    def per_request(length: int) -> int:
        return _request_blocks(layout.groups, layout.block_size, in_flight, mamba_blocks, length)

    num_blocks = max(available // bytes_per_block if bytes_per_block else 1, 0)
    if not layout.groups:
        return KVPoolFit(num_blocks, None, 0, 0, 0.0)
    kind, estimated = _enough_memory(rel, bytes_per_block, available, max_len, per_request)
    if kind is not None:
        return KVPoolFit(0, kind, estimated or 0, 0, 0.0)
    _, concurrency, tokens = _capacity(rel, layout, num_blocks, max_len, per_request)
    return KVPoolFit(num_blocks, None, 0, tokens, concurrency)


def _capacity(rel: Release, layout: KVLayout, num_blocks: int, max_len: int,
              per_request: Callable[[int], int], dcp: int = 1) -> tuple[int, float, int]:
    """Step 5, capacity (kv_cache_utils.py get_max_concurrency_for_kv_cache_config, and the token count
    _report_kv_cache_config prints): the blocks one request of max_model_len takes, the requests of that
    length the pool holds at once, and the pool's tokens (0.8-0.20 printed blocks // groups x block size;
    V0, blocks x block size)."""
    per_req = per_request(max_len) if layout.groups else 0
    concurrency = num_blocks / per_req if per_req else 0.0
    kv_tokens = int(concurrency * max_len)
    if rel.key == "v1" and layout.groups:
        # 0.8-0.20 printed num_blocks // num_groups x block_size (v1/core/kv_cache_utils.py of those releases)
        kv_tokens = num_blocks // len(layout.groups) * layout.block_size * dcp  # x dcp_world_size (0.10.2-0.20)
    if rel.v0_blocks or rel.blocks_log_line:  # (the 0.7 V1 alpha: num_blocks x block_size / max_model_len as well)
        kv_tokens = num_blocks * layout.block_size
        concurrency = kv_tokens / max_len
    return per_req, concurrency, kv_tokens


def _draft(spec: ModelSpec, settings: VllmSettings, notes: list[str]) -> ModelSpec:
    """The model vLLM loads and caches: with ``--speculative-config`` method mtp, the target plus its own MTP
    layers (speculative.py ``with_mtp``); with an EAGLE / EAGLE-3 head or a draft model whose config.json was
    read, the target plus that draft (``with_draft``). V1 engine lines only (V0 ran drafts in a worker of its own)."""
    draft = settings.speculative_draft
    if settings.speculative_method != "mtp" and draft is None:
        return spec
    if settings_release(settings).key == "v0":
        notes.append("speculative draft on the V0 engine: not modelled (its draft worker keeps a cache of its own)")
        return spec
    from .speculative import with_draft, with_mtp

    if draft is not None:
        if settings.pipeline_parallel_size > 1 and draft.model is None:
            notes.append("EAGLE head under pipeline parallelism: vLLM shares the target's embedding only at PP 1 "
                         "(llm_base_proposer.py _maybe_share_embeddings); the head's own copy is not counted")
        notes.append("speculative draft: its weights are in 'Model loading took' (loaded in the runner's load_model), "
                     "its attention layers' KV pages join the pool, and the profiling run and CUDA-graph capture run "
                     "it too (gpu_model_runner.py _dummy_run: drafter.dummy_run)")
        drafted = with_draft(spec, draft)
        notes.append(drafted.notes[-1])  # what the draft adds, as with_draft describes it
        return drafted
    return with_mtp(spec)


def _v0_fallback(settings: VllmSettings, gpu: GPU, notes: list[str]) -> VllmSettings:
    """vLLM 0.8.0 - 0.10.1 run their V0 engine on a GPU below compute capability 8.0 (engine/arg_utils.py
    ``_is_v1_supported_oracle``: "Compute Capability < 8.0 is not supported by the V1 Engine. Falling back to V0.";
    the check is gone from 0.10.2): a T4, a V100 or an RTX 20x0 is planned with V0's accounting there."""
    release_number = minor_patch(settings.version)
    if release_number is None or not (8, 0) <= release_number <= (10, 1):
        return settings
    cap = capability(gpu)
    if gpu.vendor != "nvidia" or cap is None or cap >= 8.0:
        return settings
    notes.append(f"vLLM {settings.version} falls back to its V0 engine on {gpu.name} (compute capability {cap} < 8.0): "
                 "V0's memory accounting")
    return replace(settings, version="v0")


def plan(spec: ModelSpec, gpu: GPU, settings: VllmSettings, *, explained: bool = True) -> VllmPlan:
    """Predict vLLM's start-up memory figures for ``spec`` on ``gpu`` with ``settings``: the settings as vLLM
    fills them in, what each worker has for its KV cache, then kv_cache_utils.py's steps (groups -> page
    size -> blocks -> checks -> capacity) and the lines vLLM logs. ``explained=False``: the same figures without
    their provenance, notes and log lines (all empty), for a search that reads only the figures."""
    notes: list[str] = []
    settings = _v0_fallback(settings, gpu, notes)
    spec = _draft(spec, settings, notes)
    r = _resolve(spec, gpu, settings, notes)
    _compile_note(spec, gpu, settings, r, notes)
    rel, util = r.rel, r.util
    layout = _groups(spec, r, notes)
    block_size = layout.block_size
    block_bytes = _page_bytes(spec, layout, r)

    dcp = settings.decode_context_parallel_size

    def per_request(length: int) -> int:
        return _request_blocks(layout.groups, block_size, r.in_flight, r.mamba_blocks, length, dcp)

    dequant = _dequant(spec, gpu, settings, r)
    encoder = profile_pass(spec, settings, rel, r.max_len, r.tokens, r.seqs, r.tp, r.model_dtype)
    lora = _lora(spec, settings, r)
    eplb = _eplb(spec, settings, r)
    extras, extra_unmodelled = _extras(spec, settings, r, notes)
    run = _profiling_run(spec, gpu, settings, r, dequant)
    segments = _segments(spec, settings, r)
    total, requested, non_torch, per_stage = _available(spec, gpu, settings, r, block_bytes, dequant, segments, run,
                                                        encoder, lora, eplb, extras)
    if explained:
        _memory_notes(spec, gpu, settings, r, run, segments, dequant, notes)
    k, available, num_blocks = _blocks(per_stage, settings, notes)
    if explained and settings.site and site_bytes(settings.site, gpu.name, r.rel.key, r.tp * r.pp)[1] is None:
        notes.append(f"the site profile has no run on {gpu.name} with {r.rel.label}: kvbudget's own model applies")
    st, bpb, weights, act, graphs, _ = per_stage[k]
    cudagraph = run.estimate if run is not None else None
    lora_bytes = lora.per_stage[st.index] if lora is not None else 0
    if lora is not None and explained:
        from .lora import note as lora_note

        notes.append(lora_note(lora, settings, lora_bytes))
    error, max_len, estimated, load_oom, available, num_blocks = _checks(
        r, settings, layout, per_stage, non_torch, total, bpb, available, num_blocks, per_request, notes)
    if extras.ipc and load_oom is None and available <= 0:  # the carve-out leaves nothing: vLLM stops there
        error, num_blocks = ipc_error(extras.ipc, available + extras.ipc), 0
    per_req, concurrency, kv_tokens = _capacity(rel, layout, num_blocks, max_len, per_request, dcp)
    lines: tuple[str, ...] = ()
    if explained:
        lines = _log_lines(rel, weights, available + extras.ipc, num_blocks, kv_tokens, concurrency, max_len, error,
                           total, util)
        if load_oom is not None:
            lines = (f"torch.OutOfMemoryError: {error}",)
    provenance: tuple[tuple[str, Figure], ...] = ()
    if explained:  # the notes, the provenance and what is not modelled: what a search does not read
        band = ("checked on the published start-up logs of tests/data/vllm_logs: the KV tokens' median error and worst "
                "case per split are in docs/validation.md")
        unmodelled = list(settings.unmodelled)
        if gpu.unified_memory and settings.kv_cache_memory_bytes is None:
            from ...hardware import unified_note

            notes.append(unified_note(gpu))
            unmodelled.append("the host's use of the unified memory")
        if spec.params_by_role().get("vision") and rel.key != "v0" and settings.kv_cache_memory_bytes is None:
            _vision_note(spec, settings, encoder, unmodelled, notes)
        if counts_whole_device(rel.key, settings.version) and settings.kv_cache_memory_bytes is None:
            notes.append(f"vLLM {settings.version} counts the CUDA context (everything on the device torch did not allocate) "
                         f"as non-torch memory: {CUDA_CONTEXT_BYTES / GiB:.2f} GiB more than the releases that count the "
                         "increase over the worker's start (0.6.3, 0.6.5-0.8 V0, 0.9.1 on)")
        ranks = r.tp * r.pp
        nccl = _nvswitch_nccl(gpu, settings, r)
        if nccl is not None and settings.kv_cache_memory_bytes is None:
            notes.append(f"NCCL at TP {r.tp} on {gpu.name}'s NVSwitch: {settings.version or 'this release'} runs NCCL "
                         f"{nccl_line(settings.version, settings.nccl_cumem)} with cuMem off, so both communicators (pynccl's and torch's) connect every ring and tree channel "
                         f"and allocate NVLink SHARP buffers at start-up, with the {EAGER_INIT_UNATTRIBUTED / GiB:.2f} GiB a process "
                         f"such a start is measured to hold beyond them: {nccl / GiB:.2f} GiB per rank outside torch, "
                         "counted in the non-torch memory (the chain's first and last ranks hold a little less"
                         + ("; NCCL_NVLS_ENABLE=0 saves the SHARP part)" if settings.nccl_nvls else
                            "; NCCL_NVLS_ENABLE=0: no SHARP buffers)"))
        elif ranks >= 3 and on_nvswitch(gpu.name) and settings.kv_cache_memory_bytes is None:
            # From 0.10.2 vLLM leaves NCCL's cuMem on, so NCCL connects each algorithm's channels and allocates the
            # NVLink SHARP buffers on first use (init.cc runtimeConn): which of them the profiling run's collectives
            # reach is NCCL's tuning choice, not modelled. Eager releases are nccl.py's.
            unmodelled.append(f"NCCL's buffers at {ranks} ranks on NVSwitch")
            at_most = (eager_nvswitch_bytes("0.10.0", r.tp, int(capability(gpu) or 9.0), None, settings.nccl_nvls)
                       if r.pp == 1 else None)
            notes.append(f"NCCL at {ranks} ranks on {gpu.name}'s NVSwitch: this release leaves NCCL's cuMem on, so NCCL "
                         "allocates ring, tree and NVLink SHARP buffers when a collective first uses them; kvbudget charges "
                         f"{NON_TORCH_TP_BYTES / GiB:.2f} GiB (fitted at TP 2)"
                         + (f", up to {at_most / GiB:.2f} GiB if every algorithm is connected" if at_most else "")
                         + " (NCCL_NVLS_ENABLE=0 saves the SHARP part)")
        elif ranks >= 2 and gpu.vendor == "nvidia" and settings.kv_cache_memory_bytes is None and (said := link_note(
                settings.version, ranks, NON_TORCH_TP_BYTES, capability(gpu), rel.key == "v0", settings.nccl_cumem)):
            notes.append(said)
        if eplb is not None:
            from .eplb import note as eplb_note

            notes.append(eplb_note(eplb, st.index, settings))
            if eplb.communicator_unknown:
                unmodelled.append("EPLB's profiling buffer without NIXL")
        if dcp > 1:
            from .context_parallel import note as dcp_note
            from .context_parallel import unsharded

            notes.append(dcp_note(dcp, block_size, max_len, per_request(max_len)))
            if kinds := unsharded(layout.groups):
                unmodelled.append(f"decode context parallelism on {', '.join(kinds)} layers")
        unmodelled += extra_unmodelled
        if unmodelled:  # memory the run spends that kvbudget does not count: the KV figures are an upper bound
            band += (f"; wider here: the memory of {', '.join(unmodelled)} is not modelled and comes out of the "
                     "KV cache (the available KV memory is an upper bound)")
        provenance = (
            ("total_bytes", Figure(total, "exact", gpu.memory_source[:80])),
            ("weights_bytes", Figure(weights, "modelled", "weights from the config and format, + rotary cache")),
            ("non_torch_bytes", Figure(non_torch, "modelled" if nccl is not None and not settings.site else "calibrated",
                                       _site_band(settings, gpu, r) or band)),
            ("activation_bytes", Figure(act, "modelled" if r.rel.key == "current" else "calibrated", _activation_band(gpu, settings, r, run, band))),
            ("cudagraph_bytes", Figure(graphs, "calibrated" if graphs else "exact", _graph_band(cudagraph) if graphs and cudagraph else
                                       (cudagraph.why_none if cudagraph is not None else ""))),
            *((("lora_bytes", Figure(lora_bytes, "exact", f"vLLM 0.{lora.release_minor} lora/layers create_lora_weights: "
                                     f"{settings.max_loras} slot(s) x rank {settings.max_lora_rank}")),) if lora else ()),
            *((("eplb_bytes", Figure(eplb.redundant_weights[st.index] + (eplb.state[st.index] if eplb.state_counted else 0),
                                     "exact", f"vLLM 0.{eplb.release_minor} fused_moe/layer.py + eplb_state.py: "
                                     f"{eplb.local_physical} physical experts per rank of {eplb.physical}")),) if eplb else ()),
            *((("mm_ipc_bytes", Figure(extras.ipc, "exact", "multimodal/gpu_ipc_memory.py reserve_mm_ipc_gpu_memory: "
                                       "int(mm_ipc_gpu_memory_gb x 2^30)")),) if extras.ipc else ()),
            ("available_kv_cache_bytes", Figure(available, "calibrated" if settings.kv_cache_memory_bytes is None else "exact",
                                                band if unmodelled else "")),
            ("bytes_per_block", Figure(bpb, "exact", "pages and groups as v1/core/kv_cache_planning.py")),
            ("num_gpu_blocks", Figure(num_blocks, "calibrated" if settings.num_gpu_blocks_override is None else "exact")),
        )
    return VllmPlan(  # positional, in the fields' order: keywords cost a dict of 47 on every plan of a search
        spec.name, r.params, gpu.name, rel.key, _release_label(rel.label, settings.version), r.tp, r.pp, r.dp, total, util, requested, st.weights_bytes,
        weights, non_torch, act, graphs, available, r.kv_dtype.name, block_size, num_blocks, bpb, per_req, max_len,
        r.auto_len, kv_tokens, concurrency, error is None, error, estimated, r.seqs, r.tokens, layout.groups,
        r.in_flight, r.mamba_blocks, r.derived_len, provenance, lines, tuple(notes) if explained else (),
        r.fmt.describe(), tuple((w, max(num_blocks, 0) * b, a, g) for _, b, w, a, g, _ in per_stage),
        r.tp * r.dp if settings.enable_expert_parallel and spec.num_experts else 1, lora_bytes, cudagraph, dcp,
        (eplb.redundant_weights[st.index] + (eplb.state[st.index] if eplb.state_counted else 0)) if eplb else 0,
        extras.ipc, load_oom is not None
    )


def _memory_notes(spec: ModelSpec, gpu: GPU, settings: VllmSettings, r: _Resolved, run: _ProfilingRun | None,
                  segments: tuple[int, int, bool], dequant: int, notes: list[str]) -> None:
    """What the plan says of the memory it took before the KV cache: the sampler path a release line may run
    either way, the torch.compile cache, the allocator's segments around the weights and a plain AWQ / GPTQ
    kernel's copy."""
    if sampler_may_differ(settings, gpu, r.rel.key) and settings.kv_cache_memory_bytes is None:
        model = ACTIVATION[r.rel.key]
        reqs = min(r.tokens, r.seqs)
        per_entry = (sampler_bytes(model, "native", r.model_dtype, reqs, settings.version)
                     - sampler_bytes(model, "flashinfer", r.model_dtype, reqs, settings.version))
        gap = f"{per_entry * reqs * spec.dims.vocab_size / GiB:.2f} GiB"
        if sampler_path(settings, gpu, r.rel.key) == "native":
            notes.append(f"sampler: PyTorch's sort of the logits assumed (a plain pip install of vLLM before 0.12 has no "
                         f"flashinfer); with FlashInfer's top-k/top-p (vLLM's Docker images, vllm[flashinfer]) the KV "
                         f"cache has {gap} more (a log's 'Using FlashInfer for top-p & top-k sampling' line)")
        else:
            notes.append(f"sampler: FlashInfer's top-k/top-p assumed (vLLM's Docker images, vllm[flashinfer]); without "
                         f"flashinfer vLLM sorts the logits in PyTorch: {gap} less KV cache (a log's 'FlashInfer is not "
                         "available' line)")
    if run is not None and settings.kv_cache_memory_bytes is None:
        _compile_cache_note(run, settings, gpu, notes)
    inside, beside, counted = segments
    if inside + beside >= SEGMENTS_NOTED:
        how = ("counted with the non-torch memory (this release reads the device's free memory)" if counted else
               "not counted by this release (it reads torch's reserved bytes): on the device, outside the budget")
        notes.append(f"weights: PyTorch's caching allocator holds {inside / MiB:.0f} MiB beyond the tensors' bytes in "
                     f"their blocks (the weights figure includes it) and {beside / MiB:.0f} MiB of segments beside "
                     f"them, {how}")
    if dequant and settings.kv_cache_memory_bytes is None:
        from .quant import dequant_note

        notes.append(dequant_note(r.fmt, settings.quantization, gpu, settings.version, dequant))
    if (stand_in := stand_in_note(spec, r.fmt, settings.quantization, r.tp)) is not None:
        notes.append(stand_in)


def _eplb(spec: ModelSpec, settings: VllmSettings, r: _Resolved) -> EplbMemory | None:
    """EPLB's redundant experts and buffers on each pipeline stage's fullest rank (eplb.py); None without EPLB."""
    if not settings.enable_eplb or not spec.num_experts:  # a dense model: vLLM builds no EPLB state
        return None
    from .eplb import eplb_memory

    return eplb_memory(spec, r.fmt, settings, r.tp, r.pp, r.dp)


def _extras(spec: ModelSpec, settings: VllmSettings, r: _Resolved, notes: list[str]) -> tuple[_Extras, list[str]]:
    """The vision tower in data mode, a KV connector and --mm-ipc-gpu-memory-gb (mm_memory.py, kv_connector.py): their
    bytes, with the plan's notes and what is not modelled."""
    tower = connector = ipc = 0
    unknown: list[str] = []
    if mm_memory.data_mode(spec, settings) or (settings.mm_encoder_tp_mode == "data" and spec.vision is not None):
        tower = mm_memory.tower_extra_bytes(spec, r.fmt, r.tp) if mm_memory.data_mode(spec, settings) else 0
        notes.append(mm_memory.tower_note(spec, settings, tower, r.tp))
    if settings.mm_ipc_bytes and spec.vision is not None and r.rel.key == "current":
        ipc = settings.mm_ipc_bytes
        notes.append(f"--mm-ipc-gpu-memory-gb: vLLM takes {ipc / GiB:.2f} GiB from the available KV cache memory after "
                     "logging it, for the API server's decoded frames (the KV cache is sized on the rest)")
    if settings.kv_connector is not None and r.rel.key != "v0":
        kv_layers = [layer for layer in spec.layers if isinstance(layer, (FullAttention, MLA))]
        token_bytes = kv_layers[0].bytes_per_token(r.kv_dtype.element, r.tp) if kv_layers else 0
        buffer = kv_connector.lmcache_buffer(max(pp_partition(spec.num_layers, r.pp)), token_bytes)
        counted = counts_segments(r.rel.key, settings.version)
        connector, said, unknown_said = kv_connector.effect(settings, buffer, counted,
                                                             len({type(layer) for layer in spec.layers}) > 1)
        notes.append(said)
        if unknown_said:
            unknown.append(unknown_said)
    return (_Extras(tower, connector, ipc) if tower or connector or ipc else _NO_EXTRAS), unknown


def _lora(spec: ModelSpec, settings: VllmSettings, r: _Resolved) -> LoraMemory | None:
    """The LoRA adapter slots of each pipeline stage on one TP rank (lora.py), in the LoRA dtype (auto: the model's)."""
    if not settings.enable_lora:
        return None
    from .lora import lora_memory

    name = settings.lora_dtype.strip().lower().removeprefix("torch.")
    nbytes = element_type(r.model_dtype if name == "auto" else name).nbytes(1)
    ep = r.tp * r.dp if settings.enable_expert_parallel and spec.num_experts else 1
    layers = tuple((st.first_layer, st.num_layers) for st in stages(spec, r.fmt, r.tp, r.pp, r.dp,
                                                                     settings.enable_expert_parallel))
    return lora_memory(spec, settings, r.rel, layers, r.tp, ep, r.tokens, r.seqs, nbytes)


def _vision_note(spec: ModelSpec, settings: VllmSettings, encoder: EncoderPass | None, unmodelled: list[str],
                 notes: list[str]) -> None:
    """What the plan says of the vision encoder's profiling pass (gpu_model_runner.py profile_run): its figure, why
    there is none, or, for a tower kvbudget does not model, a warning and a wider band."""
    from .encoder_profile import PROCESSOR_PIXELS, note

    vision = spec.vision
    if encoder is not None and vision is not None:
        notes.append(note(encoder, vision))
    elif vision is not None and vision.kind in PROCESSOR_PIXELS:
        why = ("--skip-mm-profiling: vLLM logs 'Skipping memory profiling for multimodal encoder and encoder cache.'"
               if settings.skip_mm_profiling else "every modality's limit is 0 (--limit-mm-per-prompt / --language-model-only)")
        notes.append(f"vision encoder: no profiling pass ({why}); an image or video served later needs memory the KV "
                     "cache did not leave")
    else:
        # gpu_model_runner.py profile_run: the encoder runs on its largest dummy input (the encoder cache budget) and its
        # outputs are held through the dummy forward; kvbudget counts this tower's weights, not that pass
        unmodelled.append("the vision encoder's profiling pass")
        notes.append("vision encoder: vLLM's profiling run also encodes its largest dummy image or video (the log's "
                     "'Encoder cache will be initialized with a budget of N tokens') and holds the output; kvbudget models "
                     "that pass for the Qwen2.5-VL and Qwen3-VL towers only, so here the KV figures are an upper bound "
                     "(--limit-mm-per-prompt with 0 items skips the pass)")


def request_blocks(p: VllmPlan, length: int) -> int:
    """Blocks one request of ``length`` tokens takes from the pool of plan ``p``."""
    return _request_blocks(p.groups, p.block_size, p.in_flight_tokens, p.mamba_blocks, length, p.dcp)


def held(p: VllmPlan) -> int:
    """The most requests of ``p.max_model_len`` tokens the pool holds at once (0: it holds none, or vLLM stops)."""
    if not p.groups or not p.starts:
        return 0
    return p.num_gpu_blocks // max(request_blocks(p, p.max_model_len), 1)


def capacity(p: VllmPlan, batch: int) -> tuple[int, int]:
    """The most requests of ``p.max_model_len`` tokens the pool holds at once (``held``), and the longest
    length (up to what the model takes) at which ``batch`` requests fit in the pool."""
    if not p.groups or not p.starts:
        return 0, 0
    most = held(p)
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
    elif rel.blocks_log_line:
        if error is None:
            lines += [f"# GPU blocks: {blocks}", f"Maximum concurrency for {max_len} tokens per request: {conc:.2f}x"]
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
    from ..base import Part, engine_plan

    tags = {name: f.provenance for name, f in p.provenance}
    parts = tuple(Part(name, max(b, 0), tags.get(key, "modelled")) for name, b, key in (
        ("model loading", p.model_loading_bytes, "weights_bytes"), ("non-torch memory", p.non_torch_bytes, "non_torch_bytes"),
        ("activation peak", p.activation_bytes, "activation_bytes"), ("CUDA graphs", p.cudagraph_bytes, "cudagraph_bytes"),
        ("KV cache", p.available_kv_cache_bytes, "available_kv_cache_bytes")))
    return engine_plan(
        "vllm", p.weights_bytes, p.available_kv_cache_bytes, p.kv_cache_tokens, p.max_concurrency, p.max_model_len,
        p.starts, f"{p.utilization:g} x total memory, minus the profiled weights, activations and CUDA graphs",
        f"blocks of {p.block_size} tokens", p.error, p.log_lines, cap=p.max_num_seqs, blocks=p.num_gpu_blocks,
        block_tokens=p.block_size, parts=parts, step_tokens=p.max_num_batched_tokens,
        kv_groups=tuple((g.spec.kind, getattr(g.spec, "window", 0) or getattr(g.spec, "chunk", 0)) for g in p.groups),
    )


def _site_band(settings: VllmSettings, gpu: GPU, r: _Resolved) -> str:
    """The provenance of a non-torch figure that a site profile moved: which logs, and how far they spread."""
    from ..site import term_said

    term = site_bytes(settings.site, gpu.name, r.rel.key, r.tp * r.pp)[1]
    return "" if term is None else term_said(term)


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
    s, p, pool = cap_raised_to_load(
        replica_settings(version, context, tp, pp, weights, kv, fraction),
        lambda s: plan(spec, gpu, s, explained=False), held, lambda p: p.max_num_seqs,
        "max_num_seqs", concurrency)
    reason = "" if p.starts else _short(p, gpu)
    return Replica(min(pool, p.max_num_seqs), reason, p.starts, p.weights_bytes, p.available_kv_cache_bytes,
                   p.kv_cache_tokens, p.max_num_seqs, s, p.utilization)


@lru_cache(maxsize=1024)  # one record per layout and precision of a search, shared by every GPU type (its hash is kept)
def replica_settings(version: str, context: int, tp: int, pp: int, weights: str, kv: str,
                     fraction: float | None) -> VllmSettings:
    """The settings of a serving replica: vLLM's defaults but for the release, max_model_len, the layout, the weights
    (``auto``: the checkpoint's), the KV-cache dtype and the memory fraction (None: the release's)."""
    return VllmSettings(version=version, max_model_len=context, tensor_parallel_size=tp, pipeline_parallel_size=pp,
                        quantization=None if weights == "auto" else weights, kv_cache_dtype=kv,
                        gpu_memory_utilization=fraction)


def _release_label(label: str, version: str | None) -> str:
    """The release a plan is of: the one the user or the log named (``vLLM 0.17.1``), with the line of kvbudget's
    rules it is planned by; the line alone where no release was named."""
    if version is None or version_minor(version) is None:
        return label
    return f"vLLM {version.strip().lstrip('vV')}, by kvbudget's rules for {label.removeprefix('vLLM ')}"
