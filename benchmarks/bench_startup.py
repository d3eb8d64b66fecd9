"""Cold-start benchmark: `kvbudget fit <catalog model> --gpu H100 --json` against `python -c pass`.

Target (issue #2): the fit command from a cold process takes at most 5x the time of an empty
Python start on the same machine. Each figure is the median of N fresh processes.
Run with `make bench`. Exits 1 when the target is missed.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time

RUNS = int(os.environ.get("KVBUDGET_BENCH_RUNS", "30"))
TARGET = 5.0


# An installed program runs from compiled bytecode: let the first (warm-up) run write it even where
# PYTHONDONTWRITEBYTECODE is set, or every run would recompile whatever changed since the last write.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def median_seconds(cmd: list[str]) -> float:
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=ENV)  # warm-up
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=ENV)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    exe = shutil.which("kvbudget", path=os.path.dirname(sys.executable)) or "kvbudget"
    base = median_seconds([sys.executable, "-c", "pass"])
    cases = {
        "fit llama-3.1-8b --gpu H100 --json": [exe, "fit", "llama-3.1-8b", "--gpu", "H100", "--json"],
        "fit deepseek-v3 --gpu H200 --num-gpus 8 --json": [exe, "fit", "deepseek-v3", "--gpu", "H200", "--num-gpus", "8", "--json"],
    }
    print(f"python -c pass: {base * 1000:.1f} ms (median of {RUNS})")
    worst = 0.0
    for name, cmd in cases.items():
        t = median_seconds(cmd)
        ratio = t / base
        worst = max(worst, ratio)
        print(f"kvbudget {name}: {t * 1000:.1f} ms = {ratio:.2f}x")
    verdict = "PASS" if worst <= TARGET else "FAIL"
    print(f"{verdict}: worst {worst:.2f}x, target <= {TARGET:.0f}x")
    return 0 if worst <= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
