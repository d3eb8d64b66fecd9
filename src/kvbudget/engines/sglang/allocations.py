"""The weight tensors one SGLang rank allocates while it builds the model, in order, and what PyTorch's caching
allocator reserves for them beyond their bytes (``torch_alloc.py``).

SGLang builds the model on the GPU parameter by parameter (``model_loader/loader.py: DefaultModelLoader``, layers in
``__init__`` order) and its "Load weight end ... mem usage" is the free memory lost over the load
(``get_available_gpu_memory`` before and after, each after ``torch.cuda.empty_cache()``:
``model_executor/model_runner.py: load_model`` in 0.4.3.post4, 0.4.9.post2 and 0.5.4), so it counts whole
allocator segments. One allocation per parameter as SGLang's layers hold them: q, k and v fused
(``QKVParallelLinear``), gate and up fused (``MergedColumnParallelLinear``), every routed expert's gate and up in one
``w13_weight`` and their down projections in one ``w2_weight`` (``layers/moe/fused_moe_triton/layer.py: FusedMoE``),
each split over the TP ranks. A quantized weight's scales are separate tensors (small-pool sized); only its data
tensor is counted here.

Not modelled (0 is returned): pipeline parallelism, DP attention and expert parallelism (other shard shapes).
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


def _data_bytes(t: Tensor, fmt: WeightFormat, tp: int) -> int:
    """Bytes of one of ``t.count`` tensors' data on a rank (a quantized weight without its scales)."""
    rows, cols = t.shape_per_rank(tp)
    n = rows * cols
    if fmt.packs(t):
        if fmt.name in ("fp8", "int8"):
            return n
        if fmt.name in ("gptq", "awq"):
            return n * fmt.bits // 8
        return -(-n // 2)  # nf4, mxfp4, nvfp4: two 4-bit values a byte
    if fmt.name == "stored" and t.stored:
        return -(-t.stored * n // (t.rows * t.cols))
    return element_type(fmt.dense_dtype).nbytes(n)


def weight_allocations(spec: ModelSpec, fmt: WeightFormat, tp: int) -> tuple[int, ...]:
    """Sizes (bytes) of the tensors one TP rank allocates for the weights, in the order SGLang creates them."""
    out: list[int] = []
    fused_qkv: Tensor | None = None
    for t in spec.inventory.tensors():
        size = _data_bytes(t, fmt, tp)
        if t.linear and t.split == "kv" and fused_qkv is not None and t.role == fused_qkv.role:
            out[-1] += size * t.count  # k and v join the q projection before them
            continue
        fused_qkv = t if t.linear and t.split == "col" and t.count == 1 else None
        if t.linear and t.count > 1:
            out.append(size * t.count)  # gate_up, or every expert's w13 / w2
        else:
            out.extend([size] * t.count)
    return tuple(out)


@lru_cache(maxsize=32, typed=True)  # a walk over every tensor, the same for every GPU a search plans on
def allocator_overhead(spec: ModelSpec, fmt: WeightFormat, tp: int) -> int:
    """What PyTorch's caching allocator reserves for one rank's weights beyond their bytes. Memoized (bounded)."""
    return overhead_bytes(weight_allocations(spec, fmt, tp))
