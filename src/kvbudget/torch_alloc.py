"""The memory PyTorch's CUDA caching allocator reserves (``cudaMalloc``) for tensors created one after another and kept.

From ``c10/cuda/CUDACachingAllocator.cpp`` (PyTorch 2.x, without ``expandable_segments``): a request is rounded up
to ``kMinBlockSize`` (512 B). Requests of at most ``kSmallSize`` (1 MiB) come from the small pool, whose segments
are ``kSmallBuffer`` (2 MiB); larger ones from the large pool, whose segments are ``kLargeBuffer`` (20 MiB) for a
request under ``kMinLargeAlloc`` (10 MiB) and the request rounded up to ``kRoundLarge`` (2 MiB) above
(``get_allocation_size``). A request takes the smallest free block that holds it (``get_free_block``), else a new
segment; the block is split only when what remains is at least 512 B (small pool) or more than 1 MiB (large pool:
``should_split``), so a remainder of 1 MiB or less stays with the tensor. ``torch.cuda.empty_cache()`` gives back
only whole free segments, so what ``cudaMemGetInfo`` shows used after a model is built is every segment its
tensors touched: the tensors plus the remainders no later tensor fitted in.

A tensor-parallel shard of an odd size (a 17.5 MiB QKV shard takes an 18 MiB segment) or a run of 8-9 MiB
projections that share 20 MiB segments two by two leaves such remainders, layer after layer.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable

from .units import MiB

MIN_BLOCK = 512  # kMinBlockSize
SMALL_SIZE = 1 * MiB  # kSmallSize: the largest request the small pool serves
SMALL_BUFFER = 2 * MiB  # kSmallBuffer: a small-pool segment
LARGE_BUFFER = 20 * MiB  # kLargeBuffer: the segment of a request between 1 and 10 MiB
MIN_LARGE_ALLOC = 10 * MiB  # kMinLargeAlloc
ROUND_LARGE = 2 * MiB  # kRoundLarge


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def reserved_bytes(sizes: Iterable[int]) -> int:
    """Bytes of the segments the allocator reserves for tensors of these sizes (bytes), created in this order and
    none freed."""
    free: dict[bool, list[int]] = {True: [], False: []}  # small pool, large pool: free block sizes, sorted
    total = 0
    for size in sizes:
        if size <= 0:
            continue
        size = _round_up(size, MIN_BLOCK)
        small = size <= SMALL_SIZE
        blocks = free[small]
        i = bisect_left(blocks, size)
        if i < len(blocks):
            block = blocks.pop(i)
        else:
            block = SMALL_BUFFER if small else LARGE_BUFFER if size < MIN_LARGE_ALLOC else _round_up(size, ROUND_LARGE)
            total += block
        rest = block - size
        if rest >= MIN_BLOCK if small else rest > SMALL_SIZE:
            insort(blocks, rest)
    return total


def overhead_bytes(sizes: Iterable[int]) -> int:
    """What the segments hold beyond the tensors themselves (``reserved_bytes`` less the tensors' bytes)."""
    sizes = [s for s in sizes if s > 0]
    return reserved_bytes(sizes) - sum(sizes)
