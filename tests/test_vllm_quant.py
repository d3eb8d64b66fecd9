"""vLLM's --quantization words, and the plain AWQ/GPTQ kernels' dequantized copy in the profiling peak
(engines/vllm/quant.py; the release boundaries read from the vLLM wheels named there)."""

from __future__ import annotations

import pytest

import kvbudget
from kvbudget.cli import main
from kvbudget.engines.vllm.launch import vllm_quantization
from kvbudget.engines.vllm.policy import plan, weight_format
from kvbudget.engines.vllm.quant import format_name, int4_kernel, largest_linear
from kvbudget.engines.vllm.settings import VllmSettings, version_minor
from kvbudget.model.weights import WeightFormat
from kvbudget.units import InputError

QWEN14 = "Qwen/Qwen2.5-14B-Instruct"  # hidden 5120, intermediate 13824, 40 heads, 8 KV heads x 128
LLAMA8 = "meta-llama/Llama-3.1-8B-Instruct"  # hidden 4096, intermediate 14336
QWEN_MOE = "Qwen/Qwen3-30B-A3B"  # hidden 2048, 32 heads, 4 KV heads x 128, every MLP an MoE
AWQ = WeightFormat("awq", bits=4, dense_dtype="fp16")


def _plan(model: str, gpu: str, **settings: object) -> kvbudget.engines.vllm.VllmPlan:  # type: ignore[name-defined]
    return plan(kvbudget.load_model(model), kvbudget.find_gpu(gpu), VllmSettings(**settings))  # type: ignore[arg-type]


def test_the_largest_linear_is_the_merged_gate_up_or_qkv_by_hand() -> None:
    qwen = kvbudget.load_model(QWEN14)
    assert largest_linear(qwen, AWQ, 1) == 2 * 13824 * 5120  # gate_up_proj: MergedColumnParallelLinear
    assert largest_linear(qwen, AWQ, 2) == 13824 * 5120  # split over 2 ranks
    llama = kvbudget.load_model(LLAMA8)
    assert largest_linear(llama, AWQ, 1) == 2 * 14336 * 4096
    # an MoE model's routed experts run the MoE kernel: its largest plain linear is qkv, (32 + 2 x 4) x 128 x 2048
    moe = kvbudget.load_model(QWEN_MOE)
    assert largest_linear(moe, AWQ, 1) == (32 + 2 * 4) * 128 * 2048


def test_explicit_awq_forces_the_plain_kernel_up_to_0_23() -> None:
    gpu = kvbudget.find_gpu("L40S")  # compute capability 8.9: Marlin runs
    assert int4_kernel(AWQ, "awq", gpu, "0.13.0") == "awq"
    assert int4_kernel(AWQ, "awq", gpu, "0.23.0") == "awq"
    assert int4_kernel(AWQ, "awq", gpu, "0.24.0") == "marlin"  # auto_awq from 0.24 takes Marlin for it
    assert int4_kernel(AWQ, "awq", gpu, "current") == "marlin"
    assert int4_kernel(AWQ, "awq_marlin", gpu, "0.13.0") == "marlin"
    assert int4_kernel(AWQ, None, gpu, "0.13.0") == "marlin"
    gptq = WeightFormat("gptq", bits=4, dense_dtype="fp16")
    assert int4_kernel(gptq, "gptq", gpu, "0.21.0") == "gptq"
    assert int4_kernel(gptq, "gptq", gpu, "0.22.0") == "marlin"  # auto_gptq from 0.22


def test_marlin_needs_compute_capability_8_0_up_to_0_13_then_7_5() -> None:
    t4 = kvbudget.find_gpu("T4")  # 7.5
    assert int4_kernel(AWQ, "auto_awq", t4, "0.13.0") == "awq"
    assert int4_kernel(AWQ, "auto_awq", t4, "0.14.0") == "marlin"
    assert int4_kernel(AWQ, "auto_awq", kvbudget.find_gpu("V100-SXM2-16GB"), "current") == "awq"  # 7.0
    assert int4_kernel(AWQ, "auto_awq", kvbudget.find_gpu("MI300X"), "current") == "awq"  # ROCm: no Marlin
    assert int4_kernel(WeightFormat("awq", bits=3), "auto_awq", t4, "current") == "awq"  # 3-bit: no Marlin


