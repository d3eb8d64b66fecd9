"""`kvbudget check` on a vLLM log that shows no gpu_memory_utilization: the release's default is planned, and where
the log's available KV cache is far from kvbudget's, a warning gives the utilization the logged figure fits (a
dropped non-default-args line or command is the likeliest cause) instead of a silent confident miss."""

from __future__ import annotations

from pathlib import Path

from kvbudget.engines.vllm.check import check_log

DATA = Path(__file__).resolve().parent / "data" / "vllm_logs"


def _unseen(result: object) -> list[str]:
    return [w for w in result.warnings if "shows no gpu_memory_utilization" in w]  # type: ignore[attr-defined]


def test_a_log_without_its_utilization_says_which_one_its_figure_fits() -> None:
    # gpt-oss-120b on one H100, 0.11, run with --gpu-memory-utilization 0.95 (the excerpt keeps no command): planned
    # at the default 0.9 the KV budget is negative, the log shows 1.71 GiB
    text = (DATA / "v0.11_h100_gpt-oss-120b_gmu0.95_mnbt1024_fail.log").read_text(encoding="utf-8")
    r = check_log(text, model="openai/gpt-oss-120b", gpu="H100", version="0.11",
                  flags=["--max-model-len", "131072", "--max-num-batched-tokens", "1024"])
    said = _unseen(r)
    assert len(said) == 1 and "default 0.9 was planned" in said[0] and "fits 0.95" in said[0], r.warnings
    given = check_log(text, model="openai/gpt-oss-120b", gpu="H100", version="0.11",
                      flags=["--max-model-len", "131072", "--max-num-batched-tokens", "1024",
                             "--gpu-memory-utilization", "0.95"])
    assert not _unseen(given)


def test_no_warning_where_the_log_sets_its_utilization_or_the_default_fits() -> None:
    shown = (DATA / "v0.10.0_h100x4_qwen3-32b_tp4_yarn4_len131072_gmu0.95.log").read_text(encoding="utf-8")
    assert not _unseen(check_log(shown, model="Qwen/Qwen3-32B", gpu="H100"))
    default = (DATA / "v0.11.2_h200_llama3-8b_len1024.log").read_text(encoding="utf-8")  # 0.9 as it ran: +0.13%
    r = check_log(default, model="meta-llama/Meta-Llama-3-8B-Instruct", gpu="H200")
    assert r.settings.gpu_memory_utilization is None and not _unseen(r)
