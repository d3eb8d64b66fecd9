"""Questions asked of every engine alike, written once against the engine interface (``engines/base.py``)."""

from __future__ import annotations

from ..engines.base import EnginePlan, Registry, Unsupported, default_registry, known_weights
from ..engines.base import setup as make_setup
from ..hardware import GPU
from ..model.spec import ModelSpec
from ..units import InputError


def compare(spec: ModelSpec, gpu: GPU, context: int, tp: int = 1, kv_dtype: str = "auto", pp: int = 1,
            registry: Registry | None = None, weights: str = "auto") -> tuple[tuple[EnginePlan, ...], tuple[tuple[str, str], ...]]:
    """The same model, GPU, context, layout and weights (``weights``: --weights-dtype) under each engine's
    defaults: the plans, and the engines left out with the reason (a setup an engine cannot serve at all, a weight
    format it does not take). An engine that does not start is a plan holding nothing, with its error. A weight
    format no engine takes is one InputError (the first engine's)."""
    setup = make_setup(context, tp, pp, kv_dtype, weights)
    rows: list[EnginePlan] = []
    omitted: list[tuple[str, str]] = []
    refused: list[InputError] = []
    for engine in (registry or default_registry()).serving():
        try:
            getattr(engine, "check_weights", known_weights)(setup.weights)
        except InputError as exc:  # llama.cpp's weights are llama-quantize types, the others' FP8, AWQ ...
            refused.append(exc)
            said = str(exc).split(": use one of")[0]  # the reason, not the engine's whole list of types
            omitted.append((engine.name, f"--weights-dtype {setup.weights}: {said}"))
            continue
        try:
            rows.append(engine.plan(spec, gpu, setup))
        except Unsupported as exc:
            omitted.append((engine.name, str(exc)))
    if refused and not rows and len(refused) == len(omitted):
        raise refused[0]
    return tuple(rows), tuple(omitted)
