"""`kvbudget check LOG --model M --gpu G` reads the run's settings from the log itself: on every corpus record the
plan from the log alone matches the plan from the settings the record states by hand (its "kvbudget" block, what
tools/accuracy.py scores with), except where the log does not show what the record knows from elsewhere (each
listed with its reason). A reader that misses or misreads a line (the TP size only the workers' rank tags show, a
backend's resolved dtype, V0's rounded profile line) makes a row differ, and this test names it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvbudget.engines.vllm.check import check_log
from kvbudget.units import GiB, InputError

LOGS = Path(__file__).parent / "data" / "vllm_logs"

# Records whose log alone cannot give the record's plan, and why.
NOT_IN_THE_LOG = {
    "v0.10.0_rtx3090_qwen3-30b-a3b-awq_len2048_gmu0.8": "the record plans the base model with --quantization awq as "
    "a stand-in for the AWQ checkpoint the log names (quantization=compressed-tensors, read from a checkpoint "
    "kvbudget has no config of)",
    "v0.15.0dev_80gb_llama3-8b-w4a16-awq_default": "the same stand-in for a compressed-tensors W4A16 checkpoint",
    "v1-alpha-0.7_80gb_llama3.1-70b-w8a8_len2048_gmu0.98": "the record plans the base model with --quantization fp8 "
    "as a stand-in for the INT8 w8a8 checkpoint",
    "v0.24.0_rtx3090x2_qwen3.6-27b-fp8_tp2_kvfp8_mtp3_len262144_mns2": "the stored PR cuts the non-default args line "
    "(left out): TP 2, fp8 KV, 2 sequences, MTP and 8,192 batched tokens are the compose file's at the PR's commit",
    "v0.10.1dev_h20x8_qwen3-coder-480b-fp8_dp8_fail_gmu0.90": "the excerpt prints no version (0.10.1dev from the issue)",
    "v0.10.1dev_h20x8_qwen3-coder-480b-fp8_dp8_fail_gmu0.95": "the excerpt prints no version (0.10.1dev from the issue)",
    "v0.30.0-xinference_rtx5060ti-wsl_qwen3-4b-2507-ft_len8192_gmu0.7": "Xinference's log prints no vLLM version",
    "v0.8.5dev_l40s_llama3.1-8b_len32768": "the excerpt prints no version (0.8.5dev from the issue); its format gives "
    "the 0.8-0.20 line",
    "v0.11_h100_gpt-oss-120b_gmu0.95_mnbt1024_fail": "the excerpt prints no settings (0.95 and 1024 from the issue)",
    "v0.2.4_rtx4090x2_codellama-13b_tp2_len16384": "the excerpt prints no settings (TP 2, 0.95, 16,384 from the post)",
    "v0.4.x_t4x2_deepseek-coder-6.7b_tp2_fp16": "the excerpt prints no settings (TP 2, float16 from the post)",
    "v0.10.0_h100x8_qwen3-235b-a22b-fp8_tp8-ep_kvfp8_len32768": "the excerpt does not show --enable-expert-parallel "
    "(from the issue's command): 0.01 GiB apart",
    "v0.7.3_l40s_granite-3.0-3b-a800m_v1_default": "the record plans the 0.8-0.20 V1 line; the log alone reads as "
    "0.7.3's V1 alpha (VLLM_USE_V1=1), which it is: 0.01 GiB apart",
    "v0.10.2dev_a100_qwen3-0.6b_len4096": "the excerpt prints no version (0.10.2dev from the PR): its FlashInfer "
    "attention says flashinfer is installed, which the sampler takes on 0.8-0.11 only",
    "v0.11-0.12_80gb-x2_gpt-oss-120b_tp2_default": "the excerpt does not show that the run is vLLM's image, whose "
    "FlashInfer the sampler takes (the record's Apptainer command is the deployment's own template)",
    "v0.27.1_rtx-pro-6000-server-x4_qwen3-235b-a22b-2507-fp8_tp4": "the excerpt prints no version (0.27.1 from the "
    "post's text; the container tag is latest)",
    "v0.19.0_a100-80gb_gemma-4-26b-a4b_len131072_eager": "the excerpt prints no version (0.19.0 from the same post's "
    "other run on the host)",
    "v0.24.0_rtx5090_qwen3.6-35b-a3b-nvfp4_kvfp8_len131072_mns1": "the log's quantization=modelopt reads the local "
    "NVFP4 export's quantization_config, which kvbudget has no copy of (the record plans --quantization modelopt_fp4 as "
    "a stand-in)",
    "v0.24.0_rtx5090_qwen3.6-35b-a3b-nvfp4_kvfp8_len131072_mns1_rerun": "the same launch three days later (club-3090 "
    "#652): the same modelopt checkpoint and stand-in",
}


def _records() -> list[tuple[str, dict]]:
    out = []
    for path in sorted(LOGS.glob("*.json")):
        kb = json.loads(path.read_text()).get("kvbudget") or {}
        if kb.get("model") and not kb.get("exclude"):
            out.append((path.stem, kb))
    return out


def _available(text: str, kb: dict, **kw: object) -> int:
    gib = kb.get("gpu_memory_gib")
    r = check_log(text, model=kb["model"], gpu=kb.get("gpu"), gpu_memory=round(gib * GiB) if gib else None, **kw)
    return r.plan.available_kv_cache_bytes


@pytest.mark.parametrize(("stem", "kb"), _records(), ids=[s for s, _ in _records()])
def test_the_log_alone_gives_the_records_plan(stem: str, kb: dict) -> None:
    text = (LOGS / f"{stem}.log").read_text()
    stated = _available(text, kb, version=kb.get("version"), flags=kb.get("flags"))
    try:
        read = _available(text, kb)
    except InputError as exc:  # a listed record may be refused without what the record states
        assert stem in NOT_IN_THE_LOG, f"{stem}: the log alone is refused: {exc}"
        return
    if stem in NOT_IN_THE_LOG:
        return
    assert read == stated, f"{stem}: {read / GiB:.2f} GiB from the log alone, {stated / GiB:.2f} from the record"


def test_the_list_holds_only_records_that_differ() -> None:
    names = {s for s, _ in _records()}
    assert set(NOT_IN_THE_LOG) <= names


def test_a_run_that_did_not_start_gets_its_fixes(capsys: pytest.CaptureFixture[str]) -> None:
    # vLLM 0.7.2, R1-Distill-Qwen-14B at TP 2 on two RTX 4090s at 131,072 tokens: the log's ValueError says its KV
    # cache holds 81,536 tokens; kvbudget's plan holds 80,576, so --max-model-len 80576 is its first fix
    import json as _json

    from kvbudget.cli import main

    log = str(LOGS / "v0.7.2_rtx4090x2_r1-distill-qwen-14b_tp2_fail.log")
    assert main(["check", log, "--gpu", "RTX-4090"]) == 0
    out = capsys.readouterr().out
    assert "its KV cache held 81,536 tokens, so --max-model-len 81536 starts that run" in out
    assert "--max-model-len 80576" in out.split("Flags that change this", 1)[1]
    assert main(["check", log, "--gpu", "RTX-4090", "--json"]) == 0
    doc = _json.loads(capsys.readouterr().out)
    first = doc["fixes"][0]
    assert first["flags"] == "--max-model-len 80576" and first["starts"] and first["kv_cache_tokens"] == 80576
    # a run that started and holds many requests: no fixes
    ok = str(LOGS / "v0.29.0_rtx5090_qwen2.5-7b_bf16_len8192_gmu0.9.log")
    assert main(["check", ok, "--json"]) == 0
    assert _json.loads(capsys.readouterr().out)["fixes"] == []


def test_the_speculative_config_is_read_from_either_line_the_log_shows() -> None:
    """A draft's memory is planned from the log alone: the non-default args' 'speculative_config' mapping, or, where
    an excerpt keeps only the engine config line, its speculative_config=SpeculativeConfig(method=..., model=...,
    num_spec_tokens=N). Before, neither was read: the EAGLE-3 runs were planned without their draft (0.81 GiB)."""
    from kvbudget.engines.vllm.check import check_log

    text = (LOGS / "v0.24.0_a100-80gb_llama3.1-8b_fp16_eagle3-k5_len8192_gmu0.85.log").read_text(encoding="utf-8")
    full = check_log(text, gpu="A100-80GB")
    config_only = "\n".join(line for line in text.splitlines()
                            if "non-default args" not in line and "vllm serve" not in line)
    assert "speculative_config=SpeculativeConfig(method='eagle3'" in config_only
    for r in (full, check_log(config_only, model="meta-llama/Llama-3.1-8B-Instruct", gpu="A100-80GB")):
        assert (r.settings.speculative_method, r.settings.num_speculative_tokens) == ("eagle3", 5)
        assert r.settings.speculative_draft is not None
    assert full.plan.model_loading_bytes == check_log(config_only, model="meta-llama/Llama-3.1-8B-Instruct",
                                                      gpu="A100-80GB").plan.model_loading_bytes
    without = "\n".join(line for line in config_only.splitlines() if "SpeculativeConfig(" not in line)
    assert check_log(without, model="meta-llama/Llama-3.1-8B-Instruct", gpu="A100-80GB").settings.speculative_method is None


def test_a_launch_command_over_continuation_lines_is_read_whole() -> None:
    """A command pasted as the shell shows it, one flag a line after a backslash (the rtx6kpro MiniMax-M2.5 page):
    its model and flags are on the lines after `vllm serve \\`. Before, only that first line was read, so the log
    named no model and its TP 4 was lost (planned at TP 1, the run did not start)."""
    from kvbudget.engines.vllm.log import parse_vllm_log

    text = (LOGS / "v0.16-0.17_rtx-pro-6000x4_minimax-m2.5-fp8_tp4_default.log").read_text(encoding="utf-8")
    assert parse_vllm_log(text).command == (
        "SAFETENSORS_FAST_GPU=1 VLLM_SLEEP_WHEN_IDLE=1 vllm serve MiniMaxAI/MiniMax-M2.5 --tensor-parallel-size 4 "
        "--tool-call-parser minimax_m2 --reasoning-parser minimax_m2_append_think --enable-auto-tool-choice "
        "--trust-remote-code")
    r = check_log(text, gpu="RTX-PRO-6000-WS-96GB", version="0.16.0")
    assert r.settings.tensor_parallel_size == 4 and "MiniMax-M2" in r.model
    # a continuation that runs on (every line ending in a backslash) is read for a bounded number of lines
    flood = "vllm serve \\\n" + "  --trust-remote-code \\\n" * 100_000 + "GPU KV cache size: 1,024 tokens\n"
    command = parse_vllm_log(flood).command
    assert command is not None and command.startswith("vllm serve --trust-remote-code") and len(command) < 10_000


def test_a_command_after_a_shell_prompt_is_read() -> None:
    """A command copied with the terminal's prompt before it (`(.venv) root@host:~# vllm serve M ...`, the myoceane.fr
    Gemma 4 post): before, only `$`, `#` or `>` and blanks could come before it, so the log named no model."""
    from kvbudget.engines.vllm.log import parse_vllm_log

    text = (LOGS / "v0.19.0_a100-80gb_gemma-4-26b-a4b_len131072_eager.log").read_text(encoding="utf-8")
    command = parse_vllm_log(text).command
    assert command is not None and command.startswith("vllm serve google/gemma-4-26B-A4B --port 10000")
    r = check_log(text, gpu="A100-SXM4-80GB", version="0.19.0")
    assert "gemma-4-26B-A4B" in r.model and r.settings.enforce_eager and r.settings.max_model_len == 131072
    for prompt in ("user@gpu-box:~/work$ ", "[root@node1 ~]# ", "(vllm) PS C:\\> ", "$ "):
        assert parse_vllm_log(f"{prompt}vllm serve Qwen/Qwen3-8B\nGPU KV cache size: 1,024 tokens\n").command == (
            "vllm serve Qwen/Qwen3-8B"), prompt


def test_the_banners_model_line_names_the_model() -> None:
    """An excerpt whose only model line is the start-up banner's ("█▄█▀ █ ... █  model   PATH", club-3090 PR #594):
    before, the log named no model and the check asked for --model; now the banner's path is read (and from its
    name, Qwen3.6-27B with FP8 weights)."""
    from kvbudget.engines.vllm.log import parse_vllm_log

    text = (LOGS / "v0.24.0_rtx3090x2_qwen3.6-27b-fp8_tp2_kvfp8_mtp3_len262144_mns2.log").read_text(encoding="utf-8")
    parsed = parse_vllm_log(text)
    assert parsed.model == "~/.cache/huggingface/qwen3.6-27b-fp8" and parsed.version == "0.24.0"
    r = check_log(text, gpu="RTX-3090", flags=["-tp", "2", "--kv-cache-dtype", "fp8", "--max-num-seqs", "2"])
    assert "qwen3.6-27b-fp8" in r.model and r.settings.tensor_parallel_size == 2
    # the args line's model still wins where both are printed; a banner line with no model word names none
    both = text + "(APIServer pid=1) INFO non-default args: {'model': 'Qwen/Qwen3-8B'}\n"
    assert parse_vllm_log(both).model == "Qwen/Qwen3-8B"
    assert parse_vllm_log("\u2588\u2588  version 0.24.0\nGPU KV cache size: 1,024 tokens\n").model is None
