"""The public Python API: the same answers the CLI prints, as frozen dataclasses.

Every argument is checked where it enters, as the CLI checks its flags: a wrong type (a string for
a count, None, a list, a bool), NaN, infinity, a negative or absurd number raises
``kvbudget.InputError`` with the CLI's message, never AttributeError/TypeError or a NaN answer.

Which rules answer: the engine's, vLLM by default, as on the command line. ``fit`` returns the ``FitAnswer``
``kvbudget fit`` prints for any engine (``engine="textbook"``: weights + KV + activations + overhead, one rule
for every engine); ``vllm_plan``, ``max_concurrency``, ``max_context`` and ``fewest_gpus`` follow the engine
they are given.
"""

from __future__ import annotations

from ._record import replace
from .engines.base import EnginePlan
from .hardware import GPU, custom_gpu
from .hardware import find_gpu as _find_gpu
from .inputs import excerpt, real, whole
from .kvcache import MAX_BATCH, MAX_CONTEXT, MAX_PARALLEL
from .model.resolve import load_model as _load_model
from .model.spec import ModelSpec
from .questions.fit import FitAnswer
from .units import MAX_SIZE, InputError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

    from .engines.base import Ask, Engine, Registry
    from .engines.vllm import VllmPlan, VllmSettings
    from .kvreport import KVReport
    from .plan.search import Deployment as PlanRow
    from .questions.plan import LeversAnswer, PlanAnswer
    from .questions.simulate import SimAnswer
    from .questions.size import SizeAnswer
    from .sim.trace import RequestSpec

__all__ = ["FitAnswer", "InputError", "explain", "fewest_gpus", "find_gpu", "fit", "kv", "levers", "load_model",
           "max_concurrency", "max_context", "plan_deployments", "vllm_plan"]

MAX_NAME = 4096  # characters in a model reference, a GPU name, a dtype


# --- argument checks: the CLI's rules and messages for values that come from Python ------------------


def _count(name: str, value: object, limit: int, lo: int = 1) -> int:
    """A whole number in [lo, limit] (not a bool, a string, None, NaN or a fraction)."""
    return whole(value, name, lo=lo, hi=limit)


def _maybe_count(name: str, value: object, limit: int, lo: int = 1) -> int | None:
    return None if value is None else _count(name, value, limit, lo)


def _name(what: str, value: object) -> str:
    if not isinstance(value, str):
        raise InputError(f"{what} must be a string, not {excerpt(value)}")
    if len(value) > MAX_NAME:
        raise InputError(f"{what} is {len(value):,} characters long: not a name kvbudget knows")
    return value


def _names(what: str, value: object) -> tuple[str, ...]:
    """A string or a tuple/list of strings, as a tuple (a bare string is one name, not its letters)."""
    if isinstance(value, str):
        return (_name(what, value),)
    if not isinstance(value, (tuple, list)) or not value or len(value) > 64:
        raise InputError(f"{what} must be a name or a short list of names, not {excerpt(value)}")
    return tuple(_name(what, v) for v in value)


def _options(value: object) -> dict[str, object]:
    """An engine's ``options`` as a dict of option names (a list or a string raised AttributeError)."""
    if value is None:
        return {}
    if not isinstance(value, dict) or len(value) > 64:
        raise InputError(f"options must be a dict of the engine's option names to values, e.g. "
                         f"{{'max_num_seqs': 64}}, not {excerpt(value)}")
    return {_name("option", k): v for k, v in value.items()}


def _spec(model: object) -> ModelSpec:
    return model if isinstance(model, ModelSpec) else _load_model(_name("model", model))


def load_model(ref: str) -> ModelSpec:
    """Resolve a model reference: a catalog name, a config.json path or folder, a GGUF file, or a Hub id."""
    return _load_model(_name("model", ref))


def find_gpu(name: str) -> GPU:
    """Look a GPU up by the names people write (``H100``, ``a100 80gb``, ``RTX3090``)."""
    return _find_gpu(_name("gpu", name))


