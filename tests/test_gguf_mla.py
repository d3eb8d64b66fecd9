"""DeepSeek GGUFs before and after llama.cpp's MLA conversion (llama.cpp PR #12801, April 2025).

llama.cpp caches the MLA latent only when the GGUF says it was converted for it (``llama_hparams::is_mla()``:
``attention.key_length_mla`` and ``attention.value_length_mla`` both set); an older conversion, with the decompressed
per-head sizes in ``key_length`` / ``value_length``, is cached in full for every head. The shapes are
DeepSeek-Coder-V2-Lite's (27 layers, 16 heads, latent 512 + rope 64, per-head K 192 and V 128 — the metadata its
older GGUF prints in https://github.com/ollama/ollama/issues/7548 shows key_length 192 and value_length 128). Its
full per-head cache is 27 x 16 x (192 + 128) x 2 = 276,480 bytes a token in f16, the figure
https://github.com/panbanda/higgs/pull/254 measured for that model's decompressed cache, against 27 x 576 x 2 =
31,104 for the latent."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFWriter

from kvbudget.cli import main

LAYERS, HEADS, HIDDEN, LORA, ROPE, NOPE, V = 27, 16, 2048, 512, 64, 128, 128


def _deepseek2(path: Path, mla: bool) -> Path:
    w = GGUFWriter(str(path), "deepseek2")
    a = "deepseek2"
    w.add_uint32(f"{a}.block_count", LAYERS)
    w.add_uint32(f"{a}.context_length", 163840)
    w.add_uint32(f"{a}.embedding_length", HIDDEN)
    w.add_uint32(f"{a}.attention.head_count", HEADS)
    w.add_uint32(f"{a}.attention.kv_lora_rank", LORA)
    w.add_uint32(f"{a}.rope.dimension_count", ROPE)
    if mla:  # convert_hf_to_gguf.py since #12801: one latent "head"
        w.add_uint32(f"{a}.attention.head_count_kv", 1)
        w.add_uint32(f"{a}.attention.key_length", LORA + ROPE)
        w.add_uint32(f"{a}.attention.value_length", LORA)
        w.add_uint32(f"{a}.attention.key_length_mla", NOPE + ROPE)
        w.add_uint32(f"{a}.attention.value_length_mla", V)
    else:  # before: every head's decompressed K and V
        w.add_uint32(f"{a}.attention.head_count_kv", HEADS)
        w.add_uint32(f"{a}.attention.key_length", NOPE + ROPE)
        w.add_uint32(f"{a}.attention.value_length", V)
    w.add_uint32(f"{a}.vocab_size", 1024)
    for i in range(LAYERS):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones((HIDDEN,), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.parametrize(("mla", "per_token"), [(True, LAYERS * (LORA + ROPE) * 2), (False, 276_480)])
def test_the_cache_follows_the_conversion(tmp_path: Path, mla: bool, per_token: int,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = _deepseek2(tmp_path / f"ds-{'mla' if mla else 'old'}.gguf", mla)
    assert main(["kv", str(path), "--kv-dtype", "fp16", "--context", "4096", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kv_bytes_per_token"] == per_token
    said = any("converted before llama.cpp's MLA cache" in note for note in doc["notes"])
    assert said is not mla
