"""Hostile-input benchmark: every case of the generated corpus (tests/hostile) run in this process,
timed and measured. Target (issue #9): each case ends in under 1 s and under 200 MB (tracemalloc
peak). Each case's time is the median of RUNS runs (after one warm-up that pays for imports).
Run with `make bench`. Exits 1 when a target is missed.
"""

from __future__ import annotations

import io
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from contextlib import redirect_stderr, redirect_stdout, suppress
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "hostile"))

from corpus import CASES, load_all  # noqa: E402

from kvbudget.cli import main as kvbudget  # noqa: E402

RUNS = int(os.environ.get("KVBUDGET_BENCH_RUNS", "3"))
TIME_TARGET = 1.0
PEAK_TARGET = 200 * 2**20


def run(case_id: str, root: Path, measure_memory: bool) -> tuple[float, int]:
    case = CASES[case_id]
    root.mkdir(parents=True, exist_ok=True)
    args = case.build(root)
    old_stdin = sys.stdin
    if case.stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(case.stdin), encoding="utf-8", errors="replace")
    if measure_memory:
        tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()), suppress(SystemExit):
            kvbudget(args)
        elapsed = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1] if measure_memory else 0
    finally:
        if measure_memory:
            tracemalloc.stop()
        sys.stdin = old_stdin
    return elapsed, peak


def main() -> int:
    load_all()
    rows = []
    cwd = os.getcwd()
    for case_id in sorted(CASES):
        with tempfile.TemporaryDirectory() as tmp:
            os.chdir(tmp)
            try:
                run(case_id, Path(tmp) / "warm", False)
                times = [run(case_id, Path(tmp) / f"r{i}", False)[0] for i in range(RUNS)]
                _, peak = run(case_id, Path(tmp) / "mem", True)
            finally:
                os.chdir(cwd)
        rows.append((statistics.median(times), peak, case_id))
    rows.sort(reverse=True)
    times = [t for t, _, _ in rows]
    print(f"{len(rows)} hostile cases, median of {RUNS} runs each (in-process, after a warm-up)")
    print(f"  time per case: median {statistics.median(times) * 1000:.1f} ms, slowest {times[0] * 1000:.1f} ms "
          f"(target < {TIME_TARGET * 1000:.0f} ms)")
    print(f"  peak memory: largest {max(p for _, p, _ in rows) / 2**20:.1f} MB (target < {PEAK_TARGET / 2**20:.0f} MB)")
    print("  slowest cases:")
    for t, peak, case_id in rows[:5]:
        print(f"    {t * 1000:8.1f} ms  {peak / 2**20:6.1f} MB  {case_id}")
    bad = [c for t, p, c in rows if t >= TIME_TARGET or p >= PEAK_TARGET]
    if bad:
        print(f"  MISSED the target: {', '.join(bad[:10])}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
