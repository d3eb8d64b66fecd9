"""Catalog entries of the 2026 model families: Qwen3.5 (and Qwen3.6, read as the same architecture).

The configs are the copies vendored in github.com/ai-dynamo/aiconfigurator (aic-core/src/aiconfigurator_core/
model_configs/), each the named Hugging Face repo's config.json. Every figure below is recomputed here by hand from
the config's own fields: KV bytes per token (K and V of the full-attention layers only), the Gated DeltaNet state
each sequence holds (recurrent state in float32 as mamba_ssm_dtype says, conv state in bf16), and the parameter
count (language model and vision tower written out layer by layer from vLLM 0.33.0 models/qwen3_5.py and
qwen3_vl.py; where torch and transformers are installed, also transformers' own model built on the meta device).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import kvbudget
from kvbudget.cli import main
from kvbudget.engines.vllm.speculative import with_mtp
from kvbudget.model import catalog
from kvbudget.model.hf_config import ConfigError, spec_from_config, text_config
from kvbudget.model.layers import RecurrentState

MODEL_DIR = Path(catalog.CATALOG_DIR)

# file -> (the size the model's name gives, in billions; full-attention layers; GDN layers), the layer split
# counted by hand from the config's layer_types (every 4th layer full attention).
QWEN3_5 = {
    "qwen3.5-27b.json": (27, 16, 48),
    "qwen3.5-35b-a3b.json": (35, 10, 30),
    "qwen3.5-122b-a10b.json": (122, 12, 36),
    "qwen3.5-397b-a17b.json": (397, 15, 45),
}


def _entry(fname: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((MODEL_DIR / fname).read_text(encoding="utf-8"))
    return data


def _text(fname: str) -> dict[str, Any]:
    return text_config(_entry(fname)["config"])[0]


def _hand_text_params(c: dict[str, Any]) -> int:
    """Qwen3.5's language model from its config fields (vLLM 0.33.0 models/qwen3_5.py, qwen3_next.py)."""
    h, v, d = c["hidden_size"], c["vocab_size"], c["head_dim"]
    heads, kv = c["num_attention_heads"], c["num_key_value_heads"]
    kh, vh, kd, vd = (c["linear_num_key_heads"], c["linear_num_value_heads"], c["linear_key_head_dim"],
                      c["linear_value_head_dim"])
    # gated attention: q_proj also makes the output gate (2 x heads x d), k, v, o, per-head q_norm and k_norm
    full = 2 * heads * d * h + 2 * kv * d * h + heads * d * h + 2 * d
    conv = 2 * kh * kd + vh * vd  # q, k and v channels of the causal conv
    # in_proj_qkv + in_proj_z, in_proj_b + in_proj_a, conv1d (no bias), dt_bias and A_log, gated norm, out_proj
    gdn = h * (conv + vh * vd) + h * 2 * vh + conv * c["linear_conv_kernel_dim"] + 2 * vh + vd + vh * vd * h
    if "num_experts" in c:  # router, experts, shared expert and its gate, in every layer
        e, mi, si = c["num_experts"], c["moe_intermediate_size"], c["shared_expert_intermediate_size"]
        mlp = e * h + e * 3 * h * mi + 3 * h * si + h
    else:
        mlp = 3 * h * c["intermediate_size"]
    kinds = c["layer_types"]
    layers = sum(full if k == "full_attention" else gdn for k in kinds) + len(kinds) * (mlp + 2 * h)
    return v * h * (1 if c["tie_word_embeddings"] else 2) + layers + h


def _hand_vision_params(vc: dict[str, Any]) -> int:
    """Qwen3-VL's vision tower (vLLM 0.33.0 models/qwen3_vl.py Qwen3_VisionTransformer), which Qwen3.5 builds."""
    h, i, p, t = vc["hidden_size"], vc["intermediate_size"], vc["patch_size"], vc["temporal_patch_size"]
    block = (3 * h * h + 3 * h) + (h * h + h) + (i * h + i) + (h * i + h) + 2 * 2 * h  # qkv, proj, fc1, fc2, 2 LN
    merged = h * vc["spatial_merge_size"] ** 2
    merger = 2 * h + (merged * merged + merged) + (vc["out_hidden_size"] * merged + vc["out_hidden_size"])
    patch = h * vc["in_channels"] * t * p * p + h
    assert vc["deepstack_visual_indexes"] == []  # no deepstack mergers
    return vc["depth"] * block + patch + vc["num_position_embeddings"] * h + merger