def kv(
    model: str | ModelSpec,
    *,
    context: int | None = None,
    batch: int = 1,
    kv_dtype: str = "auto",
    tp: int = 1,
) -> KVReport:
    """KV-cache bytes per token (by layer kind), per sequence of ``context`` tokens (default: the
    model's max context) and for ``batch`` sequences, per GPU under ``tp``-way tensor parallelism."""
    from .kvreport import kv_report

    return kv_report(_spec(model), context=_maybe_count("--context", context, MAX_CONTEXT),
                     batch=_count("--batch", batch, MAX_BATCH), kv_dtype=_name("--kv-dtype", kv_dtype),
                     tp=_count("--tp", tp, MAX_PARALLEL))


def fit(
    model: str | ModelSpec,
    *,
    gpu: str | GPU | None = None,
    gpu_memory: int | None = None,
    engine: str = "vllm",
    tp: int = 1,
    pp: int = 1,
    weights_dtype: str = "auto",
    kv_dtype: str = "auto",
    context: int | None = None,
    batch: int = 1,
    prefill_chunk: int | None = None,
    overhead_bytes: int | None = None,
    activation_bytes: int | None = None,
    weights_bytes: int | None = None,
    options: dict[str, object] | None = None,
    registry: Registry | None = None,
) -> FitAnswer:
    """Will it fit: ``engine``'s plan of ``model`` on ``gpu`` (vllm by default, as ``kvbudget fit``; sglang,
    trtllm, llama.cpp, transformers, or textbook: weights + KV cache + activation workspace + overhead), the
    requests of ``context`` tokens it holds, the longest context for ``batch`` requests, and when they do not fit
    the fewest GPUs of this type that serve them, with what each lever buys. The same ``FitAnswer`` the command
    line prints; ``answer.plan`` is the engine's own plan, whose figures also read through the answer.

    ``options`` are the engine's own settings by their flag's name (``{"mem_fraction_static": 0.85}``,
    ``{"np": 8, "ctk": "q8_0"}``); ``prefill_chunk``, ``overhead_bytes``, ``activation_bytes`` and
    ``weights_bytes`` are the textbook's (its estimates replaced by measured figures, per GPU)."""
    from .questions.fit import fit as _fit_question

    reg, server, ask = _fit_ask("fit", engine, tp, pp, weights_dtype, kv_dtype, context, batch, options, registry,
                                prefill_chunk=prefill_chunk, overhead=overhead_bytes, activation=activation_bytes,
                                weights_memory=weights_bytes)
    return _fit_question(_spec(model), _device(gpu, gpu_memory), server, ask, registry=reg)


def _fit_ask(command: str, engine: object, tp: object, pp: object, weights_dtype: object, kv_dtype: object,
             context: object, batch: object, options: dict[str, object] | None, registry: Registry | None,
             **textbook: object) -> tuple[Registry, Engine, Ask]:
    """The registry, the engine and its question, as fit and simulate take them: common settings checked, the
    engine's own options checked against what it declares (another engine's option refused in one line)."""
    from .engines.base import Ask, check_option, default_registry, known_weights

    reg = registry or default_registry()
    server = reg.get(_name("engine", engine))
    given: dict[str, object] = {}
    for dest, value in (*textbook.items(), *_options(options).items()):
        if value is not None:
            given[_name("option", dest)] = value
    ask = Ask(context=_maybe_count("--context", context, MAX_CONTEXT), batch=_count("--batch", batch, MAX_BATCH),
              tp=whole(tp, "--tp", lo=1), pp=whole(pp, "--pp", lo=1),  # the engine says what the model allows
              weights=_name("--weights-dtype", weights_dtype), kv_dtype=_name("--kv-dtype", kv_dtype))
    common = {"tp": ask.tp != 1, "pp": ask.pp != 1, "batch": ask.batch != 1, "kv_dtype": ask.kv_dtype != "auto",
              "weights_dtype": ask.weights != "auto"}
    reg.refuse_foreign(command, server.name, [*given, *(d for d, on in common.items() if on)])
    getattr(server, "check_weights", known_weights)(ask.weights)  # a format the engine cannot read: one line
    known = {o.dest: o for o in server.options}
    for dest, value in given.items():
        if dest not in known:
            raise InputError(f"{dest} is not an option of {server.name}: use one of {', '.join(known) or 'none'}")
        given[dest] = check_option(known[dest], value)
    return reg, server, replace(ask, options=tuple(given.items()))


