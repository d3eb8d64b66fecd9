"""Replay requests through the scheduler: by engine step (traces recorded from a scheduler) or by time (arrivals in
seconds, each step lasting what the step-time model says)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..units import InputError
from .scheduler import Request, Scheduler, SchedulerSettings, StepRecord
from .trace import RequestSpec

MAX_STEPS = 5_000_000


@dataclass(frozen=True)
class Replay:
    steps: tuple[StepRecord, ...]
    requests: tuple[Request, ...]  # in arrival order
    rejected: tuple[tuple[str, str], ...]  # (request id, why) for requests the engine refuses outright
    step_seconds: tuple[float, ...] = ()  # duration of each step (time-based runs)
    evictions: int = 0


def _admissible(spec: RequestSpec, settings: SchedulerSettings, usable_blocks: int) -> str | None:
    total = spec.prompt_len + spec.output_len
    if total > settings.max_model_len:
        return f"prompt {spec.prompt_len:,} + output {spec.output_len:,} tokens > max_model_len {settings.max_model_len:,}"
    if -(-total // settings.block_size) > usable_blocks:
        return f"{total:,} tokens need more blocks than the pool's {usable_blocks:,}"
    return None


def replay_steps(specs: Iterable[RequestSpec], settings: SchedulerSettings, num_blocks: int,
                 on_step: Callable[[int], None] | None = None) -> Replay:
    """Each request joins the waiting queue just before the step ``arrival_step`` (0 when not given)."""
    sched = Scheduler(settings, num_blocks)
    pending = sorted(specs, key=lambda r: r.arrival_step or 0)
    rejected, added, steps = [], [], []
    j = 0
    while j < len(pending) or sched.running or sched.waiting:
        while j < len(pending) and (pending[j].arrival_step or 0) <= sched.step_no:
            why = _admissible(pending[j], settings, sched.pool.usable)
            if why:
                rejected.append((pending[j].id, why))
            else:
                added.append(sched.add(pending[j]))
            j += 1
        if not (sched.running or sched.waiting):
            if j < len(pending):
                sched.step_no = pending[j].arrival_step or 0
            continue
        steps.append(sched.step())
        if on_step:
            on_step(len(steps))
        if len(steps) > MAX_STEPS:
            raise InputError(f"the replay passed {MAX_STEPS:,} engine steps; replay a shorter trace")
        if not steps[-1].scheduled and not sched.running:
            raise InputError("no request can be scheduled (the pool or the token budget is too small for the "
                             "first waiting request)")
    return Replay(tuple(steps), tuple(added), tuple(rejected), evictions=sched.pool.evictions)