def test_the_dequantized_copy_is_in_the_profiling_peak() -> None:
    # a forward-bound run (8 sequences: the sampler's sort is 8 x 152,064 x 50 B, below the forward): the copy is
    # held through the forward, so it is in the peak
    flags = dict(max_model_len=8192, dtype="half", version="0.13.0", max_num_seqs=8)
    forced = _plan(QWEN14, "L40S", quantization="awq", **flags)
    marlin = _plan(QWEN14, "L40S", quantization="awq_marlin", **flags)
    copy = 2 * (2 * 13824 * 5120)  # the gate_up weight in fp16
    assert forced.activation_bytes - marlin.activation_bytes == copy
    assert any("forces vLLM's plain AWQ kernel" in n and "0.26 GiB" in n for n in forced.notes)
    assert not any("plain" in n for n in marlin.notes)
    # the plain AWQ kernel dequantizes only for 256 tokens or more; GPTQ's temp_dq is made on every call
    small = dict(flags, max_num_batched_tokens=128)
    assert (_plan(QWEN14, "L40S", quantization="awq", **small).activation_bytes
            == _plan(QWEN14, "L40S", quantization="awq_marlin", **small).activation_bytes)
    # 0.21 charges the profiling run as its source allocates it (the copy held through the forward's widest point,
    # 2 x hidden + 3 x intermediate a token; without it the V1 runner's sampler passes, 14 B over 8 x 152,064
    # entries, with the forward's output and the sampled rows, bind), here with the compiled graph loaded from the
    # cache: a fresh compile's benchmark copy of the 152,064 x 5,120 fp16 embedding table (1.45 GiB) would bind
    gptq = dict(small, version="0.21.0", compile_cache="warm")
    assert _plan(QWEN14, "L40S", quantization="gptq", **dict(gptq, compile_cache="cold")).activation_bytes == (
        152064 * 5120 * 2)
    assert (_plan(QWEN14, "L40S", quantization="gptq", **gptq).activation_bytes
            == (2 * 5120 + 3 * 13824) * 128 * 2 + copy)
    assert (_plan(QWEN14, "L40S", quantization="gptq_marlin", **gptq).activation_bytes
            == (128 + 8) * 5120 * 2 + 14 * 8 * 152064)


def test_the_published_a5000_run_that_forced_awq() -> None:
    # vllm.log of kumaxxp/duo-talk (tests/data/vllm_logs/v0.13.0_rtx-a5000_qwen2.5-14b-awq_len8192): 0.13.0,
    # "--quantization awq", "... you specified quantization=awq explicitly, so forcing awq"; "Available KV cache
    # memory: 10.39 GiB". The plain kernel's 16-bit copy is held through the forward only; the profiling run's peak
    # is its sampler here (256 requests x 152,064 entries x 38 B of PyTorch's sort, 1.38 GiB: 0.13 samples natively
    # unless VLLM_USE_FLASHINFER_SAMPLER=1), above the forward with the copy, so forcing awq costs no KV memory.
    from kvbudget.engines.vllm.calibration import ACTIVATION, activation_peak
    from kvbudget.units import GiB

    base = dict(max_model_len=8192, dtype="half", version="0.13.0", gpu_memory_utilization=0.9)
    spec = kvbudget.load_model(QWEN14)
    from kvbudget.hardware import custom_gpu

    gpu = custom_gpu(int(23.58 * GiB))
    forced = plan(spec, gpu, VllmSettings(quantization="awq", **base))  # type: ignore[arg-type]
    marlin = plan(spec, gpu, VllmSettings(quantization="awq_marlin", **base))  # type: ignore[arg-type]
    assert forced.activation_bytes == marlin.activation_bytes == 2048 * 5120 * 2 + 256 * 152064 * 38
    with_copy = activation_peak(spec, 2048, 1, 1, "fp16", False, ACTIVATION["v1"], "native", 0, "0.13.0", 1 << 28)
    assert with_copy == (2048 * (2 * 5120 + 3 * 13824)) * 2 + (1 << 28)  # not the last stage: the forward and the copy
    logged = 10.39 * GiB
    assert abs(forced.available_kv_cache_bytes - logged) / logged < 0.01


@pytest.mark.parametrize(("word", "name", "scales"), [
    ("awq_marlin", "awq", "per_tensor"), ("auto_awq", "awq", "per_tensor"), ("gptq_marlin", "gptq", "per_tensor"),
    ("marlin", "gptq", "per_tensor"), ("ptpc_fp8", "fp8", "per_channel"), ("fbgemm_fp8", "fp8", "per_channel"),
    ("fp8_per_block", "fp8", "block"), ("modelopt_fp4", "nvfp4", "per_tensor"), ("bitsandbytes", "nf4", "per_tensor"),
])
def test_vllm_method_names_load_their_format(word: str, name: str, scales: str) -> None:
    fmt = weight_format(kvbudget.load_model(LLAMA8), VllmSettings(quantization=word))
    assert (fmt.name, fmt.fp8_scales) == (name, scales)
    assert format_name(word) == name


def test_experts_int8_quantizes_the_experts_only() -> None:
    moe = kvbudget.load_model(QWEN_MOE)
    fmt = weight_format(moe, VllmSettings(quantization="experts_int8"))
    assert fmt.name == "int8" and "attention" in fmt.skip_roles and "experts" not in fmt.skip_roles
    bf16 = _plan(QWEN_MOE, "H100", max_model_len=4096).weights_bytes
    experts = _plan(QWEN_MOE, "H100", max_model_len=4096, quantization="experts_int8").weights_bytes
    every = _plan(QWEN_MOE, "H100", max_model_len=4096, quantization="int8").weights_bytes
    assert every < experts < bf16
    with pytest.raises(InputError, match="quantizes MoE experts"):
        weight_format(kvbudget.load_model(LLAMA8), VllmSettings(quantization="experts_int8"))


