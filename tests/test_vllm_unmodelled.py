"""Flags kvbudget once only warned of, now modelled from vLLM's source (issue #11): --enable-eplb with its redundant
experts (eplb.py), --decode-context-parallel-size (context_parallel.py), --mm-encoder-tp-mode data and
--mm-ipc-gpu-memory-gb (mm_memory.py), and KV connectors (kv_connector.py). Every figure is checked against a hand
computation from the model's config.json and the vLLM source file named in the module."""

from __future__ import annotations

import pytest

import kvbudget
from kvbudget._record import replace
from kvbudget.engines.vllm.command import parse_vllm_command
from kvbudget.engines.vllm.eplb import eplb_memory
from kvbudget.engines.vllm.policy import plan, weight_format
from kvbudget.engines.vllm.settings import VllmSettings
from kvbudget.units import GiB, InputError

H200 = kvbudget.find_gpu("H200")
H100 = kvbudget.find_gpu("H100")
V3 = "deepseek-ai/DeepSeek-V3"
QWEN_MOE = "Qwen/Qwen3-30B-A3B"


def _plan(model: str, gpu: object = H100, **kw: object) -> kvbudget.engines.vllm.policy.VllmPlan:
    return plan(kvbudget.load_model(model), gpu, VllmSettings(**kw))  # type: ignore[arg-type]


# --- EPLB -------------------------------------------------------------------------------------------------------------

# DeepSeek-V3 config.json: hidden 7168, moe_intermediate_size 2048, 256 routed experts, 61 layers of which the first 3
# (first_k_dense_replace) are dense, fp8 weights with 128 x 128 fp32 block scales. One expert: gate, up and down
# projections of 2048 x 7168 at 1 B, plus 16 x 56 scales of 4 B each.
V3_EXPERT = 3 * 2048 * 7168 + 3 * 16 * 56 * 4  # 44,050,944 B
V3_MOE_LAYERS = 58


def test_eplb_redundant_experts_per_rank_deepseek_v3() -> None:
    """EP 8 (TP 8) with 32 redundant experts: 256 + 32 = 288 physical, 36 per rank instead of 32 (fused_moe/layer.py
    determine_expert_counts, expert_map_manager.py determine_expert_map): 4 more experts in each of the 58 MoE layers.
    From 0.20 EPLB's state is in 'Model loading took' too (eplb_state.py add_model inside load_model's profiler):
    physical_to_logical (58 x 288 int64), logical_to_physical (58 x 256 x 1024 int64), replica counts and last loads
    (58 x 256 int64 each), the load pass (58 x 288 int32), the 1000-step window (1000 x 58 x 288 int32), and the
    transfer buffer, one layer's 36 experts."""
    base = dict(tensor_parallel_size=8, enable_expert_parallel=True, max_model_len=32768)
    ep = _plan(V3, H200, **base)
    eplb = _plan(V3, H200, **base, enable_eplb=True, num_redundant_experts=32)
    redundant = 4 * V3_MOE_LAYERS * V3_EXPERT
    assert redundant == 10_219_819_008
    state = (58 * 288 * 8 + 58 * 256 * 1024 * 8 + 2 * 58 * 256 * 8 + 58 * 288 * 4 + 1000 * 58 * 288 * 4
             + 36 * V3_EXPERT)
    assert state == 1_774_722_816
    assert eplb.model_loading_bytes - ep.model_loading_bytes == redundant + state == eplb.eplb_bytes
    assert any("256 experts + 32 redundant = 288 physical over EP 8: 36 per rank" in n for n in eplb.notes)
    # the KV pool shrinks by what the rank holds more (same activation, graphs and non-torch memory)
    assert ep.available_kv_cache_bytes - eplb.available_kv_cache_bytes == redundant + state


def test_eplb_before_0_20_keeps_its_state_outside_the_figures() -> None:
    """0.9.2-0.19 build EPLB's state after 'Model loading took' and before the profiling baseline (no figure counts
    it); the redundant experts are weights the loader builds, counted in every release."""
    base = dict(tensor_parallel_size=8, enable_expert_parallel=True, max_model_len=32768, version="0.11.0")
    ep = _plan(V3, H200, **base)
    eplb = _plan(V3, H200, **base, enable_eplb=True, num_redundant_experts=32)
    assert eplb.model_loading_bytes - ep.model_loading_bytes == 4 * V3_MOE_LAYERS * V3_EXPERT
    assert any("outside vLLM's budget" in n for n in eplb.notes)


