"""Questions asked of every engine alike, written once against the engine interface (``engines/base.py``)."""

from __future__ import annotations

from ..engines.base import EnginePlan, Registry, Unsupported, default_registry
from ..engines.base import setup as make_setup
from ..hardware import GPU
from ..model.spec import ModelSpec


def compare(spec: ModelSpec, gpu: GPU, context: int, tp: int = 1, kv_dtype: str = "auto", pp: int = 1,
            registry: Registry | None = None) -> tuple[tuple[EnginePlan, ...], tuple[tuple[str, str], ...]]:
    """The same model, GPU, context and layout under each engine's defaults: the plans, and the engines
    left out with the reason (a setup an engine cannot serve at all). An engine that does not start is a
    plan holding nothing, with its error."""
    setup = make_setup(context, tp, pp, kv_dtype)
    rows: list[EnginePlan] = []
    omitted: list[tuple[str, str]] = []
    for engine in (registry or default_registry()).serving():
        try:
            rows.append(engine.plan(spec, gpu, setup))
        except Unsupported as exc:
            omitted.append((engine.name, str(exc)))
    return tuple(rows), tuple(omitted)
