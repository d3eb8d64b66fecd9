"""Figures for `kv`, `fit` and `plan` (``--plot FILE.png|.svg``). matplotlib is imported here only,
when a plot is asked for (``pip install kvbudget[plot]``); every figure's data comes from the same
records the tables print.
"""

from __future__ import annotations

from ..kvcache import bytes_per_sequence, kv_element_type
from ..model.spec import ModelSpec
from ..units import GiB, InputError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..plan.search import Deployment

COLORS = {"weights": "#4C72B0", "KV cache": "#55A868", "activation": "#C44E52", "CUDA graphs": "#8172B2",
          "overhead": "#CCB974", "free": "#DDDDDD"}
_OTHER = ("#4C72B0", "#55A868", "#C44E52", "#8172B2", "#CCB974", "#64B5CD")  # an engine's own part names


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        matplotlib.rcParams["svg.fonttype"] = "none"  # SVG text stays text: searchable, and testable
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("--plot needs matplotlib: pip install 'kvbudget[plot]'") from None
    return plt


def _save(fig: Any, path: str) -> None:
    from ..inputs import _why, excerpt_path

    shown = excerpt_path(path)
    if not path.lower().endswith((".png", ".svg")):
        raise InputError(f"--plot {shown}: give a .png or .svg file")
    try:
        fig.savefig(path, dpi=110, bbox_inches="tight")
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name (the API's path)
        why = "a NUL character in its name" if isinstance(exc, ValueError) else _why(exc)
        raise InputError(f"--plot {shown}: cannot write it ({why})") from None


def crossover(spec: ModelSpec, weights_bytes: int, batch: int, kv_dtype: str = "auto", tp: int = 1) -> int | None:
    """The shortest sequence length at which ``batch`` sequences' KV cache outgrows the weights
    (None: never, up to the model's context)."""
    dtype = kv_element_type(spec, kv_dtype)
    layers = spec.layers

    def over(n: int) -> bool:
        return batch * bytes_per_sequence(layers, n, dtype, tp) > weights_bytes

    hi = spec.max_context
    if not over(hi):
        return None
    lo = 1
    while lo < hi:
        mid = (lo + hi) // 2
        if over(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def kv_plot(spec: ModelSpec, weights_bytes: int, path: str, batches: tuple[int, ...] = (1, 8, 32, 128),
            context: int | None = None, kv_dtype: str = "auto", tp: int = 1) -> list[int | None]:
    """KV memory against sequence length for several batch sizes, the weights as a horizontal line and
    where each batch's KV cache outgrows them; and KV against batch size at ``context``."""
    plt = _pyplot()
    dtype = kv_element_type(spec, kv_dtype)
    top = spec.max_context
    context = context or min(top, 8192)
    lengths = sorted({max(1, top * i // 200) for i in range(201)})
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.6))
    crossings: list[int | None] = []
    for i, b in enumerate(batches):
        line = left.plot(lengths, [b * bytes_per_sequence(spec.layers, n, dtype, tp) / GiB for n in lengths],
                         label=f"batch {b}")[0]
        x = crossover(spec, weights_bytes, b, kv_dtype, tp)
        crossings.append(x)
        if x is not None:
            left.plot([x], [weights_bytes / GiB], "o", color=line.get_color())
            far = x > 0.6 * top
            left.annotate(f"crossover, batch {b}: {x:,} tokens", (x, weights_bytes / GiB), textcoords="offset points",
                          xytext=(-10 if far else 10, 14 + 14 * i), ha="right" if far else "left", fontsize=8,
                          color=line.get_color(), arrowprops={"arrowstyle": "-", "color": line.get_color(), "lw": 0.6})
    left.axhline(weights_bytes / GiB, color="black", linestyle="--", label=f"weights {weights_bytes / GiB:.1f} GiB")
    left.set_yscale("log")
    left.set_ylim(bottom=weights_bytes / GiB / 1000)
    left.set_xlabel("sequence length (tokens)")
    left.set_ylabel("KV cache (GiB)")
    left.set_title(f"{spec.name}: KV cache vs sequence length")
    left.legend(fontsize=8)
    sizes = list(range(1, 257))
    right.plot(sizes, [b * bytes_per_sequence(spec.layers, context, dtype, tp) / GiB for b in sizes], label=f"{context:,} tokens")
    right.axhline(weights_bytes / GiB, color="black", linestyle="--", label="weights")
    per = bytes_per_sequence(spec.layers, context, dtype, tp)
    b = weights_bytes // per + 1 if per else 0  # the first batch whose KV cache outgrows the weights
    if 0 < b <= sizes[-1]:
        right.plot([b], [b * per / GiB], "o", color="red")
        right.annotate(f"KV > weights from batch {b}", (b, b * per / GiB), textcoords="offset points", xytext=(12, 14),
                       fontsize=8, color="red")
    right.set_xlabel("batch size (sequences)")
    right.set_ylabel("KV cache (GiB)")
    right.set_title(f"KV cache vs batch size at {context:,} tokens")
    right.legend(fontsize=8)
    _save(fig, path)
    plt.close(fig)
    return crossings


def partition(answer: Any, engine: Any) -> tuple[int, int, list[list[tuple[str, int]]]]:
    """Each GPU's memory, part by part, as the engine splits it (``engine.partition``: vLLM's, each pipeline
    stage's; otherwise the binding GPU's parts from its ``EnginePlan``, and what stays free), with the tensor- and
    pipeline-parallel sizes: what ``fit --plot`` draws and the web page's stacked bars show."""
    if hasattr(engine, "partition"):
        tp, pp, per_gpu = engine.partition(answer.plan)
        return tp, pp, per_gpu
    parts = [(x.name, x.bytes) for x in answer.row.parts]
    return 1, 1, [[*parts, ("free", max(answer.device.memory_bytes - sum(b for _, b in parts), 0))]]


def partition_doc(answer: Any, engine: Any) -> dict[str, Any]:
    """``partition`` as JSON: the GPU's memory and, per GPU, its parts in order (bottom of the bar first)."""
    tp, pp, per_gpu = partition(answer, engine)
    return {"model": answer.model, "gpu": answer.device.name, "memory_bytes": answer.device.memory_bytes, "tp": tp,
            "pp": pp, "gpus": [[{"name": name, "bytes": size} for name, size in parts] for parts in per_gpu]}


def kv_curve_doc(spec: ModelSpec, weights_bytes: int, batch: int = 1, kv_dtype: str = "auto", tp: int = 1,
                 points: int = 64) -> dict[str, Any]:
    """KV cache bytes per GPU for ``batch`` sequences against sequence length, ``points`` lengths up to the model's
    context, with the weights and the crossover where the KV cache outgrows them (``kv --plot``'s left panel)."""
    dtype = kv_element_type(spec, kv_dtype)
    top = spec.max_context
    lengths = sorted({max(1, top * i // points) for i in range(points + 1)})
    return {"model": spec.name, "batch": batch, "tp": tp, "weights_bytes": weights_bytes,
            "crossover": crossover(spec, weights_bytes, batch, kv_dtype, tp), "max_context": top,
            "points": [{"context": n, "kv_bytes": batch * bytes_per_sequence(spec.layers, n, dtype, tp)} for n in lengths]}


def fit_plot(answer: Any, engine: Any, path: str) -> list[tuple[str, int]]:
    """The memory partition of each GPU, as the engine splits it (``engine.partition``; otherwise the binding GPU's
    parts from its ``EnginePlan``): the parts of the first."""
    plt = _pyplot()
    tp, pp, per_gpu = partition(answer, engine)
    parts = per_gpu[0]
    n = len(per_gpu)
    fig, ax = plt.subplots(figsize=(max(4.0, 0.7 * n + 2.5), 4.8))
    labels = [f"GPU {i}" + (f"\nstage {i // tp}" if pp > 1 else "") for i in range(n)]
    bottoms = [0.0] * n
    for j, (name, _) in enumerate(parts):
        values = [gpu_parts[j][1] / GiB for gpu_parts in per_gpu]
        ax.bar(labels, values, bottom=bottoms, color=COLORS.get(name, _OTHER[j % len(_OTHER)]), label=name)
        bottoms = [b + v for b, v in zip(bottoms, values, strict=True)]
    ax.set_ylabel("GiB per GPU")
    ax.set_title(f"{answer.model} on {answer.device.name}: memory per GPU")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    _save(fig, path)
    plt.close(fig)
    return list(parts)


def plan_plot(rows: list[Deployment], path: str, concurrency: int) -> Deployment | None:
    """Capacity against price per hour, one point per deployment that serves, the chosen one marked."""
    plt = _pyplot()
    good = [d for d in rows if d.serves and d.price_per_hour is not None]
    if not good:
        raise InputError("--plot: no priced deployment serves the load")
    fig, ax = plt.subplots(figsize=(8, 5))
    ax.scatter([d.price_per_hour for d in good], [d.max_concurrency for d in good], s=14, alpha=0.6, label="deployments")
    best = good[0]
    ax.scatter([best.price_per_hour], [best.max_concurrency], s=120, marker="*", color="red",
               label=f"chosen: {best.num_gpus} x {best.gpu}")
    from .plan_report import _layout

    ax.annotate(f"{best.num_gpus} x {best.gpu} {_layout(best)}, ${best.price_per_hour:.2f}/h",
                (best.price_per_hour, best.max_concurrency), textcoords="offset points", xytext=(8, -12), fontsize=8)
    ax.axhline(concurrency, color="gray", linestyle=":", label=f"load: {concurrency} requests")
    ax.set_xlabel("price ($ per hour)")
    ax.set_ylabel("requests held at once")
    ax.set_yscale("log")
    if all((d.price_per_hour or 0) > 0 for d in good):  # a free GPU (price 0) cannot sit on a log axis
        ax.set_xscale("log")
    ax.set_title("capacity vs price per hour")
    ax.legend(fontsize=8)
    _save(fig, path)
    plt.close(fig)
    return best


def sim_plot(answer: Any, path: str) -> None:
    """The paged run over time: KV usage (share of the cache's token slots) above, running and waiting requests
    below, with the preemptions marked."""
    plt = _pyplot()
    run = answer.replay
    if not run.steps:
        raise InputError("--plot: the run has no steps to draw")
    x = list(run.step_start)
    cap = max(run.capacity_tokens, 1)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    top.plot(x, [100 * s.slots_used / cap for s in run.steps], lw=0.8, color="#4C72B0", label="KV slots held")
    top.set_ylabel("KV cache used (%)")
    top.set_ylim(0, 105)
    marks = [xi for xi, s, prev in zip(x[1:], run.steps[1:], run.steps, strict=False) if s.preemptions > prev.preemptions]
    if marks:
        top.plot(marks, [101] * len(marks), "|", color="#C44E52", label=f"preemptions ({run.steps[-1].preemptions:,})")
    top.legend(fontsize=8, loc="lower right")
    bottom.plot(x, [s.running for s in run.steps], lw=0.8, color="#55A868", label="running")
    bottom.plot(x, [s.waiting for s in run.steps], lw=0.8, color="#C44E52", label="waiting")
    bottom.set_ylabel("requests")
    bottom.set_xlabel("time (s, roofline estimate)" if run.timed else "engine step")
    bottom.legend(fontsize=8)
    top.set_title(f"{answer.model} on {answer.device.name}: {answer.requests:,} requests, paged KV cache")
    _save(fig, path)
    plt.close(fig)