def simulate(
    model: str | ModelSpec,
    *,
    gpu: str | GPU | None = None,
    gpu_memory: int | None = None,
    trace: str | Sequence[RequestSpec] | None = None,
    synthetic: str | None = None,
    tokenizer: str | None = None,
    engine: str = "vllm",
    tp: int = 1,
    pp: int = 1,
    weights_dtype: str = "auto",
    kv_dtype: str = "auto",
    context: int | None = None,
    prefix_caching: bool = True,
    chunked_prefill: bool = True,
    policies: tuple[str, ...] = ("paged", "contiguous-max", "contiguous-exact"),
    options: dict[str, object] | None = None,
    registry: Registry | None = None,
    on_step: Any = None,
) -> SimAnswer:
    """Replay traffic through the KV cache ``engine`` plans for ``model`` on ``gpu`` (as ``kvbudget fit`` would size
    it): a JSON Lines ``trace`` file (or the requests themselves, ``kvbudget.sim.trace.RequestSpec``) or a ``synthetic`` workload spec (``"requests=500,rate=4,prompt=sharegpt"``;
    ``kvbudget.sim.workload``). Runs vLLM's V1 scheduler (FCFS, chunked prefill, prefix caching, preemption by
    recompute) under each allocation ``policy`` and returns what each measured (``answer.results``)."""
    from .questions.simulate import simulate as _simulate
    from .sim.kv import POLICIES

    if (trace is None) == (synthetic is None):
        raise InputError("simulate needs exactly one of --trace FILE or --synthetic SPEC")
    chosen = _names("--policies", policies)  # a bare string is one policy (list() made it its letters)
    bad = [p for p in chosen if p not in POLICIES]
    if bad:
        raise InputError(f"--policies: unknown policy {bad[0]!r} (use {', '.join(POLICIES)})")
    chosen = ("paged", *(p for p in dict.fromkeys(chosen) if p != "paged"))
    _, server, ask = _fit_ask("fit", engine, tp, pp, weights_dtype, kv_dtype, context, 1, options, registry)
    spec, device = _spec(model), _device(gpu, gpu_memory)
    # the requests are read (or generated) once the engine's plan is known to start: a bad flag costs no trace read
    requests = ((lambda: _request_specs(trace)) if trace is not None and not isinstance(trace, str)
                else _requests(trace, synthetic, tokenizer))
    return _simulate(spec, device, server, ask, requests, policies=chosen, prefix_caching=bool(prefix_caching),
                     chunked_prefill=bool(chunked_prefill), on_step=on_step)


def _request_specs(trace: object) -> list[RequestSpec]:
    """``trace`` given as the requests themselves: a list or tuple of RequestSpec (another object raised TypeError or
    AttributeError inside the replay)."""
    from .sim.trace import MAX_REQUESTS, RequestSpec

    if not isinstance(trace, (list, tuple)) or len(trace) > MAX_REQUESTS:
        raise InputError(f"--trace must be a file name or a list of RequestSpec (at most {MAX_REQUESTS:,}), "
                         f"not {excerpt(trace)}")
    bad = next((r for r in trace if not isinstance(r, RequestSpec)), None)
    if bad is not None:
        raise InputError(f"--trace: each request must be a kvbudget.sim.trace.RequestSpec, not {excerpt(bad)}")
    if not trace:
        raise InputError("--trace holds no requests")
    return list(trace)


def _requests(trace: str | None, synthetic: str | None, tokenizer: str | None) -> Callable[[], list[Any]]:
    """A function giving the requests: the files and the spec are checked now, the trace read or the workload made
    when it is called."""
    from .inputs import check_file, read_text
    from .sim import trace as traces
    from .sim import workload

    if tokenizer and trace is None:  # it was read, then passed over: the workload's prompts are counts
        raise InputError("--tokenizer counts a trace's 'text' prompts, and a synthetic workload has none: drop it, or "
                         "give --trace FILE")
    tokenize = _tokenizer(tokenizer) if tokenizer else None
    if trace is not None:
        path = _name("--trace", trace)
        check_file(path, "trace", traces.MAX_TRACE_BYTES)
        return lambda: traces.read_trace(path, tokenize)
    w = workload.parse_workload(_name("--synthetic", synthetic), lambda path: read_text(path, "histogram", 1 << 24))
    return lambda: workload.generate(w)


