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
    from typing import Any, Protocol, TypeVar

    S = TypeVar("S")  # an engine's settings record
    P = TypeVar("P")  # its plan


    from ..hardware import GPU
    from ..model.spec import ModelSpec

    class Engine(Protocol):
        """Everything a command asks of an engine (``docs/adding-an-engine.md`` walks through a toy one)."""

        name: str  # "vllm": how the CLI and the JSON name it
        label: str  # "vLLM": how a sentence names it
        serving: bool  # compared with the others and given a launch command (False: the textbook partition)
        multi_node: bool  # kvbudget writes launch files for a replica across nodes
        pipeline: bool  # it runs pipeline-parallel stages
        tensor_parallel: bool  # several GPUs split the heads (else: they split the layers)
        pooled: bool  # a KV pool sized from free memory (else: the cache is what the context asks for)
        kv_levers: tuple[str, ...]  # the smaller KV caches a lever tries
        @property
        def lever_load(self) -> int: ...  # requests a replica is planned for when it runs as the engine does by default
        launch_hint: str  # what a user must know about its launch command ("" when nothing)
        fraction: Fraction | None  # its memory-fraction setting, when it has one
        container: Container | None  # how it runs in a Kubernetes pod (None: kvbudget writes no manifest)
        options: tuple[Option, ...]  # its own command-line options (the CLI builds its flags from them)
        fit_flags: frozenset[str]  # the `kvbudget fit` options it reads (argparse dests)
        fit_instead: tuple[tuple[str, str], ...]  # for another engine's option: what to give instead
        plan_weights: tuple[str, ...]  # the weight formats `kvbudget plan` tries by default
        plan_kv: tuple[str, ...]  # the KV cache dtypes it tries by default

        def check_weights(self, name: str) -> None: ...  # InputError for a format the engine cannot run
        def check_kv(self, name: str) -> None: ...  # InputError for a KV cache dtype it has not
        def gpus(self, settings: Any) -> int: ...  # GPUs its settings occupy
        def accepts(self, settings: object) -> bool: ...  # ``settings`` is its own settings record

        # the figures every engine has, for compare and the Python API
        def plan(self, spec: ModelSpec, gpu: GPU, setup: Setup) -> EnginePlan: ...
        # fit and explain: settings from a question or a pasted command, then the engine's own plan
        def settings(self, spec: ModelSpec, ask: Ask) -> Any: ...
        def run(self, spec: ModelSpec, gpu: GPU, settings: Any) -> Any: ...
        def row(self, native: Any) -> EnginePlan: ...
        def verdict(self, spec: ModelSpec, gpu: GPU, settings: Any, native: Any, batch: int) -> Verdict: ...
        def layout(self, settings: Any) -> Layout: ...
        def reads_command(self, words: list[str]) -> bool: ...
        def read_command(self, words: list[str], given: dict[str, Any]) -> Command: ...
        def launch(self, model: str, settings: Any) -> Launch: ...
        # check: a start-up log
        def reads_log(self, text: str) -> bool: ...
        def check(self, text: str, given: dict[str, Any]) -> Any: ...
        # its own part of the reports (the common verdict, fewest GPUs and levers are rendered once)
        def text(self, answer: Any, units: str) -> str: ...
        def doc(self, answer: Any, units: str) -> dict[str, Any]: ...
        def check_text(self, result: Any, units: str) -> str: ...
        def check_doc(self, result: Any, units: str) -> dict[str, Any]: ...

        # Optional members, used where an engine has them (``hasattr``): ``replica(spec, gpu, tp, pp, weights, kv,
        # concurrency, context, version, fraction) -> Replica`` (the plan search, fewest GPUs, replica levers and
        # longest context), ``levers`` (its own levers), ``advice`` (suggestions printed with a plan), ``held_at`` /
        # ``longest_for`` (exact inverse answers from one plan), ``partition`` (fit --plot), ``long_context``,
        # ``no_fraction``, ``default_reader``, ``reads_run_flags`` and ``calibration_point`` (docs/adding-an-engine.md).


