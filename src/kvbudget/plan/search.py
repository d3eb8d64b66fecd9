"""The cheapest deployments that serve a load: every GPU type x layout x precision, planned with vLLM's
or SGLang's own rules (``engines/vllm.py``, ``engines/sglang.py``), kept when they start and hold ``concurrency`` requests of ``context``
tokens, ranked by price per hour, then headroom.

A layout is TP within a node (a divisor of the attention heads, at most ``gpus_per_node``), PP across
nodes (only once TP fills a node), and as many data-parallel replicas as the load needs. One replica's
capacity is exact at block granularity: the requests of ``context`` tokens its KV pool holds
(``vllm.capacity``), capped by ``max_num_seqs`` (raised to the load when the pool holds more).
"""

from __future__ import annotations

from .._bisect import largest
from .._record import record, replace
from ..engines import llamacpp, sglang, trtllm, vllm
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
    settings: vllm.VllmSettings | sglang.SGLangSettings | trtllm.TrtllmSettings | llamacpp.LlamaCppSettings
    engine: str = "vllm"
    gpus_per_node: int = 8  # the node this GPU comes in (catalog), or --gpus-per-node


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


@record
class Replica:
    """One replica as an engine sizes it: whether it starts, the requests of the context its pool holds
    and its scheduler admits, and the settings (scheduler cap raised to the load) that realise it."""

    per: int
    reason: str
    starts: bool
    weights_bytes: int
    kv_cache_bytes: int
    kv_cache_tokens: int
    cap: int
    settings: vllm.VllmSettings | sglang.SGLangSettings | trtllm.TrtllmSettings | llamacpp.LlamaCppSettings
    fraction: float = 0.0  # the engine's memory fraction as it applied it (0: llama.cpp has none)


def _short(p: vllm.VllmPlan, gpu: GPU) -> str:
    if p.error and "KV cache" in p.error and p.available_kv_cache_bytes > 0:
        need = p.blocks_per_request * p.bytes_per_block - p.available_kv_cache_bytes
        return f"KV cache short by {need / GiB:.2f} GiB for one request on {gpu.name}"
    if p.available_kv_cache_bytes <= 0:
        return f"weights ({p.weights_bytes / GiB:.2f} GiB per GPU) leave no room for the KV cache on {gpu.name}"
    return p.error or "does not start"


def vllm_replica(spec: ModelSpec, gpu: GPU, tp: int, pp: int, weights: str, kv: str, concurrency: int, context: int,
                 version: str, fraction: float | None = None) -> Replica:
    """vLLM: whole requests of the pool's blocks (``vllm.capacity``), capped by ``max_num_seqs``."""
    s = vllm.VllmSettings(version=version, max_model_len=context, tensor_parallel_size=tp, pipeline_parallel_size=pp,
                          quantization=None if weights == "auto" else weights, kv_cache_dtype=kv,
                          gpu_memory_utilization=fraction)
    p = vllm.plan(spec, gpu, s)
    pool = vllm.capacity(p, 1)[0] if p.starts else 0
    if p.starts and pool > p.max_num_seqs and p.max_num_seqs < concurrency:  # let the scheduler use the pool
        s = replace(s, max_num_seqs=min(pool, concurrency))
        p = vllm.plan(spec, gpu, s)
        pool = vllm.capacity(p, 1)[0] if p.starts else 0
    reason = "" if p.starts else _short(p, gpu)
    return Replica(min(pool, p.max_num_seqs), reason, p.starts, p.weights_bytes, p.available_kv_cache_bytes,
                   p.kv_cache_tokens, p.max_num_seqs, s, p.utilization)


