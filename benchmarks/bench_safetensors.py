"""Header-only benchmark: reading a "141 GB" sharded safetensors folder against an 8.6 MB one.

Both folders hold Llama-3.1-70B's tensor list (80 layers, 723 tensors) in 30 shards with a
``model.safetensors.index.json``, as the Hub repo does; the big one has the real shapes (bf16,
141 GB), the small one the same names with every dimension shrunk. Files are sparse (``truncate``):
nothing but the headers is ever written, so the benchmark needs no disk space. Target (issue #4
§5): reading the big folder's headers, and building the model from them, takes at most 2x the
small one's time: only the headers are read.

Second, a DeepSeek-V3-sized folder: 163 shards, 91,991 tensors (fp8 with block scales, 256 experts in
58 layers), written from the test suite's tensor list (tests/test_safetensors.py: deepseek_v3_tensors),
headers only with sparse data. Target (issue #9): summing its headers (``read_safetensors``) and
building the model from them (``load_model``) each take at most 0.5 s. Each figure is the median of N runs.
Run with `.venv/bin/python benchmarks/bench_safetensors.py`. Exits 1 when the target is missed.
"""

from __future__ import annotations

import json
import os
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable

from kvbudget.model import catalog
from kvbudget.model.resolve import load_model
from kvbudget.model.safetensors_reader import read_safetensors

RUNS = int(os.environ.get("KVBUDGET_BENCH_RUNS", "20"))
TARGET = 2.0
SHARDS = 30
DEEPSEEK_TARGET_S = 0.5


def llama_70b(hidden: int, inter: int, vocab: int, kv: int) -> dict[str, tuple[str, list[int]]]:
    t = {"model.embed_tokens.weight": ("BF16", [vocab, hidden])}
    for i in range(80):
        p = f"model.layers.{i}"
        for name, shape in (("self_attn.q_proj", [hidden, hidden]), ("self_attn.k_proj", [kv, hidden]),
                            ("self_attn.v_proj", [kv, hidden]), ("self_attn.o_proj", [hidden, hidden]),
                            ("mlp.gate_proj", [inter, hidden]), ("mlp.up_proj", [inter, hidden]),
                            ("mlp.down_proj", [hidden, inter]), ("input_layernorm", [hidden]),
                            ("post_attention_layernorm", [hidden])):
            t[f"{p}.{name}.weight"] = ("BF16", shape)
    t["model.norm.weight"] = ("BF16", [hidden])
    t["lm_head.weight"] = ("BF16", [vocab, hidden])
    return t


def write_folder(root: str, tensors: dict[str, tuple[str, list[int]]], config: dict[str, object]) -> int:
    os.makedirs(root)
    with open(os.path.join(root, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)
    names = list(tensors)
    per = -(-len(names) // SHARDS)
    weight_map: dict[str, str] = {}
    total = 0
    for s in range(SHARDS):
        file = f"model-{s + 1:05d}-of-{SHARDS:05d}.safetensors"
        header: dict[str, object] = {"__metadata__": {"format": "pt"}}
        at = 0
        for name in names[s * per:(s + 1) * per]:
            dtype, shape = tensors[name]
            n = 2
            for d in shape:
                n *= d
            header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + n]}
            weight_map[name] = file
            at += n
        raw = json.dumps(header).encode()
        raw += b" " * (-len(raw) % 8)
        with open(os.path.join(root, file), "wb") as f:
            f.write(struct.pack("<Q", len(raw)))
            f.write(raw)
            f.truncate(8 + len(raw) + at)  # sparse: the data is never written
        total += at
    with open(os.path.join(root, "model.safetensors.index.json"), "w", encoding="utf-8") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f)
    return total


def median_seconds(fn: Callable[[], object], runs: int = RUNS) -> float:
    fn()  # warm the page cache and the imports
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    config = {"model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
              "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 128256,
              "max_position_embeddings": 131072, "torch_dtype": "bfloat16", "tie_word_embeddings": False}
    small_config = {**config, "hidden_size": 64, "intermediate_size": 224, "num_attention_heads": 8,
                    "num_key_value_heads": 1, "vocab_size": 1000}
    with tempfile.TemporaryDirectory() as tmp:
        big, small = os.path.join(tmp, "big"), os.path.join(tmp, "small")
        big_bytes = write_folder(big, llama_70b(8192, 28672, 128256, 1024), config)
        small_bytes = write_folder(small, llama_70b(64, 224, 1000, 8), small_config)
        on_disk = sum(os.stat(os.path.join(big, f)).st_blocks * 512 for f in os.listdir(big))
        print(f"big folder: {big_bytes / 1e9:.1f} GB of tensors in {SHARDS} shards, {on_disk / 1e6:.2f} MB on disk (sparse)")
        print(f"small folder: {small_bytes / 1e6:.2f} MB of tensors in {SHARDS} shards")
        assert read_safetensors(big).total_bytes == big_bytes
        assert load_model(big).params == load_model(big + "/config.json").params
        worst = 0.0
        for what, fn_big, fn_small in (
            ("read headers", lambda: read_safetensors(big), lambda: read_safetensors(small)),
            ("load_model(folder)", lambda: load_model(big), lambda: load_model(small)),
        ):
            t_big, t_small = median_seconds(fn_big), median_seconds(fn_small)
            ratio = t_big / t_small
            worst = max(worst, ratio)
            print(f"{what}: big {t_big * 1000:.1f} ms, small {t_small * 1000:.1f} ms = {ratio:.2f}x (median of {RUNS})")
    verdict = "PASS" if worst <= TARGET else "FAIL"
    print(f"{verdict}: worst {worst:.2f}x, target <= {TARGET:.0f}x")
    return max(0 if worst <= TARGET else 1, deepseek())


def deepseek() -> int:
    from pathlib import Path

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
    from test_safetensors import deepseek_v3_tensors, model_folder

    entry = catalog.find("deepseek-v3")
    assert entry is not None
    runs = max(RUNS // 4, 3)
    with tempfile.TemporaryDirectory() as tmp:
        folder = str(model_folder(Path(tmp) / "DeepSeek-V3", deepseek_v3_tensors(), entry.config, shards=163))
        s = read_safetensors(folder)
        print(f"DeepSeek-V3 folder: {len(s.files)} shards, {s.tensor_count:,} tensors, {s.total_bytes / 1e9:.0f} GB, "
              f"{s.header_bytes / 1e6:.1f} MB of headers")
        worst = 0.0
        for what, fn in (("read headers", lambda: read_safetensors(folder)), ("load_model(folder)", lambda: load_model(folder))):
            t = median_seconds(fn, runs)
            worst = max(worst, t)
            print(f"{what}: {t * 1000:.0f} ms (median of {runs})")
    ok = worst <= DEEPSEEK_TARGET_S
    print(f"{'PASS' if ok else 'FAIL'}: worst {worst * 1000:.0f} ms, target <= {DEEPSEEK_TARGET_S * 1000:.0f} ms")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
