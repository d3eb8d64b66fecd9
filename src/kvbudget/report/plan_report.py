"""`kvbudget plan` as a table and as JSON."""

from __future__ import annotations

from ..units import GiB, fmt_bytes, noun, plural

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..plan.levers import Lever, RuleOfThumb
    from ..plan.search import Deployment


def _layout(d: Deployment) -> str:
    from ..engines.base import default_registry

    split_heads = default_registry().get(d.engine).tensor_parallel
    out = (f"TP{d.tp}" if split_heads else plural(d.tp, "GPU")) + (f" PP{d.pp}" if d.pp > 1 else "")
    return out + (f" x{d.replicas}" if d.replicas > 1 else "")


def _dtype(name: str) -> str:
    return "ckpt" if name == "auto" else name


def launch_doc(model: str, d: Deployment) -> dict[str, str | None]:
    from ..plan import launch

    argv = launch.argv_for(model, d.settings)
    return launch.launch_doc(model, argv, getattr(d.settings, "quantization", None),
                             launch.manifest(model, argv, d.tp, d.pp, d.replicas, d.gpus_per_node))


def plan_doc(model: str, concurrency: int, context: int, rows: list[Deployment], units: str) -> dict[str, Any]:
    del units
    plans = []
    for d in rows:
        row: dict[str, Any] = {
            "gpu": d.gpu, "num_gpus": d.num_gpus, "tp": d.tp, "pp": d.pp, "replicas": d.replicas,
            "weights_dtype": d.weights_dtype, "kv_dtype": d.kv_dtype, "per_replica": d.per_replica,
            "max_concurrency": d.max_concurrency, "price_per_hour": d.price_per_hour, "starts": d.starts,
            "serves": d.serves, "reason": d.reason or None, "headroom": round(d.headroom, 4),
            "weights_bytes": d.weights_bytes, "kv_cache_bytes": d.kv_cache_bytes, "kv_cache_tokens": d.kv_cache_tokens,
            "gpus_per_node": d.gpus_per_node,
        }
        if d.serves:
            row["launch"] = launch_doc(model, d)
        plans.append(row)
    return {"model": model, "engine": {"name": rows[0].engine if rows else "vllm"}, "concurrency": concurrency, "context": context,
            "searched": len(rows), "serving": sum(d.serves for d in rows), "plans": plans}


def plan_text(model: str, concurrency: int, context: int, rows: list[Deployment], units: str, top: int,
              max_gpus: int, gpus_per_node: int | None) -> str:
    from ..plan import launch
    from .text import table

    good = [d for d in rows if d.serves]
    engine = _engine_label(rows[0].engine if rows else "")
    out = [f"{model}: {plural(concurrency, 'request')} of {context:,} tokens at once, with {engine}'s rules "
           f"(at most {max_gpus} GPUs, " + (f"{gpus_per_node} per node)" if gpus_per_node else "node sizes from the GPU catalog)"),
           f"{len(rows):,} deployments searched (GPU x layout x weights x KV cache): {len(good):,} serve the load", ""]
    if good:
        out.append(table(
            ["#", "GPU", "GPUs", "layout", "weights", "KV", "holds", "headroom", "$/hour", "KV per GPU"],
            [[str(i), d.gpu, str(d.num_gpus), _layout(d), _dtype(d.weights_dtype), _dtype(d.kv_dtype),
              f"{d.max_concurrency:,}", f"+{d.headroom:.0%}", "-" if d.price_per_hour is None else f"{d.price_per_hour:.2f}",
              fmt_bytes(d.kv_cache_bytes, units)] for i, d in enumerate(good[:top], 1)],
            right=[True, False, True, False, False, False, True, True, True, True]))
        best = good[0]
        argv = launch.argv_for(model, best.settings)
        each = f" ({best.replicas} replicas of {plural(best.tp * best.pp, 'GPU')}, each running)" if best.replicas > 1 else ""
        note = launch.checkpoint_note(model, getattr(best.settings, "quantization", None))
        out += ["", f"Best: {best.num_gpus} x {best.gpu}{each}:", f"  {launch.command(argv)}", *([f"  ({note})"] if note else []),
                "  (kvbudget plan --json gives every row with its command and Kubernetes manifest)"]
        from ..engines.base import default_registry

        hint = default_registry().get(best.engine).launch_hint
        if hint:
            out.append(f"  ({hint})")
        if any(d.weights_dtype not in ("auto", "fp8") for d in good[:top]):
            out.append("  (rows with awq, gptq, nf4, mxfp4 or nvfp4 weights need a checkpoint already in that format)")
    else:
        out.append("No deployment serves the load.")
    reasons: dict[str, list[Deployment]] = {}
    for d in rows:
        if not d.serves:
            reasons.setdefault(_why(d.reason), []).append(d)
    if reasons:
        out += ["", "Excluded, by reason:"]
        for why, ds in sorted(reasons.items(), key=lambda kv: -len(kv[1])):
            example = ds[0]
            out.append(f"  {len(ds):>4}  {why} (e.g. {example.gpu} {_layout(example)} {_dtype(example.weights_dtype)}/"
                       f"{_dtype(example.kv_dtype)}: {example.reason})")
    return "\n".join(out)