def sglang_replica(spec: ModelSpec, gpu: GPU, tp: int, pp: int, weights: str, kv: str, concurrency: int, context: int,
                   version: str, fraction: float | None = None) -> Replica:
    """SGLang: the requests whose tokens fit in its pool (``max_total_num_tokens // context``), capped by
    ``max_running_requests``."""
    del version
    kv_name = "fp8_e4m3" if kv == "fp8" else kv  # kvbudget's fp8: SGLang's e4m3
    s = sglang.SGLangSettings(tp=tp, pp=pp, context_length=context, kv_cache_dtype=kv_name,
                              quantization=None if weights == "auto" else weights, mem_fraction_static=fraction)
    p = sglang.plan(spec, gpu, s)
    pool = p.max_total_num_tokens // context
    if p.starts and pool > p.max_running_requests and p.max_running_requests < concurrency:
        s = replace(s, max_running_requests=min(pool, concurrency))
        p = sglang.plan(spec, gpu, s)
        pool = p.max_total_num_tokens // context
    return Replica(min(pool, p.max_running_requests), "" if p.starts else p.error or "does not start", p.starts,
                   p.weights_bytes, max(p.rest_bytes, 0), p.max_total_num_tokens, p.max_running_requests, s,
                   p.mem_fraction_static)


def trtllm_replica(spec: ModelSpec, gpu: GPU, tp: int, pp: int, weights: str, kv: str, concurrency: int, context: int,
                   version: str, fraction: float | None = None) -> Replica:
    """TensorRT-LLM (PyTorch backend, ``trtllm-serve``): whole requests of its paged pool
    (``max_tokens // context``), capped by ``max_batch_size``."""
    del version
    if weights != "auto":  # trtllm-serve takes a pre-quantized checkpoint
        raise InputError("TensorRT-LLM is planned with the checkpoint's own weights (use --weights-dtype auto, or "
                         "pass a pre-quantized checkpoint)")
    s = trtllm.TrtllmSettings(tp=tp, pp=pp, max_seq_len=context, kv_cache_dtype="fp8" if kv.startswith("fp8") else kv)
    if fraction is not None:
        s = replace(s, free_gpu_memory_fraction=fraction)
    p = trtllm.plan(spec, gpu, s)
    pool = p.max_tokens // context
    if p.starts and pool > s.max_batch_size and s.max_batch_size < concurrency:
        s = replace(s, max_batch_size=min(pool, concurrency))
        p = trtllm.plan(spec, gpu, s)
        pool = p.max_tokens // context
    return Replica(min(pool, s.max_batch_size), "" if p.starts else p.error or "does not start", p.starts,
                   p.weights_bytes, p.pool_bytes, p.max_tokens, s.max_batch_size, s, s.free_gpu_memory_fraction)


