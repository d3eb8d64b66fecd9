"""vLLM 0.8.0 - 0.10.1 fall back to the V0 engine below compute capability 8.0 (engine/arg_utils.py
_is_v1_supported_oracle, 'Compute Capability < 8.0 is not supported by the V1 Engine. Falling back to V0.'; gone in
0.10.2), and a log that says so is checked with V0's accounting. The T4 log is a real run of 0.8.2 that printed
the fallback (tests/data/vllm_logs, Unsloth's SyntheticDataKit on Colab): 3,637 GPU blocks."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvbudget.engines.vllm import VllmSettings, plan
from kvbudget.engines.vllm.check import check_log
from kvbudget.hardware import find_gpu
from kvbudget.model.resolve import load_model

LOG = Path(__file__).parent / "data" / "vllm_logs" / "v0.8.2_t4_llama3.2-3b_len2048_gmu0.89.log"


@pytest.mark.parametrize(("version", "gpu", "v0"), [
    ("0.8.2", "T4", True), ("0.9.2", "V100-SXM2-32GB", True), ("0.10.1.1", "T4", True),
    ("0.10.2", "T4", False), ("0.13.0", "T4", False), ("0.9.2", "A100-SXM4-80GB", False), ("0.6.4", "T4", True),
])
def test_v1_needs_compute_capability_8_from_0_8_to_0_10_1(version: str, gpu: str, v0: bool) -> None:
    p = plan(load_model("meta-llama/Llama-3.2-3B-Instruct"), find_gpu(gpu), VllmSettings(version=version, max_model_len=2048))
    assert (p.release == "v0") is v0
    assert any("falls back to its V0 engine" in n for n in p.notes) is (v0 and version != "0.6.4")


def test_a_log_that_fell_back_is_checked_as_v0() -> None:
    result = check_log(LOG.read_text(), model="meta-llama/Llama-3.2-3B-Instruct", gpu_memory=round(14.74 * 2**30))
    blocks = next(r for r in result.rows if r.figure == "GPU blocks")
    assert blocks.reported == 3637 and abs(blocks.predicted / 3637 - 1) < 0.05  # +8.5% under V1's accounting
