"""TensorRT-LLM's MoE expert parallelism and attention data parallelism (issue #11), from its sources (read on
GitHub, NVIDIA/TensorRT-LLM, main in 2026): ``tensorrt_llm/mapping.py`` Mapping.__init__ (moe_tp x moe_ep = tp;
neither given: moe_tp = tp, moe_ep = 1), ``_torch/modules/fused_moe/fused_moe_cutlass.py`` (num_experts //
moe_ep_size experts per rank, intermediate_size // moe_tp_size each), ``_torch/pyexecutor/resource_manager.py``
get_cache_size_per_token (tp_size = 1 with enable_attention_dp) and ``commands/serve.py`` (--ep_size /
--moe_expert_parallel_size; no flag for moe_tensor_parallel_size or enable_attention_dp)."""

from __future__ import annotations

from pathlib import Path

import pytest

import kvbudget
from kvbudget.engines import trtllm
from kvbudget.engines.cmdscan import parse_other_command
from kvbudget.units import InputError

QWEN = "Qwen/Qwen3-30B-A3B"  # 48 layers, 128 experts of 3 x 2048 x 768 in bf16, 4 KV heads of 128
DSV3 = "deepseek-ai/DeepSeek-V3"  # 58 MoE layers of 256 experts, FP8 with 128 x 128 block scales; MLA


