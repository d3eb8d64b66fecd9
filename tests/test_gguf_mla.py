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


def _explain(path: Path, build: int) -> list[str]:
    return ["explain", "--gpu", "H100", "--llamacpp-build", str(build), "--", "llama-server", "-m", str(path),
            "-c", "4096", "-np", "1"]


def test_a_gguf_converted_for_the_latent_does_not_load_before_b5137(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """llama.cpp before b5137 (PR #12801) reads key_length 576 as every head's K and wants attn_kv_b: a GGUF made
    for the latent (attn_k_b / attn_v_b, key_length_mla) stops at load with a tensor of the wrong shape. kvbudget
    planned its 576-wide latent for such a build (exit 0); it now refuses in one line. From b5137 the latent and,
    until b7832 (PR #19067), a V row of it: 27 layers x 4096 cells x (576 + 512) x 2 B = 229.50 MiB."""
    path = _deepseek2(tmp_path / "ds-mla.gguf", mla=True)
    assert main(_explain(path, 5136)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not load before b5137" in err and "--llamacpp-build 5137 or later" in err
    assert main(_explain(path, 5137)) == 0
    out = capsys.readouterr().out
    assert "K (f16):  121.50 MiB, V (f16):  108.00 MiB" in out
    assert 27 * 4096 * 576 * 2 / 2**20 == 121.5 and 27 * 4096 * 512 * 2 / 2**20 == 108.0


@pytest.mark.parametrize("build", [4963, 5137, 7832])
def test_an_older_conversion_is_cached_per_head_by_every_build(tmp_path: Path, build: int,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """A GGUF converted before #12801 (no key_length_mla) loads in every build and is cached per head: is_mla is
    false, attn_kv_b is read ("only old legacy GGUF files will have the unsplit wkv_b tensor", llama.cpp
    src/models/deepseek2.cpp, 2026) and n_embd_k_gqa = key_length x head_count_kv: 27 x 4096 x 16 x 192 x 2 B =
    648 MiB of K, 27 x 4096 x 16 x 128 x 2 B = 432 MiB of V."""
    path = _deepseek2(tmp_path / "ds-old.gguf", mla=False)
    assert main(_explain(path, build)) == 0
    assert "K (f16):  648.00 MiB, V (f16):  432.00 MiB" in capsys.readouterr().out


def test_minicpm3_keeps_every_head_and_its_own_v_head_size(tmp_path: Path) -> None:
    """MiniCPM3's GGUF carries a kv_lora_rank but no loader of llama.cpp reads key_length_mla for it: its heads are
    always cached in full, so the 'converted before llama.cpp's MLA cache ... re-convert' note was wrong for it. Its
    converter (conversion/minicpm.py, MiniCPM3Model) writes key_length (qk_nope 64 + qk_rope 32 = 96) and no
    value_length, which llama.cpp reads as n_embd / n_head = 2560 / 40 = 64 (llama-model.cpp load_hparams), not 96."""
    from kvbudget.model.gguf_spec import spec_from_gguf
    from kvbudget.model.layers import FullAttention

    w = GGUFWriter(str(tmp_path / "minicpm3.gguf"), "minicpm3")
    a = "minicpm3"
    for key, value in (("block_count", 62), ("context_length", 32768), ("embedding_length", 2560),
                       ("attention.head_count", 40), ("attention.head_count_kv", 40), ("attention.kv_lora_rank", 256),
                       ("attention.q_lora_rank", 768), ("attention.key_length", 96), ("rope.dimension_count", 32),
                       ("vocab_size", 1024)):
        w.add_uint32(f"{a}.{key}", value)
    w.add_tensor("blk.0.attn_norm.weight", np.ones((2560,), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    spec = spec_from_gguf(str(tmp_path / "minicpm3.gguf"))
    assert set(spec.layers) == {FullAttention(40, 96, 64)}
    assert not any("MLA cache" in note for note in spec.notes)
