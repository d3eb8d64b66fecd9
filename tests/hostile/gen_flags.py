"""Flags with values never meant: negative, zero, NaN, infinite, absurd, or of the wrong kind."""

from __future__ import annotations

from corpus import argv

MODEL = "llama-3.1-8b"
BAD_COUNTS = ["-1", "0", "nan", "inf", "1e30", "3.5", "", "abc", "9" * 5000, "-0", "0x10", "1_0_"]
for flag in ("--context", "--batch", "--tp"):
    for n, value in enumerate(BAD_COUNTS):
        argv(f"flags-kv{flag}-{n}", ["kv", MODEL, flag, value])
for flag in ("--context", "--batch", "--tp", "--pp", "--num-gpus"):
    for n, value in enumerate(BAD_COUNTS):
        argv(f"flags-fit{flag}-{n}", ["fit", MODEL, "--gpu", "H100", flag, value])
for n, value in enumerate(["48", "0GiB", "-48GiB", "nanGiB", "infGiB", "1e30GiB", "48XB", "", "GiB", "48 GiB GiB"]):
    argv(f"flags-gpu-memory-{n}", ["fit", MODEL, "--gpu-memory", value])
for n, value in enumerate(["nan", "inf", "-0.1", "0", "1.5", "abc"]):
    argv(f"flags-mem-fraction-{n}", ["fit", MODEL, "--gpu", "H100", "--engine", "sglang", "--mem-fraction-static", value])
    argv(f"flags-free-fraction-{n}", ["fit", MODEL, "--gpu", "H100", "--engine", "trtllm", "--free-gpu-memory-fraction", value])
argv("flags-unknown-gpu", ["fit", MODEL, "--gpu", "H9000"])
argv("flags-unknown-model", ["kv", "no-such-model-anywhere"])
argv("flags-unknown-kv-dtype", ["kv", MODEL, "--kv-dtype", "fp7"])
argv("flags-huge-gpu-name", ["fit", MODEL, "--gpu", "H" * 100_000])
argv("flags-huge-model-name", ["kv", "m" * 100_000])

# plan's lists: empty, repeated past any use, unknown members
PLAN = ["plan", MODEL, "--concurrency", "4", "--context", "4096"]
argv("flags-plan-gpus-empty", [*PLAN, "--gpus", ""])
argv("flags-plan-gpus-commas", [*PLAN, "--gpus", ",,,"])
argv("flags-plan-gpus-many", [*PLAN, "--gpus", ",".join(f"G{i}" for i in range(100))])
argv("flags-plan-gpus-unknown", [*PLAN, "--gpus", "H100,H9000"])
argv("flags-plan-weights-many", [*PLAN, "--weights-dtype", ",".join(["fp8", "awq", "gptq"] * 10_000)], expect=0)
argv("flags-plan-weights-empty", [*PLAN, "--weights-dtype", ","])
argv("flags-plan-weights-unknown", [*PLAN, "--weights-dtype", "fp7"])
argv("flags-plan-kv-unknown", [*PLAN, "--kv-dtype", "q4_k_m"])
argv("flags-plan-kv-14", [*PLAN, "--kv-dtype", ",".join(f"k{i}" for i in range(14))])
argv("flags-plan-context-beyond", ["plan", MODEL, "--concurrency", "4", "--context", "999999999"])
argv("flags-plan-max-gpus-huge", [*PLAN, "--max-gpus", "1000000000000", "--gpus", "H100"], expect=0)
argv("flags-plan-prices-missing", [*PLAN, "--prices", "/nonexistent/prices.json"])
for n, value in enumerate(["nan", "inf", "-0.1", "0", "1.01", "abc", "1e400"]):
    argv(f"flags-fit-gpu-util-{n}", ["fit", MODEL, "--gpu", "H100", "--gpu-memory-utilization", value])
    argv(f"flags-levers-gpu-util-{n}", ["levers", MODEL, "--gpu", "H100", "--context", "4096", "--gpu-memory-utilization", value])
for n, extra in enumerate([["--np", "4"], ["--ctk", "q8_0"], ["--engine", "sglang", "--block-size", "32"],
                           ["--engine", "trtllm", "--mem-fraction-static", "0.8"], ["--engine", "llama.cpp", "--batch", "3"],
                           ["--engine", "transformers", "--kv-dtype", "fp8"], ["--weights-memory", "14GiB"],
                           ["--engine", "llama.cpp", "--pp", "2"], ["--cache", "static"]]):
    argv(f"flags-fit-engine-mismatch-{n}", ["fit", MODEL, "--gpu", "H100", *extra])
for n, extra in enumerate([["--num-gpus", "3", "--tp", "2"], ["--num-gpus", "4", "--tp", "2", "--pp", "3"],
                           ["--tp", "3"], ["--tp", "1024"], ["--pp", "1000"]]):
    argv(f"flags-fit-layout-{n}", ["fit", MODEL, "--gpu", "H100", *extra])
    argv(f"flags-levers-layout-{n}", ["levers", MODEL, "--gpu", "H100", "--context", "4096", *extra])
    argv(f"flags-compare-layout-{n}", ["compare", MODEL, "--gpu", "H100", *extra])
