"""Tensor and pipeline parallelism: which layers a rank holds and its share of the weights."""

from __future__ import annotations

from functools import lru_cache

from ._record import record
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


# Memoized: a pure function of frozen, hashable inputs whose answer is the same on every GPU type, and which
# ``plan`` search, ``held``/``longest_context`` bisections and reports ask for again and again (one search
# plans ~1,000 deployments from ~30 (format, tp, pp)). The cache is bounded (the last 128 answers), typed (``1``
# and ``True`` are different keys, as the checks below treat them) and holds only immutable values, so it changes
# no result; ``stages.cache_clear()`` empties it.
@lru_cache(maxsize=128, typed=True)
def stages(spec: ModelSpec, fmt: WeightFormat, tp: int = 1, pp: int = 1) -> tuple[Stage, ...]:
    """Every pipeline stage of one TP rank. Embeddings sit on the first stage (and on others as
    ``spec.pp_embedding`` says), the final norm and lm_head on the last (vLLM's PPMissingLayer
    elsewhere). Memoized (bounded): the same inputs return the same tuple."""
    inv = spec.inventory
    memo: dict[tuple[Tensor, ...], tuple[dict[str, int], dict[str, int]]] = {}  # layers repeat: price each once

    def price(block: tuple[Tensor, ...]) -> tuple[dict[str, int], dict[str, int]]:
        if block not in memo:
            roles: dict[str, int] = {}
            repl: dict[str, int] = {}
            for t in block:
                nbytes = fmt.tensor_bytes(t, tp)
                roles[t.role] = roles.get(t.role, 0) + nbytes
                if replicated(t, tp):
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
