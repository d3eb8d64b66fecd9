"""``config.json`` -> ``ModelSpec``.

Model-type quirks live in one table here (``QUIRKS``) and nowhere else. Field names and
aliases follow the engines: head size as vLLM's ``ModelArchConfigConvertorBase.get_head_size``
(explicit ``head_dim`` first, else hidden / heads; MLA: latent + rope), KV heads through
vLLM's alias list (``transformers_utils/config.py: CONFIG_FIELD_ALIASES``) and per-layer
patterns as HF transformers generates ``layer_types``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from .._record import record, replace
from ..inputs import excerpt, real, whole
from ..units import InputError
from . import params as P
from .layers import MLA, ChunkedLocal, FullAttention, Layer, RecurrentState, SlidingWindow, SparseIndexer
from .params import Inventory, Tensor
from .params import inventory as make_inventory
from .spec import INDEXERS_NOTE, UNREAD_WEIGHTS, Dims, IndexerKeys, ModelSpec, VisionTower
from .weights import WeightFormat, from_quantization_config

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any


class ConfigError(InputError):
    """A config.json that is malformed, partial or describes something kvbudget cannot read."""


@record
class Quirks:
    """What one ``model_type`` does differently. Defaults are Llama's."""

    mlp: str = "gated"  # gated (SwiGLU/GeGLU: gate, up, down) | plain (fc1, fc2)
    norm_bias: bool = False  # LayerNorm with bias (else RMSNorm / weight-only LayerNorm)
    norms_per_layer: int = 2
    bias_key: str = "attention_bias"  # config key that turns on the q/k/v biases
    qkv_bias: bool = False  # their default when the config does not say
    o_bias: bool = False  # o_proj always has a bias
    o_bias_follows: bool = False  # o_proj has a bias exactly when q/k/v do (LlamaAttention)
    o_bias_key: str = ""  # config key that turns on the o_proj bias on its own (Seed-OSS attention_out_bias)
    mlp_bias_key: str = "mlp_bias"
    mlp_bias: bool = False
    qk_norm: bool = False  # per-head q_norm and k_norm weights
    qk_norm_key: str = ""  # config key that turns them on
    qk_norm_per_head: bool = False  # q_norm is (heads, head_dim) and k_norm (kv_heads, head_dim), as Cohere
    q_gate_key: str = ""  # config key of an output gate fused into q_proj (Qwen3-Next), default on
    attention_sinks: bool = False  # one learned sink per head (gpt-oss)
    tied: bool = False  # default of tie_word_embeddings when the config does not say
    positions_key: str = ""  # a learned absolute position table of this many rows ...
    positions_extra: int = 0  # ... plus this many (OPT's offset of 2)
    lm_head_bias: bool = False
    dense_inter_key: str = ""  # width of the dense MLP when it differs from intermediate_size (Llama 4)
    falcon_heads: bool = False  # multi_query / new_decoder_architecture / num_ln_in_parallel_attn
    layout: str = "uniform"  # how layer kinds are chosen, see _layer_types()
    moe: str = ""  # which layers are MoE, see _is_moe()
    expert_bias: bool = False  # router and experts carry biases (gpt-oss)
    shared_expert_default: bool = False  # one shared expert of the expert width when the config names none
    shared_expert_gate: bool = False  # a sigmoid gate (hidden -> 1) on the shared expert
    score_bias: bool = False  # the router always carries a per-expert e_score_correction_bias (GLM-4.5)
    score_bias_key: str = ""  # config key that turns that bias on (MiniMax-M2 use_routing_bias)
    embed_on_every_stage: bool = False  # every pipeline stage builds embed_tokens (vLLM gemma*.py)
    embed_proj_key: str = ""  # embeddings narrower than hidden, with project_in/out (OPT word_embed_proj_dim)
    ffn_every_layer: bool = True  # False: only "mlp" / "moe" layers carry an MLP (Nemotron-H: one block per layer)
    moe_gated: bool = True  # experts (and shared experts) are SwiGLU (gate, up, down); False: up, down only
    shared_expert_key: str = ""  # the shared experts' width (times n_shared_experts where the config names a count)
    head_dim_key: str = "head_dim"  # "": head size is hidden / heads whatever the config says (vLLM granitemoehybrid.py)
    defaults: tuple[tuple[str, Any], ...] = ()  # the config class's defaults for keys a config.json may omit
    defaults_from: str = ""  # where those defaults are defined
    note: str = ""  # documentation of the row (not printed per model)


