"""``kvbudget diagnose`` as text, as a ``--watch`` table, and as one JSON document: render only (the figures and
the findings come from questions/diagnose and ops/diagnose)."""

from __future__ import annotations

from typing import Any

from .._record import asdict
from ..ops.diagnose import cap_setting
from ..questions.diagnose import DiagnoseAnswer, FleetAnswer, Poll
from ..units import fmt_bytes
from .text import table

MARK = {"critical": "CRITICAL", "warning": "warning", "info": "info", "ok": "ok"}


def _opt(x: float | None, fmt: str = "{:,.0f}") -> str:
    return "-" if x is None else fmt.format(x)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def server_table(a: DiagnoseAnswer) -> str:
    heads = ["server", "engine", "running", "waiting", "KV used", "preempted", "per s", "prefix hits", "blocks"]
    rows = []
    for s, r in a.servers:
        per_s = None if r is None else r.preemptions_per_s
        hit = r.hit_rate if r is not None and r.hit_rate is not None else s.hit_rate
        blocks = s.num_gpu_blocks if s.engine == "vllm" else s.kv_tokens
        rows.append([s.name, s.engine, _opt(s.running), _opt(s.waiting), _pct(s.kv_usage), _opt(s.preemptions),
                     _opt(per_s, "{:,.2f}"), _pct(hit), _opt(blocks)])
    return table(heads, rows, [False, False] + [True] * 7)


def gpu_table(a: DiagnoseAnswer, units: str) -> str:
    rows = [[g.label, fmt_bytes(g.used_bytes, units), fmt_bytes(g.free_bytes, units), fmt_bytes(g.total_bytes, units),
             f"{100 * g.used_fraction:.1f}%"] for g in a.gpus]
    return table(["GPU", "used", "free", "total", "used %"], rows, [False, True, True, True, True])


def _header(a: DiagnoseAnswer) -> str:
    if a.previous is not None and a.snapshot is not None:
        return (f"{a.source}: 2 scrapes {a.snapshot.taken_at - a.previous.taken_at:.1f} s apart (rates over that "
                "interval)")
    return f"{a.source}: 1 snapshot (rates need two scrapes: give a URL, or --watch N)"


def _expected(a: DiagnoseAnswer) -> list[str]:
    e = a.expected
    if e is None:
        return []
    unit = f"{e.blocks:,} blocks x {e.block_tokens} tokens" if e.block_tokens > 1 else f"{e.kv_tokens:,} KV tokens"
    cap = f", {cap_setting(e.engine)} {e.max_num_seqs:,}" if e.max_num_seqs else ""
    util = f", memory fraction {e.utilization:g}" if e.utilization else ""
    return [f"kvbudget's plan ({e.label}): {unit}{cap}{util}, {e.max_concurrency:,.1f} requests of {e.context:,} "
            "tokens at once", ""]


def findings(a: DiagnoseAnswer) -> list[str]:
    out = []
    for d in a.diagnoses:
        out.append(f"[{MARK[d.severity]}] {d.name}: {d.subject}")
        out.append(f"  {d.evidence}")
        if d.fix:
            out.append(f"  {'fix' if d.severity in ('critical', 'warning') else 'so'}: {d.fix}")
    return out


def diagnose_text(a: DiagnoseAnswer, units: str = "GiB") -> str:
    lines = [_header(a), ""]
    if a.servers:
        lines += [server_table(a), ""]
    if a.gpus:
        lines += [f"GPU memory ({a.gpu_source}):", gpu_table(a, units), ""]
    lines += _expected(a)
    lines += findings(a)
    lines += [f"problem: {p}" for p in a.problems]
    return "\n".join(lines).rstrip()


def watch_text(p: Poll, units: str = "GiB", clock_text: str = "") -> str:
    """One ``--watch`` poll as a block: the table, the GPUs, the worst finding per subject, any source down."""
    a = p.answer
    head = f"poll {p.index}{' at ' + clock_text if clock_text else ''}: {a.source}"
    lines = [head]
    if p.down:
        lines.append("source DOWN (still watching)")
    elif a.servers:
        lines.append(server_table(a))
    if a.gpus:
        lines.append(gpu_table(a, units))
    worst: dict[str, Any] = {}
    for d in a.diagnoses:  # sorted worst first
        if d.severity in ("critical", "warning") and d.subject not in worst:
            worst[d.subject] = d
    for d in worst.values():
        lines.append(f"[{MARK[d.severity]}] {d.name}: {d.subject}: {d.evidence}" + (f" -> {d.fix}" if d.fix else ""))
    if not worst and not p.down and a.servers:
        lines.append("healthy")
    lines += [f"problem: {x}" for x in a.problems]
    return "\n".join(lines)


def diagnose_doc(a: DiagnoseAnswer) -> dict[str, Any]:
    """The answer as one JSON document: bytes for memory, fractions 0..1, counters as the engine reports them."""
    snap, prev = a.snapshot, a.previous
    servers = []
    for s, r in a.servers:
        doc = asdict(s)
        doc["labels"] = dict(s.labels)
        doc["hit_rate"] = s.hit_rate
        doc["rates"] = asdict(r) if r is not None else None
        servers.append(doc)
    return {
        "source": a.source,
        "taken_at": snap.taken_at if snap is not None else None,
        "interval_s": snap.taken_at - prev.taken_at if snap is not None and prev is not None else None,
        "servers": servers,
        "gpu_source": a.gpu_source or None,
        "gpus": [{**asdict(g), "used_fraction": g.used_fraction} for g in a.gpus],
        "expected": asdict(a.expected) if a.expected is not None else None,
        "diagnoses": [asdict(d) for d in a.diagnoses],
        "problems": list(a.problems),
    }


def poll_doc(p: Poll) -> dict[str, Any]:
    return {"poll": p.index, "down": p.down, **diagnose_doc(p.answer)}


def fleet_text(f: FleetAnswer, units: str = "GiB") -> str:
    """The replicas most at risk first, each with why; the GPUs; the findings per replica."""
    a = f.answer
    lines = [f"Prometheus {f.prometheus}, replicas matching {f.selector}: {len(f.ranking)} (rates over {f.window})", ""]
    rows = [[str(r.rank), r.replica.name, r.replica.engine or "-", _opt(r.replica.running), _opt(r.replica.waiting),
             _pct(r.replica.kv_usage), _opt(r.replica.preemptions_per_s, "{:,.2f}"), _pct(r.replica.prefix_hit_rate),
             r.reason] for r in f.ranking]
    lines += [table(["risk", "replica", "engine", "running", "waiting", "KV used", "preempted/s", "prefix hits", "why"],
                    rows, [True, False, False, True, True, True, True, True, False]), ""]
    if a.gpus:
        lines += [f"GPU memory ({a.gpu_source}):", gpu_table(a, units), ""]
    lines += _expected(a)
    lines += findings(a)
    return "\n".join(lines).rstrip()


def fleet_doc(f: FleetAnswer) -> dict[str, Any]:
    """``diagnose --prometheus --json``: the single-server document over every replica, plus the risk ranking."""
    doc = diagnose_doc(f.answer)
    doc["prometheus"] = {"url": f.prometheus, "selector": f.selector, "window": f.window}
    doc["interval_s"] = None
    doc["ranking"] = [{"rank": r.rank, "replica": r.replica.name, "instance": r.replica.instance, "pod": r.replica.pod,
                       "reason": r.reason} for r in f.ranking]
    return doc
