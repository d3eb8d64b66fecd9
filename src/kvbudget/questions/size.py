"""``size``: the five-step sizing checklist in one run, each step the question kvbudget already answers:

1. KV bytes per token from the model config (``kv``);
2. what the engine will allocate and print at start-up (``fit``), held against its real start-up log when one is
   given (``check``);
3. a load test: realistic traffic through that KV cache (``simulate``, on a trace or a synthetic workload);
4. monitoring: a running server's metrics judged against the plan (``diagnose``), when a metrics source is given;
5. the budget re-run with the measured prefix-cache reuse: the concurrency the cache holds once shared prefixes are
   held once - measured on the server when its metrics are given, else in the simulation.
"""

from __future__ import annotations

from .._record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..kvreport import KVReport
    from .diagnose import DiagnoseAnswer
    from .fit import FitAnswer
    from .simulate import SimAnswer


@record
class Rerun:
    """Step 5: the static figure and the figure at the measured reuse."""

    static_concurrency: float  # requests of max_model_len tokens the pool holds (fit)
    context: int
    hit_rate: float | None  # measured prefix-cache hit rate (tokens)
    source: str  # where the hit rate was measured: "the server's metrics" or "the simulation"
    effective_concurrency: float | None  # static / (1 - hit rate)
    simulated_concurrency: float | None  # requests the simulated traffic held at its mean footprint


@record
class SizeAnswer:
    model: str
    kv: KVReport
    fit: FitAnswer
    check: Any  # (engine, the engine's check result) when a start-up log was given
    simulate: SimAnswer | None
    diagnose: DiagnoseAnswer | None
    rerun: Rerun
    steps: tuple[tuple[str, str], ...]  # (step, what was done or why it was skipped)
    engine: Any = None  # the engine that planned it (its report renders the fit)


MAX_REUSE = 0.95  # a hit rate above this says more about the traffic's repeats than about capacity


def rerun(fit: FitAnswer, sim: SimAnswer | None, diag: DiagnoseAnswer | None) -> Rerun:
    """The budget at the measured reuse: the server's own hit rate when its metrics are given, else the simulated
    one. Shared prefix blocks are held once, so the cache holds about 1 / (1 - hit rate) as many requests."""
    rate, source = None, ""
    if diag is not None:
        rates = [r.hit_rate if r is not None and r.hit_rate is not None else s.hit_rate for s, r in diag.servers]
        known = [x for x in rates if x is not None]
        if known:
            rate, source = sum(known) / len(known), "the server's metrics"
    paged = sim.results[0] if sim is not None else None
    if rate is None and paged is not None and sim is not None and sim.prefix_caching:
        rate, source = paged.prefix_hit_tokens, "the simulation"
    static = fit.row.max_concurrency
    effective = static / (1 - min(rate, MAX_REUSE)) if rate is not None else None
    return Rerun(static, fit.row.context, rate, source, effective,
                 paged.effective_concurrency if paged is not None else None)
