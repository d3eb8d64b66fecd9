"""Gemma 4 (model_type gemma4 / gemma4_text), read as vLLM 0.33.0 models/gemma4.py and gemma4_mm.py build it.

The catalog's three entries hold configs vendored verbatim in ai-dynamo/aiconfigurator (each entry's notes give the
commit). Every figure below is written out by hand from those configs' fields: KV bytes per token per layer kind
(sliding layers head_dim x num_key_value_heads, full layers global_head_dim x num_global_key_value_heads under
attention_k_eq_v), the parameter counts against the model cards' published totals, the NVFP4 weight bytes from the
checkpoints' ignore lists, and vLLM's blocks per request where its page-size unification gives the full layers
blocks of twice the size (v1/core/kv_cache_planning.py unify_kv_cache_spec_page_size). The small configs of the later
tests are synthetic, to reach what the catalog's checkpoints do not use (KV sharing, per-layer embeddings, the
double-wide MLP); their expected figures are hand computations too.
"""

from __future__ import annotations

import json
from math import ceil
from typing import Any

import pytest

import kvbudget
from kvbudget.cli import main
from kvbudget.engines.sglang.policy import pool_of
from kvbudget.model import catalog
from kvbudget.model.hf_config import ConfigError, spec_from_config
from kvbudget.model.layers import FullAttention, NoCache, SlidingWindow
from kvbudget.units import element_type

BF16 = element_type("bf16")
IDS = ("google/gemma-4-26B-A4B", "nvidia/Gemma-4-26B-A4B-NVFP4", "nvidia/Gemma-4-31B-IT-NVFP4")


def _text(model: str) -> dict[str, Any]:
    entry = catalog.find(model)
    assert entry is not None, model
    return entry.config["text_config"]


# model -> (sliding layers, full layers, KV bytes per token at bf16), from the configs' fields:
# 2 (K and V) x KV heads x head size x 2 bytes per layer.
KV = {
    "google/gemma-4-26B-A4B": (25, 5, 25 * 2 * 8 * 256 * 2 + 5 * 2 * 2 * 512 * 2),  # 204,800 + 20,480
    "nvidia/Gemma-4-26B-A4B-NVFP4": (25, 5, 25 * 2 * 8 * 256 * 2 + 5 * 2 * 2 * 512 * 2),
    "nvidia/Gemma-4-31B-IT-NVFP4": (50, 10, 50 * 2 * 16 * 256 * 2 + 10 * 2 * 4 * 512 * 2),  # 819,200 + 81,920
}


@pytest.mark.parametrize("model", IDS)
def test_kv_per_token_is_each_layer_kinds_head_shape_by_hand(model: str) -> None:
    c = _text(model)
    sliding, full, per_token = KV[model]
    types = c["layer_types"]
    assert (types.count("sliding_attention"), types.count("full_attention")) == (sliding, full)
    assert c["attention_k_eq_v"] is True and c["num_kv_shared_layers"] == 0
    by_hand = (sliding * 2 * c["num_key_value_heads"] * c["head_dim"] * 2
               + full * 2 * c["num_global_key_value_heads"] * c["global_head_dim"] * 2)
    assert by_hand == per_token
    spec = kvbudget.load_model(model)
    assert sum(x.bytes_per_token(BF16) for x in spec.layers) == per_token
    assert kvbudget.kv(model).bytes_per_token == per_token
    for layer, t in zip(spec.layers, types, strict=True):
        assert isinstance(layer, SlidingWindow) == (t == "sliding_attention")
        if isinstance(layer, SlidingWindow):
            assert (layer.num_kv_heads, layer.head_dim, layer.window) == (c["num_key_value_heads"], 256, 1024)
        else:
            assert (layer.num_kv_heads, layer.head_dim) == (c["num_global_key_value_heads"], 512)
    assert spec.max_context == c["max_position_embeddings"] == 262144


