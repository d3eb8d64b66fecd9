"""`kvbudget plan` as a table and as JSON."""

from __future__ import annotations

from ..units import GiB, fmt_bytes, noun, plural

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..engines.base import Lever
    from ..plan.levers import RuleOfThumb
    from ..plan.search import Deployment
    from ..questions.plan import LeversAnswer, PlanAnswer


def _layout(d: Deployment) -> str:
    out = (f"TP{d.tp}" if d.split_heads else plural(d.tp, "GPU")) + (f" PP{d.pp}" if d.pp > 1 else "")
    return out + (f" x{d.replicas}" if d.replicas > 1 else "")


def _dtype(name: str) -> str:
    return "ckpt" if name == "auto" else name


def launch_doc(d: Deployment) -> dict[str, str | None] | None:
    from .fit_report import launch_doc as doc

    return None if d.launch is None else doc(d.launch)


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
        if d.slo_batch is not None:
            row["slo"] = {"batch_per_replica": d.slo_batch, "ttft_s": d.ttft_s, "tpot_s": d.tpot_s}
        if d.serves:
            row["launch"] = launch_doc(d)
        plans.append(row)
    return {"model": model, "engine": {"name": rows[0].engine if rows else "vllm"}, "concurrency": concurrency, "context": context,
            "searched": len(rows), "serving": sum(d.serves for d in rows), "plans": plans}


def plan_text(model: str, concurrency: int, context: int, rows: list[Deployment], units: str, top: int,
              max_gpus: int, gpus_per_node: int | None, label: str = "vLLM", hint: str = "") -> str:
    from ..plan.launch import command
    from .text import table

    good = [d for d in rows if d.serves]
    engine = label
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
        argv = list(best.launch.argv) if best.launch else []
        each = f" ({best.replicas} replicas of {plural(best.tp * best.pp, 'GPU')}, each running)" if best.replicas > 1 else ""
        note = best.launch.note if best.launch else None
        out += ["", f"Best: {best.num_gpus} x {best.gpu}{each}:", f"  {command(argv)}", *([f"  ({note})"] if note else []),
                "  (kvbudget plan --json gives every row with its command and Kubernetes manifest)"]
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
    if reason.startswith("misses the SLO"):
        return "misses the latency target even with one request per replica"
    if reason.startswith("within the SLO"):
        return "too many GPUs for the load within the latency target"
    if "does not divide" in reason:
        return "TP does not divide the heads"
    head = reason.split(";")[0].split(":")[0]  # the rule, without the GPU it was broken on
    return head if len(head) <= 70 else head[:70].rsplit(" ", 1)[0] + " ..."


def fewest_doc(model: str, d: Deployment | None) -> dict[str, Any] | None:
    """The fewest GPUs of the type asked for that hold the load (``fit`` when it does not), as a JSON object."""
    if d is None:
        return None
    return {"gpu": d.gpu, "num_gpus": d.num_gpus, "tp": d.tp, "pp": d.pp, "replicas": d.replicas,
            "max_concurrency": d.max_concurrency, "kv_cache_bytes": d.kv_cache_bytes, "launch": launch_doc(d)}




def fewest_text(model: str, d: Deployment | None, gpu: str, batch: int, context: int, multi_node: bool = True) -> str:
    if d is None:
        within = "64 GPUs" if multi_node else "one node"
        return f"Fewest {gpu} for {batch:,} x {context:,}-token {noun(batch, 'request')}: none within {within}"
    from ..plan.launch import command

    note = d.launch.note if d.launch else None
    slots = d.slots  # llama-server runs the slots it is launched with (-np)
    held = (f"holding {slots * d.replicas:,} at once (room for {d.max_concurrency:,} slots)"
            if slots is not None and slots * d.replicas < d.max_concurrency else f"holding {d.max_concurrency:,} at once")
    return (f"Fewest {gpu} for {batch:,} x {context:,}-token {noun(batch, 'request')}: {d.num_gpus} ({_layout(d)}), "
            + held + ("" if d.replicas == 1 else f" over {d.replicas} servers")
            + f":\n  {command(list(d.launch.argv) if d.launch else [])}" + (f"\n  ({note})" if note else ""))


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