@pytest.mark.parametrize(("word", "message"), [
    ("compressed-tensors", "reads the scheme from the checkpoint's quantization_config"),
    ("gguf", "serves a .gguf file"),
    ("quark", "reads the scheme from the checkpoint's quantization_config"),
    ("awq-marlinn", "is not a vLLM method kvbudget prices"),
])
def test_words_that_need_a_checkpoint_or_are_unknown_are_refused(word: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        weight_format(kvbudget.load_model(LLAMA8), VllmSettings(quantization=word))


def test_a_checkpoint_keeps_its_format_and_refuses_another_family() -> None:
    fp8 = kvbudget.load_model("Qwen/Qwen3-235B-A22B-FP8")
    own = weight_format(fp8, VllmSettings())
    assert weight_format(fp8, VllmSettings(quantization="fp8")) == own  # block scales and skipped modules kept
    assert weight_format(fp8, VllmSettings(quantization="compressed-tensors")) == own
    with pytest.raises(InputError, match="does not match the quantization method"):
        weight_format(fp8, VllmSettings(quantization="awq"))


def test_cli_refuses_a_mismatched_quantization_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["explain", "--gpu", "H100", "--", "vllm", "serve", "Qwen/Qwen3-235B-A22B-FP8", "--tensor-parallel-size", "8",
                 "--quantization", "gptq"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "drop --quantization" in err


def test_launch_commands_name_marlin_not_the_plain_kernel() -> None:
    assert vllm_quantization("awq") == "awq_marlin"
    assert vllm_quantization("auto_gptq") == "gptq_marlin"
    assert vllm_quantization("fp8") == "fp8"
    assert vllm_quantization("nf4") == "bitsandbytes"
    assert vllm_quantization("ptpc_fp8") == "ptpc_fp8"  # vLLM's own word, as given
    assert vllm_quantization(None) is None


def test_the_awq_lever_is_a_checkpoint_vllm_runs_on_marlin() -> None:
    from kvbudget.engines.vllm.levers import levers

    spec, gpu = kvbudget.load_model(QWEN14), kvbudget.find_gpu("L40S")
    # 8 sequences: a forward-bound profiling run, where the plain kernel's copy costs KV memory
    _, rows = levers(spec, gpu, VllmSettings(max_model_len=8192, version="0.13.0", max_num_seqs=8))
    lever = next(x for x in rows if x.name == "4-bit weights (AWQ)")
    marlin = _plan(QWEN14, "L40S", max_model_len=8192, version="0.13.0", quantization="awq_marlin", max_num_seqs=8)
    forced = _plan(QWEN14, "L40S", max_model_len=8192, version="0.13.0", quantization="awq", max_num_seqs=8)
    assert lever.kv_cache_bytes == marlin.available_kv_cache_bytes > forced.available_kv_cache_bytes


def test_version_minor() -> None:
    assert [version_minor(v) for v in ("0.13.0", "v0.8.5.post1", "0.24", "current", "v1", "1.0.0", "")] == [
        13, 8, 24, None, None, None, None]


@pytest.mark.parametrize(("word", "name"), [("awq_marlin", "awq"), ("gptq_marlin", "gptq"), ("w8a8_fp8", "fp8"),
                                            ("w8a8_int8", "int8"), ("moe_wna16", "awq"), ("modelopt_fp8", "fp8")])
def test_sglang_reads_the_engines_method_names_too(capsys: pytest.CaptureFixture[str], word: str, name: str) -> None:
    # SGLang's QUANTIZATION_CHOICES (sglang/srt/arg_groups/choices.py, 0.5.23) share these words with vLLM
    from kvbudget.model.weights import parse_weight_format

    assert parse_weight_format(word).name == name
    code = main(["explain", "--gpu", "L40S", "--", "python", "-m", "sglang.launch_server", "--model-path", QWEN14,
                 "--quantization", word])
    assert code == 0, capsys.readouterr().err


def test_no_bfloat16_below_compute_capability_8(capsys: pytest.CaptureFixture[str]) -> None:
    # platforms/cuda.py (0.33.0): supported_dtypes has no bfloat16 below 8.0; "auto" falls back to float16
    # (config/model.py _resolve_auto_dtype) and an explicit bfloat16 stops the worker (check_if_supports_dtype)
    p = _plan("Qwen/Qwen2.5-7B-Instruct", "T4", max_model_len=4096)
    assert p.kv_cache_dtype == "fp16" and any("falls back to float16" in n for n in p.notes)
    assert _plan("Qwen/Qwen2.5-7B-Instruct", "L4", max_model_len=4096).kv_cache_dtype == "bf16"
    code = main(["explain", "--gpu", "V100-SXM2-16GB", "--", "vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--dtype", "bfloat16"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "--dtype half" in err
