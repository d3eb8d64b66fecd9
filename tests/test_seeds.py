"""Golden tests: three hand-worked KV-cache sizing examples, each quoted inline where it is checked.

A  "Sizing KV-cache memory for LLM inference" (Llama-2-70B)
B  "KV Cache Memory Sizing for Long-Context LLM Serving" (32 x 8 x 128 config)
C  "KV Cache Memory Calculation" (Llama-3-8B on an A100 80 GB)
"""

from __future__ import annotations

import json
from pathlib import Path

import kvbudget
from kvbudget.units import GB, GiB, KiB, MiB


def textbook_fit(*args: object, **kwargs: object) -> kvbudget.FitAnswer:
    """kvbudget.fit with the textbook partition (weights + KV + activations + overhead)."""
    return kvbudget.fit(*args, engine="textbook", **kwargs)  # type: ignore[arg-type]

LLAMA2_70B = "meta-llama/Llama-2-70b-hf"


# --- example A: Llama-2-70B -----------------------------------------------------------------


def test_llama2_70b_is_80_layers_8_kv_heads_head_dim_128() -> None:
    # example A: "80 layers, 8 KV heads, and a head dimension of 128"
    spec = kvbudget.load_model(LLAMA2_70B)
    assert spec.num_layers == 80
    assert {(layer.num_kv_heads, layer.head_dim) for layer in spec.layers} == {(8, 128)}  # type: ignore[union-attr]


def test_llama2_70b_4_kib_per_token_per_layer() -> None:
    # example A: "each token per layer requires 4KB ... derived from 2 x 8 x 128 x 2"
    r = kvbudget.kv(LLAMA2_70B, context=8192)
    assert r.bytes_per_token == 80 * 2 * 8 * 128 * 2
    assert r.bytes_per_token // 80 == 4 * KiB


def test_llama2_70b_32_mib_per_layer_and_2_5_gib_per_8k_sequence() -> None:
    # example A: "A single 8K context sequence consumes 32MB per layer. Across 80 layers ... 2.5GB"
    r = kvbudget.kv(LLAMA2_70B, context=8192)
    assert r.bytes_per_sequence // 80 == 32 * MiB
    assert r.bytes_per_sequence == int(2.5 * GiB)


def test_llama2_70b_12_sequences_in_32_gib_and_16_need_40_gib() -> None:
    # example A: "A 32GB KV-cache budget supports a batch size of 12 at 8K context. Increasing the batch
    # to 16 pushes the requirement to 40GB."
    r = kvbudget.kv(LLAMA2_70B, context=8192, batch=16)
    assert r.total_bytes == 40 * GiB
    weights = textbook_fit(LLAMA2_70B, gpu_memory=1000 * GiB, context=8192).weights_bytes
    plan = textbook_fit(LLAMA2_70B, gpu_memory=weights + 32 * GiB, context=8192,
                        overhead_bytes=0, activation_bytes=0)
    assert plan.kv_cache_bytes == 32 * GiB
    assert plan.max_batch == 12


def test_llama2_70b_fp16_weights_are_about_140_gb() -> None:
    # example A: "The model weights for a 70B parameter model in FP16 consume 140GB."
    # The real checkpoint has 68,976,648,192 parameters (HF "69B"), all kept in 16-bit: 2 bytes each.
    plan = textbook_fit(LLAMA2_70B, gpu_memory=1000 * GiB, weights_dtype="fp16", context=8192)
    assert plan.weights_bytes == 2 * 68_976_648_192
    assert abs(plan.weights_bytes - 140 * GB) / (140 * GB) < 0.015


def test_fp8_frees_35_gb_which_is_14_more_8k_sequences() -> None:
    # example A (launch command: --tensor-parallel-size 2): "Quantizing the weights to FP8 frees 35GB of
    # VRAM for a 70B model. That 35GB can support an additional 14 concurrent 8K sequences."
    # The example's arithmetic for a nominal 70B model on 2 GPUs: 70e9 params x (2 - 1) bytes / 2 = 35 GB,
    # and 35 "GB" / 2.5 "GB" per sequence = 14 (the example's GB here are the binary ones of its 2.5 GB).
    per_sequence = kvbudget.kv(LLAMA2_70B, context=8192).bytes_per_sequence
    assert (35 * GiB) // per_sequence == 14
    # The real model: FP8 packs every linear weight (68,451,041,280 parameters = total minus
    # 2 x 32000 x 8192 embeddings/lm_head and 161 x 8192 norms, which stay 16-bit) into 1 byte plus one
    # fp32 scale per tensor; per GPU at TP=2 that frees 34,225,520,640 bytes minus 560 tensors x 4 B.
    bf16 = textbook_fit(LLAMA2_70B, gpu_memory=1000 * GiB, tp=2, context=8192).weights_bytes
    fp8 = textbook_fit(LLAMA2_70B, gpu_memory=1000 * GiB, tp=2, weights_dtype="fp8", context=8192).weights_bytes
    assert bf16 - fp8 == 68_451_041_280 // 2 - 80 * 7 * 4


