"""``kvbudget size`` as text, one JSON document, and a single-page Markdown or HTML report with the plots: render
only, each step by the report its own command prints."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from .._record import asdict
from ..questions.size import SizeAnswer
from ..units import InputError

TITLES = ("1. KV cache per token", "2. What the engine allocates and prints at start-up", "3. Load test",
          "4. Monitoring", "5. The budget re-run with the measured reuse")


def _rerun_text(a: SizeAnswer) -> str:
    r = a.rerun
    lines = [f"static: {r.static_concurrency:,.2f} requests of {r.context:,} tokens at once (what fit prints: the pool "
             "over a whole max_model_len request)"]
    if r.hit_rate is not None and r.effective_concurrency is not None:
        lines.append(f"measured prefix-cache hit rate {100 * r.hit_rate:.1f}% ({r.source}): about "
                     f"{r.effective_concurrency:,.2f} requests of {r.context:,} tokens, shared prefixes held once "
                     "(static / (1 - hit rate): an estimate)")
    else:
        lines.append("no measured prefix-cache reuse: the static figure stands")
    if r.simulated_concurrency is not None:
        lines.append(f"the simulated traffic, at its own mean footprint per request (prompt and output lengths as "
                     f"generated, shared blocks once): {r.simulated_concurrency:,.1f} requests")
    return "\n".join(lines)


def sections(a: SizeAnswer, units: str) -> list[tuple[str, str]]:
    """(title, text) per step, as each command prints it."""
    from . import diagnose_report, fit_report, sim_report, text

    startup = fit_report.fit_text(a.fit, a.engine, units)
    if a.check is not None:
        engine, result = a.check
        startup += "\n\n" + engine.check_text(result, units)
    out = [(TITLES[0], text.kv_text(a.kv, units)), (TITLES[1], startup)]
    out.append((TITLES[2], sim_report.sim_text(a.simulate) if a.simulate is not None else _skipped(a, "load test")))
    out.append((TITLES[3], diagnose_report.diagnose_text(a.diagnose, units) if a.diagnose is not None
                else _skipped(a, "monitoring")))
    out.append((TITLES[4], _rerun_text(a)))
    return out


def _skipped(a: SizeAnswer, step: str) -> str:
    return next(why for name, why in a.steps if name == step)


def size_text(a: SizeAnswer, units: str = "GiB") -> str:
    head = [f"Sizing {a.model}: the checklist, step by step", *(f"  {name}: {what}" for name, what in a.steps), ""]
    body = [f"== {title}\n{text}" for title, text in sections(a, units)]
    return "\n".join(head) + "\n" + "\n\n".join(body)


def size_doc(a: SizeAnswer, units: str = "GiB") -> dict[str, Any]:
    from . import diagnose_report, fit_report, json_doc, sim_report

    check = None
    if a.check is not None:
        engine, result = a.check
        check = engine.check_doc(result, units)
    return {
        "model": a.model,
        "steps": [{"step": name, "done": what} for name, what in a.steps],
        "kv": json_doc.kv_doc(a.kv),
        "fit": fit_report.fit_doc(a.fit, a.engine, units),
        "check": check,
        "simulate": sim_report.sim_doc(a.simulate) if a.simulate is not None else None,
        "diagnose": diagnose_report.diagnose_doc(a.diagnose) if a.diagnose is not None else None,
        "rerun": asdict(a.rerun),
    }


def write_report(a: SizeAnswer, path: str, units: str = "GiB") -> list[str]:
    """The report as one Markdown (``.md``, plots as PNG files beside it) or HTML (``.html``, plots inline as SVG)
    file; the files written."""
    from ..inputs import write_text
    from .plots import fit_plot, sim_plot

    target = Path(path)
    kind = target.suffix.lower()
    if kind not in (".md", ".html", ".htm"):
        raise InputError(f"--report {path}: give a .md or .html file")
    plots: list[tuple[str, Any]] = [("Memory partition per GPU", lambda p: fit_plot(a.fit, a.engine, p))]
    if a.simulate is not None:
        sim = a.simulate
        plots.append(("KV usage, running and waiting requests over the load test", lambda p: sim_plot(sim, p)))
    written = [str(target)]
    parts = sections(a, units)
    if kind == ".md":
        md = [f"# Sizing {a.model}", "", *(f"- **{name}**: {what}" for name, what in a.steps), ""]
        images = []
        for i, (caption, draw) in enumerate(plots, 1):
            image = target.with_name(f"{target.stem}-{i}.png")
            draw(str(image))
            written.append(str(image))
            images.append(f"![{caption}]({image.name})")
        for n, (title, text) in enumerate(parts):
            md += [f"## {title}", "", "```", text, "```", ""]
            if n == 1 and images:
                md += [images[0], ""]
            if n == 2 and len(images) > 1:
                md += [images[1], ""]
        write_text(str(target), "\n".join(md))
        return written
    import tempfile

    svgs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (caption, draw) in enumerate(plots, 1):
            svg = Path(tmp, f"plot-{i}.svg")
            draw(str(svg))
            body = svg.read_text()
            svgs.append(f"<figure>{body[body.index('<svg'):]}<figcaption>{html.escape(caption)}</figcaption></figure>")
    doc = ["<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>Sizing {html.escape(a.model)}</title>",
           "<style>body{font-family:system-ui,sans-serif;max-width:70rem;margin:2rem auto;padding:0 1rem}"
           "pre{background:#f6f8fa;padding:1rem;overflow-x:auto}figure svg{max-width:100%;height:auto}</style>",
           "</head><body>", f"<h1>Sizing {html.escape(a.model)}</h1><ul>",
           *(f"<li><b>{html.escape(name)}</b>: {html.escape(what)}</li>" for name, what in a.steps), "</ul>"]
    for n, (title, text) in enumerate(parts):
        doc += [f"<h2>{html.escape(title)}</h2>", f"<pre>{html.escape(text)}</pre>"]
        if n == 1 and svgs:
            doc.append(svgs[0])
        if n == 2 and len(svgs) > 1:
            doc.append(svgs[1])
    doc.append("</body></html>")
    write_text(str(target), "\n".join(doc) + "\n")
    return written
