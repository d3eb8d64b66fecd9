"""vLLM's V1 scheduler over a paged block pool: FCFS, a per-step token budget with chunked prefill, one decode
token per running request per step, preemption by recompute. Each rule cites vLLM 0.33.0's
``vllm/v1/core/sched/scheduler.py`` (``Scheduler.schedule``, ``update_from_output``) and
``vllm/v1/core/kv_cache_manager.py`` (``get_computed_blocks``, ``allocate_slots``, ``free``).

The synchronous scheduler (no async scheduling, no speculative decoding, no KV connector), on one full-attention
KV-cache group (``kv.py``) or the full-attention and sliding-window groups of a hybrid model (``hybrid.py``).
"""

from __future__ import annotations

from array import array
from collections import deque
from dataclasses import dataclass, field

from .hybrid import Group, HybridPagedKV
from .kv import KV, ContiguousKV, PagedKV
from .pool import Block
from .trace import RequestSpec


@dataclass(frozen=True)
class SchedulerSettings:
    block_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    enable_prefix_caching: bool = True
    enable_chunked_prefill: bool = True
    policy: str = "paged"  # or contiguous-max / contiguous-exact (kv.POLICIES)
    groups: tuple[Group, ...] = ()  # the KV-cache groups of a hybrid model (none: one full-attention group)


@dataclass(eq=False, slots=True)
class Request:
    """A request's state inside the scheduler. Its token ids are made when it reaches the head of the waiting queue
    and let go when it finishes, so that a million queued or finished requests hold none (``generated`` is kept)."""

    spec: RequestSpec
    tokens: array[int] = field(default_factory=lambda: array("q"))  # prompt, then the tokens generated so far
    computed: int = 0  # tokens whose KV is in the cache
    blocks: list[Block] = field(default_factory=list)
    tables: list[list[Block]] = field(default_factory=list)  # a block table per KV-cache group (hybrid models)
    cached_blocks: int = 0  # of ``blocks``, how many are registered in the prefix cache
    keys: list[int] = field(default_factory=list)  # prefix keys of its full blocks
    preemptions: int = 0
    added_step: int = 0
    first_scheduled_step: int | None = None
    first_token_step: int | None = None
    last_token_step: int | None = None
    finished_step: int | None = None
    generated: int = 0  # output tokens sampled so far

    def start(self) -> None:
        """Its token ids, made as it is first looked at for admission (the prompt; a preempted request keeps its own)."""
        if not self.tokens:
            self.tokens = array("q", self.spec.prompt)


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
    query_blocks: int = 0  # blocks the looked-up tokens span (both kinds of lookup); hits are whole blocks


@dataclass(frozen=True, slots=True)
class StepRecord:
    step: int
    running: int  # requests running in this step (those that finish in it included)
    waiting: int
    scheduled: dict[str, int]  # request id -> tokens computed this step
    preempted: tuple[str, ...]
    finished: tuple[str, ...]
    slots_used: int  # token slots held by requests (blocks x block size when paged; shared blocks once)
    tokens_held: int  # tokens whose KV is in the cache, summed over running requests
    waste: int  # slots running requests hold beyond their computed tokens (partial last blocks, reservations)
    context_read: int  # tokens of KV the step's attention reads: each scheduled request's tokens up to its last
    prefix_queries: int  # cumulative
    prefix_hits: int  # cumulative
    preemptions: int  # cumulative


class Scheduler:
    def __init__(self, settings: SchedulerSettings, num_blocks: int) -> None:
        self.s = settings
        self.kv: KV
        if settings.policy != "paged":
            self.kv = ContiguousKV((num_blocks - 1) * settings.block_size, settings.max_model_len,
                                   settings.policy == "contiguous-exact", tuple(g.window for g in settings.groups))
        elif settings.groups and settings.groups != (Group("full_attention"),):
            self.kv = HybridPagedKV(num_blocks, settings.block_size, settings.max_model_len,
                                    settings.enable_prefix_caching, settings.groups, settings.max_num_batched_tokens)
        else:
            self.kv = PagedKV(num_blocks, settings.block_size, settings.max_model_len, settings.enable_prefix_caching)
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.stats = PrefixStats()
        self.preemptions = 0
        self.step_no = 0

    # --- the scheduler --------------------------------------------------------------------------------------------

    def add(self, spec: RequestSpec) -> Request:
        req = Request(spec, added_step=self.step_no)
        self.waiting.append(req)
        return req

    def _preempt(self, req: Request) -> None:
        """_preempt_request: free its blocks, forget its computed tokens, first in the waiting queue."""
        self.kv.free(req)
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
            n = min(len(req.tokens) - req.computed, budget, s.max_model_len - req.computed - 1)
            if n <= 0:
                i += 1
                continue
            while True:
                if self.kv.allocate(req, n, []):
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
                req.start()
                hit, hit_tokens = self.kv.hit(req) if req.computed == 0 else ([], 0)
                computed = req.computed + hit_tokens
                n = len(req.tokens) - computed
                if not s.enable_chunked_prefill and n > budget:
                    break
                n = min(n, budget)
                if not self.kv.allocate(req, n, hit, admit=True):
                    break
                self.waiting.popleft()
                if req.computed == 0 and s.enable_prefix_caching and s.policy == "paged":
                    self._record_lookup(req, hit_tokens)
                req.computed = computed
                self.running.append(req)
                if req.first_scheduled_step is None:
                    req.first_scheduled_step = self.step_no
                scheduled[id(req)] = (req, n)
                budget -= n
        # the model runs; every request whose prompt (and earlier tokens) is now all computed samples one token
        running, waiting = len(self.running), len(self.waiting)  # as the step ran (vLLM counts after schedule())
        finished: list[Request] = []
        context_read = 0
        for req, n in scheduled.values():
            req.computed += n
            context_read += req.computed
            if req.computed >= len(req.tokens):
                req.tokens.append(req.spec.output[req.generated])
                req.generated += 1
                req.last_token_step = self.step_no
                if req.first_token_step is None:
                    req.first_token_step = self.step_no
                if req.generated >= req.spec.output_len:
                    finished.append(req)
        for req in finished:
            self.running.remove(req)
            self.kv.free(req)
            req.finished_step = self.step_no
            req.keys.clear()  # emptied in place: a new empty list and array per finished request held 13 MB a 100,000
            del req.tokens[:]
        record = StepRecord(
            self.step_no, running, waiting,
            {r.spec.id: n for r, n in scheduled.values()}, tuple(r.spec.id for r in preempted),
            tuple(r.spec.id for r in finished), self.kv.used_slots(), sum(r.computed for r in self.running),
            sum(self.kv.waste(r) for r in self.running), context_read,
            self.stats.queries + self.stats.preempted_queries,
            self.stats.hits + self.stats.preempted_hits, self.preemptions)
        self.step_no += 1
        return record

    def _record_lookup(self, req: Request, hits: int) -> None:
        st = self.stats
        st.query_blocks += -(-len(req.tokens) // self.s.block_size)
        if req.preemptions:
            st.preempted_requests += 1
            st.preempted_queries += len(req.tokens)
            st.preempted_hits += hits
        else:
            st.requests += 1
            st.queries += len(req.tokens)
            st.hits += hits