def test_eplb_qwen3_moe_ep8_and_the_profiling_buffer() -> None:
    """Qwen3-30B-A3B (hidden 2048, moe_intermediate_size 768, 128 experts, 48 MoE layers, bf16) at DP 8 x TP 1 with 32
    redundant: 160 physical, 20 per rank instead of 16; one expert 3 x 2048 x 768 x 2 B. The profiling run's dummy
    rearrangement (rebalance_execute.py) allocates one layer's 20 experts when the communicator needs the reservation
    (every backend but NIXL); 0.12-0.19 reuse the state's buffer; up to 0.11 it is allocated afresh."""
    spec = kvbudget.load_model(QWEN_MOE)
    expert = 3 * 2048 * 768 * 2
    s = VllmSettings(data_parallel_size=8, enable_expert_parallel=True, enable_eplb=True, num_redundant_experts=32,
                     eplb_communicator="torch_gloo")
    fmt = weight_format(spec, s)
    mem = eplb_memory(spec, fmt, s, 1, 1, 8)
    assert (mem.physical, mem.local_logical, mem.local_physical) == (160, 16, 20)
    assert mem.redundant_weights == (4 * 48 * expert,) and mem.layer_experts == (20 * expert,)
    assert mem.profile_buffer == (20 * expert,) and mem.state_counted
    assert eplb_memory(spec, fmt, replace(s, eplb_communicator="nixl"), 1, 1, 8).profile_buffer == (0,)
    unknown = eplb_memory(spec, fmt, replace(s, eplb_communicator=None), 1, 1, 8)
    assert unknown.profile_buffer == (0,) and unknown.communicator_unknown  # 0.22 on: NIXL if installed
    assert eplb_memory(spec, fmt, replace(s, version="0.15.0"), 1, 1, 8).profile_buffer == (0,)
    old = eplb_memory(spec, fmt, replace(s, version="0.10.1"), 1, 1, 8)
    assert old.profile_buffer == (20 * expert,) and not old.state_counted
    # an unknown communicator widens the band: the KV figures are an upper bound
    p = plan(spec, H100, replace(s, eplb_communicator=None, max_model_len=8192))
    assert "EPLB's profiling buffer without NIXL" in dict(p.provenance)["available_kv_cache_bytes"].band


@pytest.mark.parametrize(("kw", "said"), [
    (dict(tensor_parallel_size=8, enable_eplb=True), "needs --enable-expert-parallel"),
    (dict(enable_expert_parallel=True, enable_eplb=True), "tensor or data parallelism"),
    (dict(tensor_parallel_size=8, num_redundant_experts=8), "EPLB is not enabled"),
    (dict(tensor_parallel_size=8, enable_expert_parallel=True, enable_eplb=True, num_redundant_experts=1024),
     "at most 1023"),
    (dict(tensor_parallel_size=8, enable_expert_parallel=True, enable_eplb=True, version="0.9.1"), "from 0.9.2"),
])
def test_eplb_refusals(kw: dict[str, object], said: str) -> None:
    """config/parallel.py _validate_parallel_config (0.33.0) and eplb_state.py's MAX_EXPERT_REDUNDANCY."""
    with pytest.raises(InputError, match=said):
        _plan(QWEN_MOE, **kw)


def test_eplb_flags_are_read_in_every_form() -> None:
    """--eplb-config JSON (0.12 on), its dotted keys, and the 0.9.2-0.11 flags; no warning any more."""
    base = f"vllm serve {QWEN_MOE} -tp 8 --enable-expert-parallel --enable-eplb"
    for tail, version in (("--eplb-config '{\"num_redundant_experts\": 32, \"window_size\": 500}'", "current"),
                          ("--eplb-config.num_redundant_experts 32 --eplb-config.window_size 500", "current"),
                          ("--num-redundant-experts 32 --eplb-window-size 500", "0.10.1")):
        cmd = parse_vllm_command(f"{base} {tail}", VllmSettings(version=version))
        s = cmd.settings
        assert (s.enable_eplb, s.num_redundant_experts, s.eplb_window_size) == (True, 32, 500), tail
        assert not cmd.warnings, cmd.warnings
    assert not parse_vllm_command(f"vllm serve {QWEN_MOE} --disable-eplb").settings.enable_eplb


