"""NCCL's communicator buffers on an NVSwitch board (Hopper, Blackwell) at three or more tensor-parallel ranks.

Up to 0.10.1 vLLM sets ``NCCL_CUMEM_ENABLE=0`` for every worker (worker/worker_base.py in 0.6.x, vllm/__init__.py in
0.7.x, env_override.py in 0.8-0.10.1; 0.10.2 dropped the override). Without cuMem NCCL has no runtime connection
(init.cc of NCCL 2.26: ``runtimeConn = cuMemSupport && NCCL_RUNTIME_CONNECT``), so ``ncclCommInitRank`` connects
the ring and the tree of every channel and allocates the NVLink SHARP (NVLS) buffers at once. vLLM opens two NCCL
communicators over the tensor-parallel group before its memory profile ends: pynccl's (``PyNcclCommunicator``,
at start-up) and torch's process group (its first collective is the logits' all-gather of the profiling run).

Per channel and communicator a middle rank of the chain holds two connections (transport/p2p.cc,
``p2pSendSetup``/``p2pRecvSetup``, each half aligned to ``CUDA_IPC_MIN`` = 2 MiB): the ring's send to the next
rank and receive from the previous one, and the tree's send to its parent and receive from its child. A receive
half holds the LL (512 KiB), LL128 (4.6875 MiB) and Simple (4 MiB) buffers (init.cc ``DEFAULT_*_BUFFSIZE``):
10 MiB aligned; a send half only its header: 2 MiB. 24 channels on 8 x H100 (NCCL's own
"24 coll channels, 24 collnet channels, 16 nvls channels" on such a board). The chain's root and leaf miss one
tree half each (2 and 10 MiB a channel), which is why two published 0.10.0 runs on 8 x H100 show rank 0 with
0.09 GiB and rank 7 with 0.47 GiB more KV memory than ranks 1-6: 2 communicators x 24 channels x 2 / 10 MiB.

NVLS (transport/nvls.cc, ``ncclNvlsBufferSetup``; from three GPUs, on a multicast-capable board): every rank
backs ``channels x 2 x buffer x ranks`` of unicast memory. The buffer per release of NCCL: the Simple buffer
(4 MiB) plus a 2 MiB credit area up to 2.20, a 1 MiB chunk (128 KiB x 8 steps) plus the 2 MiB area in 2.21,
the 1 MiB chunk alone from 2.22; 16 NVLS channels on sm90, 32 on sm100 from 2.26.

Two ranks on an A100 NVSwitch board under NCCL 2.21.5 (vLLM 0.6.4-0.8.x, eager), read but not modelled: 24 ring
channels (search.cc: 12 at 20 GB/s on 12 x 20 GB/s of NVLink; ncclTopoPostset doubles them), each a 6 MiB send half
(sm80 NVLink reads: the Simple buffer sits with the sender) and a 6 MiB receive half, the tree reusing the ring's
connections: 288 MiB per communicator, and torch's process group's first use in V0, the logits' gather, is NCCL
send/receive over 32 more channels of 6 MiB. That is about 0.77 GiB with custom all-reduce's, against the 1.49 GiB
increase the 0.7.2 A100 TP 2 log prints: the source leaves the rest open, so two-GPU groups keep the fitted figure.

Which NCCL each vLLM release runs is the one its pinned torch ships: torch 2.3-2.4 (vLLM 0.4.3-0.6.3) NCCL 2.20.5,
torch 2.5-2.6 (0.6.4-0.8.x) 2.21.5, torch 2.7 (0.9.0-0.10.1) 2.26.2 (the 0.10.0 logs print 'vLLM is using
nccl==2.26.2'), torch 2.8 and later (0.10.2-) 2.27 or later, whose buffers follow 2.26's rules.

Once per process, not per communicator, an eager NCCL start on an NVSwitch board holds about 0.7 GiB more than the
connections and buffers above (``EAGER_INIT_UNATTRIBUTED``). NCCL's buffer sizes do not name it; it is measured, not
derived. Fitted on one log: SGLang 0.5.4 on 8 x H200 (sgl-project/sglang PR #11716), whose middle ranks print 2.01 GB
for "Init torch distributed ends. mem usage", 712 MiB above one communicator's connections and custom all-reduce
(sglang/comms.py). It transfers: on the three vLLM 0.10.0 H100 logs at TP 4 and TP 8 (NCCL 2.26.2, two
communicators, NVLS on, a different engine, GPU and NCCL release), the KV memory predicted without it was 0.68-0.69
GiB too large on each (+1.2 to +1.9% KV tokens), the same amount at 4 and 8 ranks; with it, within 0.02 GiB. The
two-GPU A100 log above leaves 0.72 GiB open in the same way. Band: +-0.05 GiB over those four logs.
"""

