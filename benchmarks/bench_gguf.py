"""GGUF header benchmark: a Llama-3-8B-shaped Q4_K_M file with its full 128k-token vocabulary.

The file is written by the real ``gguf`` package (``gguf.GGUFWriter``): llama.cpp's metadata keys,
``tokenizer.ggml.tokens`` (128,256 strings), ``tokenizer.ggml.scores`` (float32),
``tokenizer.ggml.token_type`` (int32) and ``tokenizer.ggml.merges`` (280,147 strings, as Meta's
Llama-3 GGUFs carry), and the 291 tensor infos of Llama-3-8B in Q4_K_M's mix of types. kvbudget reads
only the header, but it checks that every tensor's data lies inside the file, so the data section is
made sparse (``truncate``): the 4.9 GB file takes a few MB of disk.

Target (issue #9): reading the header (``read_gguf_header``) and building the model from it
(``load_model``) each take at most 50 ms. Each figure is the median of N runs in one process.
Run with `.venv/bin/python benchmarks/bench_gguf.py`. Exits 1 when the target is missed.
"""

from __future__ import annotations

import os
import sys
import tempfile

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter

from kvbudget.model.gguf_reader import read_gguf_header
from kvbudget.model.resolve import load_model

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_safetensors import median_seconds

RUNS = int(os.environ.get("KVBUDGET_BENCH_RUNS", "20"))
TARGET_S = 0.050
VOCAB, MERGES = 128_256, 280_147
Q4_K, Q6_K, F32 = GGMLQuantizationType.Q4_K, GGMLQuantizationType.Q6_K, GGMLQuantizationType.F32


def _tensor(w: GGUFWriter, name: str, rows: int, cols: int, qtype: GGMLQuantizationType) -> int:
    """Add one tensor's info (numpy order: rows, cols; ggml stores ne0 = cols) and return its bytes."""
    from gguf import GGML_QUANT_SIZES

    block, size = GGML_QUANT_SIZES[qtype]
    nbytes = rows * cols // block * size
    shape = (rows, cols) if rows > 1 else (cols,)
    w.add_tensor_info(name, shape, np.dtype(np.float32), nbytes, raw_dtype=qtype)
    return nbytes


def write_llama3_8b(path: str) -> int:
    """A Llama-3-8B Q4_K_M GGUF header with a sparse data section; its size in bytes."""
    w = GGUFWriter(path, "llama")
    w.add_name("Meta Llama 3 8B Instruct")
    w.add_block_count(32)
    w.add_context_length(8192)
    w.add_embedding_length(4096)
    w.add_feed_forward_length(14336)
    w.add_head_count(32)
    w.add_head_count_kv(8)
    w.add_rope_freq_base(500000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(15)  # MOSTLY_Q4_K_M
    w.add_vocab_size(VOCAB)
    w.add_rope_dimension_count(128)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("llama-bpe")
    w.add_token_list([f"tok{i:06d}{'x' * (i % 7)}" for i in range(VOCAB)])
    w.add_token_scores([float(-i) for i in range(VOCAB)])
    w.add_token_types([1] * (VOCAB - 256) + [3] * 256)
    w.add_token_merges([f"m{i % 5000} n{i // 5000}" for i in range(MERGES)])
    w.add_bos_token_id(128000)
    w.add_eos_token_id(128009)
    data = 0
    pad = 32  # GGUF's default alignment: every tensor's data starts on a multiple of it
    data += -(-_tensor(w, "token_embd.weight", VOCAB, 4096, Q4_K) // pad) * pad
    for il in range(32):
        for name, rows, cols, qtype in (
            ("attn_norm", 1, 4096, F32), ("attn_q", 4096, 4096, Q4_K), ("attn_k", 1024, 4096, Q4_K),
            ("attn_v", 1024, 4096, Q6_K), ("attn_output", 4096, 4096, Q4_K), ("ffn_norm", 1, 4096, F32),
            ("ffn_gate", 14336, 4096, Q4_K), ("ffn_up", 14336, 4096, Q4_K), ("ffn_down", 4096, 14336, Q6_K),
        ):
            data += -(-_tensor(w, f"blk.{il}.{name}.weight", rows, cols, qtype) // pad) * pad
    data += -(-_tensor(w, "output_norm.weight", 1, 4096, F32) // pad) * pad
    data += -(-_tensor(w, "output.weight", VOCAB, 4096, Q6_K) // pad) * pad
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    with open(path, "r+b") as f:
        f.seek(0, os.SEEK_END)
        header = f.tell()
        f.truncate(-(-header // pad) * pad + data)  # sparse: the tensor data is never written
    return os.path.getsize(path)


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "Meta-Llama-3-8B-Instruct-Q4_K_M.gguf")
        size = write_llama3_8b(path)
        h = read_gguf_header(path)
        on_disk = os.stat(path).st_blocks * 512
        print(f"GGUF: {size / 1e9:.2f} GB file, {h.header_bytes / 1e6:.2f} MB header, {len(h.tensors)} tensors, "
              f"{on_disk / 1e6:.1f} MB on disk (sparse)")
        assert len(h.tensors) == 291 and h.metadata["tokenizer.ggml.tokens.length"] == VOCAB
        assert load_model(path).dims.vocab_size == VOCAB
        worst = 0.0
        for what, fn in (("read_gguf_header", lambda: read_gguf_header(path)), ("load_model(gguf)", lambda: load_model(path))):
            t = median_seconds(fn)
            worst = max(worst, t)
            print(f"{what}: {t * 1000:.1f} ms (median of {RUNS})")
    ok = worst <= TARGET_S
    print(f"{'PASS' if ok else 'FAIL'}: worst {worst * 1000:.1f} ms, target <= {TARGET_S * 1000:.0f} ms")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
