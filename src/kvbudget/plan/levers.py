"""What each lever buys, for any engine that sizes a serving replica: the replica re-planned with the engine's
rules for each change a user can make, with the KV-cache bytes per GPU it frees (or costs) and the requests of
the context it adds (an engine with levers of its own, as vLLM's ``engines/vllm/levers.py``, gives them itself).

Levers: FP8 and 4-bit (AWQ) weights, the engine's smaller KV caches, half the context, one more TP step (or twice
the GPUs), one more replica and the engine's memory fraction a step up or down. A lever the engine refuses (TP
not dividing the heads, a format it cannot run) is left out; one that stops the deployment from starting says so.
"""

from __future__ import annotations

from .._record import record
from ..engines.base import Lever, Registry
from ..hardware import GPU
from ..model.spec import ModelSpec
from ..units import GiB, InputError, digits, element_type

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    from ..engines.base import Engine


@record
class RuleOfThumb:
    """The back-of-envelope reading of FP8 weights (nominal weight bytes saved / KV per sequence): the nominal size
    times the byte each parameter saves, split over the GPUs, divided by one whole sequence's KV cache."""

    nominal_params: int  # the size in the model's name ("70b"), else its parameter count
    saved_per_param: int  # bytes: the checkpoint's bytes per parameter minus FP8's one
    gpus: int
    freed_bytes: int  # per GPU
    sequence_bytes: int  # one whole sequence's KV cache at the context, on one GPU
    count: int  # freed GB over the sequence's GiB, divided as printed (70B at TP=2: 35 / 2.5)
    count_one_unit: int  # freed bytes // sequence bytes


def nominal_params(name: str, params: int) -> int:
    """The size a model's name states ("Llama-2-70b-hf" -> 70e9, "Qwen3-0.6B" -> 0.6e9); its count when none."""
    for part in name.lower().replace("/", "-").replace("_", "-").replace(":", "-").split("-"):
        if part.endswith("b") and digits(part[:-1].replace(".", "", 1)):
            return round(float(part[:-1]) * 1e9)
    return params


