"""``plan`` (the cheapest deployments that serve a load) and ``levers`` (what each change buys), once for every
engine that sizes a serving replica: the engine's own levers where it has them (vLLM), else its replica re-planned
for each lever (``plan/levers.py``)."""

from __future__ import annotations

from .._record import record
from ..units import InputError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    from ..engines.base import Engine, Lever, Registry
    from ..hardware import GPU
    from ..model.spec import ModelSpec
    from ..plan.levers import RuleOfThumb
    from ..plan.search import Deployment
    from ..plan.slo import SLO


@record
class PlanAnswer:
    """Every deployment searched (those that serve first, cheapest first), and for the best one what each
    lever would change."""

    model: str
    engine: str
    label: str
    concurrency: int
    context: int
    rows: tuple[Deployment, ...]
    levers: tuple[Lever, ...] = ()
    launch_hint: str = ""
    slo: SLO | None = None  # plan --slo: the latency target the rows were sized for
    warnings: tuple[str, ...] = ()

    @property
    def best(self) -> Deployment | None:
        return next((d for d in self.rows if d.serves), None)


@record
class LeversAnswer:
    """One deployment as configured, and one row per lever that applies."""

    model: str
    gpu: str
    engine: str
    label: str
    context: int
    baseline: Lever
    levers: tuple[Lever, ...]
    rule_of_thumb: RuleOfThumb | None = None
    warnings: tuple[str, ...] = ()


def plan(spec: ModelSpec, concurrency: int, context: int, gpus: list[GPU], engine: Engine, *, max_gpus: int,
         gpus_per_node: int | None, weights: tuple[str, ...], kv: tuple[str, ...], prices: dict[str, float] | None,
         version: str, registry: Registry, slo: SLO | None = None) -> PlanAnswer:
    from ..hardware import find_gpu
    from ..plan.search import search

    if context > spec.max_context:
        raise InputError(f"--context {context:,} exceeds {spec.name}'s maximum context of {spec.max_context:,} tokens")
    if slo is not None and slo.prompt is not None and slo.prompt > context:  # was timed as a --context-token prompt
        raise InputError(f"--slo prompt={slo.prompt:,} is longer than --context {context:,} (a request's prompt and "
                         "output fit in its context): give a prompt up to the context, or a longer --context")
    rows = search(spec, concurrency, context, gpus, max_gpus=max_gpus, gpus_per_node=gpus_per_node, weights=weights,
                  kv=kv, prices=prices, version=version, engine=engine.name, registry=registry)
    if slo is not None:
        rows = _within_slo(rows, spec, gpus, engine, slo, concurrency, context, max_gpus, gpus_per_node)
    from ..engines.base import release_notes

    said = release_notes(engine, rows[0].settings) if rows else ()  # every row is of the one release asked for
    answer = PlanAnswer(spec.name, engine.name, engine.label, concurrency, context, tuple(rows),
                        launch_hint=engine.launch_hint, slo=slo, warnings=said)
    best = answer.best
    if best is None:
        return answer
    _, lever_rows = _levers(spec, find_gpu(best.gpu), engine, best.settings, context, gpus_per_node, registry)
    from .._record import replace

    return replace(answer, levers=tuple(lever_rows))


def _within_slo(rows: list[Deployment], spec: ModelSpec, gpus: list[GPU], engine: Engine, slo: SLO, concurrency: int,
                context: int, max_gpus: int, gpus_per_node: int | None) -> list[Deployment]:
    """The rows re-sized to what each serves within ``slo`` (plan/slo.py), re-ranked, each launch written for its
    new replica count."""
    from .._record import replace
    from ..plan.search import _launch, _rank
    from ..plan.slo import apply_slo

    rows = apply_slo(rows, spec, {g.name: g for g in gpus}, slo, concurrency, context, max_gpus)
    rows = [replace(d, launch=_launch(engine, spec.name, d, d.gpus_per_node) if d.serves else None) for d in rows]
    return sorted(rows, key=_rank)


def _levers(spec: ModelSpec, gpu: GPU, engine: Engine, settings: Any, context: int, gpus_per_node: int | None,
            registry: Registry) -> tuple[Lever, list[Lever]]:
    """The engine's own levers for ``settings`` (vLLM), or its replica re-planned for each lever."""
    own = getattr(engine, "levers", None)
    if own is not None:
        return own(spec, gpu, settings, engine.run(spec, gpu, settings), gpus_per_node=gpus_per_node)  # type: ignore[no-any-return]
    from ..plan.levers import replica_levers

    layout = engine.layout(settings)
    return replica_levers(spec, gpu, engine.name, context, tp=layout.tp, pp=layout.pp, weights=layout.weights,
                          kv=layout.kv, fraction=layout.fraction, version=layout.version, gpus_per_node=gpus_per_node,
                          registry=registry, site=layout.site)


def levers(spec: ModelSpec, gpu: GPU, engine: Engine, context: int, *, tp: int, pp: int, weights: str, kv: str,
           options: dict[str, object], registry: Registry) -> LeversAnswer:
    from ..engines.base import Ask
    from ..kvreport import kv_report
    from ..plan.levers import rule_of_thumb

    warnings: tuple[str, ...] = ()
    long = context > spec.max_context
    hint = str(getattr(engine, "long_context", ""))  # what lets the engine run past the model's own context
    if long and hint:
        warnings = (f"{context:,} tokens exceed {spec.name}'s {spec.max_context:,}: {engine.label} accepts it only "
                    f"with {hint}",)
    ask = Ask(context=context, tp=tp, pp=pp, weights=weights, kv_dtype=kv,
              options=(*options.items(), ("allow_long_max_model_len", long)))
    if context < 1:
        raise InputError("levers need a context (--context)")
    settings = engine.settings(spec, ask)
    if engine.layout(settings).site:  # a profile none of whose terms is this plan's: said, as fit says it
        warnings += tuple(n for n in engine.run(spec, gpu, settings).notes if n.startswith("the site profile has no run"))
    baseline, rows = _levers(spec, gpu, engine, settings, context, None, registry)
    thumb = None
    if any(r.name == "FP8 weights" for r in rows):  # the back-of-envelope reading beside the engine's count
        whole = kv_report(spec, context=context, batch=1, kv_dtype=kv, tp=1).bytes_per_sequence
        thumb = rule_of_thumb(spec, tp * pp, whole)
    return LeversAnswer(spec.name, gpu.name, engine.name, engine.label, context, baseline, tuple(rows), thumb, warnings)