# Published totals (the model cards, cited in the entries): 26B-A4B 25.2B, 31B 30.7B, each without its ~550M vision
# encoder. By hand from the configs (the entries' official_params_source writes every term out):
TEXT = {"google/gemma-4-26B-A4B": 25_233_141_760, "nvidia/Gemma-4-31B-IT-NVFP4": 30_697_345_280}
K_EQ_V_SLOTS = {"google/gemma-4-26B-A4B": 5 * 2 * 512 * 2816, "nvidia/Gemma-4-31B-IT-NVFP4": 10 * 4 * 512 * 5376}
PUBLISHED = {"google/gemma-4-26B-A4B": 25.2e9, "nvidia/Gemma-4-31B-IT-NVFP4": 30.7e9}


def _vision_by_hand(text_hidden: int) -> int:
    h, i, n, heads, hd, p, positions = 1152, 4304, 27, 16, 72, 16, 10240
    block = 4 * heads * hd * h + 2 * hd + 3 * h * i + 4 * h  # q/k/v/o, q/k norms, GeGLU MLP, 4 RMSNorms
    return n * block + h * 3 * p * p + 2 * positions * h + 2 * h + text_hidden * h  # + patches, positions, std, embedder


@pytest.mark.parametrize("model", sorted(TEXT))
def test_text_parameters_are_the_published_total_and_the_vision_tower_is_counted(model: str) -> None:
    spec = kvbudget.load_model(model)
    hidden = _text(model)["hidden_size"]
    roles = spec.params_by_role()
    assert roles["vision"] == _vision_by_hand(hidden)
    assert spec.params - roles["vision"] - K_EQ_V_SLOTS[model] == TEXT[model]
    assert round(TEXT[model] / 1e8) == round(PUBLISHED[model] / 1e8)  # 25.2B / 30.7B as the cards round them
    assert any("attention_k_eq_v" in n and f"{K_EQ_V_SLOTS[model]:,}" in n for n in spec.notes)


def test_26b_a4b_runs_its_experts_beside_a_dense_mlp_in_every_layer() -> None:
    spec = kvbudget.load_model("google/gemma-4-26B-A4B")
    roles = spec.params_by_role()
    assert roles["experts"] == 30 * 128 * 3 * 2816 * 704
    assert roles["mlp"] == 30 * 3 * 2816 * 2112
    assert roles["router"] == 30 * (128 * 2816 + 2816 + 128)  # proj, scale, per_expert_scale
    assert (spec.num_experts, spec.experts_per_token, spec.expert_intermediate_size) == (128, 8, 704)
    assert spec.dims.intermediate_size == 2112 + 8 * 704
    assert kvbudget.load_model("nvidia/Gemma-4-31B-IT-NVFP4").num_experts == 0  # num_experts null: dense


def _explain(capsys: pytest.CaptureFixture[str], gpu: str, *argv: str) -> dict[str, Any]:
    code = main(["explain", "--json", "--gpu", gpu, "--", "vllm", "serve", *argv])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    return doc


def test_nvfp4_26b_quantizes_only_the_routed_experts(capsys: pytest.CaptureFixture[str]) -> None:
    """Its ignore list names lm_head, the vision tower and, for every layer, self_attn, mlp (the dense MLP) and
    router: the experts are NVFP4 (4-bit values, one fp8 scale per 16, fp32 global and input scales), all else bf16."""
    spec = kvbudget.load_model("nvidia/Gemma-4-26B-A4B-NVFP4")
    fmt = spec.weight_format
    assert fmt is not None and fmt.name == "nvfp4" and fmt.kv_cache == "fp8"
    assert {"attention", "mlp", "router", "vision", "lm_head"} <= fmt.skip_roles and "experts" not in fmt.skip_roles
    experts = 22_837_985_280
    assert spec.params_by_role()["experts"] == experts
    one = 704 * 2816 // 2 + 704 * ceil(2816 / 16) + 8  # gate or up of one expert
    assert one == 704 * 2816 // 2 + 2816 * ceil(704 / 16) + 8  # down: the same bytes
    by_hand = (spec.params - experts) * 2 + 30 * 128 * 3 * one
    assert by_hand == 18_811_196_512
    assert _explain(capsys, "B200", "nvidia/Gemma-4-26B-A4B-NVFP4", "--max-model-len", "4096")["memory"]["weights_bytes"] == by_hand


