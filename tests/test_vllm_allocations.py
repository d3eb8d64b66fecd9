"""PyTorch's caching-allocator blocks and segments around a vLLM rank's weights (engines/vllm/allocations.py):
by hand from a config, against the "Model loading took" and "consumed memory" figures of real logs, and the
releases whose figures count them (each from the release's source, named in the module)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kvbudget.engines.vllm.allocations import counts_segments, segment_bytes, weight_steps
from kvbudget.engines.vllm.calibration import FIT_LOG_SEGMENTS_BYTES
from kvbudget.engines.vllm.check import check_log
from kvbudget.engines.weight_tensors import weight_allocations
from kvbudget.model.resolve import load_model
from kvbudget.model.weights import WeightFormat, parse_weight_format
from kvbudget.units import GiB, MiB

LOGS = Path(__file__).parent / "data" / "vllm_logs"
BF16 = WeightFormat("bf16", dense_dtype="bf16")


def test_qwen2_7b_by_hand() -> None:
    # Qwen2-7B (config.json: hidden 3584, intermediate 18944, 28 heads / 4 KV heads x 128, 28 layers, vocabulary
    # 152,064, 32,768 positions, untied) in bf16 at TP 1, one layer: qkv_proj (3584 + 2 x 512) x 3584 x 2 B = 31.5 MiB
    # in a 32 MiB block (0.5 MiB left in it), o_proj 24.5 MiB in a 26 MiB segment (1.5 MiB split off, never reused),
    # gate_up_proj 2 x 18944 x 3584 x 2 B = 259 MiB in 260 (1 MiB left in it), down_proj 129.5 MiB in 130; the
    # embedding and lm_head 1039.5 MiB each in 1040
    inside = 28 * (0.5 + 1 + 0.5) * MiB + 2 * 0.5 * MiB
    # the rotary cache: float32 freqs, cos, sin (8 MiB each: two 20 MiB segments), cat (16 MiB) are freed after the
    # 8 MiB bf16 copy took 8 MiB of the first segment: 12 MiB of it stay beside. The small pool's one 2 MiB segment
    # holds the biases (q 7 KiB, k and v 1 KiB) and two norms (7 KiB each) a layer and the final norm (the rotary
    # cache's inv_freq and positions are freed)
    small = 28 * (3584 * 2 + 512 * 2 * 2 + 3584 * 2 * 2) + 3584 * 2
    beside = 28 * 1.5 * MiB + 12 * MiB + (2 * MiB - small)
    assert segment_bytes(load_model("Qwen/Qwen2-7B-Instruct"), BF16, 1, "bf16") == (inside, beside)


def test_the_fit_logs_segments() -> None:
    # Llama-3.1-8B's shards are whole multiples of 2 MiB: nothing inside the blocks; beside them, what the rotary
    # cache's float32 temporaries (131,072 positions x 64 x 4 B = 32 MiB each) leave: the figure the two calibrated
    # constants are net of (calibration.py)
    spec = load_model("meta-llama/Llama-3.1-8B-Instruct")
    assert segment_bytes(spec, BF16, 1, "bf16") == (0, FIT_LOG_SEGMENTS_BYTES)
    assert 17 * MiB < FIT_LOG_SEGMENTS_BYTES < 18 * MiB


def test_quantized_formats_are_not_modelled_and_steps_free_what_they_allocate() -> None:
    spec = load_model("Qwen/Qwen2-7B-Instruct")
    assert segment_bytes(spec, parse_weight_format("awq"), 1, "fp16") == (0, 0)  # repacked into Marlin's layout
    steps = weight_steps(spec, BF16, 1, "bf16")
    frees = [s for s in steps if not isinstance(s, int)]
    assert len(frees) == 6  # inv_freq, t, freqs, cos, sin, then the float32 cache once the bf16 copy exists
    assert len(steps) - len(frees) == len(weight_allocations(spec, BF16, 1)) + 7  # and the 6 rotary tensors with the bf16 copy


@pytest.mark.parametrize(("rel_key", "version", "counted"), [
    ("v0", "0.2.4", False),  # torch.cuda.max_memory_allocated() only
    ("v0", "0.2.5", True), ("v0", "0.4.3", True), ("v0", "0.6.3.post1", True),  # used memory after the profiling run
    ("v0", "0.6.4", True),  # used less torch's allocated bytes
    ("v0", "0.6.5", False), ("v1", "0.10.1", False), ("current", "0.26.1", False),  # used less torch's reserved
    ("v1", "0.7.0", True), ("v1", "0.8.5", True), ("v1", "0.9.0", True),  # V1: used less allocated
    ("current", "0.27.0", True), ("current", "0.33.0", True), ("current", "current", True),  # total_consumed
])
def test_the_releases_that_count_the_segments(rel_key: str, version: str, counted: bool) -> None:
    assert counts_segments(rel_key, version) is counted


def _check(stem: str):  # type: ignore[no-untyped-def]
    meta = json.loads((LOGS / f"{stem}.json").read_text())["kvbudget"]
    gib = meta.get("gpu_memory_gib")
    text = (LOGS / f"{stem}.log").read_text()
    result = check_log(text, model=meta["model"], gpu=meta.get("gpu"), gpu_memory=round(gib * GiB) if gib else None,
                       version=meta.get("version"), flags=meta.get("flags"))
    return text, result.plan


@pytest.mark.parametrize(("stem", "tp", "dtype"), [
    ("v0.6.3.post1_rtx-a5000-x4_qwen2.5-32b_tp4_no-custom-ar", 4, "bf16"),  # 15.3916 GB: 129 MiB in the blocks
    ("v0.10.1.1_a100-80gb_qwen2-7b_len16384_gmu0.5", 1, "bf16"),  # 14.25 GiB: 57 MiB in the blocks (by hand above)
    ("v0.10.1.1_a100-80gb-x2_qwen2-7b_tp2_gmu0.5", 2, "bf16"),  # 7.1217 GiB
    ("v0.7.2_a100-40gb-x2_qwen2.5-14b_tp2_fp16", 2, "fp16"),  # 13.9281 GB
    ("v0.10.0_h100x4_qwen3-32b_tp4_yarn4_len131072_gmu0.95", 4, "bf16"),  # 15.41 GiB
])
def test_model_loading_took_counts_the_blocks(stem: str, tp: int, dtype: str) -> None:
    # vLLM's "Model loading took" (up to 0.6: "Loading model weights took") is torch's allocated bytes, which count
    # each block as the allocator cut it: with the blocks the prediction is the logged figure to 0.02 GiB, without
    # them it is further off than that
    text, plan = _check(stem)
    logged = float(re.search(r"(?:Model loading|Loading model weights) took ([\d.]+) G", text)[1])  # type: ignore[index]
    inside = segment_bytes(load_model(plan.model), WeightFormat(dtype, dense_dtype=dtype), tp, dtype)[0]
    assert abs(plan.model_loading_bytes / GiB - logged) <= 0.02, (plan.model_loading_bytes / GiB, logged)
    assert abs((plan.model_loading_bytes - inside) / GiB - logged) > 0.02


# Every corpus log that prints 0.27's breakdown: logged "consumed memory (weights + non-torch)" and the prediction's
# model loading + non-torch memory. Starts that load their compiled graph, or compile on an A100, are within 0.03 GiB;
# the 0.26.1 dev build (planned as 0.26, its 0.02 GiB of segments uncounted) 0.07 above;
# eager starts 0.10 GiB below it (the calibrated non-torch figure comes from a compiled start); the cold
# torch.compile starts of 0.29.0 on the V2 runner within 0.03-0.24 GiB once their random embedding table, pinned past
# the profiling run, is counted (compile_cache.pinned_copy_bytes; without it 0.35-1.1 GiB above).
CONSUMED = [
    ("v0.30.0-xinference_rtx5060ti-wsl_qwen3-4b-2507-ft_len8192_gmu0.7", -0.03, 0.03),  # graph loaded from cache
    ("v0.31.0_a100-40gb_qwen2.5-coder-1.5b_fp16_len16384", -0.035, 0.035),  # +0.030: 147 MiB are the allocator's
    ("v0.26.1dev_a100-80gb_qwen3-coder-30b-a3b_len131072_mns16", -0.03, 0.1),  # dev build: counted as 0.26
    ("v0.29.0_rtx4090-48gb_qwen3-8b_ngram4_len4096_gmu0.75_eager", -0.12, -0.08),
    ("v0.29.0_rtx4090-48gb_qwen3-8b-awq_len4096_gmu0.75_eager", -0.12, -0.08),
    ("v0.29.0_rtx5090_qwen2.5-0.5b_bf16_len8192_gmu0.9", 0.08, 0.13),
    ("v0.29.0_rtx5060ti-wsl_qwen3-4b-2507-ft_len8192_gmu0.7", -0.05, 0.0),
    ("v0.29.0_rtx5090_qwen2.5-7b_bf16_len8192_gmu0.9", 0.05, 0.1),
    ("v0.29.0_rtx5090_qwen2.5-7b_fp8-online_len8192_gmu0.9", 0.2, 0.28),  # online fp8's own segments unmodelled
]


@pytest.mark.parametrize(("stem", "low", "high"), CONSUMED)
def test_consumed_memory_against_the_logs(stem: str, low: float, high: float) -> None:
    text, plan = _check(stem)
    consumed = float(re.search(r"Actual usage is ([\d.]+) GiB for consumed memory", text)[1])  # type: ignore[index]
    # the 0.30.0 log prints no load line: the same model's weights as the 0.29.0 run on the same card
    predicted = (plan.model_loading_bytes + plan.non_torch_bytes) / GiB
    assert low <= consumed - predicted <= high, (consumed, predicted)
