"""simulate: synthetic specs and trace files that must be refused (or run) within the corpus's time and memory
bounds: prefix specs whose tokens would not fit in memory, OpenAI-style request logs of odd shapes."""

from __future__ import annotations

import json
from pathlib import Path

from corpus import add, argv, write

SIM = ["simulate", "llama-3.1-8b", "--gpu", "H100", "--no-progress"]
SMALL = "requests=4,prompt=10,output=10"

# 100,000 prefixes of 10M tokens (10^12 token ids) were made up front, shared or not: a hang, then MemoryError.
argv("sim-prefixes-never-drawn", [*SIM, "--synthetic", f"{SMALL},prefixes=100000x10000000@0"], expect=0)
argv("sim-prefixes-huge-drawn", [*SIM, "--synthetic", "requests=2,output=1,prefixes=100000x1000000@1"],
     expect_in="every request is refused")


def _trace(case_id: str, line: object, expect_in: str) -> None:
    add(case_id, lambda root: [*SIM, "--trace", write(root, "t.jsonl", json.dumps(line) + "\n")], expect_in=expect_in)


OPENAI = {"request": {"messages": [{"content": "hi"}], "max_tokens": 5}, "timestamp": 0}
_trace("sim-openai-usage-list", {**OPENAI, "response": {"usage": [1]}}, "needs --tokenizer")  # was AttributeError
_trace("sim-openai-usage-string", {**OPENAI, "response": {"usage": "none"}}, "needs --tokenizer")
_trace("sim-openai-content-int", {**OPENAI, "request": {"messages": [{"content": 5}], "max_tokens": 5}},
       "'content' must be a string or a list of parts")

# A flag the engine refuses, with a large workload: refused before the workload is made (it took 20 s and 2 GB first).
argv("sim-context-refused-before-the-workload",
     [*SIM, "--context", "10000000", "--synthetic", "requests=500000,prompt=100,output=100"],
     expect_in="greater than the derived max_model_len")

# An empty spec (or only commas and spaces) ran the default workload of 1,000 requests with exit 0, as if asked for.
for n, spec in enumerate(["", " ", ",", " , ,"]):
    argv(f"sim-synthetic-empty-{n}", [*SIM, "--synthetic", spec], expect_in="names no key")
    argv(f"size-synthetic-empty-{n}", ["size", "llama-3.1-8b", "--gpu", "H100", "--synthetic", spec],
         expect_in="names no key")

# size --report where the report cannot be written: refused before the sizing runs, naming --report (a missing
# folder was found only at the first figure, named as "--plot PATH-1.png"; a folder named like a report, likewise)
add("size-report-no-folder", lambda root: ["size", "llama-3.1-8b", "--gpu", "H100", "--report", str(root / "no" / "r.md")],
    expect_in="does not exist")
add("size-report-is-folder", lambda root: ["size", "llama-3.1-8b", "--gpu", "H100", "--report", _folder(root, "r.md")],
    expect_in="is a folder")


def _folder(root: Path, name: str) -> str:
    (root / name).mkdir()
    return str(root / name)

# fit's options of another engine were ignored by simulate and size (fit and levers refused them): the pool of the
# engine's default planned as if the flag had been read
SYN = ["--synthetic", SMALL]
for n, (engine, words, about) in enumerate([
        ("sglang", ["--gpu-memory-utilization", "0.5"], "--gpu-memory-utilization is not read under --engine sglang"),
        ("vllm", ["--mem-fraction-static", "0.5"], "--mem-fraction-static is not read under --engine vllm"),
        ("trtllm", ["--max-num-seqs", "4"], "--max-num-seqs is not read under --engine trtllm"),
        ("llama.cpp", ["--max-num-seqs", "4"], "--max-num-seqs is not read under --engine llama.cpp")]):
    argv(f"sim-foreign-flag-{n}", [*SIM, *SYN, "--engine", engine, *words], expect_in=about)
    argv(f"size-foreign-flag-{n}", ["size", "llama-3.1-8b", "--gpu", "H100", "--no-progress", "--engine", engine, *words],
         expect_in=about)

# diagnose: the plan's flags without --expect were ignored (the page's figures printed, exit 0), and with it another
# engine's (the plan made with the engine's default)
PAGE = str(Path(__file__).resolve().parents[1] / "data" / "metrics" / "vllm-0.33-busy.prom")
for n, words in enumerate([["--context", "4096"], ["--engine", "sglang"], ["--tp", "2"], ["--num-gpus", "2"],
                           ["--gpu-memory-utilization", "0.5"], ["--kv-dtype", "fp8"], ["--max-num-seqs", "8"]]):
    argv(f"diagnose-plan-flag-without-expect-{n}", ["diagnose", "--metrics", PAGE, *words],
         expect_in=f"{words[0]} is read with --expect MODEL --gpu GPU")
argv("diagnose-foreign-flag-with-expect", ["diagnose", "--metrics", PAGE, "--expect", "llama-3.1-8b", "--gpu", "H100",
                                           "--mem-fraction-static", "0.5"],
     expect_in="--mem-fraction-static is not read under --engine vllm")