from __future__ import annotations

from functools import lru_cache

from ...units import GiB, MiB
from .settings import minor_patch

CHANNELS = 24  # ring/tree channels NCCL builds on an 8-GPU NVSwitch board
COMMUNICATORS = 2  # pynccl's and torch's process group over the TP group
_SEND_HALF = 2 * MiB
_RECV_HALF = 10 * MiB
CUSTOM_ALL_REDUCE = 18 * MiB  # custom_all_reduce.py (0.8.5-0.10.1): meta_size() + 8 MiB and 8 MiB, cudaMalloc'd
# Fitted (see above): what an eager NCCL start on an NVSwitch board holds once per process beyond the buffers modelled;
# the 8 x H200 SGLang 0.5.4 log's 2.01 GB init less its communicator's 576 MiB and custom all-reduce's 770 MiB
EAGER_INIT_UNATTRIBUTED = 712 * MiB


def nccl_line(version: str | None, cumem: bool | None = None) -> str | None:
    """The NCCL release line a vLLM release runs when it connects NCCL eagerly ("2.20", "2.21", "2.26", "2.27");
    None where NCCL connects lazily (cuMem on: buffers come on first use) and for releases before 0.4.3.
    ``cumem`` is the user's NCCL_CUMEM_ENABLE (None: unset): 0.8-0.10.1 keep a user's 1 (env_override.py skips
    its override), 0.6-0.7 overwrite it; from 0.10.2 a user's 0 turns eager connection back on."""
    rel = minor_patch(version)
    if rel is None or rel >= (10, 2):
        return "2.27" if cumem is False else None
    if rel < (4, 3) or (cumem and rel >= (8, 0)):
        return None
    if rel < (6, 4):
        return "2.20"
    if rel < (9, 0):
        return "2.21"
    return "2.26"


def nvls_bytes(line: str, ranks: int, sm_major: int) -> int:
    """The NVLS unicast buffer one rank backs per communicator of ``ranks`` GPUs (none below three)."""
    if ranks < 3:
        return 0
    channels = 32 if (sm_major >= 10 and line in ("2.26", "2.27")) else 16
    buffer = {"2.20": 4 * MiB + 2 * MiB, "2.21": 1 * MiB + 2 * MiB}.get(line, 1 * MiB)
    return channels * 2 * buffer * ranks


def connection_bytes(ranks: int, position: str = "middle") -> int:
    """Ring and tree connections of one communicator on a rank of the chain: ``middle`` (the binding one: vLLM
    sizes every rank's pool to the smallest, SGLang the pool from the smallest free memory of the group), ``root``
    (no parent: the tree's send half is missing) or ``leaf`` (no child: the tree's receive half is missing)."""
    if position not in ("middle", "root", "leaf"):
        raise ValueError(f"position is middle, root or leaf, not {position!r}")
    if ranks < 2:
        return 0
    tree = _SEND_HALF + _RECV_HALF if ranks >= 3 else 0  # two ranks: the tree reuses the ring's connections
    if tree and position != "middle":
        tree -= _SEND_HALF if position == "root" else _RECV_HALF
    return CHANNELS * (_SEND_HALF + _RECV_HALF + tree)


