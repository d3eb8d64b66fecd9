"""Every command's output fits 120 columns by default; `--wide` prints the full lines; wrapping keeps every word, and
a wrapped shell command is still one command when pasted."""

from __future__ import annotations

import contextlib
import io
import shlex

import pytest

from kvbudget.cli import main
from kvbudget.report.text import WIDTH, fit_width

MODELS = ["llama-3.1-8b", "google/gemma-3-27b-it", "deepseek-ai/DeepSeek-V3", "ai21labs/Jamba-v0.1"]
COMMANDS = [
    *(f"kv {m} --context 32768 --batch 8" for m in MODELS),
    *(f"fit {m} --gpu H100 --context 8192 --batch 32 --engine {e}" for m in MODELS[:3]
      for e in ("vllm", "textbook", "sglang", "trtllm", "transformers")),
    *(f"fit {m} --gpu H100 --context 8192 --np 32 --engine llama.cpp" for m in MODELS[:3]),  # -np: its batch
    "fit llama-3.1-8b --gpu L4 --context 131072 --batch 32",
    "fit ai21labs/Jamba-v0.1 --gpu H100 --context 8192",
    *(f"compare {m} --gpu H100 --context 32768" for m in MODELS[:2]),
    *(f"levers {m} --gpu H100 --context 8192" for m in MODELS),
    "levers meta-llama/Llama-2-70b-hf --gpu H100 --tp 2 --context 8192",
    "levers ai21labs/Jamba-v0.1 --gpu L40S --context 8192 --engine llama.cpp",
    "levers llama-3.1-8b --gpu H100 --context 8192 --engine trtllm",
    "plan deepseek-ai/DeepSeek-V3 --concurrency 32 --context 8192",
    "plan google/gemma-3-27b-it --concurrency 32 --context 8192 --engine sglang",
    "explain --gpu H100 -- vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 2 --max-model-len 131072",
    "explain --gpu L40S --llamacpp-build 5452 -- llama-server -m google/gemma-3-27b-it -c 49152 --parallel 16 -fa",
    "check tests/data/vllm_logs/v0.10.2dev_a100_qwen3-0.6b_len4096.log --model Qwen/Qwen3-0.6B --gpu A100-80GB",
    "check tests/data/llamacpp_logs/b5452_l40s_gemma3-27b_np16_iswa.log --model google/gemma-3-27b-it",
    "check tests/data/trtllm_logs/v0.19.0_rtx5090_llama3.1-8b-fp8_engine_trtllm-serve.log --model llama-3.1-8b",
    "check tests/data/sglang_logs/v0.4.3.post4_l4x4_qwq-32b_tp4_default.log --model Qwen/QwQ-32B",
    "models",
    "gpus",
]


def run(command: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        rc = main(shlex.split(command))
    return rc, out.getvalue()


@pytest.mark.parametrize("command", COMMANDS)
def test_every_line_fits_120_columns(command: str) -> None:
    rc, out = run(command)
    assert rc == 0, command
    long = [line for line in out.splitlines() if len(line) > WIDTH]
    assert not long, f"{command}: {len(long)} lines over {WIDTH} columns, e.g. {long[0]!r}"


def test_wide_prints_the_full_lines() -> None:
    command = "fit llama-3.1-8b --gpu L4 --context 131072 --batch 32"
    _, narrow = run(command)
    _, wide = run(command + " --wide")
    error = next(line for line in wide.splitlines() if "ValueError: To serve at least one request" in line)
    assert len(error) > WIDTH and error in wide.splitlines()  # vLLM's error on one line, as vLLM prints it
    assert error not in narrow.splitlines() and " ".join(narrow.split()) == " ".join(wide.split())


def test_a_wrapped_command_is_the_same_command() -> None:
    line = ("  vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 8 --pipeline-parallel-size 2 --max-model-len 8192"
            " --kv-cache-dtype fp8 --chat-template '{{ a b c }}'")
    wrapped = fit_width(line, 80).split("\n")
    assert len(wrapped) > 1 and all(len(x) <= 80 for x in wrapped)
    assert all(x.endswith(" \\") for x in wrapped[:-1])
    assert shlex.split(" ".join(x.removesuffix(" \\") for x in wrapped)) == shlex.split(line)
    assert "'{{ a b c }}'" in wrapped[-1]  # never cut inside quotes


def test_a_wrapped_table_keeps_its_columns_and_words() -> None:
    table = ("lever             flag                  GPUs  added\n"
             "----------------  --------------------  ----  -----\n"
             "one more replica  a second server too      2    +56\n"
             "FP8 KV cache      --kv-cache-dtype fp8     1     +6")
    lines = fit_width(table, 46).split("\n")
    assert all(len(x) <= 46 for x in lines) and len(lines) == 6
    assert lines[2].startswith("one more  ") and lines[3] == "replica"  # the lever column, not the flag
    assert lines[4].startswith("FP8 KV    --kv-cache-dtype fp8") and lines[2].endswith("+56") and lines[5] == "cache"
    assert sorted(table.replace("-", "").split()) == sorted(" ".join(lines).replace("-", "").split())  # same words


def test_prose_wraps_under_a_hanging_indent() -> None:
    line = "  - " + " ".join(f"word{i}" for i in range(40))
    lines = fit_width(line, 60).split("\n")
    assert all(len(x) <= 60 for x in lines) and all(x.startswith("      word") for x in lines[1:])
    assert " ".join(" ".join(lines).split()) == " ".join(line.split())
    assert fit_width("x" * 200, 60) == "x" * 200  # one word longer than the width stays whole


@pytest.mark.parametrize("command", [
    "fit llama-3.1-70b --gpu H100 --context 8192 --batch 1",
    "fit llama-3.1-8b --gpu H100 --context 8192 --batch 1",
    "fit llama-3.1-8b --gpu H100 --context 8192 --batch 1 --engine textbook",
    "fit llama-3.1-8b --gpu L4 --context 8192 --engine llama.cpp --np 1",
    "fit llama-3.1-8b --gpu H100 --context 8192 --batch 1 --engine transformers",
    "plan llama-3.1-8b --concurrency 1 --context 8192 --gpus H100",
])
def test_a_count_of_one_is_singular(command: str) -> None:
    rc, out = run(command)
    assert rc == 0
    text = " ".join(out.split())  # a wrapped line reads as one
    for bad in (" 1 requests", " 1 sequences", " 1 GPUs", " 1 tokens", "(s)", "+1 requests", "1 x 8,192-token requests"):
        assert bad not in text, (command, bad)


def test_requests_at_once_are_whole_and_vllms_concurrency_keeps_its_decimals() -> None:
    _, out = run("compare llama-3.1-8b --gpu H100 --context 32768")
    rows = out.split("\n")[4:9]
    assert [r.split()[0] for r in rows] == ["vllm", "sglang", "trtllm", "llama.cpp", "transformers"]
    assert all(r.split()[-2].isdigit() for r in rows)  # "requests at once": 14, not 14.04
    _, fit = run("fit llama-3.1-8b --gpu H100 --context 32768")
    # vLLM prints it so (14.04x before the profiling run's floor from vLLM 0.33's source: its V2 runner's warm-up
    # parameter sampler pass over 1,024 dummy requests, 1.78 GiB of peak where the fit charged 0.97)
    assert "Maximum concurrency for 32,768 tokens per request: 13.83x" in fit
    _, sglang = run("explain --gpu H100 -- python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct")
    assert "the pool holds 3 requests of 131,072 tokens\n" in sglang