# One row per model_type. ``layout`` / ``moe`` name the per-layer rules below.
QUIRKS: dict[str, Quirks] = {
    "llama": Quirks(o_bias_follows=True, layout="layer_types", note="Llama 1/2/3/3.1/3.2/3.3, CodeLlama, TinyLlama, Yi"),
    "mistral": Quirks(o_bias_follows=True, layout="layer_types", note="a bare sliding_window applies to every layer"),
    "mixtral": Quirks(layout="layer_types", moe="all"),
    "granite": Quirks(o_bias_follows=True, layout="layer_types", note="llama with residual/embedding multipliers (no params)"),
    "granitemoe": Quirks(o_bias_follows=True, layout="layer_types", moe="all"),
    "qwen2": Quirks(qkv_bias=True, layout="qwen_window"),
    "qwen2_moe": Quirks(qkv_bias=True, layout="qwen_window", moe="qwen", shared_expert_gate=True),
    "qwen3": Quirks(qk_norm=True, layout="qwen_window"),
    "qwen3_moe": Quirks(qk_norm=True, layout="qwen_window", moe="qwen"),
    "qwen3_next": Quirks(qk_norm=True, q_gate_key="attn_output_gate", o_bias_follows=True, layout="qwen3_next", moe="qwen",
                         shared_expert_gate=True, note="gated attention + GatedDeltaNet"),
    "gemma": Quirks(tied=True, embed_on_every_stage=True),
    "gemma2": Quirks(tied=True, norms_per_layer=4, layout="gemma2", embed_on_every_stage=True),
    "gemma3_text": Quirks(
        tied=True, norms_per_layer=4, qk_norm=True, layout="gemma3", embed_on_every_stage=True,
        # transformers Gemma3TextConfig.__init__ defaults; Gemma 3 checkpoints omit them.
        defaults=(("vocab_size", 262208), ("num_attention_heads", 8), ("num_key_value_heads", 4), ("head_dim", 256),
                  ("max_position_embeddings", 131072), ("sliding_window", 4096), ("sliding_window_pattern", 6)),
        defaults_from="transformers Gemma3TextConfig",
    ),
    "phi3": Quirks(o_bias_follows=True, layout="layer_types", note="Phi-3, Phi-3.5, Phi-4 (fused qkv/gate_up: same counts)"),
    "phi": Quirks(mlp="plain", norm_bias=True, norms_per_layer=1, qkv_bias=True, o_bias=True, mlp_bias=True,
                  lm_head_bias=True, note="Phi-1/1.5/2: parallel block, one LayerNorm"),
    "deepseek_v2": Quirks(layout="mla", moe="deepseek"),
    "deepseek_v3": Quirks(layout="mla", moe="deepseek"),
    "kimi_k2": Quirks(layout="mla", moe="deepseek", note="Kimi K2: DeepseekV3ForCausalLM under its own model_type"),
    # DeepSeek sparse attention (DSA): DeepSeek-V3's MLA and MoE plus a "lightning indexer" per layer whose FP8 keys
    # are cached next to the latent (vLLM 0.33.0 models/deepseek_v32/attention.py DeepseekV32Indexer; GLM-5's
    # GlmMoeDsaForCausalLM is the same module: models/deepseek_v32/__init__.py). See _dsa_indexed for which layers
    # keep an indexer.
    "deepseek_v32": Quirks(layout="dsa", moe="deepseek", note="DeepSeek-V3.2: MLA + DSA indexer cache"),
    "glm_moe_dsa": Quirks(layout="dsa", moe="deepseek", note="GLM-5: DeepSeek-V3.2's DSA attention and MoE"),
    "gpt_oss": Quirks(qkv_bias=True, o_bias=True, attention_sinks=True, layout="layer_types", moe="all",
                      expert_bias=True, note="attention sinks, biased router and experts"),
    "falcon": Quirks(mlp="plain", norm_bias=True, tied=True, bias_key="bias", o_bias_follows=True, mlp_bias_key="bias",
                     falcon_heads=True, note="old: multi_query, 1 LayerNorm; new_decoder_architecture: GQA, 2 LayerNorms"),
    "gpt2": Quirks(mlp="plain", norm_bias=True, qkv_bias=True, o_bias=True, mlp_bias=True, tied=True,
                   positions_key="n_positions"),
    "gpt_neox": Quirks(mlp="plain", norm_bias=True, qkv_bias=True, o_bias=True, mlp_bias=True),
    "opt": Quirks(mlp="plain", norm_bias=True, bias_key="enable_bias", qkv_bias=True, o_bias_follows=True,
                  mlp_bias_key="enable_bias", mlp_bias=True, tied=True,
                  positions_key="max_position_embeddings", positions_extra=2, embed_proj_key="word_embed_proj_dim"),
    "cohere": Quirks(tied=True, norms_per_layer=1, qk_norm_key="use_qk_norm", qk_norm_per_head=True,
                     note="parallel block, weight-only LayerNorm"),
    "cohere2": Quirks(tied=True, norms_per_layer=1, layout="cohere2"),
    "jamba": Quirks(layout="jamba", moe="jamba", note="Mamba-1 + attention every attn_layer_period"),
    "falcon_h1": Quirks(layout="falcon_h1", note="attention and Mamba-2 side by side in every layer"),
    # vLLM 0.33.0 models/granitemoehybrid.py: layer_types picks a Mamba-2 mixer (MambaMixer2 with a gated RMSNorm of
    # mamba_expand x hidden, in/out_proj biases when mamba_proj_bias) or GQA attention whose head size is always
    # hidden / heads and whose q/k/v/o carry a bias when attention_bias; every layer then runs num_local_experts
    # SwiGLU experts of intermediate_size (none when 0) plus a SwiGLU shared MLP of shared_intermediate_size (none
    # when 0), between two RMSNorms. Defaults: transformers 5.24.0 GraniteMoeHybridConfig.
    "granitemoehybrid": Quirks(
        o_bias_follows=True, layout="granite_hybrid", moe="all", shared_expert_key="shared_intermediate_size",
        head_dim_key="",
        defaults=(("num_local_experts", 8), ("shared_intermediate_size", 1024),
                  ("mamba_n_heads", 128), ("mamba_n_groups", 1), ("mamba_d_state", 256), ("mamba_d_conv", 4),
                  ("mamba_expand", 2)),
        defaults_from="transformers GraniteMoeHybridConfig",
        note="Granite 4.0 (-H): Mamba-2 or attention, then MoE and/or a shared SwiGLU MLP in every layer"),
    # vLLM 0.33.0 models/nemotron_h.py: hybrid_override_pattern gives each layer ONE block: M a Mamba-2 mixer
    # (MambaMixer2 of mamba_num_heads x mamba_head_dim, gated RMSNorm, in/out_proj biases when use_bias), * GQA
    # attention without biases (head_dim), - a squared-ReLU MLP (up, down; mlp_bias) of intermediate_size, E a MoE of
    # n_routed_experts up/down experts of moe_intermediate_size behind a sigmoid router with e_score_correction_bias,
    # plus n_shared_experts x moe_shared_expert_intermediate_size shared; one RMSNorm per layer. Only M and * layers
    # hold a cache. The SSM state is kept in mamba_ssm_cache_dtype (float32 when unset: models/config.py
    # NemotronHForCausalLMConfig). Defaults: transformers 5.24.0 NemotronHConfig.
    "nemotron_h": Quirks(
        mlp="plain", norms_per_layer=1, bias_key="", layout="nemotron_h", moe="pattern", score_bias=True,
        ffn_every_layer=False, moe_gated=False, shared_expert_key="moe_shared_expert_intermediate_size",
        defaults=(("head_dim", 128), ("mamba_num_heads", 128), ("mamba_head_dim", 64), ("ssm_state_size", 128),
                  ("n_groups", 8), ("conv_kernel", 4)),
        defaults_from="transformers NemotronHConfig",
        note="Nemotron-H / Nano v2 / Nemotron 3: one Mamba-2, attention, MLP or MoE block per layer"),
    # vLLM 0.33.0 models/glm4_moe.py: GQA with q/k/v biases (attention_bias), no o_proj bias, q_norm/k_norm of
    # head_dim when use_qk_norm; dense MLP below first_k_dense_replace, then n_routed_experts experts of
    # moe_intermediate_size plus n_shared_experts x that width, and a router whose e_score_correction_bias is
    # always built. partial_rotary_factor rotates half of each head: it changes neither the cache nor the weights.
    # The num_nextn_predict_layers MTP layers follow num_hidden_layers in the checkpoint; the main model skips them.
    # vLLM 0.33.0 models/glm4_moe_lite.py (GLM-4.7-Flash): DeepSeek-V2's MLA attention (DeepseekV2MLAAttention, one
    # latent of kv_lora_rank + qk_rope_head_dim per token) on GLM-4.5's MoE (Glm4MoE: first_k_dense_replace dense
    # layers, then routed experts plus shared ones and a router with e_score_correction_bias); MTP layers skipped.
    "glm4_moe_lite": Quirks(layout="mla", moe="first_k_dense", score_bias=True,
                            note="GLM-4.7-Flash: MLA attention with GLM-4.5's MoE"),
    # vLLM 0.33.0 models/mimo.py: MiMoForCausalLM is Qwen2ForCausalLM (MiMoModel(Qwen2Model)) whose
    # num_nextn_predict_layers MTP layers are not loaded into the main model.
    "mimo": Quirks(qkv_bias=True, layout="qwen_window", note="Xiaomi MiMo: Qwen2 with MTP layers left out"),
    "glm4_moe": Quirks(qk_norm_key="use_qk_norm", moe="first_k_dense", score_bias=True,
                       note="GLM-4.5 / 4.5-Air / 4.6: MoE after first_k_dense_replace dense layers, MTP not in the main model"),
    # vLLM 0.33.0 models/minimax_m2.py: every layer full attention (attn_type_list is not read; MiniMax-Text-01's
    # lightning layers are model_type minimax_text_01), q_norm over heads x head_dim and k_norm over
    # kv_heads x head_dim (qk_norm_type "per_layer"), every layer MoE with experts of intermediate_size, no shared
    # expert; MTP modules (num_mtp_modules) are dropped when the weights load.
    "minimax_m2": Quirks(qk_norm_key="use_qk_norm", qk_norm_per_head=True, layout="minimax_m2", moe="all",
                         score_bias_key="use_routing_bias", note="MiniMax-M2: GQA full attention, 256-expert MoE"),
    # Qwen3-VL's decoders are Qwen3 / Qwen3-MoE (vLLM 0.33.0 models/qwen3_vl.py Qwen3LLMModel,
    # qwen3_vl_moe.py Qwen3MoeLLMModel); the vision tower is counted from vision_config (_vision_tower).
    # Qwen2.5-VL's decoder is Qwen2 (vLLM 0.33.0 models/qwen2_5_vl.py builds Qwen2ForCausalLM); its config.json
    # is flat (text keys at the top) or, re-saved by newer transformers, nested as qwen2_5_vl_text.
    "qwen2_5_vl_text": Quirks(qkv_bias=True, layout="qwen_window", note="Qwen2.5-VL text model"),
    "qwen3_vl_text": Quirks(qk_norm=True, layout="qwen_window", note="Qwen3-VL dense text model"),
    "qwen3_vl_moe_text": Quirks(qk_norm=True, layout="qwen_window", moe="qwen", note="Qwen3-VL MoE text model"),
    # transformers 5.24.0 models/olmo2/modeling_olmo2.py (vLLM 0.33.0 serves Olmo2ForCausalLM through its Transformers
    # backend): Llama's attention and SwiGLU MLP without biases, q_norm over heads x head_dim and k_norm over
    # kv_heads x head_dim (whole projections, not per head), the two norms after attention and MLP instead of before.
    "olmo2": Quirks(qk_norm=True, qk_norm_per_head=True, note="OLMo 2: q/k RMSNorm over the whole projections"),
    # Added in the fourth catalog round; each checked against vLLM 0.33.0's model file (or, where vLLM serves the type
    # through its Transformers backend, transformers 5.24.0's modeling file) and transformers 5.24.0's config class.
    # models/ernie45_moe.py: q/k/v biases and the MLPs' biases follow use_bias, o_proj has none; MoE in the layers
    # moe_layer_start_index..moe_layer_end_index whose (i + 1) is a multiple of moe_layer_interval, moe_num_experts
    # experts of moe_intermediate_size (top moe_k), moe_num_shared_experts x that width shared, and an
    # e_score_correction_bias per expert always built; its keys are mapped onto the qwen rule by _derived_keys().
    "ernie4_5_moe": Quirks(bias_key="use_bias", mlp_bias_key="use_bias", tied=True, layout="layer_types", moe="qwen",
                           score_bias=True, note="ERNIE 4.5 MoE: moe_* keys, shared experts, MTP not in the main model"),
    # transformers models/seed_oss (vLLM 0.33.0 serves SeedOssForCausalLM through its Transformers backend): Llama
    # with q/k/v biases (attention_bias, default true) and an o_proj bias of its own (attention_out_bias, default false).
    "seed_oss": Quirks(qkv_bias=True, o_bias_key="attention_out_bias", layout="layer_types",
                       note="Seed-OSS: Llama with q/k/v biases"),
    # transformers models/smollm3 (vLLM 0.33.0: Transformers backend): Llama whose every no_rope_layer_interval-th
    # layer skips RoPE (no change to weights or cache); layer_types as SmolLM3Config derives them (_derived_keys).
    "smollm3": Quirks(o_bias_follows=True, layout="layer_types", note="SmolLM3: Llama with NoPE layers"),
    # vLLM 0.33.0 models/exaone4.py: per-head q_norm / k_norm, norms after attention and MLP (two a layer), sliding
    # layers as config.layer_types says; Exaone4Config derives those from sliding_window_pattern (_derived_keys).
    "exaone4": Quirks(qk_norm=True, o_bias_follows=True, layout="layer_types",
                      defaults=(("sliding_window", 4096), ("sliding_window_pattern", 4)),
                      defaults_from="transformers Exaone4Config", note="EXAONE 4.0: 3 sliding + 1 global layers"),
    # Qwen3.5 / Qwen3.6 (vLLM 0.33.0 models/qwen3_5.py Qwen3_5DecoderLayer): Qwen3-Next's gated attention and
    # GatedDeltaNet as config.layer_types says (the checkpoint's separate in_proj_qkv / in_proj_z / in_proj_b /
    # in_proj_a load into Qwen3-Next's fused in_proj_qkvz / in_proj_ba: same counts); qwen3_5_text has a dense MLP
    # in every layer, qwen3_5_moe_text a MoE block (experts, shared expert and its gate) in every layer, whatever
    # mlp_only_layers says; the mtp.* weights are dropped. The SSM state dtype is the config's mamba_ssm_dtype
    # (_ssm_state_dtype); the vision tower is Qwen3-VL's (_VISION_KINDS).
    "qwen3_5_text": Quirks(qk_norm=True, q_gate_key="attn_output_gate", o_bias_follows=True, layout="qwen3_next",
                           note="Qwen3.5 dense: gated attention + GatedDeltaNet"),
    "qwen3_5_moe_text": Quirks(qk_norm=True, q_gate_key="attn_output_gate", o_bias_follows=True, layout="qwen3_next",
                               moe="all", shared_expert_gate=True, note="Qwen3.5 MoE: gated attention + GatedDeltaNet"),
    "llama4_text": Quirks(layout="llama4", moe="llama4", o_bias_follows=True, dense_inter_key="intermediate_size_mlp", shared_expert_default=True,
                          note="chunked local attention, NoPE global layers"),
    # Gemma 4 (vLLM 0.33.0 models/gemma4.py; transformers 5.20 Gemma4TextConfig): sliding and full layers of their own
    # head shapes (full: global_head_dim, and num_global_key_value_heads when attention_k_eq_v), the last
    # num_kv_shared_layers layers reading an earlier layer's KV, per-layer input embeddings, and a MoE block beside
    # the dense MLP when num_experts is set. Built by _gemma4() over the generic reading.
    "gemma4_text": Quirks(
        tied=True, norms_per_layer=4, qk_norm=True, layout="gemma4", embed_on_every_stage=True,
        defaults=(("vocab_size", 262144), ("num_attention_heads", 8), ("num_key_value_heads", 4), ("head_dim", 256),
                  ("global_head_dim", 512), ("max_position_embeddings", 131072), ("sliding_window", 512),
                  ("hidden_size_per_layer_input", 256), ("vocab_size_per_layer_input", 262144)),
        defaults_from="transformers Gemma4TextConfig",
        note="Gemma 4: per-layer head shapes, KV sharing, per-layer embeddings, MoE beside the MLP"),
}
_TEXT_TYPES = {"gemma3": "gemma3_text", "llama4": "llama4_text", "qwen3_vl": "qwen3_vl_text",
               "qwen3_vl_moe": "qwen3_vl_moe_text", "qwen2_5_vl": "qwen2_5_vl_text",
               "qwen3_5": "qwen3_5_text", "qwen3_5_moe": "qwen3_5_moe_text"}
_TEXT_TYPES["gemma4"] = "gemma4_text"  # Gemma4ForConditionalGeneration: decoder in text_config
# Vision towers read as another's: Qwen3.5's vision_config (model_type qwen3_5 / qwen3_5_moe, or qwen3_5_vision /
# qwen3_5_moe_vision as transformers 5 re-saves it) builds Qwen3-VL's Qwen3_VisionTransformer (vLLM 0.33.0
# models/qwen3_5.py), with deepstack_visual_indexes empty.
_VISION_KINDS = {"qwen3_5": "qwen3_vl", "qwen3_5_moe": "qwen3_vl", "qwen3_5_vision": "qwen3_vl",
                 "qwen3_5_moe_vision": "qwen3_vl"}
# Config keys of mixers and experts that a dense Llama reading would silently drop.
_UNREADABLE_KEYS = frozenset({
    "num_experts", "n_routed_experts", "num_local_experts", "moe_intermediate_size", "kv_lora_rank",
    "q_lora_rank", "attention_chunk_size", "full_attention_interval", "attn_layer_period", "block_configs",
    # Gemma 3n's decoder shares the KV of its last layers and adds AltUp / per-layer embeddings (transformers 5.24.0
    # models/gemma3n/configuration_gemma3n.py); Llama 3.2 Vision's has cross-attention layers without a per-token
    # cache (models/mllama/configuration_mllama.py): a dense Llama reading gets both weights and KV wrong.
    "num_kv_shared_layers", "altup_num_inputs", "vocab_size_per_layer_input", "cross_attention_layers",
})
_UNREADABLE_PREFIXES = ("mamba_", "ssm_", "linear_", "n_shared_experts", "index_")

# vLLM's KV-head aliases, in its order (transformers_utils/config.py: CONFIG_FIELD_ALIASES).
_KV_ALIASES = ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num", "num_attention_groups")


_MAX_FIELD = 1 << 31  # no real model dimension, vocabulary or context comes near 2^31
# Layer counts: no published model has more than a few hundred (Llama 3.1 405B: 126); 10,000 layers took `plan` 14 s
# and a vision encoder's depth of 10^6 (no limit of its own) 140 s to plan one launch command
MAX_LAYERS = 2_048
_LIMITS = {"num_hidden_layers": MAX_LAYERS, "n_layer": MAX_LAYERS, "num_layers": MAX_LAYERS, "n_layers": MAX_LAYERS,
           "depth": MAX_LAYERS}