def _why(reason: str) -> str:
    if reason.startswith("weights"):
        return "the weights leave no room for the KV cache"
    if reason.startswith("KV cache short"):
        return "the KV cache cannot hold one request"
    if reason.startswith("needs"):
        return "too many GPUs for the load"
    if "does not divide" in reason:
        return "TP does not divide the heads"
    head = reason.split(";")[0].split(":")[0]  # the rule, without the GPU it was broken on
    return head if len(head) <= 70 else head[:70].rsplit(" ", 1)[0] + " ..."


def fewest_doc(model: str, d: Deployment | None) -> dict[str, Any] | None:
    """The fewest GPUs of the type asked for that hold the load (``fit`` when it does not), as a JSON object."""
    if d is None:
        return None
    return {"gpu": d.gpu, "num_gpus": d.num_gpus, "tp": d.tp, "pp": d.pp, "replicas": d.replicas,
            "max_concurrency": d.max_concurrency, "kv_cache_bytes": d.kv_cache_bytes, "launch": launch_doc(model, d)}




def fewest_text(model: str, d: Deployment | None, gpu: str, batch: int, context: int, engine: str = "vllm") -> str:
    if d is None:
        from ..engines.base import default_registry

        within = "64 GPUs" if default_registry().get(engine).multi_node else "one node"
        return f"Fewest {gpu} for {batch:,} x {context:,}-token {noun(batch, 'request')}: none within {within}"
    from ..plan import launch

    note = launch.checkpoint_note(model, getattr(d.settings, "quantization", None))
    slots = getattr(d.settings, "n_parallel", None)  # llama-server runs the slots it is launched with (-np)
    held = (f"holding {slots * d.replicas:,} at once (room for {d.max_concurrency:,} slots)"
            if slots is not None and slots * d.replicas < d.max_concurrency else f"holding {d.max_concurrency:,} at once")
    return (f"Fewest {gpu} for {batch:,} x {context:,}-token {noun(batch, 'request')}: {d.num_gpus} ({_layout(d)}), "
            + held + ("" if d.replicas == 1 else f" over {d.replicas} servers")
            + f":\n  {launch.command(launch.argv_for(model, d.settings))}" + (f"\n  ({note})" if note else ""))


def _lever_doc(r: Lever) -> dict[str, Any]:
    return {"lever": r.name, "flag": r.flag or None, "gpus": r.gpus, "kv_cache_bytes": r.kv_cache_bytes,
            "freed_bytes": r.freed_bytes, "weights_bytes": r.weights_bytes, "max_concurrency": r.concurrency,
            "added_concurrency": r.added, "context": r.context, "starts": r.starts, "note": r.note or None}


def lever_docs(rows: list[Lever]) -> list[dict[str, Any]]:
    return [_lever_doc(r) for r in rows]


def levers_doc(model: str, gpu: str, baseline: Lever, rows: list[Lever], thumb: RuleOfThumb | None = None,
               engine: str = "vllm") -> dict[str, Any]:
    doc: dict[str, Any] = {"model": model, "gpu": gpu, "engine": {"name": engine}, "baseline": _lever_doc(baseline),
                           "levers": [_lever_doc(r) for r in rows]}
    if thumb is not None:
        doc["rule_of_thumb"] = {"lever": "FP8 weights", "nominal_params": thumb.nominal_params,
                                "bytes_saved_per_param": thumb.saved_per_param, "gpus": thumb.gpus,
                                "freed_bytes": thumb.freed_bytes, "sequence_bytes": thumb.sequence_bytes,
                                "added_concurrency": thumb.count, "added_concurrency_one_unit": thumb.count_one_unit}
    return doc