# Hopper and Blackwell boards whose GPUs meet on an NVSwitch (NCCL's NVLink SHARP needs sm90 and the switch)
NVSWITCH_BOARDS = ("H100-SXM", "H200", "H20", "B200", "B300", "GB200")


@lru_cache(maxsize=256)  # a plan search asks it for every plan
def on_nvswitch(gpu_name: str) -> bool:
    """Whether kvbudget's GPU of that name sits on an NVSwitch board (the boards this model's channels are of)."""
    return gpu_name.upper().startswith(NVSWITCH_BOARDS)


@lru_cache(maxsize=256)  # pure, of small arguments: a plan search asks it for every plan on NVSwitch
def eager_nvswitch_bytes(version: str | None, ranks: int, sm_major: int, cumem: bool | None = None,
                         nvls: bool = True) -> int | None:
    """NCCL's memory per rank, outside torch, for a TP group of ``ranks`` GPUs on an NVSwitch board under a
    release that connects eagerly: two communicators' connections and NVLS buffers (none with
    NCCL_NVLS_ENABLE=0) plus custom all-reduce's and the per-process ``EAGER_INIT_UNATTRIBUTED``; None where this does
    not apply (fewer than three ranks, or NCCL connecting lazily)."""
    line = nccl_line(version, cumem)
    if line is None or ranks < 3:
        return None
    sharp = nvls_bytes(line, ranks, sm_major) if nvls else 0
    return EAGER_INIT_UNATTRIBUTED + CUSTOM_ALL_REDUCE + COMMUNICATORS * (connection_bytes(ranks) + sharp)


# Two A100s joined by NVLink under NCCL 2.21.5 (the module docstring; read, not charged): 24 ring channels, each a 6 MiB
# send half and a 6 MiB receive half, per communicator; V0's first use of torch's process group (the logits' gather)
# is NCCL send/receive over 32 more channels of 6 MiB.
_PAIR_CHANNELS = 24
_PAIR_HALF = 6 * MiB
_V0_GATHER_CHANNELS = 32


def nvlink_pair_bytes(line: str | None, v0: bool) -> int | None:
    """What an eager NCCL 2.21 start holds per rank outside torch for a TP group of two sm80 GPUs joined by NVLink,
    as read from NCCL's source (module docstring) with the per-process ``EAGER_INIT_UNATTRIBUTED`` and custom
    all-reduce's buffers; None for another NCCL line (its channel search was not read)."""
    if line != "2.21":
        return None
    gather = _V0_GATHER_CHANNELS * _PAIR_HALF if v0 else 0
    return COMMUNICATORS * _PAIR_CHANNELS * 2 * _PAIR_HALF + gather + CUSTOM_ALL_REDUCE + EAGER_INIT_UNATTRIBUTED


def link_note(version: str | None, ranks: int, charged: int, sm: float | None, v0: bool,
              cumem: bool | None = None) -> str | None:
    """A note for a TP/PP group off an NVSwitch board under a release that connects NCCL eagerly: the non-torch memory
    charged there is the figure fitted at TP 2, while NCCL's buffers follow the link between the GPUs (NVLink,
    PCIe with or without P2P, or another node), which the GPU's name does not say. None where NCCL connects lazily."""
    line = nccl_line(version, cumem)
    if line is None or ranks < 2:
        return None
    said = (f"NCCL at {ranks} ranks: vLLM {version} runs NCCL {line} with cuMem off, so its communicators connect every "
            f"channel at start-up, and their buffers depend on how the GPUs are linked, which the GPU's name does not "
            f"say; kvbudget charges {charged / GiB:.2f} GiB of non-torch memory a rank (fitted at TP 2)")
    pair = nvlink_pair_bytes(line, v0) if ranks == 2 and sm == 8.0 else None
    if pair is not None:
        said += (f"; two such GPUs joined by NVLink hold about {pair / GiB:.2f} GiB a rank instead (NCCL's channels by "
                 "its source, with an eager start's measured per-process memory: nccl.py), PCIe cards fewer channels, "
                 "and GPUs without P2P keep the buffers in host memory")
    return said