class _Cfg:
    """Typed reads of a config dict that name the missing or bad field."""

    def __init__(self, raw: Mapping[str, Any], where: str) -> None:
        self.raw = raw
        self.where = where

    def has(self, key: str) -> bool:
        return self.raw.get(key) is not None

    def int(self, *keys: str, default: int | None = None, positive: bool = True) -> int:
        """The first of ``keys`` present, as a whole number >= 1 (>= 0 when not ``positive``) and
        no larger than any real model has; a missing key gives ``default`` or a ConfigError."""
        for key in keys:
            value = self.raw.get(key)
            if value is None:
                continue
            limit = _LIMITS.get(key, _MAX_FIELD)
            if isinstance(value, float) and value.is_integer() and 0 <= value <= limit:
                # transformers 5's config classes refuse a float for an int field (strict dataclass:
                # "expected int, got float"); older ones kept it and vLLM's make_layers (range), nn.Embedding
                # or the head arithmetic then stop on it. Not read as the integer it looks like.
                raise ConfigError(f"{self.where}: integer field {key!r} is {value!r}, a JSON float (transformers and"
                                  f" the engines take an integer only): write it as {int(value)} in the config.json")
            try:
                number = whole(value, f"integer field {key!r}", hi=limit, where=self.where)
            except InputError as exc:
                raise ConfigError(f"{exc}: fix the config.json") from None
            if number < (1 if positive else 0):
                raise ConfigError(f"{self.where}: field {key!r} must be {'positive' if positive else 'zero or more'},"
                                  f" got {number:,}: fix the config.json")
            return number
        if default is None:
            raise ConfigError(f"{self.where}: missing field {' / '.join(repr(k) for k in keys)}")
        return default

    def bool(self, key: str, default: bool) -> bool:
        """A JSON boolean (0 and 1 read as Python reads them). transformers keeps a string as it is,
        and a non-empty string such as "false" is true to every engine's ``if config.x``: refused."""
        value = self.raw.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
            return bool(value)
        raise ConfigError(f"{self.where}: field {key!r} must be true or false (a JSON boolean, not a string),"
                          f" not {excerpt(value)}: fix the config.json")

    def get(self, key: str, default: Any = None) -> Any:
        value = self.raw.get(key)
        return default if value is None else value


_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "half": "fp16", "float": "fp32"}


