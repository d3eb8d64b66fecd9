"""Tensor, pipeline, data and expert parallelism: which layers a rank holds and its share of the weights."""

from __future__ import annotations

from functools import lru_cache

from ._record import record, replace
from .model.layers import Layer
from .model.params import ROLES, Tensor
from .model.spec import ModelSpec
from .model.weights import WeightFormat
from .units import InputError


def pp_partition(num_layers: int, pp: int) -> tuple[int, ...]:
    """Decoder layers per pipeline stage, as vLLM splits them (``distributed/utils.py:
    get_pp_indices``): an even share each, and the remainder one layer apiece to the stages
    before the last, counting back from the second-to-last. vLLM refuses more stages than layers
    (a stage with no layer); so does kvbudget, before building a list of ``pp`` stages."""
    if isinstance(pp, bool) or not isinstance(pp, int) or not 1 <= pp <= max(num_layers, 1):
        raise InputError(f"--pp {pp!r} must be between 1 and the model's {num_layers} layers"
                         " (each pipeline stage holds at least one layer)")
    per = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        per[-i] += 1
    return tuple(per)


@record
class Stage:
    """The share of one (TP rank, PP stage): its decoder layers, cache layers and weights."""

    index: int
    first_layer: int
    num_layers: int
    layers: tuple[Layer, ...]
    weights_bytes: int
    weights_by_role: tuple[tuple[str, int], ...]
    replicated_by_role: tuple[tuple[str, int], ...] = ()  # bytes every TP rank holds in full


def replicated(t: Tensor, tp: int) -> bool:
    """Whether every TP rank holds all of ``t``: unsplit tensors, and K/V projections when there
    are fewer KV heads than ranks (each rank then keeps one whole head)."""
    return tp > 1 and (t.split == "none" or (t.split == "kv" and t.heads < tp))


def local_experts(num_experts: int, ep: int) -> int:
    """Routed experts on the fullest rank of an expert-parallel group of ``ep`` ranks: vLLM spreads them evenly
    and gives the remainder one apiece to the first ranks (``fused_moe/expert_map_manager.py:
    determine_expert_map``, 0.33.0; ``fused_moe/layer.py`` of 0.8.5-0.10.1)."""
    return -(-num_experts // ep) if ep > 1 else num_experts


def expert_bytes(t: Tensor, fmt: WeightFormat, num_experts: int, tp: int, dp: int = 1, ep: bool = False,
                 moe_tp: int = 1) -> int:
    """One rank's bytes of a routed-expert tensor (``role == "experts"``, a FusedMoE weight). vLLM's FusedMoE
    flattens the data-parallel ranks into its group (``FusedMoEParallelConfig.make``: tp_size = DP x TP,
    ``fused_moe/config.py`` 0.10.1 and 0.33.0; ``FusedMoE.__init__`` 0.8.5): without expert parallelism each expert
    is split tensor-parallel over DP x TP ranks; with it (``--enable-expert-parallel``, EP size = DP x TP) each
    rank holds whole experts, ``local_experts`` of them, unsplit (tp_size 1). ``moe_tp`` (TensorRT-LLM's
    moe_tensor_parallel_size, 1 in vLLM) splits the group into EP size = DP x TP / moe_tp, each rank's experts
    split tensor-parallel by ``moe_tp``."""
    group = dp * tp
    if not ep or group == 1:
        return fmt.tensor_bytes(t, group)
    local = local_experts(num_experts, max(group // moe_tp, 1))
    if num_experts and t.count % num_experts == 0:  # count experts (or 2 x: gate and up) of one shape
        return fmt.tensor_bytes(replace(t, count=t.count // num_experts * local), moe_tp)
    return -(-fmt.tensor_bytes(t, moe_tp) * local // max(num_experts, 1))  # experts fused into one tensor: their share


# Memoized: a pure function of frozen, hashable inputs whose answer is the same on every GPU type, and which
# ``plan`` search, ``held``/``longest_context`` bisections and reports ask for again and again (one search
# plans ~1,000 deployments from ~30 (format, tp, pp)). The cache is bounded (the last 128 answers), typed (``1``
# and ``True`` are different keys, as the checks below treat them) and holds only immutable values, so it changes
# no result; ``stages.cache_clear()`` empties it.
@lru_cache(maxsize=128, typed=True)
def stages(spec: ModelSpec, fmt: WeightFormat, tp: int = 1, pp: int = 1, dp: int = 1, ep: bool = False,
           moe_tp: int = 1) -> tuple[Stage, ...]:
    """Every pipeline stage of one TP rank. Embeddings sit on the first stage (and on others as
    ``spec.pp_embedding`` says), the final norm and lm_head on the last (vLLM's PPMissingLayer
    elsewhere). ``dp`` data-parallel engines (vLLM ``--data-parallel-size``) each hold every layer
    but share the routed experts of an MoE model, split tensor-parallel or, with ``ep``, whole experts
    apiece (``expert_bytes``; with ``moe_tp`` > 1, TensorRT-LLM's MoE tensor parallelism, each of them split
    ``moe_tp`` ways within EP groups of DP x TP / moe_tp). Memoized (bounded): the same inputs return the same tuple."""
    inv = spec.inventory
    memo: dict[tuple[Tensor, ...], tuple[dict[str, int], dict[str, int]]] = {}  # layers repeat: price each once
    moe_dp = dp if spec.num_experts else 1

    def price(block: tuple[Tensor, ...]) -> tuple[dict[str, int], dict[str, int]]:
        if block not in memo:
            roles: dict[str, int] = {}
            repl: dict[str, int] = {}
            for t in block:
                if t.role == "experts" and (moe_dp > 1 or ep):
                    nbytes = expert_bytes(t, fmt, spec.num_experts, tp, moe_dp, ep, moe_tp)
                    shared = replicated(t, moe_tp) if ep else replicated(t, tp * moe_dp)
                else:
                    nbytes = fmt.tensor_bytes(t, tp)
                    shared = replicated(t, tp)
                roles[t.role] = roles.get(t.role, 0) + nbytes
                if shared:
                    repl[t.role] = repl.get(t.role, 0) + nbytes
            memo[block] = roles, repl
        return memo[block]

    token_embedding = inv.head[:1]  # the vocab x hidden table, without position tables or vision towers
    out = []
    start = 0
    for s, count in enumerate(pp_partition(spec.num_layers, pp)):
        blocks = list(inv.layers[start:start + count])
        if s == 0:
            blocks.insert(0, inv.head)
        elif (s == pp - 1 and spec.pp_embedding == "first_and_last") or spec.pp_embedding == "every":
            blocks.insert(0, token_embedding)
        if s == pp - 1:
            blocks.append(inv.tail)
        by_role = {role: 0 for role in ROLES}
        rep_role = {role: 0 for role in ROLES}
        for block in blocks:
            roles, repl = price(block)
            for role, nbytes in roles.items():
                by_role[role] = by_role.get(role, 0) + nbytes
            for role, nbytes in repl.items():
                rep_role[role] = rep_role.get(role, 0) + nbytes
        layers = tuple(layer for layer, i in zip(spec.layers, spec.layer_of, strict=False) if start <= i < start + count)
        out.append(Stage(s, start, count, layers, sum(by_role.values()),
                         tuple((r, b) for r, b in by_role.items() if b),
                         tuple((r, b) for r, b in rep_role.items() if b)))
        start += count
    return tuple(out)
