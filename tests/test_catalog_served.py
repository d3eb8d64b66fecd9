"""Catalog entries for checkpoints people serve as-is: quantized repos (AWQ, block FP8), the bf16
Qwen3-Coder-480B, Qwen3-VL sizes, Qwen3-4B-Instruct-2507, Granite 3.3, SmolLM2, Gemma-2-2B and Mistral-Small-24B-2501;
then distills and fine-tunes (DeepSeek-R1-Distill-Qwen-32B, Magistral-Small-2509), GLM-4.5 / 4.6, Phi-4-mini,
Mistral-7B-Instruct-v0.2, CodeLlama-7b and the Qwen3 AWQ / FP8 and Llama-3.1 AWQ-INT4 repos.

Each entry's KV bytes per token are checked against a hand computation from its own config.json
fields (2 (K and V) x layers x KV heads x head_dim x bytes), every name it lists resolves to it, the
quantized ones load with their checkpoint's format, and their weight bytes are checked against a
published figure (a repo's total file size or a published start-up log) or, where none was found, a
hand computation of the format's bytes from the config.
"""

from __future__ import annotations

import json
from math import ceil
from pathlib import Path
from typing import Any

import pytest

import kvbudget
from kvbudget.cli import main
from kvbudget.model import catalog
from kvbudget.model.hf_config import ConfigError, spec_from_config, text_config
from kvbudget.units import GiB

MODEL_DIR = Path(catalog.CATALOG_DIR)

# file -> KV bytes per token at the checkpoint's 16-bit dtype, written out by hand from the numbers in
# the entry's notes (layers x KV heads x head_dim); the test also recomputes it from the config's fields.
ADDED: dict[str, int] = {
    "qwen3-32b-fp8.json": 2 * 64 * 8 * 128 * 2,  # 262,144
    "qwen3-30b-a3b-fp8.json": 2 * 48 * 4 * 128 * 2,  # 98,304
    "qwen3-vl-2b-instruct.json": 2 * 28 * 8 * 128 * 2,  # 114,688
    "qwen3-vl-4b-instruct.json": 2 * 36 * 8 * 128 * 2,  # 147,456
    "qwen3-vl-32b-instruct.json": 2 * 64 * 8 * 128 * 2,  # 262,144
    "qwen3-vl-235b-a22b-instruct.json": 2 * 94 * 4 * 128 * 2,  # 192,512
    "qwen3-coder-480b-a35b-instruct.json": 2 * 62 * 8 * 128 * 2,  # 253,952
    "qwen3-4b-instruct-2507.json": 2 * 36 * 8 * 128 * 2,  # 147,456
    "granite-3.3-8b-instruct.json": 2 * 40 * 8 * 128 * 2,  # 163,840
    "smollm2-1.7b-instruct.json": 2 * 24 * 32 * 64 * 2,  # 196,608
    "gemma-2-2b.json": 2 * 26 * 4 * 256 * 2,  # 106,496 (the 13 sliding layers hold at most 4096 tokens)
    "mistral-small-24b-instruct-2501.json": 2 * 40 * 8 * 128 * 2,  # 163,840
    "qwen2.5-7b-instruct-awq.json": 2 * 28 * 4 * 128 * 2,  # 57,344
    "qwen2.5-14b-instruct-awq.json": 2 * 48 * 8 * 128 * 2,  # 196,608
    "qwen2.5-32b-instruct-awq.json": 2 * 64 * 8 * 128 * 2,  # 262,144
    "qwen2.5-72b-instruct-awq.json": 2 * 80 * 8 * 128 * 2,  # 327,680
    "deepseek-r1-distill-qwen-32b.json": 2 * 64 * 8 * 128 * 2,  # 262,144
    "codellama-7b.json": 2 * 32 * 32 * 128 * 2,  # 524,288 (no GQA: 32 KV heads)
    "phi-4-mini-instruct.json": 2 * 32 * 8 * 128 * 2,  # 131,072 (head_dim 3072 / 24)
    "glm-4.5.json": 2 * 92 * 8 * 128 * 2,  # 376,832
    "glm-4.6.json": 2 * 92 * 8 * 128 * 2,  # 376,832
    "mistral-7b-instruct-v0.2.json": 2 * 32 * 8 * 128 * 2,  # 131,072 (no sliding window, unlike v0.1)
    "magistral-small-2509.json": 2 * 40 * 8 * 128 * 2,  # 163,840 (text_config of a mistral3 wrapper)
    "qwen3-8b-awq.json": 2 * 36 * 8 * 128 * 2,  # 147,456
    "qwen3-14b-awq.json": 2 * 40 * 8 * 128 * 2,  # 163,840
    "qwen3-32b-awq.json": 2 * 64 * 8 * 128 * 2,  # 262,144
    "qwen3-8b-fp8.json": 2 * 36 * 8 * 128 * 2,  # 147,456
    "qwen3-4b-fp8.json": 2 * 36 * 8 * 128 * 2,  # 147,456
    "llama-3.1-8b-instruct-awq-int4.json": 2 * 32 * 8 * 128 * 2,  # 131,072
    "llama-3.1-70b-instruct-awq-int4.json": 2 * 80 * 8 * 128 * 2,  # 327,680
    "gemma-3-270m.json": 2 * 18 * 1 * 256 * 2,  # 18,432 (the 15 sliding layers hold at most 512 tokens)
    "ernie-4.5-21b-a3b-thinking.json": 2 * 28 * 4 * 128 * 2,  # 57,344 (head_dim 2560 / 20)
    "qwen3-embedding-0.6b.json": 2 * 28 * 8 * 128 * 2,  # 114,688
    "llama-3.1-70b-instruct-fp8.json": 2 * 80 * 8 * 128 * 2,  # 327,680 (bf16 unless --kv-cache-dtype fp8)
}

# file -> the context its config allows (max_position_embeddings), which kvbudget must take
CONTEXT: dict[str, int] = {
    "deepseek-r1-distill-qwen-32b.json": 131_072,  # Qwen/Qwen2.5-32B-Instruct has 32,768: why it is not an alias
    "codellama-7b.json": 16_384,
    "phi-4-mini-instruct.json": 131_072,
    "glm-4.5.json": 131_072,
    "glm-4.6.json": 202_752,
    "mistral-7b-instruct-v0.2.json": 32_768,
    "magistral-small-2509.json": 131_072,
    "gemma-3-270m.json": 32_768,
    "kimi-k2-instruct-0905.json": 262_144,  # Kimi-K2-Instruct (131,072) with rope factor 64 instead of 32
    "ernie-4.5-21b-a3b-thinking.json": 131_072,
    "qwen3-embedding-0.6b.json": 32_768,  # Qwen/Qwen3-0.6B has 40,960: why it is not an alias
    "llama-3.1-70b-instruct-fp8.json": 131_072,
    "kimi-k2-thinking.json": 262_144,
}

_BYTES = {"bfloat16": 2, "float16": 2, "float32": 2}  # 16-bit KV: vLLM's "auto" runs a float32 checkpoint in 16 bits