def text_config(raw: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """The decoder's own config: nested ``text_config`` for multimodal wrappers."""
    if not isinstance(raw, Mapping):
        raise ConfigError("config.json must hold a JSON object")
    model_type = raw.get("model_type")
    if model_type is None or model_type == "":
        raise ConfigError("config.json has no 'model_type': is this a Hugging Face model config?")
    if not isinstance(model_type, str):
        raise ConfigError(f"config.json: 'model_type' must be a string (a short name such as 'llama'), not {excerpt(model_type)}")
    _check_model_type(model_type)
    for key in ("text_config", "vision_config", "audio_config"):
        # transformers 5's multimodal config classes take a sub-config as an object or null only ("Field
        # 'vision_config' expected dict, got str"): a string vision_config was read as a text-only model, exit 0
        inner = raw.get(key)
        if inner is not None and not isinstance(inner, Mapping):
            raise ConfigError(f"config.json: field {key!r} must be an object (the {key[:-7]} model's config), not "
                              f"{excerpt(inner)}: fix the config.json")
    inner = raw.get("text_config")
    if isinstance(inner, Mapping):
        if inner.get("model_type") is not None and not isinstance(inner.get("model_type"), str):
            raise ConfigError(f"config.json: text_config 'model_type' must be a string, not {excerpt(inner['model_type'])}")
        merged = dict(inner)
        for key in ("torch_dtype", "dtype", "quantization_config", "tie_word_embeddings"):
            if key in raw and key not in merged:
                merged[key] = raw[key]
        model_type = str(merged.get("model_type") or _TEXT_TYPES.get(model_type, model_type))
        _check_model_type(model_type)
        return merged, _TEXT_TYPES.get(model_type, model_type)
    return dict(raw), _TEXT_TYPES.get(model_type, model_type)


def _check_model_type(model_type: str) -> None:
    if len(model_type) > 64 or not model_type.isprintable():
        raise ConfigError(f"config.json: 'model_type' {excerpt(model_type)} is not a model type"
                          " (a short name such as 'llama'): is this a Hugging Face model config?")


def spec_from_config(raw: Mapping[str, Any], name: str = "config.json") -> ModelSpec:
    """Read a Hugging Face ``config.json`` (already parsed) into a ``ModelSpec``."""
    cfg_dict, model_type = text_config(raw)
    notes: list[str] = []
    quirks = QUIRKS.get(model_type)
    if quirks is None:
        unreadable = sorted(k for k in cfg_dict if k.startswith(_UNREADABLE_PREFIXES) or k in _UNREADABLE_KEYS)
        if unreadable:
            raise ConfigError(
                f"{name}: model_type {model_type!r} is not one kvbudget reads, and its config has "
                f"{', '.join(unreadable[:4])}: reading it as a dense Llama would be wrong (supported: {', '.join(sorted(QUIRKS))})"
            )
        quirks = Quirks(layout="layer_types")
        notes.append(f"model_type {model_type!r} is not in kvbudget's table: read as a dense Llama-style decoder")
    defaulted = [k for k, _ in quirks.defaults if cfg_dict.get(k) is None]
    if defaulted:
        cls = quirks.defaults_from or f"the {model_type} config class"
        notes.append(f"config.json omits {', '.join(defaulted)}: took {cls} defaults")
    c = _Cfg(_derived_keys({**dict(quirks.defaults), **cfg_dict}, model_type, name), name)
    spec = _build(c, model_type, quirks, name, notes)
    if quirks.layout == "gemma4":
        spec = _gemma4(c, spec, notes)
        if isinstance(raw.get("audio_config"), Mapping):
            notes.append("audio encoder (audio_config) not counted: its weights are not in the totals")
            spec = replace(spec, notes=tuple(notes))
    vision = raw.get("vision_config")
    if isinstance(vision, Mapping):
        # Qwen2.5-VL's vision_config names no model_type: its tower is the wrapper's.
        kind = str(vision.get("model_type") or raw.get("model_type"))
        kind = _VISION_KINDS.get(kind, kind)
        v = _Cfg(vision, f"{name} vision_config")
        tensors = _vision_tower(v, kind, spec.dims.hidden_size, notes)
        inv = spec.inventory
        spec = replace(spec, inventory=Inventory(inv.head + tuple(tensors), inv.layers, inv.tail), notes=tuple(notes),
                       vision=_vision_shapes(v, kind) if tensors else VisionTower(kind))
    archs = raw.get("architectures")
    if isinstance(archs, list) and archs and isinstance(archs[0], str) and len(archs[0]) <= 100:
        spec = replace(spec, architecture=archs[0])
    return spec


def _vision_shapes(v: _Cfg, kind: str) -> VisionTower:
    """The tower's shapes for vLLM's profiling pass (the Qwen-VL towers' merge and temporal patch sizes; the other
    towers' are read as 1: no merge, no temporal patch)."""
    qwen = kind in ("qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe")
    deepstack = v.get("deepstack_visual_indexes", []) if kind in ("qwen3_vl", "qwen3_vl_moe") else []
    return VisionTower(
        kind="qwen3_vl" if kind == "qwen3_vl_moe" else kind, hidden_size=v.int("hidden_size"),
        intermediate_size=v.int("intermediate_size"), depth=v.int("num_hidden_layers", "depth"),
        num_heads=v.int("num_heads", "num_attention_heads", default=0), patch_size=v.int("patch_size"),
        merge_size=v.int("spatial_merge_size", default=2) if qwen else 1,
        temporal_patch_size=v.int("temporal_patch_size", default=2) if qwen else 1,
        in_channels=v.int("num_channels", "in_channels", default=3),
        out_hidden_size=v.int("out_hidden_size", default=0) if qwen else 0,
        deepstack_layers=len(deepstack) if isinstance(deepstack, list) else 0)


def _vision_tower(v: _Cfg, kind: str, text_hidden: int, notes: list[str]) -> list[Tensor]:
    """A ViT image encoder and its projector into the text model (vLLM loads them with the
    decoder). SigLIP (Gemma 3): transformers SiglipVisionModel + Gemma3MultiModalProjector;
    Llama 4: Llama4VisionModel + pixel-shuffle MLP + Llama4MultiModalProjector; Qwen3-VL: vLLM 0.33.0
    models/qwen3_vl.py Qwen3_VisionTransformer (its MoE model's vision_config says qwen3_vl_moe); Qwen2.5-VL:
    qwen2_5_vl.py Qwen2_5_VisionTransformer."""
    if kind == "gemma4_vision":
        return _gemma4_vision_tower(v, text_hidden)
    if kind not in ("siglip_vision_model", "llama4_vision_model", "qwen3_vl", "qwen3_vl_moe", "qwen2_5_vl"):
        notes.append(f"vision encoder {kind or '(unnamed)'} not counted: its weights are not in the totals")
        return []
    h = v.int("hidden_size")
    i = v.int("intermediate_size")
    n = v.int("num_hidden_layers", "depth")
    p = v.int("patch_size")
    channels = v.int("num_channels", "in_channels", default=3)
    if kind == "qwen2_5_vl":
        return _qwen2_5_vl_tower(v, h, i, n, p, channels)
    layer = [
        Tensor("vision", 3 * h, h, split="col", linear=True), Tensor("vision", h, h, split="row", linear=True),
        Tensor("vision", 4 * h),  # q, k, v, o biases
        Tensor("vision", i, h, split="col", linear=True), Tensor("vision", h, i, split="row", linear=True),
        Tensor("vision", i + h),  # fc1, fc2 biases
        Tensor("vision", h, count=4),  # two LayerNorms, weight and bias
    ]
    out = _repeat(layer, n)
    if kind in ("qwen3_vl", "qwen3_vl_moe"):
        return out + _qwen3_vl_tower_rest(v, h, p, channels)
    side = v.int("image_size") // p
    if kind == "siglip_vision_model":
        out += [
            Tensor("vision", h, channels * p * p), Tensor("vision", h),  # patch conv and bias
            Tensor("vision", side * side, h),  # position table
            Tensor("vision", h, count=2),  # post LayerNorm
            Tensor("vision", text_hidden, h, linear=True), Tensor("vision", h),  # mm projection, soft-emb norm
        ]
    else:
        proj_in = v.int("projector_input_dim")
        proj_out = v.int("projector_output_dim")
        out += [
            Tensor("vision", h, channels * p * p),  # unfold + linear patch embedding
            Tensor("vision", side * side + 1, h), Tensor("vision", h),  # positions (+ class token), class embedding
            Tensor("vision", h, count=4),  # pre and post LayerNorm
            Tensor("vision", proj_in, i, linear=True), Tensor("vision", proj_out, proj_in, linear=True),  # pixel-shuffle MLP
            Tensor("vision", text_hidden, v.int("vision_output_dim"), linear=True),  # projector to the text model
        ]
    return out


def _qwen2_5_vl_tower(v: _Cfg, h: int, i: int, n: int, p: int, channels: int) -> list[Tensor]:
    """Qwen2.5-VL's vision tower (vLLM 0.33.0 models/qwen2_5_vl.py): a Conv3d patch embedding without bias, per
    block two RMSNorms, a biased qkv and proj and a biased gated MLP (gate_up, down), then the merger: an RMSNorm
    of the block width and fc1 / fc2 over spatial_merge_size^2 merged patches into out_hidden_size. transformers'
    vision config takes in_channels (the file's in_chans is not read; both are 3)."""
    t = v.int("temporal_patch_size", default=2)
    merged = h * v.int("spatial_merge_size", default=2) ** 2
    out_h = v.int("out_hidden_size")
    layer = [
        Tensor("vision", 3 * h, h, split="col", linear=True), Tensor("vision", 3 * h, split="col"),  # qkv
        Tensor("vision", h, h, split="row", linear=True), Tensor("vision", h),  # proj
        Tensor("vision", 2 * i, h, split="col", linear=True), Tensor("vision", 2 * i, split="col"),  # gate_up
        Tensor("vision", h, i, split="row", linear=True), Tensor("vision", h),  # down
        Tensor("vision", h, count=2),  # norm1, norm2 (RMSNorm)
    ]
    return [
        *_repeat(layer, n),
        Tensor("vision", h, channels * t * p * p),  # patch Conv3d, no bias
        Tensor("vision", h),  # merger ln_q (RMSNorm)
        *_merger_mlp(merged, out_h),
    ]


def _repeat(layer: list[Tensor], n: int) -> list[Tensor]:
    """One block's tensors, counted for ``n`` blocks."""
    return [Tensor(x.role, x.rows, x.cols, x.count * n, x.split, x.heads, x.linear) for x in layer]


def _merger_mlp(merged: int, out_h: int) -> list[Tensor]:
    """The Qwen-VL patch merger's fc1 (merged -> merged) and fc2 (merged -> out_hidden_size), both biased."""
    return [Tensor("vision", merged, merged, split="col", linear=True), Tensor("vision", merged, split="col"),
            Tensor("vision", out_h, merged, split="row", linear=True), Tensor("vision", out_h)]


def _qwen3_vl_tower_rest(v: _Cfg, h: int, p: int, channels: int) -> list[Tensor]:
    """Qwen3-VL's vision tower past its blocks (vLLM 0.33.0 models/qwen3_vl.py): a Conv3d patch embedding
    (temporal_patch_size x patch_size^2 per channel, with bias), a learned position table, the merger (LayerNorm
    of the block width, then fc1 and fc2 over spatial_merge_size^2 merged patches into out_hidden_size) and one
    more merger per deepstack_visual_indexes entry, whose LayerNorm runs after the merge."""
    t = v.int("temporal_patch_size", default=2)
    merged = h * v.int("spatial_merge_size", default=2) ** 2
    out_h = v.int("out_hidden_size")
    deepstack = v.get("deepstack_visual_indexes", [])
    if not isinstance(deepstack, list) or len(deepstack) > v.int("depth", "num_hidden_layers"):
        raise ConfigError(f"{v.where}: field 'deepstack_visual_indexes' must be a list of block numbers, got {excerpt(deepstack)}")
    mlp = _merger_mlp(merged, out_h)
    out = [
        Tensor("vision", h, channels * t * p * p), Tensor("vision", h),  # patch Conv3d and bias
        Tensor("vision", v.int("num_position_embeddings"), h),  # pos_embed
        Tensor("vision", h, count=2), *mlp,  # merger: LayerNorm(hidden_size) before the merge
    ]
    for _ in deepstack:
        out += [Tensor("vision", merged, count=2), *mlp]  # deepstack merger: LayerNorm after the merge
    return out


def _derived_keys(raw: dict[str, Any], model_type: str, name: str) -> dict[str, Any]:
    """Keys a type's config class derives in ``__post_init__`` (transformers 5.24.0), written out so the shared rules
    read them: ERNIE 4.5 MoE's moe_* keys as the qwen MoE rule's, and the layer_types of EXAONE 4.0 and SmolLM3."""
    c = _Cfg(raw, name)
    if model_type == "gemma4_text":
        return _gemma4_keys(raw, c)
    if model_type == "ernie4_5_moe":
        n = c.int("num_hidden_layers")
        if not c.has("moe_num_experts"):
            raise ConfigError(f"{name}: model_type 'ernie4_5_moe' without 'moe_num_experts': a dense ERNIE 4.5 is"
                              " model_type 'ernie4_5'; fix the config.json")
        start = c.int("moe_layer_start_index", default=0, positive=False)
        end = c.int("moe_layer_end_index", default=n - 1, positive=False)
        return {**raw, "num_experts": c.int("moe_num_experts"), "num_experts_per_tok": c.int("moe_k", default=2),
                "n_shared_experts": c.int("moe_num_shared_experts", default=0, positive=False),
                "decoder_sparse_step": c.int("moe_layer_interval", default=1),
                "mlp_only_layers": [i for i in range(n) if i < start or i > end]}
    if model_type not in ("exaone4", "smollm3") or c.has("layer_types"):
        return raw
    n = c.int("num_hidden_layers")
    if model_type == "smollm3":  # SmolLM3Config: a NoPE layer slides when use_sliding_window and a window is set
        interval = c.int("no_rope_layer_interval", default=4)
        nope = [(i + 1) % interval == 0 for i in range(n)]
        slide = c.bool("use_sliding_window", False) and c.has("sliding_window")
        return {**raw, "layer_types": ["sliding_attention" if slide and nope[i] else "full_attention" for i in range(n)]}
    pattern = raw.get("sliding_window_pattern")
    if not c.has("sliding_window") or pattern in (0, None):  # Exaone4Config: no window, no sliding layer
        return {**raw, "layer_types": ["full_attention"] * n}
    if isinstance(pattern, str) and pattern and set(pattern) <= {"L", "G"}:  # "LLLG": L slides, G is global
        kinds = ["sliding_attention" if pattern[i % len(pattern)] == "L" else "full_attention" for i in range(n)]
    else:
        period = c.int("sliding_window_pattern")
        kinds = ["full_attention" if (i + 1) % period == 0 else "sliding_attention" for i in range(n)]
    return {**raw, "layer_types": kinds}


# --- per-layer choices -----------------------------------------------------------------------


def _layer_types(c: _Cfg, model_type: str, layout: str, n: int) -> list[str]:
    """One of full / sliding / chunked / mla / mamba / mamba2 / gdn / hybrid / mlp / moe per decoder layer (mlp and
    moe: a layer with no sequence mixer, Nemotron-H's - and E)."""
    if layout == "granite_hybrid":
        return _granite_hybrid_layers(c, n)
    if layout == "nemotron_h":
        window = c.int("sliding_window", default=0, positive=False) if c.has("sliding_window") else 0
        return [("sliding" if window else "full") if k == "attention" else k for k in _nemotron_h_blocks(c)]
    explicit = c.get("layer_types")
    if explicit is not None and not isinstance(explicit, list):
        raise ConfigError(f"{c.where}: field 'layer_types' must be a list of layer kinds, not {excerpt(explicit)}")
    if isinstance(explicit, list) and layout not in ("mla", "dsa"):
        # transformers' layer_type_validation: one entry per hidden layer, no more, no fewer
        if len(explicit) != n:
            raise ConfigError(f"{c.where}: 'layer_types' has {len(explicit):,} entries for {n} layers"
                              " (num_hidden_layers): one per layer")
        kinds = {"full_attention": "full", "attention": "full", "sliding_attention": "sliding",
                 "chunked_attention": "chunked", "linear_attention": "gdn", "mamba": "mamba"}
        out = []
        for t in explicit[:n]:
            if not isinstance(t, str) or t not in kinds:
                raise ConfigError(f"{c.where}: unknown entry {excerpt(t)} in 'layer_types' (known: {', '.join(kinds)})")
            out.append(kinds[t])
        return out
    if layout == "mla":
        return ["mla"] * n
    if layout == "dsa":
        return ["dsa"] * n
    if layout in ("layer_types", "uniform") and c.has("sliding_window") and c.int("sliding_window", positive=False) > 0:
        # No layer_types: vLLM applies the model-level window to every layer (engine/arg_utils.py sets
        # CacheConfig.sliding_window when layer_types is None; attention.py uses it per layer), and so
        # does transformers' DynamicCache. Mistral-7B-v0.1 (4096), Phi-3-mini-4k (2047).
        return ["sliding"] * n
    if layout == "gemma2":  # transformers Gemma2: even layers slide
        return ["sliding" if i % 2 == 0 else "full" for i in range(n)]
    if layout in ("gemma3", "cohere2"):
        period = c.int("sliding_window_pattern", "_sliding_window_pattern", default=6 if layout == "gemma3" else 4)
        return ["full" if (i + 1) % period == 0 else "sliding" for i in range(n)]
    if layout == "qwen_window":
        if c.bool("use_sliding_window", False) and c.has("sliding_window"):
            first = c.int("max_window_layers", default=n, positive=False)
            return ["sliding" if i >= first else "full" for i in range(n)]
        return ["full"] * n
    if layout == "qwen3_next":
        period = c.int("full_attention_interval", default=4)
        return ["full" if (i + 1) % period == 0 else "gdn" for i in range(n)]
    if layout == "jamba":
        period = c.int("attn_layer_period", default=8)
        offset = c.int("attn_layer_offset", default=4, positive=False)
        return ["full" if i % period == offset else "mamba" for i in range(n)]
    if layout == "falcon_h1":
        return ["hybrid"] * n
    if layout == "minimax_m2":
        return _minimax_m2_layers(c, n)
    if layout == "llama4":
        if not c.has("attention_chunk_size") or c.int("attention_chunk_size", positive=False) <= 0:
            return ["full"] * n  # vLLM llama4.py: a falsy chunk size means no chunked attention
        no_rope = c.get("no_rope_layers")
        if not isinstance(no_rope, list) or not no_rope:
            interval = c.int("no_rope_layer_interval", "nope_layer_interval", default=4)
            no_rope = [int((i + 1) % interval != 0) for i in range(n)]
        if len(no_rope) < n or not all(v in (0, 1) and not isinstance(v, float) for v in no_rope[:n]):
            raise ConfigError(f"{c.where}: 'no_rope_layers' must hold a 0 or 1 for each of the {n} layers,"
                              f" got {excerpt(no_rope)}")
        return ["chunked" if no_rope[i] else "full" for i in range(n)]
    return ["full"] * n


# Layer names of granitemoehybrid's layer_types: the config.json spelling (mamba, attention) and the one
# transformers 5 maps it to and vLLM 0.33.0 granitemoehybrid.py keys its layer classes by.
_GRANITE_KINDS = {"mamba": "mamba2", "linear_attention": "mamba2", "attention": "full", "full_attention": "full"}


def _granite_hybrid_layers(c: _Cfg, n: int) -> list[str]:
    """Granite 4.0: layer_types names each layer's mixer; without it every layer is Mamba-2
    (GraniteMoeHybridConfig sets ["linear_attention"] * num_hidden_layers)."""
    types = c.get("layer_types", c.get("layers_block_type"))
    if types is None:
        return ["mamba2"] * n
    if not isinstance(types, list) or len(types) != n:
        raise ConfigError(f"{c.where}: field 'layer_types' must be a list of one entry per layer ({n:,}, "
                          f"num_hidden_layers), got {excerpt(types)}")
    for t in types:
        if not isinstance(t, str) or t not in _GRANITE_KINDS:
            raise ConfigError(f"{c.where}: unknown entry {excerpt(t)} in 'layer_types' (granitemoehybrid knows "
                              f"{', '.join(_GRANITE_KINDS)})")
    return [_GRANITE_KINDS[t] for t in types]


# Nemotron-H's block letters (hybrid_override_pattern) and the layers_block_type names transformers 5.24.0
# NemotronHConfig saves instead (with their older spellings mamba / attention).
_NEMOTRON_LETTERS = {"M": "mamba2", "*": "attention", "-": "mlp", "E": "moe"}
_NEMOTRON_NAMES = {"linear_attention": "mamba2", "mamba": "mamba2", "full_attention": "attention",
                   "attention": "attention", "mlp": "mlp", "moe": "moe"}


def _nemotron_h_blocks(c: _Cfg) -> list[str]:
    """One of mamba2 / attention / mlp / moe per layer. The layer count is the pattern's length (vLLM 0.33.0
    nemotron_h.py make_layers(len(hybrid_override_pattern)); transformers derives num_hidden_layers from it)."""
    pattern = c.get("hybrid_override_pattern")
    names = c.get("layers_block_type", c.get("layer_types"))
    if pattern is not None:
        if not isinstance(pattern, str) or not pattern or len(pattern) > _LIMITS["num_hidden_layers"]:
            raise ConfigError(f"{c.where}: field 'hybrid_override_pattern' must be a string of one letter per layer"
                              f" (M, *, -, E), got {excerpt(pattern)}")
        bad = sorted({ch for ch in pattern if ch not in _NEMOTRON_LETTERS})
        if bad:
            raise ConfigError(f"{c.where}: 'hybrid_override_pattern' has {excerpt(bad[0])}, not a layer letter (M Mamba-2,"
                              " * attention, - MLP, E MoE): fix the config.json")
        blocks = [_NEMOTRON_LETTERS[ch] for ch in pattern]
    elif isinstance(names, list) and names and len(names) <= _LIMITS["num_hidden_layers"]:
        for t in names:
            if not isinstance(t, str) or t not in _NEMOTRON_NAMES:
                raise ConfigError(f"{c.where}: unknown entry {excerpt(t)} in 'layers_block_type' (known: "
                                  f"{', '.join(_NEMOTRON_NAMES)})")
        blocks = [_NEMOTRON_NAMES[t] for t in names]
    else:
        raise ConfigError(f"{c.where}: nemotron_h needs 'hybrid_override_pattern' (one letter per layer: M, *, -, E)"
                          " or a 'layers_block_type' list: fix the config.json")
    return blocks


def _minimax_m2_layers(c: _Cfg, n: int) -> list[str]:
    """MiniMax-M2: vLLM 0.33.0 models/minimax_m2.py builds full attention in every layer and never reads
    attn_type_list. That list is still checked: a 0 (lightning attention, MiniMax-Text-01) would be a layer
    vLLM serves differently from what the checkpoint was trained as."""
    types = c.get("attn_type_list")
    if types is None:
        return ["full"] * n
    if not isinstance(types, list) or len(types) != n:
        raise ConfigError(f"{c.where}: field 'attn_type_list' must be a list of one entry per layer ({n}),"
                          f" got {excerpt(types)}")
    for i, t in enumerate(types):
        if t != 1 or isinstance(t, bool):
            raise ConfigError(f"{c.where}: field 'attn_type_list' entry {i} is {excerpt(t)}: minimax_m2 layers are full"
                              " attention (1); lightning attention (0) is MiniMax-Text-01 (model_type minimax_text_01),"
                              " which kvbudget does not read")
    return ["full"] * n


def _int_list(c: _Cfg, key: str) -> list[int]:
    value = c.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise ConfigError(f"{c.where}: field {key!r} must be a list of layer numbers, got {excerpt(value)}")
    return value


def _first_dense(c: _Cfg, n: int) -> int:
    """first_k_dense_replace: how many leading layers keep a dense MLP; more than num_hidden_layers would leave
    a config that names routed experts without one MoE layer."""
    first = c.int("first_k_dense_replace", default=0, positive=False)
    if first > n:
        raise ConfigError(f"{c.where}: field 'first_k_dense_replace' is {first:,}, more than the {n:,} layers"
                          " (num_hidden_layers): fix the config.json")
    return first


def _is_moe(c: _Cfg, rule: str, i: int, n: int) -> bool:
    if not rule:
        return False
    if rule == "all":
        return True
    if rule == "qwen":
        step = c.int("decoder_sparse_step", default=1)
        return i not in _int_list(c, "mlp_only_layers") and (i + 1) % step == 0
    if rule == "deepseek":
        return i >= _first_dense(c, n) and i % c.int("moe_layer_freq", default=1) == 0
    if rule == "first_k_dense":  # vLLM 0.33.0 glm4_moe.py: first_k_dense_replace alone (no moe_layer_freq)
        return i >= _first_dense(c, n)
    if rule == "jamba":
        return i % c.int("expert_layer_period", default=2) == c.int("expert_layer_offset", default=1, positive=False)
    if rule == "llama4":
        # vLLM llama4.py decides by interleave_moe_layer_step alone (it does not read moe_layers).
        step = c.int("interleave_moe_layer_step", default=1)
        return (i + 1) % step == 0
    raise AssertionError(rule)  # pragma: no cover


# --- the builder -----------------------------------------------------------------------------


def _kv_heads(c: _Cfg, q: Quirks, heads: int) -> tuple[int, str]:
    if q.falcon_heads and not c.bool("new_decoder_architecture", False):
        if c.bool("multi_query", True):
            return 1, "multi_query (Falcon without new_decoder_architecture)"
        return heads, "num_attention_heads (multi_query false)"
    for key in _KV_ALIASES:
        if c.has(key):
            return c.int(key), key
    if c.bool("multi_query", False):
        return 1, "multi_query"
    return heads, "num_attention_heads (no KV-head field: MHA)"


# vLLM's keys for the model's length, smallest wins, model_max_length overrides
# (transformers_utils/model_arch_config_convertor.py derive_max_model_len_and_key).
_LEN_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
             "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len")