def rule_of_thumb_text(thumb: RuleOfThumb, fp8: Lever | None, context: int, label: str = "vLLM") -> list[str]:
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
                   f"GPU{share}: {label} fits {fp8.added:+,}")
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
                thumb: RuleOfThumb | None = None, label: str = "vLLM") -> str:
    out = [f"{model} on {baseline.gpus} x {gpu}, requests of {context:,} tokens, {label}'s rules:",
           f"as configured: {fmt_bytes(baseline.kv_cache_bytes, units)} of KV cache per GPU, "
           f"{plural(baseline.concurrency, 'request')} at once" + ("" if baseline.starts else f" (does not start: {baseline.note})"), ""]
    out.append(levers_table(rows, context, units))
    same = [r for r in rows if r.context == context and r.starts]  # levers that keep the requests' length
    best = max(same, key=lambda r: (r.added / r.gpus, r.added), default=None)
    if best is not None and best.added > 0:
        freed = f": {_signed(best.freed_bytes, units)} per GPU" if round(best.freed_bytes / 1e8) else ""
        out += ["", f"Most per GPU: {best.name} ({best.flag}){freed} -> {best.added:+,} concurrent {context:,}-token {noun(best.added, 'request')}"]
    if thumb is not None:
        out += ["", *rule_of_thumb_text(thumb, next((r for r in rows if r.name == "FP8 weights"), None), context, label)]
    return "\n".join(out)


def plan_answer_doc(a: PlanAnswer, units: str) -> dict[str, Any]:
    """``plan --json``: every row, the best one with its levers (one replica), as ``levers --json`` gives them."""
    doc = plan_doc(a.model, a.concurrency, a.context, list(a.rows), units)
    doc["engine"] = {"name": a.engine}
    if a.slo is not None:
        doc["slo"] = {"ttft_s": a.slo.ttft_s, "tpot_s": a.slo.tpot_s, "prompt": a.slo.prompt or a.context,
                      "model": "roofline step-time estimate (a lower bound on latency)"}
    if a.best is not None:
        doc["plans"][0]["levers"] = lever_docs(list(a.levers))
    doc["warnings"] = list(a.warnings)
    return doc


def plan_answer_text(a: PlanAnswer, units: str, top: int, max_gpus: int, gpus_per_node: int | None) -> str:
    out = plan_text(a.model, a.concurrency, a.context, list(a.rows), units, top, max_gpus, gpus_per_node, a.label,
                    a.launch_hint)
    if a.slo is not None:
        out += "\n\n" + _slo_text(a)
    if a.best is not None:
        out += "\n\nFor the best deployment (one replica) -- " + levers_table(list(a.levers), a.context, units)
    return "\n".join([out, *(f"warning: {w}" for w in a.warnings)])


def _slo_text(a: PlanAnswer) -> str:
    """The latency of the deployments that serve, at the batch each replica runs within the target."""
    from ..plan.slo import _ms
    from .text import table

    assert a.slo is not None
    good = [d for d in a.rows if d.serves][:5]
    prompt = min(a.slo.prompt or a.context, a.context)
    out = [f"Within the SLO ({a.slo.words()}; TTFT for a prompt of {prompt:,} tokens): roofline step-time estimates, a "
           "lower bound on latency (real steps are slower: leave a margin)"]
    if good:
        out.append(table(["#", "GPU", "GPUs", "requests per replica", "TTFT", "TPOT"],
                         [[str(i), d.gpu, str(d.num_gpus), f"{d.slo_batch:,}", _ms(d.ttft_s), _ms(d.tpot_s)]
                          for i, d in enumerate(good, 1)], right=[True, False, True, True, True, True]))
        out.append("  (run each replica at that many requests at once: its scheduler cap, e.g. vLLM --max-num-seqs)")
    return "\n".join(out)


def levers_answer_doc(a: LeversAnswer) -> dict[str, Any]:
    # the warnings the text prints (a context past the model's, a profile with no term for the plan) were left out
    return {**levers_doc(a.model, a.gpu, a.baseline, list(a.levers), a.rule_of_thumb, a.engine),
            "warnings": list(a.warnings)}


def levers_answer_text(a: LeversAnswer, units: str) -> str:
    out = levers_text(a.model, a.gpu, a.context, a.baseline, list(a.levers), units, a.rule_of_thumb, a.label)
    return "\n".join([out, *(f"warning: {w}" for w in a.warnings)])
