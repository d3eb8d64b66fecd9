"""--enable-lora: the adapter slots vLLM preallocates (engines/vllm/lora.py) against a hand computation from the
config, vLLM 0.33.0's own LoRA layer classes (tests/data/vllm_lora_oracle.json, made by tools/gen_vllm_lora_oracle.py)
and vLLM's refusals per release."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import kvbudget
from kvbudget._record import replace
from kvbudget.engines.vllm import VllmSettings, plan
from kvbudget.engines.vllm.command import parse_vllm_command
from kvbudget.engines.vllm.launch import vllm_argv
from kvbudget.engines.vllm.lora import embedding_elements, layer_elements
from kvbudget.report.text import vllm_text
from kvbudget.units import InputError

ORACLE = json.loads((Path(__file__).parent / "data" / "vllm_lora_oracle.json").read_text())
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def _lora(**kw: object) -> VllmSettings:
    return VllmSettings(enable_lora=True, **kw)  # type: ignore[arg-type]


def test_llama_8b_rank_64_four_slots_by_hand() -> None:
    # Llama-3.1-8B: hidden 4096, 32 heads x 128, 8 KV heads (k, v 1024 each), intermediate 14336, vocab 128256.
    # Per decoder layer, (max_loras 4) x rank 64, bf16 (2 B):
    qkv = 3 * 4 * 64 * 4096 + 4 * (4096 + 1024 + 1024) * 64  # A per slice (q, k, v) + B of each slice's output
    o = 4 * 64 * 4096 + 4 * 4096 * 64  # row-parallel: A of the input, B of the whole output
    gate_up = 2 * 4 * 64 * 4096 + 4 * 2 * 14336 * 64
    down = 4 * 64 * 14336 + 4 * 4096 * 64
    per_layer = (qkv + o + gate_up + down) * 2
    assert per_layer == 40 * 2**20
    embed = 4 * (128256 * 64 + 4096 * 64) * 2  # lora_a (4, vocab, 64) + lora_b (4, 1, 4096, 64)
    lm_head = 4 * (64 * 4096 + 128256 * 64) * 2  # lora_a (4, 1, 64, 4096) + lora_b (4, 1, vocab, 64)
    metadata = 8192 * (4 * 8 + 4 * 4) + 1024 * 3 * 8  # punica index tensors (max_num_batched_tokens, max_num_seqs)
    spec = kvbudget.load_model(LLAMA)
    p = plan(spec, kvbudget.find_gpu("H100"), _lora(max_loras=4, max_lora_rank=64))
    assert p.lora_bytes == 32 * per_layer + embed + lm_head + metadata == 1_478_123_520
    base = plan(spec, kvbudget.find_gpu("H100"), VllmSettings())
    assert p.model_loading_bytes - base.model_loading_bytes == p.lora_bytes  # inside "Model loading took"
    assert base.available_kv_cache_bytes - p.available_kv_cache_bytes == p.lora_bytes  # 0.33: no profiling term
    assert "of which LoRA adapter slots" in vllm_text(p, "GiB")


@pytest.mark.parametrize("row", ORACLE["rows"], ids=lambda r: f"{r['model']}-{r['max_loras']}x{r['max_lora_rank']}")
def test_against_vllm_033_lora_classes(row: dict) -> None:
    spec = kvbudget.load_model(row["model"])
    s = _lora(max_loras=row["max_loras"], max_lora_rank=row["max_lora_rank"])
    assert layer_elements(spec.inventory.layers[0], spec, s, 33, 1, 1) * 2 == sum(row["layer_bytes"].values())
    head, tail = embedding_elements(spec, s, 33, 1)
    if spec.model_type == "llama":  # LlamaForCausalLM.embedding_modules: embed_tokens and lm_head are wrapped
        assert (head * 2, tail * 2) == (row["embed_tokens_bytes"], row["lm_head_bytes"])
    else:  # Qwen2ForCausalLM names no embedding_modules in 0.33.0: neither is wrapped
        assert (head, tail) == (0, 0)


def test_tp_split_fully_sharded_and_release_lines() -> None:
    spec = kvbudget.load_model(LLAMA)
    s = _lora(max_loras=1, max_lora_rank=16)
    block = spec.inventory.layers[0]
    # TP 2: q 2048, k/v 512 per rank, gate/up 7168 each; o and down take half the input, keep the whole output
    tp2 = (3 * 16 * 4096 + (2048 + 512 + 512) * 16) + (16 * 2048 + 4096 * 16) + (2 * 16 * 4096 + 2 * 7168 * 16) \
        + (16 * 7168 + 4096 * 16)
    assert layer_elements(block, spec, s, 33, 2, 1) == tp2
    fully = replace(s, fully_sharded_loras=True)  # column A's rank and row B's output divided by TP
    assert layer_elements(block, spec, fully, 33, 2, 1) == tp2 - (3 + 2) * 8 * 4096 - 2 * 2048 * 16
    # up to 0.11: 256 extra vocabulary rows (A of the embedding, the logits' B padded to 256, embeddings_tensors)
    # and the base embedding / lm_head's own extra rows
    head, tail = embedding_elements(spec, s, 10, 1)
    assert head == 256 * 4096 + (128256 + 256) * 16 + 4096 * 16 + 256 * 4096
    assert tail == 16 * 4096 + 128512 * 16 + 256 * 4096 + 256 * 4096
    p = plan(spec, kvbudget.find_gpu("H100"), replace(s, version="0.10.1"))
    assert p.activation_bytes - plan(spec, kvbudget.find_gpu("H100"), VllmSettings(version="0.10.1")).activation_bytes \
        == 2 * p.max_num_batched_tokens * 16 * 4  # the profiling run's gate/up shrink buffer, fp32


def test_moe_experts_from_012() -> None:
    spec = kvbudget.load_model("Qwen/Qwen3-30B-A3B")
    s = _lora(max_loras=1, max_lora_rank=8)
    block = spec.inventory.layers[0]
    e, h, i = spec.num_experts, spec.dims.hidden_size, spec.expert_intermediate_size
    per_expert = (2 * 8 * h + 2 * i * 8) + (8 * i + h * 8)
    assert layer_elements(block, spec, s, 33, 1, 1) - layer_elements(block, spec, s, 11, 1, 1) == e * per_expert


def test_parse_and_round_trip() -> None:
    cmd = parse_vllm_command(f"vllm serve {LLAMA} --enable-lora --max-loras 4 --max-lora-rank 64 --max-cpu-loras 8 "
                             "--lora-dtype bfloat16 --lora-target-modules o_proj")
    s = cmd.settings
    assert (s.enable_lora, s.max_loras, s.max_lora_rank, s.max_cpu_loras, s.lora_dtype) == (True, 4, 64, 8, "bfloat16")
    assert not any("does not model" in w for w in cmd.warnings) and not s.unmodelled
    assert any("--lora-target-modules" in w for w in cmd.warnings)
    again = parse_vllm_command(vllm_argv(LLAMA, s)).settings
    assert (again.enable_lora, again.max_loras, again.max_lora_rank, again.max_cpu_loras) == (True, 4, 64, 8)
    old = parse_vllm_command(f"vllm serve {LLAMA} --enable-lora --lora-extra-vocab-size 512 --enable-lora-bias")
    assert old.settings.lora_extra_vocab_size == 512
    assert any("--enable-lora-bias: kvbudget does not model" in w for w in old.warnings)
    assert not parse_vllm_command(f"vllm serve {LLAMA} --max-loras 4").settings.enable_lora  # ignored without it


@pytest.mark.parametrize("settings, message", [
    (_lora(max_lora_rank=24), "takes one of 1, 8, 16"),
    (_lora(max_lora_rank=1, version="0.10.1"), "0.10 takes one of 8, 16"),
    (_lora(max_lora_rank=512, version="0.6.4"), "0.6 takes one of 8, 16, 32, 64, 128, 256"),
    (_lora(max_loras=4, max_cpu_loras=2), "max_cpu_loras must be >= max_loras"),
    (_lora(version="0.10.1", lora_extra_vocab_size=300), "256 or 512"),
    (_lora(lora_dtype="float32"), "auto, float16 or bfloat16"),
    (_lora(fully_sharded_loras=True, max_lora_rank=8, tensor_parallel_size=16), "does not divide"),
])
def test_vllm_refusals(settings: VllmSettings, message: str) -> None:
    with pytest.raises(InputError, match=message):
        plan(kvbudget.load_model(LLAMA), kvbudget.find_gpu("H100"), settings)


def test_cli_explain_line_and_bad_rank(capsys: pytest.CaptureFixture[str]) -> None:
    from kvbudget.cli import main

    assert main(["explain", f"vllm serve {LLAMA} --enable-lora --max-loras 4 --max-lora-rank 64", "--gpu", "H100"]) == 0
    out = capsys.readouterr().out
    assert "of which LoRA adapter slots" in out and "1.38 GiB" in out and "does not model" not in out
    assert main(["explain", f"vllm serve {LLAMA} --enable-lora --max-lora-rank 24", "--gpu", "H100"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--max-lora-rank 24" in err