# RoPE types whose max_position_embeddings already includes the scaling (config/model.py _get_and_verify_max_len).
_ROPE_PRESCALED = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling", "default")


# The RoPE types transformers (modeling_rope_utils.py ROPE_INIT_FUNCTIONS) and vLLM's rotary layers know.
_ROPE_TYPES = (*_ROPE_PRESCALED, "linear", "dynamic", "mrope", "ntk", "dynamic_ntk", "proportional")


def _max_len(c: _Cfg, model_type: str, notes: list[str]) -> tuple[int, int]:
    """The model's maximum length as vLLM derives it, and the length vLLM serves by default."""
    found = [c.int(k) for k in _LEN_KEYS if c.has(k)]
    if not found:
        notes.append("config.json has no length key (max_position_embeddings ...): assumed 2048, as vLLM does")
        return 2048, 2048
    length = c.int("model_max_length") if c.has("model_max_length") else min(found)
    rope = c.get("rope_scaling") or c.get("rope_parameters")
    rope_type = ""
    if rope is not None and not isinstance(rope, Mapping):
        raise ConfigError(f"{c.where}: field 'rope_scaling' must be an object, not {excerpt(rope)}")
    if isinstance(rope, Mapping):
        rope_type = str(rope.get("rope_type") or rope.get("type") or "default")
        if rope_type not in _ROPE_TYPES:  # transformers' ROPE_INIT_FUNCTIONS refuse any other type
            raise ConfigError(f"{c.where}: unknown rope_scaling type {excerpt(rope_type)} (known: "
                              f"{', '.join(_ROPE_TYPES)}): fix the config.json")
        factor = rope.get("factor")
        if factor is not None:  # transformers' rope validation: a float factor >= 1
            try:
                factor = real(factor, "rope_scaling 'factor'", lo=0, lo_open=True, hi=1e6, where=c.where)
            except InputError as exc:
                raise ConfigError(f"{exc}: fix the config.json") from None
        if rope_type not in _ROPE_PRESCALED and "gemma3" not in model_type and factor is not None:
            scaled = int(length * factor)
            notes.append(f"RoPE scaling {rope_type} x{factor:g}: max length {length:,} -> {scaled:,}, as vLLM derives it")
            length = scaled
    default = length
    if rope_type == "longrope" and c.has("original_max_position_embeddings"):
        default = c.int("original_max_position_embeddings")  # vLLM serves LongRoPE models at their original length
    if length > _MAX_FIELD:
        raise ConfigError(f"{c.where}: max length {length:,} is beyond any real model")
    return length, default


def _dtype(c: _Cfg, notes: list[str]) -> str:
    raw = c.get("torch_dtype") or c.get("dtype")
    if raw is None:
        notes.append("config has no torch_dtype: assumed float32 checkpoint")
        return "fp32"
    key = raw.replace("torch.", "") if isinstance(raw, str) else ""
    if key not in _DTYPES:
        raise ConfigError(f"{c.where}: unknown torch_dtype {excerpt(raw)} (known: {', '.join(_DTYPES)})")
    return _DTYPES[key]


def _build(c: _Cfg, model_type: str, q: Quirks, name: str, notes: list[str]) -> ModelSpec:
    hidden = c.int("hidden_size", "n_embd", "d_model")
    if q.layout == "nemotron_h":
        n = len(_nemotron_h_blocks(c))
        if c.has("num_hidden_layers") and c.int("num_hidden_layers") != n:
            notes.append(f"num_hidden_layers {c.int('num_hidden_layers'):,} differs from the {n:,} layers of the layer"
                         " pattern: the pattern's count is built, as vLLM and transformers do")
    else:
        n = c.int("num_hidden_layers", "n_layer", "num_layers", "n_layers")
    heads = c.int("num_attention_heads", "n_head", "num_heads")
    kv_heads, kv_src = _kv_heads(c, q, heads)
    hd_key = q.head_dim_key
    if hd_key and c.has(hd_key) and c.int(hd_key, positive=False) > 0:
        head_dim, hd_src = c.int(hd_key), hd_key
    else:
        if hidden % heads:
            raise ConfigError(f"{c.where}: hidden_size {hidden} is not a multiple of num_attention_heads {heads}")
        head_dim, hd_src = hidden // heads, "hidden_size / num_attention_heads"
    if kv_heads > heads or heads % kv_heads:
        raise ConfigError(f"{c.where}: field {kv_src.split()[0]!r} = {kv_heads} KV heads do not divide {heads} attention heads")
    vocab = c.int("vocab_size", "padded_vocab_size")
    mlp_widths: list[int] = []  # Nemotron-H: one width per "-" layer when intermediate_size is a list
    if q.layout == "nemotron_h" and isinstance(c.get("intermediate_size"), list):
        mlp_widths = _int_list(c, "intermediate_size")
        if not mlp_widths or min(mlp_widths) < 1:
            raise ConfigError(f"{c.where}: field 'intermediate_size' must be a width or a list of positive widths")
        inter = max(mlp_widths)
    else:
        inter = c.int("intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size", default=4 * hidden)
    max_ctx, default_ctx = _max_len(c, model_type, notes)
    dtype = _dtype(c, notes)
    tied = c.bool("tie_word_embeddings", q.tied)
    window = c.int("sliding_window", default=0, positive=False) if c.has("sliding_window") else 0
    kinds = _layer_types(c, model_type, q.layout, n)
    if "sliding" in kinds and window <= 0:
        raise ConfigError(f"{c.where}: sliding layers need a positive 'sliding_window'")

    attn_bias = c.bool(q.bias_key, q.qkv_bias)
    o_bias = q.o_bias or (q.o_bias_follows and attn_bias) or (bool(q.o_bias_key) and c.bool(q.o_bias_key, False))
    mlp_bias = c.bool(q.mlp_bias_key, q.mlp_bias)
    qk_norm = q.qk_norm or (bool(q.qk_norm_key) and c.bool(q.qk_norm_key, False))
    q_gate = bool(q.q_gate_key) and c.bool(q.q_gate_key, True)

    # Nemotron-H without an E layer builds no MoE whatever its MoE keys (or the class defaults) say; Granite 4.0 with
    # num_local_experts 0 (granite-4.0-h-micro, granite-4.0-micro) runs its shared MLP as the only MLP.
    dense_granite = q.layout == "granite_hybrid" and c.int("num_local_experts", positive=False) == 0
    if dense_granite:
        inter = c.int("shared_intermediate_size", positive=False)
    moe = _MoE.read(c, q) if q.moe and not dense_granite and (q.layout != "nemotron_h" or "moe" in kinds) else None

    # Layers (cache kinds) and their decoder-layer index; parameter blocks per decoder layer.
    layers: list[Layer] = []
    layer_of: list[int] = []
    blocks: list[tuple[Tensor, ...]] = []
    mla = _MLADims.read(c) if q.layout in ("mla", "dsa") else None
    indexed, indexer_keys = _dsa_indexed(c, n, notes) if q.layout == "dsa" else ([], None)
    chunk = c.int("attention_chunk_size", default=0, positive=False)
    if "chunked" in kinds and chunk <= 0:
        raise ConfigError(f"{c.where}: chunked_attention layers need a positive 'attention_chunk_size'")
    norm_count = q.norms_per_layer
    if q.falcon_heads:
        if c.bool("new_decoder_architecture", False):
            norm_count = 2 if c.int("num_ln_in_parallel_attn", default=2) == 2 else 1
        else:
            norm_count = 1 if c.bool("parallel_attn", True) else 2
    # Mamba / linear-attention state: vLLM stores conv and SSM state in the served dtype
    # (mamba_utils.py _mamba_state_dtype with mamba_cache_dtype "auto"); fp32 checkpoints serve in bf16.
    ssm_dtype = _ssm_state_dtype(c, model_type, "bf16" if dtype == "fp32" else dtype)
    conv_dtype = "bf16" if dtype == "fp32" else dtype
    for i, kind in enumerate(kinds):
        tensors: list[Tensor] = []
        if kind in ("full", "sliding", "chunked", "hybrid"):
            attn = FullAttention(kv_heads, head_dim)
            if kind == "sliding":
                attn = SlidingWindow(kv_heads, head_dim, window=window)
            elif kind == "chunked":
                attn = ChunkedLocal(kv_heads, head_dim, chunk=chunk)
            layers.append(attn)
            layer_of.append(i)
            tensors += P.attention(hidden, heads, kv_heads, head_dim, qkv_bias=attn_bias, o_bias=o_bias,
                                   qk_norm=qk_norm and not q.qk_norm_per_head, q_gate=q_gate)
            if qk_norm and q.qk_norm_per_head:
                tensors += [Tensor("norms", heads * head_dim), Tensor("norms", kv_heads * head_dim)]
            if q.attention_sinks:
                tensors.append(Tensor("attention", heads, split="col"))
        if kind in ("mla", "dsa") and mla is not None:
            layers.append(mla.layer(heads))
            layer_of.append(i)
            tensors += mla.tensors(hidden, heads)
        if kind == "dsa" and mla is not None and indexed[i]:
            indexer, indexer_tensors = _dsa_indexer(c, hidden, mla.q_lora_rank)
            layers.append(indexer)
            layer_of.append(i)
            tensors += indexer_tensors
        if kind == "mamba2":
            reader = _nemotron_mamba2 if q.layout == "nemotron_h" else _granite_mamba2
            state, mamba_tensors = reader(c, hidden, ssm_dtype)  # ssm_dtype: the served dtype
            layers.append(state)
            layer_of.append(i)
            tensors += mamba_tensors
        if kind in ("mamba", "hybrid"):
            state, mamba_tensors = (_mamba1 if kind == "mamba" else _mamba2)(c, hidden, ssm_dtype, ssm_dtype)
            layers.append(state)
            layer_of.append(i)
            tensors += mamba_tensors
        if kind == "gdn":
            state, gdn_tensors = _gated_delta_net(c, hidden, conv_dtype, ssm_dtype)
            layers.append(state)
            layer_of.append(i)
            tensors += gdn_tensors
        if not q.ffn_every_layer:  # Nemotron-H: only its - and E layers have one
            if kind == "moe" and moe is not None:
                tensors += moe.tensors(hidden)
            elif kind == "mlp":
                width = mlp_widths[min(kinds[: i + 1].count("mlp") - 1, len(mlp_widths) - 1)] if mlp_widths else inter
                tensors += P.plain_mlp(hidden, width, bias=mlp_bias)
        elif moe is not None and _is_moe(c, q.moe, i, n):
            tensors += moe.tensors(hidden)
        elif q.mlp == "plain":
            tensors += P.plain_mlp(hidden, inter, bias=mlp_bias)
        else:
            dense = c.int(q.dense_inter_key, default=inter) if q.dense_inter_key else inter
            if dense:  # granitemoehybrid with neither experts nor a shared MLP has none
                tensors += P.gated_mlp(hidden, dense, bias=mlp_bias)
        tensors += P.norms(hidden, norm_count, bias=q.norm_bias)
        blocks.append(tuple(tensors))

    embed_dim = c.int(q.embed_proj_key, default=hidden) if q.embed_proj_key else hidden
    head: list[Tensor] = [Tensor("embeddings", vocab, embed_dim, split="vocab")]
    tail_proj: list[Tensor] = []
    if embed_dim != hidden:  # OPT-350m: project_in (embed -> hidden) and project_out (hidden -> embed)
        head.append(Tensor("embeddings", hidden, embed_dim))
        tail_proj.append(Tensor("embeddings", embed_dim, hidden))
    if q.positions_key:
        head.append(Tensor("embeddings", c.int(q.positions_key, default=max_ctx) + q.positions_extra, hidden))
    tail: list[Tensor] = list(P.norms(hidden, 1, bias=q.norm_bias)) + tail_proj
    if not tied:
        tail.append(Tensor("lm_head", vocab, hidden, split="vocab"))
        if q.lm_head_bias:
            tail.append(Tensor("lm_head", vocab, split="vocab"))
    inventory = make_inventory(tuple(head), tuple(blocks), tuple(tail))

    qc = c.get("quantization_config")
    dense_dtype = dtype if dtype != "fp32" else "bf16"
    fmt: WeightFormat | None = WeightFormat(dense_dtype, dense_dtype=dense_dtype)
    if isinstance(qc, Mapping):
        try:
            fmt = from_quantization_config(qc, dense_dtype, len(blocks))
            _groups_divide(fmt, hidden, inter if moe is None else 0)
        except (InputError, ValueError, TypeError, IndexError, KeyError) as exc:
            # KV sizing does not need the weights: keep going, and let weight sizing ask for --weights-dtype.
            fmt = None
            notes.append(f"{UNREAD_WEIGHTS} ({exc}); weights need --weights-dtype")
    elif qc is not None:
        raise ConfigError(f"{c.where}: field 'quantization_config' must be an object, got {excerpt(qc)}")

    act_inter = inter
    if moe is not None:
        act_inter = moe.inter * moe.top_k + moe.shared_inter
    sources = [
        ("num_layers", "num_hidden_layers"),
        ("num_kv_heads", kv_src),
        ("head_dim", hd_src if mla is None else "kv_lora_rank + qk_rope_head_dim (MLA)"),
        ("max_context", "max_position_embeddings"),
        ("native_dtype", "torch_dtype"),
        ("tie_word_embeddings", "tie_word_embeddings" if "tie_word_embeddings" in c.raw else f"default for {model_type}"),
    ]
    if window:
        sources.append(("sliding_window", "sliding_window"))
    return ModelSpec(
        name=name,
        model_type=model_type,
        layers=tuple(layers),
        layer_of=tuple(layer_of),
        inventory=inventory,
        dims=Dims(hidden, act_inter, vocab, heads, head_dim),
        native_dtype=dtype,
        max_context=max_ctx,
        default_context=default_ctx,
        weight_format=fmt,
        sources=tuple(sources),
        notes=tuple(notes),
        num_experts=moe.experts if moe else 0,
        experts_per_token=moe.top_k if moe else 0,
        expert_intermediate_size=moe.inter if moe else 0,
        pp_embedding="every" if q.embed_on_every_stage else "first_and_last" if tied else "first",
        mtp_layers=_mtp_layers(c, model_type),
        indexer=indexer_keys,
    )


