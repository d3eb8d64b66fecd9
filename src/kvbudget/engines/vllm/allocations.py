"""The PyTorch caching-allocator segments around one vLLM rank's weights (``torch_alloc.py``), and the releases whose
start-up figures count them.

vLLM builds the model on the GPU parameter by parameter (``model_loader``: the model is created under the target
device, layers in ``__init__`` order) with the fusions of ``weight_tensors.py``. The first attention layer's
``get_rope`` computes the rotary cos/sin cache on the GPU after its ``qkv_proj`` and ``o_proj``
(``model_executor/layers/rotary_embedding/base.py _compute_cos_sin_cache``, 0.29.0): positions and the inverse
frequencies in float32, their outer product, its cosine and sine, the two concatenated, then the copy in the model
dtype that is kept (the cached module serves every later layer); the float32 tensors are freed, and the weights
created after them fill the freed blocks or not.

"Model loading took" is torch's allocated bytes (``DeviceMemoryProfiler``: ``platforms/cuda.py
get_current_memory_usage`` returns ``max_memory_allocated`` after ``reset_peak_memory_stats``, 0.29.0; the same
counter in 0.4.3), which count each tensor's block as the allocator cut it: a 31.5 MiB shard takes a 32 MiB
block (the 0.5 MiB left is not split off), so the unsplit remainders are in the weights figure of every release.
What the segments hold beside the live blocks (remainders split off and never reused, segment space the tensors
did not take) is in no torch counter but ``memory_reserved()``. Which releases count that part (a segment with a
live block stays on the device after ``empty_cache``, so it is in any figure taken from ``cudaMemGetInfo``):

* 0.2.5-0.6.4 (V0): ``worker.py`` takes the device's used memory after the profiling run (0.2.5-0.3.2 in full,
  0.3.3-0.6.3 over the worker's start, read in 0.4.3; 0.6.4 less torch's allocated bytes, read in 0.6.4);
* 0.7.0-0.9.0 (V1): ``v1/worker/gpu_worker.py determine_available_memory`` counts the used memory less torch's
  allocated bytes as non-torch (read in 0.7.0);
* 0.27 on: ``utils/mem_utils.py memory_profiling`` takes "consumed" memory as the free memory lost since the worker's
  snapshot (``total_consumed``, read in 0.27.0-0.33.0).

Up to 0.2.4 (torch's allocated peak alone) and 0.6.5-0.26 (``memory_profiling``'s non-torch memory is the used
memory less torch's *reserved* bytes) they are counted nowhere: on the device, outside the budget.

Not modelled (0 is returned): quantized formats, which vLLM repacks or requantizes after loading (AWQ / GPTQ into
Marlin's layout, fp8 online or for the kernels' scale layout: new tensors in the freed blocks of the old); pipeline
stages (a stage holds only its layers); weights offloaded to the host; an MoE model under data or expert parallelism
(other expert shards).
"""

from __future__ import annotations

from functools import lru_cache

from ...torch_alloc import Free, Step, held_bytes, usage
from ...units import element_type
from ..weight_tensors import weight_shares
from .calibration import rotary_shape
from .settings import minor_patch

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from ...model.spec import ModelSpec
    from ...model.weights import WeightFormat

F32 = 4


def counts_segments(rel_key: str, version: str) -> bool:
    """Whether the release's figures count the allocator's segments beyond the tensors (see the module docstring):
    V0 0.2.5-0.6.4, V1 0.7.0-0.9.0, 0.27 on (the newest release when no version is given)."""
    rel = minor_patch(version)
    if rel is None:
        return rel_key == "current"
    if rel_key == "v0":
        return (2, 5) <= rel <= (6, 4)
    if rel_key == "v1":
        return (7, 0) <= rel <= (9, 0)
    return rel >= (27, 0)


def rotary_steps(spec: ModelSpec, dtype: str, first: int) -> tuple[Step, ...]:
    """The allocations and frees of ``_compute_cos_sin_cache`` and the kept copy in ``dtype``; ``first`` is the
    index of the first allocation it makes among all the steps."""
    positions, dim = rotary_shape(spec)
    if not positions:
        return ()
    half = positions * (dim // 2) * F32
    # inv_freq, t (arange of the positions), freqs = outer(t, inv_freq), cos, sin, cat(cos, sin)
    sizes = (dim // 2 * F32, positions * F32, half, half, half, 2 * half)
    kept = element_type(dtype).nbytes(positions * dim)
    frees = tuple(Free(first + i) for i in range(5))  # the function's locals; its float32 result outlives them
    if element_type(dtype).nbytes(1) == F32:  # no copy: the float32 cache is kept
        return (*sizes, *frees)
    return (*sizes, *frees, kept, Free(first + 5))


def weight_steps(spec: ModelSpec, fmt: WeightFormat, tp: int, dtype: str) -> tuple[Step, ...]:
    """What one TP rank allocates and frees while vLLM builds the model: the weights in order, the rotary cache's
    steps after the first attention layer's output projection (after the head's tensors for a model without one)."""
    shares = weight_shares(spec, fmt, tp)
    at = next((i + 1 for i, (t, _) in enumerate(shares) if t.role == "attention" and t.split == "row"),
              len(spec.inventory.head))
    before = [size for _, sizes in shares[:at] for size in sizes]
    after = [size for _, sizes in shares[at:] for size in sizes]
    return (*before, *rotary_steps(spec, dtype, len(before)), *after)


@lru_cache(maxsize=32, typed=True)  # a walk over every tensor, the same for every GPU a search plans on
def segment_bytes(spec: ModelSpec, fmt: WeightFormat, tp: int, dtype: str) -> tuple[int, int]:
    """What PyTorch's caching allocator holds for one rank's weights and rotary cache beyond their bytes, in two parts:
    inside the tensors' blocks (requests rounded to 512 B, remainders of 1 MiB or less left with a large block:
    ``memory_allocated()`` counts them, so "Model loading took" does in every release) and beside them (split-off
    remainders and segment space no tensor took: only the releases of ``counts_segments`` count it). (0, 0) for a
    quantized format (not modelled). Memoized (bounded)."""
    if fmt.quantized:
        return 0, 0
    steps = weight_steps(spec, fmt, tp, dtype)
    reserved, allocated = usage(steps)
    return allocated - held_bytes(steps), reserved - allocated
