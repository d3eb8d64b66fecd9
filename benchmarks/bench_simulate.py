"""`kvbudget simulate`'s replay speed: 10,000 requests of a ShareGPT-like workload with shared system prompts and
multi-turn conversations through Llama-3.1-8B's vLLM cache on an H100 (paged policy, prefix caching on, timed steps),
and the memory the run peaks at. Run by `make bench`. Target (median of 3): <= 30 s and <= 1 GiB peak for the
replay of 10,000 requests on this 2-core machine."""

from __future__ import annotations

import os
import resource
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import kvbudget

RUNS = 3
TARGET_S = 30.0
TARGET_PEAK_MIB = 1024
SPEC = "requests=10000,rate=40,prompt=sharegpt,output=sharegpt,prefixes=8x400@0.7,turns=2,think=2,seed=1"


def main() -> None:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        answer = kvbudget.simulate("meta-llama/Llama-3.1-8B-Instruct", gpu="H100", context=8192, synthetic=SPEC,
                                   policies=("paged",))
        times.append(time.perf_counter() - start)
    paged = answer.results[0]
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    median = statistics.median(times)
    print(f"simulate 10,000 requests ({paged.steps:,} steps, {paged.preemptions:,} preemptions): median {median:.2f} s "
          f"of {RUNS} ({', '.join(f'{t:.2f}' for t in times)}), target {TARGET_S:.0f} s; peak RSS {peak_mib:,.0f} MiB, "
          f"target {TARGET_PEAK_MIB:,} MiB -> {'ok' if median <= TARGET_S and peak_mib <= TARGET_PEAK_MIB else 'MISSED'}")


if __name__ == "__main__":
    main()
