"""The PyTorch backend's CUDA-graph capture after the final KV pool: what it needs and whether what the pool leaves
holds it.

``py_executor_creator.py`` (0.20 to main in 2026) sizes the final pool, releases the estimation executor's graphs
and builds a new PyExecutor, whose constructor warms the model up and captures the graphs (``model_engine.warmup``),
largest batch first, into one shared graph pool. Each capture first runs the forward eagerly, twice, in PyTorch's
ordinary pool ("We have to do warm up runs to initialize PyTorch's internal states",
``_torch/pyexecutor/cuda_graph_runner.py`` ``DecodingCUDAGraphRunner.capture`` of 0.20; 1.x's ``CUDAGraphRunner``
the same), then records it with ``torch.cuda.graph(..., pool=pool)``. The ordinary pool's blocks cannot serve the
graph pool, nor the graph pool's the eager runs, so when the second-largest batch runs eagerly, the largest batch's
graph pool is still held: the capture needs at least graph(largest) + eager(second largest) at once.

The 0.20 H100 trtllm-bench run in tests/data/trtllm_logs (``...kv095-mbs4096-oom``) shows it: its traceback fails in
``cuda_graph_runner.py`` ``capture`` -> ``forward_fn(inputs)`` (the eager run) of batch 2048, after "Run generation
only CUDA graph warmup for batch size=4096" had succeeded, with "3.44 GiB allocated in private pools (e.g., CUDA
Graphs)" (kvbudget's graph figure for batch 4096: 3.44 GiB) and a refused 1002 MiB: 2048 x 128,256 float32 logits,
part of batch 2048's eager forward (1.72 GiB in kvbudget's figure).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...units import GiB


def graph_batch_sizes(max_batch: int) -> tuple[int, ...]:
    """The batch sizes TensorRT-LLM captures a graph for up to ``max_batch``, as
    ``CudaGraphConfig._generate_cuda_graph_batch_sizes`` (``llmapi/llm_args.py``, 0.20 to 1.x; ``PyTorchConfig`` in
    0.19) generates them without padding: 1 to 31, 32, 64, 128, the powers of two from 256 below 2^floor(log2 max),
    and the maximum itself. With padding (multiples of 8 to 128) and in releases that take the powers to
    ceil(log2 max), or step by 64 (main in 2026), the second-largest size is the same or larger, so the sizes here
    give the least memory a capture can need."""
    if max_batch <= 0:
        return ()
    sizes = [*range(1, 32), 32, 64, 128]
    if max_batch > 1:
        sizes += [2 ** i for i in range(8, math.floor(math.log2(max_batch)))]
    kept = sorted({n for n in sizes if n <= max_batch} | {max_batch})
    return tuple(kept)


def second_graph_batch(max_batch: int) -> int:
    """The batch captured after the largest (0 where only one graph is captured)."""
    below = [n for n in graph_batch_sizes(max_batch) if n < max_batch]
    return below[-1] if below else 0


@dataclass(frozen=True)
class CaptureCheck:
    """The final capture against what the final pool leaves (bytes, per rank)."""

    need: int  # the largest batch's graph pool + the second-largest batch's eager warmup, held at once
    available: int  # what the final pool leaves, with the estimation run's freed activations and released graphs
    left: int  # what the final pool leaves of the profiled peak (the fraction's share)
    graph: int  # the largest batch's graph pool
    eager_next: int  # the second-largest batch's eager forward
    graph_batch: int
    next_batch: int

    @property
    def fails(self) -> bool:
        """The capture cannot fit even where every freed byte serves it: the executor does not start."""
        return self.need > self.available

    def error(self) -> str:
        """The one line that says why the server does not start and what to change."""
        return (f"the CUDA-graph capture after the final KV pool runs out of memory: the graph for batch "
                f"{self.graph_batch:,} holds {self.graph / GiB:.2f} GiB while batch {self.next_batch:,} runs eagerly "
                f"before its capture ({self.eager_next / GiB:.2f} GiB more), {self.need / GiB:.2f} GiB in all, where the "
                f"final pool leaves at most {self.available / GiB:.2f} GiB (cuda_graph_runner.py captures after "
                "py_executor_creator.py sizes the pool); lower free_gpu_memory_fraction or cuda_graph_config "
                "max_batch_size")

    def note(self) -> str:
        """What the plan says of a capture that fits only in memory the estimation run freed (or fits)."""
        tight = self.need > self.left
        return (("the CUDA-graph capture may run out of memory: " if tight else "")
                + f"after the final pool {self.left / GiB:.2f} GiB are left ({self.available / GiB:.2f} with the "
                f"estimation run's activations freed) for the CUDA-graph capture, which needs {self.need / GiB:.2f} GiB "
                f"or more: the graph for batch {self.graph_batch:,} ({self.graph / GiB:.2f} GiB; the smaller graphs "
                f"share its pool) and batch {self.next_batch:,}'s eager warmup beside it ({self.eager_next / GiB:.2f} GiB)"
                + (": lower free_gpu_memory_fraction or cuda_graph_config max_batch_size" if tight else ""))


def capture_check(graph_batch: int, per_sequence: int, left: int, freed: int, graphs_in_peak: int) -> CaptureCheck:
    """The final capture's need against what is free for it. ``per_sequence``: bytes of one sequence's decode step
    (the MLP's activations and the 16- and 32-bit logits), the same in the graph and in the eager run; ``left``: what
    the final pool leaves of the profiled peak; ``freed``: the estimation run's activations (freed with
    ``empty_cache`` before the final pool); ``graphs_in_peak``: graphs the estimation run held in its peak, released
    before the final capture (``_release_cuda_graphs``)."""
    nxt = second_graph_batch(graph_batch)
    graph, eager = graph_batch * per_sequence, nxt * per_sequence
    return CaptureCheck(graph + eager, left + freed + graphs_in_peak, left, graph, eager, graph_batch, nxt)
