"""The vLLM policy: budget, pages, groups, blocks, concurrency, failures, release lines, commands.

Sources: vLLM 0.33.0's Python package (the wheel on PyPI; paths relative to ``vllm/``, named in
src/kvbudget/engines/vllm/), and public logs (tests/data/vllm_logs/).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import kvbudget
from kvbudget._record import replace
from kvbudget.engines.vllm import (
    VllmSettings,
    batch_defaults,
    capacity,
    capture_sizes,
    plan,
    release,
    request_blocks,
)
from kvbudget.engines.vllm.command import human_int, parse_vllm_command
from kvbudget.engines.vllm.log import parse_vllm_log
from kvbudget.hardware import custom_gpu
from kvbudget.units import GiB, InputError, MiB

LLAMA8 = "meta-llama/Llama-3.1-8B-Instruct"


def _plan(model: str = LLAMA8, gpu: str = "H100", **settings: object) -> kvbudget.engines.vllm.VllmPlan:  # type: ignore[name-defined]
    return plan(kvbudget.load_model(model), kvbudget.find_gpu(gpu), VllmSettings(**settings))  # type: ignore[arg-type]


def test_public_log_llama31_8b_current_line() -> None:
    # A published start-up log of Llama-3.1-8B-Instruct with vLLM's defaults (utilization 0.92, max_model_len 131072),
    # the vllm/vllm-openai:v0.31.0 image on an A100 80GB: "Free memory on device (78.84/79.25 GiB)", the V2 model
    # runner's "[model_runner.py:407] Model loading took 15.0 GiB", "Available KV cache memory: 56.21 GiB",
    # "GPU KV cache size: 460,496 tokens, Maximum concurrency for 131,072 tokens per request: 3.51x" and the breakdown
    # "15.26 GiB for consumed memory (weights + non-torch), 1.44 GiB for peak activation" (0.31's peak activation
    # holds the CUDA-graph estimate too: v1/worker/gpu_worker.py). Its compilation took ~15 s on every start: cold.
    a100 = replace(kvbudget.find_gpu("A100-80GB"), memory_bytes=round(79.25 * GiB))
    p = plan(kvbudget.load_model(LLAMA8), a100, VllmSettings(version="0.31.0"))
    assert p.requested_bytes == -(-round(79.25 * GiB) * 92 // 100)
    # an A100's batch defaults (engine/arg_utils.py): 2,048 tokens, 256 requests. vLLM 0.31.0's source (V2 runner)
    # allocates in the profiling run the forward's widest point, (2 x 4096 + 3 x 14336) x 2,048 x 2 B = 0.195 GiB,
    # more than the held output and sampled rows with the bf16 logits, (2048 + 256) x 4096 x 2 + 256 x 128,256 x 2
    forward = (2 * 4096 + 3 * 14336) * 2048 * 2
    assert max(forward, (2048 + 256) * 4096 * 2 + 256 * 128256 * 2) == forward == 209_715_200
    # The start compiled afresh, inside the profiling run (compile_cache.py): Inductor's benchmark of the embedding
    # lookup holds a random copy of the embedding table, 128,256 x 4,096 x 2 B = 0.98 GiB, before the forward runs;
    # larger than the forward, it is the transient peak: with kvbudget's graph estimate (0.40 GiB) 1.38 GiB against
    # the 1.44 logged. This log was the one a per-token / per-entry constant was fitted on (retired): the source
    # alone, no fitted constant, now gives 56.27 GiB and 460,944 tokens (+0.10%) against 56.21 and 460,496
    assert p.activation_bytes == 128256 * 4096 * 2 == 1_050_673_152
    assert round(p.cudagraph_bytes / GiB, 2) == 0.40
    assert round((p.activation_bytes + p.cudagraph_bytes) / GiB, 2) == 1.38
    assert round(p.available_kv_cache_bytes / GiB, 2) == 56.27
    assert p.kv_cache_tokens == 460_944
    assert p.kv_cache_tokens / 460_496 - 1 == pytest.approx(0.0010, abs=0.0001)
    # had it loaded the compiled graph from the cache, the forward's widest point would bind: 57.05 GiB (+1.49%)
    warm = plan(kvbudget.load_model(LLAMA8), a100, VllmSettings(version="0.31.0", compile_cache="warm"))
    assert warm.activation_bytes == forward
    assert round(warm.available_kv_cache_bytes / GiB, 2) == 57.05 and warm.kv_cache_tokens == 467_360
    # The KV arithmetic alone is exact: 56.21 GiB -> 28,781 blocks of 2 MiB -> 460,496 tokens.
    exact = plan(kvbudget.load_model(LLAMA8), custom_gpu(round(79.25 * GiB)),
                 VllmSettings(kv_cache_memory_bytes=28_781 * 2 * MiB + 1))
    assert exact.bytes_per_block == 32 * 16 * 2 * 8 * 128 * 2 == 2 * MiB
    assert exact.num_gpu_blocks == 28_781 and exact.kv_cache_tokens == 460_496
    assert exact.log_lines[-1] == "GPU KV cache size: 460,496 tokens, Maximum concurrency for 131,072 tokens per request: 3.51x"


def test_release_lines() -> None:
    assert release("0.33.0").key == release("v0.21.0").key == release(None).key == "current"
    assert release("0.10.1.dev101+gbda9d0535").key == release("0.8.5").key == "v1"
    assert release("0.6.3.post1").key == release("0.2.4").key == "v0"
    assert release("current").default_utilization == 0.92  # config/cache.py
    assert release("v1").default_utilization == release("v0").default_utilization == 0.90
    with pytest.raises(InputError, match="unknown vLLM version"):
        release("banana")


def test_batch_defaults_by_gpu_tier() -> None:
    # engine/arg_utils.py get_batch_defaults: >=160 GiB 16384/1024; >=70 GiB and not A100 (H100/H200)
    # 8192/1024 for the OpenAI server; everything else 2048/256.
    rel = release("current")
    assert batch_defaults(kvbudget.find_gpu("B200"), VllmSettings(), rel, 131072) == (16384, 1024)
    assert batch_defaults(kvbudget.find_gpu("H100"), VllmSettings(), rel, 131072) == (8192, 1024)
    assert batch_defaults(kvbudget.find_gpu("A100-80GB"), VllmSettings(), rel, 131072) == (2048, 256)
    assert batch_defaults(kvbudget.find_gpu("L4"), VllmSettings(entrypoint="llm"), rel, 131072) == (8192, 256)
    # the batch cannot exceed max_num_seqs x max_model_len; max_num_seqs <= batched tokens
    assert batch_defaults(kvbudget.find_gpu("H100"), VllmSettings(), rel, 4) == (4096, 1024)


def test_cudagraph_capture_sizes() -> None:
    # config/vllm.py: [1, 2, 4] + 8..248 step 8 + 256..512 step 16 with max_num_seqs 1024 -> 51 sizes.
    sizes = capture_sizes(1024, 8192, kvbudget.find_gpu("H100"))
    assert len(sizes) == 51 and sizes[:4] == (1, 2, 4, 8) and sizes[-1] == 512
    assert capture_sizes(256, 2048, kvbudget.find_gpu("L4"))[-1] == 512
    assert capture_sizes(16, 2048, kvbudget.find_gpu("L4")) == (1, 2, 4, 8, 16, 24, 32)
    assert _plan(enforce_eager=True).cudagraph_bytes == 0


def test_gemma3_groups_and_padding() -> None:
    # 52 sliding + 10 full layers: group size 10 (the smaller bucket); the sliding bucket splits into
    # ceil(52/10) = 6 groups of layers[i::6], padded by 8 layers (kv_cache_planning.py
    # _get_kv_cache_groups_uniform_page_size: "Add 8 padding layers").
    p = _plan("google/gemma-3-27b-it", max_model_len=32768)
    kinds = [g.kind for g in p.groups]
    assert kinds.count("sliding_window") == 6 and kinds.count("full_attention") == 1
    assert sum(g.padding for g in p.groups) == 8
    page = 16 * 2 * 16 * 128 * 2  # 16 tokens x 16 KV heads x (K + V) x 128 x bf16
    assert p.bytes_per_block == 10 * page
    # blocks per request: full cdiv(32768, 16); sliding cdiv(min(1024 - 1 + 2 x 8192, 32768), 16) + 1
    assert p.blocks_per_request == 2048 + 6 * (-(-(1023 + 2 * 8192) // 16) + 1)


def test_gpt_oss_sliding_blocks_per_request() -> None:
    # 12 sliding (W=128) + 12 full: max(12,12) < 1.5 x 12, so group size 12, two groups.
    p = _plan("openai/gpt-oss-20b", max_model_len=131072)
    assert sorted(g.kind for g in p.groups) == ["full_attention", "sliding_window"]
    in_flight = 2 * 8192  # max_concurrent_batches 2 (async scheduling) x max_num_batched_tokens
    assert request_blocks(p, 131072) == 131072 // 16 + (-(-(127 + in_flight) // 16) + 1)
    older = _plan("openai/gpt-oss-20b", max_model_len=131072, version="0.11")
    assert request_blocks(older, 131072) == 131072 // 16 + (-(-(127 + 8192) // 16) + 1)


def test_hybrid_mamba_raises_block_size() -> None:
    # Qwen3-Next: attention page per token 2 KV heads x 256 x (K + V) x 2 B = 2048 B; a GatedDeltaNet
    # state is 1,097,728 B, so the block grows to 16 x ceil(1097728 / (16 x 2048)) = 544 tokens
    # (platforms/interface.py _align_hybrid_block_size) and the state page is padded to 544 x 2048.
    p = _plan("Qwen/Qwen3-Next-80B-A3B-Instruct", "H200", tensor_parallel_size=2, max_model_len=65536)
    assert p.block_size == 544 * 1  # TP2 halves both, the ratio stays
    p1 = plan(kvbudget.load_model("Qwen/Qwen3-Next-80B-A3B-Instruct"), custom_gpu(400 * GiB), VllmSettings(max_model_len=65536))
    assert p1.block_size == 544
    assert {g.page for g in p1.groups} == {544 * 2048}
    assert any("raised" in n for n in p1.notes)


def test_mla_not_split_and_tp_replication() -> None:
    v3 = _plan("deepseek-ai/DeepSeek-V3", "H200", tensor_parallel_size=8, max_model_len=32768)
    assert v3.bytes_per_block == 61 * 16 * 576 * 2
    q = _plan("Qwen/Qwen3-235B-A22B", "H200", tensor_parallel_size=8, max_model_len=32768)
    assert q.bytes_per_block == 94 * 16 * 1 * 128 * 2 * 2  # 4 KV heads on 8 ranks: one head each


def test_kv_cache_dtypes() -> None:
    base = _plan(max_model_len=8192).bytes_per_block
    assert _plan(max_model_len=8192, kv_cache_dtype="fp8").bytes_per_block == base // 2
    # fp8_per_token_head: 1 byte per value + an fp32 scale for K and for V per head and token
    assert _plan(max_model_len=8192, kv_cache_dtype="fp8_per_token_head").bytes_per_block == 32 * 16 * 8 * (256 + 8)
    # nvfp4: D/2 + D/16 bytes for each of K and V per head
    assert _plan(max_model_len=8192, kv_cache_dtype="nvfp4").bytes_per_block == 32 * 16 * 8 * 2 * (64 + 8)
    assert _plan("deepseek-ai/DeepSeek-V3", "H200", tensor_parallel_size=8, max_model_len=8192,
                 kv_cache_dtype="fp8_ds_mla").bytes_per_block == 61 * 16 * 656
    with pytest.raises(InputError, match=r"not a KV-cache dtype vLLM 0\.33 takes"):
        _plan(kv_cache_dtype="fp3")


@pytest.mark.parametrize(("value", "words"), [
    ("half", "matched as written: float16"), ("FP8", "matched as written: fp8"), ("float32", "no release keeps"),
    ("Fp8_E5M2", "matched as written: fp8_e5m2")])
def test_kv_dtype_as_vllm_takes_it_on_every_path(value: str, words: str) -> None:
    """fit's --kv-dtype and the API reach the rule a launch command's --kv-cache-dtype is read by (config/cache.py
    CacheDType, matched as written): 'half' and 'FP8' stop vLLM 0.33 at start-up; they were planned (exit 0)."""
    with pytest.raises(InputError, match=words):
        _plan(kv_cache_dtype=value)
    with pytest.raises(InputError, match=words):
        kvbudget.fit("llama-3.1-8b", gpu="H100", kv_dtype=value)
    with pytest.raises(InputError, match=r"added in 0\.11"):  # per release: bfloat16 is 0.11's
        _plan(kv_cache_dtype="bfloat16", version="0.10.1")


def test_kv_dtype_needs_a_backend_on_the_gpu() -> None:
    """vLLM 0.33 picks the attention backend by the KV-cache dtype (platforms/cuda.py get_valid_backends): no CUDA
    backend lists fp8_inc (Intel Gaudi's), FlashInfer alone holds NVFP4 (from compute capability 8.0; off Blackwell
    plain nvfp4 only, not at head size 64: v1/attention/backends/flashinfer.py). Each of these was planned, exit 0."""
    with pytest.raises(InputError, match="No valid attention backend found"):
        _plan(kv_cache_dtype="fp8_inc")
    with pytest.raises(InputError, match=r"needs compute capability 8\.0"):
        _plan("meta-llama/Llama-3.2-1B-Instruct", "T4", kv_cache_dtype="nvfp4", max_model_len=8192)
    with pytest.raises(InputError, match="head size 64"):
        _plan("meta-llama/Llama-3.2-1B-Instruct", "L4", kv_cache_dtype="nvfp4", max_model_len=8192)
    with pytest.raises(InputError, match="runs only on Blackwell"):
        _plan(kv_cache_dtype="nvfp4_4over6", max_model_len=8192)
    with pytest.raises(InputError, match="runs only on Blackwell"):  # 0.25-0.31: Blackwell only, nvfp4 too
        _plan(kv_cache_dtype="nvfp4", max_model_len=8192, version="0.28.0")
    assert _plan("meta-llama/Llama-3.1-8B-Instruct", "B200", kv_cache_dtype="nvfp4_4over6", max_model_len=8192).starts
    # 0.20 lists nvfp4 in CacheDType but no backend does (FlashInfer's supported_kv_cache_dtypes gains it in 0.21):
    # stops on every GPU, Blackwell too
    with pytest.raises(InputError, match=r"vLLM 0\.20 stops with 'No valid attention backend found'"):
        _plan("meta-llama/Llama-3.1-8B-Instruct", "B200", kv_cache_dtype="nvfp4", max_model_len=8192, version="0.20.0")
    # 0.21-0.24: FlashInfer lists nvfp4 from capability 7.5 (8.0 in 0.24) whatever the GPU, and reads it with the
    # trtllm-gen kernel only ("TRTLLM attention is supported if the platform is SM100", utils/flashinfer.py)
    for version in ("0.21.0", "0.24.0"):
        with pytest.raises(InputError, match="trtllm-gen kernel"):
            _plan(kv_cache_dtype="nvfp4", max_model_len=8192, version=version)
        assert _plan("meta-llama/Llama-3.1-8B-Instruct", "B200", kv_cache_dtype="nvfp4", max_model_len=8192,
                     version=version).starts
    with pytest.raises(InputError, match=r"needs compute capability 8\.0"):  # 0.24 raised FlashInfer's floor
        _plan("meta-llama/Llama-3.2-1B-Instruct", "T4", kv_cache_dtype="nvfp4", max_model_len=8192, version="0.24.0")
    with pytest.raises(InputError, match=r"needs compute capability 7\.5"):
        _plan("meta-llama/Llama-3.2-1B-Instruct", "V100-SXM2-16GB", kv_cache_dtype="nvfp4", max_model_len=8192, version="0.22.0")
    # fp8 on T4 / V100 (Triton) and A100 (FlashInfer; FlashAttention-2 has no FP8 cache) has a backend: planned
    for gpu in ("T4", "V100-SXM2-16GB", "A100-SXM4-40GB"):
        assert _plan("meta-llama/Llama-3.2-1B-Instruct", gpu, kv_cache_dtype="fp8", max_model_len=8192).starts
    # 0.10 chose backends otherwise (platforms/cuda.py: any fp8* name as FP8): said, not refused
    assert any("fp8_inc" in n for n in _plan(kv_cache_dtype="fp8_inc", max_model_len=8192, version="0.10.1").notes)


def test_does_not_start_and_estimated_length() -> None:
    p = _plan("meta-llama/Llama-3.1-70B-Instruct", tensor_parallel_size=2)
    assert not p.starts and p.error and "estimated maximum model length" in p.error
    assert p.estimated_max_model_len is not None
    # the estimate is vLLM's binary search: one more token would not fit beside the null block
    est = p.estimated_max_model_len
    fits = replace(VllmSettings(tensor_parallel_size=2), max_model_len=est)
    assert plan(kvbudget.load_model("meta-llama/Llama-3.1-70B-Instruct"), kvbudget.find_gpu("H100"), fits).starts
    over = replace(fits, max_model_len=est + 16)
    assert not plan(kvbudget.load_model("meta-llama/Llama-3.1-70B-Instruct"), kvbudget.find_gpu("H100"), over).starts
    # 70B in bf16 (about 131 GiB) on a 22 GiB L4: torch runs out of memory while loading, before any KV sizing
    oom = _plan("meta-llama/Llama-3.1-70B-Instruct", "L4")
    assert not oom.starts and oom.error and oom.error.startswith("CUDA out of memory while loading the model")
    assert oom.log_lines == (f"torch.OutOfMemoryError: {oom.error}",)
    assert oom.num_gpu_blocks == 0 and oom.kv_cache_tokens == 0
    # 8B (14.99 GiB loaded) on a V100-16GB (15.77 GiB): it loads, but nothing is left of 0.92 x 15.77 GiB
    none = _plan("meta-llama/Llama-3.1-8B-Instruct", "V100-16GB")
    assert none.model_loading_bytes + none.non_torch_bytes < none.total_bytes < none.model_loading_bytes / 0.92
    assert not none.starts and none.error and none.error.startswith("No available memory")


def test_auto_max_model_len() -> None:
    p = _plan("meta-llama/Llama-3.1-70B-Instruct", tensor_parallel_size=2, max_model_len=-1)
    assert p.starts and p.max_model_len_auto and p.max_model_len < 131072
    assert any("Auto-fit max_model_len: reduced from 131072" in n for n in p.notes)


def test_overrides() -> None:
    p = _plan(kv_cache_memory_bytes=10 * GiB, max_model_len=8192)
    assert p.available_kv_cache_bytes == 10 * GiB and p.num_gpu_blocks == 10 * GiB // (2 * MiB)
    o = _plan(num_gpu_blocks_override=1000, max_model_len=8192)
    assert o.num_gpu_blocks == 1000 and o.kv_cache_tokens == 16000


def test_pp_takes_the_smallest_rank() -> None:
    one = _plan("meta-llama/Llama-3.1-70B-Instruct", tensor_parallel_size=4, max_model_len=32768)
    two = _plan("meta-llama/Llama-3.1-70B-Instruct", tensor_parallel_size=2, pipeline_parallel_size=2, max_model_len=32768)
    assert two.pp == 2 and two.bytes_per_block == 40 * 16 * 4 * 128 * 2 * 2  # 40 layers, 4 KV heads per rank
    assert one.bytes_per_block == 80 * 16 * 2 * 128 * 2 * 2
    assert two.starts and one.starts


def test_v0_reports_gpu_blocks() -> None:
    p = _plan(version="0.6.3", max_model_len=8192)
    assert p.release == "v0" and any(line.startswith("# GPU blocks: ") for line in p.log_lines)
    assert p.kv_cache_tokens == p.num_gpu_blocks * 16


def test_capacity_for_a_batch() -> None:
    p = _plan(max_model_len=8192)
    most, longest = capacity(p, 32)
    assert most == p.num_gpu_blocks // 512
    assert 32 * -(-longest // 16) <= p.num_gpu_blocks < 32 * -(-(longest + 16) // 16)


# --- launch commands ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 4 --max-model-len 32768",
        "vllm serve meta-llama/Llama-3.1-70B-Instruct -tp 4 --max-model-len=32k",
        "python -m vllm.entrypoints.openai.api_server --model meta-llama/Llama-3.1-70B-Instruct -tp=4 --max-model-len 32768",
        "python3 -m vllm.entrypoints.api_server --model=meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size=4 "
        "--max-model-len 32768 --swap-space 8",
        "docker run --gpus all -p 8000:8000 vllm/vllm-openai:latest --model meta-llama/Llama-3.1-70B-Instruct "
        "--tensor-parallel-size 4 --max-model-len 32768",
        "CUDA_VISIBLE_DEVICES=0,1,2,3 vllm serve meta-llama/Llama-3.1-70B-Instruct -tp 4 --max-model-len 32768 "
        "--disable-log-requests --served-model-name llama",
    ],
)
def test_launch_command_forms(command: str) -> None:
    cmd = parse_vllm_command(command)
    assert cmd.model == "meta-llama/Llama-3.1-70B-Instruct"
    assert cmd.settings.tensor_parallel_size == 4
    assert cmd.settings.max_model_len in (32768, 32000)
    assert cmd.warnings == ()



def test_docker_image_tag_and_environment() -> None:
    """`docker run ... vllm/vllm-openai:v0.9.2 ...` runs vLLM 0.9.2: planned with that release's rules when
    --vllm-version is not given (was the newest rules, exit 0); the container's -e NAME=VALUE apply as a leading
    assignment does (-e VLLM_USE_V1=0 was passed over); a tag that names no release is said."""
    llama = "meta-llama/Llama-3.1-8B-Instruct"
    tagged = parse_vllm_command(f"docker run --gpus all -p 8000:8000 -v /data:/root/.cache vllm/vllm-openai:v0.9.2 "
                                f"--model {llama} --max-model-len 4096")
    assert (tagged.model, tagged.settings.version, tagged.settings.max_model_len, tagged.warnings) == (llama, "0.9.2", 4096, ())
    assert parse_vllm_command(f"docker run vllm/vllm-openai:v0.8.5.post1 --model {llama}").settings.version == "0.8.5.post1"
    assert parse_vllm_command(f"docker run vllm/vllm-openai:latest --model {llama}").settings.version == "current"
    given = parse_vllm_command(f"docker run vllm/vllm-openai:v0.9.2 --model {llama}", VllmSettings(version="0.10.1"))
    assert given.settings.version == "0.10.1" and "is vLLM 0.9.2; planned with --vllm-version 0.10.1" in given.warnings[0]
    nightly = parse_vllm_command(f"docker run vllm/vllm-openai:nightly --model {llama}")
    assert nightly.settings.version == "current" and "'nightly' names no vLLM release" in nightly.warnings[0]
    v0 = parse_vllm_command(f"docker run --gpus all -e VLLM_USE_V1=0 vllm/vllm-openai:v0.9.2 --model {llama}")
    assert v0.settings.version == "v0" and ("VLLM_USE_V1", "0") in v0.env
    # kvbudget explain: the image's GPUs (docker's --gpus, the NVIDIA runtime's variable) hold the parallel layout
    with pytest.raises(InputError, match=r"needs 2 GPUs .* but its docker run --gpus shows 1: vLLM stops at start-up"):
        kvbudget.explain(f"docker run --gpus '\"device=3\"' vllm/vllm-openai --model {llama} -tp 2", gpu="H100")
    with pytest.raises(InputError, match=r"needs 4 GPUs .* but its NVIDIA_VISIBLE_DEVICES shows 2"):
        kvbudget.explain(f"docker run --runtime nvidia -e NVIDIA_VISIBLE_DEVICES=0,1 vllm/vllm-openai --model {llama} "
                         "-tp 4", gpu="H100")
    for gpus in ("all", "2", "'\"device=0,1\"'", "count=2"):
        assert kvbudget.explain(f"docker run --gpus {gpus} vllm/vllm-openai --model {llama} -tp 2", gpu="H100").settings.tensor_parallel_size == 2


def test_the_image_of_0_8_to_0_11_samples_with_its_flashinfer() -> None:
    """vLLM's image installs FlashInfer (docker/Dockerfile), which the sampler of 0.8-0.11 takes whenever it imports:
    the profiling run holds 14 B, not the PyTorch sort's 38 B, per request and vocabulary entry. A plain pip install
    lacks it (the default); 0.12-0.20 take it only on VLLM_USE_FLASHINFER_SAMPLER=1, whatever is installed."""
    llama = "meta-llama/Llama-3.1-8B-Instruct"

    def sampler(cmd: str) -> str | None:
        return parse_vllm_command(cmd).settings.sampler

    assert sampler(f"docker run vllm/vllm-openai:v0.10.2 --model {llama}") == "flashinfer"
    assert sampler(f"docker run vllm/vllm-openai:v0.8.5.post1 --model {llama}") == "flashinfer"
    assert sampler(f"docker run -e VLLM_USE_FLASHINFER_SAMPLER=0 vllm/vllm-openai:v0.10.2 --model {llama}") == "native"
    assert sampler(f"docker run vllm/vllm-openai:v0.12.0 --model {llama}") is None  # the release's own default
    assert sampler(f"docker run vllm/vllm-openai:v0.7.3 --model {llama}") is None
    assert sampler(f"vllm serve {llama}") is None
    # the H100 default of 1024 requests x 128,256 entries: 24 B an entry less at the profiling run's peak
    pip = kvbudget.explain(f"vllm serve {llama}", gpu="H100", version="0.10.2")
    image = kvbudget.explain(f"docker run vllm/vllm-openai:v0.10.2 --model {llama}", gpu="H100")
    assert pip.activation_bytes - image.activation_bytes == 1024 * 128256 * (38 - 14)


def test_a_second_positional_word_stops_vllm_serve() -> None:
    # vllm serve's one positional is model_tag (nargs="?"); argparse refuses any other bare word (was a warning, exit 0)
    with pytest.raises(InputError, match=r"vLLM stops at start-up: `vllm serve: error: unrecognized arguments: 8192`"):
        parse_vllm_command("vllm serve Qwen/Qwen3-8B --port 8000 8192")
    assert parse_vllm_command("vllm serve Qwen/Qwen3-8B --port 8000 > serve.log 2>&1 &").model == "Qwen/Qwen3-8B"


def test_apptainer_image_of_vllm() -> None:
    """HPC sites run vLLM's image as an Apptainer .sif (``apptainer pull docker://vllm/vllm-openai:TAG`` writes
    vllm-openai_TAG.sif): read as the image, its tag the release; `instance run IMAGE NAME` names an instance."""
    cmd = parse_vllm_command("apptainer instance run --nv --bind /m:/data images/vllm_vllm-openai_v0.10.2.sif svc1 "
                             "--model /data/snapshots/main --tensor-parallel-size 2")
    assert (cmd.model, cmd.settings.version, cmd.settings.tensor_parallel_size) == ("/data/snapshots/main", "0.10.2", 2)
    assert cmd.settings.sampler == "flashinfer"
    plain = parse_vllm_command("apptainer run --nv vllm-openai_v0.9.2.sif Qwen/Qwen3-8B --max-model-len 4096")
    assert (plain.model, plain.settings.version, plain.settings.max_model_len) == ("Qwen/Qwen3-8B", "0.9.2", 4096)


def test_vllm_use_v1_off_as_each_release_takes_it() -> None:
    """VLLM_USE_V1=0 runs V0 on 0.8-0.10 (engine/arg_utils.py), stops 0.11 (entrypoints/openai/api_server.py asserts
    V1) and is no variable of 0.12 on (envs.py). It was planned as V0 whatever the release given."""
    def version(given: str) -> str:
        return parse_vllm_command("VLLM_USE_V1=0 vllm serve m", VllmSettings(version=given)).settings.version

    assert version("0.9.2") == "v0" and version("0.6.3") == "v0"
    assert version("0.33.0") == "0.33.0" and version("0.12.0") == "0.12.0" and version("current") == "current"
    with pytest.raises(InputError, match=r"VLLM_USE_V1=0: vLLM 0.11 stops at start-up"):
        version("0.11.0")
    unnamed = parse_vllm_command("VLLM_USE_V1=0 vllm serve m")
    assert unnamed.settings.version == "v0" and "give --vllm-version" in unnamed.warnings[0]


def test_launch_command_details(tmp_path: Path) -> None:
    cmd = parse_vllm_command("vllm serve m --kv-cache-memory=20G --enforce-eager --no-enable-prefix-caching "
                             "--gpu-memory-utilization 0.85 --kv-cache-dtype fp8 --max-model-len auto")
    s = cmd.settings
    assert s.kv_cache_memory_bytes == 20 * GiB  # argparse prefix of --kv-cache-memory-bytes; G = 2^30
    assert s.enforce_eager and s.gpu_memory_utilization == 0.85 and s.kv_cache_dtype == "fp8"
    assert s.max_model_len == -1
    assert cmd.warnings == ()
    # vLLM's parser stops at a flag it does not know: the server does not start (a near miss is named)
    with pytest.raises(InputError, match=r"unrecognized arguments: --frobnicate` \(not a flag of vLLM 0.33\)"):
        parse_vllm_command("vllm serve m --frobnicate 3")
    with pytest.raises(InputError, match=r"unrecognized arguments: --tp` \(did you mean -tp\?\)"):
        parse_vllm_command("vllm serve m --tp 2")
    assert parse_vllm_command("VLLM_USE_V1=0 vllm serve m").settings.version == "v0"
    config = tmp_path / "c.yaml"
    config.write_text("tensor_parallel_size: 2\nmax_model_len: 4096\nenforce_eager: true\n")
    s2 = parse_vllm_command(f"vllm serve m --config {config} --max-model-len 8192").settings
    assert s2.tensor_parallel_size == 2 and s2.max_model_len == 8192 and s2.enforce_eager  # the command line wins
    assert human_int("25.6k", "x") == 25600 and human_int("1K", "x") == 1024
    for bad, message in [("ls -la", "not a launch command kvbudget reads"), ("vllm serve", "names no model"),
                         ("vllm serve m --max-model-len", "needs a value"), ("vllm serve m -tp x", "not a whole number")]:
        with pytest.raises(InputError, match=message):
            parse_vllm_command(bad)


def test_explain_suggests_fixes() -> None:
    answer = kvbudget.explain("vllm serve meta-llama/Llama-3.1-70B-Instruct -tp 2", gpu="H100")
    p, fixes = answer.plan, answer.advice
    assert answer.engine == "vllm" and not answer.fits
    assert not p.starts
    flags = dict(fixes)
    assert flags["--tensor-parallel-size 4"].starts
    assert any(f.startswith("--max-model-len ") and s.starts for f, s in fixes)


def test_explain_reads_the_one_launch_command_of_a_pasted_script() -> None:
    """Shell setup around a launch command is passed over and its ``export`` applies; lines copied without their
    backslashes are one command; two launch commands are refused (were one plan of their words, exit 0)."""
    one = kvbudget.explain("vllm serve meta-llama/Llama-3.1-70B-Instruct -tp 2", gpu="H100")
    pasted = kvbudget.explain("cd /srv && export NCCL_NVLS_ENABLE=0\nvllm serve meta-llama/Llama-3.1-70B-Instruct\n"
                              "  --tensor-parallel-size 2 2>&1 | tee run.log", gpu="H100")
    assert pasted.plan == one.plan  # TP 2 read from its own line; NVLS off changes nothing at TP 2 on one node here
    with pytest.raises(InputError, match=r"the text holds 2 launch commands \(`vllm serve a` and `vllm serve b`\)"):
        kvbudget.explain("vllm serve a -tp 2; vllm serve b", gpu="H100")
    with pytest.raises(InputError, match="holds 2 launch commands"):
        kvbudget.explain(["vllm", "serve", "a", "vllm", "serve", "b"], gpu="H100")


# --- logs --------------------------------------------------------------------------------------


def test_log_formats() -> None:
    current = parse_vllm_log(
        "INFO 11-01 [gpu_model_runner.py:2007] Model loading took 14.99 GiB memory and 3.2 seconds\n"
        "INFO 11-01 [gpu_worker.py:276] Available KV cache memory: 56.21 GiB\n"
        "INFO 11-01 [kv_cache_utils.py:1150] GPU KV cache size: 460,496 tokens, Maximum concurrency for 131,072 "
        "tokens per request: 3.51x\n")
    assert (current.model_loading_gib, current.available_kv_gib, current.kv_cache_tokens, current.max_concurrency,
            current.concurrency_len) == (14.99, 56.21, 460_496, 3.51, 131_072)
    v0 = parse_vllm_log("INFO 06-01 llm_engine.py:357] # GPU blocks: 2048, # CPU blocks: 512\n")
    assert v0.num_gpu_blocks == 2048 and v0.started
    profiled = parse_vllm_log(
        "INFO worker.py:232] Memory profiling takes 1.1 seconds\nthe current vLLM instance can use total_gpu_memory "
        "(23.58GiB) x gpu_memory_utilization (0.90) = 21.22GiB\nmodel weights take 14.99GiB; non_torch_memory takes "
        "0.35GiB; PyTorch activation peak memory takes 2.07GiB; the rest of the memory reserved for KV Cache is 3.81GiB.\n")
    assert (profiled.total_gib, profiled.available_kv_gib, profiled.non_torch_gib, profiled.activation_gib) == (
        23.58, 3.81, 0.35, 2.07)
    # vLLM 0.10+ (API server) ends this sentence on the value: the period is not part of the number
    chunked = parse_vllm_log("INFO 09-04 [scheduler.py:222] Chunked prefill is enabled with max_num_batched_tokens=2048.\n"
                             "INFO 09-04 [kv_cache_utils.py:849] GPU KV cache size: 93,872 tokens\n")
    assert dict(chunked.settings)["max_num_batched_tokens"] == "2048"
    profiled_graphs = parse_vllm_log(  # vLLM 0.19: the CUDA-graph memory profile's own dummy cache, not the run's setting
        "INFO 04-28 [kv_cache_utils.py:829] Overriding num_gpu_blocks=0 with num_gpu_blocks_override=512\n"
        "INFO 04-28 [gpu_model_runner.py:5876] Profiling CUDA graph memory: PIECEWISE=51 (largest=512), FULL=35 (largest=256)\n"
        "INFO 04-28 [gpu_worker.py:436] Available KV cache memory: 13.06 GiB\n")
    assert "num_gpu_blocks_override" not in dict(profiled_graphs.settings)
    user = parse_vllm_log("non-default args: {'model': 'x', 'num_gpu_blocks_override': 100}\n"
                          "INFO [kv_cache_utils.py:829] Overriding num_gpu_blocks=5000 with num_gpu_blocks_override=100\n"
                          "GPU KV cache size: 1,600 tokens\n")
    assert dict(user.settings)["num_gpu_blocks_override"] == "100"
    failed = parse_vllm_log("ValueError: No available memory for the cache blocks. Try increasing ...\n")
    assert not failed.started
    with pytest.raises(InputError, match="no vLLM start-up figures"):
        parse_vllm_log("hello world\n")
    with pytest.raises(InputError, match="binary"):
        parse_vllm_log("\x00\x01")


def test_environment_variables_and_unmodelled_flags() -> None:
    cmd = parse_vllm_command("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0 "
                             "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 200000 --kv-offloading-size 8 "
                             "--cpu-offload-gb 4")
    s = cmd.settings
    assert s.allow_long_max_model_len and not s.estimate_cudagraphs and s.cpu_offload_bytes == 4 * GiB
    # --kv-offloading-size: vLLM's native offload, modelled (kv_connector.py): pinned host memory, the GPU pool unchanged
    assert not cmd.warnings and s.kv_connector == "OffloadingConnector" and s.kv_offload_bytes == 8 * GiB
    p = plan(kvbudget.load_model(LLAMA8), kvbudget.find_gpu("H100"), s)
    assert p.max_model_len == 200000 and p.cudagraph_bytes == 0
    assert p.model_loading_bytes == _plan(max_model_len=8192).model_loading_bytes - 4 * GiB
    with pytest.raises(InputError, match="greater than the derived max_model_len"):
        _plan(max_model_len=200000)


def test_launch_command_values_in_vllms_own_ranges() -> None:
    """vLLM 0.33's argument checks (config Field ranges) and its underscore spellings of flags."""
    s = parse_vllm_command("vllm serve m --tensor_parallel_size 2 --gpu_memory_utilization=0.8 --max_num_seqs 7").settings
    assert (s.tensor_parallel_size, s.gpu_memory_utilization, s.max_num_seqs) == (2, 0.8, 7)
    for flags, message in [("--block-size -16", "at least 1"), ("--max-num-seqs 0", "at least 1"),
                           ("--cpu-offload-gb -5", "at least 0"), ("--gpu-memory-utilization nan", "finite"),
                           ("--gpu-memory-utilization 1.5", "at most 1"), ("--gpu-memory-utilization 0", "above 0"),
                           ("--max-model-len 0", "at least 1 token"), ("--max-model-len " + "9" * 5000, "not a number kvbudget reads \\(more than 40 digits\\)"),
                           ("--max-model-len 1.5K", "no decimals with a binary suffix"), ("--model 'x", "close its quotes")]:
        with pytest.raises(InputError, match=message):
            parse_vllm_command("vllm serve m " + flags)
    assert parse_vllm_command("vllm serve m --max-model-len auto").settings.max_model_len == -1