def _ssm_state_dtype(c: _Cfg, model_type: str, served: str) -> str:
    """The recurrent (SSM) state's dtype: the served dtype, except that Qwen3.5's config names its own in
    mamba_ssm_dtype ("float32" in the released checkpoints), which vLLM 0.33.0 applies when --mamba-ssm-cache-dtype
    is auto (model_executor/models/config.py Qwen3_5ForConditionalGenerationConfig) and SGLang 0.5.23 reads too
    (configs/mamba_utils.py mamba2_state_dtype). The convolution state stays in the served dtype."""
    if model_type not in ("qwen3_5_text", "qwen3_5_moe_text") or not c.has("mamba_ssm_dtype"):
        return served
    raw = c.get("mamba_ssm_dtype")
    key = raw.replace("torch.", "") if isinstance(raw, str) else ""
    if key not in ("float32", "bfloat16", "float16"):
        raise ConfigError(f"{c.where}: field 'mamba_ssm_dtype' is {excerpt(raw)}: vLLM takes float32, bfloat16 or"
                          " float16; fix the config.json")
    return _DTYPES[key]


def _mtp_layers(c: _Cfg, model_type: str) -> int:
    """The MTP layers vLLM 0.33.0 would build as a draft (config/speculative.py hf_config_override: deepseek_v3 ->
    deepseek_mtp and Glm4MoeForCausalLM -> glm4_moe_mtp read num_nextn_predict_layers; qwen3_next -> qwen3_next_mtp, whose model
    (models/qwen3_next_mtp.py) defaults the count to 1 when the config omits it; qwen3_5 / qwen3_5_moe -> qwen3_5_mtp,
    which reads mtp_num_hidden_layers, also 1 by default)."""
    count = 0
    # glm4_moe -> glm4_moe_mtp (models/glm4_moe_mtp.py); deepseek_v32 / glm_moe_dsa -> DeepseekV32MTPModel
    if model_type in ("deepseek_v3", "glm4_moe", "deepseek_v32", "glm_moe_dsa"):
        count = c.int("num_nextn_predict_layers", default=0, positive=False)
    elif model_type == "qwen3_next":
        count = c.int("num_nextn_predict_layers", default=1, positive=False)
    elif model_type in ("qwen3_5_text", "qwen3_5_moe_text"):  # -> qwen3_5_mtp (models/qwen3_5_mtp.py, default 1)
        count = c.int("mtp_num_hidden_layers", default=1, positive=False)
    if count > 64:  # real checkpoints carry one or a few; thousands would build a draft larger than any model
        raise ConfigError(f"{c.where}: num_nextn_predict_layers {count:,} is beyond any real model (at most 64)")
    return count


class _MoE:
    """Mixture-of-experts shape of a config (private: a plain class keeps start-up fast)."""

    def __init__(self, experts: int, top_k: int, inter: int, shared_inter: int, shared_gate: bool,
                 biased: bool, score_bias: bool, gated: bool = True, latent: int = 0) -> None:
        self.gated = gated  # SwiGLU experts (gate, up, down); else up and down (Nemotron-H's squared ReLU)
        self.latent = latent  # experts run in this width between two projections (Nemotron-H moe_latent_size); 0: none
        self.experts = experts
        self.top_k = top_k
        self.inter = inter
        self.shared_inter = shared_inter  # total width of shared experts (0: none)
        self.shared_gate = shared_gate
        self.biased = biased
        self.score_bias = score_bias

    @staticmethod
    def read(c: _Cfg, q: Quirks) -> _MoE:
        experts = c.int("num_local_experts", "num_experts", "n_routed_experts")
        top_k = c.int("num_experts_per_tok", "experts_per_token", "num_experts_per_token", "top_k_experts", default=2)
        if top_k > experts:  # a router picks top_k of the experts (torch.topk stops past their number)
            raise ConfigError(f"{c.where}: each token is routed to {top_k:,} experts (num_experts_per_tok) of only "
                              f"{experts:,}: fix the config.json")
        inter = c.int("moe_intermediate_size", "expert_intermediate_size", "intermediate_size")
        shared = 0
        width = c.int(q.shared_expert_key, default=inter, positive=False) if q.shared_expert_key else inter
        if c.has("n_shared_experts"):
            shared = c.int("n_shared_experts", positive=False) * width
        elif q.shared_expert_key and c.has(q.shared_expert_key):
            shared = width  # granitemoehybrid shared_intermediate_size: one shared SwiGLU MLP of that width
        elif c.has("shared_expert_intermediate_size"):
            shared = c.int("shared_expert_intermediate_size", positive=False)
        elif q.shared_expert_default:
            shared = inter
        # DeepSeek-V3's aux-loss-free routing adds an e_score_correction_bias per expert; GLM-4.5 always has one
        # (vLLM 0.33.0 glm4_moe.py), MiniMax-M2 when use_routing_bias (minimax_m2.py).
        score_bias = c.get("topk_method") == "noaux_tc" or q.score_bias
        if q.score_bias_key:
            score_bias = c.bool(q.score_bias_key, False)
        latent = c.int("moe_latent_size", default=0, positive=False) if q.layout == "nemotron_h" else 0
        return _MoE(experts, top_k, inter, shared, q.shared_expert_gate and shared > 0, q.expert_bias, score_bias,
                    gated=q.moe_gated, latent=latent)

    def tensors(self, hidden: int) -> list[Tensor]:
        out = P.router(hidden, self.experts, bias=self.biased)
        if self.score_bias:
            out.append(Tensor("router", self.experts))
        mlp = P.gated_mlp if self.gated else P.plain_mlp
        if self.latent:  # fc1_latent_proj (hidden -> latent) and fc2_latent_proj, replicated on every rank
            out += [Tensor("experts", self.latent, hidden, linear=True), Tensor("experts", hidden, self.latent, linear=True)]
        out += mlp(self.latent or hidden, self.inter, role="experts", count=self.experts, bias=self.biased)
        if self.shared_inter:
            out += mlp(hidden, self.shared_inter, role="shared_experts", bias=False)
        if self.shared_gate:
            out.append(Tensor("shared_experts", 1, hidden))
        return out


def _dsa_indexed(c: _Cfg, n: int, notes: list[str]) -> tuple[list[bool], IndexerKeys]:
    """Which decoder layers build a DSA indexer (and so cache its keys), as vLLM 0.33.0
    models/deepseek_v32/attention.py decides: a layer skips it ("skip_topk": it reuses an earlier layer's top-k)
    when ``index_topk_pattern[i] == "S"``, or without a pattern when ``max(i - index_skip_topk_offset + 1, 0) %
    index_topk_freq != 0`` (defaults 2 and 1: every layer has one, as DeepSeek-V3.2 and GLM-5). A config that
    also lists ``indexer_types`` ("full" / "shared", which SGLang 0.5.23 reads) must agree with that rule. The keys
    come back too: SGLang reads them in another order (indexer_types, LongCat's ``cli_factor``, the pattern, then
    freq and offset), and its plan places its own (engines/sglang/dsa.py)."""
    pattern = c.get("index_topk_pattern")
    if pattern is not None and not isinstance(pattern, (str, list)):
        raise ConfigError(f"{c.where}: 'index_topk_pattern' must be a string or list of 'F'/'S', not {excerpt(pattern)}")
    freq, offset, skips = 1, None, None  # with a pattern neither engine reads freq and offset
    if pattern is not None:
        skips = tuple(p == "S" for p in pattern[:n])
        out = [not (i < len(skips) and skips[i]) for i in range(n)]
    else:
        freq = c.int("index_topk_freq", default=1)
        offset = c.int("index_skip_topk_offset", positive=False) if c.has("index_skip_topk_offset") else None
        out = [max(i - (2 if offset is None else offset) + 1, 0) % freq == 0 for i in range(n)]
    cli = c.get("cli_factor")
    if cli is not None and (type(cli) is not int or abs(cli) > _MAX_FIELD):
        raise ConfigError(f"{c.where}: 'cli_factor' (a fresh DSA top-k every cli_factor layers) must be a whole "
                          f"number, not {excerpt(cli)}: fix the config.json")
    types = c.get("indexer_types")  # SGLang reads it before cli_factor
    if isinstance(cli, int) and cli > 1 and types is None:
        notes.append(f"{INDEXERS_NOTE}, as vLLM does; SGLang reads cli_factor {cli} first and builds one on every "
                     f"{cli} layers (0, {cli}, {2 * cli}, ...)")
    if types is not None:
        if not isinstance(types, list) or len(types) != n or any(t not in ("full", "shared") for t in types):
            raise ConfigError(f"{c.where}: 'indexer_types' must list 'full' or 'shared' for each of the {n} layers")
        if [t == "full" for t in types] != out:
            raise ConfigError(f"{c.where}: 'indexer_types' and index_topk_freq / index_skip_topk_offset / "
                              "index_topk_pattern name different layers with an indexer: fix the config.json")
    keys = IndexerKeys(c.int("index_head_dim"), freq, offset, skips, cli,
                       None if types is None else tuple(t == "full" for t in types))
    return out, keys