def _tokenizer(path: str) -> Any:
    """``text -> token ids`` with a local tokenizer.json, through the ``tokenizers`` package."""
    from .inputs import read_text

    text = read_text(_name("--tokenizer", path), "tokenizer", 64 << 20)
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise InputError("--tokenizer needs the tokenizers package: pip install 'kvbudget[tokenize]' (or tokenizers)") from None
    try:
        tok = Tokenizer.from_str(text)
    except Exception as exc:  # the Rust library's own error types
        raise InputError(f"--tokenizer {excerpt(path)}: not a tokenizer.json the tokenizers package reads "
                         f"({str(exc)[:120]})") from None
    return lambda s: tok.encode(s).ids


def engine_plan(model: str | ModelSpec, *, gpu: str | GPU | None = None, gpu_memory: int | None = None,
                engine: str = "vllm", context: int | None = None, tp: int = 1, pp: int = 1,
                kv_dtype: str = "auto", weights_dtype: str = "auto") -> EnginePlan:
    """One engine's plan under its own defaults (``engine``: vllm, sglang, trtllm, llama.cpp, transformers),
    in the figures every engine has: weights and KV pool per GPU, the tokens it holds, the requests of
    ``context`` tokens at once, whether it starts (and ``error``), and the lines it prints (``printed``).
    The same object ``kvbudget compare`` shows one row of. ``context`` defaults to the model's; ``weights_dtype``
    is compare's --weights-dtype."""
    from .engines.base import default_registry, known_weights, setup

    spec = _spec(model)
    server = default_registry().get(_name("engine", engine))
    asked = setup(_maybe_count("--context", context, MAX_CONTEXT) or spec.max_context, _count("--tp", tp, MAX_PARALLEL),
                  _count("--pp", pp, MAX_PARALLEL), _name("--kv-dtype", kv_dtype), _name("--weights-dtype", weights_dtype))
    getattr(server, "check_weights", known_weights)(asked.weights)
    return server.plan(spec, _device(gpu, gpu_memory), asked)


def _device(gpu: object, gpu_memory: object) -> GPU:
    if gpu_memory is not None:
        return custom_gpu(_count("gpu_memory (bytes)", gpu_memory, MAX_SIZE))
    if isinstance(gpu, GPU):
        return gpu
    if gpu is not None:
        return _find_gpu(_name("gpu", gpu))
    raise InputError("give a GPU (--gpu H100) or its memory (--gpu-memory 48GiB)")


def vllm_plan(
    model: str | ModelSpec, *, gpu: str | GPU | None = None, gpu_memory: int | None = None,
    settings: VllmSettings | None = None,
) -> VllmPlan:
    """What vLLM will do and print at start-up for ``model`` on ``gpu`` with ``settings``
    (engine arguments; ``VllmSettings()`` is ``vllm serve`` with its defaults)."""
    from .engines.base import Ask, default_registry

    server = default_registry().get("vllm")
    spec = _spec(model)
    s = _settings(settings, server) or server.settings(spec, Ask())
    return server.run(spec, _device(gpu, gpu_memory), s)  # type: ignore[no-any-return]


def _settings(settings: object, server: Engine) -> Any:
    """``settings`` when they are ``server``'s own record (``VllmSettings`` ...); one error line otherwise."""
    if settings is not None and not server.accepts(settings):
        raise InputError(f"settings are not {server.label}'s ({excerpt(settings)}): give {server.name}'s own record, "
                         f"or tp, pp, weights and kv_dtype")
    return settings


