"""The cheapest deployments that serve a load: every GPU type x layout x precision, planned with vLLM's
or SGLang's own rules (``engines/vllm.py``, ``engines/sglang.py``), kept when they start and hold ``concurrency`` requests of ``context``
tokens, ranked by price per hour, then headroom.

A layout is TP within a node (a divisor of the attention heads, at most ``gpus_per_node``), PP across
nodes (only once TP fills a node), and as many data-parallel replicas as the load needs. One replica's
capacity is exact at block granularity: the requests of ``context`` tokens its KV pool holds
(``vllm.capacity``), capped by ``max_num_seqs`` (raised to the load when the pool holds more).
"""

from __future__ import annotations

from .._record import record, replace
from ..engines import sglang, vllm
from ..hardware import GPU
from ..model.spec import ModelSpec
from ..units import GiB, InputError


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
    settings: vllm.VllmSettings | sglang.SGLangSettings
    engine: str = "vllm"


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


def _short(p: vllm.VllmPlan, gpu: GPU) -> str:
    if p.error and "KV cache" in p.error and p.available_kv_cache_bytes > 0:
        need = p.blocks_per_request * p.bytes_per_block - p.available_kv_cache_bytes
        return f"KV cache short by {need / GiB:.2f} GiB for one request on {gpu.name}"
    if p.available_kv_cache_bytes <= 0:
        return f"weights ({p.weights_bytes / GiB:.2f} GiB per GPU) leave no room for the KV cache on {gpu.name}"
    return p.error or "does not start"


