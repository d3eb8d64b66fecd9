"""The public Python API: the same answers the CLI prints, as frozen dataclasses.

Every argument is checked where it enters, as the CLI checks its flags: a wrong type (a string for
a count, None, a list, a bool), NaN, infinity, a negative or absurd number raises
``kvbudget.InputError`` with the CLI's message, never AttributeError/TypeError or a NaN answer.

Which rules answer: ``fit`` is the textbook partition (weights + KV + activations + overhead, the
same for every engine) unless ``engine="vllm"``, which gives the plan ``kvbudget fit`` prints (vLLM's
own profiling and block rules); its result says which (``TextbookPlan.engine`` / ``VllmPlan.release``).
``vllm_plan``, ``max_concurrency``, ``max_context`` and ``fewest_gpus`` follow the engine they are given
(vLLM by default), as the CLI does.
"""

from __future__ import annotations

from ._record import fields, record
from .engines.base import EnginePlan
from .engines.textbook import DEFAULT_PREFILL_CHUNK, Deployment, MemoryPlan
from .engines.textbook import fit as _fit
from .hardware import GPU, custom_gpu
from .hardware import find_gpu as _find_gpu
from .inputs import excerpt, real, whole
from .kvcache import MAX_BATCH, MAX_CONTEXT, MAX_PARALLEL
from .model.resolve import load_model as _load_model
from .model.spec import ModelSpec
from .units import MAX_SIZE, InputError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from .engines.vllm import VllmPlan, VllmSettings
    from .engines.vllm.command import LaunchCommand
    from .kvreport import KVReport
    from .plan.search import Deployment as PlanRow

__all__ = ["InputError", "TextbookPlan", "explain", "fewest_gpus", "find_gpu", "fit", "kv", "load_model", "max_concurrency",
           "max_context", "vllm_plan"]

MAX_NAME = 4096  # characters in a model reference, a GPU name, a dtype


@record
class TextbookPlan(MemoryPlan):
    """``kvbudget.fit``'s answer: the textbook partition (weights + KV cache + activation workspace +
    runtime overhead, one rule for every engine). It is not what vLLM will do; ``kvbudget fit`` on the
    command line (and ``kvbudget.fit(..., engine="vllm")`` / ``kvbudget.vllm_plan``) follows vLLM's rules."""

    engine: str = "textbook"


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
    tp: int = 1,
    pp: int = 1,
    weights_dtype: str = "auto",
    kv_dtype: str = "auto",
    context: int | None = None,
    batch: int = 1,
    prefill_chunk: int = DEFAULT_PREFILL_CHUNK,
    overhead_bytes: int | None = None,
    activation_bytes: int | None = None,
    weights_bytes: int | None = None,
    engine: str = "textbook",
) -> TextbookPlan:
    """The textbook per-GPU memory partition (weights, KV cache, activation workspace, runtime
    overhead), the largest batch at ``context`` and the longest context at ``batch``, with a verdict.

    This is NOT what ``kvbudget fit`` prints: the CLI follows vLLM's own rules (profiling, blocks,
    CUDA graphs); for that, call ``vllm_plan`` (or ``max_concurrency`` / ``max_context``). The
    result is a ``TextbookPlan`` whose ``engine`` field says ``"textbook"``; ``engine`` takes no
    other value here.

    ``overhead_bytes``, ``activation_bytes`` and ``weights_bytes`` replace kvbudget's own
    estimates of those parts (per GPU) when given."""
    if _name("engine", engine) != "textbook":
        raise InputError(f"fit gives the textbook partition (engine='textbook'), not engine={excerpt(engine)}:"
                         " for an engine's own rules call kvbudget.engine_plan(..., engine=...) or kvbudget.vllm_plan")
    device = _device(gpu, gpu_memory)
    for name, value in (("--overhead", overhead_bytes), ("--activation", activation_bytes),
                        ("--weights-memory", weights_bytes)):
        _maybe_count(name, value, MAX_SIZE, lo=0)
    dep = Deployment(
        gpu=device, tp=_count("--tp", tp, MAX_PARALLEL), pp=_count("--pp", pp, MAX_PARALLEL),
        weights=_name("--weights-dtype", weights_dtype), kv_dtype=_name("--kv-dtype", kv_dtype),
        context=_maybe_count("--context", context, MAX_CONTEXT), batch=_count("--batch", batch, MAX_BATCH),
        prefill_chunk=_count("--prefill-chunk", prefill_chunk, MAX_CONTEXT), overhead_bytes=overhead_bytes,
        activation_bytes=activation_bytes, weights_bytes=weights_bytes,
    )
    plan = _fit(_spec(model), dep)
    return TextbookPlan(**{n: getattr(plan, n) for n in fields(plan)}, engine="textbook")