def test_nvfp4_31b_quantizes_the_mlps_and_keeps_attention_bf16(capsys: pytest.CaptureFixture[str]) -> None:
    spec = kvbudget.load_model("nvidia/Gemma-4-31B-IT-NVFP4")
    fmt = spec.weight_format
    assert fmt is not None and fmt.name == "nvfp4" and "attention" in fmt.skip_roles and "mlp" not in fmt.skip_roles
    mlp = spec.params_by_role()["mlp"]
    assert mlp == 60 * 3 * 5376 * 21504
    one = 21504 * 5376 // 2 + 21504 * ceil(5376 / 16) + 8  # gate or up; down has the same bytes
    by_hand = (spec.params - mlp) * 2 + 60 * 3 * one
    assert by_hand == 32_853_455_872
    assert _explain(capsys, "B200", "nvidia/Gemma-4-31B-IT-NVFP4", "--max-model-len", "4096")["memory"]["weights_bytes"] == by_hand


def test_vllm_gives_the_full_layers_blocks_of_twice_the_size(capsys: pytest.CaptureFixture[str]) -> None:
    """Pages at block 16: sliding 16 x 8 x 256 x 2 x 2 = 131,072 B, full 16 x 2 x 512 x 2 x 2 = 65,536 B; vLLM doubles
    the full layers' block (32 tokens) so both pages are 131,072 B. Six groups of five layers (5 sliding, 1 full).
    A request of 32,768 tokens holds ceil(32768 / 32) = 1,024 full blocks and per sliding group
    ceil((1024 - 1 + in-flight) / 16) + 1 blocks, in-flight being two batches of 8,192 (async scheduling)."""
    doc = _explain(capsys, "H200", "google/gemma-4-26B-A4B", "--max-model-len", "32768",
                   "--max-num-batched-tokens", "8192")
    assert doc["bytes_per_block"] == 5 * 131072
    assert [g["kind"] for g in doc["kv_cache_groups"]] == ["sliding_window"] * 5 + ["full_attention"]
    assert doc["blocks_per_request"] == ceil(32768 / 32) + 5 * (ceil((1023 + 2 * 8192) / 16) + 1)
    assert any("full_attention layers use 2x larger blocks" in n for n in doc["notes"])


@pytest.mark.parametrize("model", IDS)
def test_names_resolve_and_entries_cite_their_vendored_config(model: str) -> None:
    entry = catalog.find(model)
    assert entry is not None
    for name in entry.names:
        assert kvbudget.load_model(name).name == model
    assert entry.config_source == f"https://huggingface.co/{model}/blob/main/config.json"
    assert "verified verbatim" in entry.notes and "github.com/ai-dynamo/aiconfigurator/blob/" in entry.notes


def test_nvidia_26b_is_googles_26b_plus_its_quantization() -> None:
    ours = catalog.find("nvidia/Gemma-4-26B-A4B-NVFP4")
    base = catalog.find("google/gemma-4-26B-A4B")
    assert ours is not None and base is not None
    for key in ("text_config", "vision_config"):
        assert ours.config[key] == base.config[key]
    assert {k for k in ours.config if ours.config[k] != base.config.get(k)} == {
        "eos_token_id", "quantization_config", "transformers_version"}


# --- what the catalog's checkpoints do not use, on small configs ------------------------------------------------


