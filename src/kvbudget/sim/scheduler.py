"""vLLM's V1 scheduler over a paged block pool: FCFS, a per-step token budget with chunked prefill, one decode
token per running request per step, preemption by recompute. Each rule cites vLLM 0.33.0's
``vllm/v1/core/sched/scheduler.py`` (``Scheduler.schedule``, ``update_from_output``) and
``vllm/v1/core/kv_cache_manager.py`` (``get_computed_blocks``, ``allocate_slots``, ``free``).

The synchronous scheduler (no async scheduling, no speculative decoding, no KV connector), on a single
full-attention KV cache group.
"""

from __future__ import annotations

from array import array
from collections import deque
from dataclasses import dataclass, field

from .pool import Block, BlockPool
from .trace import RequestSpec


@dataclass(frozen=True)
class SchedulerSettings:
    block_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    enable_prefix_caching: bool = True
    enable_chunked_prefill: bool = True


@dataclass(eq=False)
class Request:
    """A request's state inside the scheduler."""

    spec: RequestSpec
    tokens: array  # prompt, then the tokens generated so far
    computed: int = 0  # tokens whose KV is in the cache
    blocks: list[Block] = field(default_factory=list)
    cached_blocks: int = 0  # of ``blocks``, how many are registered in the prefix cache
    preemptions: int = 0
    added_step: int = 0
    first_scheduled_step: int | None = None
    first_token_step: int | None = None
    finished_step: int | None = None
    token_steps: list[int] = field(default_factory=list)  # the step that produced each output token

    @property
    def generated(self) -> int:
        return len(self.tokens) - self.spec.prompt_len


@dataclass
class PrefixStats:
    """vLLM's PrefixCacheStats (v1/metrics/stats.py): lookups at admission, first admissions apart from
    re-admissions after a preemption."""

    requests: int = 0
    queries: int = 0
    hits: int = 0
    preempted_requests: int = 0
    preempted_queries: int = 0
    preempted_hits: int = 0


@dataclass(frozen=True)
class StepRecord:
    step: int
    running: int
    waiting: int
    scheduled: dict[str, int]  # request id -> tokens computed this step
    preempted: tuple[str, ...]
    finished: tuple[str, ...]
    blocks_used: int  # blocks held by requests (the null block and free cached blocks not counted)
    tokens_held: int  # tokens whose KV those blocks hold
    prefix_queries: int  # cumulative
    prefix_hits: int  # cumulative
    preemptions: int  # cumulative


