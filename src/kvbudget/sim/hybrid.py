"""The paged KV cache of a model whose layers fall into several KV-cache groups (full attention and sliding window),
all drawing blocks of one size from one pool: vLLM's ``HybridKVCacheCoordinator`` over a ``FullAttentionManager``
or ``SlidingWindowManager`` per group (vllm/v1/core/kv_cache_coordinator.py, single_type_kv_cache_manager.py,
kv_cache_manager.py ``allocate_slots``, 0.33.0; the synchronous scheduler, no speculative decoding, dense prefix
cache retention, one block size for every group).

- A request holds a block table per group. A full-attention group keeps a block for every ``block_size`` tokens;
  a sliding-window group of window W frees, before each allocation, the blocks whose tokens all lie before the
  window of the next token (``get_num_skipped_tokens``: computed - W + 1 tokens) and puts the null block in their
  place (``remove_skipped_blocks``).
- Blocks needed (``get_num_blocks_to_allocate``): per group, the blocks for the tokens that need a slot, less the
  ones it holds or skips, plus the prefix hits waiting in the free queue; summed over the groups. The admission
  gate (``full_sequence_must_fit``) caps a sliding group's share at its per-request bound
  (``SlidingWindowSpec.max_admission_blocks_per_request``: the window - 1 tokens plus one step's token budget, plus
  one block).
- Prefix hits (``find_longest_cache_hit``): a full-attention group's cached blocks from the start; a sliding group's
  last ceil((W - 1) / block_size) contiguous cached blocks before the candidate length, searched right to left (or a
  shorter run from the start); groups of one spec must all hold a block; the length shrinks until every spec agrees.
- A full block is cached in every group (one key per group); freeing goes group by group, each table tail first,
  its leading null blocks skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .kv import Keys
from .pool import Block, BlockPool

if TYPE_CHECKING:
    from .scheduler import Request

KINDS = ("full_attention", "sliding_window")


@dataclass(frozen=True)
class Group:
    kind: str  # one of KINDS
    window: int = 0  # sliding window, in tokens

    def skipped(self, computed: int) -> int:
        """Tokens before the window of the next token (get_num_skipped_tokens)."""
        return max(0, computed - self.window + 1) if self.kind == "sliding_window" else 0


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class HybridPagedKV:
    def __init__(self, num_blocks: int, block_size: int, max_model_len: int, caching: bool,
                 groups: tuple[Group, ...], step_tokens: int) -> None:
        if not groups or any(g.kind not in KINDS or (g.kind == "sliding_window" and g.window < 1) for g in groups):
            raise ValueError(f"KV-cache groups must be full attention or sliding windows of >= 1 token: {groups}")
        self.pool = BlockPool(num_blocks, caching)
        self.bs, self.max_len, self.caching, self.groups = block_size, max_model_len, caching, groups
        self.capacity_tokens = self.pool.usable * block_size
        self.null = self.pool.blocks[0]
        self._keys = Keys()
        # admission cap of a sliding group (max_admission_blocks_per_request; one step in flight, synchronous)
        self._cap = [_cdiv(min(g.window - 1 + step_tokens, max_model_len), block_size) + 1
                     if g.kind == "sliding_window" else None for g in groups]
        # groups of one spec are looked up together (the coordinator's attention groups), full attention first
        specs: dict[Group, list[int]] = {}
        for i, g in enumerate(groups):
            specs.setdefault(g, []).append(i)
        self._specs = sorted(specs.items(), key=lambda item: item[0].kind != "full_attention")

    @property
    def evictions(self) -> int:
        return self.pool.evictions

    def _tables(self, req: Request) -> list[list[Block]]:
        if not req.tables:
            req.tables = [[] for _ in self.groups]
        return req.tables

    def _key(self, key: int, group: int) -> int:
        return key * len(self.groups) + group

    def _cached(self, key: int, ids: list[int]) -> list[Block] | None:
        out = []
        for g in ids:
            block = self.pool.lookup(self._key(key, g))
            if block is None:
                return None
            out.append(block)
        return out

    # --- prefix hits ----------------------------------------------------------------------------------------

    def hit(self, req: Request) -> tuple[list[list[Block]], int]:
        """get_computed_blocks: the longest prefix every group can resume from, at most num_tokens - 1 tokens."""
        tables: list[list[Block]] = [[] for _ in self.groups]
        if not self.caching:
            return tables, 0
        self._keys.extend(req.keys, req, self.bs)
        keys = req.keys
        length = (len(req.tokens) - 1) // self.bs * self.bs
        found: dict[Group, list[list[Block]]] = {}
        while True:
            current = length
            for spec, ids in self._specs:
                if spec.kind == "full_attention":
                    if spec not in found:
                        found[spec] = self._full_hit(keys, current // self.bs, ids)
                    current = min(current, len(found[spec][0]) * self.bs)
                else:
                    found[spec] = self._sliding_hit(keys, current // self.bs, ids, spec)
                    current = len(found[spec][0]) * self.bs
            if current >= length:
                break
            length = current
        n = length // self.bs
        for spec, ids in self._specs:
            for g, blocks in zip(ids, found[spec], strict=True):
                tables[g] = blocks[:n]
        return tables, length

    def _full_hit(self, keys: list[int], max_blocks: int, ids: list[int]) -> list[list[Block]]:
        out: list[list[Block]] = [[] for _ in ids]
        for key in keys[:max_blocks]:
            blocks = self._cached(key, ids)
            if blocks is None:
                break
            for table, block in zip(out, blocks, strict=True):
                table.append(block)
        return out

    def _sliding_hit(self, keys: list[int], max_blocks: int, ids: list[int], spec: Group) -> list[list[Block]]:
        need = _cdiv(spec.window - 1, self.bs)
        out = [[self.null] * max_blocks for _ in ids]
        run = 0
        for i in range(max_blocks - 1, -1, -1):
            blocks = self._cached(keys[i], ids)
            if blocks is None:
                run = 0
                continue
            for table, block in zip(out, blocks, strict=True):
                table[i] = block
            run += 1
            if run >= need:
                return [table[:i + run] for table in out]
        return [table[:run] for table in out]  # a run from the first block shorter than the window still resumes

    # --- allocation -----------------------------------------------------------------------------------------

    def _to_allocate(self, g: int, table: list[Block], tokens: int, hit: list[Block], computed: int,
                     capped: bool) -> int:
        required = _cdiv(tokens, self.bs)
        cap = self._cap[g]
        if capped and cap is not None:
            required = min(required, cap)
        skipped = self.groups[g].skipped(computed) // self.bs
        new = max(required - max(skipped, len(hit) + len(table)), 0)
        skipped_hits = max(0, skipped - len(table))
        return new + sum(1 for b in hit[skipped_hits:] if b.ref_cnt == 0 and b is not self.null)

    def _remove_skipped(self, table: list[Block], group: Group, computed: int) -> None:
        n = min(group.skipped(computed) // self.bs, len(table))
        freed = []
        for i in range(n - 1, -1, -1):
            if table[i] is self.null:
                break
            freed.append(table[i])
            table[i] = self.null
        if freed:
            self.pool.release(freed)

    def allocate(self, req: Request, new_tokens: int, hit: list[list[Block]], admit: bool = False) -> bool:
        tables = self._tables(req)
        hit = hit or [[] for _ in self.groups]
        computed = min(req.computed + len(hit[0]) * self.bs, self.max_len)  # every group's hit has one length
        if admit:
            full = min(len(req.tokens), self.max_len)
            if sum(self._to_allocate(g, t, full, hit[g], computed, True) for g, t in enumerate(tables)) > self.pool.num_free():
                return False
        slots = min(computed + new_tokens, self.max_len)
        for g, group in enumerate(self.groups):
            self._remove_skipped(tables[g], group, computed)
        if sum(self._to_allocate(g, t, slots, hit[g], computed, False) for g, t in enumerate(tables)) > self.pool.num_free():
            return False
        for g, group in enumerate(self.groups):
            table = tables[g]
            if hit[g]:  # add_local_computed_blocks: skipped hits become null blocks
                skipped = group.skipped(computed) // self.bs
                kept = hit[g][skipped:]
                self.pool.touch([b for b in kept if b is not self.null])
                table.extend([self.null] * skipped)
                table.extend(kept)
            more = _cdiv(slots, self.bs) - len(table)
            if more > 0:
                table.extend(self.pool.take(more))
        if self.caching:
            full_blocks = min(computed + new_tokens, len(req.tokens)) // self.bs
            if full_blocks > req.cached_blocks:
                self._keys.extend(req.keys, req, self.bs)
                for g, table in enumerate(tables):
                    for i in range(req.cached_blocks, full_blocks):
                        if table[i] is not self.null:
                            self.pool.cache(table[i], self._key(req.keys[i], g))
                req.cached_blocks = full_blocks
        return True

    def free(self, req: Request) -> None:
        for table in req.tables:
            start = 0
            while start < len(table) and table[start] is self.null:
                start += 1
            self.pool.release(table[start:][::-1])
        req.tables = []
        req.cached_blocks = 0

    def slots(self, req: Request) -> int:
        return sum(1 for t in req.tables for b in t if b is not self.null) * self.bs

    def reserve(self, tokens: int) -> int:
        return sum(min(_cdiv(tokens, self.bs), cap or _cdiv(tokens, self.bs)) for cap in self._cap) * self.bs

    def waste(self, req: Request) -> int:
        """Slots held that hold no computed token the group keeps: partial last blocks, and a sliding group's
        blocks still held below its window."""
        held = 0
        for table in req.tables:
            nulls = 0
            while nulls < len(table) and table[nulls] is self.null:
                nulls += 1
            held += (len(table) - nulls) * self.bs - max(req.computed - nulls * self.bs, 0)
        return held

    def used_slots(self) -> int:
        return self.pool.num_used() * self.bs