def test_config_file_values_are_refused_naming_the_file_and_key(tmp_path: Path) -> None:
    """A bad value read from ``--config`` names the file and the key as written there, not a flag the
    user never typed."""
    config = tmp_path / "c.yaml"
    for text, message in [("max_num_seqs: -4\n", "c.yaml': max_num_seqs is -4: it must be at least 1"),
                          ("gpu_memory_utilization: .nan\n", "c.yaml': gpu_memory_utilization must be a finite number"),
                          ("max_model_len: 1.5K\n", "c.yaml': max_model_len '1.5K': vLLM allows no decimals"),
                          ("block_size: [16]\n", "c.yaml': block_size '<a list>' is not a whole number"),
                          ("max_num_batched_tokens: " + "9" * 100 + "\n", "c.yaml': max_num_batched_tokens '9"),
                          ("dtype: ''\n", "c.yaml': dtype '': give a name")]:
        config.write_text(text)
        with pytest.raises(InputError, match=message):
            parse_vllm_command(f"vllm serve m --config {config}")
    config.write_text("max_num_seqs: 8\n")
    with pytest.raises(InputError, match=r"^--max-num-seqs is -4"):  # the command line names its flag
        parse_vllm_command(f"vllm serve m --config {config} --max-num-seqs -4")


CODER = "Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8"  # 160 routed experts, FP8 blocks


