"""Log readers in linear time: seconds per MB of each engine's reader, against the 0.1 s/MB target
(issue #9, "Logs: linear time, <= 0.1 s per MB").

Inputs: the real logs in tests/data concatenated to several MB (each engine's reader on its own
engine's logs), and adversarial ones of 1 MB each: a line of digits, blank lines, spaces, and each
figure's prefix repeated on one line and on lines of its own, which made the old readers quadratic
(10 KB of digits on one line took 14 s). A reader that refuses the input (InputError) is timed to the
refusal. Each figure is the median of N runs. Exits 1 when the target is missed.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from kvbudget.engines.llamacpp.log import parse_llamacpp_log
from kvbudget.engines.logscan import check_other_log
from kvbudget.engines.vllm.log import parse_vllm_log
from kvbudget.units import InputError

RUNS = int(os.environ.get("KVBUDGET_BENCH_RUNS", "5"))
TARGET = 0.1  # seconds per MB
MB = 1 << 20
DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
READERS: dict[str, Callable[[str], object]] = {"vllm": parse_vllm_log, "sglang/trtllm": check_other_log,
                                               "llama.cpp": parse_llamacpp_log}
PREFIXES = ["Available KV cache memory: ", "GPU KV cache size: ", "# GPU blocks: ", "Maximum concurrency for ",
            "NVIDIA A", "total_gpu_memory=", "block_size=", "vllm serve ", "KV Cache is allocated. ", "Load weight end.",
            "Allocated ", "available: ", "KV buffer size = ", "size = 1 MiB (", "- kv 1: ", "print_info: n_layer = ",
            "KV self size = "]


def _real(folders: list[str], size: int) -> str:
    text = "".join(p.read_text(encoding="utf-8") for f in folders for p in sorted((DATA / f).glob("*.log")))
    return (text * (size // len(text) + 1))[:size]


def _docker(text: str) -> str:
    import json

    return "".join(json.dumps({"log": line, "stream": "stderr", "time": "2026-12-01T10:00:00.123456789Z"}) + "\n"
                   for line in text.splitlines(keepends=True))


def inputs() -> dict[str, tuple[str, list[str]]]:
    """name -> (text, readers to time on it)."""
    every = list(READERS)
    out = {
        "real vLLM logs x 4 MB": (_real(["vllm_logs"], 4 * MB), ["vllm"]),
        "real SGLang+TRT-LLM logs x 4 MB": (_real(["sglang_logs", "trtllm_logs"], 4 * MB), ["sglang/trtllm"]),
        "real llama.cpp logs x 4 MB": (_real(["llamacpp_logs"], 4 * MB), ["llama.cpp"]),
        "1 MB line of digits": ("7" * MB, every),
        "1 MB of blank lines": ("\n" * MB, every),
        "1 MB of spaces": (" " * MB, every),
        "1 MB of '1,'": ("1," * (MB // 2), every),
        "1 MB of wrapped lines": ("\n0" * (MB // 2), every),
        # Docker's json-file driver: each line a JSON record (engines/logscan.py json_records)
        "real vLLM logs as Docker JSON x 4 MB": (_docker(_real(["vllm_logs"], 3 * MB)), ["vllm"]),
        "1 MB of tiny Docker JSON records": ('{"log":"x\\n"}\n' * (MB // 14), every),
    }
    for prefix in PREFIXES:
        out[f"1 MB of {prefix!r} on one line"] = (prefix * (MB // len(prefix)), every)
        out[f"1 MB of {prefix!r} lines"] = ((prefix + "\n") * (MB // (len(prefix) + 1)), every)
    return out


def seconds(reader: Callable[[str], object], text: str) -> float:
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        with contextlib.suppress(InputError):
            reader(text)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    worst = 0.0
    print(f"{'input':52} {'reader':14} {'s/MB':>8}  (target <= {TARGET} s/MB, median of {RUNS})")
    for name, (text, readers) in inputs().items():
        mb = len(text.encode("utf-8")) / MB
        for key in readers:
            per_mb = seconds(READERS[key], text) / mb
            worst = max(worst, per_mb)
            print(f"{name[:52]:52} {key:14} {per_mb:8.4f}{'  MISSED' if per_mb > TARGET else ''}")
    print(f"worst: {worst:.4f} s/MB ({'meets' if worst <= TARGET else 'MISSES'} the {TARGET} s/MB target)")
    return 0 if worst <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