def explain(
    command: str | list[str], *, gpu: str | GPU | None = None, gpu_memory: int | None = None,
    version: str | None = None, num_gpus: int | None = None, registry: Registry | None = None,
) -> FitAnswer:
    """Read a pasted launch command (``vllm serve ...``, ``python -m sglang.launch_server ...``, ``trtllm-serve ...``,
    ``llama-server ...``) and plan it under that engine's rules: the answer ``kvbudget explain`` prints, with the
    engine's own suggestions (``advice``: vLLM's flags that would help). ``version``: the vLLM release."""
    from .engines.base import default_registry
    from .inputs import split_command
    from .questions.readers import explain as _explain

    if not isinstance(command, str) and not (isinstance(command, list) and all(isinstance(a, str) for a in command)):
        raise InputError(f"command must be the launch command as a string or a list of strings, not {excerpt(command)}")
    words = split_command(command) if isinstance(command, str) else list(command)
    if not words:
        raise InputError("give the launch command, e.g. kvbudget.explain('vllm serve MODEL', gpu='H100')")
    given: dict[str, object] = {"num_gpus": _maybe_count("--num-gpus", num_gpus, MAX_PARALLEL)}
    if version is not None:
        given["vllm_version"] = _name("version", version)
    return _explain(words, _device(gpu, gpu_memory), given, registry or default_registry())[1]


# --- inverse questions, exact at the engine's granularity --------------------------------------------------


def max_concurrency(model: str | ModelSpec, *, context: int, gpu: str | GPU | None = None,
                    gpu_memory: int | None = None, settings: object = None, engine: str = "vllm",
                    tp: int = 1, pp: int = 1, weights: str = "auto", kv_dtype: str = "auto",
                    registry: Registry | None = None) -> int:
    """The most requests of ``context`` tokens the engine holds at once; 0 if it does not start.

    vLLM (``settings``: a ``VllmSettings``, or ``tp``, ``pp``, ``weights``, ``kv_dtype``): whole requests of the KV
    pool's blocks (``num_gpu_blocks // blocks per request``), capped by ``max_num_seqs``, from one plan. Other
    engines (``engine="sglang" | "trtllm" | "llama.cpp"``): whole requests of their pool, the scheduler admitting
    what it holds (``plan/capacity.py``)."""
    context = _count("--context", context, MAX_CONTEXT)
    server, spec, device, layout, own = _inverse_args(model, gpu, gpu_memory, settings, engine, tp, pp, weights,
                                                      kv_dtype, registry)
    if own is not None:  # the engine answers from one plan of its own settings
        return server.held_at(spec, device, own, context)  # type: ignore[no-any-return]
    from .plan.capacity import held

    return held(spec, device, server.name, context, **layout, registry=registry)


def _inverse_args(model: object, gpu: object, gpu_memory: object, settings: object, engine: object, tp: object,
                  pp: object, weights: object, kv_dtype: object, registry: Registry | None) -> tuple[Any, ...]:
    """The engine, model and GPU of an inverse question, the layout for its replica search, and the engine's own
    settings when it answers from one plan of them (``held_at`` / ``longest_for``)."""
    from .engines.base import Ask, default_registry

    server = (registry or default_registry()).get(_name("engine", engine))
    layout: dict[str, Any] = {"tp": _count("--tp", tp, MAX_PARALLEL), "pp": _count("--pp", pp, MAX_PARALLEL),
                              "weights": _name("--weights-dtype", weights), "kv": _name("--kv-dtype", kv_dtype)}
    spec, device = _spec(model), _device(gpu, gpu_memory)
    s = _settings(settings, server)
    if not hasattr(server, "held_at"):
        if s is not None:
            raise InputError(f"{server.name} takes tp, pp, weights and kv_dtype, not settings")
        return server, spec, device, layout, None
    if s is not None and tuple(layout.values()) != (1, 1, "auto", "auto"):
        raise InputError(f"give tp, pp, weights and kv_dtype inside settings when you pass {server.label} settings")
    if s is None:
        s = server.settings(spec, Ask(tp=layout["tp"], pp=layout["pp"], weights=layout["weights"],
                                      kv_dtype=layout["kv"]))
    return server, spec, device, layout, s


