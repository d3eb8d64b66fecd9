"""``simulate``, once for every engine with a paged KV pool: the engine's plan gives the pool (blocks, tokens per
block), the scheduler's caps and the step's token budget; requests replay through vLLM's V1 scheduler on that
pool under each allocation policy; the static figure from ``fit`` stands next to what the traffic really held."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ..units import InputError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    from ..engines.base import Ask, Engine, EnginePlan
    from ..hardware import GPU
    from ..model.spec import ModelSpec
    from ..sim.hybrid import Group
    from ..sim.run import Replay
    from ..sim.summary import Summary
    from ..sim.timing import StepTime
    from ..sim.trace import RequestSpec

DEFAULT_STEP_TOKENS = 8192  # an engine whose plan has no per-step token budget (vLLM's current serve default)


@dataclass(frozen=True)
class SimAnswer:
    engine: str
    label: str
    model: str
    device: GPU
    row: EnginePlan  # the engine's pool: blocks, tokens per block, caps
    block_size: int
    num_blocks: int
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    prefix_caching: bool
    static_concurrency: float  # fit's figure: requests of max_model_len tokens the pool holds
    results: tuple[Summary, ...]  # one per allocation policy, the engine's (paged) first
    replay: Replay  # the paged run, step by step (for plots)
    step_time: StepTime | None
    requests: int
    warnings: tuple[str, ...] = ()
    groups: tuple[tuple[str, int], ...] = ()  # the KV-cache groups simulated: (kind, sliding window or 0)


def step_time(spec: ModelSpec, gpu: GPU, row: EnginePlan, gpus: int) -> StepTime | None:
    """The roofline step-time model for this plan, or None when the GPU has no bandwidth or throughput figure."""
    from ..sim.timing import StepTime, flops_per_token

    bandwidth, tflops = gpu.bandwidth_bytes_per_s, gpu.bf16_tflops
    if not bandwidth or not tflops or not row.kv_tokens:
        return None
    return StepTime(row.weights_bytes, row.kv_budget_bytes // max(row.kv_tokens, 1), flops_per_token(spec) / max(gpus, 1),
                    float(bandwidth), float(tflops) * 1e12, gpu.name)


def _groups(row: EnginePlan, label: str, warnings: list[str]) -> tuple[Group, ...]:
    """The pool's KV-cache groups as the simulator runs them: full attention (MLA too) and sliding windows as the
    engine manages them; a kind it does not simulate runs as full attention (holding more blocks than the engine
    would), with a warning naming it."""
    from ..sim.hybrid import Group

    groups, other = [], set()
    for kind, tokens in row.kv_groups:
        if kind == "sliding_window" and tokens > 0:
            groups.append(Group("sliding_window", tokens))
        else:
            if kind not in ("full_attention", "mla"):
                other.add(kind.replace("_", " "))
            groups.append(Group("full_attention"))
    if other:
        warnings.append(f"{label}'s {' and '.join(sorted(other))} KV-cache group(s) are simulated as full attention: "
                        "each request holds a block per block_size tokens there, more than the engine would, so KV "
                        "usage and preemptions are overstated")
    return tuple(groups)


def _by_step(requests: Sequence[RequestSpec]) -> bool:
    """Whether the requests arrive by engine step rather than by time: some give a later ``arrival_step`` and none
    an ``arrival`` in seconds (a trace recorded from a scheduler). One that places some requests by step and others
    by seconds has no one clock to replay on."""
    leaders = [r for r in requests if r.after is None]
    stepped = any(r.arrival_step and not r.arrival for r in leaders)
    if stepped and any(r.arrival for r in leaders):
        raise InputError("the trace gives some arrivals as engine steps ('arrival_step') and others in seconds "
                         "('arrival'): give every request the same kind")
    return stepped


def _seconds_need_a_clock(requests: Sequence[RequestSpec], gpu: str) -> None:
    """Arrivals in seconds replayed without a step-time model would all land on step 0 (a delay in seconds read as
    steps): refused where they differ, since the run would not be the traffic asked for."""
    first = requests[0].arrival if requests else 0.0
    if any(r.arrival != first or r.delay for r in requests):
        raise InputError(f"{gpu} has no memory bandwidth or tensor throughput in the catalog, so arrivals in seconds "
                         "cannot be placed on engine steps: give a catalog GPU (--gpu), or a trace of 'arrival_step's")


def _progress(report: Callable[[str, int, int, int], None] | None, policy: str,
              total: int) -> Callable[[int, int], None] | None:
    if report is None:
        return None
    return lambda steps, done: report(policy, steps, done, total)


def simulate(spec: ModelSpec, gpu: GPU, engine: Engine, ask: Ask,
             requests: Sequence[RequestSpec] | Callable[[], Sequence[RequestSpec]], *,
             settings: Any = None, policies: Sequence[str] = ("paged", "contiguous-max", "contiguous-exact"),
             prefix_caching: bool = True, chunked_prefill: bool = True, timed: bool = True,
             on_step: Callable[[str, int, int, int], None] | None = None) -> SimAnswer:
    """Replay ``requests`` on the KV pool ``engine`` plans for ``spec`` on ``gpu``. ``on_step(policy, steps,
    requests finished or refused, requests)`` reports progress. ``requests`` may be a function giving them: it is
    called once the engine is known to start (so that a refused flag costs no trace read or workload generation)."""
    from ..sim.run import MAX_STEPS, replay, steps_floor
    from ..sim.scheduler import SchedulerSettings
    from ..sim.summary import summarize

    s = engine.settings(spec, ask) if settings is None else settings
    native = engine.run(spec, gpu, s)
    row = engine.row(native)
    if not row.starts:
        raise InputError(f"{engine.label} does not start with these settings, so there is no KV cache to simulate: "
                         f"{row.error or 'see kvbudget fit'}")
    if not row.blocks or not row.block_tokens:
        raise InputError(f"{engine.label}'s KV cache is not a paged pool kvbudget can simulate (use --engine vllm)")
    if callable(requests):
        requests = requests()
    from ..engines.base import release_notes

    warnings = list(release_notes(engine, s))  # a release kvbudget has not read was simulated with no word
    if engine.name != "vllm":
        warnings.append(f"{engine.label}'s own scheduler and cache eviction are not modelled: the requests run through "
                        f"vLLM's V1 scheduler rules on {engine.label}'s pool ({row.blocks:,} x {row.block_tokens} tokens)")
    step_tokens = row.step_tokens or DEFAULT_STEP_TOKENS
    if not row.step_tokens:
        warnings.append(f"{engine.label}'s per-step token budget is not in its plan: {DEFAULT_STEP_TOKENS:,} assumed")
    groups = _groups(row, engine.label, warnings)
    sched = SchedulerSettings(row.block_tokens, row.cap or 256, step_tokens, row.context, prefix_caching,
                              chunked_prefill, groups=groups)
    by_step = _by_step(requests)
    timing = step_time(spec, gpu, row, engine.gpus(s)) if timed and not by_step else None
    if by_step:
        warnings.append("the trace gives engine steps ('arrival_step'): it is replayed step by step, latencies in "
                        "engine steps")
    elif timed and timing is None:
        _seconds_need_a_clock(requests, gpu.name)
        warnings.append(f"{gpu.name} has no memory bandwidth or tensor throughput in the catalog: latencies are in "
                        "engine steps, not seconds")
    floor, at_once, outputs = steps_floor(requests, sched, row.blocks)
    if floor > MAX_STEPS:  # was refused after the 2,000,000 steps ran: 5 minutes and more, per policy
        raise InputError(f"this traffic takes at least {floor:,} engine steps ({outputs:,} output tokens, one per "
                         f"running request per step, and at most {at_once:,} requests at once: the pool holds "
                         f"{(row.blocks - 1) * row.block_tokens:,} token slots), more than the {MAX_STEPS:,} a replay "
                         "runs; replay fewer or shorter requests")
    summaries, paged = {}, None
    # the paged run last: it is kept (steps, plots), the others summarized and let go before the next one runs (with
    # paged first, two replays were held at once: 970 MB on 500,000 requests)
    for policy in sorted(policies, key=lambda p: p == "paged"):
        run = replay(requests, replace(sched, policy=policy), row.blocks, step_time=timing,
                     on_step=_progress(on_step, policy, len(requests)), detail=False)
        summaries[policy] = summarize(run)
        if policy == "paged":
            paged = run
        del run
    results = [summaries[p] for p in policies]
    if paged is None:
        raise InputError("simulate: the paged policy is always run (it is the engine's)")
    if paged.rejected and not paged.requests:  # nothing ran: a report of zeros would read as an answer
        rid, why = paged.rejected[0]
        raise InputError(f"every request is refused by the engine (e.g. {rid}: {why}); raise --context or shorten "
                         "the requests")
    if paged.rejected:
        rid, why = paged.rejected[0]
        warnings.append(f"{len(paged.rejected):,} request(s) refused by the engine (e.g. {rid}: {why})")
    return SimAnswer(engine.name, engine.label, spec.name, gpu, row, row.block_tokens, row.blocks, sched.max_num_seqs,
                     step_tokens, row.context, prefix_caching, row.max_concurrency, tuple(results), paged, timing,
                     len(requests), tuple(warnings), tuple((g.kind, g.window) for g in groups))
