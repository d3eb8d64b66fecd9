"""Each layer kind against hand computations from real configs (catalog files cite their source).

Per token and layer: full attention 2 x KV heads x head_dim x bytes; MLA (kv_lora_rank +
qk_rope_head_dim) x bytes, no factor 2 and no TP split; recurrent state a fixed size per sequence.
"""

from __future__ import annotations

import pytest

import kvbudget
from kvbudget.kvcache import bytes_per_sequence, check_tp
from kvbudget.model.layers import MLA, ChunkedLocal, FullAttention, NoCache, RecurrentState, SlidingWindow
from kvbudget.units import InputError, element_type

BF16 = element_type("bf16")


def _rows(model: str, context: int, **kw: int | str) -> dict[str, tuple[int, int, int]]:
    r = kvbudget.kv(model, context=context, **kw)  # type: ignore[arg-type]
    return {row.kind: (row.layers, row.bytes_per_token, row.bytes_per_sequence) for row in r.rows}


def test_full_attention_gqa_mha_mqa() -> None:
    # GQA, Llama-3.1-8B config: 32 layers, 8 KV heads, head_dim 128 -> 2*8*128*2 per layer and token.
    assert kvbudget.kv("meta-llama/Llama-3.1-8B-Instruct", context=1).bytes_per_token == 32 * 2 * 8 * 128 * 2
    # MHA, GPT-2 config: 12 layers, 12 heads of 64 (n_embd 768 / n_head 12); an fp32 checkpoint is
    # served in bf16 (vLLM config/model.py: _resolve_auto_dtype downcasts float32).
    assert kvbudget.kv("gpt2", context=1).bytes_per_token == 12 * 2 * 12 * 64 * 2
    # MQA, Falcon-7B config: multi_query -> 1 KV head; 4544 / 71 heads = 64.
    assert kvbudget.kv("tiiuae/falcon-7b", context=1).bytes_per_token == 32 * 2 * 1 * 64 * 2


def test_k_and_v_head_sizes_may_differ() -> None:
    layer = FullAttention(num_kv_heads=2, head_dim=192, v_head_dim=128)
    assert layer.bytes_per_token(BF16) == 2 * 192 * 2 + 2 * 128 * 2
    assert layer.bytes_per_sequence(10, BF16) == 10 * (2 * 192 * 2 + 2 * 128 * 2)


def test_gemma2_9b_sliding_every_other_layer() -> None:
    # google/gemma-2-9b-it config: 42 layers, 8 KV heads, head_dim 256, sliding_window 4096;
    # transformers Gemma2 slides on even layers. Per layer and token: 2*8*256*2 = 8192 B.
    rows = _rows("google/gemma-2-9b-it", 8192)
    per_layer = 2 * 8 * 256 * 2
    assert rows["sliding_window"] == (21, 21 * per_layer, 21 * 4096 * per_layer)
    assert rows["full_attention"] == (21, 21 * per_layer, 21 * 8192 * per_layer)


def test_gemma3_27b_five_local_one_global() -> None:
    # google/gemma-3-27b-it text_config: 62 layers, 16 KV heads, head_dim 128, sliding_window 1024,
    # every 6th layer global -> 10 full + 52 sliding. Per layer and token 2*16*128*2 = 8192 B.
    rows = _rows("google/gemma-3-27b-it", 32768)
    per_layer = 2 * 16 * 128 * 2
    assert rows["sliding_window"] == (52, 52 * per_layer, 52 * 1024 * per_layer)
    assert rows["full_attention"] == (10, 10 * per_layer, 10 * 32768 * per_layer)


def test_mistral_7b_v01_window_applies_to_every_layer() -> None:
    # mistralai/Mistral-7B-v0.1 config: sliding_window 4096 and no layer_types, 32 layers, 8 KV heads
    # of 128. vLLM 0.33 (engine/arg_utils.py, CacheConfig.sliding_window) and transformers'
    # DynamicCache both window every layer: a sequence holds at most 4096 tokens per layer.
    per_token = 32 * 2 * 8 * 128 * 2
    assert kvbudget.kv("mistralai/Mistral-7B-v0.1", context=2048).bytes_per_sequence == 2048 * per_token
    assert kvbudget.kv("mistralai/Mistral-7B-v0.1", context=8192).bytes_per_sequence == 4096 * per_token
    # Mistral-7B-v0.3 has sliding_window null: full attention.
    assert kvbudget.kv("mistralai/Mistral-7B-Instruct-v0.3", context=8192).bytes_per_sequence == 8192 * per_token