class NotAServer:
    """What an engine that is no server (transformers' generate, the textbook partition) answers to the questions
    about a server: it has no replica layout, no launch command, no command or log kvbudget reads."""

    label = "this engine"
    container: Container | None = None
    plan_weights: tuple[str, ...] = ("auto",)
    plan_kv: tuple[str, ...] = ("auto",)

    def check_weights(self, name: str) -> None:
        known_weights(name)

    def check_kv(self, name: str) -> None:
        known_kv(name, ("auto",), self.label)

    def _none(self, what: str) -> InputError:
        return InputError(f"{self.label} has no {what}")

    def layout(self, settings: Any) -> Layout:
        raise self._none("serving replica to search")

    def launch(self, model: str, settings: Any) -> Launch:
        raise self._none("launch command")

    def read_command(self, words: list[str], given: dict[str, Any]) -> Command:
        raise self._none("launch command kvbudget reads")

    def check(self, text: str, given: dict[str, Any]) -> Any:
        raise self._none("start-up log kvbudget reads")

    def check_text(self, result: Any, units: str) -> str:
        raise self._none("start-up log kvbudget reads")

    def check_doc(self, result: Any, units: str) -> dict[str, Any]:
        raise self._none("start-up log kvbudget reads")


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
    weights: str = "auto"  # --weights-dtype: auto (the checkpoint's) or a format the engine takes (check_weights)

    @property
    def eight_bit(self) -> bool:
        """An 8-bit KV cache is asked for (each engine has its own: FP8, llama.cpp's q8_0)."""
        return self.kv_dtype != "auto"


SETUP_KV_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")  # what every engine can be asked: its default or an 8-bit cache


def setup(context: int, tp: int = 1, pp: int = 1, kv_dtype: str = "auto", weights: str = "auto") -> Setup:
    """A Setup whose KV dtype every engine understands (its own engine options name other caches)."""
    kv = kv_dtype.strip().lower()
    if kv not in SETUP_KV_DTYPES:
        raise InputError(f"--kv-dtype {kv_dtype!r} is not one every engine has: use auto or fp8 (an engine's own "
                         "caches, such as llama.cpp's q4_0, are its options: fit --engine llama.cpp --ctk/--ctv)")
    return Setup(context=context, tp=tp, pp=pp, kv_dtype=kv, weights=weights.strip() or "auto")


@record
class Option:
    """One of an engine's own command-line options: ``--mem-fraction-static`` is ``Option("mem_fraction_static",
    "fraction", ...)``. The CLI adds it to the commands named, parsing its value by ``kind``: count (a positive
    whole number, 8K allowed), fraction (in (0, 1]), layers (llama.cpp's -ngl), size (48GiB), text, switch (no
    value) or choice (one of ``choices``)."""

    dest: str
    kind: str
    help: str
    default: object = None
    choices: tuple[str, ...] = ()
    commands: tuple[str, ...] = ("fit",)

    @property
    def flag(self) -> str:
        return "--" + self.dest.replace("_", "-")


def check_option(o: Option, value: object) -> object:
    """An option's value as Python gives it (``kvbudget.fit(..., options=...)``), checked as its flag's would be."""
    from ..inputs import real, whole
    from ..units import MAX_SIZE, excerpt

    flag = o.flag
    if o.kind == "json":  # a parsed file: the engine reads its fields and says what is wrong
        return value
    if o.kind == "switch":
        if not isinstance(value, bool):
            raise InputError(f"{flag} is True or False, not {excerpt(value)}")
        return value
    if o.kind in ("count", "size", "size0"):
        return whole(value, flag, lo=0 if o.kind == "size0" else 1, hi=MAX_SIZE if o.kind != "count" else 10**12)
    if o.kind == "layers":
        return check_layers(whole(value, flag, lo=-(10**6), hi=10**6), flag)
    if o.kind == "fraction":
        return real(value, flag, lo=0, hi=1, lo_open=True)
    if not isinstance(value, str) or len(value) > 200:
        raise InputError(f"{flag} takes a word, not {excerpt(value)}")
    if o.choices and value not in o.choices:
        raise InputError(f"{flag} {excerpt(value)}: use one of {', '.join(o.choices)}")
    return value


def check_layers(value: int, flag: str) -> int:
    """llama.cpp's -ngl: -1 is every layer (common/common.cpp passes it on as the model's default). Below -1 the
    builds differ: older ones pass it to llama-model.cpp as it is, where i_gpu_start = max(n_layer + 1 - ngl, 0)
    and act_gpu_layers = min(ngl, n_layer + 1) put no layer on the GPU; newer ones read -2 as 'all'. It was planned
    as every layer; the launch command's own -ngl refused it already."""
    if value < -1:
        raise InputError(f"{flag} {value}: llama.cpp builds differ on a layer count below -1 (older ones offload no "
                         "layer for it); give -1 for every layer, or 0 for none")
    return value


def release_notes(engine: Engine, settings: Any) -> tuple[str, ...]:
    """What the engine says of the release its settings name where kvbudget has not read it (``release_note``, for an
    engine with release lines): a question that prints no plan of its own (plan, simulate) prints this with its own."""
    note = getattr(engine, "release_note", None)
    said = note(settings) if note is not None else None
    return (said,) if said else ()