def test_eplb_on_a_dense_model_changes_nothing() -> None:
    """gpu_model_runner.py builds EPLB's state for a MixtureOfExperts model only."""
    base = dict(tensor_parallel_size=2, enable_expert_parallel=True, max_model_len=8192)
    assert _plan("Qwen/Qwen3-14B", **base, enable_eplb=True).available_kv_cache_bytes == \
        _plan("Qwen/Qwen3-14B", **base).available_kv_cache_bytes


# --- decode context parallelism ---------------------------------------------------------------------------------------


def test_dcp_shards_each_request_over_the_ranks_deepseek_v3() -> None:
    """MLA at TP 8, DCP 8, block 16 (0.33: FlashAttention MLA on Hopper keeps 16): a 32,768-token request takes
    cdiv(cdiv(32768, 8), 16) = 256 blocks of a rank's pool instead of 2,048 (kv_cache_interface.py
    FullAttentionSpec.max_memory_usage_bytes); the page and the pool are the same, so the concurrency is 8x and the
    printed tokens are int(concurrency x 32768) = blocks x 128."""
    base = dict(tensor_parallel_size=8, max_model_len=32768)
    one = _plan(V3, H200, **base)
    dcp = _plan(V3, H200, **base, decode_context_parallel_size=8)
    assert (one.blocks_per_request, dcp.blocks_per_request) == (2048, 256)
    assert dcp.num_gpu_blocks == one.num_gpu_blocks and dcp.bytes_per_block == one.bytes_per_block
    assert dcp.kv_cache_tokens == dcp.num_gpu_blocks * 128 and one.kv_cache_tokens == one.num_gpu_blocks * 16
    assert dcp.max_concurrency == pytest.approx(8 * one.max_concurrency)
    assert f"GPU KV cache size: {dcp.kv_cache_tokens:,} tokens" in dcp.log_lines[-1]