def _dsa_indexer(c: _Cfg, hidden: int, q_lora_rank: int) -> tuple[SparseIndexer, list[Tensor]]:
    """One DSA indexer (vLLM 0.33.0 models/deepseek_v32/attention.py DeepseekV32Indexer): wq_b from the query latent
    to index_n_heads x index_head_dim (replicated, quantized as the checkpoint), wk fused with weights_proj
    (hidden -> index_head_dim + index_n_heads, loaded unquantized: quant_config=None) and k_norm, a LayerNorm of
    index_head_dim with weight and bias. Its cache: one FP8 key of index_head_dim per token with fp32 scales."""
    head_dim = c.int("index_head_dim")
    n_heads = c.int("index_n_heads")
    c.int("index_topk")  # what makes the model sparse (vLLM asserts hasattr(hf_config, "index_topk"))
    if head_dim % 128:
        raise ConfigError(f"{c.where}: 'index_head_dim' {head_dim} is not a multiple of the indexer's 128-element "
                          "quantization block")
    if not q_lora_rank:
        raise ConfigError(f"{c.where}: a DSA indexer projects the query latent: 'q_lora_rank' must be positive")
    return SparseIndexer(head_dim), [
        Tensor("attention", n_heads * head_dim, q_lora_rank, linear=True),  # wq_b
        Tensor("attention", head_dim + n_heads, hidden),  # wk + weights_proj
        Tensor("norms", 2 * head_dim),  # k_norm weight and bias
    ]


class _MLADims:
    """MLA projection sizes of a config (private: a plain class keeps start-up fast)."""

    def __init__(self, kv_lora_rank: int, rope: int, nope: int, v_head_dim: int, q_lora_rank: int) -> None:
        self.kv_lora_rank = kv_lora_rank
        self.rope = rope
        self.nope = nope
        self.v_head_dim = v_head_dim
        self.q_lora_rank = q_lora_rank

    @staticmethod
    def read(c: _Cfg) -> _MLADims:
        return _MLADims(
            c.int("kv_lora_rank"), c.int("qk_rope_head_dim"), c.int("qk_nope_head_dim"),
            c.int("v_head_dim"), c.int("q_lora_rank", default=0, positive=False),
        )

    def layer(self, heads: int) -> MLA:
        """The cached latent, with the per-head K (nope + rope) and V it decompresses to."""
        return MLA(self.kv_lora_rank, self.rope, heads, self.nope, self.v_head_dim)

    def tensors(self, hidden: int, heads: int) -> list[Tensor]:
        qk = self.nope + self.rope
        out: list[Tensor] = []
        if self.q_lora_rank:
            out += [
                Tensor("attention", self.q_lora_rank, hidden, linear=True),
                Tensor("norms", self.q_lora_rank),
                Tensor("attention", heads * qk, self.q_lora_rank, split="col", linear=True),
            ]
        else:
            out.append(Tensor("attention", heads * qk, hidden, split="col", linear=True))
        out += [
            Tensor("attention", self.kv_lora_rank + self.rope, hidden, linear=True),  # kv_a_proj_with_mqa
            Tensor("norms", self.kv_lora_rank),
            Tensor("attention", heads * (self.nope + self.v_head_dim), self.kv_lora_rank, split="col", linear=True),
            Tensor("attention", hidden, heads * self.v_head_dim, split="row", linear=True),
        ]
        return out


def _mamba1(c: _Cfg, hidden: int, dtype: str, ssm_dtype: str) -> tuple[RecurrentState, list[Tensor]]:
    """Jamba's Mamba-1 mixer (transformers JambaMambaMixer)."""
    inner = c.int("mamba_expand", default=2) * hidden
    d_state = c.int("mamba_d_state", default=16)
    d_conv = c.int("mamba_d_conv", default=4)
    dt_rank_raw = c.get("mamba_dt_rank", "auto")
    dt_rank = math.ceil(hidden / 16) if dt_rank_raw == "auto" else c.int("mamba_dt_rank")
    proj_bias = c.bool("mamba_proj_bias", False)
    tensors = [
        Tensor("mamba", 2 * inner, hidden, split="col", linear=True),  # in_proj
        Tensor("mamba", inner, d_conv, split="col"),  # conv1d
        Tensor("mamba", dt_rank + 2 * d_state, inner, split="row", linear=True),  # x_proj
        Tensor("mamba", inner, dt_rank, split="col", linear=True),  # dt_proj
        Tensor("mamba", inner, split="col"),  # dt_proj bias
        Tensor("mamba", inner, d_state, split="col"),  # A_log
        Tensor("mamba", inner, split="col"),  # D
        Tensor("mamba", hidden, inner, split="row", linear=True),  # out_proj
        Tensor("norms", dt_rank + 2 * d_state),  # dt/b/c layernorms
    ]
    if c.bool("mamba_conv_bias", True):
        tensors.append(Tensor("mamba", inner, split="col"))
    if proj_bias:
        tensors += [Tensor("mamba", 2 * inner, split="col"), Tensor("mamba", hidden)]
    state = RecurrentState("mamba", d_conv, inner, inner, d_state, state_dtype=ssm_dtype, conv_dtype=dtype)
    return state, tensors


def _mamba2(c: _Cfg, hidden: int, dtype: str, ssm_dtype: str) -> tuple[RecurrentState, list[Tensor]]:
    """Falcon-H1's Mamba-2 mixer (transformers FalconH1Mixer): out_proj biased by projectors_bias, the gated norm
    only with mamba_rms_norm."""
    return _mamba2_mixer(
        c, hidden, heads=c.int("mamba_n_heads"), head_dim=c.int("mamba_d_head"),
        inner=c.int("mamba_d_ssm", default=c.int("mamba_expand", default=2) * hidden),
        groups=c.int("mamba_n_groups", default=1), d_state=c.int("mamba_d_state", default=128),
        d_conv=c.int("mamba_d_conv", default=4), conv_bias=c.bool("mamba_conv_bias", True),
        in_bias=c.bool("mamba_proj_bias", False), out_bias=c.bool("projectors_bias", False),
        gated_norm=c.bool("mamba_rms_norm", False), dtype=dtype, ssm_dtype=ssm_dtype)


def _granite_mamba2(c: _Cfg, hidden: int, dtype: str) -> tuple[RecurrentState, list[Tensor]]:
    """Granite 4.0's Mamba-2 mixer: vLLM 0.33.0 granitemoehybrid.py builds MambaMixer2 with intermediate
    mamba_expand x hidden and use_bias = mamba_proj_bias (in_proj and out_proj); the gated RMSNorm is always there
    (use_rms_norm's default). mamba_d_head "auto" is that width / mamba_n_heads (GraniteMoeHybridConfig), and the
    state is kept in the served dtype (mamba_ssm_cache_dtype "auto")."""
    inner = c.int("mamba_expand") * hidden
    heads = c.int("mamba_n_heads")
    head_dim = inner // heads if c.get("mamba_d_head", "auto") == "auto" else c.int("mamba_d_head")
    if heads * head_dim != inner:  # GraniteMoeHybridConfig.validate_architecture refuses it
        raise ConfigError(f"{c.where}: mamba_n_heads {heads:,} x mamba_d_head {head_dim:,} must equal mamba_expand x"
                          f" hidden_size ({inner:,}): fix the config.json")
    proj_bias = c.bool("mamba_proj_bias", False)
    return _mamba2_mixer(c, hidden, heads=heads, head_dim=head_dim, inner=inner, groups=c.int("mamba_n_groups"),
                         d_state=c.int("mamba_d_state"), d_conv=c.int("mamba_d_conv"),
                         conv_bias=c.bool("mamba_conv_bias", True), in_bias=proj_bias, out_bias=proj_bias,
                         gated_norm=True, dtype=dtype, ssm_dtype=dtype)


# vLLM's --mamba-ssm-cache-dtype values a config's mamba_ssm_cache_dtype may name (config/cache.py MambaDType).
_SSM_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def _nemotron_mamba2(c: _Cfg, hidden: int, dtype: str) -> tuple[RecurrentState, list[Tensor]]:
    """Nemotron-H's Mamba-2 mixer: vLLM 0.33.0 nemotron_h.py builds MambaMixer2 of mamba_num_heads x mamba_head_dim
    (expand is not read), n_groups, ssm_state_size, conv_kernel, use_conv_bias, use_bias (in_proj and out_proj) and
    the gated RMSNorm. Its SSM state dtype is the config's mamba_ssm_cache_dtype, float32 when unset
    (models/config.py NemotronHForCausalLMConfig); the conv state keeps the served dtype."""
    raw = c.get("mamba_ssm_cache_dtype", "float32")
    if raw not in _SSM_DTYPES:
        raise ConfigError(f"{c.where}: field 'mamba_ssm_cache_dtype' is {excerpt(raw)} (known: {', '.join(_SSM_DTYPES)})")
    heads, head_dim = c.int("mamba_num_heads"), c.int("mamba_head_dim")
    use_bias = c.bool("use_bias", False)
    return _mamba2_mixer(c, hidden, heads=heads, head_dim=head_dim, inner=heads * head_dim, groups=c.int("n_groups"),
                         d_state=c.int("ssm_state_size"), d_conv=c.int("conv_kernel"),
                         conv_bias=c.bool("use_conv_bias", True), in_bias=use_bias, out_bias=use_bias,
                         gated_norm=True, dtype=dtype, ssm_dtype=_SSM_DTYPES[raw])


def _mamba2_mixer(c: _Cfg, hidden: int, *, heads: int, head_dim: int, inner: int, groups: int, d_state: int,
                  d_conv: int, conv_bias: bool, in_bias: bool, out_bias: bool, gated_norm: bool, dtype: str,
                  ssm_dtype: str) -> tuple[RecurrentState, list[Tensor]]:
    """A Mamba-2 mixer (vLLM 0.33.0 layers/mamba/mamba_mixer2.py MambaMixer2): in_proj to [z, x, B, C, dt] =
    2 x inner + 2 x groups x d_state + heads, a depthwise conv over inner + 2 x groups x d_state channels, per-head
    dt_bias, A and D, a gated RMSNorm over inner, out_proj. Its state per sequence (mamba_utils.py
    mamba2_state_shape): conv (d_conv - 1) x conv channels and SSM heads x head_dim x d_state."""
    if groups > heads or heads % groups:
        raise ConfigError(f"{c.where}: {groups:,} Mamba groups do not divide {heads:,} Mamba heads: fix the config.json")
    conv_dim = inner + 2 * groups * d_state
    proj = inner + conv_dim + heads
    tensors = [
        Tensor("mamba", proj, hidden, split="col", linear=True),  # in_proj
        Tensor("mamba", conv_dim, d_conv, split="col"),  # conv1d
        Tensor("mamba", heads, count=3, split="col"),  # dt_bias, A_log, D
        Tensor("mamba", hidden, inner, split="row", linear=True),  # out_proj
    ]
    if conv_bias:
        tensors.append(Tensor("mamba", conv_dim, split="col"))
    if in_bias:
        tensors.append(Tensor("mamba", proj, split="col"))
    if out_bias:
        tensors.append(Tensor("mamba", hidden))
    if gated_norm:
        tensors.append(Tensor("norms", inner, split="col"))
    state = RecurrentState("mamba2", d_conv, conv_dim, heads, head_dim * d_state, state_dtype=ssm_dtype, conv_dtype=dtype,
                           groups=groups, group_state=d_state)
    return state, tensors


