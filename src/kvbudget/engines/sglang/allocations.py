"""The weight tensors one SGLang rank allocates while it builds the model, in order, and what PyTorch's caching
allocator reserves for them beyond their bytes (``torch_alloc.py``; the tensors and fusions: ``weight_tensors.py``).

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
from ..weight_tensors import weight_allocations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from ...model.spec import ModelSpec
    from ...model.weights import WeightFormat


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