def llamacpp_replica(spec: ModelSpec, gpu: GPU, tp: int, pp: int, weights: str, kv: str, concurrency: int, context: int,
                     version: str, fraction: float | None = None) -> Replica:
    """llama.cpp (llama-server): no tensor parallelism — ``tp`` GPUs split the layers (``-ts``, even) —; N
    requests of ``context`` tokens need ``-np N`` unified slots over ``-c N x context`` cells, so a replica
    holds the largest N whose cache, weights and compute buffer fit every GPU."""
    del version
    if fraction is not None:
        raise InputError("llama.cpp has no memory fraction: it allocates what -c and the cache types ask for")
    if pp > 1:
        raise InputError("llama.cpp splits layers over the GPUs of one server (-ts), it has no pipeline stages")
    if weights != "auto":
        raise InputError("llama.cpp runs a GGUF's own tensor types: give the .gguf file as the model to plan a quantized one")
    cache = {"auto": "f16", "fp8": "q8_0", "fp8_e4m3": "q8_0"}.get(kv, kv)

    def settings(n: int) -> llamacpp.LlamaCppSettings:
        return llamacpp.LlamaCppSettings(n_ctx=n * context, n_parallel=n, kv_unified=True, type_k=cache, type_v=cache,
                                         flash_attn="on" if cache != "f16" else "auto", fit=False, devices=tp)

    def fits(n: int) -> bool:
        return llamacpp.plan(spec, gpu, settings(n)).fits

    # the largest N that fits (searched past the load, to show the headroom, up to llama.cpp's sequence limit):
    # the straight line through N = 1 and 2 (each slot adds its cells to every GPU) is mostly exact; where
    # padding or buffers bend it, bisect on the side it missed
    top = min(4 * concurrency, llamacpp.MAX_SEQ)
    one, two = (llamacpp.plan(spec, gpu, settings(n)) for n in (1, min(2, top)))
    slope = max((b - a for a, b in zip(one.device_bytes, two.device_bytes, strict=True)), default=0)
    lo = 0
    if one.fits:
        room = gpu.memory_bytes - max(one.device_bytes, default=0)
        guess = min(top, 1 + room // slope) if slope > 0 else top
        if not fits(guess):
            lo = largest(fits, guess - 1)
        elif guess == top or not fits(guess + 1):
            lo = guess
        else:
            lo = largest(fits, top)
    p = llamacpp.plan(spec, gpu, settings(max(lo, 1)))
    s = settings(max(min(lo, concurrency), 1))  # launched with the slots the load needs
    kv_dev = max(p.kv_device_bytes, default=0)
    reason = "" if lo else (f"weights and one {context:,}-token slot need {max(p.device_bytes, default=0) / GiB:.2f} GiB "
                            f"on a {gpu.name}")
    return Replica(lo, reason, lo > 0, max(p.device_bytes, default=0) - kv_dev - p.compute_bytes, kv_dev, p.n_ctx, lo, s)


REPLICAS = {"vllm": vllm_replica, "sglang": sglang_replica, "trtllm": trtllm_replica, "llama.cpp": llamacpp_replica}


def evaluate(spec: ModelSpec, gpu: GPU, tp: int, pp: int, weights: str, kv: str, concurrency: int, context: int,
             max_gpus: int, price: float | None, version: str = "current", engine: str = "vllm",
             fraction: float | None = None) -> Deployment:
    """One layout and precision on one GPU type: plan a replica, then the replicas the load needs."""
    try:
        r = REPLICAS[engine](spec, gpu, tp, pp, weights, kv, concurrency, context, version, fraction)
    except InputError as exc:  # TP not a divisor of the heads, a format the GPU cannot run, ...
        return Deployment(gpu=gpu.name, tp=tp, pp=pp, replicas=0, weights_dtype=weights, kv_dtype=kv, num_gpus=tp * pp,
                          per_replica=0, max_concurrency=0, price_per_hour=None if price is None else round(price * tp * pp, 4),
                          starts=False, serves=False, reason=str(exc), headroom=-1.0, weights_bytes=0, kv_cache_bytes=0,
                          kv_cache_tokens=0, max_num_seqs=0, settings=vllm.VllmSettings(), engine=engine)
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
           fraction: float | None = None) -> list[Deployment]:
    """Every candidate, those that serve first (cheapest, then most headroom), then the excluded. ``fraction``:
    the engine's memory fraction (vLLM's gpu_memory_utilization, SGLang's mem_fraction_static, TensorRT-LLM's
    free_gpu_memory_fraction) instead of its default. ``gpus_per_node``: the node size for every GPU type instead of
    the catalog's (an HGX board of 8, one GH200 superchip, at most 4 consumer cards ...)."""
    if concurrency < 1 or context < 1:
        raise InputError("--concurrency and --context must be at least 1")
    if engine not in REPLICAS:
        raise InputError(f"plan knows the engines {', '.join(REPLICAS)}, not {engine!r}")
    if max_gpus < 1 or (gpus_per_node is not None and gpus_per_node < 1):
        raise InputError("--max-gpus and --gpus-per-node must be at least 1")
    rows = []
    for gpu in gpus:
        price = (prices or {}).get(gpu.name, gpu.price_per_hour)
        node = gpus_per_node or gpu.gpus_per_node
        for tp, pp in layouts(spec, max_gpus, node):
            if engine != "vllm" and tp * pp > node:
                continue  # kvbudget writes multi-node launch files for vLLM only: other engines stay within a node
            if engine == "llama.cpp" and pp > 1:
                continue
            for w in weights:
                for k in kv:
                    rows.append(replace(evaluate(spec, gpu, tp, pp, w, k, concurrency, context, max_gpus, price, version,
                                                 engine, fraction), gpus_per_node=node))
    return sorted(rows, key=_rank)


def _rank(d: Deployment) -> tuple[int, float, int, float]:
    if not d.serves:
        return 2, 0.0, d.num_gpus, 0.0
    priced = d.price_per_hour is not None
    return (0 if priced else 1), d.price_per_hour or 0.0, d.num_gpus, -d.headroom