def _gated_delta_net(c: _Cfg, hidden: int, dtype: str, ssm_dtype: str) -> tuple[RecurrentState, list[Tensor]]:
    """Qwen3-Next's GatedDeltaNet (linear attention) mixer."""
    kh = c.int("linear_num_key_heads")
    vh = c.int("linear_num_value_heads")
    if vh % kh:  # vLLM 0.33.0 gdn/qwen_gdn_linear_attn.py groups num_v_heads // num_k_heads value heads per key head
        raise ConfigError(f"{c.where}: linear_num_value_heads {vh} is not a multiple of linear_num_key_heads {kh}: fix the config.json")
    kd = c.int("linear_key_head_dim")
    vd = c.int("linear_value_head_dim")
    kernel = c.int("linear_conv_kernel_dim", default=4)
    conv_dim = 2 * kh * kd + vh * vd
    tensors = [
        Tensor("attention", 2 * kh * kd + 2 * vh * vd, hidden, split="col", linear=True),  # in_proj_qkvz
        Tensor("attention", 2 * vh, hidden, split="col", linear=True),  # in_proj_ba
        Tensor("attention", conv_dim, kernel, split="col"),  # conv1d
        Tensor("attention", vh, count=2, split="col"),  # dt_bias, A_log
        Tensor("norms", vd),  # gated RMSNorm
        Tensor("attention", hidden, vh * vd, split="row", linear=True),  # out_proj
    ]
    state = RecurrentState("gated_delta_net", kernel, conv_dim, vh, kd * vd, state_dtype=ssm_dtype, conv_dtype=dtype)
    return state, tensors



def _groups_divide(fmt: WeightFormat, hidden: int, inter: int) -> None:
    """A GPTQ/AWQ group size must divide each quantized layer's input: vLLM stops otherwise ('The input size is not
    aligned with the quantized weight shape', quantization/awq.py and gptq.py in every release; the 0.33.0 kernels in
    kernels/linear/mixed_precision/ check full_weight_shape[0] % group_size). Checked for the q/k/v and gate/up
    projections (input hidden_size) and a dense MLP's down projection (input intermediate_size)."""
    if fmt.name not in ("gptq", "awq") or fmt.group_size <= 0:
        return
    for field, size in (("hidden_size", hidden), ("intermediate_size", inter)):
        if size and size % fmt.group_size:
            raise InputError(f"group_size {fmt.group_size:,} does not divide {field} {size:,}: no {fmt.name.upper()} "
                             "kernel loads it")


# --- Gemma 4 -----------------------------------------------------------------------------------


def _gemma4_keys(raw: dict[str, Any], c: _Cfg) -> dict[str, Any]:
    """What transformers 5.20 Gemma4TextConfig.__post_init__ derives: layer_types when the config has none (every
    6th layer full attention), the last layer forced to full attention, and with use_bidirectional_attention "all"
    the window halved plus one (sliding_window // 2 + 1)."""
    n = c.int("num_hidden_layers")
    types = raw.get("layer_types")
    if types is None:
        types = ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(n)]
    if not isinstance(types, list) or len(types) != n or any(t not in ("full_attention", "sliding_attention")
                                                              for t in types):
        raise ConfigError(f"{c.where}: field 'layer_types' must list 'sliding_attention' or 'full_attention' for each "
                          f"of the {n:,} layers (num_hidden_layers), got {excerpt(types)}")
    out = {**raw, "layer_types": [*types[:-1], "full_attention"]}
    if raw.get("use_bidirectional_attention") == "all":
        out["sliding_window"] = c.int("sliding_window") // 2 + 1
    return out


def _gemma4(c: _Cfg, spec: ModelSpec, notes: list[str]) -> ModelSpec:
    """Gemma 4's decoder as vLLM 0.33.0 models/gemma4.py builds it, over the generic reading (dims, length, dtype,
    weight format). Per layer: q/k/v/o (biased when attention_bias) of that layer type's head shape (sliding:
    head_dim x num_key_value_heads; full: global_head_dim x num_global_key_value_heads when attention_k_eq_v, else
    num_key_value_heads: transformers' per_layer_config), q_norm and k_norm (v_norm has no weight); with
    attention_k_eq_v the checkpoint ships k_proj only and vLLM loads it into both the K and the V slot of qkv_proj,
    so the V slot is allocated (and counted here) though the checkpoint does not hold it. The last
    num_kv_shared_layers layers read the KV of the last earlier layer of their type: q_proj, o_proj and q_norm
    only, no cache. A GeGLU MLP of intermediate_size (twice that in the shared layers with use_double_wide_mlp);
    with num_experts set, a MoE block beside it: router (proj, scale, per_expert_scale) and num_experts GeGLU
    experts of moe_intermediate_size, top_k_experts per token, and three more RMSNorms. Four RMSNorms per layer;
    with hidden_size_per_layer_input > 0 a per-layer input gate, projection and norm per layer, and before the
    layers a table of vocab_size_per_layer_input x (layers x that width), its projection from the hidden state and
    a norm. Every pipeline stage builds the embeddings (Gemma4Model has no first-rank test)."""
    from .layers import NoCache

    hidden, heads, vocab = spec.dims.hidden_size, spec.dims.num_attention_heads, spec.dims.vocab_size
    types = c.get("layer_types")
    n = len(types)
    kv = c.int("num_key_value_heads")
    head_dim = c.int("head_dim")
    full_dim = c.int("global_head_dim")
    k_eq_v = c.bool("attention_k_eq_v", False)
    full_kv = c.int("num_global_key_value_heads", default=kv) if k_eq_v else kv
    for key, value in (("num_key_value_heads", kv), ("num_global_key_value_heads", full_kv)):
        if value > heads or heads % value:
            raise ConfigError(f"{c.where}: field {key!r} = {value} KV heads do not divide {heads} attention heads")
    window = c.int("sliding_window")
    shared = c.int("num_kv_shared_layers", default=0, positive=False)
    first_shared = n - shared
    if shared and first_shared <= 0:
        raise ConfigError(f"{c.where}: num_kv_shared_layers {shared:,} leaves no layer of the {n:,} with a KV cache "
                          "of its own: fix the config.json")
    bias = c.bool("attention_bias", False)
    inter = c.int("intermediate_size")
    double = c.bool("use_double_wide_mlp", False)
    ple = c.int("hidden_size_per_layer_input", default=0, positive=False)
    experts = c.int("num_experts") if c.has("num_experts") else 0  # vLLM: a MoE block when num_experts is not None
    top_k = moe_inter = 0
    if experts:
        top_k = c.int("top_k_experts")
        moe_inter = c.int("moe_intermediate_size", "expert_intermediate_size")
        if top_k > experts:
            raise ConfigError(f"{c.where}: each token is routed to {top_k:,} experts (top_k_experts) of only "
                              f"{experts:,}: fix the config.json")
        if not c.bool("enable_moe_block", True):
            notes.append("enable_moe_block is false but num_experts is set: vLLM builds the MoE block (it reads "
                         "num_experts alone), and so does kvbudget")
    layers: list[Layer] = []
    blocks: list[tuple[Tensor, ...]] = []
    for i, t in enumerate(types):
        full = t == "full_attention"
        hd, kvh = (full_dim, full_kv) if full else (head_dim, kv)
        tensors: list[Tensor] = []
        if i >= first_shared:
            owners = [j for j in range(first_shared) if types[j] == t]
            if not owners:  # vLLM's list.index and SGLang's check stop on it
                raise ConfigError(f"{c.where}: KV-shared layer {i} is {t} but none of the first {first_shared:,} layers "
                                  "is: no layer to read its KV from; fix layer_types or num_kv_shared_layers")
            owner = layers[owners[-1]]
            assert isinstance(owner, FullAttention)
            layers.append(NoCache(f"reads layer {owners[-1]}'s KV cache (num_kv_shared_layers)", shared=owner))
            tensors += [Tensor("attention", heads * hd, hidden, split="col", linear=True),
                        Tensor("attention", hidden, heads * hd, split="row", linear=True), Tensor("norms", hd)]
            if bias:
                tensors += [Tensor("attention", heads * hd, split="col"), Tensor("attention", hidden)]
        else:
            layers.append(FullAttention(kvh, hd) if full else SlidingWindow(kvh, hd, window=window))
            tensors += P.attention(hidden, heads, kvh, hd, qkv_bias=bias, o_bias=bias, qk_norm=True)
        tensors += P.gated_mlp(hidden, inter * (2 if double and i >= first_shared else 1))
        norms = 4
        if experts:
            tensors += [*P.router(hidden, experts), Tensor("router", hidden), Tensor("router", experts)]
            tensors += P.gated_mlp(hidden, moe_inter, role="experts", count=experts)
            norms += 3
        if ple:
            tensors += [Tensor("embeddings", ple, hidden, linear=True), Tensor("embeddings", hidden, ple, linear=True),
                        Tensor("norms", hidden)]
        tensors += P.norms(hidden, norms)
        blocks.append(tuple(tensors))
    head = [Tensor("embeddings", vocab, hidden, split="vocab")]
    if ple:
        head += [Tensor("embeddings", c.int("vocab_size_per_layer_input"), n * ple, split="vocab"),
                 Tensor("embeddings", n * ple, hidden, split="col", linear=True), Tensor("norms", ple)]
    inv = spec.inventory
    if k_eq_v:
        dup = sum(full_kv * full_dim * hidden for t in types[:first_shared] if t == "full_attention")
        notes.append(f"attention_k_eq_v: the full-attention layers' V slots ({dup:,} parameters) are a copy of their K "
                     "projections that vLLM and SGLang allocate and the checkpoint does not hold: counted here")
    kinds = {"sliding": sum(isinstance(x, SlidingWindow) for x in layers),
             "full": sum(type(x) is FullAttention for x in layers), "shared": shared}
    sources = (*spec.sources, ("head_dim", f"head_dim (sliding), global_head_dim (full: {full_dim})"),
               ("num_kv_heads", "num_key_value_heads (sliding), " + ("num_global_key_value_heads (full)" if k_eq_v
                                                                     else "num_key_value_heads (full)")),
               ("layer_types", f"layer_types: {kinds['sliding']} sliding, {kinds['full']} full, {shared} KV-shared"))
    return replace(
        spec, layers=tuple(layers), layer_of=tuple(range(n)),
        inventory=make_inventory(tuple(head), tuple(blocks), inv.tail),
        dims=replace(spec.dims, intermediate_size=inter + top_k * moe_inter), sources=sources, notes=tuple(notes),
        num_experts=experts, experts_per_token=top_k, expert_intermediate_size=moe_inter)


def _gemma4_vision_tower(v: _Cfg, text_hidden: int) -> list[Tensor]:
    """Gemma 4's image encoder, which vLLM 0.33.0 models/gemma4_mm.py builds with transformers' AutoModel
    (Gemma4VisionModel, transformers 5.20 modeling_gemma4.py): plain torch layers, whole on every rank and never
    quantized. Per block q/k/v/o without biases (num_attention_heads / num_key_value_heads x head_dim), q_norm and
    k_norm, a GeGLU MLP (gate, up, down) and four RMSNorms; four clipping bounds per linear layer with
    use_clipped_linears. A patch projection (3 x patch_size^2 -> hidden), a 2 x position_embedding_size x hidden
    position table, std_bias and std_scale with standardize; then the embedder into the text model
    (embed_vision.embedding_projection, vLLM's ReplicatedLinear, after a weightless RMSNorm)."""
    h, i, n = v.int("hidden_size"), v.int("intermediate_size"), v.int("num_hidden_layers")
    heads = v.int("num_attention_heads")
    kv = v.int("num_key_value_heads", default=heads)
    hd = v.int("head_dim", default=h // heads)
    p = v.int("patch_size")
    layer = [
        Tensor("vision", heads * hd, h), Tensor("vision", kv * hd, h, count=2), Tensor("vision", h, heads * hd),
        Tensor("vision", hd, count=2),  # q_norm, k_norm
        Tensor("vision", i, h, count=2), Tensor("vision", h, i),  # gate, up, down
        Tensor("vision", h, count=4),  # four RMSNorms
    ]
    if v.bool("use_clipped_linears", False):
        layer.append(Tensor("vision", 4, count=7))
    out = [*_repeat(layer, n), Tensor("vision", h, 3 * p * p), Tensor("vision", v.int("position_embedding_size"), h, count=2)]
    if v.bool("standardize", False):
        out.append(Tensor("vision", h, count=2))
    return [*out, Tensor("vision", text_hidden, h, linear=True)]
