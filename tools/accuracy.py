"""kvbudget's accuracy over the whole real-log corpus, per engine and per split (issue #11).

Runs kvbudget on every record of ``tests/data/vllm_logs``, ``sglang_logs`` and ``trtllm_logs`` (each
``.json`` says how: model, GPU, release, flags or settings) and prints, per engine and per split, the
records, how many are scored, the median and worst absolute error on the headline figure, the share
within 1 / 2 / 5 %, and whether kvbudget agrees that the engine started or not.

Splits: every record's ``.json`` carries ``"split"``: ``modelling`` (the logs kvbudget's constants were
fitted and checked against while it was written) or ``validation`` (logs added afterwards and never
used to tune anything: the held-out measure). A record is scored unless its ``kvbudget`` block has an
``exclude`` (something kvbudget does not model at all: expert parallelism, LoRA, speculative decoding,
KV offload ...) or names no model. Modelling records marked ``outlier`` (modelled, but the log itself
shows why the prediction cannot match) are scored in the main rows and set aside only in the extra
"outliers set aside" row, which is what tests/test_vllm_logs.py asserts on.

Headline figure: vLLM, the KV cache tokens (else GPU blocks, else the available KV memory) the log
printed; SGLang, ``max_total_num_tokens`` / ``#tokens``; TensorRT-LLM, the max tokens in the paged KV
cache. Error = (kvbudget - logged) / logged.

    PYTHONPATH=src python tools/accuracy.py            # print the table and every record's error
    PYTHONPATH=src python tools/accuracy.py --write    # also rewrite the marked sections of
                                                       # docs/validation.md and README.md
``--check`` exits 1 when a marked section differs from what ``--write`` would put there.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
ENGINES = (("vLLM", "vllm_logs"), ("SGLang", "sglang_logs"), ("TensorRT-LLM", "trtllm_logs"))
SPLITS = ("modelling", "validation")
BEGIN, END = "<!-- accuracy:begin -->", "<!-- accuracy:end -->"
TARGETS = (ROOT / "docs" / "validation.md", ROOT / "README.md")


@dataclass(frozen=True)
class Result:
    engine: str
    name: str
    split: str
    status: str  # scored | outlier | excluded
    figure: str | None = None
    error_pct: float | None = None  # None: scored but no positive figure to compare
    starts_agree: bool | None = None  # None: not compared
    reason: str = ""


def _meta(path: Path) -> dict[str, Any]:
    return json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def _vllm(log: Path, meta: dict[str, Any]) -> tuple[str | None, float | None, bool | None]:
    from kvbudget.engines.vllm.check import check_log
    from kvbudget.units import GiB

    k = meta["kvbudget"]
    gib = k.get("gpu_memory_gib")
    result = check_log(log.read_text(encoding="utf-8"), model=k["model"], gpu=k.get("gpu"),
                       gpu_memory=round(gib * GiB) if gib else None, version=k.get("version"), flags=k.get("flags"))
    rows = {r.figure: r for r in result.rows}
    starts = rows.get("starts")
    agree = None if starts is None or starts.reported is None else starts.error_pct is None
    for figure in ("KV cache tokens", "GPU blocks", "available KV cache (GiB)"):
        row = rows.get(figure)
        if row is not None and row.error_pct is not None and (row.reported or 0) > 0:
            return figure, row.error_pct, agree
    return None, None, agree


def _reported_tokens(meta: dict[str, Any]) -> int:
    r = meta["reported"]
    for key in ("kv_tokens", "max_total_num_tokens", "max_tokens_in_paged_kv_cache"):
        if isinstance(r.get(key), int):
            return int(r[key])
    raise ValueError(f"{meta['url']}: no KV token count in 'reported'")


def _device(kb: dict[str, Any]) -> Any:
    """The record's GPU; with ``gpu_memory_gib`` (the device total the log itself prints, e.g. TensorRT-LLM's
    "Memory usage when calculating max tokens in paged kv cache: total: X GiB"), that total instead of the
    catalog's, whose figure comes from another driver."""
    import kvbudget
    from kvbudget._record import replace
    from kvbudget.units import GiB

    gpu = kvbudget.find_gpu(kb["gpu"])
    gib = kb.get("gpu_memory_gib")
    return replace(gpu, memory_bytes=round(gib * GiB)) if gib else gpu


