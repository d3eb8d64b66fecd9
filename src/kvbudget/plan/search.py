"""The cheapest deployments that serve a load: every GPU type x layout x precision, planned with vLLM's
or SGLang's own rules (``engines/vllm/``, ``engines/sglang/``), kept when they start and hold ``concurrency`` requests of ``context``
tokens, ranked by price per hour, then headroom.

A layout is TP within a node (a divisor of the attention heads, at most ``gpus_per_node``), PP across
nodes (only once TP fills a node), and as many data-parallel replicas as the load needs. One replica's
capacity is exact at block granularity: the requests of ``context`` tokens its KV pool holds
(``vllm.capacity``), capped by ``max_num_seqs`` (raised to the load when the pool holds more).
"""

from __future__ import annotations

from collections.abc import Callable

from .._record import record, replace
from ..engines.base import Launch, Layout, Registry, default_registry
from ..hardware import GPU
from ..model.spec import ModelSpec
from ..units import InputError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    from ..engines.base import Engine, Replica


@record
class Deployment:
    """One candidate: a replica's layout and precision, how many replicas, and what it costs."""

    gpu: str
    tp: int
    pp: int
    replicas: int
    weights_dtype: str  # "auto": the checkpoint's format
    kv_dtype: str
    num_gpus: int
    per_replica: int  # requests of ``context`` tokens one replica holds at once
    max_concurrency: int  # all replicas together
    price_per_hour: float | None
    starts: bool
    serves: bool  # starts and holds the load within the GPU limit
    reason: str  # why it is excluded ("" when it serves)
    headroom: float  # max_concurrency / concurrency - 1
    weights_bytes: int  # per GPU
    kv_cache_bytes: int  # per GPU
    kv_cache_tokens: int  # per replica
    max_num_seqs: int  # the scheduler's cap on running requests (vLLM max_num_seqs, SGLang max_running_requests)
    settings: object  # the engine's settings that realise it (``VllmSettings``, ``SGLangSettings`` ...)
    engine: str = "vllm"
    gpus_per_node: int = 8  # the node this GPU comes in (catalog), or --gpus-per-node
    label: str = "vLLM"  # the engine, as a sentence names it
    split_heads: bool = True  # TP splits the heads (llama.cpp: its GPUs split the layers)
    launch: Launch | None = None  # the command and manifest that realise a deployment that serves
    slots: int | None = None  # the requests the server is launched to run at once (llama-server -np)
    slo_batch: int | None = None  # plan --slo: requests a replica runs within the latency target
    ttft_s: float | None = None  # plan --slo: time to first token at that batch (roofline estimate)
    tpot_s: float | None = None  # plan --slo: time per output token at that batch (roofline estimate)


def layouts(spec: ModelSpec, max_gpus: int, gpus_per_node: int) -> list[tuple[int, int]]:
    """(tp, pp) pairs: TP a power of two within a node, PP across nodes once TP fills one."""
    out = []
    tp = 1
    while tp <= min(gpus_per_node, max_gpus):
        out.append((tp, 1))
        tp *= 2
    full = max(t for t, _ in out)
    pp = 2
    while full * pp <= max_gpus and pp <= spec.num_layers:
        out.append((full, pp))
        pp *= 2
    return out




def servers(registry: Registry | None = None) -> dict[str, Callable[..., Replica]]:
    """The engines that size a serving replica (every registered engine with ``replica``), by name."""
    return {e.name: e.replica for e in registry or default_registry() if hasattr(e, "replica")}


def replica_of(engine: str, what: str, registry: Registry | None = None) -> Callable[..., Replica]:
    """``engine``'s replica planner; one error line naming the engines that have one otherwise."""
    known = servers(registry)
    if engine not in known:
        raise InputError(f"{what} the engines {', '.join(known)}, not {engine!r}")
    return known[engine]


def with_site(planner: Callable[..., Replica], site: tuple[Any, ...]) -> Callable[..., Replica]:
    """``planner`` with a site profile's terms (--profile) for every replica it plans (itself where there are none:
    only the engines that read profiles take them)."""
    if not site:
        return planner
    from functools import partial

    return partial(planner, site=site)


