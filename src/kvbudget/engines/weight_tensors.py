"""The weight tensors one tensor-parallel rank of vLLM or SGLang allocates while it builds a model, in order: the
sizes PyTorch's caching allocator is asked for (``torch_alloc.py``).

Both engines build the model on the GPU parameter by parameter, layers in ``__init__`` order, and hold the same
fusions: q, k and v in one ``qkv_proj`` (``QKVParallelLinear``), gate and up in one ``gate_up_proj``
(``MergedColumnParallelLinear``), every routed expert's gate and up in one ``w13_weight`` and their down projections
in one ``w2_weight`` (``FusedMoE``), each split over the TP ranks (vLLM's ``model_executor/layers/linear.py`` and
``fused_moe/unquantized_fused_moe_method.py``, 0.29.0; SGLang's ``layers/moe/fused_moe_triton/layer.py``,
0.4.9.post2). A quantized weight's scales, zeros and act-order index are tensors of their own after it, as the
quantization methods' ``create_weights`` register them.
"""

from __future__ import annotations

from ..units import element_type

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from ..model.params import Tensor
    from ..model.spec import ModelSpec
    from ..model.weights import WeightFormat


def parts(fmt: WeightFormat, rows: int, cols: int) -> tuple[int, ...]:
    """The tensors one packed ``rows x cols`` weight is held in, as ``WeightFormat.matrix_bytes`` prices them (their
    sum): the data, then its scales (and zeros, act-order index) in the order the quantization methods' ``create_weights``
    register them."""
    n = rows * cols
    name = fmt.name
    if name == "fp8":
        if fmt.block:
            return n, -(-rows // fmt.block[0]) * -(-cols // fmt.block[1]) * 4
        return n, rows * 4 if fmt.fp8_scales == "per_channel" else 4
    if name == "int8":
        return n, rows * 4
    if name in ("gptq", "awq"):
        groups = -(-cols // (fmt.group_size if fmt.group_size > 0 else cols))
        return n * fmt.bits // 8, groups * rows * fmt.bits // 8, groups * rows * 2, cols * 4 if name == "gptq" else 0
    if name == "nf4":
        return (fmt.matrix_bytes(rows, cols),)  # bitsandbytes: one packed tensor with its absmax
    if name == "mxfp4":
        return -(-n // 2), rows * -(-cols // 32)
    if name == "nvfp4":
        return -(-n // 2), rows * -(-cols // 16), 4, 4
    return (fmt.matrix_bytes(rows, cols),)


def _tensors(t: Tensor, rows: int, cols: int, fmt: WeightFormat) -> tuple[int, ...]:
    """The allocations of a ``rows x cols`` share of ``t`` (already per rank, fused)."""
    if fmt.packs(t):
        return parts(fmt, rows, cols)
    if fmt.name == "stored" and t.stored:
        return (-(-t.stored * rows * cols // (t.rows * t.cols)),)
    return (element_type(fmt.dense_dtype).nbytes(rows * cols),)


def weight_shares(spec: ModelSpec, fmt: WeightFormat, tp: int) -> tuple[tuple[Tensor, tuple[int, ...]], ...]:
    """The parameters one TP rank allocates for the weights, in the order the model's layers create them: each
    with the tensor of the inventory it holds (the first of a fused group) and its allocations' sizes (bytes)."""
    shares: list[tuple[Tensor, int, int, int]] = []  # tensor, rows per rank (fused), cols, how many such allocations
    for t in spec.inventory.tensors():
        rows, cols = t.shape_per_rank(tp)
        last = shares[-1] if shares else None
        if (last and t.linear and t.split == "kv" and last[0].linear and last[0].split in ("col", "kv")
                and last[0].role == t.role and last[2] == cols and last[3] == 1):
            shares[-1] = (last[0], last[1] + rows * t.count, cols, 1)  # k and v join the q projection before them
        elif t.linear and t.count > 1:
            shares.append((t, rows * t.count, cols, 1))  # gate_up, or every expert's w13 / w2
        else:
            shares.append((t, rows, cols, t.count))
    return tuple((t, _tensors(t, rows, cols, fmt)) for t, rows, cols, n in shares for _ in range(n))


def weight_allocations(spec: ModelSpec, fmt: WeightFormat, tp: int) -> tuple[int, ...]:
    """Sizes (bytes) of the tensors one TP rank allocates for the weights, in order (``weight_shares`` flattened)."""
    return tuple(size for _, sizes in weight_shares(spec, fmt, tp) for size in sizes)