def test_expert_and_data_parallelism_share_the_experts() -> None:
    """vLLM's FusedMoE flattens the DP ranks into its group (fused_moe/config.py FusedMoEParallelConfig.make,
    0.10.1 and 0.33.0): without --enable-expert-parallel every expert is split over DP x TP ranks; with it each
    rank holds whole experts, 160 // 8 = 20 of them at EP 8 (expert_map_manager.py determine_expert_map), the
    first ranks one more when they do not divide (160 over 3: 54, 53, 53). Attention, embeddings and the router
    stay whole on every DP engine."""
    from kvbudget.parallel import local_experts, stages

    spec = kvbudget.load_model(CODER)
    fmt = spec.weight_format
    assert spec.num_experts == 160 and fmt is not None
    whole = dict(stages(spec, fmt)[0].weights_by_role)
    ep8 = dict(stages(spec, fmt, 1, 1, 8, True)[0].weights_by_role)
    dp8 = dict(stages(spec, fmt, 1, 1, 8, False)[0].weights_by_role)
    assert ep8["experts"] * 8 == whole["experts"]
    assert dp8["experts"] == dict(stages(spec, fmt, 8)[0].weights_by_role)["experts"]  # split as TP 8 splits it
    for role in ("attention", "embeddings", "lm_head", "router"):
        assert ep8[role] == dp8[role] == whole[role]
    assert (local_experts(160, 3), local_experts(160, 1), local_experts(128, 16)) == (54, 160, 8)
    ep3 = dict(stages(spec, fmt, 1, 1, 3, True)[0].weights_by_role)["experts"]
    assert ep3 == whole["experts"] // 160 * 54
    # TP 2 within each of 4 DP engines: EP 8, the attention split by TP 2 only
    tp2 = dict(stages(spec, fmt, 2, 1, 4, True)[0].weights_by_role)
    assert tp2["experts"] == ep8["experts"] and tp2["attention"] == dict(stages(spec, fmt, 2)[0].weights_by_role)["attention"]
    # a dense model is the same on every DP engine, with or without the switch
    llama = kvbudget.load_model(LLAMA8)
    assert stages(llama, llama.weight_format, 1, 1, 4, True)[0].weights_bytes == stages(llama, llama.weight_format)[0].weights_bytes  # type: ignore[arg-type]