def _size(n: int) -> str:
    return f"{n / 1e9:g}B"


def _engine_label(engine: str) -> str:
    return {"sglang": "SGLang", "trtllm": "TensorRT-LLM", "llama.cpp": "llama.cpp"}.get(engine, "vLLM")


def rule_of_thumb_text(thumb: RuleOfThumb, fp8: Lever | None, context: int, engine: str = "vllm") -> list[str]:
    """The back-of-envelope reading of FP8 weights (nominal weight bytes saved / KV per sequence) beside the real
    bytes and the engine's count."""
    gb, gib = thumb.freed_bytes / 1e9, thumb.sequence_bytes / GiB
    s = "" if thumb.saved_per_param == 1 else "s"
    out = [f"back-of-envelope (nominal weight bytes saved / KV per sequence): {_size(thumb.nominal_params)} params x "
           f"{thumb.saved_per_param} byte{s} saved / {thumb.gpus} GPU{'s' if thumb.gpus > 1 else ''} = {gb:.1f} GB per "
           f"GPU; {gb:.1f} / {gib:.3g} GiB per {context:,}-token sequence = {thumb.count:+,} "
           f"{noun(thumb.count, 'request')} (GB over GiB, as such estimates mix them: "
           f"{thumb.count_one_unit:+,} in one unit)"]
    if fp8 is not None and fp8.freed_bytes > 0:
        naive = fp8.freed_bytes // thumb.sequence_bytes
        share = (f"; counted against a whole sequence that is {naive:+,}, but each GPU holds 1/{thumb.gpus} of every "
                 "sequence" if thumb.gpus > 1 else "")
        out.append(f"real: FP8 weights free {fp8.freed_bytes / GiB:.2f} GiB ({fp8.freed_bytes / 1e9:.1f} GB) on each "
                   f"GPU{share}: {_engine_label(engine)} fits {fp8.added:+,}")
    return out


def _signed(n: int, units: str, gb: bool = True) -> str:
    """A signed size in ``units``, with its decimal GB beside a GiB figure when ``gb`` (the tables leave it out)."""
    if round(n / 1e8) == 0:  # less than 0.05 GB: block rounding, not a change worth a sign
        return fmt_bytes(0, units)
    return ("+" if n > 0 else "-") + fmt_bytes(abs(n), units) + (f" ({n / 1e9:+.1f} GB)" if gb and units == "GiB" else "")


def levers_table(rows: list[Lever], context: int, units: str) -> str:
    from .text import table

    return "What each lever buys:\n" + table(
        ["lever", "flag", "GPUs", "KV per GPU", "frees per GPU", "requests", "added"],
        [[r.name, r.flag, str(r.gpus), fmt_bytes(max(r.kv_cache_bytes, 0), units), _signed(r.freed_bytes, units, gb=False),
          f"{r.concurrency:,}" + (f" at {r.context:,}" if r.context != context else "") + ("" if r.starts else " (fails)"),
          f"{r.added:+,}"] for r in rows],
        right=[False, False, True, True, True, True, True])


def levers_text(model: str, gpu: str, context: int, baseline: Lever, rows: list[Lever], units: str,
                thumb: RuleOfThumb | None = None, engine: str = "vllm") -> str:
    out = [f"{model} on {baseline.gpus} x {gpu}, requests of {context:,} tokens, {_engine_label(engine)}'s rules:",
           f"as configured: {fmt_bytes(baseline.kv_cache_bytes, units)} of KV cache per GPU, "
           f"{plural(baseline.concurrency, 'request')} at once" + ("" if baseline.starts else f" (does not start: {baseline.note})"), ""]
    out.append(levers_table(rows, context, units))
    same = [r for r in rows if r.context == context and r.starts]  # levers that keep the requests' length
    best = max(same, key=lambda r: (r.added / r.gpus, r.added), default=None)
    if best is not None and best.added > 0:
        freed = f": {_signed(best.freed_bytes, units)} per GPU" if round(best.freed_bytes / 1e8) else ""
        out += ["", f"Most per GPU: {best.name} ({best.flag}){freed} -> {best.added:+,} concurrent {context:,}-token {noun(best.added, 'request')}"]
    if thumb is not None:
        out += ["", *rule_of_thumb_text(thumb, next((r for r in rows if r.name == "FP8 weights"), None), context, engine)]
    return "\n".join(out)