def max_context(model: str | ModelSpec, *, concurrency: int, gpu: str | GPU | None = None,
                gpu_memory: int | None = None, settings: object = None, engine: str = "vllm",
                tp: int = 1, pp: int = 1, weights: str = "auto", kv_dtype: str = "auto",
                registry: Registry | None = None) -> int:
    """The longest context at which ``concurrency`` requests fit at once, up to the model's limit; 0 if not
    even one token each (or, for vLLM, if the scheduler's ``max_num_seqs`` never runs that many at once).

    vLLM: its own binary search over lengths on one profiled pool. Other engines: the longest ``C`` whose
    plan holds ``concurrency`` requests while ``C + 1``'s does not (``plan/capacity.py``)."""
    concurrency = _count("--concurrency", concurrency, MAX_BATCH)
    server, spec, device, layout, own = _inverse_args(model, gpu, gpu_memory, settings, engine, tp, pp, weights,
                                                      kv_dtype, registry)
    if own is not None:
        return server.longest_for(spec, device, own, concurrency)  # type: ignore[no-any-return]
    from .plan.capacity import longest_context

    return longest_context(spec, device, server.name, concurrency, **layout, registry=registry)


def fewest_gpus(model: str | ModelSpec, *, concurrency: int, context: int, gpu: str | GPU | None = None,
                gpu_memory: int | None = None, max_gpus: int = 64, gpus_per_node: int | None = None,
                weights: tuple[str, ...] = ("auto",), kv_dtype: tuple[str, ...] = ("auto",),
                engine: str = "vllm", fraction: float | None = None, version: str = "current") -> PlanRow | None:
    """The deployment with the fewest GPUs of one type (then the most headroom) that serves ``concurrency``
    requests of ``context`` tokens: layout, replicas and precision as ``kvbudget plan`` searches them, with
    ``engine``'s rules (vllm, sglang, trtllm, llama.cpp), its memory ``fraction`` and vLLM ``version``."""
    from .plan.search import search

    concurrency = _count("--concurrency", concurrency, MAX_BATCH)
    context = _count("--context", context, MAX_CONTEXT)
    max_gpus = _count("--max-gpus", max_gpus, MAX_PARALLEL)
    gpus_per_node = None if gpus_per_node is None else _count("--gpus-per-node", gpus_per_node, MAX_PARALLEL)
    if fraction is not None:
        fraction = real(fraction, "fraction", lo=0, hi=1, lo_open=True)
    rows = [d for d in search(_spec(model), concurrency, context, [_device(gpu, gpu_memory)], max_gpus=max_gpus,
                              gpus_per_node=gpus_per_node, weights=_names("--weights-dtype", weights),
                              kv=_names("--kv-dtype", kv_dtype), engine=_name("engine", engine),
                              fraction=fraction, version=_name("version", version)) if d.serves]
    return min(rows, key=lambda d: (d.num_gpus, -d.headroom), default=None)


def _own(name: str) -> str:
    """A precision of ``plan``'s lists: ``ckpt``, the word its table prints for the checkpoint's own format, is
    ``auto``."""
    return "auto" if name.lower() == "ckpt" else name


def plan_deployments(model: str | ModelSpec, *, concurrency: int, context: int, engine: str = "vllm", gpus: str | None = None,
         max_gpus: int = 64, gpus_per_node: int | None = None, weights: str | None = None, kv_dtype: str | None = None,
         prices: str | None = None, options: dict[str, object] | None = None,
         registry: Registry | None = None, slo: str | None = None) -> PlanAnswer:
    """``kvbudget plan``: the cheapest deployments (GPU type x count x layout x precision) that serve
    ``concurrency`` requests of ``context`` tokens under ``engine``'s rules, and what each lever buys for the best.
    ``gpus``, ``weights`` and ``kv_dtype`` are comma-separated lists (default: every catalog GPU, and the engine's
    precisions); ``prices`` a JSON or CSV file of $/hour per GPU; ``slo`` a latency target
    (``"ttft=2s,tpot=50ms"``: each replica runs only the batch that meets it, by the roofline step-time model)."""
    from .engines.base import default_registry
    from .hardware import gpus as catalog_gpus
    from .plan.prices import read_prices
    from .plan.slo import parse_slo
    from .questions.plan import plan as _plan

    reg = registry or default_registry()
    server = reg.get(_name("engine", engine))
    names = list(dict.fromkeys(g.strip() for g in _name("--gpus", gpus).split(",") if g.strip())) if gpus is not None else None
    if names is not None and len(names) > 64:
        raise InputError(f"--gpus names {len(names):,} GPU types: give at most 64 (see `kvbudget gpus`)")
    chosen = list({g.name: g for g in map(_find_gpu, names)}.values()) if names is not None else catalog_gpus()
    if not chosen:
        raise InputError("--gpus names no GPU")
    w = tuple(dict.fromkeys(_own(_name("--weights-dtype", x.strip())) for x in (weights or ",".join(server.plan_weights)).split(",")
                            if x.strip()))
    k = tuple(dict.fromkeys(_own(_name("--kv-dtype", x.strip())) for x in (kv_dtype or ",".join(server.plan_kv)).split(",")
                            if x.strip()))
    if not w or not k:
        raise InputError("--weights-dtype and --kv-dtype need at least one value each")
    if len(w) > 12 or len(k) > 12:
        raise InputError("--weights-dtype and --kv-dtype take at most 12 values each")
    for name in w:
        server.check_weights(name)  # an unknown format is one error line, before the search
    for name in k:
        server.check_kv(name)
    version = str(_options(options).get("vllm_version") or "current")
    return _plan(_spec(model), _count("--concurrency", concurrency, MAX_BATCH), whole(context, "--context", lo=1),
                 chosen, server, max_gpus=whole(max_gpus, "--max-gpus", lo=1),
                 gpus_per_node=_maybe_count("--gpus-per-node", gpus_per_node, MAX_PARALLEL), weights=w, kv=k,
                 prices=read_prices(_name("--prices", prices)) if prices is not None else None, version=version, registry=reg,
                 slo=parse_slo(_name("--slo", slo)) if slo is not None else None)


