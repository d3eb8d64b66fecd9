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
