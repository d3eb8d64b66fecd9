"""What SGLang's tensor-parallel group holds on each GPU before it measures the free memory its pool is sized from.

``ModelRunner.init_torch_distributed`` (sglang 0.4.3.post4, 0.4.9.post2 and 0.5.4,
``srt/model_executor/model_runner.py``) builds the TP group (``srt/distributed/parallel_state.py:
GroupCoordinator``) and only then takes ``min_per_gpu_memory``, the smallest free memory over the group (0.5.23:
``distributed/bootstrap.py: measure_pre_model_load_memory``, "after parallel initialization and before allocating
model weights"): the "free before loading" that the pool formula multiplies by ``1 - mem_fraction_static``.
So every byte the group holds lowers the pool by ``mem_fraction_static`` of it. The group holds:

- one NCCL communicator, pynccl's (``PyNcclCommunicator``: ``ncclCommInitRank`` and a one-element all-reduce).
  torch's own NCCL communicator is created on its first collective: after the pool from 0.4.6.post5, after the
  measurement but before loading up to 0.4.6 (below); no other group of a plain
  TP server has more than one rank (``_MOE_EP`` / ``_MOE_TP`` are the TP group itself or single ranks, the
  attention-TP group has no pynccl unless SYNC_TOKEN_IDS_ACROSS_TP is set: 0.5.4's ``initialize_model_parallel``
  and ``layers/dp_attention.py``).
  ``entrypoints/engine.py: _set_envs_and_config`` sets ``NCCL_CUMEM_ENABLE=0`` (0.4.x always; 0.5.4 unless
  --enable-symm-mem; 0.5.23 unless the environment sets it, or symmetric memory or the KV-shard gather is on) and ``NCCL_NVLS_ENABLE`` to
  --enable-nccl-nvls (off by default). Without cuMem NCCL connects the ring and tree of every channel at
  ``ncclCommInitRank``, and without NVLS there are no SHARP buffers: the connections of ``vllm/nccl.py`` (NCCL's
  own sources), once. The published 8 x H200 0.5.4 log (sgl-project/sglang PR #11716) shows it rank by rank:
  "Init torch distributed ends. mem usage" 2.01 GB on TP1-TP6, 1.96 on TP0 (the chain's root, 24 channels x 2 MiB
  less) and 1.77 on TP7 (the leaf, 24 x 10 MiB less): one communicator's worth, where vLLM's two show twice that.
- custom all-reduce (``device_communicators/custom_all_reduce.py: CustomAllreduce.__init__``, on a full-NVLink
  group): ``meta_size() + max_size`` and ``max_size`` bytes cudaMalloc'd (vLLM's ``CUSTOM_ALL_REDUCE``, 18 MiB at
  the 8 MiB ``_MAX_CAR_SIZE``) and a ``rank_data`` torch tensor: 8 MiB in 0.4.3.post4 and 0.4.9.post2,
  ``max_size`` (8 MiB) in 0.5.4. 0.5.23's ``CustomAllReduceV2`` (``custom_all_reduce_v2.py``, one torch
  symmetric-memory workspace of 2 x ranks push slots and a pull buffer capped at 16 MiB) is 23 MiB at 4 ranks
  and 18 MiB at 8 on sm90 (``configs/custom_all_reduce_v2.py: _sm90_configs``): kvbudget charges the legacy
  26 MiB for both lines (a difference under 0.01 GiB).

- more, on every rank alike, than the source accounts for: the published 8 x H200 0.5.4 log's middle ranks print
  2.01 GB for "Init torch distributed ends. mem usage", of which pynccl's connections (576 MiB) and the 0.5.4
  piecewise-graph custom all-reduce (2 MiB-granular cudaMalloc of meta_size() + 256 MiB, 256 MiB, and a 256 MiB
  rank_data tensor: 770 MiB) make 1346 MiB: 712 MiB remain, and the root and leaf ranks differ from the middle
  ones by one communicator's tree halves only, so it is no second communicator's connections. Neither SGLang's
  sources (no other pynccl or custom all-reduce group in a plain TP server; the free-memory minimum goes over the
  gloo group from 0.4.6.post5) nor NCCL's buffer sizes name it: ``INIT_UNATTRIBUTED`` charges those 712 MiB,
  fitted on that one log, wherever the communicator is modelled. vLLM's eager NCCL start on NVSwitch shows the same
  amount once per process (vllm/nccl.py ``EAGER_INIT_UNATTRIBUTED``, the one constant both engines use).

What happens after the measurement, per release (``utils.py: get_available_gpu_memory(distributed=True)``): up to
0.4.6 the smallest free memory over the group is found with ``torch.distributed.all_reduce(..., ReduceOp.MIN)`` on a
CUDA tensor of the default (NCCL) group, the first collective of torch's own communicator over the whole group:
its connections are made after this rank read its free memory, so they lower the free memory after loading (and
"Load weight begin. avail mem") but not the "free before loading" the pool formula multiplies
(``torch_communicator_bytes``; kvbudget's 0.4 line, up to 0.4.7, of which 0.4.6.post5 and 0.4.7 already reduce over
the gloo ``cpu_group`` as every later release does).

Not modelled: the 256 MiB ``max_size`` 0.5.4 gives custom all-reduce under --enable-piecewise-cuda-graph (three
buffers: 0.75 GiB more; 0.5.3 and 0.5.23 do not), --enable-nccl-nvls and --enable-symm-mem, pipeline parallelism
(a PP group and its communicator), --ep-size below --tp (expert groups with their own communicators), PCIe
boards (NCCL's channels and transport there are not read from its sources: the 4 x L4 0.4.3.post4 log prints
0.13 GB for the whole init, torch's communicator included) and two ranks (as ``vllm/nccl.py``, three or more).
"""

