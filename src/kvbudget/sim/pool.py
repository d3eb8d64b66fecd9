"""A paged KV block pool with prefix caching, following vLLM's V1 ``BlockPool`` (vllm/v1/core/block_pool.py,
0.33.0).

- Block 0 is the null block: never handed out, so a pool of ``num_blocks`` holds ``num_blocks - 1`` usable blocks.
- A full block is identified by a hash chained with its parent block's hash (kv_cache_utils.hash_block_tokens): here
  a 128-bit digest of the pair (parent key, the block's token ids) (``kv.Keys``), so two blocks share a key only when
  their whole prefixes are equal.
- Free blocks wait in one queue. Freed blocks without a hash go to its front (reused first, LIFO); freed blocks that
  hold a cached prefix go to its back (FIFO: the least recently freed cached block is evicted first); a block taken
  from the queue loses its cached prefix (``_maybe_evict_cached_block``). A cache hit on a free block takes it out of
  the queue (``touch``).
- A request's blocks are freed tail first, so a request's last blocks are evicted before its first ones
  (kv_cache_manager.free).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field


@dataclass
class Block:
    id: int
    ref_cnt: int = 0
    key: int | None = None  # the cached prefix this block holds (None: not cached)


@dataclass
class BlockPool:
    num_blocks: int
    caching: bool = True
    blocks: list[Block] = field(init=False)
    free: OrderedDict[int, None] = field(init=False)  # block ids, front = next handed out
    cached: dict[int, dict[int, Block]] = field(init=False)  # prefix key -> the blocks holding it, first found first
    evictions: int = 0  # cached blocks handed out again (their prefix lost)

    def __post_init__(self) -> None:
        if self.num_blocks < 2:
            raise ValueError("a block pool needs at least 2 blocks (one is the null block)")
        self.blocks = [Block(i) for i in range(self.num_blocks)]
        self.free = OrderedDict((i, None) for i in range(1, self.num_blocks))
        self.cached = {}

    @property
    def usable(self) -> int:
        return self.num_blocks - 1

    def num_free(self) -> int:
        return len(self.free)

    def num_used(self) -> int:
        return self.usable - len(self.free)

    def lookup(self, key: int) -> Block | None:
        holders = self.cached.get(key) if self.caching else None
        return next(iter(holders.values())) if holders else None

    def take(self, n: int) -> list[Block]:
        """``n`` blocks from the front of the free queue (a cached one loses its prefix)."""
        if n > len(self.free):
            raise ValueError(f"cannot take {n} blocks: {len(self.free)} free")
        out = []
        for _ in range(n):
            bid, _ = self.free.popitem(last=False)
            block = self.blocks[bid]
            if block.key is not None:
                holders = self.cached[block.key]
                del holders[block.id]
                if not holders:
                    del self.cached[block.key]
                block.key = None
                self.evictions += 1
            block.ref_cnt = 1
            out.append(block)
        return out

    def touch(self, blocks: list[Block]) -> None:
        """A prefix-cache hit: one more reference, and out of the free queue if it was waiting there."""
        for block in blocks:
            if block.ref_cnt == 0:
                del self.free[block.id]
            block.ref_cnt += 1

    def release(self, ordered: list[Block]) -> None:
        """Drop one reference of each block, ``ordered`` first-to-evict first (block_pool.free_blocks)."""
        first: list[Block] = []
        last: list[Block] = []
        for block in ordered:
            block.ref_cnt -= 1
            if block.ref_cnt == 0:
                (first if block.key is None or not self.caching else last).append(block)
        for block in reversed(first):  # prepended as a group, keeping their order at the front
            self.free[block.id] = None
            self.free.move_to_end(block.id, last=False)
        for block in last:
            self.free[block.id] = None

    def cache(self, block: Block, key: int) -> None:
        """Record that ``block`` (full) holds prefix ``key`` (a key two blocks hold is found in the first of them)."""
        if not self.caching or block.key is not None:
            return
        block.key = key
        self.cached.setdefault(key, {})[block.id] = block
