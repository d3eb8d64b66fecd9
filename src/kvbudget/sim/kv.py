"""Where a scheduled request's KV goes: the paged pool with prefix caching (vLLM's ``KVCacheManager``,
vllm/v1/core/kv_cache_manager.py 0.33.0), or a contiguous reservation per request as systems before PagedAttention
made (the maximum length, or - an oracle no real system has - exactly the length the request will reach)."""

from __future__ import annotations

from hashlib import blake2b
from typing import TYPE_CHECKING, Any, Protocol

from .pool import Block, BlockPool

if TYPE_CHECKING:
    from .scheduler import Request

POLICIES = ("paged", "contiguous-max", "contiguous-exact")


class KV(Protocol):
    capacity_tokens: int

    def hit(self, req: Request) -> tuple[Any, int]: ...  # (the cached blocks to resume from, their tokens)
    def allocate(self, req: Request, new_tokens: int, hit: Any, admit: bool = False) -> bool: ...
    def free(self, req: Request) -> None: ...
    def slots(self, req: Request) -> int: ...  # token slots the request holds
    def waste(self, req: Request) -> int: ...  # of those, slots that hold no computed token
    def reserve(self, tokens: int) -> int: ...  # slots a request of ``tokens`` tokens holds at its peak, alone
    def used_slots(self) -> int: ...  # token slots held by requests (shared blocks once)
    @property
    def evictions(self) -> int: ...


class Keys:
    """Prefix keys: a full block's key is a digest of (its parent's key, its token ids), chained as vLLM chains a hash
    of the same pair (kv_cache_utils.hash_block_tokens), so equal keys mean equal prefixes. A 128-bit BLAKE2b digest:
    no table of every block ever seen (interning them held about 20 bytes per token replayed, 4 GB over 200
    million), and no collision in any replay this size (about 2^-80 for 10^12 blocks)."""

    def extend(self, keys: list[int], req: Request, block_size: int) -> None:
        tokens = req.tokens
        for i in range(len(keys), len(tokens) // block_size):
            parent = (keys[i - 1] if i else 0).to_bytes(16, "little")
            digest = blake2b(parent + tokens[i * block_size:(i + 1) * block_size].tobytes(), digest_size=16).digest()
            keys.append(int.from_bytes(digest, "little"))


class PagedKV:
    def __init__(self, num_blocks: int, block_size: int, max_model_len: int, caching: bool) -> None:
        self.pool = BlockPool(num_blocks, caching)
        self.bs, self.max_len, self.caching = block_size, max_model_len, caching
        self.capacity_tokens = self.pool.usable * block_size
        self._keys = Keys()

    @property
    def evictions(self) -> int:
        return self.pool.evictions

    def _keys_of(self, req: Request) -> list[int]:
        self._keys.extend(req.keys, req, self.bs)
        return req.keys

    def hit(self, req: Request) -> tuple[list[Block], int]:
        """get_computed_blocks: the longest run of cached full blocks from the start, at most num_tokens - 1 tokens
        (the last prompt token is always computed again, to sample from)."""
        if not self.caching:
            return [], 0
        found: list[Block] = []
        for key in self._keys_of(req)[:(len(req.tokens) - 1) // self.bs]:
            block = self.pool.lookup(key)
            if block is None:
                break
            found.append(block)
        return found, len(found) * self.bs

    def allocate(self, req: Request, new_tokens: int, hit: list[Block], admit: bool = False) -> bool:
        """allocate_slots: blocks for the computed prefix plus ``new_tokens``, or False when the free queue is short
        (a hit block waiting in the free queue counts against it too); full blocks are cached as they are allocated.
        ``admit``: a waiting request is admitted only if its whole sequence so far fits, not just the first chunk
        (``full_sequence_must_fit``, on by default in 0.33.0: SchedulerConfig.scheduler_reserve_full_isl)."""
        bs = self.bs
        computed = req.computed + len(hit) * bs
        evictable = sum(1 for b in hit if b.ref_cnt == 0)
        held = len(hit) + len(req.blocks)
        if admit and max(-(-min(len(req.tokens), self.max_len) // bs) - held, 0) + evictable > self.pool.num_free():
            return False
        new = -(-min(computed + new_tokens, self.max_len) // bs) - held
        if max(new, 0) + evictable > self.pool.num_free():
            return False
        self.pool.touch(hit)
        req.blocks.extend(hit)
        if new > 0:
            req.blocks.extend(self.pool.take(new))
        if self.caching:
            full = min(computed + new_tokens, len(req.tokens)) // bs
            keys = self._keys_of(req)
            for i in range(req.cached_blocks, full):
                self.pool.cache(req.blocks[i], keys[i])
            req.cached_blocks = max(req.cached_blocks, full)
        return True

    def free(self, req: Request) -> None:
        self.pool.release(req.blocks[::-1])  # tail blocks evicted first (kv_cache_manager.free)
        req.blocks.clear()
        req.cached_blocks = 0

    def slots(self, req: Request) -> int:
        return len(req.blocks) * self.bs

    def reserve(self, tokens: int) -> int:
        return -(-tokens // self.bs) * self.bs

    def waste(self, req: Request) -> int:
        return self.slots(req) - req.computed

    def used_slots(self) -> int:
        return self.pool.num_used() * self.bs


class ContiguousKV:
    """One contiguous region per request, reserved whole at admission: ``max_model_len`` tokens
    (``contiguous-max``, as systems before PagedAttention did) or the prompt plus the output the request will
    generate (``contiguous-exact``: an oracle that knows each output length in advance). No prefix caching.
    ``windows``: per KV-cache group of a hybrid model, its sliding window (0: full attention): a region per group,
    a sliding group's no longer than its window."""

    def __init__(self, capacity_tokens: int, max_model_len: int, exact: bool, windows: tuple[int, ...] = (0,)) -> None:
        self.capacity_tokens, self.max_len, self.exact = capacity_tokens, max_model_len, exact
        self.windows = windows or (0,)
        self._used = 0
        self._held: dict[int, int] = {}

    @property
    def evictions(self) -> int:
        return 0

    def _size(self, tokens: int) -> int:
        return sum(min(tokens, w) if w else tokens for w in self.windows)

    def hit(self, req: Request) -> tuple[list[Block], int]:
        return [], 0

    def allocate(self, req: Request, new_tokens: int, hit: list[Block], admit: bool = False) -> bool:
        if id(req) in self._held:
            return True
        size = self.reserve(req.spec.prompt_len + req.spec.output_len)
        if self._used + size > self.capacity_tokens:
            return False
        self._held[id(req)] = size
        self._used += size
        return True

    def free(self, req: Request) -> None:
        self._used -= self._held.pop(id(req), 0)

    def slots(self, req: Request) -> int:
        return self._held.get(id(req), 0)

    def reserve(self, tokens: int) -> int:
        return self._size(tokens if self.exact else self.max_len)

    def waste(self, req: Request) -> int:
        return self.slots(req) - self._size(req.computed)

    def used_slots(self) -> int:
        return self._used
