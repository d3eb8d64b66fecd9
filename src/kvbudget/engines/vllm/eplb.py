"""``--enable-eplb``: expert-parallel load balancing's redundant experts and buffers, per release line.

What vLLM does (paths relative to the ``vllm`` package; 0.33.0 unless a release is named):

* Physical experts. model_executor/layers/fused_moe/layer.py ``determine_expert_counts``: the layer holds
  ``global_num_experts = num_experts + num_redundant_experts`` physical experts; fused_moe/expert_map_manager.py
  ``determine_expert_map`` gives each of the EP ranks (DP x TP) ``global // ep`` of them and one more to the first
  ``global % ep`` ranks. Every physical expert is a whole copy of a logical expert's weights (models/deepseek_v2.py
  ``n_physical_experts = n_logical_experts + n_redundant_experts``), so the fullest rank holds
  ``ceil((E + R) / ep)`` experts' weights, in "Model loading took" in every release (the FusedMoE parameters are built
  by the model loader). The same in 0.10.1 (fused_moe/layer.py ``global_num_experts``).
* EPLB's state, distributed/eplb/eplb_state.py (``EplbState.build`` up to 0.11, ``add_model`` from 0.12), per rank,
  for the rank's L MoE layers, E logical and P = E + R physical experts: ``physical_to_logical_map (L, P)`` int64,
  ``logical_to_physical_map (L, E, 1024)`` int64 (MAX_EXPERT_REDUNDANCY 1023 + 1 slots per expert, torch.full of
  an integer), ``logical_replica_count (L, E)`` int64, ``expert_load_pass (L, P)`` int32, ``expert_load_window
  (window_size, L, P)`` int32 (window_size default 1000, config/parallel.py EPLBConfig), ``last_expert_load (L, E)``
  int64; from 0.12 also ``expert_buffer``: ``empty_like`` of one MoE layer's expert weights on the rank (the
  transfer buffer of a rearrangement).
* When: from 0.20 ``add_model`` runs inside load_model's ``DeviceMemoryProfiler`` (v1/worker/gpu_model_runner.py of
  0.20.0-0.33.0), so the state is in "Model loading took". In 0.9.2-0.19 it is built after "Model loading took" and
  before the profiling run's baseline, a window none of those releases' figures count (utils memory_profiling of
  0.10.1: weights from the loading profiler, the torch peak over the profiling run's start): it sits on the device
  outside vLLM's budget and changes no printed figure.
* The profiling run (``_dummy_run(is_profile=True)`` -> ``eplb_step(is_profile=True)`` -> rebalance_execute.py
  ``rearrange_expert_weights_inplace``) reserves the collective's buffers with a dummy all_gather of the first MoE
  layer's experts. Up to 0.11 it first allocates ``expert_weights_buffer`` (one layer's experts) for it; 0.12-0.19
  reuse the state's ``expert_buffer`` (nothing new); from 0.20 it allocates a ``profile_buffer`` of one layer's
  experts when the communicator ``needs_profile_buffer_reservation`` (every backend but NIXL,
  distributed/eplb/eplb_communicator.py). 0.20-0.21 default to pynccl / torch_gloo / torch_nccl; from 0.22 the
  default is NIXL when it is installed, else torch_gloo (config/parallel.py ``__post_init__``): kvbudget cannot know
  which, so an unset communicator there leaves the buffer out and says so. NCCL's own buffers for the all_gather are
  outside torch and not modelled.
* Refusals (config/parallel.py ``_validate_parallel_config``, 0.33.0): EPLB needs ``--enable-expert-parallel``, and
  TP x DP > 1; ``num_redundant_experts`` without EPLB stops vLLM; eplb_state.py asserts at most 1023 redundant
  experts. A model without routed experts starts with EPLB doing nothing (gpu_model_runner.py builds EPLB's state
  for a MixtureOfExperts model only). ``--enable-eplb`` exists from 0.9.2 (engine/arg_utils.py of 0.9.2); ``--num-redundant-experts`` and
  ``--eplb-window-size`` up to 0.11, then ``--eplb-config``'s keys.
"""

from __future__ import annotations

from ..._record import record
from ...model.spec import ModelSpec
from ...model.weights import WeightFormat
from ...parallel import local_experts, stages
from ...units import GiB, InputError, MiB
from .settings import VllmSettings, minor_patch, release_minor

MAX_REDUNDANCY = 1023  # eplb_state.py MAX_EXPERT_REDUNDANCY
COMMUNICATORS = ("torch_nccl", "torch_gloo", "pynccl", "nixl", "torch_xccl")  # config/parallel.py EPLBCommunicatorBackend
_SLOTS = MAX_REDUNDANCY + 1


@record
class EplbMemory:
    """EPLB's memory on one rank of each pipeline stage (bytes) and the counts behind it, for the plan's note."""

    ep: int
    logical: int  # E: the checkpoint's routed experts
    physical: int  # E + R
    local_logical: int  # experts on the fullest rank without redundancy
    local_physical: int  # with it
    redundant_weights: tuple[int, ...]  # per stage: the redundant experts' weights (in "Model loading took")
    state: tuple[int, ...]  # per stage: EPLB's maps, load window and (0.12 on) transfer buffer
    layer_experts: tuple[int, ...]  # per stage: one MoE layer's experts on the rank (a transfer buffer's size)
    profile_buffer: tuple[int, ...]  # per stage: what the profiling run's dummy rearrangement allocates
    state_counted: bool  # the state is in "Model loading took" (0.20 on)
    communicator_unknown: bool  # 0.22 on with no communicator given: NIXL or not decides the profile buffer
    release_minor: int


