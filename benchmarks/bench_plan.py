"""`kvbudget plan`'s full search must take at most 1 s: every catalog GPU (>= 30 types) x 1-64 GPUs in every
layout (TP 1-8 within a node, PP 2-8 across nodes, replicas) x weights (checkpoint, fp8) x KV cache (checkpoint,
fp8), with vLLM's rules, for one model. Run by `make bench`."""

from __future__ import annotations

import os
import statistics
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from kvbudget.hardware import gpus
from kvbudget.model.resolve import load_model
from kvbudget.plan.search import search

TARGET_S = 1.0
MODELS = ("meta-llama/Llama-3.1-70B-Instruct", "deepseek-ai/DeepSeek-V3", "Qwen/Qwen3-30B-A3B")


def main() -> int:
    worst = 0.0
    catalog = gpus()
    for name in MODELS:
        spec = load_model(name)
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            rows = search(spec, 64, 8192, catalog, max_gpus=64)
            times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        lc = search(spec, 64, 8192, catalog, max_gpus=64, engine="llama.cpp", weights=("auto",), kv=("auto", "q8_0"))
        worst = max(worst, time.perf_counter() - t0)
        print(f"plan --engine llama.cpp {name}: {len(lc)} deployments in {(time.perf_counter() - t0) * 1000:.0f} ms")
        t = statistics.median(times)
        worst = max(worst, t)
        print(f"plan {name}: {len(rows)} deployments over {len(catalog)} GPU types in {t * 1000:.0f} ms "
              f"({sum(r.serves for r in rows)} serve 64 x 8K)")
    verdict = "PASS" if worst <= TARGET_S else "FAIL"
    print(f"{verdict}: worst {worst:.2f} s, target <= {TARGET_S:.0f} s")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
