"""Flags with values never meant: negative, zero, NaN, infinite, absurd, or of the wrong kind. Each case names
the words of its error: argparse's ``argument --flag: 'value' ...`` for a value its type refuses, else the
flag, value or name the check is about."""

from __future__ import annotations

from pathlib import Path

from corpus import add, argv

MODEL = "llama-3.1-8b"
BAD_COUNTS = ["-1", "0", "nan", "inf", "1e30", "3.5", "", "abc", "9" * 5000, "-0", "0x10", "1_0_"]


def refused(flag: str, value: str) -> str:
    """argparse's line for a value the flag's type refuses (a long value is cut after 20 characters)."""
    return f"argument {flag}: '{value[:20]}"


for flag in ("--context", "--batch", "--tp"):
    for n, value in enumerate(BAD_COUNTS):
        argv(f"flags-kv{flag}-{n}", ["kv", MODEL, flag, value], expect_in=refused(flag, value))
for flag in ("--context", "--batch", "--tp", "--pp", "--num-gpus"):
    for n, value in enumerate(BAD_COUNTS):
        argv(f"flags-fit{flag}-{n}", ["fit", MODEL, "--gpu", "H100", flag, value], expect_in=refused(flag, value))
# --gpu-memory=VALUE: a value that starts with "-" would be read as a flag otherwise
for n, value in enumerate(["48", "0GiB", "-48GiB", "nanGiB", "infGiB", "1e30GiB", "48XB", "", "GiB", "48 GiB GiB"]):
    argv(f"flags-gpu-memory-{n}", ["fit", MODEL, f"--gpu-memory={value}"], expect_in=f"memory size '{value}'")
for n, value in enumerate(["nan", "inf", "-0.1", "0", "1.5", "abc"]):
    for name, engine, flag in (("mem-fraction", "sglang", "--mem-fraction-static"),
                               ("free-fraction", "trtllm", "--free-gpu-memory-fraction")):
        argv(f"flags-{name}-{n}", ["fit", MODEL, "--gpu", "H100", "--engine", engine, f"{flag}={value}"],
             expect_in=f"{refused(flag, value)}' is not a fraction")
argv("flags-unknown-gpu", ["fit", MODEL, "--gpu", "H9000"], expect_in="unknown GPU 'H9000'")
argv("flags-unknown-model", ["kv", "no-such-model-anywhere"], expect_in="unknown model 'no-such-model-anywhere'")
argv("flags-unknown-kv-dtype", ["kv", MODEL, "--kv-dtype", "fp7"], expect_in="'fp7'")
argv("flags-huge-gpu-name", ["fit", MODEL, "--gpu", "H" * 100_000], expect_in="gpu is 100,000 characters long")
argv("flags-huge-model-name", ["kv", "m" * 100_000], expect_in="model is 100,000 characters long")

# plan's lists: empty, repeated past any use, unknown members
PLAN = ["plan", MODEL, "--concurrency", "4", "--context", "4096"]
argv("flags-plan-gpus-empty", [*PLAN, "--gpus", ""], expect_in="--gpus names no GPU")
argv("flags-plan-gpus-commas", [*PLAN, "--gpus", ",,,"], expect_in="--gpus names no GPU")
argv("flags-plan-gpus-many", [*PLAN, "--gpus", ",".join(f"G{i}" for i in range(100))], expect_in="--gpus names 100 GPU types")
argv("flags-plan-gpus-unknown", [*PLAN, "--gpus", "H100,H9000"], expect_in="unknown GPU 'H9000'")
argv("flags-plan-weights-many", [*PLAN, "--gpus", "H100,L4", "--weights-dtype", ",".join(["fp8", "awq", "gptq"] * 10_000)],
     expect=0)
argv("flags-plan-weights-empty", [*PLAN, "--weights-dtype", ","], expect_in="--weights-dtype and --kv-dtype need at least one value")
argv("flags-plan-weights-unknown", [*PLAN, "--weights-dtype", "fp7"], expect_in="unknown weights dtype 'fp7'")
argv("flags-plan-kv-unknown", [*PLAN, "--kv-dtype", "q4_k_m"], expect_in="--kv-dtype q4_k_m: not a KV-cache dtype")
argv("flags-plan-kv-14", [*PLAN, "--kv-dtype", ",".join(f"k{i}" for i in range(14))], expect_in="--kv-dtype take at most 12 values")
argv("flags-plan-context-beyond", ["plan", MODEL, "--concurrency", "4", "--context", "999999999"],
     expect_in="--context 999,999,999 exceeds")
argv("flags-plan-max-gpus-huge", [*PLAN, "--max-gpus", "1000000000000", "--gpus", "H100"], expect=0)
argv("flags-plan-prices-missing", [*PLAN, "--prices", "/nonexistent/prices.json"], expect_in="'/nonexistent/prices.json': no such file")
for n, value in enumerate(["nan", "inf", "-0.1", "0", "1.01", "abc", "1e400"]):
    about = f"{refused('--gpu-memory-utilization', value)}' is not a fraction"
    argv(f"flags-fit-gpu-util-{n}", ["fit", MODEL, "--gpu", "H100", f"--gpu-memory-utilization={value}"], expect_in=about)
    argv(f"flags-levers-gpu-util-{n}", ["levers", MODEL, "--gpu", "H100", "--context", "4096",
                                        f"--gpu-memory-utilization={value}"], expect_in=about)