def evaluate(spec: ModelSpec, gpu: GPU, tp: int, pp: int, weights: str, kv: str, concurrency: int, context: int,
             max_gpus: int, price: float | None, version: str = "current") -> Deployment:
    """One layout and precision on one GPU type: plan a replica, then the replicas the load needs."""
    settings = vllm.VllmSettings(version=version, max_model_len=context, tensor_parallel_size=tp,
                                 pipeline_parallel_size=pp, quantization=None if weights == "auto" else weights,
                                 kv_cache_dtype=kv)

    def row(p: vllm.VllmPlan | None, per: int, reason: str, s: vllm.VllmSettings) -> Deployment:
        replicas = -(-concurrency // per) if per else 0
        n = tp * pp * replicas if per else tp * pp
        serves = per > 0 and n <= max_gpus and not reason
        if per and n > max_gpus and not reason:
            reason = f"needs {replicas} replicas = {n} GPUs, more than --max-gpus {max_gpus}"
        total = per * replicas
        return Deployment(
            gpu=gpu.name, tp=tp, pp=pp, replicas=replicas, weights_dtype=weights, kv_dtype=kv, num_gpus=n,
            per_replica=per, max_concurrency=total, price_per_hour=None if price is None else round(price * n, 4),
            starts=p is not None and p.starts, serves=serves, reason=reason,
            headroom=total / concurrency - 1 if per else -1.0,
            weights_bytes=p.weights_bytes if p else 0, kv_cache_bytes=p.available_kv_cache_bytes if p else 0,
            kv_cache_tokens=p.kv_cache_tokens if p else 0, max_num_seqs=p.max_num_seqs if p else 0, settings=s,
        )

    try:
        p = vllm.plan(spec, gpu, settings)
    except InputError as exc:  # TP not a divisor of the heads, a format the GPU cannot run, ...
        return row(None, 0, str(exc), settings)
    if not p.starts:
        return row(p, 0, _short(p, gpu), settings)
    pool, _ = vllm.capacity(p, 1)
    if pool > p.max_num_seqs and p.max_num_seqs < concurrency:  # let the scheduler use what the pool holds
        settings = replace(settings, max_num_seqs=min(pool, concurrency))
        p = vllm.plan(spec, gpu, settings)
        if not p.starts:
            return row(p, 0, _short(p, gpu), settings)
        pool, _ = vllm.capacity(p, 1)
    per = min(pool, p.max_num_seqs)
    if per == 0:
        return row(p, 0, f"KV cache holds no request of {context:,} tokens", settings)
    return row(p, per, "", settings)


def evaluate_sglang(spec: ModelSpec, gpu: GPU, tp: int, pp: int, weights: str, kv: str, concurrency: int, context: int,
                    max_gpus: int, price: float | None) -> Deployment:
    """The same with SGLang's rules: a replica holds the requests whose tokens fit in its pool
    (``max_total_num_tokens // context``), capped by ``max_running_requests`` (raised to the load)."""
    settings = sglang.SGLangSettings(tp=tp, pp=pp, context_length=context, kv_cache_dtype="fp8_e4m3" if kv.startswith("fp8") else "auto",
                                     quantization=None if weights == "auto" else weights)

    def row(p: sglang.SGLangPlan | None, per: int, reason: str, s: sglang.SGLangSettings) -> Deployment:
        replicas = -(-concurrency // per) if per else 0
        n = tp * pp * replicas if per else tp * pp
        if per and n > max_gpus and not reason:
            reason = f"needs {replicas} replicas = {n} GPUs, more than --max-gpus {max_gpus}"
        total = per * replicas
        return Deployment(
            gpu=gpu.name, tp=tp, pp=pp, replicas=replicas, weights_dtype=weights, kv_dtype=kv, num_gpus=n, per_replica=per,
            max_concurrency=total, price_per_hour=None if price is None else round(price * n, 4),
            starts=p is not None and p.starts, serves=per > 0 and not reason, reason=reason,
            headroom=total / concurrency - 1 if per else -1.0, weights_bytes=p.weights_bytes if p else 0,
            kv_cache_bytes=max(p.rest_bytes, 0) if p else 0, kv_cache_tokens=p.max_total_num_tokens if p else 0,
            max_num_seqs=p.max_running_requests if p else 0, settings=s, engine="sglang",
        )

    try:
        p = sglang.plan(spec, gpu, settings)
    except InputError as exc:
        return row(None, 0, str(exc), settings)
    if not p.starts:
        return row(p, 0, p.error or "does not start", settings)
    pool = p.max_total_num_tokens // context
    if pool > p.max_running_requests and p.max_running_requests < concurrency:
        settings = replace(settings, max_running_requests=min(pool, concurrency))
        p = sglang.plan(spec, gpu, settings)
        pool = p.max_total_num_tokens // context
    per = min(pool, p.max_running_requests)
    if per == 0:
        return row(p, 0, f"the pool of {p.max_total_num_tokens:,} tokens holds no request of {context:,} tokens", settings)
    return row(p, per, "", settings)


def search(spec: ModelSpec, concurrency: int, context: int, gpus: list[GPU], *, max_gpus: int = 64,
           gpus_per_node: int = 8, weights: tuple[str, ...] = ("auto", "fp8"), kv: tuple[str, ...] = ("auto", "fp8"),
           prices: dict[str, float] | None = None, version: str = "current", engine: str = "vllm") -> list[Deployment]:
    """Every candidate, those that serve first (cheapest, then most headroom), then the excluded."""
    if concurrency < 1 or context < 1:
        raise InputError("--concurrency and --context must be at least 1")
    if max_gpus < 1 or gpus_per_node < 1:
        raise InputError("--max-gpus and --gpus-per-node must be at least 1")
    rows = []
    for gpu in gpus:
        price = (prices or {}).get(gpu.name, gpu.price_per_hour)
        for tp, pp in layouts(spec, max_gpus, gpus_per_node):
            for w in weights:
                for k in kv:
                    if engine == "sglang":
                        rows.append(evaluate_sglang(spec, gpu, tp, pp, w, k, concurrency, context, max_gpus, price))
                    else:
                        rows.append(evaluate(spec, gpu, tp, pp, w, k, concurrency, context, max_gpus, price, version))
    return sorted(rows, key=_rank)


def _rank(d: Deployment) -> tuple[int, float, int, float]:
    if not d.serves:
        return 2, 0.0, d.num_gpus, 0.0
    priced = d.price_per_hour is not None
    return (0 if priced else 1), d.price_per_hour or 0.0, d.num_gpus, -d.headroom
