"""The V1 engine's alpha in vLLM 0.7 (VLLM_USE_V1=1; V0 stays the default there, envs.py of 0.7.0-0.7.3), read from
the 0.7.0-0.7.3 wheels:
- engine/arg_utils.py: max_num_seqs 1024 with V1 (256 for V0); _override_v1_engine_args: max_num_batched_tokens 8,192
  for the API server (16,384 for the LLM class) when "h100" or "h200" is in the device name, else 2,048 (8,192);
- v1/worker/gpu_model_runner.py profile_run: the dummy forward of max_num_batched_tokens, then compute_logits in the
  model dtype over every token (0.7.0-0.7.2) or the last token of each dummy request (0.7.3), and no sampler;
- v1/worker/gpu_worker.py determine_available_memory: total minus free memory after the run, less torch's current
  allocation, counted on top of torch's peak (the CUDA context included);
- v1/core/kv_cache_utils.py: "# GPU blocks: N" and (0.7.1 on) "Maximum concurrency for L tokens per request:
  N x block_size / L".
The published run (vLLM PR 12569: Llama-3.1-70B W8A8 on one 80 GB GPU at utilization 0.98) logged 1,381 blocks."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvbudget.engines.vllm import VllmSettings, plan
from kvbudget.engines.vllm.calibration import FIT_LOG_SEGMENTS_BYTES, NON_TORCH_0_6_4_BYTES
from kvbudget.engines.vllm.check import check_log
from kvbudget.engines.vllm.command import parse_vllm_command
from kvbudget.engines.vllm.log import parse_vllm_log
from kvbudget.hardware import find_gpu
from kvbudget.model.resolve import load_model

LOG = Path(__file__).parent / "data" / "vllm_logs" / "v1-alpha-0.7_80gb_llama3.1-70b-w8a8_len2048_gmu0.98.log"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"  # hidden 4096, intermediate 14336, vocabulary 128256, bf16


def _alpha(version: str, gpu: str = "H100", extra: str = ""):  # type: ignore[no-untyped-def]
    cmd = parse_vllm_command(f"VLLM_USE_V1=1 vllm serve {MODEL} --max-model-len 2048 {extra}",
                             VllmSettings(version=version))
    return cmd, plan(load_model(MODEL), find_gpu(gpu), cmd.settings)


@pytest.mark.parametrize(("gpu", "tokens"), [("H100", 8192), ("H200", 8192), ("A100-80GB", 2048), ("L40S", 2048)])
def test_batch_defaults_by_device_name(gpu: str, tokens: int) -> None:
    cmd, p = _alpha("0.7.2", gpu)
    assert cmd.settings.use_v1 is True and not cmd.warnings
    assert p.release == "v1" and "0.7 V1 engine" in p.version_line
    assert (p.max_num_batched_tokens, p.max_num_seqs) == (tokens, 1024)


def test_profiling_run_is_the_forward_or_the_logits_of_every_token_up_to_0_7_2() -> None:
    _, p = _alpha("0.7.2")
    tokens, hidden, inter, vocab = 8192, 4096, 14336, 128256
    forward = tokens * (2 * hidden + 3 * inter) * 2  # residual + normed input, gate/up + activation (bf16)
    logits = tokens * hidden * 2 + tokens * vocab * 2  # the forward's output kept, logits of all 8,192 tokens
    assert logits > forward
    assert p.activation_bytes == max(forward, logits)
    # the CUDA context counted, as 0.6.4 and 0.8.0-0.9.0, with the allocator segments beside Llama-3.1-8B's
    # weights (engines/vllm/allocations.py: the 0.7 V1 worker reads mem_get_info's used bytes)
    assert p.non_torch_bytes == NON_TORCH_0_6_4_BYTES + FIT_LOG_SEGMENTS_BYTES
    assert p.log_lines[1:] == (f"# GPU blocks: {p.num_gpu_blocks}",
                               f"Maximum concurrency for 2048 tokens per request: {p.num_gpu_blocks * 16 / 2048:.2f}x")


def test_0_7_3_takes_one_logits_row_per_dummy_request() -> None:
    _, p = _alpha("0.7.3")
    tokens, hidden, inter, vocab, reqs = 8192, 4096, 14336, 128256, 1024
    forward = tokens * (2 * hidden + 3 * inter) * 2
    logits = tokens * hidden * 2 + reqs * vocab * 2
    assert forward > logits and p.activation_bytes == forward


def test_other_releases_read_the_variable_as_they_do() -> None:
    cmd, p = _alpha("0.6.6")
    assert cmd.settings.use_v1 is None and p.release == "v0"
    assert cmd.warnings and "0.6 has no V1 engine kvbudget models" in cmd.warnings[0]
    cmd, p = _alpha("0.10.1")
    assert not cmd.warnings and p.release == "v1" and "0.8-0.20" in p.version_line
    plain = plan(load_model(MODEL), find_gpu("H100"), VllmSettings(version="0.7.2", max_model_len=2048))
    assert plain.release == "v0" and plain.max_num_seqs == 256


def test_a_log_command_with_digits_in_its_variables_and_an_ellipsis_line_after_it() -> None:
    log = parse_vllm_log(LOG.read_text())
    assert log.command == ("VLLM_USE_V1=1 vllm serve neuralmagic/Meta-Llama-3.1-70B-Instruct-quantized.w8a8 "
                           "--max-model-len 2048 --gpu-memory-utilization 0.98")


def test_the_published_alpha_run_is_checked_as_the_alpha() -> None:
    result = check_log(LOG.read_text(), model="meta-llama/Llama-3.1-70B-Instruct", gpu="H100-SXM-80GB",
                       flags=["--quantization", "fp8"])  # one byte a weight, the W8A8 checkpoint's stand-in
    assert result.settings.use_v1 is True and result.settings.gpu_memory_utilization == 0.98
    assert "0.7 V1 engine" in result.plan.version_line
    blocks = next(r for r in result.rows if r.figure == "GPU blocks")
    # 1,381 logged; about 0.7 GiB of the run's non-KV memory (a fresh torch.compile) is not modelled: +10.6%
    assert blocks.reported == 1381 and 0.08 < blocks.predicted / 1381 - 1 < 0.13