def rule_of_thumb(spec: ModelSpec, gpus: int, sequence_bytes: int) -> RuleOfThumb | None:
    """Seed 000: "Quantizing the weights to FP8 frees 35GB of VRAM for a 70B model. That 35GB can support an
    additional 14 concurrent 8K sequences" -- 70e9 x (2 - 1) B / 2 GPUs = 35.0 GB, and 35.0 / 2.5 (GiB per 8K
    sequence) = 14. For an unquantized checkpoint (the FP8 lever applies); None when its dtype is not wider than
    FP8 or a sequence holds no cache."""
    width = element_type(spec.native_dtype).block_bytes
    if width <= 1 or gpus < 1 or sequence_bytes <= 0:
        return None
    nominal = nominal_params(spec.name, spec.params)
    freed = nominal * (width - 1) // gpus
    as_printed = freed * GiB // (sequence_bytes * 10**9)  # GB over GiB: the numbers divided as they are printed
    return RuleOfThumb(nominal, width - 1, gpus, freed, sequence_bytes, as_printed, freed // sequence_bytes)


# scheduler caps, which the adapters raise to what the pool holds (llama-server's -c and -np are its pool: kept)
_CAPS = frozenset({"--max-num-seqs", "--max-running-requests", "--max_batch_size"})
_UNQUANTIZED = ("bf16", "fp16", "fp32")


def _flags(argv: list[str]) -> dict[str, str | None]:
    """A launch command's flags and their values (None for a switch)."""
    out: dict[str, str | None] = {}
    i = 0
    while i < len(argv):
        token, i = argv[i], i + 1
        if token.startswith("-"):
            value = argv[i] if i < len(argv) and not argv[i].startswith("-") else None
            out[token] = value
            i += value is not None
    return out


def flag_change(engine: Engine, model: str, before: object, after: object) -> str:
    """The flags of ``after``'s launch command that ``before``'s lacks or sets otherwise (scheduler caps,
    which follow the pool, left out): what a user adds to pull the lever."""
    a, b = _flags(list(engine.launch(model, before).argv)), _flags(list(engine.launch(model, after).argv))
    return " ".join(f"{k} {v}" if v is not None else k for k, v in b.items() if k not in _CAPS and a.get(k, "\0") != v)


def replica_levers(spec: ModelSpec, gpu: GPU, engine: str, context: int, *, tp: int = 1, pp: int = 1,
                   weights: str = "auto", kv: str = "auto", fraction: float | None = None, version: str = "current",
                   gpus_per_node: int | None = None, registry: Registry | None = None,
                   site: tuple[Any, ...] = ()) -> tuple[Lever, list[Lever]]:
    """What each lever buys under SGLang's, TensorRT-LLM's or llama-server's rules (any engine of
    the registry with a ``replica``): the replica as that engine sizes it, each lever re-planned the same way, with the
    scheduler keeping its default cap. ``freed_bytes`` is the KV pool's change per GPU, or for llama.cpp
    (no pool: the cache is what ``-c`` asks for) the change of the memory its weights and buffers take."""
    gpus_per_node = gpus_per_node or gpu.gpus_per_node
    from ..engines.base import Replica, default_registry
    from .search import replica_of, with_site

    replica = with_site(replica_of(engine, "levers know", registry), site)
    server = (registry or default_registry()).get(engine)
    if context < 1:
        raise InputError("levers need a context (--context)")

    def run(tp_: int, w: str, k: str, ctx: int, frac: float | None) -> Replica:
        return replica(spec, gpu, tp_, pp, w, k, server.lever_load, ctx, version, frac)

    r0 = run(tp, weights, kv, context, fraction)
    pooled = server.pooled

    n0 = tp * pp
    base = Lever("as configured", "", n0, r0.kv_cache_bytes, 0, r0.weights_bytes, r0.per if r0.starts else 0, 0,
                 context, r0.starts, r0.reason)

    def lever(name: str, r: Replica, gpus: int, times: int = 1, flag: str | None = None, ctx: int = context) -> Lever:
        freed = r.kv_cache_bytes - r0.kv_cache_bytes if pooled else r0.weights_bytes - r.weights_bytes
        per = r.per * times if r.starts else 0
        return Lever(name, flag if flag is not None else flag_change(server, spec.name, r0.settings, r.settings), gpus,
                     r.kv_cache_bytes, freed, r.weights_bytes, per, per - base.concurrency, ctx, r.starts, r.reason)

    out: list[Lever] = []

    def add(name: str, gpus: int, tp_: int, w: str, k: str, ctx: int, frac: float | None, flag: str | None = None) -> None:
        try:  # noqa: SIM105 - a lever the engine refuses (TP not dividing the heads, a format it cannot run) is left out
            out.append(lever(name, run(tp_, w, k, ctx, frac), gpus, flag=flag, ctx=ctx))
        except InputError:
            pass

    fmt = spec.weight_format
    if weights in ("auto", *_UNQUANTIZED) and fmt is not None and fmt.name in _UNQUANTIZED:
        add("FP8 weights", n0, tp, "fp8", kv, context, fraction)
        # AWQ is not made while loading (SGLang's --quantization awq on a 16-bit checkpoint finds no AWQ config and
        # stops): the lever is another checkpoint, as vLLM's lever says
        add("4-bit weights (AWQ)", n0, tp, "awq", kv, context, fraction, flag="an AWQ checkpoint")
    for cache in server.kv_levers:
        smaller = {"q8_0": ("auto", "f16", "bf16", "f32"), "q4_0": ("auto", "f16", "bf16", "f32", "q8_0")}
        if kv in smaller.get(cache, ("auto", "bf16", "fp16", "f16", "float16", "bfloat16")):
            add(f"{cache.upper() if cache == 'fp8' else cache} KV cache", n0, tp, weights, cache, context, fraction)
    if context // 2 >= 1:
        add("half the context", n0, tp, weights, kv, context // 2, fraction)
    if tp * 2 <= gpus_per_node:
        add("one more TP step" if pooled else "twice the GPUs (-ts)", 2 * tp * pp, 2 * tp, weights, kv, context, fraction)
    out.append(lever("one more replica", r0, 2 * n0, times=2, flag="a second server behind the load balancer"))
    if pooled and r0.fraction > 0 and server.fraction is not None:
        step = server.fraction.step
        for delta in (step, -step):
            u = round(r0.fraction + delta, 2)
            if 0 < u < 1:
                add(f"{server.fraction.dest} {u}", n0, tp, weights, kv, context, u)
    return base, out