# A flag of another engine: refused, naming the flag and the engine it is read under (vllm unless given).
for n, extra in enumerate([["--np", "4"], ["--ctk", "q8_0"], ["--engine", "sglang", "--block-size", "32"],
                           ["--engine", "trtllm", "--mem-fraction-static", "0.8"], ["--engine", "llama.cpp", "--batch", "3"],
                           ["--engine", "transformers", "--kv-dtype", "fp8"], ["--weights-memory", "14GiB"],
                           ["--engine", "llama.cpp", "--pp", "2"], ["--cache", "static"]]):
    engine = extra[1] if extra[0] == "--engine" else "vllm"
    argv(f"flags-fit-engine-mismatch-{n}", ["fit", MODEL, "--gpu", "H100", *extra],
         expect_in=f"{extra[-2]} is not read under --engine {engine}")
# GPU layouts that cannot be: the same check in fit, levers and compare. Llama-3.1-8B: 32 heads, 32 layers.
LAYOUTS: list[tuple[list[str], str]] = [
    (["--num-gpus", "3", "--tp", "2"], "--num-gpus 3 is not a multiple of --tp 2"),
    (["--num-gpus", "4", "--tp", "2", "--pp", "3"], "--num-gpus 4 is not a multiple of --tp 2 x --pp 3"),
    (["--tp", "3"], "--tp 3 does not divide the 32 attention heads"),
    (["--tp", "1024"], "--tp 1024 does not divide the 32 attention heads"),
    (["--pp", "1000"], "1000 must be between 1 and the model's 32 layers"),  # vLLM names it --pipeline-parallel-size
]
for n, (extra, about) in enumerate(LAYOUTS):
    argv(f"flags-fit-layout-{n}", ["fit", MODEL, "--gpu", "H100", *extra], expect_in=about)
    argv(f"flags-levers-layout-{n}", ["levers", MODEL, "--gpu", "H100", "--context", "4096", *extra], expect_in=about)
    argv(f"flags-compare-layout-{n}", ["compare", MODEL, "--gpu", "H100", *extra], expect_in=about)

# a launch command pasted as one quoted string is split as a shell would; unbalanced quotes are one line
for n, command in enumerate(["vllm serve 'x", 'vllm serve "meta-llama/Llama-3.1-8B-Instruct', "llama-server -m 'a.gguf",
                             "python -m sglang.launch_server --model-path \"x"]):
    argv(f"flags-explain-quoted-unbalanced-{n}", ["explain", "--gpu", "H100", "--", command], expect_in="close its quotes")
argv("flags-explain-quoted-ok", ["explain", "--gpu", "H100", "--", "vllm serve meta-llama/Llama-3.1-8B-Instruct -tp 2"],
     expect=0)
for n, value in enumerate(["-1", "-8192", "0", "-0"]):
    argv(f"flags-count-not-positive-{n}", ["fit", MODEL, "--gpu", "H100", "--context", value], expect_in="must be positive")
argv("flags-units-lowercase", ["kv", MODEL, "--units", "gb", "--context", "1024"], expect=0)
argv("flags-units-unknown", ["kv", MODEL, "--units", "MB"], expect_in="--units")


def _symlink_loop(root: Path) -> str:
    loop = root / "loop"
    loop.symlink_to(loop)
    return str(loop)


add("flags-config-symlink-loop", lambda root: ["fit", _symlink_loop(root), "--gpu", "H100"],
    expect_in="Too many levels of symbolic links")
add("flags-log-symlink-loop", lambda root: ["check", _symlink_loop(root)], expect_in="Too many levels of symbolic links")
add("flags-prices-symlink-loop", lambda root: [*PLAN, "--prices", _symlink_loop(root)],
    expect_in="Too many levels of symbolic links")

# --vllm-version read by int(): '' took the newest rules unasked, '-1' and '0.-5' V0's, '1_0.5' and full-width digits
# a release line; each was exit 0 with some release's accounting
for n, value in enumerate(["", " ", "-1", "0.-5", "1_0.5", "\uff10.\uff16", "0", "vvv0.6"]):
    argv(f"flags-vllm-version-{n}", ["fit", MODEL, "--gpu", "H100", f"--vllm-version={value}"],
         expect_in="unknown vLLM version")

# fit's --kv-dtype under vLLM's rules, as a launch command's --kv-cache-dtype (config/cache.py CacheDType, matched as
# written) and its attention backends on the GPU (platforms/cuda.py get_valid_backends): each was planned, exit 0
for value, words in (("half", "matched as written: float16"), ("float32", "no release keeps the KV cache in float32"),
                     ("FP8", "matched as written: fp8"), ("fp8_inc", "No valid attention backend")):
    argv(f"flags-fit-vllm-kv-dtype-{value}", ["fit", MODEL, "--gpu", "H100", "--kv-dtype", value], expect_in=words)
argv("flags-fit-vllm-kv-dtype-nvfp4-t4", ["fit", "llama-3.2-1b", "--gpu", "T4", "--kv-dtype", "nvfp4"],
     expect_in="needs compute capability 8.0")