def _raw(fname: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((MODEL_DIR / fname).read_text(encoding="utf-8"))
    return data


def _max_positions(config: dict[str, Any]) -> int:
    c, _ = text_config(config)
    return int(c["max_position_embeddings"])


def _hand_kv_per_token(config: dict[str, Any]) -> int:
    c, _ = text_config(config)
    layers = c["num_hidden_layers"]
    kv_heads = c.get("num_key_value_heads", c["num_attention_heads"])
    head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    dtype = c.get("torch_dtype") or c.get("dtype") or config.get("torch_dtype")
    return 2 * layers * kv_heads * head_dim * _BYTES[dtype]


@pytest.mark.parametrize("fname", sorted(ADDED))
def test_kv_bytes_per_token_is_the_hand_computation_from_the_config(fname: str) -> None:
    data = _raw(fname)
    hand = _hand_kv_per_token(data["config"])
    assert hand == ADDED[fname]
    report = kvbudget.kv(data["id"])
    assert report.bytes_per_token == hand
    assert report.kv_dtype in ("bf16", "fp16")


@pytest.mark.parametrize("fname", sorted(CONTEXT))
def test_max_context_is_the_configs_max_position_embeddings(fname: str) -> None:
    data = _raw(fname)
    assert _max_positions(data["config"]) == CONTEXT[fname]
    assert kvbudget.kv(data["id"]).max_context == CONTEXT[fname]


@pytest.mark.parametrize("fname", sorted(ADDED))
def test_every_name_of_an_added_entry_resolves_to_it(fname: str) -> None:
    data = _raw(fname)
    assert data["aliases"], fname
    for name in (data["id"], *data["aliases"]):
        for variant in (name, name.upper(), name.rsplit("/", 1)[-1]):
            assert kvbudget.load_model(variant).name == data["id"], variant


@pytest.mark.parametrize("fname", sorted(ADDED))
def test_added_entries_cite_their_config_and_say_what_was_verified(fname: str) -> None:
    data = _raw(fname)
    assert data["config_source"] == f"https://huggingface.co/{data['id']}/blob/main/config.json"
    assert data["official_params_source"].strip() and data["notes"].strip()
    assert "verified" in data["notes"].lower() or "UNVERIFIED" in data["notes"]


@pytest.mark.parametrize(("name", "entry"), [
    ("Qwen/Qwen3-VL-32B-Thinking", "Qwen/Qwen3-VL-32B-Instruct"),  # configs compared: identical
    ("deepseek-ai/DeepSeek-V3.1", "deepseek-ai/DeepSeek-V3"),  # architecture compared (nvidia's NVFP4 copy)
    ("qwen3-coder-480b-a35b", "Qwen/Qwen3-Coder-480B-A35B-Instruct"),
    ("Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8", "Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8"),
    ("Qwen/Qwen3-4B", "Qwen/Qwen3-4B"),  # the original release keeps its own (40960-position) entry
    ("Qwen/Qwen2.5-14B-Instruct", "Qwen/Qwen2.5-14B-Instruct"),  # the bf16 repo is not the AWQ one
    # aliases added to existing entries, each compared in that entry's notes
    ("deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "meta-llama/Llama-3.1-8B-Instruct"),
    ("DeepSeek-R1-Distill-Llama-8B", "meta-llama/Llama-3.1-8B-Instruct"),
    ("Qwen/Qwen2.5-Coder-1.5B-Instruct", "Qwen/Qwen2.5-1.5B-Instruct"),
    ("Qwen/Qwen2.5-Coder-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct"),
    ("codellama/CodeLlama-7b-Instruct-hf", "codellama/CodeLlama-7b-hf"),
    ("Qwen/Qwen3-8B", "Qwen/Qwen3-8B"),  # the bf16 repo is neither the AWQ nor the FP8 one
    ("zai-org/GLM-4.5-Air", "zai-org/GLM-4.5-Air"),  # the Air is not the full GLM-4.5
    ("mistralai/Mistral-7B-Instruct-v0.1", "mistralai/Mistral-7B-Instruct-v0.1"),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B"),
    # the third round (each compared in the target entry's notes; the card figures are checked below)
    ("Qwen/Qwen2.5-Coder-0.5B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct"),
    ("Qwen/Qwen2.5-Coder-0.5B", "Qwen/Qwen2.5-0.5B-Instruct"),
    ("qwen2.5-coder:0.5b", "Qwen/Qwen2.5-0.5B-Instruct"),
    ("Qwen/Qwen2.5-Coder-3B-Instruct", "Qwen/Qwen2.5-3B-Instruct"),
    ("Qwen/Qwen2.5-Coder-3B", "Qwen/Qwen2.5-3B-Instruct"),
    ("qwen2.5-coder:3b", "Qwen/Qwen2.5-3B-Instruct"),
    ("Qwen/Qwen3-235B-A22B-Thinking-2507", "Qwen/Qwen3-235B-A22B-Instruct-2507"),
    ("deepseek-ai/DeepSeek-R1-Distill-Llama-70B", "meta-llama/Llama-3.3-70B-Instruct"),
    ("moonshotai/Kimi-K2-Instruct-0905", "moonshotai/Kimi-K2-Instruct-0905"),
    ("moonshotai/Kimi-K2-Instruct", "moonshotai/Kimi-K2-Instruct"),  # the 128K original keeps its own entry
    # the fifth round: configs vendored in ai-dynamo/aiconfigurator, compared below key by key
    ("zai-org/GLM-4.7", "zai-org/GLM-4.6"),
    ("glm-4.7", "zai-org/GLM-4.6"),
    ("Qwen/Qwen3-Next-80B-A3B-Thinking", "Qwen/Qwen3-Next-80B-A3B-Instruct"),
    ("moonshotai/Kimi-K2-Thinking", "moonshotai/Kimi-K2-Thinking"),  # INT4: not the fp8 0905 entry
    ("meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-70B-Instruct"),  # the bf16 repo is not nvidia's FP8
])
def test_related_names_resolve_where_their_configs_say(name: str, entry: str) -> None:
    assert kvbudget.load_model(name).name == entry


def test_qwen3_coder_480b_bf16_is_no_longer_priced_as_fp8() -> None:
    bf16 = kvbudget.load_model("Qwen/Qwen3-Coder-480B-A35B-Instruct")
    fp8 = kvbudget.load_model("Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8")
    assert bf16.weight_format is not None and bf16.weight_format.name == "bf16"
    assert fp8.weight_format is not None and fp8.weight_format.name == "fp8" and fp8.weight_format.block == (128, 128)
    # same architecture: same count and the same KV per token
    assert bf16.params == fp8.params
    assert kvbudget.kv(bf16).bytes_per_token == kvbudget.kv(fp8).bytes_per_token == 253_952


def test_2507_and_original_qwen3_4b_differ_only_in_context() -> None:
    new, old = kvbudget.load_model("Qwen/Qwen3-4B-Instruct-2507"), kvbudget.load_model("Qwen/Qwen3-4B")
    assert new.params == old.params == 4_022_468_096
    assert kvbudget.kv(new).max_context == 262_144 and kvbudget.kv(old).max_context == 40_960


# --- quantized checkpoints: the format they load with ---------------------------------------------------

QUANTIZED = {
    "Qwen/Qwen2.5-7B-Instruct-AWQ": "weights awq 4-bit, group 128",
    "Qwen/Qwen2.5-14B-Instruct-AWQ": "weights awq 4-bit, group 128",
    "Qwen/Qwen2.5-32B-Instruct-AWQ": "weights awq 4-bit, group 128",
    "Qwen/Qwen2.5-72B-Instruct-AWQ": "weights awq 4-bit, group 128",
    "Qwen/Qwen3-32B-FP8": "weights fp8 (e4m3) with block 128x128 fp32 scales",
    "Qwen/Qwen3-30B-A3B-FP8": "weights fp8 (e4m3) with block 128x128 fp32 scales",
    "Qwen/Qwen3-8B-AWQ": "weights awq 4-bit, group 128",
    "Qwen/Qwen3-14B-AWQ": "weights awq 4-bit, group 128",
    "Qwen/Qwen3-32B-AWQ": "weights awq 4-bit, group 128",
    "Qwen/Qwen3-8B-FP8": "weights fp8 (e4m3) with block 128x128 fp32 scales",
    "Qwen/Qwen3-4B-FP8": "weights fp8 (e4m3) with block 128x128 fp32 scales",
    "hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4": "weights awq 4-bit, group 128",
    "hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4": "weights awq 4-bit, group 128",
    "nvidia/Llama-3.1-70B-Instruct-FP8": "weights fp8 (e4m3) with per-tensor fp32 scales",
    "moonshotai/Kimi-K2-Thinking": "weights gptq 4-bit, group 32, symmetric",
}


def _explain(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["explain", *args])
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.mark.parametrize("model", sorted(QUANTIZED))
def test_quantized_entries_load_with_their_checkpoint_format_on_vllm(model: str, capsys: pytest.CaptureFixture[str]) -> None:
    tp = ["--tensor-parallel-size", "8"] if "Kimi" in model else []  # 553 GiB of weights need eight H200s
    code, out = _explain(capsys, "--gpu", "H200", "--", "vllm", "serve", model, "--max-model-len", "4096", *tp)
    assert code == 0, out
    assert QUANTIZED[model] in out
    assert f"{model} (" in out.splitlines()[0]


@pytest.mark.parametrize("word", ["awq", "awq_marlin"])
def test_awq_checkpoint_takes_vllms_own_method_words(word: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _explain(capsys, "--gpu", "A100-80GB", "--", "vllm", "serve", "Qwen/Qwen2.5-14B-Instruct-AWQ",
                         "--quantization", word, "--max-model-len", "8192")
    assert code == 0, out
    assert "weights awq 4-bit, group 128" in out


def _weights(capsys: pytest.CaptureFixture[str], model: str, gpu: str = "H200", *flags: str) -> tuple[int, int]:
    """(weights, model loading) bytes of ``kvbudget explain --json`` for a vLLM launch of ``model``."""
    code = main(["explain", "--json", "--gpu", gpu, "--", "vllm", "serve", model, "--max-model-len", "4096", *flags])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    return doc["memory"]["weights_bytes"], doc["memory"]["model_loading_bytes"]


def test_qwen2_5_72b_awq_weights_match_the_repos_file_size(capsys: pytest.CaptureFixture[str]) -> None:
    """The repo's files total 41,607,438,677 bytes (a public model-source resolver's candidate list,
    github: crowdtensor kaggle_dense_model_source_resolver tests). kvbudget's 4-bit AWQ weights from
    the padded config (intermediate_size 29696) sit just under it; the unpadded 29568 would be 0.35%
    further off."""
    weights, _ = _weights(capsys, "Qwen/Qwen2.5-72B-Instruct-AWQ")
    files = 41_607_438_677
    assert weights == 41_595_518_976
    assert 0.999 * files < weights < files


def test_qwen2_5_14b_awq_model_loading_is_within_1_percent_of_the_published_log(
        capsys: pytest.CaptureFixture[str]) -> None:
    """vLLM 0.13.0, --quantization awq --dtype half (github.com/kumaxxp/duo-talk vllm.log):
    'Model loading took 9.3795 GiB memory'."""
    _, loading = _weights(capsys, "Qwen/Qwen2.5-14B-Instruct-AWQ", "A100-80GB", "--quantization", "awq", "--dtype", "half")
    assert loading == 9_988_417_536
    assert abs(loading / GiB - 9.3795) / 9.3795 < 0.01


def test_qwen2_5_7b_awq_weights_are_within_1_1_percent_of_the_published_sglang_log(
        capsys: pytest.CaptureFixture[str]) -> None:
    """SGLang, Qwen/Qwen2.5-7B-Instruct-AWQ (github.com/AgentiviumAI/workflow-aware-prompt-cache
    sglang.log): 'Load weight end. ... quant=awq, bits=4, ... mem usage=5.25 GB' (SGLang's GB are GiB)."""
    code = main(["explain", "--json", "--gpu", "RTX-4080-16GB", "--", "python", "-m", "sglang.launch_server",
                 "--model-path", "Qwen/Qwen2.5-7B-Instruct-AWQ", "--mem-fraction-static", "0.82", "--disable-cuda-graph"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    weights = doc["memory"]["weights_bytes"]
    assert weights == 5_579_136_000
    assert abs(weights / GiB - 5.25) / 5.25 < 0.011


def _fp8_block(rows: int, cols: int) -> int:
    """An fp8 e4m3 matrix with one fp32 scale per 128 x 128 block (vLLM fp8.py, weight_block_size)."""
    return rows * cols + ceil(rows / 128) * ceil(cols / 128) * 4


def test_qwen3_32b_fp8_weights_are_the_block_fp8_bytes_of_its_config(capsys: pytest.CaptureFixture[str]) -> None:
    """No published byte total was found for this repo, so the format's bytes are written out from the
    config: every linear weight fp8 with block scales; embeddings, lm_head and norms bf16."""
    c = _raw("qwen3-32b-fp8.json")["config"]
    h, n, heads, kv, d = c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    inter, vocab = c["intermediate_size"], c["vocab_size"]
    assert (h, n, heads, kv, d, inter, vocab) == (5120, 64, 64, 8, 128, 25600, 151936)
    attention = _fp8_block(heads * d, h) + 2 * _fp8_block(kv * d, h) + _fp8_block(h, heads * d)
    mlp = 2 * _fp8_block(inter, h) + _fp8_block(h, inter)
    norms = 2 * (2 * h + 2 * d)  # input / post-attention norms, q_norm / k_norm, bf16
    total = n * (attention + mlp + norms) + 2 * vocab * h * 2 + 2 * h  # untied embed + lm_head, final norm
    assert total == 34_326_243_328
    assert _weights(capsys, "Qwen/Qwen3-32B-FP8")[0] == total


def test_qwen3_30b_a3b_fp8_weights_are_the_block_fp8_bytes_of_its_config(capsys: pytest.CaptureFixture[str]) -> None:
    """As above, MoE: 128 experts of width 768 a layer in fp8; the router (mlp.gate, which the
    checkpoint's modules_to_not_convert lists) stays bf16."""
    c = _raw("qwen3-30b-a3b-fp8.json")["config"]
    h, n, heads, kv, d = c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    experts, width, vocab = c["num_experts"], c["moe_intermediate_size"], c["vocab_size"]
    assert (h, n, heads, kv, d, experts, width) == (2048, 48, 32, 4, 128, 128, 768)
    assert "model.layers.0.mlp.gate" in c["quantization_config"]["modules_to_not_convert"]
    attention = _fp8_block(heads * d, h) + 2 * _fp8_block(kv * d, h) + _fp8_block(h, heads * d)
    moe = experts * (2 * _fp8_block(width, h) + _fp8_block(h, width)) + experts * h * 2  # + bf16 router
    norms = 2 * (2 * h + 2 * d)
    total = n * (attention + moe + norms) + 2 * vocab * h * 2 + 2 * h
    assert total == 31_174_545_408
    assert _weights(capsys, "Qwen/Qwen3-30B-A3B-FP8")[0] == total


# --- the catalog listing ---------------------------------------------------------------------------------


def test_models_listing_renders_with_the_added_entries(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models"]) == 0
    text = capsys.readouterr().out
    for fname in ADDED:
        assert _raw(fname)["id"] in text, fname
    assert main(["models", "--json"]) == 0
    ids = {e["id"] for e in json.loads(capsys.readouterr().out)}
    assert {_raw(f)["id"] for f in ADDED} <= ids


# --- the second round: published totals and logs ---------------------------------------------------------


def test_r1_distill_qwen_32b_count_is_the_repos_published_safetensors_total() -> None:
    """Hugging Face API record of the repo (safetensors total, BF16 32,763,876,352), saved in
    github.com/daniel-p-green/alain-ai-learning-platform; equal, not just within 1%."""
    assert kvbudget.load_model("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B").params == 32_763_876_352


def test_gemma_3_270m_count_is_the_repos_published_safetensors_total_and_five_of_six_layers_slide() -> None:
    """Hugging Face API record of google/gemma-3-270m-it: safetensors total 268,098,176 (same source as above)."""
    m = kvbudget.load_model("google/gemma-3-270m-it")
    assert m.params == 268_098_176
    windows = [getattr(layer, "window", None) for layer in m.layers]
    assert windows == ([512] * 5 + [None]) * 3


def test_r1_distill_llama_8b_count_is_its_published_total() -> None:
    """The alias is right only if the shapes are: the repo's safetensors total is 8,030,261,248 (same source)."""
    assert kvbudget.load_model("deepseek-ai/DeepSeek-R1-Distill-Llama-8B").params == 8_030_261_248


def test_phi_4_mini_count_from_its_config_by_hand() -> None:
    """32 layers of fused qkv (3072 -> 3072 + 2 x 1024), o_proj, gate/up/down (8192) and two norms, one tied
    200,064 x 3072 embedding, a final norm: 3,836,021,760, the model card's '3.8B'."""
    c = _raw("phi-4-mini-instruct.json")["config"]
    h, n, heads, kv, inter, vocab = (c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"],
                                     c["num_key_value_heads"], c["intermediate_size"], c["vocab_size"])
    assert c["tie_word_embeddings"] is True
    d = h // heads
    layer = h * (heads + 2 * kv) * d + heads * d * h + 3 * h * inter + 2 * h
    total = n * layer + vocab * h + h
    assert total == 3_836_021_760
    assert kvbudget.load_model("microsoft/Phi-4-mini-instruct").params == total


def test_magistral_counts_its_text_model_and_says_the_vision_tower_is_left_out() -> None:
    """The published total (24,011,361,280) includes the Pixtral encoder kvbudget does not count; the
    text model is Mistral-Small-24B's (same shapes in both configs), so its count is that entry's."""
    m = kvbudget.load_model("mistralai/Magistral-Small-2509")
    assert m.params == kvbudget.load_model("mistralai/Mistral-Small-24B-Instruct-2501").params == 23_572_403_200
    assert any("pixtral" in note for note in m.notes)
    entry = catalog.find("mistralai/Magistral-Small-2509")
    assert entry is not None and entry.official_params == 24_011_361_280
    assert entry.official_params - m.params == 438_958_080  # the vision tower and projector, about 1.8%


def test_glm_4_6_differs_from_glm_4_5_only_in_context() -> None:
    a = _raw("glm-4.5.json")["config"]
    b = _raw("glm-4.6.json")["config"]
    assert {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)} == {"max_position_embeddings"}
    assert kvbudget.load_model("zai-org/GLM-4.5").params == kvbudget.load_model("zai-org/GLM-4.6").params


def test_qwen3_8b_awq_model_loading_is_within_1_percent_of_the_published_log(capsys: pytest.CaptureFixture[str]) -> None:
    """vLLM 0.29.0, --quantization awq_marlin --dtype bfloat16 (github.com/yuanjuju/vllm-lab,
    phase3/results/phase5_v029_awq_20261009.log, a 48 GB RTX 4090): 'Model loading took 5.71 GiB memory'. The
    weights do not depend on the card's memory, so the 24 GB catalog RTX 4090 (same Ada chip) stands in."""
    code = main(["explain", "--json", "--gpu", "RTX-4090-24GB", "--vllm-version", "0.29.0", "--",
                 "vllm", "serve", "Qwen/Qwen3-8B-AWQ", "--quantization", "awq_marlin", "--dtype", "bfloat16",
                 "--max-model-len", "4096", "--enforce-eager"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    loading = doc["memory"]["model_loading_bytes"]
    assert abs(loading / GiB - 5.71) / 5.71 < 0.01


def _awq(rows: int, cols: int) -> int:
    """A 4-bit AutoAWQ GEMM matrix, group 128 (vLLM awq.py): packed int4 qweight, int4 qzeros and fp16
    scales, one zero and one scale per group of 128 input columns per output row."""
    groups = ceil(cols / 128)
    return rows * cols // 2 + groups * rows // 2 + groups * rows * 2


def test_llama_3_1_8b_awq_int4_weights_are_the_awq_bytes_of_its_config(capsys: pytest.CaptureFixture[str]) -> None:
    """No byte total of the repo was found, so the format's bytes are written out from the config: every
    linear weight of the 32 layers 4-bit AWQ; embeddings, lm_head and norms fp16."""
    c = _raw("llama-3.1-8b-instruct-awq-int4.json")["config"]
    h, n, heads, kv, inter, vocab = (c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"],
                                     c["num_key_value_heads"], c["intermediate_size"], c["vocab_size"])
    assert (h, n, heads, kv, inter, vocab) == (4096, 32, 32, 8, 14336, 128256)
    d = h // heads
    attention = _awq(heads * d, h) + 2 * _awq(kv * d, h) + _awq(h, heads * d)
    mlp = 2 * _awq(inter, h) + _awq(h, inter)
    total = n * (attention + mlp + 2 * h * 2) + 2 * vocab * h * 2 + h * 2
    assert total == 5_727_854_592
    assert _weights(capsys, "hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4")[0] == total


def test_qwen3_8b_fp8_weights_are_the_block_fp8_bytes_of_its_config(capsys: pytest.CaptureFixture[str]) -> None:
    """As for Qwen3-32B-FP8 above: linear weights fp8 with block scales; embeddings, lm_head, norms bf16."""
    c = _raw("qwen3-8b-fp8.json")["config"]
    h, n, heads, kv, d = c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    inter, vocab = c["intermediate_size"], c["vocab_size"]
    assert (h, n, heads, kv, d, inter, vocab) == (4096, 36, 32, 8, 128, 12288, 151936)
    attention = _fp8_block(heads * d, h) + 2 * _fp8_block(kv * d, h) + _fp8_block(h, heads * d)
    mlp = 2 * _fp8_block(inter, h) + _fp8_block(h, inter)
    norms = 2 * (2 * h + 2 * d)
    total = n * (attention + mlp + norms) + 2 * vocab * h * 2 + 2 * h
    assert total == 9_437_399_040
    assert _weights(capsys, "Qwen/Qwen3-8B-FP8")[0] == total


# --- the third round: the 256K Kimi-K2 and names checked against their model cards ----------------------


def test_kimi_k2_0905_kv_is_one_mla_latent_plus_rope_key_per_layer() -> None:
    """MLA caches one compressed latent (kv_lora_rank) and one rope key (qk_rope_head_dim) per layer and
    token, whatever the head count: 61 x (512 + 64) x 2 bytes = 70,272 bytes in bf16."""
    data = _raw("kimi-k2-instruct-0905.json")
    c = data["config"]
    assert (c["num_hidden_layers"], c["kv_lora_rank"], c["qk_rope_head_dim"], c["torch_dtype"]) == (61, 512, 64, "bfloat16")
    hand = c["num_hidden_layers"] * (c["kv_lora_rank"] + c["qk_rope_head_dim"]) * 2
    assert hand == 70_272
    report = kvbudget.kv(data["id"])
    assert report.bytes_per_token == hand and report.kv_dtype == "bf16"
    for name in (data["id"], *data["aliases"]):
        assert kvbudget.load_model(name).name == data["id"], name
    assert data["config_source"] == f"https://huggingface.co/{data['id']}/blob/main/config.json"
    assert "verified" in data["notes"].lower() and "UNVERIFIED" in data["notes"]


def test_kimi_k2_0905_differs_from_k2_only_in_its_context() -> None:
    """The inspection report of the 0905 repo prints rope_scaling factor 64 (Kimi-K2-Instruct: 32) over the
    same original 4096 positions: 262,144 positions, twice the original's, and nothing else moves."""
    a, b = _raw("kimi-k2-instruct.json")["config"], _raw("kimi-k2-instruct-0905.json")["config"]
    assert {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)} == {"max_position_embeddings", "rope_scaling"}
    ra, rb = a["rope_scaling"], b["rope_scaling"]
    assert {k for k in ra.keys() | rb.keys() if ra.get(k) != rb.get(k)} == {"factor"}
    assert (ra["factor"], rb["factor"]) == (32.0, 64.0)
    assert rb["original_max_position_embeddings"] * rb["factor"] == b["max_position_embeddings"] == 262_144
    old, new = kvbudget.load_model("moonshotai/Kimi-K2-Instruct"), kvbudget.load_model("moonshotai/Kimi-K2-Instruct-0905")
    assert old.params == new.params == 1_026_408_232_448
    assert (kvbudget.kv(old).max_context, kvbudget.kv(new).max_context) == (131_072, 262_144)


# (name, model card: total and non-embedding parameters in billions as the card rounds them, layers, Q heads,
#  KV heads, context). Qwen2.5-Coder cards as copied in github.com/ZHUI/paddlenlp_model_readme (Qwen/<name>/index.md);
# the Qwen3 2507 card in github.com/akash-network/awesome-akash (Qwen3-235B-A22B-Thinking-2507/README.md).
CARDS = [
    ("Qwen/Qwen2.5-Coder-0.5B-Instruct", 0.49, 0.36, 24, 14, 2, 32_768),
    ("Qwen/Qwen2.5-Coder-0.5B", 0.49, 0.36, 24, 14, 2, 32_768),
    ("Qwen/Qwen2.5-Coder-3B-Instruct", 3.09, 2.77, 36, 16, 2, 32_768),
    ("Qwen/Qwen2.5-Coder-3B", 3.09, 2.77, 36, 16, 2, 32_768),
]


@pytest.mark.parametrize(("name", "total", "non_embedding", "layers", "q_heads", "kv_heads", "context"), CARDS)
def test_coder_aliases_have_the_figures_their_model_cards_print(
        name: str, total: float, non_embedding: float, layers: int, q_heads: int, kv_heads: int, context: int) -> None:
    """An alias is right only if the shapes are: the count kvbudget derives from the aliased entry's config,
    and that count less the (tied) embedding, round to the card's figures; layers, heads and context match."""
    m = kvbudget.load_model(name)
    assert round(m.params / 1e9, 2) == total
    assert round((m.params - m.params_by_role()["embeddings"]) / 1e9, 2) == non_embedding
    assert m.params_by_role().get("lm_head", 0) == 0  # "tied word embeddings" on the card
    assert m.num_layers == layers
    assert {layer.num_kv_heads for layer in m.layers} == {kv_heads}
    c, _ = text_config(catalog.find(name).config)  # type: ignore[union-attr]
    assert c["num_attention_heads"] == q_heads
    assert kvbudget.kv(name).max_context == context


def test_qwen3_235b_thinking_2507_has_the_figures_its_model_card_prints() -> None:
    """Card: 235B total, 234B non-embedding, 94 layers, 64 Q / 4 KV heads, 128 experts (8 active), 262,144
    tokens natively; the KV is then the Instruct-2507's: 2 x 94 x 4 x 128 x 2 bytes = 192,512 bytes."""
    name = "Qwen/Qwen3-235B-A22B-Thinking-2507"
    m = kvbudget.load_model(name)
    roles = m.params_by_role()
    assert round(m.params / 1e9) == 235
    assert round((m.params - roles["embeddings"] - roles["lm_head"]) / 1e9) == 234
    assert m.num_layers == 94 and {layer.num_kv_heads for layer in m.layers} == {4}
    c, _ = text_config(catalog.find(name).config)  # type: ignore[union-attr]
    assert (c["num_attention_heads"], c["num_experts"], c["num_experts_per_tok"]) == (64, 128, 8)
    report = kvbudget.kv(name)
    assert report.max_context == 262_144
    assert report.bytes_per_token == 2 * 94 * 4 * 128 * 2 == 192_512


def test_r1_distill_llama_70b_count_is_the_published_gguf_parameter_count() -> None:
    """The GGUF metadata of DeepSeek-R1-Distill-Llama-70B's Q4_K_M conversion, as a public test fixture
    records it: 70,553,706,496 parameters, 80 layers, 131,072 training context; the alias to
    Llama-3.3-70B-Instruct (the distill's base model per the DeepSeek-R1 card) gives exactly that."""
    m = kvbudget.load_model("deepseek-ai/DeepSeek-R1-Distill-Llama-70B")
    assert m.params == 70_553_706_496
    assert m.num_layers == 80
    assert kvbudget.kv(m).max_context == 131_072
    assert kvbudget.kv(m).bytes_per_token == 2 * 80 * 8 * 128 * 2 == 327_680


# --- model types: OLMo 2 read by a quirk line, Gemma 3n and Llama 3.2 Vision refused ----------------------

# OLMo-2-1124 7B / 13B: the config fields that size the model (Olmo2Config, transformers 5.24.0), and the exact
# totals the Hugging Face API publishes (safetensors.total, as a public dataset-building script records them for
# allenai/OLMo-2-1124-7B at revision 7df9a825 and allenai/OLMo-2-1124-13B at revision 3fefddc1).
OLMO2 = [
    ({"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
      "intermediate_size": 11008, "vocab_size": 100352}, 7_298_617_344),
    ({"hidden_size": 5120, "num_hidden_layers": 40, "num_attention_heads": 40, "num_key_value_heads": 40,
      "intermediate_size": 13824, "vocab_size": 100352}, 13_716_198_400),
]


@pytest.mark.parametrize(("dims", "published"), OLMO2, ids=["7B", "13B"])
def test_olmo2_counts_its_whole_projection_qk_norms_and_matches_the_published_total(
        dims: dict[str, int], published: int) -> None:
    """modeling_olmo2.py: q_norm = RMSNorm(heads x head_dim), k_norm = RMSNorm(kv_heads x head_dim), no biases,
    two norms a layer (after attention and MLP), untied lm_head. Written out by hand, the count is the published one."""
    config = {"model_type": "olmo2", "architectures": ["Olmo2ForCausalLM"], "torch_dtype": "float32",
              "max_position_embeddings": 4096, "tie_word_embeddings": False, "attention_bias": False, **dims}
    h, n, heads, kv = dims["hidden_size"], dims["num_hidden_layers"], dims["num_attention_heads"], dims["num_key_value_heads"]
    d = h // heads
    attention = heads * d * h + 2 * kv * d * h + h * heads * d
    mlp = 3 * h * dims["intermediate_size"]
    norms = 2 * h + heads * d + kv * d  # post-attention and post-feedforward norms, q_norm, k_norm
    total = 2 * dims["vocab_size"] * h + n * (attention + mlp + norms) + h
    assert total == published
    spec = spec_from_config(config)
    assert spec.params == total
    assert not any("not in kvbudget's table" in note for note in spec.notes)
    assert kvbudget.kv(spec).bytes_per_token == 2 * n * kv * d * 2  # 16-bit KV of every full-attention layer


@pytest.mark.parametrize(("model_type", "key", "value"), [
    ("gemma3n_text", "num_kv_shared_layers", 15),  # the last 15 layers reuse earlier layers' KV
    ("gemma3n_text", "altup_num_inputs", 4),
    ("mllama_text_model", "cross_attention_layers", [3, 8, 13, 18, 23, 28, 33, 38]),
])
def test_unread_types_whose_keys_a_dense_llama_reading_gets_wrong_are_refused(model_type: str, key: str, value: object) -> None:
    config = {"model_type": model_type, "hidden_size": 2048, "num_hidden_layers": 40, "num_attention_heads": 8,
              "num_key_value_heads": 2, "intermediate_size": 8192, "vocab_size": 262144, key: value}
    with pytest.raises(ConfigError, match=rf"model_type '{model_type}' is not one kvbudget reads.*{key}.*dense Llama would be wrong"):
        spec_from_config(config)


# --- the fourth round: ERNIE 4.5 MoE, Seed-OSS, SmolLM3 and EXAONE 4.0 read by quirk lines -------------------------


def test_ernie_4_5_21b_a3b_count_is_the_published_safetensors_total_and_layer_0_is_dense() -> None:
    """Hugging Face API record of baidu/ERNIE-4.5-21B-A3B-Thinking (saved in github.com/daniel-p-green/
    alain-ai-learning-platform): BF16 21,821,012,480 + F32 4,425,408 = 21,825,437,888. Written out from the config
    (vLLM 0.33.0 models/ernie45_moe.py): tied embedding; 28 attention blocks; layer 0 a dense MLP; layers 1-27 a
    router, its e_score_correction_bias, 64 experts and one shared MLP of 2 x 1,536; two norms a layer and a final one.
    The F32 part is the 27 routers and their biases: 27 x 64 x (2,560 + 1) = 4,425,408."""
    c = _raw("ernie-4.5-21b-a3b-thinking.json")["config"]
    h, n, heads, kv, vocab = (c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"],
                              c["num_key_value_heads"], c["vocab_size"])
    experts, width, shared, dense = (c["moe_num_experts"], c["moe_intermediate_size"], c["moe_num_shared_experts"],
                                     c["intermediate_size"])
    assert (h, n, heads, kv, experts, width, shared, dense) == (2560, 28, 20, 4, 64, 1536, 2, 12288)
    assert (c["moe_layer_start_index"], c["moe_layer_interval"], c["moe_k"], c["use_bias"]) == (1, 1, 6, False)
    d = h // heads
    attention = 2 * heads * d * h + 2 * kv * d * h
    moe_layers = n - c["moe_layer_start_index"]
    router = experts * (h + 1)
    moe = router + experts * 3 * h * width + 3 * h * shared * width
    total = vocab * h + n * (attention + 2 * h) + 3 * h * dense + moe_layers * moe + h
    assert moe_layers * router == 4_425_408
    assert total == 21_825_437_888
    m = kvbudget.load_model("baidu/ERNIE-4.5-21B-A3B-Thinking")
    assert m.params == total
    assert m.num_experts == 64 and m.experts_per_token == 6
    roles = m.params_by_role()
    assert roles["mlp"] == 3 * h * dense  # one dense MLP: layer 0 only
    assert roles["shared_experts"] == moe_layers * 3 * h * shared * width
    assert "lm_head" not in roles


def test_ernie_moe_without_experts_is_refused_with_the_fix() -> None:
    config = {k: v for k, v in _raw("ernie-4.5-21b-a3b-thinking.json")["config"].items() if k != "moe_num_experts"}
    with pytest.raises(ConfigError, match=r"without 'moe_num_experts'.*ernie4_5"):
        spec_from_config(config)


# Seed-OSS-36B: the fields as a public MLX Swift test transcribes ByteDance-Seed/Seed-OSS-36B-Instruct's config.json
# (found by exact-string search on GitHub); attention_bias / attention_out_bias / mlp_bias are SeedOssConfig's
# defaults (transformers 5.24.0: true / false / false). Model card: 36B parameters, 64 layers, 80 Q / 8 KV heads,
# head_dim 128, 512K context.
SEED_OSS_36B = {"architectures": ["SeedOssForCausalLM"], "model_type": "seed_oss", "hidden_size": 5120,
                "num_hidden_layers": 64, "intermediate_size": 27648, "num_attention_heads": 80, "num_key_value_heads": 8,
                "head_dim": 128, "rms_norm_eps": 1e-6, "vocab_size": 155136, "rope_theta": 10000000.0,
                "rope_scaling": {"rope_type": "default"}, "max_position_embeddings": 524288,
                "tie_word_embeddings": False, "torch_dtype": "bfloat16"}

# EXAONE-4.0-32B: TensorRT-LLM's unit test of its EXAONE 4.0 model copies the checkpoint's config.json with two
# values cut for the test, as its comments say (num_hidden_layers 4 "instead of 64", sliding_window 4 "instead of
# 4096"); the real ones are restored here. Model card: 32.0B parameters (30.95B without embeddings), 64 layers,
# 40 Q / 8 KV heads, hybrid attention 3 local : 1 global, 131,072 tokens.
EXAONE_4_0_32B = {"architectures": ["Exaone4ForCausalLM"], "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120,
                  "intermediate_size": 27392, "max_position_embeddings": 131072, "model_type": "exaone4",
                  "num_attention_heads": 40, "num_hidden_layers": 64, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
                  "rope_scaling": {"factor": 16.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
                  "rope_theta": 1000000, "sliding_window": 4096, "sliding_window_pattern": 4,
                  "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 102400}

# SmolLM3-3B: hidden 2048, 36 layers, 16 Q / 4 KV heads, intermediate 11008, vocabulary 128256 and tied embeddings as
# public code transcribes HuggingFaceTB/SmolLM3-3B's config.json (a NoPE-layer reader's fixture and a LoRA adapter's
# defaults, found by exact-string search); rope_theta 5e6 and no_rope_layer_interval 4 likewise. The 65,536 positions
# are the card's 64K context, not checked against the file. Model card: 3B parameters (3.08B on the Hub).
SMOLLM3_3B = {"architectures": ["SmolLM3ForCausalLM"], "model_type": "smollm3", "num_hidden_layers": 36,
              "hidden_size": 2048, "intermediate_size": 11008, "num_attention_heads": 16, "num_key_value_heads": 4,
              "vocab_size": 128256, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
              "max_position_embeddings": 65536, "rope_theta": 5000000.0, "no_rope_layer_interval": 4,
              "attention_bias": False, "mlp_bias": False}


def _hand_count(c: dict[str, Any], *, qkv_bias: bool = False, o_bias: bool = False, qk_norm: bool = False) -> int:
    """A Llama-shaped decoder written out: q/k/v/o, SwiGLU, two norms a layer, final norm, embeddings (twice if untied)."""
    h, n, heads, kv, d, inter, vocab = (c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"],
                                        c["num_key_value_heads"], c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"],
                                        c["intermediate_size"], c["vocab_size"])
    layer = 2 * heads * d * h + 2 * kv * d * h + 3 * h * inter + 2 * h
    layer += (heads * d + 2 * kv * d) * qkv_bias + h * o_bias + 2 * d * qk_norm
    return vocab * h * (1 if c["tie_word_embeddings"] else 2) + n * layer + h


@pytest.mark.parametrize(("config", "flags", "exact", "card", "kv_per_token", "windows"), [
    (SEED_OSS_36B, {"qkv_bias": True}, 36_151_104_512, 36e9, 2 * 64 * 8 * 128 * 2, [None] * 64),
    (EXAONE_4_0_32B, {"qk_norm": True}, 32_003_216_384, 32.0e9, 2 * 64 * 8 * 128 * 2, ([4096] * 3 + [None]) * 16),
    (SMOLLM3_3B, {}, 3_075_098_624, 3.08e9, 2 * 36 * 4 * 128 * 2, [None] * 36),
], ids=["seed_oss", "exaone4", "smollm3"])
def test_new_types_count_what_their_model_files_build_and_cache_per_layer(
        config: dict[str, Any], flags: dict[str, bool], exact: int, card: float, kv_per_token: int,
        windows: list[int | None]) -> None:
    """The count written out by hand is kvbudget's (and, checked while writing this, transformers 5.24.0's own model
    built from the same config on the meta device); it is within 0.5% of the card's rounded figure. KV per token is
    every layer's K and V (the sliding ones hold at most their window)."""
    spec = spec_from_config(config)
    assert _hand_count(config, **flags) == exact == spec.params
    assert abs(spec.params - card) / card < 0.005
    assert not any("not in kvbudget's table" in note for note in spec.notes)
    assert kvbudget.kv(spec).bytes_per_token == kv_per_token
    assert [getattr(layer, "window", None) for layer in spec.layers] == windows


def test_exaone4_without_its_window_keys_takes_the_config_class_defaults_and_its_pattern_letters() -> None:
    """Exaone4Config defaults sliding_window 4096 and sliding_window_pattern 4; "LLLG" is the same pattern written in
    letters; a null window makes every layer global."""
    base = {k: v for k, v in EXAONE_4_0_32B.items() if k not in ("sliding_window", "sliding_window_pattern")}
    want = ([4096] * 3 + [None]) * 16
    omitted = spec_from_config(base)
    assert [getattr(layer, "window", None) for layer in omitted.layers] == want
    assert any("Exaone4Config" in note for note in omitted.notes)
    lettered = spec_from_config({**EXAONE_4_0_32B, "sliding_window_pattern": "LLLG"})
    assert [getattr(layer, "window", None) for layer in lettered.layers] == want
    unwindowed = spec_from_config({**EXAONE_4_0_32B, "sliding_window": None})
    assert [getattr(layer, "window", None) for layer in unwindowed.layers] == [None] * 64


def test_seed_oss_attention_out_bias_adds_the_o_proj_bias() -> None:
    with_bias = spec_from_config({**SEED_OSS_36B, "attention_out_bias": True})
    assert with_bias.params - spec_from_config(SEED_OSS_36B).params == 64 * 5120


def test_smollm3_use_sliding_window_slides_its_nope_layers() -> None:
    """SmolLM3Config: with use_sliding_window and a window, the NoPE layers (every 4th) slide; the others stay full."""
    spec = spec_from_config({**SMOLLM3_3B, "use_sliding_window": True, "sliding_window": 2048})
    assert [getattr(layer, "window", None) for layer in spec.layers] == ([None] * 3 + [2048]) * 9


@pytest.mark.parametrize("config", [SEED_OSS_36B, EXAONE_4_0_32B, SMOLLM3_3B], ids=["seed_oss", "exaone4", "smollm3"])
def test_new_types_explain_and_plan_on_vllm(config: dict[str, Any], tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    code = main(["explain", "--json", "--gpu", "H200", "--", "vllm", "serve", str(tmp_path), "--max-model-len", "32768"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    weights = doc["memory"]["weights_bytes"]
    assert spec_from_config(config).params * 2 <= weights < spec_from_config(config).params * 2 * 1.01
    assert main(["plan", str(tmp_path), "--concurrency", "4", "--context", "32768", "--top", "1", "--json"]) == 0
    best = json.loads(capsys.readouterr().out)["plans"][0]
    assert best["serves"] and best["max_concurrency"] >= 4
    assert best["launch"]["command"].startswith(f"vllm serve {tmp_path} --max-model-len 32768")


def test_qwen3_embedding_0_6b_is_qwen3_0_6b_with_a_smaller_vocabulary() -> None:
    """Same decoder as Qwen3-0.6B (hidden 1024, 28 layers, 16 Q / 8 KV heads of 128, intermediate 3072, tied); the
    vocabulary is 151,669 rows instead of 151,936, so the count is 267 x 1,024 lower: 595,776,512, the card's '0.6B'."""
    emb, base = kvbudget.load_model("Qwen/Qwen3-Embedding-0.6B"), kvbudget.load_model("Qwen/Qwen3-0.6B")
    assert base.params - emb.params == (151_936 - 151_669) * 1024
    assert emb.params == 595_776_512 and round(emb.params / 1e9, 1) == 0.6
    assert kvbudget.kv(emb).bytes_per_token == kvbudget.kv(base).bytes_per_token == 114_688


# --- the fifth round: configs vendored in ai-dynamo/aiconfigurator ------------------------------------------------
# Each dict below is the copy's keys as that repository holds them (the blob URL is in the entry's notes); an alias is
# right only if every key equals the entry's, and the test fails if either side changes.

GLM_4_7_FP8_COPY = {  # zai-org--GLM-4.7-FP8_config.json at commit 19d098ad (19 keys, no quantization_config)
    "architectures": ["Glm4MoeForCausalLM"], "first_k_dense_replace": 3, "head_dim": 128, "hidden_size": 5120,
    "intermediate_size": 12288, "max_position_embeddings": 202752, "model_type": "glm4_moe", "moe_intermediate_size": 1536,
    "n_routed_experts": 160, "n_shared_experts": 1, "num_attention_heads": 96, "num_experts_per_tok": 8,
    "num_hidden_layers": 92, "num_key_value_heads": 8, "routed_scaling_factor": 2.5, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 151552}

QWEN3_NEXT_THINKING_COPY = {  # Qwen--Qwen3-Next-80B-A3B-Thinking_config.json at commit 1b7cfb10 (all 39 keys)
    "architectures": ["Qwen3NextForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643, "decoder_sparse_step": 1,
    "eos_token_id": 151645, "full_attention_interval": 4, "head_dim": 256, "hidden_act": "silu", "hidden_size": 2048,
    "initializer_range": 0.02, "intermediate_size": 5120, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
    "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_value_head_dim": 128,
    "max_position_embeddings": 262144, "mlp_only_layers": [], "model_type": "qwen3_next", "moe_intermediate_size": 512,
    "norm_topk_prob": True, "num_attention_heads": 16, "num_experts": 512, "num_experts_per_tok": 10,
    "num_hidden_layers": 48, "num_key_value_heads": 2, "output_router_logits": False, "partial_rotary_factor": 0.25,
    "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 10000000, "router_aux_loss_coef": 0.001,
    "shared_expert_intermediate_size": 512, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.57.0.dev0", "use_cache": True, "use_sliding_window": False, "vocab_size": 151936}

QWEN3_VL_32B_THINKING_TEXT = {  # Qwen--Qwen3-VL-32B-Thinking_config.json at commit 0b077da5: text_config
    "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 151643, "dtype": "bfloat16", "eos_token_id": 151645,
    "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120, "initializer_range": 0.02, "intermediate_size": 25600,
    "max_position_embeddings": 262144, "model_type": "qwen3_vl_text", "num_attention_heads": 64, "num_hidden_layers": 64,
    "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
    "rope_scaling": {"mrope_interleaved": True, "mrope_section": [24, 20, 20], "rope_type": "default"},
    "rope_theta": 5000000, "use_cache": True, "vocab_size": 151936}
QWEN3_VL_32B_THINKING_VISION = {  # ... and its vision_config
    "deepstack_visual_indexes": [8, 16, 24], "depth": 27, "hidden_act": "gelu_pytorch_tanh", "hidden_size": 1152,
    "in_channels": 3, "initializer_range": 0.02, "intermediate_size": 4304, "model_type": "qwen3_vl",
    "num_heads": 16, "num_position_embeddings": 2304, "out_hidden_size": 5120, "patch_size": 16,
    "spatial_merge_size": 2, "temporal_patch_size": 2}

# nvidia--Llama-3.1-70B-Instruct-FP8_hf_quant_config.json at commit 0b077da5 (ModelOpt 0.23.0)
LLAMA_70B_FP8_HF_QUANT = {"producer": {"name": "modelopt", "version": "0.23.0"},
                          "quantization": {"exclude_modules": ["lm_head"], "kv_cache_quant_algo": "FP8", "quant_algo": "FP8"}}


def _config_of(name: str) -> dict[str, Any]:
    entry = catalog.find(name)
    assert entry is not None, name
    return entry.config


def test_glm_4_7_is_glm_4_6_in_every_key_its_vendored_config_carries() -> None:
    c = _config_of("zai-org/GLM-4.7")
    assert {k: c.get(k) for k in GLM_4_7_FP8_COPY} == GLM_4_7_FP8_COPY
    assert "quantization_config" not in GLM_4_7_FP8_COPY  # why GLM-4.7-FP8 is no entry: its format is not in the copy
    assert catalog.find("zai-org/GLM-4.7-FP8") is None
    # the name is still planned, as the alias's shapes with the FP8 weights its name says (derived, with a warning)
    fp8 = kvbudget.load_model("zai-org/GLM-4.7-FP8")
    assert fp8.weight_format is not None and fp8.weight_format.name == "fp8"
    assert fp8.params == kvbudget.load_model("zai-org/GLM-4.7").params


def test_glm_4_7_counts_the_published_355b_and_caches_2_x_92_x_8_x_128_x_2_bytes() -> None:
    """The GLM-4.5 / 4.6 cards' '355 billion total parameters' (the 4.6 entry's source; GLM-4.7 keeps the shapes the
    copy above carries); the count leaves out the MTP layer vLLM loads only for speculative decoding."""
    m = kvbudget.load_model("zai-org/GLM-4.7")
    assert abs(m.params - 355e9) / 355e9 < 0.01
    assert m.num_layers == 92 and m.num_experts == 160 and m.experts_per_token == 8
    report = kvbudget.kv("zai-org/GLM-4.7")
    assert report.bytes_per_token == 2 * 92 * 8 * 128 * 2 == 376_832
    assert report.max_context == 202_752


def test_qwen3_next_thinking_equals_the_instruct_entry_key_for_key() -> None:
    assert _config_of("Qwen/Qwen3-Next-80B-A3B-Thinking") == QWEN3_NEXT_THINKING_COPY
    report = kvbudget.kv("Qwen/Qwen3-Next-80B-A3B-Thinking")
    # 12 of 48 layers (full_attention_interval 4) hold K and V: 2 x 12 x 2 KV heads x 256 x 2 bytes
    assert report.bytes_per_token == 2 * 12 * 2 * 256 * 2 == 24_576
    # the card's '80B in total' (the entry's source); the count leaves out the MTP block the checkpoint stores
    assert round(kvbudget.load_model("Qwen/Qwen3-Next-80B-A3B-Thinking").params / 1e9) == 80


def test_qwen3_vl_32b_thinking_equals_the_instruct_entry_key_for_key() -> None:
    c = _config_of("Qwen/Qwen3-VL-32B-Thinking")
    assert c["text_config"] == QWEN3_VL_32B_THINKING_TEXT
    assert c["vision_config"] == QWEN3_VL_32B_THINKING_VISION
    assert kvbudget.kv("Qwen/Qwen3-VL-32B-Thinking").bytes_per_token == 2 * 64 * 8 * 128 * 2 == 262_144


def test_qwen3_vl_235b_thinking_stays_unresolved_while_its_only_copy_differs_in_the_vision_patch() -> None:
    """The vendored Thinking copy (commit 72a46882) gives vision patch_size 14 where the Instruct entry has 16, so the two
    could not be shown equal and the name is not an alias."""
    assert _config_of("Qwen/Qwen3-VL-235B-A22B-Instruct")["vision_config"]["patch_size"] == 16
    with pytest.raises(catalog.UnknownModel):
        kvbudget.load_model("Qwen/Qwen3-VL-235B-A22B-Thinking")


def test_nvidia_llama_70b_fp8_is_meta_70b_plus_its_modelopt_quant_file() -> None:
    fp8, bf16 = _config_of("nvidia/Llama-3.1-70B-Instruct-FP8"), _config_of("meta-llama/Llama-3.1-70B-Instruct")
    differ = {k for k in fp8.keys() | bf16.keys() if fp8.get(k) != bf16.get(k)}
    assert differ == {"_name_or_path", "transformers_version", "quantization_config"}
    assert fp8["quantization_config"] == LLAMA_70B_FP8_HF_QUANT
    m = kvbudget.load_model("nvidia/Llama-3.1-70B-Instruct-FP8")
    assert m.params == kvbudget.load_model("meta-llama/Llama-3.1-70B-Instruct").params == 70_553_706_496
    fmt = m.weight_format
    assert fmt is not None and (fmt.name, fmt.fp8_scales, fmt.skip_roles, fmt.kv_cache) == (
        "fp8", "per_tensor", frozenset({"lm_head"}), "fp8")


def test_nvidia_llama_70b_fp8_weights_are_the_per_tensor_fp8_bytes_of_its_config(capsys: pytest.CaptureFixture[str]) -> None:
    """ModelOpt FP8 (vLLM quantization/modelopt.py): every q/k/v/o/gate/up/down weight e4m3 with one fp32 scale; the
    embeddings, the excluded lm_head and the norms bf16. Written out from the config; per GPU at TP 8 as vLLM shards it
    (column/row splits of every matrix, the vocabulary split across ranks, norms replicated)."""
    c = _config_of("nvidia/Llama-3.1-70B-Instruct-FP8")
    h, n, heads, kv, inter, vocab = (c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"],
                                     c["num_key_value_heads"], c["intermediate_size"], c["vocab_size"])
    assert (h, n, heads, kv, inter, vocab) == (8192, 80, 64, 8, 28672, 128256)
    d = h // heads
    linear = 2 * heads * d * h + 2 * kv * d * h + 3 * h * inter
    total = n * (linear + 7 * 4 + 2 * h * 2) + 2 * vocab * h * 2 + h * 2
    assert total == 72_656_373_952
    per_rank = n * (linear // 8 + 7 * 4 + 2 * h * 2) + 2 * vocab * h * 2 // 8 + h * 2
    assert _weights(capsys, "nvidia/Llama-3.1-70B-Instruct-FP8", "H200", "--tensor-parallel-size", "8")[0] == per_rank


# A public audit of moonshotai/Kimi-K2-Thinking at revision 6e3cdad8 (its config.json and model.safetensors.index.json,
# the shards' headers), on GitHub: 1,026,408,232,448 parameters; weight bytes 594,205,904,896, of which the INT4 expert
# payload is 507,343,011,840 and the bf16 group scales with the weight_shape records 63,418,429,440.
KIMI_THINKING_AUDIT = {"params": 1_026_408_232_448, "weights": 594_205_904_896, "int4": 507_343_011_840,
                       "scales_and_shapes": 63_418_429_440}


def test_kimi_k2_thinking_entry_names_config_and_mla_kv() -> None:
    data = _raw("kimi-k2-thinking.json")
    c = data["config"]
    assert (c["model_type"], c["num_hidden_layers"], c["kv_lora_rank"], c["qk_rope_head_dim"]) == ("kimi_k2", 61, 512, 64)
    report = kvbudget.kv(data["id"])
    assert report.bytes_per_token == 61 * (512 + 64) * 2 == 70_272 and report.kv_dtype == "bf16"
    for name in (data["id"], *data["aliases"]):
        for variant in (name, name.upper(), name.rsplit("/", 1)[-1]):
            assert kvbudget.load_model(variant).name == data["id"], variant
    assert data["config_source"] == f"https://huggingface.co/{data['id']}/blob/main/config.json"
    assert "verified" in data["notes"].lower() and "UNVERIFIED" in data["notes"]


def test_kimi_k2_thinking_is_kimi_k2_0905_but_for_its_int4_quantization() -> None:
    a, b = _config_of("moonshotai/Kimi-K2-Instruct-0905"), _config_of("moonshotai/Kimi-K2-Thinking")
    assert {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)} == {"quantization_config", "transformers_version"}
    assert kvbudget.load_model("moonshotai/Kimi-K2-Thinking").params == KIMI_THINKING_AUDIT["params"]


def test_kimi_k2_thinking_ignore_list_keeps_all_but_the_routed_experts_bf16() -> None:
    """compressed-tensors 'ignore': lm_head, re:.*self_attn.*, re:.*shared_experts.*, re:.*mlp\\.(gate|up|gate_up|down)_proj.*
    (the last one is layer 0's dense MLP: the routed and shared experts sit under mlp.experts / mlp.shared_experts);
    symmetric, so no zero points; no g_idx."""
    fmt = kvbudget.load_model("moonshotai/Kimi-K2-Thinking").weight_format
    assert fmt is not None
    assert fmt.skip_roles == frozenset({"lm_head", "attention", "shared_experts", "mlp"})
    assert (fmt.name, fmt.bits, fmt.group_size, fmt.zero_points, fmt.act_order_index) == ("gptq", 4, 32, False, False)


def test_kimi_k2_thinking_weights_are_the_audited_bytes_of_its_checkpoint() -> None:
    """Written out from the config: 60 MoE layers x 384 experts x (gate, up: 2,048 x 7,168; down: 7,168 x 2,048) packed
    4 bits a value plus one bf16 scale per 32; everything else bf16. That is the audit's INT4 payload, its scales less
    the 69,120 weight_shape records (8 bytes each) kvbudget does not price, and its total less those records and the
    2 extra bytes of each of the 23,040 router correction biases stored in fp32."""
    c = _config_of("moonshotai/Kimi-K2-Thinking")
    h, w, experts = c["hidden_size"], c["moe_intermediate_size"], c["n_routed_experts"]
    moe_layers = c["num_hidden_layers"] - c["first_k_dense_replace"]
    matrices = moe_layers * experts * 3
    expert_values = matrices * h * w
    packed, scales = expert_values // 2, expert_values // 32 * 2
    assert packed == KIMI_THINKING_AUDIT["int4"]
    assert scales + matrices * 8 == KIMI_THINKING_AUDIT["scales_and_shapes"]
    rest_bf16 = (KIMI_THINKING_AUDIT["params"] - expert_values) * 2
    total = packed + scales + rest_bf16
    assert total + matrices * 8 + moe_layers * experts * 2 == KIMI_THINKING_AUDIT["weights"]
    m = kvbudget.load_model("moonshotai/Kimi-K2-Thinking")
    assert m.weight_format is not None
    assert sum(m.weight_format.tensor_bytes(t) for t in m.inventory.tensors()) == total == 594_205_305_856


def test_kimi_k2_thinking_plans_on_eight_h200s_with_int4_experts(capsys: pytest.CaptureFixture[str]) -> None:
    """The fp8 Kimi-K2 entries need about 1 TB of weights; the INT4 checkpoint's 553 GiB fit eight H200s with room for KV."""
    weights, _ = _weights(capsys, "moonshotai/Kimi-K2-Thinking", "H200", "--tensor-parallel-size", "8")
    fp8, _ = _weights(capsys, "moonshotai/Kimi-K2-Instruct-0905", "H200", "--tensor-parallel-size", "8")
    assert 0.55 < weights / fp8 < 0.6
    assert 70 * GiB < weights < 72 * GiB


def test_kimi_k2_5_text_model_is_kimi_k2_thinking_and_its_vision_tower_is_left_out() -> None:
    """KimiK25ForConditionalGeneration wraps the Kimi-K2 text model (text_config, model_type kimi_k2) with a MoonViT
    tower: the count is the audit's language-model figure, the weights and KV the Thinking checkpoint's, and the
    tower (416,866,032 + 54,277,888 projector parameters in the audit) is named as left out."""
    k25, thinking = kvbudget.load_model("moonshotai/Kimi-K2.5"), kvbudget.load_model("moonshotai/Kimi-K2-Thinking")
    entry = catalog.find("moonshotai/Kimi-K2.5")
    assert entry is not None and entry.official_params - entry.official_params_text == 416_866_032 + 54_277_888
    assert k25.params == entry.official_params_text == thinking.params
    assert any("vision encoder kimi_k25 not counted" in note for note in k25.notes)
    text, _ = text_config(entry.config)
    assert text["quantization_config"] == _config_of("moonshotai/Kimi-K2-Thinking")["quantization_config"]
    assert k25.weight_format == thinking.weight_format
    assert kvbudget.kv(k25).bytes_per_token == 61 * (512 + 64) * 2 == 70_272
    assert kvbudget.kv(k25).max_context == 262_144
    assert kvbudget.load_model("kimi-k2.5").name == "moonshotai/Kimi-K2.5"