def test_gpt_oss_20b_alternating_128_token_window() -> None:
    # openai/gpt-oss-20b config: 24 layers, layer_types alternating sliding/full, sliding_window 128,
    # 8 KV heads of head_dim 64 -> 2*8*64*2 = 2048 B per layer and token.
    rows = _rows("openai/gpt-oss-20b", 8192)
    assert rows["sliding_window"] == (12, 12 * 2048, 12 * 128 * 2048)
    assert rows["full_attention"] == (12, 12 * 2048, 12 * 8192 * 2048)


def test_deepseek_v3_mla_latent_not_split_by_tp() -> None:
    # deepseek-ai/DeepSeek-V3 config: 61 layers, kv_lora_rank 512, qk_rope_head_dim 64 -> 576 elements
    # per token and layer, one "head", K only; every TP rank keeps all of it (vLLM MLAAttentionSpec).
    per_token = 61 * (512 + 64) * 2
    assert kvbudget.kv("deepseek-ai/DeepSeek-V3", context=1).bytes_per_token == per_token == 70_272
    assert kvbudget.kv("deepseek-ai/DeepSeek-V3", context=1, tp=8).bytes_per_token == per_token
    assert kvbudget.kv("deepseek-ai/DeepSeek-V3", context=1, kv_dtype="fp8").bytes_per_token == 61 * 576