def _roles(name: str, **kw: object) -> tuple[dict[str, int], trtllm.TrtllmPlan]:
    from kvbudget.engines.trtllm.policy import moe_sizes
    from kvbudget.parallel import stages

    spec = kvbudget.load_model(name)
    s = trtllm.TrtllmSettings(**kw)  # type: ignore[arg-type]
    p = trtllm.plan(spec, kvbudget.find_gpu("H200"), s)
    ep, mtp = moe_sizes(s)
    attn = 1 if s.enable_attention_dp else s.tp
    assert spec.weight_format is not None
    stage = stages(spec, spec.weight_format, attn, 1, s.tp // attn, ep > 1, mtp if ep > 1 else 1)[0]
    assert stage.weights_bytes == p.weights_bytes
    return dict(stage.weights_by_role), p


def test_qwen3_moe_expert_parallel_by_hand() -> None:
    """Qwen3-30B-A3B at tp 8. Every expert: 3 x 2048 x 768 x 2 bytes = 9,437,184; x 128 x 48 layers =
    57,982,058,496. EP 8: 128 // 8 = 16 whole experts a rank, 16 x 48 x 9,437,184 = 7,247,757,312, the same bytes
    as every expert split 8 ways (768 // 8) or EP 4 x MoE-TP 2. Attention: (2048 x 4096 x 2 + 2048 x 512 x 2) x 2
    bytes x 48 = 1,811,939,328 whole; with attention DP each rank holds it whole, without it a TP share. KV per
    token: 2 x 128 x 4 heads x 48 x 2 bytes = 98,304 with attention DP (each rank every head of its requests),
    4 x 128 // 8 = 64 a rank without it: 12,288."""
    tp8, p_tp = _roles(QWEN, tp=8)
    ep8, p_ep = _roles(QWEN, tp=8, moe_ep=8)
    mixed, p_mixed = _roles(QWEN, tp=8, moe_ep=4)
    adp, p_adp = _roles(QWEN, tp=8, moe_ep=8, enable_attention_dp=True)
    assert (p_tp.ep, p_tp.moe_tp, p_ep.ep, p_ep.moe_tp, p_mixed.ep, p_mixed.moe_tp) == (1, 8, 8, 1, 4, 2)
    assert ep8["experts"] == tp8["experts"] == mixed["experts"] == adp["experts"] == 16 * 48 * 9_437_184 == 7_247_757_312
    assert adp["attention"] == 1_811_939_328 and ep8["attention"] == tp8["attention"] < adp["attention"]
    assert adp["embeddings"] == adp["lm_head"] == 151936 * 2048 * 2  # whole on every attention-DP rank
    assert (p_tp.per_token_bytes, p_ep.per_token_bytes, p_adp.per_token_bytes) == (12_288, 12_288, 98_304)
    assert p_adp.attention_dp and any("server holds 8 x the requests" in n for n in p_adp.notes)


def test_deepseek_v3_expert_parallel_by_hand() -> None:
    """DeepSeek-V3 (FP8, 128 x 128 blocks) at tp 8, EP 8: one expert is 3 x 7168 x 2048 FP8 bytes = 44,040,192
    plus 3 x 56 x 16 fp32 block scales = 10,752, so 44,050,944; 256 // 8 = 32 a rank over 58 MoE layers:
    81,758,552,064 bytes, an eighth of all of them. MLA's latent KV (512 + 64) x 61 layers x 2 bytes = 70,272 a
    token is not split by TP, so attention DP leaves it as it is; the attention weights, whole, are 11,416,215,392."""
    ep8, p = _roles(DSV3, tp=8, moe_ep=8)
    assert ep8["experts"] == 32 * 58 * 44_050_944 == 81_758_552_064
    adp, p_adp = _roles(DSV3, tp=8, moe_ep=8, enable_attention_dp=True)
    assert adp["experts"] == ep8["experts"] and adp["attention"] == 11_416_215_392 > 4 * ep8["attention"]  # whole; MLA's low-rank A projections are whole at TP too
    assert p.per_token_bytes == p_adp.per_token_bytes == 70_272
    assert p_adp.weights_bytes > p.weights_bytes and p_adp.max_tokens < p.max_tokens


def test_mapping_defaults_and_refusals() -> None:
    """Mapping: one size given, the other is tp // it; their product must be tp."""
    from kvbudget.engines.trtllm.policy import moe_sizes

    s = trtllm.TrtllmSettings
    assert moe_sizes(s(tp=8)) == (1, 8) and moe_sizes(s(tp=8, moe_ep=2)) == (2, 4)
    assert moe_sizes(s(tp=8, moe_tp=2)) == (4, 2) and moe_sizes(s(tp=8, moe_ep=8, moe_tp=1)) == (8, 1)
    for bad in (s(tp=8, moe_ep=3), s(tp=8, moe_ep=4, moe_tp=4), s(tp=1, moe_ep=2)):
        with pytest.raises(InputError, match="moe_tensor_parallel_size x moe_expert_parallel_size = tp_size"):
            moe_sizes(bad)


def test_command_options_file_and_launch(tmp_path: Path) -> None:
    """--ep_size is a trtllm-serve flag; moe_tensor_parallel_size and enable_attention_dp come from the options
    file (which overrides the flags); the launch command writes --ep_size and names the options file the rest
    needs."""
    from kvbudget.engines.trtllm.launch import options_note, trtllm_argv

    options = tmp_path / "o.yaml"
    options.write_text("enable_attention_dp: true\nmoe_tensor_parallel_size: 1\n")
    c = parse_other_command(f"trtllm-serve {QWEN} --tp_size 8 --ep_size 8 --config {options}")
    s = c.trtllm
    assert s is not None and not c.warnings
    assert (s.tp, s.moe_ep, s.moe_tp, s.enable_attention_dp) == (8, 8, 1, True)
    long = parse_other_command(f"trtllm-serve {QWEN} --tensor_parallel_size 4 --moe_expert_parallel_size 2").trtllm
    assert long is not None and (long.tp, long.moe_ep, long.moe_tp) == (4, 2, None)
    options.write_text("enable_attention_dp: 1\n")
    with pytest.raises(InputError, match="enable_attention_dp 1 is not true or false"):
        parse_other_command(f"trtllm-serve {QWEN} --config {options}")
    argv = trtllm_argv(QWEN, s)
    assert argv[argv.index("--ep_size") + 1] == "8" and argv[-2:] == ["--config", "llm_api_options.yaml"]
    assert options_note(s).endswith("moe_tensor_parallel_size: 1; enable_attention_dp: true")
    plain = trtllm.TrtllmSettings(tp=8)
    assert "--ep_size" not in trtllm_argv(QWEN, plain) and "--config" not in trtllm_argv(QWEN, plain)


def test_fit_options() -> None:
    """kvbudget fit --engine trtllm --moe-expert-parallel-size 8 --enable-attention-dp: the settings carry them."""
    r = kvbudget.fit(QWEN, gpu="H100", engine="trtllm", tp=8, context=8192,
                     options={"moe_expert_parallel_size": 8, "enable_attention_dp": True})
    assert r.settings.moe_ep == 8 and r.settings.enable_attention_dp
    assert "--ep_size" in r.launch.argv


def test_a_checkpoints_fp8_kv_cache_is_what_auto_gives_under_tensorrt_llm(tmp_path: Path) -> None:
    """A ModelOpt checkpoint with kv_cache_quant_algo FP8: TensorRT-LLM's "auto" KV cache is FP8 (llmapi/llm_utils.py,
    "Setting kv_cache_quant_algo=... from HF quant config"), half the bytes per token of the bf16 one; vLLM's auto
    is the model's dtype before 0.14 and the checkpoint's fp8_e4m3 from 0.14 (utils/torch_utils.py
    resolve_kv_cache_dtype_string), and an explicit kv_cache_dtype wins."""
    import json

    from kvbudget.model import catalog
    from kvbudget.model.resolve import load_model

    config = dict(catalog.find("llama-3.1-8b").config)  # type: ignore[union-attr]
    config["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    spec = load_model(str(tmp_path))
    assert spec.weight_format is not None and spec.weight_format.kv_cache == "fp8"
    h100 = kvbudget.find_gpu("H100")
    auto = trtllm.plan(spec, h100, trtllm.TrtllmSettings(max_seq_len=8192))
    bf16 = trtllm.plan(spec, h100, trtllm.TrtllmSettings(max_seq_len=8192, kv_cache_dtype="bf16"))
    # Llama-3.1-8B: 2 x 32 layers x 8 KV heads x 128 x 1 byte = 65,536 B per token in FP8, 131,072 in bf16
    assert (auto.per_token_bytes, bf16.per_token_bytes) == (65_536, 131_072)
    assert any("kv_cache_quant_algo FP8" in n for n in auto.notes)
    from kvbudget.engines import vllm

    assert vllm.plan(spec, h100, vllm.VllmSettings(max_model_len=8192, version="0.13.0")).kv_cache_dtype == "bf16"
    assert vllm.plan(spec, h100, vllm.VllmSettings(max_model_len=8192)).kv_cache_dtype == "fp8_e4m3"
    config["quantization_config"] = {"quant_method": "compressed-tensors", "kv_cache_scheme": {"num_bits": 8, "type": "float"},
                                     "config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float"}}}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert load_model(str(tmp_path)).weight_format.kv_cache == "fp8"  # type: ignore[union-attr]
