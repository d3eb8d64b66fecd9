"""Replay requests through the scheduler: by engine step (``arrival_step``; the traces recorded from vLLM's own
scheduler) or by time (``arrival`` in seconds, each step lasting what the step-time model says). A request that
names another in ``after`` (the next turn of a conversation) arrives ``delay`` after that one finishes."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from ..units import InputError
from .kv import KV
from .scheduler import Request, Scheduler, SchedulerSettings, StepRecord
from .timing import StepTime
from .trace import RequestSpec

MAX_STEPS = 2_000_000
_DROPPED: dict[str, int] = {}  # the scheduled map of a step kept without its detail (one shared, never written)


@dataclass(frozen=True)
class Replay:
    settings: SchedulerSettings
    capacity_tokens: int
    steps: tuple[StepRecord, ...]
    requests: tuple[Request, ...]  # in the order they arrived
    arrivals: tuple[float, ...]  # each request's arrival (seconds, or steps), same order
    rejected: tuple[tuple[str, str], ...]  # (request id, why) for requests the engine refuses outright
    step_start: tuple[float, ...]  # when each step starts (seconds, or its step number)
    step_end: tuple[float, ...]  # when each step ends (seconds, or step number + 1)
    evictions: int  # cached prefix blocks handed out again
    timed: bool
    query_blocks: int = 0  # blocks the prefix-cache lookups spanned


def _refusal(spec: RequestSpec, settings: SchedulerSettings, kv: KV) -> str | None:
    total = spec.prompt_len + spec.output_len
    if total > settings.max_model_len:
        return (f"prompt {spec.prompt_len:,} + output {spec.output_len:,} tokens > max_model_len "
                f"{settings.max_model_len:,}")
    if kv.reserve(total) > kv.capacity_tokens:
        reserve = settings.max_model_len if settings.policy == "contiguous-max" else total
        return f"{reserve:,} tokens are more than the whole KV cache holds ({kv.capacity_tokens:,} token slots)"
    return None


def steps_floor(specs: Iterable[RequestSpec], settings: SchedulerSettings, num_blocks: int) -> tuple[int, int, int]:
    """A lower bound on the engine steps a replay takes (with the requests it counts running at once at most, and
    their output tokens): each step samples at most one token per running request,
    and a request whose prompt is fresh ids (a count: no block of it is shared) holds its prompt's blocks while it
    decodes, so no more run at once than the pool holds of the shortest such prompt (nor than max_num_seqs).
    Requests given as token ids (which may share cached blocks) are left out. 0 for a model without a
    full-attention group (a sliding window holds less than the prompt)."""
    if settings.groups and not any(g.kind == "full_attention" for g in settings.groups):
        return 0, 0, 0
    fresh = [r for r in specs if isinstance(r.prompt, range) and r.prompt_len + r.output_len <= settings.max_model_len]
    if not fresh:
        return 0, 0, 0
    slots = (num_blocks - 1) * settings.block_size
    shortest = -(-(min(r.prompt_len for r in fresh) + 1) // settings.block_size) * settings.block_size
    at_once = max(min(settings.max_num_seqs, slots // shortest), 1)
    outputs = sum(r.output_len for r in fresh)
    return max(outputs // at_once, max(r.output_len for r in fresh)), at_once, outputs


def replay(specs: Iterable[RequestSpec], settings: SchedulerSettings, num_blocks: int, *,
           step_time: StepTime | None = None, on_step: Callable[[int, int], None] | None = None,
           detail: bool = True) -> Replay:
    """Run every request to completion (or refusal). ``on_step(steps, finished)`` reports progress. ``detail=False``
    keeps each step's counts but not which requests it scheduled, preempted or finished (those maps held about 60
    bytes per output token: 4 GB on a million-request trace)."""
    timed = step_time is not None
    sched = Scheduler(settings, num_blocks)
    heap: list[tuple[float, int, RequestSpec]] = []
    followers: dict[str, list[RequestSpec]] = {}
    order = 0
    for spec in specs:
        if spec.after is None:
            heap.append((spec.arrival if timed else float(spec.arrival_step or 0), order, spec))
        else:
            followers.setdefault(spec.after, []).append(spec)
        order += 1
    heapq.heapify(heap)
    added: list[Request] = []
    arrivals: list[float] = []
    rejected: list[tuple[str, str]] = []
    steps: list[StepRecord] = []
    starts: list[float] = []
    ends: list[float] = []
    now, done = 0.0, 0

    def release(rid: str, at: float) -> None:
        nonlocal order
        for f in followers.pop(rid, ()):
            heapq.heappush(heap, (at + f.delay, order, f))
            order += 1

    while heap or sched.running or sched.waiting:
        while heap and heap[0][0] <= now:
            at, _, spec = heapq.heappop(heap)
            why = _refusal(spec, settings, sched.kv)
            if why:
                rejected.append((spec.id, why))
                release(spec.id, at)  # the conversation goes on without this turn's answer
                continue
            added.append(sched.add(spec))
            arrivals.append(at)
        if not (sched.running or sched.waiting):
            if heap:
                now = heap[0][0]
                if not timed:
                    sched.step_no = int(now)
            continue
        starts.append(now)
        record = sched.step()
        steps.append(record if detail else replace(record, scheduled=_DROPPED, preempted=(), finished=()))
        dt = step_time.seconds(sum(record.scheduled.values()), record.context_read) if step_time else 1.0
        now = now + dt if timed else float(sched.step_no)
        ends.append(now)
        for rid in record.finished:
            release(rid, now)
        done += len(record.finished)
        if on_step is not None:
            on_step(len(steps), done)
        if len(steps) >= MAX_STEPS:
            raise InputError(f"the replay passed {MAX_STEPS:,} engine steps; replay fewer requests")
        if not record.scheduled and not sched.running:
            first = sched.waiting[0].spec
            raise InputError(f"request {first.id} can never be scheduled (prompt {first.prompt_len:,} tokens; "
                             f"token budget {settings.max_num_batched_tokens:,} per step with chunked prefill "
                             f"{'on' if settings.enable_chunked_prefill else 'off'})")
    return Replay(settings, sched.kv.capacity_tokens, tuple(steps), tuple(added), tuple(arrivals), tuple(rejected),
                  tuple(starts), tuple(ends), sched.kv.evictions, timed, sched.stats.query_blocks)
