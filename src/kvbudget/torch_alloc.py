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

A freed block merges with the free blocks next to it in its segment (``free_block``) and later requests take it
like any other, so transient tensors (vLLM's rotary cache is computed in float32 before the model-dtype copy is kept)
leave segments that the tensors after them fill or not.

A tensor-parallel shard of an odd size (a 17.5 MiB QKV shard takes an 18 MiB segment) or a run of 8-9 MiB
projections that share 20 MiB segments two by two leaves such remainders, layer after layer.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable

from ._record import record
from .units import MiB

MIN_BLOCK = 512  # kMinBlockSize
SMALL_SIZE = 1 * MiB  # kSmallSize: the largest request the small pool serves
SMALL_BUFFER = 2 * MiB  # kSmallBuffer: a small-pool segment
LARGE_BUFFER = 20 * MiB  # kLargeBuffer: the segment of a request between 1 and 10 MiB
MIN_LARGE_ALLOC = 10 * MiB  # kMinLargeAlloc
ROUND_LARGE = 2 * MiB  # kRoundLarge


@record
class Free:
    """A step that frees an earlier allocation: the ``index``-th allocation of the steps (0-based)."""

    index: int


Step = int | Free  # an allocation of that many bytes, or the release of an earlier one


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def reserved_bytes(steps: Iterable[Step]) -> int:
    """Bytes of the segments the allocator still holds after these steps and ``torch.cuda.empty_cache()``: every
    segment with a live block. ``steps`` are tensor sizes (bytes) allocated in order, and ``Free`` steps releasing
    earlier ones (a freed block merges with free neighbours of its segment, ``free_block``, and later requests reuse
    it); an allocation of 0 bytes or less allocates nothing but still counts as an index."""
    return usage(steps)[0]


def allocated_bytes(steps: Iterable[Step]) -> int:
    """Bytes of the live blocks after these steps: torch's ``memory_allocated()``, which counts a block as the
    allocator cut it (the request rounded to 512 B, with a remainder too small to split off), not as requested."""
    return usage(steps)[1]


def usage(steps: Iterable[Step]) -> tuple[int, int]:
    """``reserved_bytes`` and ``allocated_bytes`` of the same steps."""
    free: dict[bool, list[tuple[int, int, int]]] = {True: [], False: []}  # per pool: (size, segment, offset), sorted
    blocks: dict[tuple[int, int], tuple[int, bool]] = {}  # (segment, offset) -> (size, free)
    starts: dict[tuple[int, int], int] = {}  # (segment, end offset) -> the offset of the block ending there
    segments: list[tuple[int, bool]] = []  # size, small pool
    live: list[tuple[int, int] | None] = []  # per allocation: (segment, offset), None for an empty one

    def put(seg: int, off: int, size: int, is_free: bool) -> None:
        blocks[seg, off] = (size, is_free)
        starts[seg, off + size] = off
        if is_free:
            insort(free[segments[seg][1]], (size, seg, off))

    def take(seg: int, off: int) -> int:  # drops a block's records, returns its size
        size, is_free = blocks.pop((seg, off))
        del starts[seg, off + size]
        if is_free:
            pool = free[segments[seg][1]]
            del pool[bisect_left(pool, (size, seg, off))]
        return size

    for step in steps:
        if isinstance(step, Free):
            where = live[step.index]
            live[step.index] = None
            if where is None:
                continue
            seg, off = where
            size = take(seg, off)
            after = blocks.get((seg, off + size))
            if after is not None and after[1]:
                size += take(seg, off + size)
            before = starts.get((seg, off))
            if before is not None and blocks[seg, before][1]:
                size += take(seg, before)
                off = before
            put(seg, off, size, True)
            continue
        if step <= 0:
            live.append(None)
            continue
        size = _round_up(step, MIN_BLOCK)
        small = size <= SMALL_SIZE
        pool = free[small]
        i = bisect_left(pool, (size, -1, -1))
        if i < len(pool):
            _, seg, off = pool[i]
            block = take(seg, off)
        else:
            block = SMALL_BUFFER if small else LARGE_BUFFER if size < MIN_LARGE_ALLOC else _round_up(size, ROUND_LARGE)
            seg, off = len(segments), 0
            segments.append((block, small))
        rest = block - size
        if rest >= MIN_BLOCK if small else rest > SMALL_SIZE:
            put(seg, off + size, rest, True)
        else:
            size = block
        put(seg, off, size, False)
        live.append((seg, off))
    # empty_cache releases the segments that are one free block
    reserved = sum(size for seg, (size, _) in enumerate(segments) if blocks.get((seg, 0)) != (size, True))
    return reserved, sum(size for size, is_free in blocks.values() if not is_free)


def overhead_bytes(steps: Iterable[Step]) -> int:
    """What the segments hold beyond the tensors still allocated (``reserved_bytes`` less their bytes)."""
    steps = list(steps)
    return reserved_bytes(steps) - held_bytes(steps)


def held_bytes(steps: Iterable[Step]) -> int:
    """The bytes of the tensors the steps leave allocated, as requested."""
    held: list[int] = []
    for step in steps:
        if isinstance(step, Free):
            held[step.index] = 0
        else:
            held.append(max(step, 0))
    return sum(held)
