"""``kvbudget simulate`` as text and as one JSON document: render only (the figures come from questions/simulate)."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from typing import Any

from ..questions.simulate import SimAnswer
from ..sim.summary import Spread, Summary
from .text import table

POLICY_WORDS = {
    "paged": "paged (engine)",
    "contiguous-max": "contiguous max",
    "contiguous-exact": "contiguous exact",
}


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _t(x: float, timed: bool) -> str:
    return f"{x:.2f} s" if timed else f"{x:,.0f} steps"


def _spread(s: Spread, timed: bool) -> str:
    if timed and s.p99 < 1:
        return f"{1000 * s.p50:.0f} / {1000 * s.p90:.0f} / {1000 * s.p99:.0f} ms"
    return " / ".join(_t(v, timed).removesuffix(" s").removesuffix(" steps") for v in (s.p50, s.p90, s.p99)) + (
        " s" if timed else " steps")


def _groups_line(a: SimAnswer) -> list[str]:
    """A hybrid model's KV-cache groups: every token takes a slot in each group whose window holds it."""
    kinds = Counter(f"sliding window ({w:,} tokens)" if w else "full attention" for _, w in a.groups)
    if len(a.groups) < 2 and not any(w for _, w in a.groups):
        return []
    return [f"KV-cache groups on the one pool: {' + '.join(f'{n} {kind}' for kind, n in kinds.items())}; a token "
            "takes a slot in every group whose window holds it"]


def _null(a: SimAnswer, slots: int) -> str:
    """Why the slots are one block short of blocks x block size: the pool never hands out its block 0."""
    return "; block 0 is the pool's null block" if slots == (a.num_blocks - 1) * a.block_size else ""


def sim_text(a: SimAnswer) -> str:
    paged = a.results[0]
    timed = paged.timed
    lines = [
        f"{a.model} on {a.device.name}, {a.label}: {a.num_blocks:,} blocks x {a.block_size} tokens "
        f"({paged.capacity_tokens:,} token slots{_null(a, paged.capacity_tokens)}), max_num_seqs {a.max_num_seqs:,}, "
        f"max_num_batched_tokens {a.max_num_batched_tokens:,}, max_model_len {a.max_model_len:,}, "
        f"prefix caching {'on' if a.prefix_caching else 'off'}",
        f"{a.requests:,} requests replayed through vLLM's V1 scheduler (FCFS, chunked prefill, preemption by recompute)",
        *_groups_line(a),
        "",
    ]
    heads = ["policy", "KV peak", "KV mean", "waste", "running max", "running mean", "preempted", "queue p50/p90/p99",
             "done"]
    rows = [[POLICY_WORDS[r.policy], _pct(r.peak_usage), _pct(r.mean_usage), _pct(r.waste), f"{r.max_running:,}",
             f"{r.mean_running:,.1f}", f"{r.preemptions:,}", _spread(r.queue_wait, timed), f"{r.requests:,}"]
            for r in a.results]
    lines.append(table(heads, rows, [False] + [True] * 8))
    lines.append("")
    lines.append("waste: reserved token slots that hold no token (the last block's empty slots; contiguous max: "
                 "max_model_len reserved per request, as before PagedAttention; contiguous exact: an oracle reserving "
                 "each request's final length)")
    if a.prefix_caching:
        lines.append(f"prefix cache: {_pct(paged.prefix_hit_tokens)} of prompt tokens looked up were cached "
                     f"({_pct(paged.prefix_hit_blocks)} of blocks); {paged.evictions:,} cached blocks evicted")
    lines.append(f"re-run the budget: this traffic holds {paged.effective_concurrency:,.1f} requests in the cache at "
                 f"its mean footprint, against {a.static_concurrency:,.2f} requests of max_model_len "
                 f"{a.max_model_len:,} tokens (the static figure fit prints)")
    if timed:
        lines += [
            "",
            "Latency and throughput (roofline step-time estimate from the GPU's datasheet bandwidth and throughput: "
            "a lower bound, compare settings with it, do not quote it as speed):",
            table(["policy", "TTFT p50/p90/p99", "TPOT p50/p90/p99", "end-to-end p50/p90/p99", "output tokens/s"],
                  [[POLICY_WORDS[r.policy], _spread(r.ttft, True), _spread(r.tpot, True), _spread(r.e2e, True),
                    f"{r.output_tokens_per_s:,.0f}"] for r in a.results], [False, True, True, True, True]),
        ]
    for w in a.warnings:
        lines.append(f"warning: {w}")
    return "\n".join(lines)


def _summary_doc(r: Summary) -> dict[str, Any]:
    return asdict(r)


def sim_doc(a: SimAnswer, series: bool = False) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "model": a.model, "engine": a.engine, "gpu": a.device.name,
        "pool": {"blocks": a.num_blocks, "block_size": a.block_size, "token_slots": a.results[0].capacity_tokens,
                 "max_num_seqs": a.max_num_seqs, "max_num_batched_tokens": a.max_num_batched_tokens,
                 "max_model_len": a.max_model_len, "prefix_caching": a.prefix_caching,
                 "kv_groups": [{"kind": k, "window": w} for k, w in a.groups] or [{"kind": "full_attention", "window": 0}]},
        "requests": a.requests,
        "static_concurrency": a.static_concurrency,
        "effective_concurrency": a.results[0].effective_concurrency,
        "policies": [_summary_doc(r) for r in a.results],
        "time_unit": "seconds (roofline estimate)" if a.results[0].timed else "engine steps",
        "warnings": list(a.warnings),
    }
    if series:
        doc["steps"] = [{"step": s.step, "end": e, "running": s.running, "waiting": s.waiting,
                         "slots_used": s.slots_used, "preemptions": s.preemptions}
                        for s, e in zip(a.replay.steps, a.replay.step_end, strict=True)]
    return doc
