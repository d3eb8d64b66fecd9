"""The profiling run's sampler and fused-MoE workspace in vLLM's non-KV memory (issue #11), checked against
hand computations from vLLM's source (v1/sample/ops/topk_topp_sampler.py, v1/sample/sampler.py,
model_executor/layers/fused_moe/fused_moe.py, 0.10.1) and the real start-up logs of tests/data/vllm_logs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import kvbudget
from kvbudget.engines.vllm import VllmSettings, plan
from kvbudget.engines.vllm.calibration import (
    ACTIVATION,
    PROFILING_RUN_CURRENT,
    moe_workspace_elements,
    sampler_bytes,
)
from kvbudget.engines.vllm.check import check_log
from kvbudget.engines.vllm.command import parse_vllm_command
from kvbudget.engines.vllm.log import parse_vllm_log
from kvbudget.units import GiB, InputError

LOGS = Path(__file__).parent / "data" / "vllm_logs"
QWEN_MOE = "Qwen/Qwen3-30B-A3B"
VOCAB = 151936  # Qwen3's vocab_size
RTX3090 = dict(version="0.10.0", quantization="awq_marlin", max_model_len=2048, gpu_memory_utilization=0.8)


def _plan(model: str, gpu: str, **settings: object) -> kvbudget.engines.vllm.VllmPlan:  # type: ignore[name-defined]
    return plan(kvbudget.load_model(model), kvbudget.find_gpu(gpu), VllmSettings(**settings))  # type: ignore[arg-type]


def test_bytes_per_vocabulary_entry_from_the_source() -> None:
    from kvbudget.engines.vllm.calibration import sort_bytes

    v1 = ACTIVATION["v1"]
    # torch.sort on CUDA (SortStable.cu): fp32 values (4) + int64 indices (8) out, and around CUB's non-overwriting
    # sort: >= 128 rows or one row, int64 starting indices (8) + CUB's third key (4) and value (8) buffers
    assert sort_bytes(256) == sort_bytes(128) == sort_bytes(1) == 4 + 8 + 8 + 4 + 8 == 32
    # 2-127 rows (segmented_sort_pairs_by_full_sort): two int2 arrays (8 + 8), the sorted keys (4), CUB's third
    # key (4) and int2 value (8) buffers
    assert sort_bytes(127) == sort_bytes(2) == 4 + 8 + 8 + 8 + 4 + 4 + 8 == 44
    # the sort is the native path's peak: bf16 logits (2) + fp32 copy (4) + the sort; the masks, softmax and
    # scatter after it hold 2 + 4 + 4 + 8 + 1 + 4 + 1 + 4 = 28, less
    assert sampler_bytes(v1, "native", "bf16", 256, "0.10.2") == 2 + 4 + 32 == 38
    assert sampler_bytes(v1, "native", "bf16", 64, "0.10.2") == 2 + 4 + 44 == 50
    # bf16 logits + fp32 copy + FlashInfer's top-k-masked logits and their softmax
    assert sampler_bytes(v1, "flashinfer", "bf16", 256, "0.10.2") == 2 + 4 + 4 + 4 == 14
    # an fp32 model's logits are already fp32: no copy
    assert sampler_bytes(v1, "native", "fp32", 256, "0.10.2") == 4 + 32
    # 0.17-0.20 mask in place with a Triton kernel from 8 requests (topk_topp_sampler.py apply_top_k_top_p):
    # the softmax and the exponential noise, like FlashInfer's path; below 8 they still sort
    assert sampler_bytes(v1, "native", "bf16", 256, "0.17.1") == 14
    assert sampler_bytes(v1, "native", "bf16", 4, "0.17.1") == 2 + 4 + 44
    # the current line has no fitted figure left: its model is the source's (PROFILING_RUN_CURRENT, 2 x hidden +
    # 3 x intermediate, the larger of forward and sampler); 5.65 B an entry was the one-log fit it replaced
    assert ACTIVATION["current"] == PROFILING_RUN_CURRENT and ACTIVATION["current"].logits is None
    # V0's sampler (model_executor/layers/sampler.py, 0.8.5) converts to fp32 and sorts the same way
    assert sampler_bytes(ACTIVATION["v0"], "native", "fp16", 192) == 2 + 4 + 32


def test_current_line_sampler_by_model_runner_and_release() -> None:
    # vLLM 0.21-0.33, read per release. The V1 runner's _dummy_sampler_run (gpu_model_runner.py) calls the sampler
    # twice, the second time with a torch.Generator, and TopKTopPSampler.forward_cuda falls back to forward_native
    # for per-request generators: the native path whatever the first pass took. forward_native: bf16 logits (2),
    # the fp32 copy (4; temperature in place), apply_top_k_top_p_triton in place, the softmax (4), random_sample's
    # exponential noise (4, divided in place)
    src = PROFILING_RUN_CURRENT
    for version in ("0.21.0", "0.29.0", "0.30.0", "0.33.0"):
        for path in ("flashinfer", "native"):
            assert sampler_bytes(src, path, "bf16", 256, version, "v1", "current") == 2 + 4 + 4 + 4 == 14
    assert sampler_bytes(src, "native", "fp32", 256, "0.33.0", "v1", "current") == 4 + 4 + 4  # no copy
    # below 8 requests 0.21-0.29 sort (apply_top_k_top_p: ``HAS_TRITON and logits.shape[0] >= 8``); 0.30 on always
    # take the Triton kernel
    assert sampler_bytes(src, "flashinfer", "bf16", 4, "0.29.0", "v1", "current") == 2 + 4 + 44
    assert sampler_bytes(src, "flashinfer", "bf16", 4, "0.30.0", "v1", "current") == 14
    # The V2 runner (gpu/model_runner.py _dummy_sampler_run): the dummy batch has no sampling parameters, so
    # gpu/sample/sampler.py keeps the logits in the model dtype (no logits processing, no top-k/top-p; gumbel_sample
    # keeps per-block partials only)
    for version in ("0.22.0", "0.29.0", "0.32.0"):
        assert sampler_bytes(src, "flashinfer", "bf16", 256, version, "v2", "current") == 2
    assert sampler_bytes(src, "native", "fp32", 256, "0.31.0", "v2", "current") == 4
    # 0.33.0 adds a pass with SamplingParams.for_sampler_warmup(): apply_sampling_params' fp32 copy, then FlashInfer's
    # top-k-masked logits and their softmax; without FlashInfer the Triton kernel masks in place (the copy alone)
    assert sampler_bytes(src, "flashinfer", "bf16", 256, "0.33.0", "v2", "current") == 2 + 4 + 4 + 4
    assert sampler_bytes(src, "native", "bf16", 256, "0.33.0", "v2", "current") == 2 + 4
    assert sampler_bytes(src, "flashinfer", "bf16", 256, None, "v2", "current") == 14  # no release: the newest read


def _breakdown(name: str) -> tuple[float, float]:
    """(peak activation, CUDA-graph estimate) in GiB as a 0.27+ log prints them: 'Y GiB for peak activation' (0.27
    on: torch's transient peak plus the estimate, v1/worker/gpu_worker.py determine_available_memory) and the
    utilization the estimate is equivalent to, times the device's total."""
    text = (LOGS / f"{name}.log").read_text()
    peak = float(re.search(r"([0-9.]+) GiB for peak activation", text).group(1))  # type: ignore[union-attr]
    util = re.search(r"utilization=([0-9.]+) is equivalent to --gpu-memory-utilization=([0-9.]+)", text)
    total = float(re.search(r"Free memory on device \([0-9.]+/([0-9.]+) GiB", text).group(1))  # type: ignore[union-attr]
    assert util is not None
    return peak, (float(util.group(1)) - float(util.group(2))) * total


def test_current_line_profiling_run_against_the_printed_breakdowns() -> None:
    # Qwen3-4B-Instruct-2507 (hidden 2560, intermediate 9728, vocab 151,936) on an RTX 5060 Ti, 2,048 tokens and
    # 256 requests, the V2 model runner. The 0.30.0 start loads its compiled graph ("(compilation: 0.54 s)"; the same
    # host's 0.29.0 start compiled for 27.73 s):
    # its transient peak, 0.53 GiB less the 0.38 GiB graph estimate, is the source's profiling run: the forward's
    # widest point, (2 x 2560 + 3 x 9728) x 2,048 x 2 B = 0.131 GiB, against the held output, the sampled rows and
    # the bf16 logits, (2048 + 256) x 2560 x 2 + 256 x 151,936 x 2 = 0.083 GiB
    settings = dict(version="0.30.0", max_model_len=8192, gpu_memory_utilization=0.7, block_size=16)
    warm = _plan("Qwen/Qwen3-4B-Instruct-2507", "RTX-5060-Ti-16GB", compile_cache="warm", **settings)
    src = dict(warm.provenance)["activation_bytes"].band
    forward = (2 * 2560 + 3 * 9728) * 2048 * 2
    assert max(forward, (2048 + 256) * 2560 * 2 + 256 * VOCAB * 2) == forward
    assert f"{forward / GiB:.2f} GiB allocated in the profiling run" in src and "V2 model runner" in src
    peak, graphs = _breakdown("v0.30.0-xinference_rtx5060ti-wsl_qwen3-4b-2507-ft_len8192_gmu0.7")
    assert peak - graphs == pytest.approx(forward / GiB, abs=0.025)  # 0.152 logged, 0.131 from the source
    text = (LOGS / "v0.30.0-xinference_rtx5060ti-wsl_qwen3-4b-2507-ft_len8192_gmu0.7.log").read_text()
    assert "(compilation: 0.54 s)" in text and ("compile_cache", "warm") in parse_vllm_log(text).settings
    assert warm.activation_bytes == forward  # the log shows a load from the cache: no compile-time benchmark
    # The starts that compiled afresh ("Compiling a graph for ...", torch.compile 7-28 s) hold what Inductor's
    # benchmark of the embedding lookup allocates before the forward runs: a random copy of the embedding table,
    # vocabulary x hidden x 2 B (compile_cache.py), no constant fitted. Logged transient peak against it (GiB):
    # 0.71 / 0.72, 1.01 / 1.02, 1.02 / 1.02 (FP8 weights, a bf16 embedding), 0.43 / 0.43 and, the one it
    # overstates, 0.22 / 0.25 for Qwen2.5-0.5B; the source's forward and sampler hold 0.08-0.24 there
    for name, model, version, gpu, hidden, vocab, logged in (
            ("v0.29.0_rtx5060ti-wsl_qwen3-4b-2507-ft_len8192_gmu0.7", "Qwen/Qwen3-4B-Instruct-2507", "0.29.0",
             "RTX-5060-Ti-16GB", 2560, VOCAB, 0.71),
            ("v0.29.0_rtx5090_qwen2.5-7b_bf16_len8192_gmu0.9", "Qwen/Qwen2.5-7B-Instruct", "0.29.0", "RTX-5090",
             3584, 152064, 1.01),
            ("v0.29.0_rtx5090_qwen2.5-7b_fp8-online_len8192_gmu0.9", "Qwen/Qwen2.5-7B-Instruct", "0.29.0",
             "RTX-5090", 3584, 152064, 1.02),
            ("v0.31.0_a100-40gb_qwen2.5-coder-1.5b_fp16_len16384", "Qwen/Qwen2.5-1.5B-Instruct", "0.31.0",
             "A100-40GB", 1536, 151936, 0.43),
            ("v0.29.0_rtx5090_qwen2.5-0.5b_bf16_len8192_gmu0.9", "Qwen/Qwen2.5-0.5B-Instruct", "0.29.0", "RTX-5090",
             896, 151936, 0.22)):
        dims = kvbudget.load_model(model).dims  # the figures above are the configs'
        assert (dims.hidden_size, dims.vocab_size) == (hidden, vocab)
        peak, graphs = _breakdown(name)
        assert round(peak - graphs, 2) == logged, name
        text = (LOGS / f"{name}.log").read_text()
        assert parse_vllm_log(text).settings[-1] == ("compile_cache", "cold")
        cold = _plan(model, gpu, version=version, max_model_len=8192)
        assert cold.activation_bytes == vocab * hidden * 2, name  # larger than the source's figure
        assert cold.activation_bytes > _plan(model, gpu, version=version, max_model_len=8192,
                                             compile_cache="warm").activation_bytes
        assert abs(cold.activation_bytes / GiB - (peak - graphs)) < (0.036 if "0.5b" in name else 0.015), name


def test_the_native_sort_costs_the_difference_in_kv_memory() -> None:
    fast = _plan(QWEN_MOE, "RTX-3090", sampler="flashinfer", **RTX3090)
    slow = _plan(QWEN_MOE, "RTX-3090", sampler="native", **RTX3090)
    # the sampler outweighs the forward either way (the peak is the larger): 256 requests (max_num_seqs below
    # 70 GiB) x 151,936 entries x (38 - 14) bytes
    diff = 256 * VOCAB * (38 - 14)
    assert slow.activation_bytes - fast.activation_bytes == diff
    assert fast.available_kv_cache_bytes - slow.available_kv_cache_bytes == diff
    assert round(diff / GiB, 2) == 0.87


def test_the_default_path_and_the_note_on_releases_of_optional_flashinfer() -> None:
    # before 0.12 a plain pip install has no flashinfer: the sort is the default, and the note prices FlashInfer's path
    default = _plan(QWEN_MOE, "RTX-3090", **RTX3090)
    assert default.activation_bytes == _plan(QWEN_MOE, "RTX-3090", sampler="native", **RTX3090).activation_bytes
    (note,) = [n for n in default.notes if n.startswith("sampler:")]
    assert "0.87 GiB more" in note and "Using FlashInfer for top-p & top-k sampling" in note
    # told FlashInfer, the note prices the sort instead
    (note,) = [n for n in _plan(QWEN_MOE, "RTX-3090", **{**RTX3090, "version": "0.11.0"}).notes
               if n.startswith("sampler:")]
    assert "PyTorch's sort" in note
    for other in ({"version": "0.12.0"}, {"sampler": "flashinfer"}, {"sampler": "native"}, {"version": "current"}):
        settings = {**RTX3090, **other}
        assert not [n for n in _plan(QWEN_MOE, "RTX-3090", **settings).notes if n.startswith("sampler:")], other
    # 0.12-0.20 ship flashinfer but sample with it only on VLLM_USE_FLASHINFER_SAMPLER=1 (topk_topp_sampler.py:
    # "available but disabled by default"): the sort; 0.21 on turn it on by default
    from kvbudget.engines.vllm.calibration import sampler_path

    rtx = kvbudget.find_gpu("RTX-3090")
    for version, rel, path in (("0.9.2", "v1", "native"), ("0.12.0", "v1", "native"), ("0.16.0", "v1", "native"),
                               ("0.21.0", "current", "flashinfer"), ("0.33.0", "current", "flashinfer"),
                               ("v1", "v1", "native"), ("current", "current", "flashinfer")):
        assert sampler_path(VllmSettings(version=version), rtx, rel) == path, version
    for version in ("0.12.0", "0.16.0"):
        default = _plan(QWEN_MOE, "RTX-3090", **{**RTX3090, "version": version})
        told = _plan(QWEN_MOE, "RTX-3090", **{**RTX3090, "version": version, "sampler": "native"})
        assert default.activation_bytes == told.activation_bytes, version
    assert parse_vllm_command("VLLM_USE_FLASHINFER_SAMPLER=1 vllm serve m").settings.sampler == "flashinfer"
    # ROCm never takes FlashInfer's path, whatever it is told: an MI300X plans the sort
    amd = _plan("meta-llama/Llama-3.1-8B-Instruct", "MI300X", version="0.10.1")
    told = _plan("meta-llama/Llama-3.1-8B-Instruct", "MI300X", version="0.10.1", sampler="flashinfer")
    assert amd.activation_bytes == told.activation_bytes
    nv = _plan("meta-llama/Llama-3.1-8B-Instruct", "H100", version="0.10.1", sampler="flashinfer")
    nv_sort = _plan("meta-llama/Llama-3.1-8B-Instruct", "H100", version="0.10.1", sampler="native")
    assert nv_sort.activation_bytes - nv.activation_bytes == 1024 * 128256 * (38 - 14)


def test_a_sampler_vllm_does_not_have_is_refused() -> None:
    with pytest.raises(InputError, match="sampler 'cuda' is not one vLLM has: give one of flashinfer, native"):
        _plan(QWEN_MOE, "H100", sampler="cuda")


def test_the_logs_own_line_and_the_environment_set_the_path() -> None:
    native = parse_vllm_log((LOGS / "v0.10.0_rtx3090_qwen3-30b-a3b-awq_len2048_gmu0.8.log").read_text(encoding="utf-8"))
    assert ("sampler", "native") in native.settings
    fast = parse_vllm_log((LOGS / "v0.10.1.1_a100-80gb_qwen2-7b_len16384_gmu0.5.log").read_text(encoding="utf-8"))
    assert ("sampler", "flashinfer") in fast.settings
    none = parse_vllm_log((LOGS / "v0.17.1_a100-80gb_llama3.1-8b_len32768.log").read_text(encoding="utf-8"))
    assert not [kv for kv in none.settings if kv[0] == "sampler"]
    assert parse_vllm_command("VLLM_USE_FLASHINFER_SAMPLER=0 vllm serve m").settings.sampler == "native"
    assert parse_vllm_command("VLLM_USE_FLASHINFER_SAMPLER=1 vllm serve m").settings.sampler == "flashinfer"


def test_flashinfer_attention_says_the_package_is_there() -> None:
    # "Using FlashInfer backend on V1 engine." (platforms/cuda.py): the backend imports flashinfer, so the 0.8-0.11
    # sampler takes it too (topk_topp_sampler.py samples with FlashInfer whenever it imports); 0.12-0.20 do not
    from kvbudget.engines.vllm.check import check_log

    text = (LOGS / "v0.10.2dev_a100_qwen3-0.6b_len4096.log").read_text(encoding="utf-8")
    assert ("flashinfer_installed", "true") in parse_vllm_log(text).settings
    for version, sampler in (("0.10.2", "flashinfer"), ("0.8.5", "flashinfer"), ("0.12.0", None), ("0.7.3", None)):
        r = check_log(text, model="Qwen/Qwen3-0.6B", gpu="A100-80GB", version=version)
        assert r.settings.sampler == sampler, version


def test_check_plans_the_path_the_log_shows() -> None:
    text = (LOGS / "v0.10.0_rtx3090_qwen3-30b-a3b-awq_len2048_gmu0.8.log").read_text(encoding="utf-8")
    flags = ["--quantization", "awq_marlin", "--max-model-len", "2048", "--gpu-memory-utilization", "0.8"]
    result = check_log(text, model=QWEN_MOE, gpu="RTX-3090", version="0.10.0", flags=flags)
    assert result.settings.sampler == "native"
    native = _plan(QWEN_MOE, "RTX-3090", sampler="native", **RTX3090)
    assert result.plan.available_kv_cache_bytes == native.available_kv_cache_bytes
    # the log: "Available KV cache memory: 1.92 GiB"; FlashInfer's path would leave 0.51 GiB more than the sort does
    logged = 1.92 * GiB
    fast = _plan(QWEN_MOE, "RTX-3090", sampler="flashinfer", **RTX3090)
    assert abs(native.available_kv_cache_bytes - logged) < abs(fast.available_kv_cache_bytes - logged)


def test_fused_moe_workspace_by_hand() -> None:
    spec = kvbudget.load_model(QWEN_MOE)  # 128 experts, 8 per token, moe_intermediate_size 768, hidden 2048
    assert (spec.experts_per_token, spec.expert_intermediate_size, spec.dims.hidden_size) == (8, 768, 2048)
    # cache13: M x top_k x max(N = 2 x 768, K = 2048); cache2: M x top_k x N/2; the output M x K
    assert moe_workspace_elements(spec, 2048, 1, False, "v1") == 2048 * 8 * (2048 + 768) + 2048 * 2048
    # TP 4 splits the expert width (N = 384, below K); expert parallelism keeps whole experts
    assert moe_workspace_elements(spec, 2048, 4, False, "v1") == 2048 * 8 * (2048 + 192) + 2048 * 2048
    assert moe_workspace_elements(spec, 2048, 4, True, "v1") == 2048 * 8 * (2048 + 768) + 2048 * 2048
    # VLLM_FUSED_MOE_CHUNK_SIZE (32768) caps the tokens before 0.21; 0.33.0 runs them all at once
    assert moe_workspace_elements(spec, 40000, 1, False, "v1") == moe_workspace_elements(spec, 32768, 1, False, "v1")
    assert moe_workspace_elements(spec, 40000, 1, False, "current") == 40000 * 8 * (2048 + 768) + 40000 * 2048
    assert moe_workspace_elements(kvbudget.load_model("meta-llama/Llama-3.1-8B-Instruct"), 2048, 1, False, "v1") == 0


def test_the_moe_workspace_replaces_the_dense_mlp_term() -> None:
    from kvbudget.engines.vllm.calibration import activation_peak

    spec = kvbudget.load_model(QWEN_MOE)
    # forward: 2 x hidden a token (residual, normed input) + the workspace's own elements, 2 bytes each
    forward = (2 * 2048 * 2048 + moe_workspace_elements(spec, 2048, 1, False, "v1")) * 2
    one = activation_peak(spec, 2048, 1, 1, "bf16", False, ACTIVATION["v1"], "flashinfer",
                          moe_workspace_elements(spec, 2048, 1, False, "v1"))
    assert one == forward  # not the last stage: no sampler, the forward alone
    # the sampler runs after the forward is freed: the plan's peak is the larger, 256 x vocab x 14 bytes + the
    # forward's output (2048 x hidden x 2 bytes) kept for it
    p = _plan(QWEN_MOE, "RTX-3090", sampler="flashinfer", **RTX3090)
    assert p.activation_bytes == max(forward, 2048 * 2048 * 2 + 256 * VOCAB * 14) == 2048 * 2048 * 2 + 256 * VOCAB * 14


def test_the_0_10_2_h100_log_peak_activation_is_the_sort() -> None:
    # 'Actual usage is 56.93 GiB for weight, 5.58 GiB for peak activation' (Qwen3-30B-A3B bf16 on one H100, 0.10.2,
    # 1024 dummy requests): the sort's 1024 x 151,936 x 38 B and the forward's output; FlashInfer's path would be
    # 2.03 GiB, the sum of forward and sampler 5.91
    p = _plan("Qwen/Qwen3-30B-A3B-Instruct-2507", "H100", version="0.10.2", max_model_len=6144, sampler="native")
    assert p.activation_bytes == 8192 * 2048 * 2 + 1024 * VOCAB * 38
    assert abs(p.activation_bytes / GiB - 5.58) < 0.05


def test_a_vision_models_encoder_pass_is_modelled_for_qwen_towers_and_named_as_not_modelled_otherwise() -> None:
    """Qwen3-VL's pass is priced (engines/vllm/encoder_profile.py; its figures in tests/test_vllm_encoder_profile.py):
    a note with the figure and no wider band; Gemma 3's SigLIP tower keeps the warning and the wider band."""
    vl = _plan("Qwen/Qwen3-VL-30B-A3B-Instruct", "H100", tensor_parallel_size=2, max_model_len=65536)
    assert [n for n in vl.notes if n.startswith("vision encoder profiling")]
    assert dict(vl.provenance)["available_kv_cache_bytes"].band == ""
    gemma = _plan("google/gemma-3-27b-it", "H100", tensor_parallel_size=2, max_model_len=32768)
    band = dict(gemma.provenance)["available_kv_cache_bytes"].band
    assert "the vision encoder's profiling pass is not modelled" in band and "upper bound" in band
    assert [n for n in gemma.notes if n.startswith("vision encoder:")]
    text = _plan("Qwen/Qwen3-30B-A3B", "H100", tensor_parallel_size=2, max_model_len=32768)
    assert not [n for n in text.notes if n.startswith("vision encoder")]
    assert dict(text.provenance)["available_kv_cache_bytes"].band == ""
    # the tower's weights are counted either way: the VL model loads more than its text-only sibling
    assert vl.weights_bytes > text.weights_bytes


def test_nccl_at_three_or_more_ranks_on_nvswitch_is_named_with_its_size() -> None:
    # the current release connects NCCL lazily (cuMem on): not modelled, named with what eager connection would cost
    tp8 = _plan("Qwen/Qwen3-32B", "H100", tensor_parallel_size=8, max_model_len=32768)
    (note,) = [n for n in tp8.notes if n.startswith("NCCL at 8 ranks")]
    # 712 MiB a process + custom all-reduce 18 MiB + 2 communicators x (ring and tree, 24 channels x 24 MiB, and
    # SHARP 32 MiB x 8 ranks)
    assert f"up to {(712 + 18 + 2 * (24 * 24 + 32 * 8)) / 1024:.2f} GiB" in note and "2.34 GiB" in note
    assert "NCCL's buffers at 8 ranks on NVSwitch is not modelled" in dict(tp8.provenance)["available_kv_cache_bytes"].band
    for gpu, tp in (("H100", 2), ("L40S", 4), ("A100-SXM4-80GB", 8)):  # below 4 ranks; no switch; no SHARP before sm90
        p = _plan("Qwen/Qwen3-32B", gpu, tensor_parallel_size=tp, max_model_len=32768)
        assert not [n for n in p.notes if n.startswith("NCCL at")], (gpu, tp)


def test_v0_peak_is_the_larger_of_forward_and_sampler() -> None:
    # the V0 sampler runs after the forward's buffers are freed: the peak is the larger of the forward and the
    # forward's output + 38 B a vocabulary entry for every dummy request, the sort's (calibration.ActivationModel "max")
    from kvbudget.engines.vllm.calibration import activation_peak

    spec = kvbudget.load_model("meta-llama/Llama-3.2-3B-Instruct")  # hidden 3072, intermediate 8192, vocab 128256
    # Unsloth's Colab run on a T4 (0.8.2 falls back to V0 there): 2048 tokens, 192 sequences, fp16
    act = activation_peak(spec, 2048, 192, 1, "fp16", True, ACTIVATION["v0"], "native")
    assert act == 2048 * 3072 * 2 + 192 * 128256 * 38  # sampler-bound: 0.88 GiB of the logged 0.90
    # RTX 3090, 0.6.4, 20,000 tokens of Llama-3.1-8B: forward-bound, 3 x (hidden + intermediate) a token
    llama = kvbudget.load_model("meta-llama/Llama-3.1-8B-Instruct")
    assert activation_peak(llama, 20000, 256, 1, "bf16", True, ACTIVATION["v0"]) == 20000 * (3 * 4096 + 3 * 14336) * 2


def test_v0_t4_run_and_the_0_6_4_cuda_context() -> None:
    from kvbudget.engines.vllm.calibration import NON_TORCH_0_6_4_BYTES, NON_TORCH_TP1_BYTES

    # "# cuda blocks: 3637" (the T4 log, tests/data/vllm_logs/v0.8.2_t4_llama3.2-3b_len2048_gmu0.89): 0.4.3-0.6.3
    # and 0.6.5 on count the non-torch increase only (the log prints 0.05 GiB)
    from kvbudget.hardware import custom_gpu

    t4 = plan(kvbudget.load_model("meta-llama/Llama-3.2-3B-Instruct"), custom_gpu(int(14.74 * GiB)),
              VllmSettings(version="v0", max_model_len=2048, gpu_memory_utilization=0.8938626454842437, max_num_seqs=192,
                           max_num_batched_tokens=2048, dtype="float16"))
    assert t4.non_torch_bytes == NON_TORCH_TP1_BYTES["v0"]
    assert abs(t4.num_gpu_blocks / 3637 - 1) < 0.03  # was +8.4% with the sum and 4 B a vocabulary entry
    # 0.6.4 counts every byte torch did not allocate, the CUDA context included: the 3090 logs' 0.35 GiB
    # (the constant is net of the allocator segments beside Llama-3.1-8B's weights, which 0.6.4 counts too:
    # engines/vllm/allocations.py; together they are the logged figure)
    from kvbudget.engines.vllm.calibration import FIT_LOG_SEGMENTS_BYTES

    old = _plan("meta-llama/Llama-3.1-8B-Instruct", "RTX-3090", version="0.6.4", max_model_len=20000)
    assert old.non_torch_bytes == NON_TORCH_0_6_4_BYTES + FIT_LOG_SEGMENTS_BYTES
    assert round(old.non_torch_bytes / GiB, 2) == 0.35
    assert parse_vllm_log((LOGS / "v0.6.4_rtx3090_llama3.1-8b_len20000.log").read_text(encoding="utf-8")).version == "0.6.4"


def test_releases_that_count_the_cuda_context() -> None:
    """0.6.4's V0 worker and the V1 worker of 0.8.0-0.9.0 add everything on the device torch did not allocate
    (mem_get_info's used bytes minus torch's allocated bytes, no baseline); 0.6.3, 0.6.5 on and 0.9.1 on count
    the increase over the worker's start only."""
    from kvbudget.engines.vllm.calibration import (
        CUDA_CONTEXT_BYTES,
        NON_TORCH_0_6_4_BYTES,
        NON_TORCH_TP1_BYTES,
        NON_TORCH_TP_BYTES,
        counts_whole_device,
    )

    # (the V1 line with a 0.7 release is 0.7's V1 alpha, whose v1/worker/gpu_worker.py counts it as 0.8.0 does)
    assert [counts_whole_device("v1", v) for v in ("0.6.6", "0.7.3", "0.8.0", "0.8.5.post1", "0.9.0", "0.9.0.1", "0.9.1",
                                                   "0.10.0")] == [False, True, True, True, True, True, False, False]
    assert [counts_whole_device("v0", v) for v in ("0.6.3.post1", "0.6.4", "0.6.4.post1", "0.6.5", "0.8.5")] \
        == [False, True, True, False, False]
    assert not counts_whole_device("v1", "v1") and not counts_whole_device("current", "0.8.5")
    # 0.8.5's V1 worker also counts the allocator segments beside the weights (mem_get_info's used bytes include
    # them; engines/vllm/allocations.py), 0.9.1's memory_profiling does not (torch's reserved bytes hold them)
    from kvbudget.engines.vllm.calibration import FIT_LOG_SEGMENTS_BYTES

    one = _plan("meta-llama/Llama-3.1-8B-Instruct", "A100-SXM4-40GB", version="0.8.5.post1", max_model_len=4096)
    assert one.non_torch_bytes == NON_TORCH_0_6_4_BYTES + FIT_LOG_SEGMENTS_BYTES
    later = _plan("meta-llama/Llama-3.1-8B-Instruct", "A100-SXM4-40GB", version="0.9.1", max_model_len=4096)
    assert later.non_torch_bytes == NON_TORCH_TP1_BYTES["v1"]
    assert one.available_kv_cache_bytes == later.available_kv_cache_bytes - CUDA_CONTEXT_BYTES - FIT_LOG_SEGMENTS_BYTES
    # the 0.6.4.post1 TP 4 log on four 48 GB PCIe cards prints "non_torch_memory=0.71GiB": the TP figure plus the context
    meta = json.loads((LOGS / "v0.6.4.post1_48gb-pcie-x4_llama3.1-8b_tp4_default.json").read_text(encoding="utf-8"))
    assert meta["reported"]["non_torch_memory_gib"] == 0.71
    k = meta["kvbudget"]
    tp4 = check_log((LOGS / "v0.6.4.post1_48gb-pcie-x4_llama3.1-8b_tp4_default.log").read_text(encoding="utf-8"),
                    model=k["model"], gpu=k.get("gpu"), gpu_memory=round(k["gpu_memory_gib"] * GiB) if k.get("gpu_memory_gib") else None,
                    version=k.get("version"), flags=k.get("flags"))
    # with the segments beside the weights at TP 4 (24.5 MiB: the rotary cache's float32 temporaries)
    assert tp4.plan.non_torch_bytes == NON_TORCH_TP_BYTES + CUDA_CONTEXT_BYTES + 25_681_920
    assert abs(tp4.plan.non_torch_bytes / GiB - 0.71) < 0.05
    blocks = next(r for r in tp4.rows if r.figure == "GPU blocks")
    assert blocks.error_pct is not None and abs(blocks.error_pct) < 0.5  # was +0.82% without the context


def test_the_a800_takes_the_large_batch_defaults() -> None:
    """engine/arg_utils.py (0.13.0) gives a GPU of 70 GiB or more 8192 batched tokens and 1024 sequences unless 'a100'
    is in its device name: the A800 (same memory as the A100 80GB) takes them, as the 0.13.0 TP 4 log prints."""
    from kvbudget.engines.vllm.calibration import batch_defaults
    from kvbudget.engines.vllm.settings import release

    a800, a100 = kvbudget.find_gpu("NVIDIA A800-SXM4-80GB"), kvbudget.find_gpu("A100-SXM4-80GB")
    assert a800.memory_bytes == a100.memory_bytes
    assert batch_defaults(a800, VllmSettings(version="0.13.0"), release("0.13.0"), 8192) == (8192, 1024)
    assert batch_defaults(a100, VllmSettings(version="0.13.0"), release("0.13.0"), 8192) == (2048, 256)
    name = "v0.13.0_a800-80gb-x4_llama3-8b_tp4_default"
    assert "max_num_batched_tokens=8192" in (LOGS / f"{name}.log").read_text(encoding="utf-8")
    meta = json.loads((LOGS / f"{name}.json").read_text(encoding="utf-8"))
    k = meta["kvbudget"]
    result = check_log((LOGS / f"{name}.log").read_text(encoding="utf-8"), model=k["model"], gpu=k["gpu"],
                       version=k["version"], flags=k["flags"])
    tokens = next(r for r in result.rows if r.figure == "KV cache tokens")
    assert tokens.error_pct is not None and abs(tokens.error_pct) < 1  # +5.44% as an A100 (256 sequences' sampler)


def test_batch_default_tiers_by_release() -> None:
    """engine/arg_utils.py: the 160 GiB tier (16,384 tokens for the server) came in 0.29 (the 0.21-0.28 wheels have
    no such branch). The GB10 (compute capability 12.1) is on the small tier in every release: 0.33 names it
    (is_gb10); before it platforms/cuda.py asked NVML for the device's memory, which an integrated part does not
    have, and arg_utils.py takes the exception as 0 bytes. A 0.13.0 GB10 log prints max_num_batched_tokens=2048, and
    its max_num_seqs of 256 (not 1024) is what its sampler's share of the profiling run was sized with."""
    from kvbudget.engines.vllm.calibration import batch_defaults
    from kvbudget.engines.vllm.settings import release

    def defaults(gpu: str, version: str) -> tuple[int, int]:
        return batch_defaults(kvbudget.find_gpu(gpu), VllmSettings(version=version), release(version), 8192)

    assert [defaults("B200", v) for v in ("0.21.0", "0.28.0", "0.29.0", "current")] == \
        [(8192, 1024), (8192, 1024), (16384, 1024), (16384, 1024)]
    assert [defaults("GB10", v) for v in ("0.13.0", "0.32.0", "0.33.0", "current")] == \
        [(2048, 256), (2048, 256), (2048, 256), (2048, 256)]
    assert defaults("H100", "current") == (8192, 1024) and defaults("A100-SXM4-80GB", "current") == (2048, 256)
    assert defaults("Jetson AGX Thor", "0.13.0") == (8192, 1024)  # no NVML on Jetson: torch's 122.8 GiB total
    name = "v0.13.0-nv26.01_gb10_gpt-oss-20b-ft_len8192_gmu0.25"
    text = (LOGS / f"{name}.log").read_text(encoding="utf-8")
    assert "max_num_batched_tokens=2048" in text
    k = json.loads((LOGS / f"{name}.json").read_text(encoding="utf-8"))["kvbudget"]
    result = check_log(text, model=k["model"], gpu=k["gpu"], version=k["version"], flags=k["flags"])
    tokens = next(r for r in result.rows if r.figure == "KV cache tokens")
    assert tokens.error_pct is not None and abs(tokens.error_pct) < 12  # -31.28% with the large tier's 1,024
    assert any("GB10-128GB shares its memory with the CPU" in w for w in result.warnings)


def test_check_keeps_a_named_gpu_given_with_its_memory() -> None:
    """check_log(gpu=..., gpu_memory=...) plans the named card with that total (its compute capability picks cuBLAS's
    workspace and NCCL's board), not an unnamed custom one."""
    name = "v0.7.2_a100-40gb-x2_qwen2.5-14b_tp2_fp16"
    meta = json.loads((LOGS / f"{name}.json").read_text(encoding="utf-8"))
    k = meta["kvbudget"]
    text = (LOGS / f"{name}.log").read_text(encoding="utf-8")
    named = check_log(text, model=k["model"], gpu=k["gpu"], gpu_memory=round(39.5 * GiB), version=k["version"], flags=k["flags"])
    bare = check_log(text, model=k["model"], gpu_memory=round(39.5 * GiB), version=k["version"], flags=k["flags"])
    assert named.gpu.startswith("A100-SXM4-40GB") and not bare.gpu.startswith("A100")
    assert named.plan.total_bytes == bare.plan.total_bytes == round(39.5 * GiB)