def engine_plan(model: str | ModelSpec, *, gpu: str | GPU | None = None, gpu_memory: int | None = None,
                engine: str = "vllm", context: int | None = None, tp: int = 1, pp: int = 1,
                kv_dtype: str = "auto") -> EnginePlan:
    """One engine's plan under its own defaults (``engine``: vllm, sglang, trtllm, llama.cpp, transformers),
    in the figures every engine has: weights and KV pool per GPU, the tokens it holds, the requests of
    ``context`` tokens at once, whether it starts (and ``error``), and the lines it prints (``printed``).
    The same object ``kvbudget compare`` shows one row of. ``context`` defaults to the model's."""
    from .engines.base import default_registry, setup

    spec = _spec(model)
    server = default_registry().get(_name("engine", engine))
    asked = setup(_maybe_count("--context", context, MAX_CONTEXT) or spec.max_context, _count("--tp", tp, MAX_PARALLEL),
                  _count("--pp", pp, MAX_PARALLEL), _name("--kv-dtype", kv_dtype))
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
    from .engines.vllm import VllmSettings, plan

    return plan(_spec(model), _device(gpu, gpu_memory), _settings(settings) or VllmSettings())


def _settings(settings: object) -> VllmSettings | None:
    from .engines.vllm import VllmSettings

    if settings is not None and not isinstance(settings, VllmSettings):
        raise InputError(f"settings must be kvbudget.engines.vllm.VllmSettings(...), not {excerpt(settings)}")
    return settings


def explain(
    command: str | list[str], *, gpu: str | GPU | None = None, gpu_memory: int | None = None,
    version: str | None = None,
) -> tuple[LaunchCommand, VllmPlan, list[tuple[str, VllmPlan]]]:
    """Read a pasted ``vllm serve ...`` command and plan it; with the flags that would help."""
    from .engines.vllm import VllmSettings, plan
    from .engines.vllm.command import parse_vllm_command
    from .engines.vllm.fixes import suggestions

    if not isinstance(command, str) and not (isinstance(command, list) and all(isinstance(a, str) for a in command)):
        raise InputError(f"command must be the launch command as a string or a list of strings, not {excerpt(command)}")
    base = VllmSettings(version=_name("version", version)) if version is not None else VllmSettings()
    cmd = parse_vllm_command(command, base)
    spec = _spec(cmd.model)
    device = _device(gpu, gpu_memory)
    result = plan(spec, device, cmd.settings)
    return cmd, result, suggestions(spec, device, cmd.settings, result)


# --- inverse questions, with vLLM's rules, exact at block granularity ------------------------------------


