"""The weight tensors one SGLang rank allocates while it builds the model, in order, and what PyTorch's caching
allocator reserves for them beyond their bytes (``torch_alloc.py``).

SGLang builds the model on the GPU parameter by parameter (``model_loader/loader.py: DefaultModelLoader``, layers in
``__init__`` order) and its "Load weight end ... mem usage" is the free memory lost over the load
(``get_available_gpu_memory`` before and after, each after ``torch.cuda.empty_cache()``:
``model_executor/model_runner.py: load_model`` in 0.4.3.post4, 0.4.9.post2 and 0.5.4), so it counts whole
allocator segments. One allocation per parameter as SGLang's layers hold them: q, k and v fused
(``QKVParallelLinear``), gate and up fused (``MergedColumnParallelLinear``), every routed expert's gate and up in one
``w13_weight`` and their down projections in one ``w2_weight`` (``layers/moe/fused_moe_triton/layer.py: FusedMoE``),
each split over the TP ranks; a quantized weight's scales, zeros and index are tensors of their own after it.

Not modelled (0 is returned): formats repacked after loading (``kept_as_loaded``); pipeline parallelism, DP attention
and expert parallelism (other shard shapes: ``policy.py`` leaves them out).
"""

from __future__ import annotations

from functools import lru_cache

from ...torch_alloc import overhead_bytes
from ...units import element_type

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from ...model.params import Tensor
    from ...model.spec import ModelSpec
    from ...model.weights import WeightFormat


def _parts(fmt: WeightFormat, rows: int, cols: int) -> tuple[int, ...]:
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
    """The allocations of a ``rows x cols`` share of ``t`` (already per rank, fused where SGLang fuses)."""
    if fmt.packs(t):
        return _parts(fmt, rows, cols)
    if fmt.name == "stored" and t.stored:
        return (-(-t.stored * rows * cols // (t.rows * t.cols)),)
    return (element_type(fmt.dense_dtype).nbytes(rows * cols),)


def weight_allocations(spec: ModelSpec, fmt: WeightFormat, tp: int) -> tuple[int, ...]:
    """Sizes (bytes) of the tensors one TP rank allocates for the weights, in the order SGLang creates them."""
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
    return tuple(size for t, rows, cols, n in shares for _ in range(n) for size in _tensors(t, rows, cols, fmt))


def kept_as_loaded(fmt: WeightFormat) -> bool:
    """Whether SGLang keeps the tensors it loaded into: 16/32-bit weights, and block-scaled fp8, which
    ``Fp8LinearMethod`` / ``Fp8MoEMethod.process_weights_after_loading`` leave as they are on NVIDIA GPUs
    (``layers/quantization/fp8.py``, 0.4.9.post2). Other formats are repacked after loading (AWQ / GPTQ into Marlin's
    layout, per-tensor fp8 requantized ...): new tensors in the freed blocks of the old, not modelled."""
    return not fmt.quantized or (fmt.name == "fp8" and fmt.block is not None)


@lru_cache(maxsize=32, typed=True)  # a walk over every tensor, the same for every GPU a search plans on
def allocator_overhead(spec: ModelSpec, fmt: WeightFormat, tp: int) -> int:
    """What PyTorch's caching allocator reserves for one rank's weights beyond their bytes; 0 for a format SGLang
    repacks after loading (``kept_as_loaded``). Memoized (bounded)."""
    return overhead_bytes(weight_allocations(spec, fmt, tp)) if kept_as_loaded(fmt) else 0
