"""Parameter inventory: every weight tensor of a model as (role, shape, count, how TP splits it).

Parameter counts by role, weight bytes in any format and per-rank weights under tensor and
pipeline parallelism are all sums over this inventory, so the three can never disagree.
"""

from __future__ import annotations

import functools

from .._record import record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Literal

# Roles, in report order.
ROLES: tuple[str, ...] = (
    "embeddings", "attention", "mlp", "experts", "shared_experts", "router", "mamba", "norms", "lm_head", "vision",
)

# How tensor parallelism splits a tensor (vLLM's linear layers):
#   col   ColumnParallelLinear: output rows split across ranks
#   row   RowParallelLinear: input columns split across ranks
#   kv    QKVParallelLinear K/V part: max(1, heads // tp) heads per rank (replicated when tp > heads)
#   vocab VocabParallelEmbedding / ParallelLMHead: vocabulary rows split across ranks
#   none  replicated on every rank (norms, routers, row-parallel biases, position tables)
if TYPE_CHECKING:
    Split = Literal["col", "row", "kv", "vocab", "none"]


@record
class Tensor:
    """``count`` identical tensors of shape ``rows x cols`` (vectors have ``cols == 1``).

    ``linear`` marks a weight matrix of a linear layer: the tensors that quantized weight
    formats pack. Everything else (embeddings, norms, biases, conv kernels) stays in 16-bit.
    """

    role: str
    rows: int
    cols: int = 1
    count: int = 1
    split: Split = "none"
    heads: int = 0  # for split == "kv": KV heads held in ``rows``
    linear: bool = False
    stored: int = 0  # bytes of one such tensor as a checkpoint file stores it (GGUF, safetensors); 0: unknown

    @property
    def params(self) -> int:
        return self.rows * self.cols * self.count

    def shape_per_rank(self, tp: int) -> tuple[int, int]:
        if tp == 1 or self.split == "none":
            return self.rows, self.cols
        if self.split in ("col", "vocab"):
            return -(-self.rows // tp), self.cols
        if self.split == "row":
            return self.rows, -(-self.cols // tp)
        per_head = self.rows // self.heads
        return max(1, self.heads // tp) * per_head, self.cols


Block = tuple[Tensor, ...]


@record
class Inventory:
    """All tensors: ``head`` before the layers (embeddings), one block per decoder layer,
    and ``tail`` after them (final norm, lm_head)."""

    head: Block
    layers: tuple[Block, ...]
    tail: Block

    def tensors(self) -> Block:
        return self.head + tuple(t for block in self.layers for t in block) + self.tail

    @property
    def total(self) -> int:
        return sum(t.params for t in self.tensors())

    def by_role(self) -> dict[str, int]:
        return dict(_by_role(self))


@functools.lru_cache(maxsize=64)
def _by_role(inventory: Inventory) -> tuple[tuple[str, int], ...]:
    """Parameters per role, summed once per inventory (vLLM's plan asks for every deployment ``plan`` searches;
    the inventory is frozen and its hash kept, so the memo costs one lookup)."""
    out = {role: 0 for role in ROLES}
    for t in inventory.tensors():
        out[t.role] = out.get(t.role, 0) + t.params
    return tuple((k, v) for k, v in out.items() if v)


# --- builders used by the config readers -----------------------------------------------------


def attention(
    hidden: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    *,
    v_head_dim: int = 0,
    qkv_bias: bool = False,
    o_bias: bool = False,
    qk_norm: bool = False,
    q_gate: bool = False,
) -> list[Tensor]:
    """Q, K, V and O projections of (grouped-query) attention."""
    vd = v_head_dim or head_dim
    q_rows = heads * head_dim * (2 if q_gate else 1)
    out = [
        Tensor("attention", q_rows, hidden, split="col", linear=True),
        Tensor("attention", kv_heads * head_dim, hidden, split="kv", heads=kv_heads, linear=True),
        Tensor("attention", kv_heads * vd, hidden, split="kv", heads=kv_heads, linear=True),
        Tensor("attention", hidden, heads * vd, split="row", linear=True),
    ]
    if qkv_bias:
        out += [
            Tensor("attention", q_rows, split="col"),
            Tensor("attention", kv_heads * head_dim, split="kv", heads=kv_heads),
            Tensor("attention", kv_heads * vd, split="kv", heads=kv_heads),
        ]
    if o_bias:
        out.append(Tensor("attention", hidden))
    if qk_norm:
        out.append(Tensor("norms", head_dim, count=2))
    return out


def gated_mlp(hidden: int, inter: int, role: str = "mlp", count: int = 1, bias: bool = False) -> list[Tensor]:
    """gate and up projections (hidden -> inter) and down (inter -> hidden), ``count`` times."""
    out = [
        Tensor(role, inter, hidden, count=2 * count, split="col", linear=True),
        Tensor(role, hidden, inter, count=count, split="row", linear=True),
    ]
    if bias:
        out += [Tensor(role, inter, count=2 * count, split="col"), Tensor(role, hidden, count=count)]
    return out


def plain_mlp(hidden: int, inter: int, role: str = "mlp", count: int = 1, bias: bool = True) -> list[Tensor]:
    """fc1 (hidden -> inter) and fc2 (inter -> hidden), an activation between them (GELU; squared ReLU in
    Nemotron-H's MLP and experts), ``count`` times."""
    out = [
        Tensor(role, inter, hidden, count=count, split="col", linear=True),
        Tensor(role, hidden, inter, count=count, split="row", linear=True),
    ]
    if bias:
        out += [Tensor(role, inter, count=count, split="col"), Tensor(role, hidden, count=count)]
    return out


def norms(size: int, count: int, bias: bool = False) -> list[Tensor]:
    """``count`` norms of ``size`` (RMSNorm: weight; LayerNorm: weight and bias)."""
    return [Tensor("norms", size, count=count * (2 if bias else 1))] if count else []


def router(hidden: int, experts: int, bias: bool = False) -> list[Tensor]:
    out = [Tensor("router", experts, hidden)]
    if bias:
        out.append(Tensor("router", experts))
    return out


def inventory(head: Block, layers: tuple[Block, ...] | list[Block], tail: Block) -> Inventory:
    """An Inventory whose equal layer blocks are one shared tuple: every per-layer sum over it
    (weights per stage, per format) then finds repeats by identity instead of comparing tensors."""
    shared: dict[Block, Block] = {}
    return Inventory(tuple(head), tuple(shared.setdefault(tuple(b), tuple(b)) for b in layers), tuple(tail))