@pytest.mark.parametrize("fname", sorted(QWEN3_5))
def test_qwen3_5_kv_per_token_and_gdn_state_per_sequence_are_the_hand_computation(fname: str) -> None:
    c = _text(fname)
    _, n_full, n_gdn = QWEN3_5[fname]
    assert c["layer_types"].count("full_attention") == n_full and c["layer_types"].count("linear_attention") == n_gdn
    assert c["mamba_ssm_dtype"] == "float32" and c["dtype"] == "bfloat16"
    kv_per_token = 2 * n_full * c["num_key_value_heads"] * c["head_dim"] * 2
    kh, vh, kd, vd = (c["linear_num_key_heads"], c["linear_num_value_heads"], c["linear_key_head_dim"],
                      c["linear_value_head_dim"])
    ssm = vh * kd * vd * 4  # float32
    conv = (2 * kh * kd + vh * vd) * (c["linear_conv_kernel_dim"] - 1) * 2  # bf16
    spec = kvbudget.load_model(_entry(fname)["id"])
    assert kvbudget.kv(spec).bytes_per_token == kv_per_token
    states = [x for x in spec.layers if isinstance(x, RecurrentState)]
    assert len(states) == n_gdn
    assert {(x.ssm_bytes(), x.conv_bytes()) for x in states} == {(ssm, conv)}
    # TP 4 splits the value heads and the conv channels (vLLM MambaStateShapeCalculator.gated_delta_net_state_shape)
    assert {(x.ssm_bytes(4), x.conv_bytes(4)) for x in states} == {(ssm // 4, conv // 4)}
    report = kvbudget.kv(spec, context=1000)
    assert report.bytes_per_sequence == 1000 * kv_per_token + n_gdn * (ssm + conv)


def test_qwen3_5_27b_figures_written_out() -> None:
    """The 27B's numbers with the config's values put in: 16 x 4 KV heads x 256; 48 GDN layers of 48 value heads."""
    spec = kvbudget.load_model("Qwen/Qwen3.5-27B")
    assert kvbudget.kv(spec).bytes_per_token == 2 * 16 * 4 * 256 * 2 == 65_536
    state = next(x for x in spec.layers if isinstance(x, RecurrentState))
    assert state.ssm_bytes() == 48 * 128 * 128 * 4 == 3_145_728
    assert state.conv_bytes() == (2 * 16 * 128 + 48 * 128) * 3 * 2 == 61_440


@pytest.mark.parametrize("fname", sorted(QWEN3_5))
def test_qwen3_5_count_is_the_hand_count_of_its_language_model_and_vision_tower(fname: str) -> None:
    data = _entry(fname)
    text = _hand_text_params(_text(fname))
    vision = _hand_vision_params(data["config"]["vision_config"])
    spec = kvbudget.load_model(data["id"])
    assert spec.params_by_role()["vision"] == vision
    assert spec.params == text + vision == data["official_params"]
    name_billions = QWEN3_5[fname][0]
    assert abs(spec.params / 1e9 - name_billions) / name_billions < 0.015  # the card's '27B' ... '397B'
    assert not spec.notes  # nothing read as a guess, nothing left uncounted


def test_qwen3_5_count_equals_transformers_own_model_on_the_meta_device() -> None:
    """transformers builds Qwen3_5ForConditionalGeneration / Qwen3_5MoeForConditionalGeneration from the same
    config without allocating (meta device); its parameter count is kvbudget's, to the unit."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    if not hasattr(transformers, "Qwen3_5MoeForConditionalGeneration"):
        pytest.skip("this transformers has no Qwen3.5 model")
    for fname in ("qwen3.5-27b.json", "qwen3.5-35b-a3b.json"):
        raw = _entry(fname)["config"]
        config = transformers.AutoConfig.for_model(**raw)
        with torch.device("meta"):
            model = getattr(transformers, raw["architectures"][0])(config)
        assert sum(p.numel() for p in model.parameters()) == kvbudget.load_model(_entry(fname)["id"]).params


def test_qwen3_6_names_read_as_the_qwen3_5_architecture() -> None:
    assert kvbudget.load_model("Qwen/Qwen3.6-27B").name == "Qwen/Qwen3.5-27B"
    assert kvbudget.load_model("Qwen/Qwen3.6-35B-A3B").name == "Qwen/Qwen3.5-35B-A3B"


def test_mamba_ssm_dtype_sets_the_recurrent_state_dtype_and_a_bad_one_is_refused() -> None:
    raw = _entry("qwen3.5-35b-a3b.json")["config"]
    text = raw["text_config"]
    without = spec_from_config({**raw, "text_config": {k: v for k, v in text.items() if k != "mamba_ssm_dtype"}})
    state = next(x for x in without.layers if isinstance(x, RecurrentState))
    assert (state.state_dtype, state.conv_dtype) == ("bf16", "bf16")  # vLLM: "auto" follows the model dtype
    with pytest.raises(ConfigError, match="mamba_ssm_dtype"):
        spec_from_config({**raw, "text_config": {**text, "mamba_ssm_dtype": "float64"}})


def test_qwen3_5_mtp_draft_repeats_the_last_full_attention_layer() -> None:
    """vLLM 0.33.0 config/speculative.py maps qwen3_5 / qwen3_5_moe to qwen3_5_mtp with n_predict =
    mtp_num_hidden_layers (1 here); models/qwen3_5_mtp.py builds one full-attention decoder layer, fc (2h -> h)
    and three norms, sharing the target's embedding and lm_head."""
    spec = kvbudget.load_model("Qwen/Qwen3.5-35B-A3B")
    assert spec.mtp_layers == 1
    drafted = with_mtp(spec)
    h = spec.dims.hidden_size
    last_full = max(i for x, i in zip(spec.layers, spec.layer_of, strict=True) if x.kind == "full_attention")
    block = sum(t.rows * t.cols * t.count for t in spec.inventory.layers[last_full])
    assert drafted.params - spec.params == block + 2 * h * h + 3 * h
    assert kvbudget.kv(drafted).bytes_per_token - kvbudget.kv(spec).bytes_per_token == 2 * 2 * 256 * 2


def _explain(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code = main(["explain", "--json", "--gpu", "H200", "--", *args])
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    return doc


def test_qwen3_5_27b_explains_on_vllm_with_a_page_that_holds_one_gdn_state(capsys: pytest.CaptureFixture[str]) -> None:
    """vLLM's hybrid page rule (v1/core/kv_cache_planning.py, as for Qwen3-Next): the attention block size rises
    to the smallest multiple of 16 tokens whose page (4 KV heads x 256 x K and V x 2 B = 4,096 B a token) holds one
    GDN state of 3,145,728 + 61,440 B: ceil(3,207,168 / (16 x 4,096)) x 16 = 784 tokens."""
    doc = _explain(capsys, "vllm", "serve", "Qwen/Qwen3.5-27B", "--max-model-len", "32768")
    assert doc["block_size"] == -(-(3_145_728 + 61_440) // (16 * 4096)) * 16 == 784
    assert {g["page_bytes"] for g in doc["kv_cache_groups"]} == {784 * 4096}
    assert sorted(g["kind"] for g in doc["kv_cache_groups"]) == ["full_attention"] + ["recurrent_state"] * 3
    params = kvbudget.load_model("Qwen/Qwen3.5-27B").params
    assert doc["memory"]["weights_bytes"] == params * 2
    assert doc["fits"] and doc["max_concurrency"] > 1


def test_qwen3_5_397b_plans_on_sglang_with_its_float32_state_pool(capsys: pytest.CaptureFixture[str]) -> None:
    """SGLang 0.5.23 keeps one GDN state per running request in a Mamba pool (float32 recurrent state from
    mamba_ssm_dtype): 45 layers x (64 x 128 x 128 x 4 + (2 x 16 x 128 + 64 x 128) x 3 x 2) B at TP 8."""
    code = main(["plan", "Qwen/Qwen3.5-397B-A17B", "--engine", "sglang", "--gpus", "H200", "--context", "32768",
                 "--concurrency", "8", "--top", "1", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    best = doc["plans"][0]
    assert best["serves"] and best["max_concurrency"] >= 8
    assert "sglang" in best["launch"]["command"]
    tp = best["tp"]
    per_request = 45 * ((64 // tp) * 128 * 128 * 4 + (2 * 16 * 128 + 64 * 128) // tp * 3 * 2)
    code = main(["explain", "--gpu", "H200", "--", "python", "-m", "sglang.launch_server", "--model-path",
                 "Qwen/Qwen3.5-397B-A17B", "--tp", str(tp), "--context-length", "32768"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"({per_request:,} B each)" in out


# --- MiniMax-M2.5 / M2.7 -----------------------------------------------------------------------------------------


def test_minimax_m2_5_is_read_as_the_m2_entry_and_m2_7_differs_only_in_its_length() -> None:
    """The M2.5 copy's fields equal M2's (it lacks attn_type_list and torch_dtype); M2.7's differ from M2's only in
    max_position_embeddings (204800 against 196608) and its dtype key's name."""
    m2 = _entry("minimax-m2.json")["config"]
    m2_7 = _entry("minimax-m2.7.json")["config"]
    assert kvbudget.load_model("MiniMaxAI/MiniMax-M2.5").name == "MiniMaxAI/MiniMax-M2"
    differ = {k for k in set(m2) | set(m2_7) if m2.get(k) != m2_7.get(k)}
    assert differ == {"max_position_embeddings", "torch_dtype", "dtype"}
    assert (m2["torch_dtype"], m2_7["dtype"]) == ("bfloat16", "bfloat16")
    spec = kvbudget.load_model("MiniMaxAI/MiniMax-M2.7")
    base = kvbudget.load_model("MiniMaxAI/MiniMax-M2")
    assert spec.params == base.params
    report = kvbudget.kv(spec)
    assert report.bytes_per_token == 2 * m2_7["num_hidden_layers"] * m2_7["num_key_value_heads"] * m2_7["head_dim"] * 2
    assert report.bytes_per_token == 253_952 and report.max_context == 204_800
    assert spec.weight_format is not None and spec.weight_format.name == "fp8"
    assert spec.weight_format.block == (128, 128)


def test_minimax_m2_7_explains_on_vllm_with_block_fp8_weights(capsys: pytest.CaptureFixture[str]) -> None:
    """230B of block-FP8 experts do not fit one H200: at TP 4 each rank holds a quarter of the weights."""
    doc = _explain(capsys, "vllm", "serve", "MiniMaxAI/MiniMax-M2.7", "-tp", "4", "--max-model-len", "65536")
    assert doc["weights_format"].startswith("fp8 (e4m3) with block 128x128") and doc["fits"]
    params = kvbudget.load_model("MiniMaxAI/MiniMax-M2.7").params
    assert params / 4 < doc["memory"]["weights_bytes"] < params / 4 * 1.2  # 1 byte a weight, plus bf16 embeddings
    assert doc["kv_cache_groups"][0]["kind"] == "full_attention"


def test_qwen3_5_397b_state_and_kv_sizes_match_a_published_sglang_log() -> None:
    """A published SGLang 0.5.9 start-up (tests/data/sglang_logs/v0.5.9_rtx4090x2_qwen3.5-397b-a17b-fp8_tp2_...json,
    from https://github.com/kvcache-ai/ktransformers/issues/1870; Qwen3.5-397B-A17B-FP8, same architecture, TP 2)
    logs a Mamba pool of 82 requests (SGLang allocates one slot more) with 'ssm_state' 7.29 GB and 'conv_state'
    0.13 GB, and 580,364 KV tokens taking 4.15 GB for K: the float32 recurrent state, the bf16 conv state and the
    15 full-attention layers' K (1 KV head per rank) computed from the catalog entry reproduce all three (GiB)."""
    path = Path(__file__).parent / "data" / "sglang_logs" / "v0.5.9_rtx4090x2_qwen3.5-397b-a17b-fp8_tp2_cpuoffload400.json"
    reported = json.loads(path.read_text(encoding="utf-8"))["reported"]
    spec = kvbudget.load_model("Qwen/Qwen3.5-397B-A17B")
    states = [x for x in spec.layers if isinstance(x, RecurrentState)]
    slots = reported["mamba_max_cache_size"] + 1
    gib = 2**30
    assert round(slots * sum(x.ssm_bytes(2) for x in states) / gib, 2) == reported["mamba_ssm_state_gb"]
    assert round(slots * sum(x.conv_bytes(2) for x in states) / gib, 2) == reported["mamba_conv_state_gb"]
    k_per_token = kvbudget.kv(spec, tp=2).bytes_per_token // 2
    assert k_per_token == 15 * 1 * 256 * 2
    assert round(reported["kv_tokens"] * k_per_token / gib, 2) == reported["k_size_gb"]


# Two model types read by one QUIRKS line each; their configs as ai-dynamo/aiconfigurator vendors them
# (https://github.com/ai-dynamo/aiconfigurator/blob/19d098add98ab8ba2366c94795e9e886cdcc915c/src/aiconfigurator/model_configs/zai-org--GLM-4.7-Flash_config.json,
# https://github.com/ai-dynamo/aiconfigurator/blob/ec1547f5b7c5b3e716d77e28c7213fa27d1df3eb/src/aiconfigurator/model_configs/XiaomiMiMo--MiMo-7B-Base_config.json)
GLM_47_FLASH = {"architectures": ["Glm4MoeLiteForCausalLM"], "model_type": "glm4_moe_lite", "num_hidden_layers": 47,
                "hidden_size": 2048, "num_attention_heads": 20, "num_key_value_heads": 20, "head_dim": 64,
                "intermediate_size": 10240, "vocab_size": 154880, "max_position_embeddings": 202752,
                "n_routed_experts": 64, "n_shared_experts": 1, "num_experts_per_tok": 4, "moe_intermediate_size": 1536,
                "first_k_dense_replace": 1, "kv_lora_rank": 512, "q_lora_rank": 768, "qk_nope_head_dim": 192,
                "qk_rope_head_dim": 64, "v_head_dim": 256, "routed_scaling_factor": 1.8, "torch_dtype": "bfloat16",
                "tie_word_embeddings": False}
MIMO_7B = {"architectures": ["MiMoForCausalLM"], "model_type": "mimo", "num_hidden_layers": 36, "hidden_size": 4096,
           "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 11008,
           "vocab_size": 151680, "max_position_embeddings": 32768, "attention_bias": True, "sliding_window": 32768,
           "max_window_layers": 32, "use_sliding_window": False, "num_nextn_predict_layers": 1,
           "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


def test_glm_4_7_flash_and_mimo_are_read_by_their_rows() -> None:
    """glm4_moe_lite (vLLM 0.33.0 models/glm4_moe_lite.py: DeepSeek-V2's MLA attention on GLM-4.5's MoE) and mimo
    (models/mimo.py: Qwen2 with its MTP layers left out) were read as dense Llama models with a note."""
    from kvbudget.model.layers import MLA
    from kvbudget.units import element_type

    BF16 = element_type("bf16")
    glm = spec_from_config(GLM_47_FLASH, name="GLM-4.7-Flash")
    assert all(isinstance(x, MLA) for x in glm.layers) and len(glm.layers) == 47
    assert sum(x.bytes_per_token(BF16) for x in glm.layers) == 47 * (512 + 64) * 2 == 54_144
    # the routed experts of 46 MoE layers alone: 46 x 64 x 3 x 2048 x 1536 = 27.8B of the model's "30B-A3B"
    assert 46 * 64 * 3 * 2048 * 1536 < glm.params < 30_500_000_000
    mimo = spec_from_config(MIMO_7B, name="MiMo-7B-Base")
    h, kv, inter, vocab = 4096, 8 * 128, 11008, 151680
    layer = (h * h + h) + 2 * (kv * h + kv) + h * h + 3 * h * inter + 2 * h  # q/k/v with biases, o, SwiGLU, 2 norms
    assert mimo.params == 2 * vocab * h + 36 * layer + h == 7_622_619_136
    assert sum(x.bytes_per_token(BF16) for x in mimo.layers) == 36 * 2 * kv * 2 == 147_456
    assert not [n for n in (*glm.notes, *mimo.notes) if "not in kvbudget's table" in n]