def _pool(engine_dir: str, meta: dict[str, Any]) -> tuple[str | None, float | None, bool | None]:
    import kvbudget
    from kvbudget.engines import sglang, trtllm

    kb = meta["kvbudget"]
    spec, gpu = kvbudget.load_model(kb["model"]), _device(kb)
    want = _reported_tokens(meta)
    started = meta["reported"].get("started", True)  # every record so far logged a pool, i.e. started
    if engine_dir == "sglang_logs":
        p = sglang.plan(spec, gpu, sglang.SGLangSettings(**kb["settings"]))
        got, starts, figure = p.max_total_num_tokens, p.starts, "KV tokens"
    else:
        q = trtllm.plan(spec, gpu, trtllm.TrtllmSettings(**kb["settings"]))
        got, starts, figure = q.max_tokens, q.starts, "KV tokens"
    return figure, (got - want) / want * 100 if want > 0 else None, bool(starts) == bool(started)


def collect() -> list[Result]:
    out = []
    for engine, sub in ENGINES:
        for log in sorted((DATA / sub).glob("*.log")):
            meta = _meta(log)
            k = meta.get("kvbudget", {})
            split = meta.get("split", "?")
            if "model" not in k or k.get("exclude"):
                out.append(Result(engine, log.stem, split, "excluded", reason=str(k.get("exclude", "no model"))))
                continue
            figure, err, agree = _vllm(log, meta) if sub == "vllm_logs" else _pool(sub, meta)
            status = "outlier" if k.get("outlier") else "scored"
            out.append(Result(engine, log.stem, split, status, figure, err, agree))
    return out


def _row(label: str, split: str, records: list[Result], scored: list[Result]) -> str:
    errors = [abs(r.error_pct) for r in scored if r.error_pct is not None]
    agree = [r.starts_agree for r in scored if r.starts_agree is not None]

    def share(limit: float) -> str:
        return f"{sum(e <= limit for e in errors)}/{len(errors)}" if errors else "–"

    med = f"{statistics.median(errors):.2f}%" if errors else "–"
    worst = f"{max(errors):.2f}%" if errors else "–"
    starts = f"{sum(agree)}/{len(agree)}" if agree else "–"
    return f"| {label} | {split} | {len(records)} | {len(errors)} | {med} | {worst} | {share(1)} | {share(2)} | {share(5)} | {starts} |"


def table(results: list[Result]) -> str:
    lines = ["| engine | split | records | scored | median \\|error\\| | worst | within 1% | within 2% | within 5% | start/no-start agrees |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for engine, _ in ENGINES:
        for split in SPLITS:
            records = [r for r in results if r.engine == engine and r.split == split]
            scored = [r for r in records if r.status in ("scored", "outlier")]
            lines.append(_row(engine, split, records, scored))
            if any(r.status == "outlier" for r in records):
                lines.append(_row(engine, f"{split}, outliers set aside", records,
                                  [r for r in records if r.status == "scored"]))
    return "\n".join(lines)


def section(results: list[Result]) -> str:
    counts = ", ".join(f"{engine} {sum(r.engine == engine for r in results)}" for engine, _ in ENGINES)
    return (f"{BEGIN}\n<!-- generated by tools/accuracy.py --write from tests/data/*_logs; do not edit by hand -->\n\n"
            f"Corpus: {counts} records. \"scored\": records kvbudget models (not excluded) with a figure to compare; "
            "the error is on the KV tokens the engine logged (vLLM: else its GPU blocks or available KV memory); "
            "\"start/no-start agrees\": kvbudget predicts the same outcome (started, or refused to start) as the log.\n\n"
            f"{table(results)}\n{END}")


def rewrite(text: str, new: str) -> str:
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        return text
    return text[:start] + new + text[end + len(END):]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="rewrite the marked sections of docs/validation.md and README.md")
    ap.add_argument("--check", action="store_true", help="exit 1 if a marked section is stale")
    args = ap.parse_args(argv)
    results = collect()
    new = section(results)
    print(table(results))
    print()
    for r in results:
        what = (f"{r.figure} {r.error_pct:+.2f}%" if r.error_pct is not None else "no positive figure") if r.status != "excluded" else r.reason[:90]
        starts = "" if r.starts_agree is None else ("; starts agree" if r.starts_agree else "; START/NO-START DISAGREES")
        print(f"{r.engine:12} {r.split:10} {r.status:8} {r.name}: {what}{starts}")
    stale = []
    for path in TARGETS:
        text = path.read_text(encoding="utf-8")
        if BEGIN not in text:
            continue
        updated = rewrite(text, new)
        if updated != text:
            stale.append(path)
            if args.write:
                path.write_text(updated, encoding="utf-8")
    if args.check and stale and not args.write:
        print("stale: " + ", ".join(str(p.relative_to(ROOT)) for p in stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