def levers(model: str | ModelSpec, *, context: int, gpu: str | GPU | None = None, gpu_memory: int | None = None,
           engine: str = "vllm", tp: int = 1, pp: int = 1, weights: str = "auto", kv_dtype: str = "auto",
           options: dict[str, object] | None = None, registry: Registry | None = None) -> LeversAnswer:
    """``kvbudget levers``: one deployment as configured under ``engine``'s rules, and what each lever (FP8 or 4-bit
    weights, a smaller KV cache, half the context, more GPUs, a replica, the memory fraction ...) buys."""
    from .engines.base import default_registry
    from .questions.plan import levers as _levers

    reg = registry or default_registry()
    server = reg.get(_name("engine", engine))
    return _levers(_spec(model), _device(gpu, gpu_memory), server, _count("--context", context, MAX_CONTEXT),
                   tp=whole(tp, "--tp", lo=1), pp=whole(pp, "--pp", lo=1),
                   weights=_name("--weights-dtype", weights), kv=_name("--kv-dtype", kv_dtype), options=_options(options),
                   registry=reg)


def kv_plot(model: str | ModelSpec, path: str, *, context: int | None = None, kv_dtype: str = "auto", tp: int = 1) -> None:
    """Draw the KV cache against length and batch, with the crossover where it outgrows the weights, to ``path``."""
    from .report.plots import kv_plot as draw

    spec = _spec(model)
    tp = _count("--tp", tp, MAX_PARALLEL)  # checked as kv() checks them: tp=0 divided by zero, tp=2.5 was drawn
    draw(spec, _kv_weights(spec, tp), _name("--plot", path), context=_maybe_count("--context", context, MAX_CONTEXT),
         kv_dtype=_name("--kv-dtype", kv_dtype), tp=tp)


def _kv_weights(spec: ModelSpec, tp: int) -> int:
    """The weights per GPU the KV cache is set against in ``kv``'s figures (the checkpoint's format)."""
    from .engines.textbook import weight_format
    from .parallel import stages

    return stages(spec, weight_format(spec, "auto"), tp, 1)[0].weights_bytes


def kv_curve(model: str | ModelSpec, *, batch: int = 1, kv_dtype: str = "auto", tp: int = 1) -> dict[str, Any]:
    """KV cache bytes per GPU against sequence length for ``batch`` sequences, with the weights and the crossover:
    the data of ``kv --plot``'s left panel, as JSON (``report.plots.kv_curve_doc``)."""
    from .report.plots import kv_curve_doc

    spec = _spec(model)
    tp = _count("--tp", tp, MAX_PARALLEL)
    return kv_curve_doc(spec, _kv_weights(spec, tp), batch=_count("--batch", batch, MAX_BATCH),
                        kv_dtype=_name("--kv-dtype", kv_dtype), tp=tp)