def _small(**over: Any) -> dict[str, Any]:
    """An E2B-shaped gemma4_text config, shrunk: 10 layers (4 sliding, 1 full, twice), the last 4 reading earlier
    layers' KV, per-layer embeddings of 32, no attention_k_eq_v."""
    cfg = {"model_type": "gemma4_text", "hidden_size": 512, "intermediate_size": 1024, "num_hidden_layers": 10,
           "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 64, "global_head_dim": 128,
           "num_kv_shared_layers": 4, "hidden_size_per_layer_input": 32, "vocab_size": 1000,
           "vocab_size_per_layer_input": 800, "sliding_window": 128, "dtype": "bfloat16",
           "max_position_embeddings": 4096, "use_double_wide_mlp": True,
           "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 2}
    cfg.update(over)
    return cfg


def test_kv_shared_layers_keep_no_cache_in_vllm_but_a_buffer_in_sglang() -> None:
    spec = spec_from_config(_small(), "small")
    owners = {6: 5, 7: 5, 8: 5, 9: 4}  # the last of layers 0-5 (which own their KV) of the same type
    for i, owner in owners.items():
        layer = spec.layers[i]
        assert isinstance(layer, NoCache) and f"layer {owner}'s KV" in layer.reason
        assert layer.shared == spec.layers[owner]
        assert pool_of(layer.shared, old=False) == ("full" if owner == 4 else "swa")
    # without k_eq_v the full layers keep num_key_value_heads (1) at global_head_dim (128)
    assert spec.layers[4] == FullAttention(1, 128) and spec.layers[0] == SlidingWindow(1, 64, window=128)
    own = 5 * 2 * 64 * 2 + 2 * 128 * 2  # layers 0-3 and 5 sliding, layer 4 full
    assert sum(x.bytes_per_token(BF16) for x in spec.layers) == own


def test_small_config_parameters_by_hand() -> None:
    """Per layer: attention (shared layers q_proj, o_proj, q_norm only), the MLP (1024 wide, 2048 in the shared
    layers: use_double_wide_mlp), 4 RMSNorms, the per-layer input gate, projection and norm. Before the layers the
    embedding, the per-layer table (800 x 10 x 32), its projection (512 -> 320) and norm (32); the final norm."""
    spec = spec_from_config(_small(), "small")
    h, heads = 512, 8

    def attn(hd: int, kv: int) -> int:
        return 2 * heads * hd * h + 2 * kv * hd * h + 2 * hd

    layers = (5 * attn(64, 1) + attn(128, 1)  # layers 0-5 own their KV
              + 3 * (2 * heads * 64 * h + 64) + (2 * heads * 128 * h + 128)  # 6-8 sliding, 9 full, shared
              + 6 * 3 * h * 1024 + 4 * 3 * h * 2048 + 10 * (4 * h + 2 * 32 * h + h))
    head = 1000 * h + 800 * 10 * 32 + 10 * 32 * h + 32
    assert spec.params == layers + head + h
    assert spec.pp_embedding == "every"


def test_config_class_derivations_are_applied() -> None:
    """Gemma4TextConfig: without layer_types every 6th layer is full and the last is forced full; with
    use_bidirectional_attention "all" the window is sliding_window // 2 + 1."""
    cfg = _small(num_kv_shared_layers=0, num_hidden_layers=8)
    del cfg["layer_types"]
    spec = spec_from_config(cfg, "small")
    assert [type(x).__name__ for x in spec.layers] == ["SlidingWindow"] * 5 + ["FullAttention", "SlidingWindow",
                                                                               "FullAttention"]
    halved = spec_from_config({**cfg, "use_bidirectional_attention": "all"}, "small")
    assert halved.layers[0] == SlidingWindow(1, 64, window=128 // 2 + 1)


def test_wrapper_reads_its_text_config_and_names_an_unread_audio_tower() -> None:
    raw = {"model_type": "gemma4", "text_config": _small(), "audio_config": {"model_type": "gemma4_audio"}}
    spec = spec_from_config(raw, "small")
    assert spec.model_type == "gemma4_text" and spec.num_layers == 10
    assert any(n.startswith("audio encoder") for n in spec.notes)


@pytest.mark.parametrize(("over", "words"), [
    ({"layer_types": ["full_attention"] * 6 + ["sliding_attention"] * 4}, "no layer to read its KV from"),
    ({"num_kv_shared_layers": 10}, "leaves no layer"),
    ({"layer_types": ["sliding_attention"] * 9}, "'layer_types' must list"),
    ({"layer_types": ["chunked_attention"] * 10}, "'layer_types' must list"),
    ({"num_key_value_heads": 3}, "do not divide"),
])
def test_bad_gemma4_configs_are_one_clear_error(over: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        spec_from_config(_small(**over), "small")


def test_bad_gemma4_config_exits_2_from_the_cli(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_small(num_kv_shared_layers=10)))
    assert main(["kv", str(path)]) == 2
    err = capsys.readouterr().err
    assert "num_kv_shared_layers" in err and "Traceback" not in err