from __future__ import annotations

from ...units import MiB
from ..vllm.nccl import CUSTOM_ALL_REDUCE, EAGER_INIT_UNATTRIBUTED, connection_bytes, on_nvswitch

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from ...hardware import GPU
    from .settings import SGLangSettings

RANK_DATA = 8 * MiB  # CustomAllreduce.rank_data: 8 MiB (0.4.x), max_size = 8 MiB (0.5.4)
_CA_WORLD_SIZES = (2, 4, 6, 8)  # CustomAllreduce._SUPPORTED_WORLD_SIZES
# Fitted: the 8 x H200 0.5.4 log's 2.01 GB "Init torch distributed ends. mem usage" on its middle ranks less the
# 576 MiB of pynccl's connections and the 770 MiB of its piecewise-graph custom all-reduce (see above)
INIT_UNATTRIBUTED = EAGER_INIT_UNATTRIBUTED


def modelled(gpu: GPU, s: SGLangSettings) -> bool:
    """Whether the TP group's memory is modelled: three or more ranks on an NVSwitch board, one PP stage, and no
    expert group smaller than the TP group."""
    return s.pp == 1 and s.tp >= 3 and on_nvswitch(gpu.name) and not 1 < s.ep_size < s.tp


def communicator_bytes(gpu: GPU, s: SGLangSettings) -> int:
    """NCCL's connections and custom all-reduce's buffers on the binding (middle) rank of the TP group, held
    before SGLang measures the free memory its pool comes from; 0 where this is not modelled (see above)."""
    if not modelled(gpu, s):
        return 0
    ca = CUSTOM_ALL_REDUCE + RANK_DATA if s.tp in _CA_WORLD_SIZES and not s.disable_custom_all_reduce else 0
    return connection_bytes(s.tp) + ca


def unattributed_bytes(gpu: GPU, s: SGLangSettings) -> int:
    """The rest of what a modelled TP group's init takes before the measurement (``INIT_UNATTRIBUTED``); else 0."""
    return INIT_UNATTRIBUTED if modelled(gpu, s) else 0


def torch_communicator_bytes(gpu: GPU, s: SGLangSettings) -> int:
    """torch's NCCL communicator over the group, connected by the free-memory minimum's GPU all-reduce after the
    measurement: the 0.4 line (up to 0.4.6); 0 for later lines and where the group is not modelled."""
    return connection_bytes(s.tp) if s.version == "0.4" and modelled(gpu, s) else 0