def test_expert_parallel_command_plan_and_launch() -> None:
    """The published H20 runs (tests/data/vllm_logs/v0.10.1dev_h20x8_qwen3-coder-480b-fp8_dp8_*): -dp=8
    --enable-expert-parallel loads 67.61 GiB per GPU (20 experts of 160, the rest whole), not the 449 GiB of every
    expert; the flag is read without a warning and the launch command carries it, with the DP engines it spans."""
    from kvbudget.engines.vllm.launch import vllm_argv

    cmd = parse_vllm_command(f"vllm serve {CODER} -dp=8 --enable-expert-parallel --max-model-len 262144")
    s = cmd.settings
    assert s.enable_expert_parallel and s.data_parallel_size == 8 and not cmd.warnings
    assert not parse_vllm_command(f"vllm serve {CODER} --enable-expert-parallel --disable-expert-parallel").settings.enable_expert_parallel
    p = plan(kvbudget.load_model(CODER), custom_gpu(round(139.8 * GiB)), replace(s, version="0.10.1"))
    assert round(p.model_loading_bytes / GiB, 2) == 67.61 and p.ep == 8
    off = plan(kvbudget.load_model(CODER), custom_gpu(round(139.8 * GiB)), replace(s, version="0.10.1", data_parallel_size=1))
    assert off.weights_bytes > 6 * p.weights_bytes and off.ep == 1 and not off.starts
    assert vllm_argv(CODER, s)[-3:] == ["--data-parallel-size", "8", "--enable-expert-parallel"]
    assert "--enable-expert-parallel" not in vllm_argv(CODER, replace(s, enable_expert_parallel=False))


