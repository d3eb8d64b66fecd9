"""The engine interface: what every engine answers the same way, and the registry that lists them.

An engine is an object with a ``name``, a ``label`` and ``plan(spec, gpu, setup) -> EnginePlan``: the model on
one GPU type under the engine's own rules, for a common ``Setup`` (context, tensor and pipeline parallelism, KV
dtype). The ``EnginePlan`` carries the figures every engine has — weights and KV pool per GPU, the tokens the
pool holds, the requests of the context it holds, whether the engine starts and the error it stops with, the
lines it prints — plus the engine's own plan for its reports. Questions asked of every engine (``compare``
today) are written once against this interface; an engine kvbudget does not ship is one object handed to a
``Registry`` (``tests/test_engine_interface.py`` adds a toy engine that way).
"""

from __future__ import annotations

from .._record import record, replace
from ..units import InputError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from typing import Protocol, TypeVar

    S = TypeVar("S")  # an engine's settings record
    P = TypeVar("P")  # its plan

    from ..hardware import GPU
    from ..model.spec import ModelSpec
    from .llamacpp.settings import LlamaCppSettings
    from .sglang.settings import SGLangSettings
    from .trtllm.settings import TrtllmSettings
    from .vllm.settings import VllmSettings

    class Engine(Protocol):
        name: str  # "vllm": how the CLI and the JSON name it
        label: str  # "vLLM": how a sentence names it
        multi_node: bool  # kvbudget writes launch files for a replica across nodes
        pipeline: bool  # it runs pipeline-parallel stages
        tensor_parallel: bool  # several GPUs split the heads (else: they split the layers)
        pooled: bool  # a KV pool sized from free memory (else: the cache is what the context asks for)
        kv_levers: tuple[str, ...]  # the smaller KV caches a lever tries
        lever_load: int  # requests a replica is planned for when it runs as the engine does by default
        launch_hint: str  # what a user must know about its launch command ("" when nothing)
        fit_flags: frozenset[str]  # the `kvbudget fit` options it reads (argparse dests)
        fit_instead: tuple[tuple[str, str], ...]  # for another engine's option: what to give instead

        def plan(self, spec: ModelSpec, gpu: GPU, setup: Setup) -> EnginePlan: ...


class Unsupported(InputError):
    """An engine cannot serve this setup at all (not: it runs out of memory, which is a plan that does not
    start): e.g. a KV dtype it has no cache for. Questions over several engines list it with the reason."""


@record
class Setup:
    """What a question asks of every engine alike: tokens per request and the parallel layout."""

    context: int
    tp: int = 1
    pp: int = 1
    kv_dtype: str = "auto"  # auto (the model's dtype), fp8, fp8_e4m3 or fp8_e5m2 (``setup()`` checks it)

    @property
    def eight_bit(self) -> bool:
        """An 8-bit KV cache is asked for (each engine has its own: FP8, llama.cpp's q8_0)."""
        return self.kv_dtype != "auto"


SETUP_KV_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")  # what every engine can be asked: its default or an 8-bit cache


def setup(context: int, tp: int = 1, pp: int = 1, kv_dtype: str = "auto") -> Setup:
    """A Setup whose KV dtype every engine understands (its own engine options name other caches)."""
    kv = kv_dtype.strip().lower()
    if kv not in SETUP_KV_DTYPES:
        raise InputError(f"--kv-dtype {kv_dtype!r} is not one every engine has: use auto or fp8 (an engine's own "
                         "caches, such as llama.cpp's q4_0, are its options: fit --engine llama.cpp --ctk/--ctv)")
    return Setup(context=context, tp=tp, pp=pp, kv_dtype=kv)


@record
class EnginePlan:
    """The figures every engine's plan has, per GPU of the binding rank, in bytes and tokens.

    An engine that does not start holds no KV cache, no token and no request; ``error`` is what it stops
    with and ``printed`` the lines it prints up to there."""

    engine: str
    weights_bytes: int
    kv_budget_bytes: int  # the KV pool the engine allocates
    kv_tokens: int  # tokens the pool holds (one engine instance)
    max_concurrency: float  # requests of ``context`` tokens the pool holds at once
    context: int
    starts: bool
    budget_rule: str  # how the engine decides the pool's size, in words
    unit: str  # what the pool is allocated in
    error: str | None = None
    printed: tuple[str, ...] = ()


def engine_plan(engine: str, weights: int, kv_budget: int, kv_tokens: int, concurrency: float, context: int,
                starts: bool, rule: str, unit: str, error: str | None = None,
                printed: tuple[str, ...] = ()) -> EnginePlan:
    """An EnginePlan as the user reads it: an engine that does not start holds nothing (its own signed
    figures stay in its plan), and a budget is never negative."""
    if not starts:
        kv_budget, kv_tokens, concurrency = 0, 0, 0.0
    return EnginePlan(engine, weights, max(kv_budget, 0), kv_tokens, concurrency, context, starts, rule, unit, error,
                      printed)


@record
class Replica:
    """One serving replica as an engine sizes it for a load (``plan``'s search and the inverse questions):
    the requests of the context its pool holds and its scheduler admits, whether it starts (or why not), and
    the settings, with the scheduler's cap raised to the load, that realise it."""

    per: int
    reason: str
    starts: bool
    weights_bytes: int
    kv_cache_bytes: int
    kv_cache_tokens: int
    cap: int
    settings: VllmSettings | SGLangSettings | TrtllmSettings | LlamaCppSettings
    fraction: float = 0.0  # the engine's memory fraction as it applied it (0: llama.cpp has none)


def cap_raised_to_load(settings: S, run: Callable[[S], P], pool: Callable[[P], int], cap: Callable[[P], int],
                       field: str, concurrency: int) -> tuple[S, P, int]:
    """Plan ``settings``; where the pool holds more requests than the scheduler's default cap admits and the
    load asks for more, plan again with the cap (``field``) raised to the load, as a user would set it. The
    settings, the plan and the requests its pool holds."""
    p = run(settings)
    held = pool(p)
    if held > cap(p) and cap(p) < concurrency:
        settings = replace(settings, **{field: min(held, concurrency)})
        p = run(settings)
        held = pool(p)
    return settings, p, held


class Registry:
    """The engines a question asks, in order. ``default_registry()`` holds the ones kvbudget ships."""

    def __init__(self, engines: Iterable[Engine]) -> None:
        self._engines: dict[str, Engine] = {}
        for engine in engines:
            if engine.name in self._engines:
                raise ValueError(f"two engines are named {engine.name!r}")
            self._engines[engine.name] = engine

    def names(self) -> tuple[str, ...]:
        return tuple(self._engines)

    def get(self, name: str) -> Engine:
        try:
            return self._engines[name]
        except KeyError:
            raise InputError(f"unknown engine {name!r}: use one of {', '.join(self._engines)}") from None

    def __iter__(self) -> Iterator[Engine]:
        return iter(self._engines.values())

    def with_engine(self, engine: Engine) -> Registry:
        """This registry and one engine more (a new registry: nothing global changes)."""
        return Registry([*self._engines.values(), engine])


def default_registry() -> Registry:
    """vLLM, SGLang, TensorRT-LLM, llama.cpp and transformers, each from its own package."""
    from . import llamacpp, sglang, transformers, trtllm, vllm

    return Registry([vllm.ENGINE, sglang.ENGINE, trtllm.ENGINE, llamacpp.ENGINE, transformers.ENGINE])
