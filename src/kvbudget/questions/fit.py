"""``fit`` and ``explain``, once for every engine: plan the engine's settings, then how many requests it holds,
the longest context for the load, the fewest GPUs of the type that serve it when it does not fit, and what
each lever buys. Every engine answers through the same members (``engines/base.py``); nothing here names one.
"""

from __future__ import annotations

from .._record import record, replace
from ..units import InputError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    from ..engines.base import Ask, Engine, EnginePlan, Launch, Lever, Registry, Verdict
    from ..hardware import GPU
    from ..model.spec import ModelSpec
    from ..plan.search import Deployment


@record
class FitAnswer:
    """One engine's answer to "will it fit": its own plan (``plan``: ``VllmPlan``, ``SGLangPlan`` ...), the
    figures every engine has (``row``), the verdict for the load, and, when asked, the fewest GPUs of this type
    that serve the load and what each lever buys. ``kvbudget.fit`` returns it and ``kvbudget fit`` prints it.

    The engine's own figures read through: ``answer.max_concurrency`` is ``answer.plan.max_concurrency``."""

    engine: str
    label: str
    model: str
    device: GPU
    settings: Any
    plan: Any
    row: EnginePlan
    capacity: Verdict  # how many requests it holds, and whether the load fits
    batch: int
    launch: Launch | None = None
    fewest: Deployment | None = None
    fewest_asked: bool = False
    baseline: Lever | None = None
    levers: tuple[Lever, ...] = ()
    notes: tuple[str, ...] = ()  # what kvbudget could not answer, and why
    warnings: tuple[str, ...] = ()  # what the command reader or the engine warns
    advice: tuple[Any, ...] = ()  # the engine's own suggestions (vLLM: flags that change a failing plan)

    @property
    def fits(self) -> bool:
        return self.capacity.fits

    @property
    def context(self) -> int:
        """Tokens per request of the load (llama.cpp: a slot's share of a unified cache)."""
        return self.capacity.context or self.row.context

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "plan":
            raise AttributeError(name)
        return getattr(self.plan, name)


def fit(spec: ModelSpec, gpu: GPU, engine: Engine, ask: Ask, *, registry: Registry | None = None,
        settings: Any = None, warnings: tuple[str, ...] = (), inverse: bool = True) -> FitAnswer:
    """``engine``'s plan of ``spec`` on ``gpu`` for ``ask`` (or for ``settings`` read from a launch command),
    with the verdict; with ``inverse`` also the longest context, the fewest GPUs and the levers."""
    s = engine.settings(spec, ask) if settings is None else settings
    native = engine.run(spec, gpu, s)
    row = engine.row(native)
    verdict = engine.verdict(spec, gpu, s, native, ask.batch)
    answer = FitAnswer(engine.name, engine.label, spec.name, gpu, s, native, row, verdict, ask.batch,
                       warnings=warnings, advice=tuple(getattr(engine, "advice", _none)(spec, gpu, s, native)))
    if not inverse or not hasattr(engine, "replica"):  # no replica to search: the engine's own verdict only
        return answer
    return _inverse(spec, gpu, engine, replace(answer, launch=launch(engine, spec.name, s, verdict)), registry)


def launch(engine: Engine, model: str, settings: Any, verdict: Verdict) -> Launch:
    """The command that realises ``settings``, with a Kubernetes manifest running it (or why there is none)."""
    from ..plan.launch import manifest

    out = engine.launch(model, settings)
    layout = engine.layout(settings)
    try:
        if engine.container is None:
            raise InputError(f"kvbudget knows no container image for {engine.label}")
        return replace(out, manifest=manifest(model, list(out.argv), layout.tp * out.group, layout.pp,
                                              max(verdict.per_instance // out.group, 1),
                                              container=engine.container))
    except InputError as exc:
        return replace(out, manifest_error=str(exc))


def _none(*_: object) -> tuple[()]:
    return ()


def _inverse(spec: ModelSpec, gpu: GPU, engine: Engine, a: FitAnswer, registry: Registry | None) -> FitAnswer:
    """The longest context for the load, the fewest GPUs when it does not fit, and the levers, each through
    the engine's replica (``plan`` search) unless the engine answers it from its own plan."""
    from ..plan.capacity import longest_context
    from ..plan.levers import replica_levers
    from ..plan.search import fewest

    layout = engine.layout(a.settings)
    v, context = a.capacity, a.context
    notes: list[str] = []
    longest, base, rows = v.longest, None, []
    try:
        if longest is None:
            longest = longest_context(spec, gpu, engine.name, v.asked, **_know(layout), registry=registry) \
                if not v.cap or v.asked <= v.cap else 0
        if a.row.starts and engine.pooled:  # levers move a pool; a cache of -c cells is the command's own choice
            own = getattr(engine, "levers", None)
            base, rows = (own(spec, gpu, a.settings, a.plan) if own else
                          replica_levers(spec, gpu, engine.name, context, **_know(layout), registry=registry))
    except InputError as exc:  # a setting the replica search does not take (TensorRT-LLM with AWQ weights ...)
        longest = None
        notes.append(f"no longest context, levers or fewest GPUs: {exc}")
    deployment = None
    asked = (not v.fits or v.host_weights) and not notes
    if asked:  # the fewest GPUs of this type that serve the load (on the GPUs alone)
        deployment = fewest(spec, v.load or v.asked, context, gpu, engine.name, layout, registry=registry)
    return replace(a, capacity=replace(v, longest=longest), fewest=deployment, fewest_asked=asked,
                   baseline=base, levers=tuple(rows), notes=tuple(notes))


def _know(layout: Any) -> dict[str, Any]:
    return {"tp": layout.tp, "pp": layout.pp, "weights": layout.weights, "kv": layout.kv, "fraction": layout.fraction,
            "version": layout.version, "site": layout.site}