# --- example B: 32 layers x 8 KV heads x 128, BF16 --------------------------------------------


def _hypothetical_config(tmp_path: Path) -> Path:
    # example B: "my own arithmetic on a hypothetical config ... 32 layers, 8 KV heads, head dimension 128, BF16"
    cfg = {
        "model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
        "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
        "max_position_embeddings": 131072, "torch_dtype": "bfloat16",
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


def test_hypothetical_config_128_kib_per_token(tmp_path: Path) -> None:
    # example B: "2 x 32 x 8 x 128 x 2 = 131,072 bytes, or 128 KiB per token"
    r = kvbudget.kv(str(_hypothetical_config(tmp_path)), context=1024)
    assert r.bytes_per_token == 131_072 == 128 * KiB


def test_hypothetical_config_16_by_128k_is_256_gib(tmp_path: Path) -> None:
    # example B: "a batch of sixteen 128K-context requests needs 256 GiB of KV state alone"
    r = kvbudget.kv(str(_hypothetical_config(tmp_path)), context=131072, batch=16)
    assert r.total_bytes == 256 * GiB
    # and the table row of the same example: batch 16 x 128K in the table equals the total
    assert r.table[r.batches.index(16)][r.contexts.index(131072)] == 256 * GiB


def test_kv_is_linear_in_context_and_concurrency(tmp_path: Path) -> None:
    # example B: "KV cost is linear in context length and linear in concurrency"
    path = str(_hypothetical_config(tmp_path))
    one = kvbudget.kv(path, context=8192).bytes_per_sequence
    assert kvbudget.kv(path, context=16384).bytes_per_sequence == 2 * one
    assert kvbudget.kv(path, context=8192, batch=3).total_bytes == 3 * one


def test_fp8_kv_halves_the_bill(tmp_path: Path) -> None:
    # example B: "quantize the KV cache to 1 byte per element instead of 2"
    path = str(_hypothetical_config(tmp_path))
    assert kvbudget.kv(path, context=4096, kv_dtype="fp8").bytes_per_token == 131_072 // 2


# --- example C: Llama-3-8B -----------------------------------------------------------------------


def test_llama3_8b_one_gib_per_8192_token_sequence() -> None:
    # example C: "KV Cache = 2 x 1 x 8192 x 32 x 8 x 128 x 2 bytes = 1,073,741,824 bytes ... 1 GB"
    r = kvbudget.kv("meta-llama/Meta-Llama-3-8B", context=8192)
    assert r.bytes_per_sequence == 1_073_741_824
    assert r.bytes_per_token == 131_072  # "128 KB/token"


def test_llama3_8b_head_dim_from_hidden_over_heads() -> None:
    # example C: "head_dim ... is calculated as d_model / n_heads = 4096 / 32 = 128"
    spec = kvbudget.load_model("meta-llama/Meta-Llama-3-8B")
    assert spec.dims.hidden_size // spec.dims.num_attention_heads == 128 == spec.dims.head_dim


def test_llama3_8b_120_requests_of_4096_on_an_80_gb_a100_under_the_examples_assumptions() -> None:
    # example C: "Available memory = 80 GB - 16 GB - 4 GB = 60 GB ... 60 GB / 0.5 GB/request = 120 requests"
    # with the example's own assumptions: 80 (GiB-sized) GB of memory, 16 GB of weights, 4 GB of
    # activation and overhead together, 0.5 GB of KV per 4096-token request.
    plan = textbook_fit(
        "meta-llama/Meta-Llama-3-8B", gpu_memory=80 * GiB, weights_bytes=16 * GiB,
        overhead_bytes=4 * GiB, activation_bytes=0, context=4096,
    )
    assert plan.kv_per_sequence_bytes == 512 * MiB
    assert plan.kv_cache_bytes == 60 * GiB
    assert plan.max_batch == 120


def test_llama3_8b_weights_are_about_16_gb_in_fp16() -> None:
    # example C: "8 * 10^9 * 2 = 16 * 10^9 bytes ≈ 16 GB"; the checkpoint has 8,030,261,248 parameters.
    plan = textbook_fit("meta-llama/Meta-Llama-3-8B", gpu_memory=80 * GiB, context=4096)
    assert plan.weights_bytes == 2 * 8_030_261_248
    assert abs(plan.weights_bytes - 16 * GB) / (16 * GB) < 0.01
