"""Hostile inputs, round 16: option values, traces, launch commands, logs, configs and metrics. Each case failed on
the code before it: a traceback, a refusal for the wrong reason, or a plausible answer with exit 0. The required
outcome is the engine's own answer, or one error line naming the problem and the fix, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvbudget.cli import main
from test_hostile_round15 import _refused, _runs

DATA = Path(__file__).parent / "data"


def _plan(capsys: pytest.CaptureFixture[str], *words: str) -> dict[str, object]:
    assert main(["explain", "--gpu", "H100", "--json", "--", *words]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


# --- round 15's leftovers ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "said"), [
    # was: "write it like 51539607552GiB" (48 EiB)
    ("51539607552", "looks like a count of bytes (48 GiB): write it like 48GiB or 51539607552B"),
    ("81559", "looks like a count of MiB, as nvidia-smi prints (79.65 GiB): write it like 81559MiB"),
    ("1e30", "even as a count of bytes it is more than 1 PiB"),
    ("48", "write it like 48GiB, 48GB or 48MiB"),
])
def test_a_bare_gpu_memory_is_read_for_what_it_likely_means(capsys: pytest.CaptureFixture[str], value: str,
                                                             said: str) -> None:
    _refused(capsys, ["fit", "llama-3.1-8b", "--gpu-memory", value], "has no unit", said)


@pytest.mark.parametrize(("arrival", "said"), [
    ("1e308", "'arrival' (seconds from the start) is 1e+308 seconds, beyond 1e9"),  # was "missing or not a number"
    ("-1", "'arrival' (seconds from the start) is negative (-1)"),
    ('"soon"', "is 'soon', not a number"),
    ("null", "'arrival' (seconds from the start) is missing"),
])
def test_a_trace_arrival_out_of_range_is_named_for_what_it_is(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                              arrival: str, said: str) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text(f'{{"arrival": {arrival}, "prompt_tokens": 10, "output_tokens": 5}}\n', encoding="utf-8")
    _refused(capsys, ["simulate", "llama-3.1-8b", "--gpu", "H100", "--trace", str(trace)], said)
    trace.write_text(f'{{"arrival": 0, "prompt_tokens": 10, "output_tokens": 5, "delay": {arrival}}}\n', encoding="utf-8")
    if arrival != "null":
        _refused(capsys, ["simulate", "llama-3.1-8b", "--gpu", "H100", "--trace", str(trace)], "'delay'")


_LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def test_kubectl_run_reads_the_args_after_dashes(capsys: pytest.CaptureFixture[str]) -> None:
    """kubectl run NAME --image=IMAGE -- ARGS: was refused ('unrecognized arguments: --'); ARGS are the container's
    args (the image's entrypoint runs them), with --command its command; --env is its environment."""
    same = _plan(capsys, "docker", "run", "--gpus", "all", "vllm/vllm-openai:v0.10.1", "--model", _LLAMA,
                 "--max-model-len", "8192")
    for command in (f"kubectl run x --image=vllm/vllm-openai:v0.10.1 -- --model {_LLAMA} --max-model-len 8192",
                    f"kubectl run x --rm -it --image vllm/vllm-openai:v0.10.1 --restart=Never --command -- vllm serve "
                    f"{_LLAMA} --max-model-len 8192"):
        doc = _plan(capsys, command)
        assert doc["kv_cache_tokens"] == same["kv_cache_tokens"]
        assert doc["engine"]["version_line"] == "v1"  # type: ignore[index]
    doc = _plan(capsys, f"kubectl run x --env=VLLM_USE_V1=0 --image=vllm/vllm-openai:v0.9.2 -- --model {_LLAMA} "
                        "--max-model-len 8192")
    assert doc["engine"]["version_line"] == "v0"  # type: ignore[index]


def test_kubectl_run_without_an_image_or_with_too_few_gpus_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    _refused(capsys, ["explain", "--gpu", "H100", "--", f"kubectl run x -- --model {_LLAMA}"],
             "kubectl run without --image=IMAGE")
    limits = '{"spec":{"containers":[{"name":"x","resources":{"limits":{"nvidia.com/gpu":1}}}]}}'
    _refused(capsys, ["explain", "--gpu", "H100", "--", "kubectl", "run", "x", "--image=vllm/vllm-openai:v0.10.1",
                      f"--overrides={limits}", "--", "--model", _LLAMA, "-tp", "2"],
             "needs 2 GPUs (TP x PP x DP) but kubectl run --overrides gives it 1")


@pytest.mark.parametrize("version", ["0.13.0", "0.12.0", "0.10.1", "0.6.3"])
def test_max_model_len_minus_one_before_auto_fit_is_refused(capsys: pytest.CaptureFixture[str], version: str) -> None:
    """-1 means 'fit to memory' from vLLM 0.14 (engine/arg_utils.py human_readable_int_or_auto); before, int('-1') is
    a length of -1 tokens (0.12-0.13: max_num_batched_tokens = max_num_seqs x -1 fails SchedulerConfig's ge=1). It
    was planned as an auto-fit, exit 0."""
    _refused(capsys, ["explain", "--gpu", "L4", "--vllm-version", version, "--", "vllm", "serve", "llama-3.1-8b",
                      "--max-model-len", "-1"], f"vLLM {version} takes it as a length of -1 tokens", "from 0.14")
    _runs(capsys, ["explain", "--gpu", "L4", "--vllm-version", "0.14.0", "--", "vllm", "serve", "llama-3.1-8b",
                   "--max-model-len", "-1"])