def known_weights(name: str) -> None:
    """Refuse a weight format kvbudget does not know (a llama-quantize type names llama.cpp)."""
    if name != "auto":
        from ..model.weights import parse_weight_format

        parse_weight_format(name)


def known_kv(name: str, names: Iterable[str], label: str) -> None:
    """Refuse a KV cache dtype the engine (``label``) has no cache for, naming the ones it has."""
    have = tuple(n for n in names if n)
    if name not in have:
        raise InputError(f"unknown --kv-dtype {name!r}: {label} caches one of {', '.join(have)}")


@record
class Fraction:
    """An engine's memory-fraction setting: its option's name and the step a lever tries either way."""

    dest: str
    step: float


@record
class Ask:
    """What ``fit`` asks of any engine: the load and layout every engine reads, and the engine's own options
    (by ``Option.dest``; an option not given is absent and the engine applies its default)."""

    context: int | None = None
    batch: int = 1
    tp: int = 1
    pp: int = 1
    weights: str = "auto"
    kv_dtype: str = "auto"
    options: tuple[tuple[str, object], ...] = ()

    def option(self, dest: str, default: object = None) -> Any:
        return next((v for d, v in self.options if d == dest and v is not None), default)


@record
class Layout:
    """A configuration as a replica search takes it (``plan``, levers, fewest GPUs, longest context)."""

    tp: int = 1
    pp: int = 1
    weights: str = "auto"
    kv: str = "auto"
    fraction: float | None = None
    version: str = "current"
    site: tuple[Any, ...] = ()  # a site profile's terms (--profile), which every replica planned from it takes


@record
class Verdict:
    """An engine's own answer to "how many at once": the requests of its context it holds (pool and
    scheduler), the requests per engine instance the user asked for, whether they fit, and the longest
    context at which they would (None: the engine has no own rule; the replica search answers)."""

    held: int
    asked: int
    fits: bool
    longest: int | None = None
    per_instance: int = 1  # data-parallel instances sharing the load (vLLM --data-parallel-size)
    cap: int = 0  # the scheduler's cap on running requests (0: none)
    pool_held: int = 0  # requests the pool alone holds
    context: int = 0  # tokens per request of the load (0: the plan's context; llama.cpp: a slot's share)
    load: int = 0  # all the requests asked for, over every data-parallel instance (0: ``asked``)
    shared_cells: int = 0  # llama.cpp's unified cache: the -c cells its slots share (0: each request has its own)
    cells: int = 0  # llama.cpp: the -c the command gives (the longest context needs it raised to longest x slots)
    said: str = ""  # how the engine loads it, where that matters (llama.cpp: weights in host memory)
    host_weights: bool = False  # the engine itself moved weights to host memory: the model does not fit the GPU alone


@record
class Command:
    """A pasted launch command, read: the model it serves, the engine's settings, and what the reader warns."""

    model: str
    settings: Any
    warnings: tuple[str, ...] = ()
    overrides: str = ""  # keys of the model's config the command overrides (vLLM's --hf-overrides), a JSON object


@record
class Container:
    """How a server runs in a Kubernetes pod: its image, the words of its command line that name the program (and
    where the image keeps it), its port, whether it is told ``--host``/``--port``, and whether kvbudget writes
    manifests for a replica across nodes (a LeaderWorkerSet joined into one Ray cluster)."""

    prefix: str  # what the manifest's names start with
    image: str
    port: int
    program: tuple[str, ...]  # the first words of its command line
    entry: tuple[str, ...] = ()  # the program in the image (default: ``program``)
    listen: bool = False  # told --host 0.0.0.0 --port PORT
    multi_node: bool = False


@record
class Launch:
    """The command that realises a plan, and a Kubernetes manifest running it (None when there is none)."""

    argv: tuple[str, ...]
    note: str | None = None
    manifest: str | None = None
    manifest_error: str | None = None
    group: int = 1  # data-parallel engines the command starts itself (vLLM expert parallelism): one pod runs them


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
    cap: int = 0  # the scheduler's cap on requests running at once (0: none)
    blocks: int = 0  # the pool's allocation units (vLLM blocks, SGLang pages, llama.cpp cells ...)
    block_tokens: int = 0  # tokens per unit
    parts: tuple[Part, ...] = ()  # the binding rank's memory, part by part, each with its provenance
    step_tokens: int = 0  # the scheduler's token budget per step (vLLM max_num_batched_tokens ...; 0: none)
    # the pool's KV-cache groups, each (kind, window or chunk in tokens), all drawing on ``blocks``; kinds:
    # full_attention, mla, sliding_window, chunked_local, recurrent_state (empty: one full-attention group)
    kv_groups: tuple[tuple[str, int], ...] = ()
    # pools of this size in one server, each with its own scheduler (SGLang's DP-attention ranks): kv_tokens,
    # max_concurrency and cap are one pool's, the server holds ``pools`` times them
    pools: int = 1


