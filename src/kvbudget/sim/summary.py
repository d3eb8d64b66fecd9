"""What a replay measured: KV usage and waste, concurrency, preemptions, queueing, prefix-cache reuse, and - when
steps were timed - latency and throughput percentiles."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from .run import Replay


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return 0.0
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass(frozen=True)
class Spread:
    mean: float
    p50: float
    p90: float
    p99: float
    max: float

    @classmethod
    def of(cls, values: list[float]) -> Spread:
        if not values:
            return cls(0.0, 0.0, 0.0, 0.0, 0.0)
        return cls(statistics.fmean(values), percentile(values, 50), percentile(values, 90), percentile(values, 99),
                   max(values))


@dataclass(frozen=True)
class Summary:
    policy: str
    requests: int  # completed
    rejected: int
    steps: int
    duration: float  # seconds (timed) or steps
    capacity_tokens: int
    peak_usage: float  # share of the KV cache's token slots held at the fullest step
    mean_usage: float
    waste: float  # share of held slots not holding a computed token (partial blocks; unused reservations)
    max_running: int
    mean_running: float
    preemptions: int
    prefix_hit_tokens: float  # share of prompt tokens looked up that were found cached
    prefix_hit_blocks: float  # the same in blocks (full blocks found / blocks looked up)
    evictions: int
    effective_concurrency: float  # requests the whole cache holds at this traffic's mean footprint
    queue_wait: Spread  # arrival -> first scheduled (seconds or steps)
    ttft: Spread  # arrival -> first token
    tpot: Spread  # per output token after the first
    e2e: Spread  # arrival -> last token
    output_tokens_per_s: float
    timed: bool


def summarize(r: Replay) -> Summary:
    steps = r.steps
    cap = max(r.capacity_tokens, 1)
    used = [s.slots_used for s in steps]
    held = sum(used)
    running = [s.running for s in steps]
    index = {s.step: i for i, s in enumerate(steps)}

    def begin(step: int) -> float:
        return r.step_start[index[step]]

    def end(step: int) -> float:
        return r.step_end[index[step]]

    waits, ttft, tpot, e2e = [], [], [], []
    out_tokens = 0
    for req, arrival in zip(r.requests, r.arrivals, strict=True):
        if req.first_scheduled_step is None or req.finished_step is None:
            continue
        out_tokens += req.spec.output_len
        assert req.first_token_step is not None and req.last_token_step is not None  # a finished request sampled
        first, last = end(req.first_token_step), end(req.last_token_step)
        waits.append(max(begin(req.first_scheduled_step) - arrival, 0.0))
        ttft.append(first - arrival)
        e2e.append(last - arrival)
        if req.generated > 1:
            tpot.append((last - first) / (req.generated - 1))
    final = steps[-1] if steps else None
    queries = final.prefix_queries if final else 0
    hits = final.prefix_hits if final else 0
    bs = r.settings.block_size
    per_request = held / sum(running) if sum(running) else 0.0
    duration = (r.step_end[-1] - (min(r.arrivals) if r.arrivals else 0.0)) if steps else 0.0
    return Summary(
        r.settings.policy, sum(1 for q in r.requests if q.finished_step is not None), len(r.rejected), len(steps),
        duration, r.capacity_tokens, max(used, default=0) / cap, statistics.fmean(used) / cap if used else 0.0,
        (sum(s.waste for s in steps) / held) if held else 0.0, max(running, default=0),
        statistics.fmean(running) if running else 0.0, final.preemptions if final else 0,
        hits / queries if queries else 0.0, (hits // bs) / r.query_blocks if r.query_blocks else 0.0, r.evictions,
        r.capacity_tokens / per_request if per_request else 0.0, Spread.of(waits), Spread.of(ttft), Spread.of(tpot),
        Spread.of(e2e), out_tokens / duration if r.timed and duration > 0 else 0.0, r.timed)
