"""Answers a user copies must be right (issue #9): every launch command kvbudget prints, read back by
`explain`, gives the figures it was printed beside; weights too large for the GPU stop while loading."""

from __future__ import annotations

import json
import shlex

import pytest

from kvbudget.cli import main

LLAMA70 = "meta-llama/Llama-3.1-70B-Instruct"


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(list(argv)) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _explained(capsys: pytest.CaptureFixture[str], command: str, gpu: str) -> dict:
    return _json(capsys, "explain", "--gpu", gpu, "--json", "--", *shlex.split(command))


@pytest.mark.parametrize("weights", ["awq", "gptq", "fp8", "nf4", "nvfp4", "bf16"])
def test_fit_launch_and_fewest_gpus_keep_the_weight_format(capsys: pytest.CaptureFixture[str], weights: str) -> None:
    doc = _json(capsys, "fit", LLAMA70, "--gpu", "H100", "--weights-dtype", weights, "--context", "8192", "--batch", "64",
                "--json")
    launch = doc["launch"]
    back = _explained(capsys, launch["command"], "H100")
    assert back["kv_cache_tokens"] == doc["kv_cache_tokens"]
    assert back["memory"]["weights_bytes"] == doc["memory"]["weights_bytes"]
    # formats vLLM cannot make from a 16-bit checkpoint say which checkpoint to serve
    assert ("note" in launch) == (weights in ("awq", "gptq", "nvfp4"))
    fewest = doc.get("fewest_gpus")
    if fewest:
        again = _explained(capsys, fewest["launch"]["command"], "H100")
        assert again["kv_cache_tokens"] >= 64 * 8192 or again["max_concurrency"] >= 64
        assert again["memory"]["weights_bytes"] < doc["memory"]["weights_bytes"]  # split over its TP ranks


def test_awq_fewest_gpus_text_names_the_format(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fit", LLAMA70, "--gpu", "H100", "--weights-dtype", "awq", "--context", "8192", "--batch", "64"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("  vllm serve"))
    assert "--quantization awq" in line
    assert "AWQ weights need an AWQ checkpoint of the model" in out


def test_weights_larger_than_the_gpu_stop_while_loading(capsys: pytest.CaptureFixture[str]) -> None:
    # DeepSeek-R1-Distill-Qwen-14B in bf16 is 27.54 GiB loaded; an RTX 4090 has 23.64 GiB
    assert main(["fit", "deepseek-r1-distill-qwen-14b", "--gpu", "RTX4090", "--context", "4096"]) == 0
    out = capsys.readouterr().out
    assert "Model loading took" not in out
    assert "torch.OutOfMemoryError: CUDA out of memory while loading the model: 27.54 GiB of weights per GPU" in out
    assert "gpu_memory_utilization" not in out.split("vLLM will stop with:")[1].split("Verdict")[0]
    # and what would fit: two GPUs, with the command
    assert "Fewest RTX-4090-24GB for 1 x 4,096-token requests: 2 (TP2)" in out


def test_bare_number_memory_size_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["fit", "llama-3.1-8b", "--gpu-memory", "48"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has no unit: write it like 48GiB" in err
    assert main(["fit", "llama-3.1-8b", "--engine", "textbook", "--gpu-memory", "48GiB", "--overhead", "0"]) == 0