def evaluate(spec: ModelSpec, gpu: GPU, tp: int, pp: int, weights: str, kv: str, concurrency: int, context: int,
             max_gpus: int, price: float | None, version: str, engine: str, fraction: float | None,
             planner: Callable[..., Replica]) -> Deployment:
    """One layout and precision on one GPU type: plan a replica (``planner``: ``engine``'s, ``replica_of``), then the
    replicas the load needs."""
    try:
        r = planner(spec, gpu, tp, pp, weights, kv, concurrency, context, version, fraction)
    except InputError as exc:  # TP not a divisor of the heads, a format the GPU cannot run, ...
        return Deployment(gpu=gpu.name, tp=tp, pp=pp, replicas=0, weights_dtype=weights, kv_dtype=kv, num_gpus=tp * pp,
                          per_replica=0, max_concurrency=0, price_per_hour=None if price is None else round(price * tp * pp, 4),
                          starts=False, serves=False, reason=str(exc), headroom=-1.0, weights_bytes=0, kv_cache_bytes=0,
                          kv_cache_tokens=0, max_num_seqs=0, settings=None, engine=engine)
    reason = r.reason
    per = r.per if not reason else 0
    if not reason and per == 0:
        reason = f"the KV cache holds no request of {context:,} tokens"
    replicas = -(-concurrency // per) if per else 0
    n = tp * pp * replicas if per else tp * pp
    if per and n > max_gpus:
        reason = f"needs {replicas} replicas = {n} GPUs, more than --max-gpus {max_gpus}"
    total = per * replicas
    return Deployment(
        gpu=gpu.name, tp=tp, pp=pp, replicas=replicas, weights_dtype=weights, kv_dtype=kv, num_gpus=n, per_replica=per,
        max_concurrency=total, price_per_hour=None if price is None else round(price * n, 4), starts=r.starts,
        serves=not reason, reason=reason, headroom=total / concurrency - 1 if per else -1.0,
        weights_bytes=r.weights_bytes, kv_cache_bytes=r.kv_cache_bytes, kv_cache_tokens=r.kv_cache_tokens,
        max_num_seqs=r.cap, settings=r.settings, engine=engine,
    )


def search(spec: ModelSpec, concurrency: int, context: int, gpus: list[GPU], *, max_gpus: int = 64,
           gpus_per_node: int | None = None, weights: tuple[str, ...] = ("auto", "fp8"), kv: tuple[str, ...] = ("auto", "fp8"),
           prices: dict[str, float] | None = None, version: str = "current", engine: str = "vllm",
           fraction: float | None = None, registry: Registry | None = None, site: tuple[Any, ...] = ()) -> list[Deployment]:
    """Every candidate, those that serve first (cheapest, then most headroom), then the excluded. ``fraction``:
    the engine's memory fraction (vLLM's gpu_memory_utilization, SGLang's mem_fraction_static, TensorRT-LLM's
    free_gpu_memory_fraction) instead of its default. ``gpus_per_node``: the node size for every GPU type instead of
    the catalog's (an HGX board of 8, one GH200 superchip, at most 4 consumer cards ...)."""
    if concurrency < 1 or context < 1:
        raise InputError("--concurrency and --context must be at least 1")
    registry = registry or default_registry()  # built once: every candidate below asks it for the engine
    planner = with_site(replica_of(engine, "plan knows", registry), site)
    if max_gpus < 1 or (gpus_per_node is not None and gpus_per_node < 1):
        raise InputError("--max-gpus and --gpus-per-node must be at least 1")
    server = registry.get(engine)
    own = spec.weight_format
    if "auto" in weights and own is not None and own.quantized:  # an FP8 checkpoint: "fp8" is its "auto" row again
        weights = tuple(w for w in weights if w == "auto" or w.lower() != own.name)
    rows = []
    # the launch of a replica depends on its settings and layout, not on the GPU type: one per distinct replica
    launches: dict[tuple[object, int, int, int, int], Launch] = {}
    for gpu in gpus:
        price = (prices or {}).get(gpu.name, gpu.price_per_hour)
        node = gpus_per_node or gpu.gpus_per_node
        for tp, pp in layouts(spec, max_gpus, node):
            if not server.multi_node and tp * pp > node:  # kvbudget writes multi-node launch files for it or not
                continue
            if not server.pipeline and pp > 1:  # llama.cpp splits layers within one server, it has no stages
                continue
            for w in weights:
                for k in kv:
                    d = evaluate(spec, gpu, tp, pp, w, k, concurrency, context, max_gpus, price, version, engine, fraction,
                                 planner)
                    launch = None
                    if d.serves:
                        key = (d.settings, d.tp, d.pp, d.replicas, node)
                        launch = launches.get(key) or launches.setdefault(key, _launch(server, spec.name, d, node))
                    rows.append(replace(d, gpus_per_node=node, label=server.label, split_heads=server.tensor_parallel,
                                        launch=launch, slots=getattr(d.settings, "n_parallel", None)))
    return sorted(rows, key=_rank)


def _launch(server: Engine, model: str, d: Deployment, gpus_per_node: int) -> Launch:
    """The command that runs one replica of ``d``, with the manifest for all its replicas (or why there is none)."""
    from .launch import manifest

    out = server.launch(model, d.settings)
    try:
        if server.container is None:
            raise InputError(f"kvbudget knows no container image for {server.label}")
        return replace(out, manifest=manifest(model, list(out.argv), d.tp, d.pp, d.replicas, gpus_per_node,
                                              server.container))
    except InputError as exc:
        return replace(out, manifest_error=str(exc))


def fewest(spec: ModelSpec, concurrency: int, context: int, gpu: GPU, engine: str, layout: Layout, *,
           max_gpus: int = 64, gpus_per_node: int | None = None, registry: Registry | None = None) -> Deployment | None:
    """The deployment with the fewest GPUs of one type (then the most headroom) that serves the load, in the
    precision and memory fraction of ``layout`` (its layout itself is searched)."""
    rows = [d for d in search(spec, concurrency, context, [gpu], max_gpus=max_gpus, gpus_per_node=gpus_per_node,
                              weights=(layout.weights,), kv=(layout.kv,), engine=engine, fraction=layout.fraction,
                              version=layout.version, registry=registry, site=layout.site) if d.serves]
    return min(rows, key=lambda d: (d.num_gpus, -d.headroom), default=None)


def _rank(d: Deployment) -> tuple[int, float, int, float]:
    if not d.serves:
        return 2, 0.0, d.num_gpus, 0.0
    priced = d.price_per_hour is not None
    return (0 if priced else 1), d.price_per_hour or 0.0, d.num_gpus, -d.headroom
