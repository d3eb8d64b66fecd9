"""config.json -> ModelSpec (``kvbudget.model.hf_config``): head size, KV heads, nested text
configs, per-layer patterns, real catalog models, and the errors a bad config raises.

Configs are small dicts written here; nothing touches the network.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import kvbudget
from kvbudget.kvcache import bytes_per_token, kv_element_type
from kvbudget.model.catalog import find
from kvbudget.model.hf_config import QUIRKS, ConfigError, spec_from_config, text_config
from kvbudget.model.layers import MLA, ChunkedLocal, FullAttention, RecurrentState, SlidingWindow
from kvbudget.model.spec import ModelSpec
from kvbudget.units import InputError


def textbook_fit(*args: object, **kwargs: object) -> kvbudget.FitAnswer:
    """kvbudget.fit with the textbook partition (weights + KV + activations + overhead)."""
    return kvbudget.fit(*args, engine="textbook", **kwargs)  # type: ignore[arg-type]

DROP = object()  # marks a key to leave out of the config


def cfg(**overrides: Any) -> dict[str, Any]:
    """A small Llama-style config; ``key=DROP`` removes a key."""
    base: dict[str, Any] = {
        "model_type": "llama",
        "hidden_size": 256,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "intermediate_size": 512,
        "vocab_size": 1000,
        "max_position_embeddings": 4096,
        "torch_dtype": "bfloat16",
    }
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not DROP}


def kinds(spec: ModelSpec) -> list[str]:
    return [layer.kind for layer in spec.layers]


def kv_heads(spec: ModelSpec) -> set[int]:
    return {layer.num_kv_heads for layer in spec.layers if isinstance(layer, FullAttention)}


# --- head_dim --------------------------------------------------------------------------------


def test_explicit_head_dim_wins_over_hidden_over_heads() -> None:
    # Mistral-Nemo: hidden 5120 / 32 heads would be 160, but the config says head_dim 128
    spec = spec_from_config(cfg(model_type="mistral", hidden_size=5120, num_attention_heads=32,
                                num_key_value_heads=8, head_dim=128, num_hidden_layers=2))
    assert spec.dims.head_dim == 128
    assert {layer.head_dim for layer in spec.layers} == {128}  # type: ignore[union-attr]
    assert spec.source("head_dim") == "head_dim"
    # q_proj is heads x head_dim rows, not hidden
    q_proj = spec.inventory.layers[0][0]
    assert (q_proj.rows, q_proj.cols) == (32 * 128, 5120)


def test_head_dim_defaults_to_hidden_over_heads() -> None:
    spec = spec_from_config(cfg(hidden_size=4096, num_attention_heads=32, num_key_value_heads=8))
    assert spec.dims.head_dim == 128
    assert spec.source("head_dim") == "hidden_size / num_attention_heads"


def test_null_head_dim_falls_back_to_hidden_over_heads() -> None:
    assert spec_from_config(cfg(head_dim=None)).dims.head_dim == 256 // 8


def test_mistral_nemo_catalog_head_dim_is_128() -> None:
    spec = kvbudget.load_model("mistralai/Mistral-Nemo-Instruct-2407")
    assert spec.dims.hidden_size == 5120 and spec.dims.num_attention_heads == 32
    assert spec.dims.head_dim == 128


def test_hidden_not_a_multiple_of_heads_without_head_dim_is_an_error() -> None:
    with pytest.raises(ConfigError, match="hidden_size"):
        spec_from_config(cfg(hidden_size=250))


# --- KV heads --------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num"])
def test_kv_head_aliases(key: str) -> None:
    spec = spec_from_config(cfg(**{"num_key_value_heads": DROP, key: 2}))
    assert kv_heads(spec) == {2}
    assert spec.source("num_kv_heads") == key


def test_multi_query_true_is_one_kv_head() -> None:
    spec = spec_from_config(cfg(num_key_value_heads=DROP, multi_query=True))
    assert kv_heads(spec) == {1}


def test_no_kv_head_field_is_mha() -> None:
    spec = spec_from_config(cfg(num_key_value_heads=DROP))
    assert kv_heads(spec) == {8}
    assert "num_attention_heads" in spec.source("num_kv_heads")


def test_null_kv_head_field_is_mha() -> None:
    assert kv_heads(spec_from_config(cfg(num_key_value_heads=None))) == {8}


def _falcon(**overrides: Any) -> dict[str, Any]:
    return cfg(model_type="falcon", num_key_value_heads=DROP, intermediate_size=DROP, **overrides)


def test_falcon_old_architecture_with_multi_query_is_one_kv_head() -> None:
    spec = spec_from_config(_falcon(new_decoder_architecture=False, multi_query=True))
    assert kv_heads(spec) == {1}
    assert "multi_query" in spec.source("num_kv_heads")


def test_falcon_old_architecture_defaults_to_multi_query() -> None:
    # FalconConfig's multi_query defaults to True
    assert kv_heads(spec_from_config(_falcon(new_decoder_architecture=False))) == {1}


def test_falcon_old_architecture_without_multi_query_is_mha() -> None:
    assert kv_heads(spec_from_config(_falcon(new_decoder_architecture=False, multi_query=False))) == {8}


def test_falcon_new_decoder_architecture_reads_num_kv_heads() -> None:
    spec = spec_from_config(_falcon(new_decoder_architecture=True, num_kv_heads=4, multi_query=True))
    assert kv_heads(spec) == {4}


# --- nested text_config ----------------------------------------------------------------------


def _gemma3(**text: Any) -> dict[str, Any]:
    inner = {"model_type": "gemma3_text", "hidden_size": 2560, "intermediate_size": 10240,
             "num_hidden_layers": 12, "sliding_window": 1024, **text}
    return {"model_type": "gemma3", "torch_dtype": "bfloat16", "architectures": ["Gemma3ForConditionalGeneration"],
            "num_hidden_layers": 99, "text_config": {k: v for k, v in inner.items() if v is not DROP}}


def test_nested_text_config_is_read() -> None:
    merged, model_type = text_config(_gemma3())
    assert model_type == "gemma3_text"
    assert merged["torch_dtype"] == "bfloat16"  # carried in from the outer config
    assert merged["num_hidden_layers"] == 12  # the outer config's own keys are not mixed in

    spec = spec_from_config(_gemma3())
    assert spec.model_type == "gemma3_text"
    assert spec.native_dtype == "bf16"
    assert spec.num_layers == 12


def test_gemma3_defaults_fill_missing_heads() -> None:
    # Gemma 3 4B's text_config has no head keys: Gemma3TextConfig defaults 8 heads, 4 KV, head_dim 256
    spec = spec_from_config(_gemma3())
    assert spec.dims.num_attention_heads == 8
    assert kv_heads(spec) == {4}
    assert spec.dims.head_dim == 256
    assert spec.dims.vocab_size == 262208
    assert any("Gemma3TextConfig defaults" in note for note in spec.notes)


def test_nested_text_config_without_its_own_model_type() -> None:
    assert text_config(_gemma3(model_type=DROP))[1] == "gemma3_text"
    assert spec_from_config(_gemma3(model_type=DROP)).model_type == "gemma3_text"


def test_inner_keys_win_over_the_carried_outer_ones() -> None:
    spec = spec_from_config(_gemma3(torch_dtype="float16"))
    assert spec.native_dtype == "fp16"


def test_explicit_text_heads_win_over_gemma3_defaults() -> None:
    spec = spec_from_config(_gemma3(num_attention_heads=16, num_key_value_heads=8, head_dim=128))
    assert (spec.dims.num_attention_heads, spec.dims.head_dim) == (16, 128)
    assert kv_heads(spec) == {8}


def test_gemma_3_4b_catalog_config_takes_the_defaults() -> None:
    spec = kvbudget.load_model("google/gemma-3-4b-it")
    assert (spec.dims.num_attention_heads, spec.dims.head_dim) == (8, 256)
    assert kv_heads(spec) == {4}


# --- per-layer patterns ----------------------------------------------------------------------


def test_explicit_layer_types() -> None:
    layer_types = ["sliding_attention", "full_attention", "full_attention", "sliding_attention"]
    spec = spec_from_config(cfg(layer_types=layer_types, sliding_window=64))
    assert kinds(spec) == ["sliding_window", "full_attention", "full_attention", "sliding_window"]
    assert {layer.window for layer in spec.layers if isinstance(layer, SlidingWindow)} == {64}


def test_gemma2_even_layers_slide() -> None:
    spec = spec_from_config(cfg(model_type="gemma2", num_hidden_layers=6, sliding_window=4096))
    assert kinds(spec) == ["sliding_window", "full_attention"] * 3


def test_gemma3_sliding_window_pattern_6() -> None:
    spec = spec_from_config(cfg(model_type="gemma3_text", num_hidden_layers=12, sliding_window=512,
                                sliding_window_pattern=6))
    full = [i for i, k in enumerate(kinds(spec)) if k == "full_attention"]
    assert full == [5, 11]
    assert kinds(spec).count("sliding_window") == 10


def test_gemma3_other_sliding_window_pattern() -> None:
    spec = spec_from_config(cfg(model_type="gemma3_text", num_hidden_layers=6, sliding_window=512,
                                sliding_window_pattern=2))
    assert kinds(spec) == ["sliding_window", "full_attention"] * 3


def test_qwen2_use_sliding_window_with_max_window_layers() -> None:
    spec = spec_from_config(cfg(model_type="qwen2", num_hidden_layers=8, use_sliding_window=True,
                                sliding_window=1024, max_window_layers=5))
    assert kinds(spec) == ["full_attention"] * 5 + ["sliding_window"] * 3
    assert {layer.window for layer in spec.layers if isinstance(layer, SlidingWindow)} == {1024}


def test_qwen2_without_use_sliding_window_is_all_full() -> None:
    spec = spec_from_config(cfg(model_type="qwen2", num_hidden_layers=8, use_sliding_window=False,
                                sliding_window=1024, max_window_layers=5))
    assert kinds(spec) == ["full_attention"] * 8


def _qwen3_next(**overrides: Any) -> dict[str, Any]:
    return cfg(model_type="qwen3_next", num_hidden_layers=8, head_dim=64, num_experts=4, num_experts_per_tok=2,
               moe_intermediate_size=128, shared_expert_intermediate_size=128, linear_num_key_heads=2,
               linear_num_value_heads=4, linear_key_head_dim=32, linear_value_head_dim=32, **overrides)


def test_qwen3_next_full_attention_interval_4() -> None:
    spec = spec_from_config(_qwen3_next(full_attention_interval=4))
    assert kinds(spec) == (["recurrent_state"] * 3 + ["full_attention"]) * 2
    states = [layer for layer in spec.layers if isinstance(layer, RecurrentState)]
    assert {s.variant for s in states} == {"gated_delta_net"}


def test_qwen3_next_other_interval() -> None:
    spec = spec_from_config(_qwen3_next(full_attention_interval=2))
    assert kinds(spec) == ["recurrent_state", "full_attention"] * 4


def _jamba(**overrides: Any) -> dict[str, Any]:
    return cfg(model_type="jamba", num_hidden_layers=16, num_experts=4, num_experts_per_tok=2, **overrides)


def test_jamba_attn_layer_period_and_offset() -> None:
    spec = spec_from_config(_jamba(attn_layer_period=8, attn_layer_offset=4))
    attention = [i for i, layer in enumerate(spec.layers) if layer.kind == "full_attention"]
    assert attention == [4, 12]
    assert {layer.variant for layer in spec.layers if isinstance(layer, RecurrentState)} == {"mamba"}
    assert spec.num_layers == 16


def test_jamba_other_period() -> None:
    spec = spec_from_config(_jamba(attn_layer_period=4, attn_layer_offset=1))
    assert [i for i, k in enumerate(kinds(spec)) if k == "full_attention"] == [1, 5, 9, 13]


def _llama4(**overrides: Any) -> dict[str, Any]:
    return cfg(model_type="llama4_text", num_hidden_layers=8, head_dim=32, num_local_experts=4,
               num_experts_per_tok=1, intermediate_size_mlp=1024, **overrides)


def test_llama4_chunked_attention_with_no_rope_layers() -> None:
    # no_rope_layers[i] == 1: the layer uses RoPE and chunked local attention; 0: NoPE global layer
    spec = spec_from_config(_llama4(attention_chunk_size=8192, no_rope_layers=[1, 1, 1, 0, 1, 0, 1, 1]))
    assert kinds(spec) == ["chunked_local"] * 3 + ["full_attention", "chunked_local", "full_attention"] + ["chunked_local"] * 2
    assert {layer.chunk for layer in spec.layers if isinstance(layer, ChunkedLocal)} == {8192}


def test_llama4_without_no_rope_layers_uses_every_fourth_layer_global() -> None:
    spec = spec_from_config(_llama4(attention_chunk_size=4096))
    assert kinds(spec) == (["chunked_local"] * 3 + ["full_attention"]) * 2


def test_llama4_without_attention_chunk_size_is_all_full() -> None:
    spec = spec_from_config(_llama4(no_rope_layers=[1, 1, 1, 0, 1, 1, 1, 0]))
    assert kinds(spec) == ["full_attention"] * 8


def test_llama4_nested_in_a_multimodal_wrapper() -> None:
    inner = _llama4(attention_chunk_size=8192)
    inner.pop("torch_dtype")
    spec = spec_from_config({"model_type": "llama4", "torch_dtype": "bfloat16", "text_config": inner})
    assert spec.model_type == "llama4_text"
    assert spec.native_dtype == "bf16"
    assert kinds(spec).count("chunked_local") == 6


# --- layer kinds of real catalog models ------------------------------------------------------


def test_gemma_2_9b_layers() -> None:
    spec = kvbudget.load_model("google/gemma-2-9b-it")
    assert spec.layer_kinds() == {"sliding_window": 21, "full_attention": 21}
    assert kinds(spec) == ["sliding_window", "full_attention"] * 21
    assert {layer.window for layer in spec.layers if isinstance(layer, SlidingWindow)} == {4096}


def test_gemma_3_27b_layers() -> None:
    spec = kvbudget.load_model("google/gemma-3-27b-it")
    assert spec.layer_kinds() == {"sliding_window": 52, "full_attention": 10}
    assert {layer.window for layer in spec.layers if isinstance(layer, SlidingWindow)} == {1024}
    assert [i for i, k in enumerate(kinds(spec)) if k == "full_attention"] == list(range(5, 62, 6))


def test_gpt_oss_20b_layers() -> None:
    spec = kvbudget.load_model("openai/gpt-oss-20b")
    assert spec.layer_kinds() == {"sliding_window": 12, "full_attention": 12}
    assert {layer.window for layer in spec.layers if isinstance(layer, SlidingWindow)} == {128}


def test_deepseek_v3_layers_are_mla() -> None:
    spec = kvbudget.load_model("deepseek-ai/DeepSeek-V3")
    assert spec.layer_kinds() == {"mla": 61}
    assert {(layer.kv_lora_rank, layer.qk_rope_head_dim) for layer in spec.layers if isinstance(layer, MLA)} == {(512, 64)}
    assert spec.num_layers == 61


def test_kimi_k2_reads_as_deepseek_v3_mla() -> None:
    """Kimi K2's config.json says model_type kimi_k2 (architectures DeepseekV3ForCausalLM): MLA,
    one latent of kv_lora_rank + qk_rope_head_dim per layer, no KV heads. By hand from the config:
    61 layers x (512 + 64) x 2 bytes (bf16) = 70,272 bytes a token."""
    entry = find("moonshotai/Kimi-K2-Instruct")
    assert entry is not None and entry.config["model_type"] == "kimi_k2"
    c = entry.config
    assert (c["num_hidden_layers"], c["kv_lora_rank"], c["qk_rope_head_dim"]) == (61, 512, 64)
    spec = kvbudget.load_model("kimi-k2")
    assert spec.layer_kinds() == {"mla": 61}
    assert bytes_per_token(spec.layers, kv_element_type(spec)) == 61 * (512 + 64) * 2 == 70_272
    by_role = spec.params_by_role()
    # 60 MoE layers of 384 experts (gate, up, down: 3 x 7168 x 2048 each); first_k_dense_replace 1
    assert by_role["experts"] == 60 * 384 * 3 * 7168 * 2048
    assert by_role["shared_experts"] == 60 * 3 * 7168 * 2048


def test_qwen3_next_layers() -> None:
    spec = kvbudget.load_model("Qwen/Qwen3-Next-80B-A3B-Instruct")
    assert spec.layer_kinds() == {"recurrent_state": 36, "full_attention": 12}
    assert [i for i, k in enumerate(kinds(spec)) if k == "full_attention"] == list(range(3, 48, 4))
    assert {layer.variant for layer in spec.layers if isinstance(layer, RecurrentState)} == {"gated_delta_net"}


def test_jamba_v0_1_layers() -> None:
    spec = kvbudget.load_model("ai21labs/Jamba-v0.1")
    assert spec.layer_kinds() == {"recurrent_state": 28, "full_attention": 4}
    assert [i for i, k in enumerate(kinds(spec)) if k == "full_attention"] == [4, 12, 20, 28]
    assert {layer.variant for layer in spec.layers if isinstance(layer, RecurrentState)} == {"mamba"}


def test_llama_4_scout_layers() -> None:
    spec = kvbudget.load_model("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    assert spec.layer_kinds() == {"chunked_local": 36, "full_attention": 12}
    assert {layer.chunk for layer in spec.layers if isinstance(layer, ChunkedLocal)} == {8192}
    assert [i for i, k in enumerate(kinds(spec)) if k == "full_attention"] == list(range(3, 48, 4))


def test_falcon_h1_runs_attention_and_mamba2_in_every_layer() -> None:
    spec = kvbudget.load_model("tiiuae/Falcon-H1-0.5B-Instruct")
    assert spec.num_layers == 36
    assert len(spec.layers) == 72
    assert spec.layer_kinds() == {"full_attention": 36, "recurrent_state": 36}
    assert spec.layer_of == tuple(i for i in range(36) for _ in range(2))
    for i in range(36):
        pair = [layer for layer, of in zip(spec.layers, spec.layer_of, strict=True) if of == i]
        assert [type(layer) for layer in pair] == [FullAttention, RecurrentState]
        assert pair[1].variant == "mamba2"  # type: ignore[union-attr]


def test_bare_sliding_window_applies_to_every_layer() -> None:
    # vLLM 0.33 engine/arg_utils.py: with no layer_types the model-level sliding_window becomes
    # CacheConfig.sliding_window, which attention.py applies to every layer.
    spec = kvbudget.load_model("mistralai/Mistral-7B-v0.1")
    assert spec.layer_kinds() == {"sliding_window": 32}
    assert {layer.window for layer in spec.layers} == {4096}  # type: ignore[union-attr]
    assert kvbudget.load_model("microsoft/Phi-3-mini-4k-instruct").layer_kinds() == {"sliding_window": 32}


# --- malformed and partial configs -----------------------------------------------------------


def test_config_error_is_an_input_error() -> None:
    assert issubclass(ConfigError, InputError)


BAD_CONFIGS: list[tuple[str, dict[str, Any], str]] = [
    ("missing hidden_size", cfg(hidden_size=DROP), "hidden_size"),
    ("missing num_hidden_layers", cfg(num_hidden_layers=DROP), "num_hidden_layers"),
    ("hidden_size not a number", cfg(hidden_size="big"), "hidden_size"),
    ("negative heads", cfg(num_attention_heads=-8), "num_attention_heads"),
    ("layer_types too short", cfg(layer_types=["full_attention"] * 3), "layer_types"),
    ("unknown layer type", cfg(layer_types=["full_attention"] * 3 + ["weird_attention"]), "weird_attention"),
    ("no model_type", cfg(model_type=DROP), "model_type"),
    ("sliding layers without sliding_window", cfg(layer_types=["sliding_attention"] * 4), "sliding_window"),
    ("sliding_window null", cfg(model_type="gemma2", sliding_window=None), "sliding_window"),
    ("missing vocab_size", cfg(vocab_size=DROP), "vocab_size"),
    ("zero kv heads", cfg(num_key_value_heads=0), "num_key_value_heads"),
    ("fractional hidden_size", cfg(hidden_size=256.5), "hidden_size"),
    ("boolean num_hidden_layers", cfg(num_hidden_layers=True), "num_hidden_layers"),
    ("unknown torch_dtype", cfg(torch_dtype="float13"), "torch_dtype"),
    ("moe without experts", cfg(model_type="mixtral"), "num_local_experts"),
    ("mla without kv_lora_rank", cfg(model_type="deepseek_v3", n_routed_experts=4), "kv_lora_rank"),
]


@pytest.mark.parametrize(("config", "field"), [(c, f) for _, c, f in BAD_CONFIGS], ids=[n for n, _, _ in BAD_CONFIGS])
def test_bad_config_raises_config_error_naming_the_field(config: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        spec_from_config(config)
    assert field in str(info.value)


def test_bad_value_is_quoted_in_the_message() -> None:
    with pytest.raises(ConfigError, match="'big'"):
        spec_from_config(cfg(hidden_size="big"))


def test_layer_types_error_says_how_many() -> None:
    with pytest.raises(ConfigError, match="3 entries for 4 layers"):
        spec_from_config(cfg(layer_types=["full_attention"] * 3))


def test_kv_heads_that_do_not_divide_the_heads_are_an_error() -> None:
    with pytest.raises(ConfigError, match="7 KV heads do not divide 32 attention heads"):
        spec_from_config(cfg(hidden_size=4096, num_attention_heads=32, num_key_value_heads=7))


def test_kv_heads_error_names_the_field() -> None:
    with pytest.raises(ConfigError, match="num_key_value_heads"):
        spec_from_config(cfg(hidden_size=4096, num_attention_heads=32, num_key_value_heads=7))


def test_error_names_the_file_it_came_from(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg(hidden_size=DROP)), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"config\.json.*hidden_size"):
        kvbudget.load_model(str(path))


def _unreadable_weights(quantization_config: dict[str, object]) -> None:
    """KV sizing goes on; weight sizing with --weights-dtype auto is a ConfigError naming the problem."""
    spec = spec_from_config(cfg(quantization_config=quantization_config))
    assert spec.weight_format is None
    assert kvbudget.kv(spec, context=16).bytes_per_sequence > 0
    with pytest.raises(ConfigError, match="--weights-dtype"):
        textbook_fit(spec, gpu="H100", context=16)
    assert textbook_fit(spec, gpu="H100", context=16, weights_dtype="fp8").weights_format.startswith("fp8")


def test_unknown_quant_method_needs_weights_dtype() -> None:
    _unreadable_weights({"quant_method": "weird"})
    spec = spec_from_config(cfg(quantization_config={"quant_method": "weird"}))
    assert any("quant_method 'weird'" in note for note in spec.notes)


def test_non_integer_quantization_bits_needs_weights_dtype() -> None:
    _unreadable_weights({"quant_method": "gptq", "bits": "four"})


def test_fp8_block_size_must_have_two_numbers() -> None:
    _unreadable_weights({"quant_method": "fp8", "weight_block_size": [128]})
    _unreadable_weights({"quant_method": "fp8", "weight_block_size": [0, 128]})


def test_hostile_compressed_tensors_groups_need_weights_dtype() -> None:
    _unreadable_weights({"quant_method": "compressed-tensors", "config_groups": {"g": []}})
    _unreadable_weights({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": [1]}}})
    _unreadable_weights({"quant_method": "compressed-tensors",
                         "config_groups": {"g": {"targets": ["Linear"], "weights": {"type": "int", "num_bits": 0}}}})


def test_quantization_config_must_be_an_object() -> None:
    with pytest.raises(ConfigError, match="quantization_config"):
        spec_from_config(cfg(quantization_config="awq"))


def test_known_quant_method_is_read() -> None:
    spec = spec_from_config(cfg(quantization_config={"quant_method": "fp8", "weight_block_size": [128, 128]}))
    assert spec.weight_format.name == "fp8"
    assert spec.weight_format.block == (128, 128)


# --- model types outside the table -----------------------------------------------------------


def test_unknown_model_type_is_read_as_llama_with_a_note() -> None:
    assert "fancy_llama" not in QUIRKS
    spec = spec_from_config(cfg(model_type="fancy_llama"))
    assert spec.model_type == "fancy_llama"
    assert kinds(spec) == ["full_attention"] * 4
    assert kv_heads(spec) == {2}
    assert any("fancy_llama" in note and "not in kvbudget's table" in note for note in spec.notes)
    # same counts as the same config read as llama
    assert spec.params == spec_from_config(cfg()).params


def test_known_model_type_has_no_not_in_table_note() -> None:
    assert not any("not in kvbudget's table" in note for note in spec_from_config(cfg()).notes)


# --- issue #11: glm4_moe, minimax_m2, qwen3_vl, qwen3_vl_moe -----------------------------------


def _catalog_config(model: str) -> dict[str, Any]:
    entry = find(model)
    assert entry is not None, model
    return json.loads(json.dumps(entry.config))  # a deep copy to change


def _roles(spec: ModelSpec, layer: int) -> set[str]:
    return {t.role for t in spec.inventory.layers[layer]}


def _active_non_embedding(spec: ModelSpec) -> float:
    """What model cards call "active" parameters: everything but the embeddings and lm_head, with only
    experts_per_token of the routed experts."""
    by_role = spec.params_by_role()
    routed = by_role.get("experts", 0)
    rest = sum(v for k, v in by_role.items() if k not in ("embeddings", "lm_head", "experts", "vision"))
    return rest + routed * spec.experts_per_token / spec.num_experts


def test_glm_4_5_air_layers_kv_and_moe_layout() -> None:
    spec = kvbudget.load_model("zai-org/GLM-4.5-Air")
    assert spec.model_type == "glm4_moe"
    assert spec.num_layers == 46  # num_hidden_layers; the MTP layer (stored as layer 46) is not one of them
    assert kinds(spec) == ["full_attention"] * 46
    assert kv_heads(spec) == {8}
    assert {layer.head_dim for layer in spec.layers} == {128}  # explicit head_dim (hidden 4096 / 96 heads is 42.67)
    # KV per token: 2 (K and V) x 46 layers x 8 KV heads x 128 head_dim x 2 bytes (bf16) = 188,416
    assert bytes_per_token(spec.layers, kv_element_type(spec)) == 2 * 46 * 8 * 128 * 2 == 188_416
    # first_k_dense_replace 1: layer 0 has a dense MLP, layers 1..45 route over 128 experts plus one shared
    assert "mlp" in _roles(spec, 0) and "experts" not in _roles(spec, 0)
    assert all({"experts", "shared_experts", "router"} <= _roles(spec, i) and "mlp" not in _roles(spec, i)
               for i in range(1, 46))
    assert (spec.num_experts, spec.experts_per_token) == (128, 8)
    assert spec.mtp_layers == 1  # num_nextn_predict_layers: the glm4_moe_mtp draft's, built only for MTP


def test_glm_4_5_air_params_by_hand_and_against_the_card() -> None:
    """GLM-4.5-Air, from its config (vLLM 0.33.0 glm4_moe.py): hidden 4096, 46 layers, 96 heads / 8 KV heads
    of 128 with q/k/v biases (attention_bias) and no o_proj bias, no q/k norm (use_qk_norm false), layer 0 a
    10944-wide gated MLP, layers 1..45: router 128 x 4096 + a 128-entry e_score_correction_bias, 128 experts
    and 1 shared expert of width 1408; untied vocab 151552."""
    h, n, heads, kv, hd, v = 4096, 46, 96, 8, 128, 151552
    attention = heads * hd * h + 2 * kv * hd * h + h * heads * hd + (heads + 2 * kv) * hd  # + q/k/v biases
    dense = 3 * h * 10944
    moe = 128 * h + 128 + 128 * 3 * h * 1408 + 3 * h * 1408
    norms = 2 * h
    total = 2 * v * h + n * (attention + norms) + dense + (n - 1) * moe + h
    spec = kvbudget.load_model("zai-org/GLM-4.5-Air")
    assert spec.params == total == 106_852_251_264
    assert abs(total - 106e9) <= 0.01 * 106e9  # model card: 106B total
    assert abs(_active_non_embedding(spec) - 12e9) <= 0.02 * 12e9  # model card: 12B active


def _glm_4_5() -> dict[str, Any]:
    """GLM-4.5 (355B-A32B): the Air config with GLM-4.5's shapes, as ai-dynamo/aiconfigurator's
    zai-org--GLM-4.7-FP8_config.json (same architecture) and THUDM/slime scripts/models/glm4.5-355B-A32B.sh
    give them: 92 layers (3 dense + 89 MoE), hidden 5120, 96 heads / 8 KV heads of 128, FFN 12288, 160 experts
    of 1536 top-8 + 1 shared, q/k norm on, 131072 positions."""
    c = _catalog_config("zai-org/GLM-4.5-Air")
    c.update(hidden_size=5120, num_hidden_layers=92, intermediate_size=12288, moe_intermediate_size=1536,
             n_routed_experts=160, first_k_dense_replace=3, use_qk_norm=True)
    return c


def test_glm_4_5_355b_params_kv_and_qk_norm() -> None:
    spec = spec_from_config(_glm_4_5())
    assert spec.num_layers == 92
    # KV per token: 2 x 92 layers x 8 KV heads x 128 x 2 bytes = 376,832
    assert bytes_per_token(spec.layers, kv_element_type(spec)) == 2 * 92 * 8 * 128 * 2 == 376_832
    assert abs(spec.params - 355e9) <= 0.01 * 355e9  # model card: 355B total
    assert abs(_active_non_embedding(spec) - 32e9) <= 0.02 * 32e9  # model card: 32B active
    # use_qk_norm: a q_norm and a k_norm of head_dim in every layer
    air_like = spec_from_config({**_glm_4_5(), "use_qk_norm": False})
    assert spec.params - air_like.params == 92 * 2 * 128
    assert ["mlp" in _roles(spec, i) for i in range(5)] == [True, True, True, False, False]


@pytest.mark.parametrize(("change", "field"), [
    ({"first_k_dense_replace": 47}, "first_k_dense_replace"),
    ({"n_routed_experts": -128}, "n_routed_experts"),
    ({"n_shared_experts": -1}, "n_shared_experts"),
    ({"use_qk_norm": "false"}, "use_qk_norm"),
    ({"num_nextn_predict_layers": 100_000}, "num_nextn_predict_layers"),
])
def test_hostile_glm4_moe_config_names_the_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        spec_from_config({**_catalog_config("zai-org/GLM-4.5-Air"), **change})


def test_minimax_m2_every_layer_is_full_attention_gqa() -> None:
    spec = kvbudget.load_model("MiniMaxAI/MiniMax-M2")
    assert spec.model_type == "minimax_m2"
    assert spec.num_layers == 62 and kinds(spec) == ["full_attention"] * 62  # attn_type_list: 62 x 1
    assert kv_heads(spec) == {8}
    # KV per token: 2 x 62 layers x 8 KV heads x 128 head_dim x 2 bytes (bf16 cache) = 253,952
    assert bytes_per_token(spec.layers, kv_element_type(spec)) == 2 * 62 * 8 * 128 * 2 == 253_952
    assert (spec.num_experts, spec.experts_per_token) == (256, 8)
    assert spec.mtp_layers == 0  # num_mtp_modules are dropped by vLLM 0.33.0 minimax_m2.py; no m2 MTP draft
    assert spec.weight_format is not None and spec.weight_format.name == "fp8"


def test_minimax_m2_params_by_hand_and_against_the_card() -> None:
    """MiniMax-M2 (vLLM 0.33.0 minimax_m2.py): hidden 3072, 62 layers, 48 heads / 8 KV heads of 128 without
    biases, q_norm over 48 x 128 and k_norm over 8 x 128 (one weight per element), every layer MoE: router
    256 x 3072 + a 256-entry e_score_correction_bias (use_routing_bias), 256 experts of intermediate_size 1536,
    no shared expert; untied vocab 200064."""
    h, n, heads, kv, hd, v, e, i = 3072, 62, 48, 8, 128, 200064, 256, 1536
    attention = 2 * heads * hd * h + 2 * kv * hd * h
    layer = attention + heads * hd + kv * hd + e * h + e + e * 3 * h * i + 2 * h
    total = 2 * v * h + n * layer + h
    spec = kvbudget.load_model("MiniMaxAI/MiniMax-M2")
    assert spec.params == total == 228_689_764_864
    assert abs(total - 230e9) <= 0.01 * 230e9  # model card: 230B total
    # model card: 10B active; the non-embedding count is 9.80B (MiniMax's own rounding)
    assert abs(_active_non_embedding(spec) - 10e9) <= 0.025 * 10e9
    no_bias = spec_from_config({**_catalog_config("MiniMaxAI/MiniMax-M2"), "use_routing_bias": False})
    assert spec.params - no_bias.params == n * e


@pytest.mark.parametrize(("change", "field"), [
    ({"attn_type_list": [0] + [1] * 61}, "attn_type_list"),  # a lightning-attention layer (MiniMax-Text-01)
    ({"attn_type_list": [1] * 61}, "attn_type_list"),
    ({"num_local_experts": 0}, "num_local_experts"),
    ({"use_routing_bias": "yes"}, "use_routing_bias"),
])
def test_hostile_minimax_m2_config_names_the_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        spec_from_config({**_catalog_config("MiniMaxAI/MiniMax-M2"), **change})


def _qwen3_vl_tower(depth: int, h: int, inter: int, out: int, deepstack: int) -> int:
    """Qwen3-VL's vision tower by hand (vLLM 0.33.0 qwen3_vl.py): Conv3d patch embedding 3 channels x 2 frames
    x 16 x 16 with bias, 2304 learned positions, per block a biased qkv and proj, a biased fc1/fc2 MLP and two
    LayerNorms, the merger (LayerNorm of h, fc1 4h x 4h and fc2 out x 4h, biased) and one merger per deepstack
    index (LayerNorm of 4h after the 2 x 2 merge)."""
    merged = 4 * h
    block = 3 * h * h + 3 * h + h * h + h + inter * h + inter + h * inter + h + 4 * h
    mlp = merged * merged + merged + out * merged + out
    return (h * 3 * 2 * 16 * 16 + h) + 2304 * h + depth * block + (2 * h + mlp) + deepstack * (2 * merged + mlp)


def test_qwen3_vl_30b_a3b_is_qwen3_30b_a3b_plus_its_vision_tower() -> None:
    spec = kvbudget.load_model("Qwen/Qwen3-VL-30B-A3B-Instruct")
    assert spec.model_type == "qwen3_vl_moe_text"
    assert spec.num_layers == 48 and kinds(spec) == ["full_attention"] * 48
    # KV per token: 2 x 48 layers x 4 KV heads x 128 head_dim x 2 bytes = 98,304
    assert bytes_per_token(spec.layers, kv_element_type(spec)) == 2 * 48 * 4 * 128 * 2 == 98_304
    assert (spec.num_experts, spec.experts_per_token) == (128, 8)
    assert spec.max_context == 262144 and spec.native_dtype == "bf16"
    vision = _qwen3_vl_tower(27, 1152, 4304, 2048, 3)
    assert spec.params_by_role()["vision"] == vision == 538_631_408
    assert spec.params - vision == kvbudget.load_model("Qwen/Qwen3-30B-A3B").params  # the same decoder
    assert abs(spec.params - 31.1e9) <= 0.01 * 31.1e9  # HF "Model size" 31.1B (as recalled in the catalog)
    # Qwen3-30B-A3B's card: 3.3B activated, which counts the embeddings and lm_head (2 x 151936 x 2048)
    active = _active_non_embedding(spec) + 2 * 151936 * 2048
    assert abs(active - 3.3e9) <= 0.02 * 3.3e9


def test_qwen3_vl_8b_is_qwen3_8b_plus_its_vision_tower() -> None:
    spec = kvbudget.load_model("Qwen/Qwen3-VL-8B-Instruct")
    assert spec.model_type == "qwen3_vl_text"
    assert spec.num_layers == 36 and kv_heads(spec) == {8}
    # KV per token: 2 x 36 layers x 8 KV heads x 128 head_dim x 2 bytes = 147,456
    assert bytes_per_token(spec.layers, kv_element_type(spec)) == 2 * 36 * 8 * 128 * 2 == 147_456
    vision = _qwen3_vl_tower(27, 1152, 4304, 4096, 3)
    assert spec.params_by_role()["vision"] == vision
    assert spec.params - vision == kvbudget.load_model("Qwen/Qwen3-8B").params
    assert spec.params == 8_767_123_696
    assert abs(spec.params - 8.77e9) <= 0.01 * 8.77e9


def test_qwen3_vl_text_config_without_its_own_model_type_reads_by_the_wrapper() -> None:
    c = _catalog_config("Qwen/Qwen3-VL-30B-A3B-Instruct")
    del c["text_config"]["model_type"]
    assert text_config(c)[1] == "qwen3_vl_moe_text"
    assert spec_from_config(c).params == kvbudget.load_model("Qwen/Qwen3-VL-30B-A3B-Instruct").params


@pytest.mark.parametrize(("where", "change", "field"), [
    ("vision_config", {"deepstack_visual_indexes": 8}, "deepstack_visual_indexes"),
    ("vision_config", {"depth": 0}, "depth"),
    ("vision_config", {"out_hidden_size": None}, "out_hidden_size"),
    ("text_config", {"num_experts": -1}, "num_experts"),
])
def test_hostile_qwen3_vl_config_names_the_field(where: str, change: dict[str, Any], field: str) -> None:
    c = _catalog_config("Qwen/Qwen3-VL-30B-A3B-Instruct")
    c[where].update(change)
    with pytest.raises(ConfigError, match=field):
        spec_from_config(c)


@pytest.mark.parametrize("model", ["zai-org/GLM-4.5-Air", "MiniMaxAI/MiniMax-M2", "Qwen/Qwen3-VL-30B-A3B-Instruct",
                                   "Qwen/Qwen3-VL-8B-Instruct"])
def test_issue_11_models_fit_end_to_end(model: str, capsys: pytest.CaptureFixture[str]) -> None:
    from kvbudget.cli import main

    assert main(["fit", model, "--gpu", "H100", "--tp", "4"]) == 0
    out = capsys.readouterr().out
    assert model in out and "GPU KV cache size" in out and "full_attention" in out


def _qwen2_5_vl_7b() -> dict[str, Any]:
    """Qwen/Qwen2.5-VL-7B-Instruct's config.json shapes (flat: text keys at the top; vision_config without a
    model_type, with in_chans), as the Qwen2.5-VL release wrote it."""
    return {
        "architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl", "hidden_size": 3584,
        "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
        "max_position_embeddings": 128000, "max_window_layers": 28, "sliding_window": 32768,
        "use_sliding_window": False, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 152064,
        "vision_config": {"depth": 32, "hidden_act": "silu", "hidden_size": 1280, "intermediate_size": 3420,
                          "num_heads": 16, "in_chans": 3, "out_hidden_size": 3584, "patch_size": 14,
                          "spatial_merge_size": 2, "spatial_patch_size": 14, "window_size": 112,
                          "fullatt_block_indexes": [7, 15, 23, 31], "tokens_per_second": 2, "temporal_patch_size": 2},
    }


def test_qwen2_5_vl_7b_is_qwen2_5_7b_plus_its_vision_tower() -> None:
    """Qwen2.5-VL's tower by hand (vLLM 0.33.0 qwen2_5_vl.py): Conv3d 3 x 2 x 14 x 14 without bias; per block
    RMSNorm x 2, biased qkv and proj, biased gated MLP of 3420; merger RMSNorm(1280), fc1 5120 x 5120 and fc2
    3584 x 5120 with biases. The decoder is Qwen2 (q/k/v biases), so the text part is Qwen2.5-7B's."""
    h, i, n, out, merged = 1280, 3420, 32, 3584, 4 * 1280
    block = 2 * h + 3 * h * h + 3 * h + h * h + h + 2 * i * h + 2 * i + h * i + h
    vision = h * 3 * 2 * 14 * 14 + n * block + h + merged * merged + merged + out * merged + out
    spec = spec_from_config(_qwen2_5_vl_7b())
    assert spec.model_type == "qwen2_5_vl_text"
    assert spec.params_by_role()["vision"] == vision == 676_550_144
    assert spec.params - vision == kvbudget.load_model("Qwen/Qwen2.5-7B-Instruct").params
    assert abs(spec.params - 8.29e9) <= 0.01 * 8.29e9  # HF "Model size" of Qwen2.5-VL-7B-Instruct: 8.29B
    # KV per token: 2 x 28 layers x 4 KV heads x 128 head_dim x 2 bytes = 57,344
    assert bytes_per_token(spec.layers, kv_element_type(spec)) == 2 * 28 * 4 * 128 * 2 == 57_344