def check(spec: ModelSpec, settings: VllmSettings) -> None:
    """vLLM's refusals of EPLB's settings (one error line each)."""
    if not settings.enable_eplb:
        if settings.num_redundant_experts:
            raise InputError(f"num_redundant_experts is {settings.num_redundant_experts} but EPLB is not enabled: vLLM "
                             "stops; add --enable-eplb or drop num_redundant_experts")
        return
    number = minor_patch(settings.version)
    if number is not None and number < (9, 2):
        raise InputError(f"--enable-eplb: vLLM {settings.version} has no expert-parallel load balancing (from 0.9.2)")
    if not settings.enable_expert_parallel:
        raise InputError("--enable-eplb needs --enable-expert-parallel (vLLM: 'enable_expert_parallel must be True to "
                         "use EPLB.')")
    if settings.tensor_parallel_size * settings.data_parallel_size <= 1:
        raise InputError("--enable-eplb: vLLM needs tensor or data parallelism for EPLB (got TP=1, DP=1); raise "
                         "--tensor-parallel-size or --data-parallel-size")
    if settings.num_redundant_experts > MAX_REDUNDANCY:
        raise InputError(f"num_redundant_experts {settings.num_redundant_experts}: vLLM allows at most {MAX_REDUNDANCY}")
    if settings.eplb_communicator is not None and settings.eplb_communicator not in COMMUNICATORS:
        raise InputError(f"--eplb-config communicator {settings.eplb_communicator[:40]!r}: vLLM takes one of "
                         f"{', '.join(COMMUNICATORS)}")


def _moe_layers(spec: ModelSpec, first: int, count: int) -> int:
    """The MoE layers (decoder layers with routed experts) among ``count`` layers from ``first``."""
    return sum(1 for block in spec.inventory.layers[first:first + count] if any(t.role == "experts" for t in block))


def state_bytes(layers: int, logical: int, physical: int, window: int) -> int:
    """EPLB's maps and load records for ``layers`` MoE layers (eplb_state.py, 0.33.0), without the transfer buffer."""
    return (layers * physical * 8 + layers * logical * _SLOTS * 8 + layers * logical * 8 + layers * physical * 4
            + window * layers * physical * 4 + layers * logical * 8)


def eplb_memory(spec: ModelSpec, fmt: WeightFormat, settings: VllmSettings, tp: int, pp: int, dp: int) -> EplbMemory:
    """EPLB's bytes on the fullest rank of each pipeline stage (``settings.enable_eplb`` set and checked)."""
    m = release_minor(settings.version)
    ep = tp * dp
    e, r = spec.num_experts, settings.num_redundant_experts
    local, local_p = local_experts(e, ep), local_experts(e + r, ep)
    extra: list[int] = []
    state: list[int] = []
    layer: list[int] = []
    profile: list[int] = []
    comm = settings.eplb_communicator
    unknown = m >= 22 and comm is None
    for st in stages(spec, fmt, tp, pp, dp, True):
        experts = dict(st.weights_by_role).get("experts", 0)
        redundant = experts // local * (local_p - local) if local else 0
        moe = _moe_layers(spec, st.first_layer, st.num_layers)
        one_layer = (experts + redundant) // moe if moe else 0
        extra.append(redundant)
        state.append(state_bytes(moe, e, e + r, settings.eplb_window_size) + (one_layer if m >= 12 else 0))
        layer.append(one_layer)
        if m <= 11 or (m >= 20 and comm != "nixl" and not unknown):
            profile.append(one_layer)  # a fresh buffer of one layer's experts in the profiling run
        else:
            profile.append(0)  # 0.12-0.19 reuse the state's buffer; NIXL (or an unknown backend) allocates none
    return EplbMemory(ep, e, e + r, local, local_p, tuple(extra), tuple(state), tuple(layer), tuple(profile),
                      m >= 20, unknown, m)


def note(mem: EplbMemory, stage: int, settings: VllmSettings) -> str:
    """What the plan says of EPLB on the binding stage."""
    shown = settings.version if minor_patch(settings.version) is not None else f"0.{mem.release_minor}"
    where = ("in 'Model loading took' (built inside load_model's memory profiler)" if mem.state_counted else
             "built after 'Model loading took' and before the profiling run: on the device, outside vLLM's budget, "
             "so no printed figure counts it")
    text = (f"EPLB: {mem.logical} experts + {settings.num_redundant_experts} redundant = {mem.physical} physical over "
            f"EP {mem.ep}: {mem.local_physical} per rank (the fullest) instead of {mem.local_logical}, "
            f"{mem.redundant_weights[stage] / GiB:.2f} GiB more weights in 'Model loading took'; EPLB's maps, "
            f"{settings.eplb_window_size}-step load window"
            + (" and one MoE layer's transfer buffer" if mem.release_minor >= 12 else "")
            + f" take {mem.state[stage] / MiB:.0f} MiB, {where} (vLLM {shown} eplb_state.py)")
    if mem.profile_buffer[stage]:
        text += (f"; the profiling run's dummy rearrangement allocates one MoE layer's experts "
                 f"({mem.profile_buffer[stage] / MiB:.0f} MiB), counted in its peak")
    elif mem.communicator_unknown:
        text += (f"; with vLLM's default communicator (NIXL if installed, else torch_gloo) the profiling run allocates "
                 f"one MoE layer's experts ({mem.layer_experts[stage] / MiB:.0f} MiB) unless NIXL is installed: not "
                 "counted (set --eplb-config '{\"communicator\": ...}' to decide)")
    return text
