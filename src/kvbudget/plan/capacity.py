"""Inverse questions under any engine's rules (the replica adapters of ``plan/search.py``): how many
requests of a context one deployment holds at once, and the longest context at which it holds N.

Exact at the engine's granularity: a replica's capacity is whole requests of its pool (vLLM blocks,
SGLang/TensorRT-LLM tokens, llama-server slots that fit, at most 256), capped by the scheduler's default; the
longest context is searched over whole tokens, so the answer ``C`` holds N and ``C + 1`` does not.
"""

from __future__ import annotations

from .._bisect import largest
from ..engines.base import Registry, default_registry
from ..hardware import GPU
from ..model.spec import ModelSpec
from ..units import InputError
from .search import replica_of, with_site

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any


def held(spec: ModelSpec, gpu: GPU, engine: str, context: int, *, tp: int = 1, pp: int = 1, weights: str = "auto",
         kv: str = "auto", fraction: float | None = None, version: str = "current",
         registry: Registry | None = None, site: tuple[Any, ...] = ()) -> int:
    """Requests of ``context`` tokens one replica holds at once (0: it does not start or holds none)."""
    replica = with_site(replica_of(engine, "kvbudget sizes", registry), site)
    if context < 1:
        raise InputError(f"context must be at least 1 token, got {context}")
    load = (registry or default_registry()).get(engine).lever_load
    r = replica(spec, gpu, tp, pp, weights, kv, load, context, version, fraction)
    return r.per if r.starts and not r.reason else 0


def longest_context(spec: ModelSpec, gpu: GPU, engine: str, concurrency: int, *, tp: int = 1, pp: int = 1,
                    weights: str = "auto", kv: str = "auto", fraction: float | None = None,
                    version: str = "current", limit: int = 0, registry: Registry | None = None,
                    site: tuple[Any, ...] = ()) -> int:
    """The longest context (up to ``limit``, default the model's) at which one replica holds ``concurrency``
    requests at once; 0 when not even one token each fits."""
    if concurrency < 1:
        raise InputError(f"concurrency must be at least 1, got {concurrency}")
    top = limit or spec.max_context

    def ok(context: int) -> bool:
        return held(spec, gpu, engine, context, tp=tp, pp=pp, weights=weights, kv=kv, fraction=fraction,
                    version=version, registry=registry, site=site) >= concurrency

    return largest(ok, top)