def max_concurrency(model: str | ModelSpec, *, context: int, gpu: str | GPU | None = None,
                    gpu_memory: int | None = None, settings: VllmSettings | None = None, engine: str = "vllm",
                    tp: int = 1, pp: int = 1, weights: str = "auto", kv_dtype: str = "auto") -> int:
    """The most requests of ``context`` tokens the engine holds at once; 0 if it does not start.

    vLLM (``settings``): whole requests of the KV pool's blocks (``num_gpu_blocks // blocks per request``),
    capped by ``max_num_seqs``. Other engines (``engine="sglang" | "trtllm" | "llama.cpp"`` with ``tp``, ``pp``,
    ``weights``, ``kv_dtype``): whole requests of their pool, the scheduler admitting what it holds
    (``plan/capacity.py``)."""
    context = _count("--context", context, MAX_CONTEXT)
    engine, tp, pp, weights, kv_dtype, settings = _engine_args(engine, tp, pp, weights, kv_dtype, settings)
    if engine != "vllm":
        from .plan.capacity import held

        _only_vllm_settings(settings, engine)
        return held(_spec(model), _device(gpu, gpu_memory), engine, context, tp=tp, pp=pp, weights=weights, kv=kv_dtype)
    from ._record import replace
    from .engines.vllm import capacity, plan

    base = _vllm_settings(settings, tp, pp, weights, kv_dtype)
    p = plan(_spec(model), _device(gpu, gpu_memory), replace(base, max_model_len=context))
    most, _ = capacity(p, 1)
    return min(most, p.max_num_seqs) if p.starts else 0


def _engine_args(engine: object, tp: object, pp: object, weights: object, kv_dtype: object,
                 settings: object) -> tuple[str, int, int, str, str, VllmSettings | None]:
    return (_name("engine", engine), _count("--tp", tp, MAX_PARALLEL), _count("--pp", pp, MAX_PARALLEL),
            _name("--weights-dtype", weights), _name("--kv-dtype", kv_dtype), _settings(settings))


def _vllm_settings(settings: VllmSettings | None, tp: int, pp: int, weights: str, kv_dtype: str) -> VllmSettings:
    """vLLM's settings: ``settings`` as given, or built from ``tp``, ``pp``, ``weights`` and ``kv_dtype`` (not both)."""
    from .engines.vllm import VllmSettings

    if settings is None:
        return VllmSettings(tensor_parallel_size=tp, pipeline_parallel_size=pp,
                            quantization=None if weights == "auto" else weights, kv_cache_dtype=kv_dtype)
    if (tp, pp, weights, kv_dtype) != (1, 1, "auto", "auto"):
        raise InputError("give tp, pp, weights and kv_dtype inside settings when you pass vLLM settings")
    return settings


def _only_vllm_settings(settings: object, engine: str) -> None:
    if settings is not None:
        raise InputError(f"settings are vLLM's; for {engine} give tp, pp, weights and kv_dtype")


def max_context(model: str | ModelSpec, *, concurrency: int, gpu: str | GPU | None = None,
                gpu_memory: int | None = None, settings: VllmSettings | None = None, engine: str = "vllm",
                tp: int = 1, pp: int = 1, weights: str = "auto", kv_dtype: str = "auto") -> int:
    """The longest context at which ``concurrency`` requests fit at once, up to the model's limit; 0 if not
    even one token each (or, for vLLM, if the scheduler's ``max_num_seqs`` never runs that many at once).

    vLLM: its own binary search over lengths on one profiled pool. Other engines: the longest ``C`` whose
    plan holds ``concurrency`` requests while ``C + 1``'s does not (``plan/capacity.py``)."""
    concurrency = _count("--concurrency", concurrency, MAX_BATCH)
    engine, tp, pp, weights, kv_dtype, settings = _engine_args(engine, tp, pp, weights, kv_dtype, settings)
    if engine != "vllm":
        from .plan.capacity import longest_context

        _only_vllm_settings(settings, engine)
        return longest_context(_spec(model), _device(gpu, gpu_memory), engine, concurrency, tp=tp, pp=pp,
                               weights=weights, kv=kv_dtype)
    from ._record import replace
    from .engines.vllm import capacity, plan

    spec = _spec(model)
    base = _vllm_settings(settings, tp, pp, weights, kv_dtype)
    p = plan(spec, _device(gpu, gpu_memory), replace(base, max_model_len=None))
    if (not p.starts and not p.num_gpu_blocks) or concurrency > p.max_num_seqs:
        return 0
    _, longest = capacity(replace(p, starts=True), concurrency)
    return longest


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
