"""PyTorch's caching allocator (torch_alloc.py), by hand from c10/cuda/CUDACachingAllocator.cpp's rules: small
requests (<= 1 MiB) in 2 MiB segments, 1-10 MiB requests in 20 MiB segments, larger ones rounded to 2 MiB; a free
block split only when more than 1 MiB (large pool) or at least 512 B (small pool) would remain."""

from __future__ import annotations

from kvbudget.torch_alloc import overhead_bytes, reserved_bytes
from kvbudget.units import MiB


def test_large_requests_round_to_2_mib_and_small_remainders_stay() -> None:
    assert reserved_bytes([48 * MiB]) == 48 * MiB  # a whole number of 2 MiB: nothing left
    assert reserved_bytes([int(17.5 * MiB)]) == 18 * MiB
    # 12.5 MiB takes a 14 MiB segment; the 1.5 MiB left is split off and a 1.2 MiB tensor fits in it
    assert reserved_bytes([int(12.5 * MiB), int(1.2 * MiB)]) == 14 * MiB
    # 17.5 MiB leaves 0.5 MiB (not more than 1 MiB: not split), so the next 0.9 MiB opens a small segment
    assert reserved_bytes([int(17.5 * MiB), int(0.9 * MiB)]) == 18 * MiB + 2 * MiB


def test_mid_sized_requests_share_20_mib_segments() -> None:
    # 9 + 8 MiB in one 20 MiB segment, 3 MiB left that the next 9 MiB cannot take: a second segment
    assert reserved_bytes([9 * MiB, 8 * MiB] * 2) == 40 * MiB
    assert overhead_bytes([9 * MiB, 8 * MiB] * 2) == 6 * MiB
    # 10 MiB is not under kMinLargeAlloc: rounded on its own, no 20 MiB segment
    assert reserved_bytes([10 * MiB]) == 10 * MiB


def test_small_pool_packs_2_mib_segments() -> None:
    assert reserved_bytes([1 * MiB, 1 * MiB, 1 * MiB]) == 4 * MiB  # 1 MiB is still a small request
    assert reserved_bytes([100] * 4096) == 2 * MiB  # each rounded to 512 B: 4096 x 512 B = 2 MiB
    assert reserved_bytes([100] * 4097) == 4 * MiB
    assert reserved_bytes([0, -5]) == 0 == overhead_bytes([])


def test_sglang_weight_tensors_add_up_to_the_priced_bytes() -> None:
    # engines/sglang/allocations.py splits a packed weight into its data and scale tensors: together they are
    # exactly what WeightFormat.matrix_bytes prices, in every format
    from kvbudget.engines.weight_tensors import parts as _parts
    from kvbudget.model.weights import parse_weight_format

    for name in ("fp8", "int8", "gptq", "awq", "nf4", "mxfp4", "nvfp4"):
        fmt = parse_weight_format(name)
        for rows, cols in ((2304, 4096), (1000, 1000), (7, 129)):
            assert sum(_parts(fmt, rows, cols)) == fmt.matrix_bytes(rows, cols), (name, rows, cols)


def test_a_freed_block_merges_with_its_free_neighbours_and_is_reused() -> None:
    from kvbudget.torch_alloc import Free, allocated_bytes, usage

    # three 6 MiB tensors in one 20 MiB segment (2 MiB split off); the first two freed merge into one 12 MiB block,
    # which an 11 MiB request takes (the 1 MiB left stays with it): no new segment
    steps = [6 * MiB, 6 * MiB, 6 * MiB, Free(0), Free(1), 11 * MiB]
    assert usage(steps) == (20 * MiB, 6 * MiB + 12 * MiB)
    # without the merge the 11 MiB would need a segment of its own (12 MiB): freeing only one of them shows it
    assert reserved_bytes([6 * MiB, 6 * MiB, 6 * MiB, Free(0), 11 * MiB]) == 20 * MiB + 12 * MiB
    # the smallest free block that holds a request takes it: 6 MiB goes to the freed 8 MiB, not the 4 MiB tail
    assert usage([8 * MiB, 8 * MiB, Free(0), 6 * MiB]) == (20 * MiB, 8 * MiB + 6 * MiB)
    # a segment left with no live block is given back by empty_cache
    assert reserved_bytes([30 * MiB, Free(0)]) == 0 == allocated_bytes([30 * MiB, Free(0)])
    assert overhead_bytes([30 * MiB, 9 * MiB, Free(0)]) == 20 * MiB - 9 * MiB


def test_allocated_bytes_count_the_block_as_cut() -> None:
    from kvbudget.torch_alloc import allocated_bytes

    # memory_allocated() counts the block: a remainder of 1 MiB or less stays in it, a larger one is split off
    assert allocated_bytes([int(17.5 * MiB)]) == 18 * MiB  # 0.5 MiB left in the block
    assert allocated_bytes([259 * MiB]) == 260 * MiB  # rounded to 2 MiB: exactly 1 MiB left, not split
    assert allocated_bytes([int(12.5 * MiB)]) == int(12.5 * MiB)  # 1.5 MiB split off: reserved, not allocated
    assert reserved_bytes([int(12.5 * MiB)]) == 14 * MiB
    assert allocated_bytes([100]) == 512  # kMinBlockSize
