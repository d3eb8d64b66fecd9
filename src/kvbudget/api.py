"""The public Python API: the same answers the CLI prints, as frozen dataclasses."""

from __future__ import annotations

from .engines.textbook import DEFAULT_PREFILL_CHUNK, Deployment, MemoryPlan
from .engines.textbook import fit as _fit
from .hardware import GPU, custom_gpu, find_gpu
from .model.resolve import load_model
from .model.spec import ModelSpec
from .units import InputError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from .engines.vllm import VllmPlan, VllmSettings
    from .engines.vllm_command import LaunchCommand
    from .kvreport import KVReport
    from .plan.search import Deployment as PlanRow

__all__ = ["fewest_gpus", "find_gpu", "fit", "kv", "load_model", "max_concurrency", "max_context"]


def _spec(model: str | ModelSpec) -> ModelSpec:
    return model if isinstance(model, ModelSpec) else load_model(model)


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

    return kv_report(_spec(model), context=context, batch=batch, kv_dtype=kv_dtype, tp=tp)


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
) -> MemoryPlan:
    """Per-GPU memory partition (weights, KV cache, activation workspace, runtime overhead),
    the largest batch at ``context`` and the longest context at ``batch``, with a verdict.

    ``overhead_bytes``, ``activation_bytes`` and ``weights_bytes`` replace kvbudget's own
    estimates of those parts (per GPU) when given."""
    device = _device(gpu, gpu_memory)
    for name, value in (("overhead", overhead_bytes), ("activation", activation_bytes), ("weights-memory", weights_bytes)):
        if value is not None and value < 0:
            raise InputError(f"--{name} must not be negative")
    dep = Deployment(
        gpu=device, tp=tp, pp=pp, weights=weights_dtype, kv_dtype=kv_dtype, context=context, batch=batch,
        prefill_chunk=prefill_chunk, overhead_bytes=overhead_bytes, activation_bytes=activation_bytes,
        weights_bytes=weights_bytes,
    )
    return _fit(_spec(model), dep)


def _device(gpu: str | GPU | None, gpu_memory: int | None) -> GPU:
    if gpu_memory is not None:
        if gpu_memory <= 0:
            raise InputError(f"GPU memory must be positive, got {gpu_memory}")
        return custom_gpu(gpu_memory)
    if isinstance(gpu, GPU):
        return gpu
    if gpu is not None:
        return find_gpu(gpu)
    raise InputError("give a GPU (--gpu H100) or its memory (--gpu-memory 48GiB)")


def vllm_plan(
    model: str | ModelSpec, *, gpu: str | GPU | None = None, gpu_memory: int | None = None,
    settings: VllmSettings | None = None,
) -> VllmPlan:
    """What vLLM will do and print at start-up for ``model`` on ``gpu`` with ``settings``
    (engine arguments; ``VllmSettings()`` is ``vllm serve`` with its defaults)."""
    from .engines.vllm import VllmSettings, plan

    return plan(_spec(model), _device(gpu, gpu_memory), settings or VllmSettings())


def explain(
    command: str | list[str], *, gpu: str | GPU | None = None, gpu_memory: int | None = None,
    version: str | None = None,
) -> tuple[LaunchCommand, VllmPlan, list[tuple[str, VllmPlan]]]:
    """Read a pasted ``vllm serve ...`` command and plan it; with the flags that would help."""
    from .engines.vllm import VllmSettings, plan
    from .engines.vllm_command import parse_vllm_command
    from .plan.vllm_fixes import suggestions

    base = VllmSettings(version=version) if version else VllmSettings()
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
    if concurrency < 1:
        raise InputError(f"concurrency must be at least 1, got {concurrency}")
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

    rows = [d for d in search(_spec(model), concurrency, context, [_device(gpu, gpu_memory)], max_gpus=max_gpus,
                              gpus_per_node=gpus_per_node, weights=weights, kv=kv_dtype, engine=engine,
                              fraction=fraction, version=version) if d.serves]
    return min(rows, key=lambda d: (d.num_gpus, -d.headroom), default=None)