def test_dcp_on_the_0_10_2_to_0_20_line_multiplies_the_blocks() -> None:
    """0.10.2-0.20 print num_blocks x block_size x dcp (kv_cache_utils.py: 'Multiplying the GPU KV cache size by the
    dcp_world_size'); FlashMLA on Hopper makes the block 64."""
    p = _plan(V3, H200, tensor_parallel_size=8, max_model_len=32768, version="0.11.0", decode_context_parallel_size=4)
    assert p.block_size == 64 and p.kv_cache_tokens == p.num_gpu_blocks * 64 * 4
    assert p.blocks_per_request == -(-(32768 // 4) // 64)


@pytest.mark.parametrize(("kw", "said"), [
    (dict(tensor_parallel_size=8, decode_context_parallel_size=3), "divisible"),
    (dict(tensor_parallel_size=4, decode_context_parallel_size=2), "above"),  # 4 KV heads: TP must exceed them
    (dict(tensor_parallel_size=8, decode_context_parallel_size=4), "maximum 2"),  # 8 // 4 KV heads
    (dict(tensor_parallel_size=8, decode_context_parallel_size=2, version="0.10.1"), "from 0.10.2"),
])
def test_dcp_refusals(kw: dict[str, object], said: str) -> None:
    """Qwen3-235B-A22B (64 query heads, 4 KV heads): config/parallel.py (TP divisible by DCP) and config/model.py
    verify_with_parallel_config (GQA: TP above the KV heads, DCP at most TP // KV heads)."""
    with pytest.raises(InputError, match=said):
        _plan("Qwen/Qwen3-235B-A22B", **kw)


def test_dcp_gqa_within_the_limits() -> None:
    """TP 8 over 4 KV heads: each rank keeps one head (two ranks per head) and DCP 2 splits the tokens between them."""
    base = dict(tensor_parallel_size=8, max_model_len=32768)
    one = _plan("Qwen/Qwen3-235B-A22B", H200, **base)
    two = _plan("Qwen/Qwen3-235B-A22B", H200, **base, decode_context_parallel_size=2)
    assert (one.blocks_per_request, two.blocks_per_request) == (2048, 1024)
    assert two.kv_cache_tokens == 2 * one.kv_cache_tokens
    assert parse_vllm_command(f"vllm serve {V3} -tp 8 -dcp 8").settings.decode_context_parallel_size == 8


# --- the vision tower in data mode, and the multimodal IPC carve-out --------------------------------------------------

VL = "Qwen/Qwen2.5-VL-3B-Instruct"


def test_data_mode_holds_the_whole_vision_tower_on_each_rank() -> None:
    """Qwen2.5-VL-3B's vision_config: depth 32, hidden 1280, intermediate 3420, spatial merge 2 into out_hidden 2048,
    patch 14 x 14 x 2 frames x 3 channels. Its linear weights: 32 x (qkv 1280 x 3840 + proj 1280 x 1280 + gate, up,
    down 3 x 1280 x 3420) + merger 5120 x 5120 + 5120 x 2048 + patch embedding 3 x 2 x 14 x 14 x 1280 = 668,170,240
    parameters, 2 B each in bf16. In data mode (ReplicatedLinear) a TP-2 rank holds all of it instead of about half."""
    linear = 32 * (1280 * 3840 + 1280 * 1280 + 3 * 1280 * 3420) + 5120 * 5120 + 5120 * 2048 + 3 * 2 * 14 * 14 * 1280
    assert linear == 668_170_240
    weights = _plan(VL, tensor_parallel_size=2, max_model_len=8192)
    data = _plan(VL, tensor_parallel_size=2, max_model_len=8192, mm_encoder_tp_mode="data")
    extra = data.model_loading_bytes - weights.model_loading_bytes
    # the split half of the linear weights; the biases and norms (< 0.3% of the tower) are split or whole as in vLLM
    assert extra == pytest.approx(linear * 2 / 2, rel=0.01)
    assert any("whole on each of the 2 TP ranks" in n for n in data.notes)
    assert _plan(VL, max_model_len=8192, mm_encoder_tp_mode="data").model_loading_bytes == \
        _plan(VL, max_model_len=8192).model_loading_bytes  # one rank: nothing to replicate


def test_data_mode_falls_back_for_a_tower_that_does_not_take_it() -> None:
    """Gemma 3's SigLIP tower: no supports_encoder_tp_data, vLLM warns and runs weights mode (config/model.py)."""
    base = dict(tensor_parallel_size=2, max_model_len=8192)
    data = _plan("google/gemma-3-12b-it", **base, mm_encoder_tp_mode="data")
    assert data.model_loading_bytes == _plan("google/gemma-3-12b-it", **base).model_loading_bytes
    assert any("falls back to weights mode" in n for n in data.notes)


def test_mm_ipc_carves_the_kv_cache_after_the_logged_figure() -> None:
    """multimodal/gpu_ipc_memory.py reserve_mm_ipc_gpu_memory (0.27 on; gpu_worker.py in 0.25-0.26): int(1.5 x 2^30)
    comes off the KV cache memory after 'Available KV cache memory' is logged; a text-only model has no multimodal
    config and keeps it all; a reservation larger than the memory stops vLLM; 0.24 has no such flag."""
    base = dict(max_model_len=8192)
    plain = _plan(VL, **base)
    ipc = _plan(VL, **base, mm_ipc_bytes=int(1.5 * GiB))
    assert plain.available_kv_cache_bytes - ipc.available_kv_cache_bytes == int(1.5 * GiB) == ipc.mm_ipc_bytes
    assert ipc.num_gpu_blocks == ipc.available_kv_cache_bytes // ipc.bytes_per_block
    assert ipc.log_lines[1] == plain.log_lines[1]  # the logged "Available KV cache memory" is before the carve-out
    assert _plan("Qwen/Qwen3-14B", **base, mm_ipc_bytes=GiB).available_kv_cache_bytes == \
        _plan("Qwen/Qwen3-14B", **base).available_kv_cache_bytes
    full = _plan(VL, **base, mm_ipc_bytes=100 * GiB)
    assert not full.starts and full.error is not None and full.error.startswith("frontend multimodal GPU decoding reserves")
    with pytest.raises(InputError, match=r"from 0\.25"):
        _plan(VL, **base, mm_ipc_bytes=GiB, version="0.24.0")
    assert parse_vllm_command(f"vllm serve {VL} --mm-ipc-gpu-memory-gb 1.5").settings.mm_ipc_bytes == int(1.5 * GiB)


# --- KV connectors ----------------------------------------------------------------------------------------------------


def test_lmcache_buffer_is_outside_the_figures_of_0_10() -> None:
    """Qwen3-14B (40 layers, 8 KV heads of 128, bf16) with LMCacheConnectorV1 on 0.10.2: LMCache's staging buffer is
    2 x 40 x 256 x 8 x 128 x 2 B = 40 MiB (lmcache 0.3.3 gpu_connector.py), built in init_worker_distributed_environment,
    which 0.10's memory_profiling counts in no figure: the plan is the plan without the connector."""
    base = dict(version="0.10.2", max_model_len=32768, gpu_memory_utilization=0.9)
    a100 = kvbudget.find_gpu("A100-40GB")
    none = _plan("Qwen/Qwen3-14B", a100, **base)
    lmc = _plan("Qwen/Qwen3-14B", a100, **base, kv_connector="LMCacheConnectorV1")
    assert 2 * 40 * 256 * 8 * 128 * 2 == 40 * 2**20
    assert any("40 MiB, built before the model loads" in n for n in lmc.notes)
    assert (lmc.available_kv_cache_bytes, lmc.kv_cache_tokens) == (none.available_kv_cache_bytes, none.kv_cache_tokens)


def test_a_connector_without_hma_turns_the_hybrid_manager_off() -> None:
    """Gemma 3 (sliding-window layers): 0.20 turns the hybrid KV cache manager off for any connector; 0.22 on keeps it
    for a SupportsHMA connector (OffloadingConnector) and not for LMCacheConnectorV1 (config/vllm.py)."""
    base = dict(max_model_len=32768)
    model = "google/gemma-3-12b-it"
    hybrid = _plan(model, **base)
    assert {g.kind for g in hybrid.groups} == {"sliding_window", "full_attention"}
    assert {g.kind for g in _plan(model, **base, version="0.20.0", kv_connector="OffloadingConnector").groups} == \
        {"full_attention"}
    assert _plan(model, **base, kv_connector="OffloadingConnector").groups == hybrid.groups
    lmc = _plan(model, **base, kv_connector="LMCacheConnectorV1")
    assert {g.kind for g in lmc.groups} == {"full_attention"} and lmc.max_concurrency < hybrid.max_concurrency


def test_kv_offloading_flags_select_the_connector() -> None:
    """config/vllm.py _post_init_kv_transfer_config: native -> OffloadingConnector with cpu_bytes_to_use = GB x 2^30;
    lmcache -> LMCacheConnectorV1 (0.12-0.26) or LMCacheMPConnector (0.27 on)."""
    s = parse_vllm_command("vllm serve Qwen/Qwen3-14B --kv-offloading-size 16").settings
    assert (s.kv_connector, s.kv_offload_bytes) == ("OffloadingConnector", 16 * GiB)
    for version, name in (("0.20.0", "LMCacheConnectorV1"), ("current", "LMCacheMPConnector")):
        cmd = parse_vllm_command("vllm serve Qwen/Qwen3-14B --kv-offloading-size 16 --kv-offloading-backend lmcache",
                                 VllmSettings(version=version))
        assert cmd.settings.kv_connector == name and not cmd.warnings
    cmd = parse_vllm_command("vllm serve Qwen/Qwen3-14B --kv-transfer-config '{\"kv_connector\": \"NixlConnector\", "
                             "\"kv_role\": \"kv_both\"}'")
    assert cmd.settings.kv_connector == "NixlConnector" and not cmd.warnings
    with pytest.raises(InputError, match="JSON object"):
        parse_vllm_command("vllm serve Qwen/Qwen3-14B --kv-transfer-config nixl")
    with pytest.raises(InputError, match="native or lmcache"):
        parse_vllm_command("vllm serve Qwen/Qwen3-14B --kv-offloading-size 4 --kv-offloading-backend disk")


def test_an_unknown_connector_before_0_12_widens_the_band() -> None:
    """0.9-0.11 build the connector before the model loads: what NixlConnector allocates there is not modelled (the
    band says so); from 0.12 it is built after the KV cache is sized and no figure moves."""
    base = dict(max_model_len=8192, kv_connector="NixlConnector")
    old = _plan("Qwen/Qwen3-14B", **base, version="0.11.0")
    assert "NixlConnector KV connector's buffers" in dict(old.provenance)["available_kv_cache_bytes"].band
    new = _plan("Qwen/Qwen3-14B", **base)
    assert dict(new.provenance)["available_kv_cache_bytes"].band == ""
    assert new.available_kv_cache_bytes == _plan("Qwen/Qwen3-14B", max_model_len=8192).available_kv_cache_bytes
