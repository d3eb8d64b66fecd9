"""``fit`` and ``explain`` for any engine: the engine's own section, then the verdict, the fewest GPUs that
serve the load when it does not fit, and what each lever buys, rendered once from the ``FitAnswer``."""

from __future__ import annotations

from ..units import noun, plural, verb

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    from ..engines.base import Engine, Launch
    from ..questions.fit import FitAnswer


def verdict_lines(a: FitAnswer, pooled: bool) -> list[str]:
    """How many requests it holds, the longest context for the load, and whether the load fits."""
    v, row = a.capacity, a.row
    if not row.starts:
        return [f"Verdict: does not fit: {a.label} will not start (see above)"]
    context, dp, n, ranks = a.context, v.per_instance, v.load or v.asked, row.pools
    held = f"Requests of {context:,} tokens held at once: {v.held:,}"
    if ranks > 1:  # DP attention: a pool and a scheduler per rank, held counts them all
        held += f" in all ({v.held // ranks:,} per DP rank x {ranks} DP ranks)"
    if dp > 1:
        held += f" per engine, {v.held * dp:,} over {dp} DP engines"
    elif v.cap and v.held < v.pool_held:
        held += f" (the scheduler's cap of {v.cap:,}; the pool holds {v.pool_held:,})"
    elif v.shared_cells:
        held += f" (-c {v.shared_cells:,} cells shared by {v.asked} slots)"
    elif v.cells and v.asked > 1:  # llama.cpp's per-slot streams: each slot has its own share of -c
        held += f" (-c {v.cells:,} cells split into {v.asked} slots of {v.context:,})"
    out = [held]
    if v.longest is not None:  # llama.cpp: -c holds every slot's cells, so a longer context needs a larger -c
        raised = v.longest * v.asked > max(v.cells, v.shared_cells) if v.cells or v.shared_cells else False
        out.append(f"Longest context for {plural(v.asked, 'request')} at once{' per engine' if dp > 1 else ' in all' if ranks > 1 else ''}:  "
                   f"{v.longest:,}" + (f" (with -c raised to {v.longest * v.asked:,})" if raised else ""))
    over = f" over {dp} DP engines ({v.asked:,} each)" if dp > 1 else ""
    load = f"{n:,} x {context:,}-token {noun(n, 'request')}{over}"
    if pooled:
        pool = "each engine's pool" if dp > 1 else "the pool"
        if ranks > 1:
            pool = f"the {ranks} DP ranks' pools" if dp == 1 else f"each engine's {ranks} DP ranks' pools"
        said = (f"{verb(n, 'fit')} in {pool}" if v.fits else f"{verb(n, 'need')} more than {pool}") \
            + f" ({row.max_concurrency:.2f}x{' per DP rank' if ranks > 1 else ''})"
    else:
        said = (f"{verb(n, 'fit')}" if v.fits else f"{verb(n, 'need')} more than the memory holds") \
            + f" (at most {v.held:,} at once)"
    out.append(f"Verdict: {'fits' if v.fits else 'does not fit'}: {load} {said}" + (f", {v.said}" if v.said else ""))
    return out


def fit_text(a: FitAnswer, engine: Engine, units: str) -> str:
    from .plan_report import fewest_text, levers_table

    out = [engine.text(a, units)]
    if engine.serving:
        out += ["", *verdict_lines(a, engine.pooled)]
        if a.fewest_asked:
            v = a.capacity
            out.append(fewest_text(a.model, a.fewest, a.device.name, v.load or v.asked, a.context,
                                   engine.multi_node))
        out += [f"note: {n}" for n in a.notes]
    if a.levers and a.row.starts:
        out += ["", levers_table(list(a.levers), a.context, units)]
    return "\n".join(out)


def launch_doc(launch: Launch) -> dict[str, str | None]:
    """The ``launch`` object of the JSON output: the command, its Kubernetes manifest, and what to know."""
    from ..plan.launch import command

    doc: dict[str, str | None] = {"command": command(list(launch.argv)), "kubernetes": launch.manifest}
    if launch.note:
        doc["note"] = launch.note
    return doc


def fit_doc(a: FitAnswer, engine: Engine, units: str) -> dict[str, Any]:
    from .json_doc import capacity_doc
    from .plan_report import fewest_doc, lever_docs

    doc = engine.doc(a, units)
    if not engine.serving:
        return doc
    doc.update(capacity_doc(a.capacity))
    if a.row.pools > 1 and a.capacity is not None:  # max_batch is the server's, over its DP-attention ranks
        doc["max_batch_per_dp_rank"] = a.capacity.held // a.row.pools
    if a.launch is not None:
        doc["launch"] = launch_doc(a.launch)
        if a.launch.manifest_error:
            doc.setdefault("warnings", []).append(f"no Kubernetes manifest: {a.launch.manifest_error}")
    if a.fewest_asked:
        doc["fewest_gpus"] = fewest_doc(a.model, a.fewest)
    if a.levers and a.row.starts:
        doc["levers"] = lever_docs(list(a.levers))
    if a.notes:
        doc["notes_verdict"] = list(a.notes)
    return doc