def test_fit_expert_parallel_runs_one_pod_of_every_dp_engine(capsys: pytest.CaptureFixture[str]) -> None:
    """fit --dp 4 (with or without --enable-expert-parallel): one command starts the 4 engines, whose MoE experts
    are shared over them, so the manifest is one pod of 4 GPUs; 4 separate servers would each hold every expert."""
    import json

    from kvbudget.cli import main

    args = ["fit", "Qwen/Qwen3-30B-A3B", "--gpu", "L40S", "--context", "8192", "--dp", "4", "--json"]
    assert main([*args, "--enable-expert-parallel"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ep"] == 4 and doc["dp"] == 4
    assert doc["launch"]["command"].endswith("--data-parallel-size 4 --enable-expert-parallel")
    assert "replicas: 1\n" in doc["launch"]["kubernetes"] and "nvidia.com/gpu: 4}" in doc["launch"]["kubernetes"]
    assert main(args) == 0
    plain = json.loads(capsys.readouterr().out)
    assert plain["ep"] == 1 and "replicas: 1\n" in plain["launch"]["kubernetes"]
    assert plain["launch"]["command"].endswith("--data-parallel-size 4")
    # the experts are shared over the 4 engines either way: the same weights per GPU
    assert plain["memory"]["weights_bytes"] == pytest.approx(doc["memory"]["weights_bytes"], rel=0.001)


_UNMODELLED_FLAGS = [
    # #11: n-gram proposers take no memory and MTP is modelled (tests/test_speculative.py); an EAGLE head is not
    ("--speculative-config '{\"method\": \"eagle\", \"model\": \"yuhuili/EAGLE-LLaMA3.1-Instruct-8B\", "
     "\"num_speculative_tokens\": 4}'", "--speculative-config", "draft model"),
    ("--speculative-model meta-llama/Llama-3.2-1B --num-speculative-tokens 5", "--speculative-model", "draft model"),
    ("--speculative-model meta-llama/Llama-3.2-1B --num-speculative-tokens 5", "--num-speculative-tokens", "draft model"),
    ("--enable-lora --enable-tower-connector-lora", "--enable-tower-connector-lora", "LoRA"),
    ("--enable-lora --enable-lora-bias", "--enable-lora-bias", "LoRA"),
    ("--offload-group-size 4", "--offload-group-size", "host memory"),
    # --enable-eplb, --decode-context-parallel-size, --kv-transfer-config, --kv-offloading-size, --mm-encoder-tp-mode
    # and --mm-ipc-gpu-memory-gb are modelled: tests/test_vllm_unmodelled.py
]


@pytest.mark.parametrize(("flags", "flag", "what"), _UNMODELLED_FLAGS)
def test_unmodelled_flags_are_named_by_explain_and_check(flags: str, flag: str, what: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A flag whose GPU memory kvbudget does not model: explain and check print one warning naming it."""
    import shlex

    from kvbudget.cli import main

    said = f"warning: {flag}: kvbudget does not model the memory it takes ("
    command = f"vllm serve {LLAMA8} --max-model-len 8192 {flags}"
    assert main(["explain", "--gpu", "H100", "--", *shlex.split(command)]) == 0
    out = capsys.readouterr().out  # a long warning wraps: its line goes on indented
    assert out.count(said) == 1 and what in out.split(said)[1].split(")")[0].replace("\n ", ""), out
    warnings = parse_vllm_command(command).warnings
    assert sum(w.startswith(f"{flag}: kvbudget does not model the memory it takes (") for w in warnings) == 1, warnings
    log = tmp_path / "run.log"
    log.write_text(f"$ {command}\nINFO Available KV cache memory: 56.15 GiB\nINFO GPU KV cache size: 459,984 tokens\n",
                   encoding="utf-8")
    assert main(["check", str(log), "--gpu", "H100"]) == 0
    out = capsys.readouterr().out
    assert out.count(said) == 1, out


def test_flags_that_leave_memory_as_it_is_are_not_warned() -> None:
    for flags in ("--disable-lora", "--mm-encoder-tp-mode weights", "--mm-ipc-gpu-memory-gb 0", "--offload-group-size 0",
                  "--no-skip-mm-profiling", "--disable-eplb", "--decode-context-parallel-size 1", "--async-scheduling",
                  "--no-async-scheduling", "--cpu-offload-gb 4", "--enable-expert-parallel"):
        assert not parse_vllm_command(f"vllm serve {LLAMA8} {flags}").warnings, flags
    # --async-scheduling: modelled (the in-flight batches a sliding window reserves), on every release line
    assert not parse_vllm_command(f"vllm serve {LLAMA8} --async-scheduling", VllmSettings(version="0.11.0")).warnings


def test_async_scheduling_sets_the_in_flight_batches_sliding_windows_reserve() -> None:
    """vLLM 0.33.0 config/vllm.py max_concurrent_batches: async scheduling (its default, V2 model runner) keeps
    pp + 1 batches in flight, without it pp; before 0.21 async was opt-in (2 batches at pp 1). A sliding window
    reserves window - 1 + in-flight tokens, so gemma-3's sliding layers need more blocks per request with more."""
    gemma = kvbudget.load_model("google/gemma-3-27b-it")
    h200 = kvbudget.find_gpu("H200")

    def in_flight(command: str) -> int:
        cmd = parse_vllm_command(f"vllm serve google/gemma-3-27b-it --max-model-len 32768 {command}")
        return plan(gemma, h200, cmd.settings).in_flight_tokens

    tokens = plan(gemma, h200, VllmSettings(max_model_len=32768)).max_num_batched_tokens
    assert in_flight("") == 2 * tokens  # async by default: 1 + 1
    assert in_flight("--no-async-scheduling") == tokens
    assert in_flight("-pp 2") == 3 * tokens and in_flight("-pp 2 --no-async-scheduling") == 2 * tokens
    old = VllmSettings(version="0.11.0", max_model_len=32768)
    assert plan(gemma, h200, old).in_flight_tokens == old_tokens(gemma, h200, old)
    assert plan(gemma, h200, replace(old, async_scheduling=True)).in_flight_tokens == 2 * old_tokens(gemma, h200, old)
    more = plan(gemma, h200, VllmSettings(max_model_len=32768)).blocks_per_request
    less = plan(gemma, h200, VllmSettings(max_model_len=32768, async_scheduling=False)).blocks_per_request
    assert more > less


def old_tokens(spec: object, gpu: object, s: VllmSettings) -> int:
    return plan(spec, gpu, s).max_num_batched_tokens  # type: ignore[arg-type]


def test_mla_block_size_follows_the_attention_backend_of_the_gpu_and_release() -> None:
    """vLLM picks the KV block size of an MLA model's backend: FlashMLA's 64 on Hopper and CUTLASS MLA's 128 on
    Blackwell in 0.8-0.20 (platforms/cuda.py of 0.8.5 / 0.10.1), FlashInfer MLA's 32 on Blackwell from 0.21
    (0.33.0 _get_backend_priorities); 16 elsewhere, and --block-size wins."""
    spec = kvbudget.load_model("deepseek-ai/DeepSeek-V2-Lite-Chat")
    cases = [("H100", "current", None, 16), ("H100", "0.10.1", None, 64), ("B200", "0.10.1", None, 128),
             ("B200", "current", None, 32), ("A100-80GB", "0.10.1", None, 16), ("B200", "current", 64, 64)]
    for gpu, version, asked, block in cases:
        p = plan(spec, kvbudget.find_gpu(gpu), VllmSettings(version=version, max_model_len=8192, block_size=asked))
        assert p.block_size == block, (gpu, version, asked, p.block_size)
        assert p.kv_cache_tokens % block == 0
        assert (f"sets the KV block size to {block}" in " ".join(p.notes)) == (block != 16 and asked is None)
    llama = plan(kvbudget.load_model("llama-3.1-8b"), kvbudget.find_gpu("B200"), VllmSettings(max_model_len=8192))
    assert llama.block_size == 16  # not an MLA model


def test_a_stop_after_sizing_for_something_else_is_not_a_memory_outcome() -> None:
    sized = ("INFO [gpu_worker.py:1] Available KV cache memory: 41.21 GiB\n"
             "INFO [kv_cache_utils.py:1] GPU KV cache size: 225,056 tokens\n"
             "ERROR [core.py:1108] EngineCore failed to start.\n")
    other = parse_vllm_log(sized + "torch.AcceleratorError: CUDA error: operation not permitted\n")
    assert other.started and other.error is None
    assert other.other_failure == "torch.AcceleratorError: CUDA error: operation not permitted"
    oom = parse_vllm_log(sized + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    assert not oom.started and oom.other_failure is None
    # before the KV cache was sized, a failure is the run's outcome whatever its cause
    early = parse_vllm_log("INFO Model loading took 27.57 GiB\nERROR EngineCore failed to start.\n"
                           "RuntimeError: something else\n")
    assert not early.started and early.other_failure is None


def test_kv_cache_dtype_as_each_release_takes_it() -> None:
    """--kv-cache-dtype is checked as written against the release's values (config/cache.py CacheDType: 0.8.5
    auto/fp8/fp8_e4m3/fp8_e5m2, fp8_inc by 0.10.1, bfloat16 in 0.11.0, float16 in 0.18.0; 0.33.0 matches names
    case-sensitively, is_known_kv_cache_dtype). 'half', 'float32' and 'FP8' were planned (a float32 cache at 4 bytes
    an element, exit 0) where vLLM stops at start-up."""
    def kv(value: str, version: str | None = None) -> str:
        base = VllmSettings(version=version) if version else None
        return parse_vllm_command(f"vllm serve m --kv-cache-dtype {value}", base).settings.kv_cache_dtype

    assert kv("fp8") == "fp8" and kv("float16") == "float16" and kv("fp8_e5m2", "0.6.3") == "fp8_e5m2"
    assert kv("bfloat16", "0.11.0") == "bfloat16" and kv("fp8_inc", "0.10.1") == "fp8_inc"
    for value, version, words in [("float32", None, "not a KV-cache dtype vLLM 0.33 takes, it stops at start-up"),
                                  ("half", None, "names are matched as written: float16"),
                                  ("FP8", None, "names are matched as written: fp8"),
                                  ("float16", "0.17.0", "vLLM 0.17 does not take it (added in 0.18)"),
                                  ("bfloat16", "0.10.1", "vLLM 0.10 does not take it (added in 0.11)"),
                                  ("turboquant_k8v4", None, "kvbudget does not size this KV-cache format")]:
        with pytest.raises(InputError, match=re.escape(words)):
            kv(value, version)


def test_mla_kv_dtype_needs_an_mla_backend() -> None:
    """An MLA model's backend is one of vLLM's MLA backends (v1/attention/backends/mla/*.py
    supported_kv_cache_dtypes): none lists fp8_e5m2 or nvfp4 (0.12-0.33), bfloat16 is listed from 0.15, and up to
    0.17 FP8 only by FlashMLA (compute capability 9.x/10.x), CUTLASS MLA and FlashInfer MLA (10.x); Triton MLA takes
    FP8 on every GPU from 0.18. Each refused case was planned, exit 0."""
    with pytest.raises(InputError, match="no MLA attention backend takes nvfp4"):
        _plan("deepseek-v2-lite", "B200", kv_cache_dtype="nvfp4", max_model_len=8192)
    with pytest.raises(InputError, match="no MLA attention backend takes fp8_e5m2"):
        _plan("deepseek-v2-lite", "H100", kv_cache_dtype="fp8_e5m2", max_model_len=8192)
    with pytest.raises(InputError, match=r"need compute capability 9\.x or 10\.x"):
        _plan("deepseek-v2-lite", "A100-SXM4-40GB", kv_cache_dtype="fp8", max_model_len=8192, version="0.14.0")
    with pytest.raises(InputError, match=r"take bfloat16 from 0\.15"):
        _plan("deepseek-v2-lite", "H100", kv_cache_dtype="bfloat16", max_model_len=8192, version="0.14.0")
    assert _plan("deepseek-v2-lite", "H100", kv_cache_dtype="fp8", max_model_len=8192, version="0.14.0").starts
    assert _plan("deepseek-v2-lite", "A100-SXM4-40GB", kv_cache_dtype="fp8", max_model_len=8192, version="0.18.0").starts
    assert _plan("deepseek-v2-lite", "A100-SXM4-40GB", kv_cache_dtype="fp8_e5m2", max_model_len=8192, version="0.11.0").starts


def test_v0_stops_with_its_own_message_not_v1s() -> None:
    """vLLM V0 (worker/worker.py raise_if_cache_size_invalid, the same text in 0.7.3, 0.8.5 and 0.10.1) stops
    with "The model's max seq len (N) is larger than the maximum number of tokens that can be stored in KV cache
    (block_size x num_gpu_blocks)", and no estimated length: the published 0.6.4 RTX 3090 log prints exactly that
    (tests/data/vllm_logs/v0.6.4_rtx3090_llama3.1-8b_len29000_fail.json names its URL). Its own figures: 1,478
    blocks x 16 = 23,648 tokens < 29,000."""
    from pathlib import Path

    from kvbudget.engines.vllm.check import check_log

    path = Path(__file__).parent / "data" / "vllm_logs" / "v0.6.4_rtx3090_llama3.1-8b_len29000_fail.log"
    logged = next(line.strip() for line in path.read_text().splitlines() if "stored in KV cache" in line)
    result = check_log(path.read_text(), model="llama-3.1-8b")
    assert result.log.num_gpu_blocks == 1478 and 1478 * 16 == 23648
    assert not result.plan.starts and result.plan.error == logged
    assert f"ValueError: {logged}" in result.plan.log_lines
    # from the log's rounded "available" figure one block more: the same message with its own 1,479 x 16 tokens
    given = result.given_available
    assert given is not None and given.error == logged.replace("(23648)", "(23664)")


@pytest.mark.parametrize("version", ["0.34.0", "0.111", "1.0.0", "v2.1"])
def test_a_release_past_the_newest_read_is_said(version: str) -> None:
    # 0.33.0 is the newest release whose sources kvbudget reads (settings.NEWEST_MINOR); a later number (or a typo
    # such as 0.111 for 0.11.1) is planned with its rules, and the plan says so instead of passing it silently
    from kvbudget.engines.vllm.settings import NEWEST_MINOR

    p = plan(kvbudget.load_model(LLAMA8), kvbudget.find_gpu("H100"), VllmSettings(version=version))
    assert any("newer than the newest release" in n and f"0.{NEWEST_MINOR}.0" in n for n in p.notes)
    q = plan(kvbudget.load_model(LLAMA8), kvbudget.find_gpu("H100"), VllmSettings(version="0.33.0"))
    assert not any("newer than the newest" in n for n in q.notes)
    assert p.available_kv_cache_bytes == q.available_kv_cache_bytes


def test_a_load_that_fails_shows_no_kv_memory(capsys: pytest.CaptureFixture[str]) -> None:
    # Llama-3.3-70B in bf16 at TP 2 on L40S: 65.74 GiB of weights a rank > 44.52 GiB, so torch stops while loading
    # (before vLLM sizes any KV cache); the table said "-26.62 GiB" of KV memory, a figure vLLM never prints
    from kvbudget.cli import main

    p = plan(kvbudget.load_model("meta-llama/Llama-3.3-70B-Instruct"), kvbudget.find_gpu("L40S"),
             VllmSettings(tensor_parallel_size=2, max_model_len=32768))
    assert p.load_fails and not p.starts and p.model_loading_bytes > p.total_bytes
    assert main(["fit", "llama-3.3-70b", "--gpu", "L40S", "--num-gpus", "2", "--context", "32768"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("= available KV cache memory"))
    assert "none" in row and "loading stops first" in row and "-" not in row.split("memory", 1)[1].split()[0]
    ok = plan(kvbudget.load_model(LLAMA8), kvbudget.find_gpu("L40S"), VllmSettings(max_model_len=32768))
    assert not ok.load_fails


@pytest.mark.parametrize("model", ["meta-llama/Llama-3.1-70B-Instruct", "deepseek-ai/DeepSeek-V3", "google/gemma-3-27b-it",
                                   "Qwen/Qwen3-Next-80B-A3B-Instruct", "openai/gpt-oss-120b"])
def test_a_plan_without_its_explanation_has_the_same_figures(model: str) -> None:
    # the plan search asks for the figures alone (explained=False): everything but the provenance, the notes and the
    # log lines is the explained plan's, whichever GPU, layout, precision and release line, and whether vLLM starts or not
    spec = kvbudget.load_model(model)
    seen = set()
    for gpu in ("H100", "A100-40GB", "L4", "T4", "MI300X", "B200", "RTX-4090"):
        for version in ("current", "0.10.1", "v0"):
            for tp, pp in ((1, 1), (2, 2), (8, 1)):
                for quantization, kv in ((None, "auto"), ("fp8", "fp8")):
                    settings = VllmSettings(version=version, max_model_len=8192, tensor_parallel_size=tp,
                                            pipeline_parallel_size=pp, quantization=quantization, kv_cache_dtype=kv)
                    try:
                        full = plan(spec, kvbudget.find_gpu(gpu), settings)
                    except InputError as exc:
                        with pytest.raises(InputError, match=re.escape(str(exc))):
                            plan(spec, kvbudget.find_gpu(gpu), settings, explained=False)
                        continue
                    lean = plan(spec, kvbudget.find_gpu(gpu), settings, explained=False)
                    assert lean.provenance == () and lean.log_lines == () and lean.notes == ()
                    assert replace(full, provenance=(), log_lines=(), notes=()) == lean, (gpu, version, tp, pp, quantization)
                    seen.add(full.starts)
    assert seen == {True, False}


def test_the_settings_part_that_needs_no_gpu_keeps_vllms_order_of_refusals_and_notes() -> None:
    # policy.settled works out what does not depend on the GPU once per settings; plan replays it among the GPU's
    # checks. A KV-cache dtype no MLA backend of 0.13 holds on an A100 is refused before a --max-model-len past the
    # model's (both refused), the latter alone on an H100; the notes keep their order (block size, then NCCL)
    from kvbudget.engines.vllm.policy import plan, settled
    from kvbudget.engines.vllm.settings import VllmSettings

    spec = kvbudget.load_model("deepseek-ai/DeepSeek-V3")
    too_long = VllmSettings(version="0.13.0", kv_cache_dtype="fp8", max_model_len=10**7, tensor_parallel_size=8)
    with pytest.raises(InputError, match="No valid attention backend found"):
        plan(spec, kvbudget.find_gpu("A100-80GB"), too_long)
    for _ in range(2):  # the refusal is kept with the settled settings and raised again, the same line
        with pytest.raises(InputError, match="greater than the derived max_model_len"):
            plan(spec, kvbudget.find_gpu("H100"), too_long)
    assert settled(spec, too_long) is settled(spec, replace(too_long))  # one record per settings
    notes = plan(spec, kvbudget.find_gpu("H100"), replace(too_long, max_model_len=8192)).notes
    assert notes[0].startswith("MLA attention on H100") and notes[1].startswith("NCCL at 8 ranks")