def test_qwen3_next_gated_delta_net_state_is_constant() -> None:
    # Qwen/Qwen3-Next-80B-A3B-Instruct config: 48 layers, full_attention_interval 4 -> 12 full-attention
    # layers (2 KV heads x head_dim 256) and 36 GatedDeltaNet layers with linear_num_key_heads 16,
    # linear_num_value_heads 32, key/value head dims 128, conv kernel 4.
    # conv state: (4-1) x (2*16*128 + 32*128) bf16; recurrent state: 32 x 128 x 128 bf16
    # (shapes of vLLM MambaStateShapeCalculator.gated_delta_net_state_shape).
    conv = 3 * (2 * 16 * 128 + 32 * 128) * 2
    ssm = 32 * 128 * 128 * 2
    for context in (1, 4096, 262144):
        rows = _rows("Qwen/Qwen3-Next-80B-A3B-Instruct", context)
        assert rows["recurrent_state"] == (36, 0, 36 * (conv + ssm))
        assert rows["full_attention"] == (12, 12 * 2 * 2 * 256 * 2, 12 * context * 2 * 2 * 256 * 2)
    # TP=2 halves the channels and heads of the state, as vLLM shards it.
    rows = _rows("Qwen/Qwen3-Next-80B-A3B-Instruct", 1, tp=2)
    assert rows["recurrent_state"][2] == 36 * (conv // 2 + ssm // 2)


def test_jamba_mamba_state_and_attention_every_eighth_layer() -> None:
    # ai21labs/Jamba-v0.1 config: 32 layers, attn_layer_period 8 / offset 4 -> 4 attention layers with
    # 8 KV heads of 4096/32 = 128; 28 Mamba layers with d_inner = 2 x 4096, d_conv 4, d_state 16.
    rows = _rows("ai21labs/Jamba-v0.1", 1000)
    assert rows["full_attention"] == (4, 4 * 2 * 8 * 128 * 2, 4 * 1000 * 2 * 8 * 128 * 2)
    assert rows["recurrent_state"] == (28, 0, 28 * (3 * 8192 * 2 + 8192 * 16 * 2))


def test_llama4_scout_chunked_local_attention() -> None:
    # meta-llama/Llama-4-Scout-17B-16E-Instruct text_config: 48 layers, attention_chunk_size 8192;
    # 36 RoPE layers attend within their chunk, 12 NoPE layers are global. 8 KV heads x 128.
    rows = _rows("meta-llama/Llama-4-Scout-17B-16E-Instruct", 131072)
    per_layer = 2 * 8 * 128 * 2
    assert rows["chunked_local"] == (36, 36 * per_layer, 36 * 8192 * per_layer)
    assert rows["full_attention"] == (12, 12 * per_layer, 12 * 131072 * per_layer)


def test_falcon_h1_attention_and_mamba2_side_by_side() -> None:
    # tiiuae/Falcon-H1-0.5B-Instruct config (HF transformers FalconH1 table: 36 layers, 8 heads, 2 KV,
    # 24 Mamba heads of 64, d_state 128): every layer has both. mamba_d_ssm 1536, 1 group:
    # conv state 3 x (1536 + 2*128) bf16; SSM state 24 x 64 x 128 bf16.
    spec = kvbudget.load_model("tiiuae/Falcon-H1-0.5B-Instruct")
    assert spec.num_layers == 36 and len(spec.layers) == 72
    rows = _rows("tiiuae/Falcon-H1-0.5B-Instruct", 4096)
    assert rows["full_attention"] == (36, 36 * 2 * 2 * 64 * 2, 36 * 4096 * 2 * 2 * 64 * 2)
    assert rows["recurrent_state"] == (36, 0, 36 * (3 * 1792 * 2 + 24 * 64 * 128 * 2))


def test_no_cache_layer_keeps_nothing() -> None:
    layer = NoCache("shares KV with layer 3")
    assert layer.bytes_per_token(BF16) == 0
    assert layer.bytes_per_sequence(100_000, BF16) == 0
    assert layer.describe() == "shares KV with layer 3"


def test_tp_replicates_kv_heads_beyond_their_count() -> None:
    # Qwen/Qwen3-235B-A22B config: 94 layers, 4 KV heads of 128, 64 query heads. With TP=8 each rank
    # still stores one head (max(1, 4 // 8)): replication, as vLLM ModelConfig.get_num_kv_heads.
    one_head = 94 * 2 * 1 * 128 * 2
    assert kvbudget.kv("Qwen/Qwen3-235B-A22B", context=1, tp=8).bytes_per_token == one_head
    assert kvbudget.kv("Qwen/Qwen3-235B-A22B", context=1, tp=4).bytes_per_token == one_head
    assert kvbudget.kv("Qwen/Qwen3-235B-A22B", context=1, tp=2).bytes_per_token == 2 * one_head
    assert kvbudget.kv("Qwen/Qwen3-235B-A22B", context=1, tp=1).bytes_per_token == 4 * one_head


def test_tp_must_divide_heads() -> None:
    spec = kvbudget.load_model("meta-llama/Llama-3.1-8B-Instruct")
    with pytest.raises(InputError, match="does not divide the 32 attention heads"):
        check_tp(spec, 3)
    spec = kvbudget.load_model("microsoft/Phi-3-medium-4k-instruct")  # 40 heads, 10 KV heads
    with pytest.raises(InputError, match="neither divides nor is a multiple of the 10 KV heads"):
        check_tp(spec, 4)


def test_block_formats_round_up_per_row() -> None:
    # llama.cpp q8_0: 32 values in 34 bytes (ggml block_q8_0); q4_0: 32 values in 18 bytes.
    layer = FullAttention(num_kv_heads=8, head_dim=128)
    assert layer.bytes_per_token(element_type("q8_0")) == 2 * (8 * 128 // 32) * 34
    assert layer.bytes_per_token(element_type("q4_0")) == 2 * (8 * 128 // 32) * 18


def test_describe_names_window_chunk_and_latent() -> None:
    assert "window 4096" in SlidingWindow(8, 128, window=4096).describe()
    assert "chunk 8192" in ChunkedLocal(8, 128, chunk=8192).describe()
    assert MLA(512, 64).describe() == "latent 512 + rope 64"
    state = RecurrentState("mamba", 4, 8192, 8192, 16)
    assert state.bytes_per_sequence(1, BF16) == bytes_per_sequence([state], 10**6, BF16)