class Keys:
    """Prefix keys: a full block's key stands for (its parent's key, its token ids), interned to an integer, so equal
    keys mean equal prefixes (vLLM chains a hash of the same pair: kv_cache_utils.hash_block_tokens)."""

    def __init__(self) -> None:
        self._ids: dict[tuple[int, bytes], int] = {}

    def extend(self, keys: list[int], tokens: array, block_size: int) -> None:
        """Append to ``keys`` the keys of the full blocks of ``tokens`` not yet keyed."""
        for i in range(len(keys), len(tokens) // block_size):
            pair = (keys[i - 1] if i else -1, tokens[i * block_size:(i + 1) * block_size].tobytes())
            key = self._ids.get(pair)
            if key is None:
                key = self._ids[pair] = len(self._ids)
            keys.append(key)


class Scheduler:
    def __init__(self, settings: SchedulerSettings, num_blocks: int) -> None:
        self.s = settings
        self.pool = BlockPool(num_blocks, settings.enable_prefix_caching)
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.stats = PrefixStats()
        self.preemptions = 0
        self.step_no = 0
        self._keys = Keys()
        self._req_keys: dict[int, list[int]] = {}

    # --- the KV cache manager -------------------------------------------------------------------------------------

    def _keys_of(self, req: Request) -> list[int]:
        keys = self._req_keys.setdefault(id(req), [])
        self._keys.extend(keys, req.tokens, self.s.block_size)
        return keys

    def _cache_hit(self, req: Request) -> list[Block]:
        """get_computed_blocks: the longest run of cached full blocks from the start, at most num_tokens - 1 tokens
        (the last token is always computed again, to sample from)."""
        if not self.s.enable_prefix_caching:
            return []
        keys = self._keys_of(req)
        hit: list[Block] = []
        for key in keys[:(len(req.tokens) - 1) // self.s.block_size]:
            block = self.pool.lookup(key)
            if block is None:
                break
            hit.append(block)
        return hit

    def _allocate(self, req: Request, new_tokens: int, hit: list[Block]) -> bool:
        """allocate_slots: blocks for the computed prefix plus ``new_tokens``, or False when the free queue is short
        (a hit block waiting in the free queue counts against it too)."""
        bs = self.s.block_size
        computed = req.computed + len(hit) * bs
        need = min(computed + new_tokens, self.s.max_model_len)
        new = -(-need // bs) - len(hit) - len(req.blocks)
        evictable = sum(1 for b in hit if b.ref_cnt == 0)
        if max(new, 0) + evictable > self.pool.num_free():
            return False
        self.pool.touch(hit)
        req.blocks.extend(hit)
        if new > 0:
            req.blocks.extend(self.pool.take(new))
        if self.s.enable_prefix_caching:
            full = min(computed + new_tokens, len(req.tokens)) // bs
            keys = self._keys_of(req)
            for i in range(req.cached_blocks, full):
                self.pool.cache(req.blocks[i], keys[i])
            req.cached_blocks = max(req.cached_blocks, full)
        return True

    def _free(self, req: Request) -> None:
        self.pool.release(req.blocks[::-1])  # tail blocks evicted first
        req.blocks = []
        req.cached_blocks = 0

    # --- the scheduler --------------------------------------------------------------------------------------------

    def add(self, spec: RequestSpec) -> Request:
        req = Request(spec, array("q", spec.prompt), added_step=self.step_no)
        self.waiting.append(req)
        return req

    def _preempt(self, req: Request) -> None:
        """_preempt_request: free its blocks, forget its computed tokens, first in the waiting queue."""
        self._free(req)
        req.computed = 0
        req.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(req)

    def step(self) -> StepRecord:
        """One ``schedule()`` and ``update_from_output()`` with every finished prefill sampling its next token."""
        s = self.s
        budget = s.max_num_batched_tokens
        scheduled: dict[int, tuple[Request, int]] = {}
        preempted: list[Request] = []
        # running requests first, in order
        i = 0
        while i < len(self.running) and budget > 0:
            req = self.running[i]
            n = min(len(req.tokens) - req.computed, budget, s.max_model_len - req.computed)
            if n <= 0:
                i += 1
                continue
            while True:
                if self._allocate(req, n, []):
                    ok = True
                    break
                victim = self.running.pop()  # FCFS: the last admitted running request
                self._preempt(victim)
                preempted.append(victim)
                if victim is req:
                    ok = False
                    break
            if not ok:
                break
            scheduled[id(req)] = (req, n)
            budget -= n
            i += 1
        # then waiting requests, unless a preemption happened in this step
        if not preempted:
            while budget > 0 and self.waiting and len(self.running) < s.max_num_seqs:
                req = self.waiting[0]
                hit = self._cache_hit(req) if req.computed == 0 else []
                computed = req.computed + len(hit) * s.block_size
                n = len(req.tokens) - computed
                if not s.enable_chunked_prefill and n > budget:
                    break
                n = min(n, budget)
                if not self._allocate(req, n, hit):
                    break
                self.waiting.popleft()
                if req.computed == 0:
                    self._record_lookup(req, len(hit) * s.block_size)
                req.computed = computed
                self.running.append(req)
                if req.first_scheduled_step is None:
                    req.first_scheduled_step = self.step_no
                scheduled[id(req)] = (req, n)
                budget -= n
        # the model runs; every request whose prompt (and earlier tokens) is now all computed samples one token
        finished: list[Request] = []
        for req, n in scheduled.values():
            req.computed += n
            if req.computed >= len(req.tokens):
                req.tokens.append(req.spec.output[req.generated])
                req.token_steps.append(self.step_no)
                if req.first_token_step is None:
                    req.first_token_step = self.step_no
                if req.generated >= req.spec.output_len:
                    finished.append(req)
        for req in finished:
            self.running.remove(req)
            self._free(req)
            req.finished_step = self.step_no
            self._req_keys.pop(id(req), None)
        record = StepRecord(
            self.step_no, len(self.running), len(self.waiting),
            {r.spec.id: n for r, n in scheduled.values()}, tuple(r.spec.id for r in preempted),
            tuple(r.spec.id for r in finished), self.pool.num_used(),
            sum(r.computed for r in self.running), self.stats.queries + self.stats.preempted_queries,
            self.stats.hits + self.stats.preempted_hits, self.preemptions)
        self.step_no += 1
        return record

    def _record_lookup(self, req: Request, hits: int) -> None:
        st = self.stats
        if req.preemptions:
            st.preempted_requests += 1
            st.preempted_queries += len(req.tokens)
            st.preempted_hits += hits
        else:
            st.requests += 1
            st.queries += len(req.tokens)
            st.hits += hits