@record
class Part:
    """One part of a GPU's memory as an engine splits it, and where its figure comes from: ``modelled`` (the
    engine's own arithmetic on the model), ``calibrated`` (a constant fitted on published start-up logs, with
    its band in the engine's plan) or ``estimate``."""

    name: str
    bytes: int
    provenance: str


def engine_plan(engine: str, weights: int, kv_budget: int, kv_tokens: int, concurrency: float, context: int,
                starts: bool, rule: str, unit: str, error: str | None = None,
                printed: tuple[str, ...] = (), *, cap: int = 0, blocks: int = 0, block_tokens: int = 0,
                parts: tuple[Part, ...] = (), step_tokens: int = 0,
                kv_groups: tuple[tuple[str, int], ...] = (), pools: int = 1) -> EnginePlan:
    """An EnginePlan as the user reads it: an engine that does not start holds nothing (its own signed
    figures stay in its plan), and a budget is never negative."""
    if not starts:
        kv_budget, kv_tokens, concurrency, blocks = 0, 0, 0.0, 0
    return EnginePlan(engine, weights, max(kv_budget, 0), kv_tokens, concurrency, context, starts, rule, unit, error,
                      printed, cap, blocks, block_tokens, parts, step_tokens, kv_groups, pools)


@record
class Lever:
    """One change a user can make to a deployment and what it buys (``levers``: per GPU, all replicas)."""

    name: str
    flag: str  # the flag (or change) that pulls it
    gpus: int  # GPUs the deployment uses with it
    kv_cache_bytes: int  # available KV cache memory per GPU with it
    freed_bytes: int  # per GPU, against the baseline (negative: costs)
    weights_bytes: int  # per GPU
    concurrency: int  # requests of the (lever's) context held at once, all replicas
    added: int  # against the baseline
    context: int
    starts: bool
    note: str = ""


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
    settings: Any  # the engine's own settings record that realises it
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

    def serving(self) -> tuple[Engine, ...]:
        """The engines questions over servers ask (compare, plan, levers)."""
        return tuple(e for e in self if e.serving)

    def searchable(self) -> tuple[Engine, ...]:
        """The engines that size a serving replica (``plan``'s search, the inverse questions, the levers)."""
        return tuple(e for e in self if hasattr(e, "replica"))

    def refuse_foreign(self, command: str, name: str, given: Iterable[str]) -> None:
        """One line for the first option given (argparse dests) that engine ``name`` does not read for ``command``
        but another engine does, instead of ignoring it: what to give instead, or whose setting it is."""
        engine = self.get(name)
        if command == "fit":  # fit's options each engine reads, its own and the common ones
            reads = {e.name: e.fit_flags for e in self}
        else:
            reads = {e.name: frozenset(o.dest for o in e.options if command in o.commands) for e in self}
        instead = dict(engine.fit_instead) if command == "fit" else {}
        fraction = engine.fraction
        for dest in sorted(set(given) & set().union(*reads.values()) - reads[name]):
            flag = "--" + dest.replace("_", "-")
            owners = ", ".join(e for e, flags in reads.items() if dest in flags)
            if dest in instead:
                why = f": use {instead[dest]}"
            elif any(e.fraction is not None and e.fraction.dest == dest for e in self):
                why = (f": its fraction is --{fraction.dest.replace('_', '-')}" if fraction is not None
                       else f" ({getattr(engine, 'no_fraction', 'it has no memory fraction')})")
            else:
                why = f" (it is a setting of {owners})"
            raise InputError(f"{flag} is not read under --engine {name}{why}")

    def reader(self, claims: Callable[[Engine], bool]) -> Engine | None:
        """The first engine that claims a command or a log, engines that read anything unclaimed last."""
        ordered = sorted(self, key=lambda e: bool(getattr(e, "default_reader", False)))
        return next((e for e in ordered if claims(e)), None)


def default_registry() -> Registry:
    """vLLM, SGLang, TensorRT-LLM, llama.cpp, transformers (each its own package) and the textbook partition."""
    from . import textbook_engine
    from .llamacpp import engine as llamacpp
    from .sglang import engine as sglang
    from .transformers import engine as transformers
    from .trtllm import engine as trtllm
    from .vllm import engine as vllm

    return Registry([vllm.ENGINE, sglang.ENGINE, trtllm.ENGINE, llamacpp.ENGINE, transformers.ENGINE,
                     textbook_engine.ENGINE])