DEFAULT_WORKLOAD = "requests=500,rate=4,prompt=sharegpt,output=sharegpt,seed=0"


def size(model: str, *, gpu: str | None = None, gpu_memory: int | None = None, engine: str = "vllm", tp: int = 1,
         pp: int = 1, weights_dtype: str = "auto", kv_dtype: str = "auto", context: int | None = None,
         log: str | None = None, trace: str | None = None, synthetic: str | None = None, tokenizer: str | None = None,
         metrics: str | None = None, dcgm: str | None = None, nvidia_smi: str | None = None, interval: float = 2.0,
         timeout: float = 5.0, options: dict[str, object] | None = None, registry: Registry | None = None,
         on_step: Any = None) -> SizeAnswer:
    """``kvbudget size``: the sizing checklist in one run (``questions/size.py``): KV per token, the engine's
    start-up figures (checked against its start-up ``log`` text when given), a load test through that cache (a
    ``trace`` file, a ``synthetic`` spec, or a ShareGPT-like default), the running server's ``metrics`` judged
    against the plan when given, and the budget re-run with the measured prefix-cache reuse."""
    from .engines.base import default_registry
    from .questions.diagnose import diagnose_once, expected_from_fit
    from .questions.readers import check as _check
    from .questions.size import SizeAnswer, rerun

    reg = registry or default_registry()
    spec = _spec(model)
    fitted = fit(spec, gpu=gpu, gpu_memory=gpu_memory, engine=engine, tp=tp, pp=pp, weights_dtype=weights_dtype,
                 kv_dtype=kv_dtype, context=context, options=options, registry=reg)
    steps = [("KV per token", f"from {spec.name}'s config"),
             ("start-up", f"{fitted.label}'s plan on {fitted.device.name}")]
    kv_answer = kv(spec, context=fitted.row.context or context, kv_dtype=kv_dtype, tp=tp)
    checked = None
    if log is not None:
        if not isinstance(log, str):
            raise InputError(f"--log must be the start-up log's text (a string), not {excerpt(log)}")
        checked = _check(log, {"model": model, "gpu": gpu, "gpu_memory": gpu_memory, "flags": None}, reg)
        steps.append(("start-up log", f"{checked[0].label}'s log checked against kvbudget's figures"))
    else:
        steps.append(("start-up log", "skipped: give --log FILE (the engine's start-up log) to check the prediction"))
    sim = None
    if fitted.row.starts and fitted.row.blocks:
        workload = synthetic if (trace is not None or synthetic is not None) else DEFAULT_WORKLOAD
        sim = simulate(spec, gpu=gpu, gpu_memory=gpu_memory, trace=trace, synthetic=workload if trace is None else None,
                       tokenizer=tokenizer, engine=engine, tp=tp, pp=pp, weights_dtype=weights_dtype, kv_dtype=kv_dtype,
                       context=context, options=options, registry=reg, on_step=on_step)
        what = (f"trace {trace}" if trace is not None else f"synthetic workload {workload}"
                + ("" if synthetic is not None else " (no --trace or --synthetic given: a ShareGPT-like default)"))
        steps.append(("load test", f"{sim.requests:,} requests replayed: {what}"))
    else:
        why = "it does not start" if not fitted.row.starts else "its KV cache is not a paged pool"
        steps.append(("load test", f"skipped: {fitted.label} {why} with these settings"))
    diag = None
    if metrics is not None:
        diag = diagnose_once(metrics, dcgm=dcgm, nvidia_smi=nvidia_smi, expect=lambda _: expected_from_fit(fitted),
                             interval=interval, timeout=timeout)
        steps.append(("monitoring", f"{metrics} judged against the plan"))
    else:
        steps.append(("monitoring", "skipped: give --metrics URL|FILE (the running server's /metrics)"))
    again = rerun(fitted, sim, diag)
    steps.append(("budget re-run", f"prefix-cache hit rate from {again.source}" if again.hit_rate is not None
                  else "no measured reuse (prefix caching off, or no traffic): the static figure stands"))
    return SizeAnswer(spec.name, kv_answer, fitted, checked, sim, diag, again, tuple(steps), reg.get(fitted.engine))
