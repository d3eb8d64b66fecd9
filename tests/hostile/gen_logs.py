"""Start-up logs of each engine that no engine printed: a real log from tests/data with one figure
replaced by a value it cannot hold, giant lines, binary garbage, an empty file, one over the size cap,
a FIFO and /dev/zero. ``kvbudget check LOG`` must answer each with one line and exit 2."""

from __future__ import annotations

import os
import re
from pathlib import Path

from corpus import add, write

DATA = Path(__file__).resolve().parent.parent / "data"
BAD = {"neg": "-7", "nan": "nan", "inf": "inf", "e30": "1e30", "d50": "9" * 50, "d5000": "9" * 5000}
VLLM_8B = ["--model", "meta-llama/Llama-3.1-8B-Instruct"]
# (log, figure label, the figure's pattern: group 1 is the number, the name the error gives the figure,
# the options `check` needs to get that far: the model and GPU where the log does not say them)
FIGURES = [
    ("vllm_logs/v0.8.5dev_l40s_llama3.1-8b_len32768.log", "loading", r"Model loading took ([0-9.]+)", "model loading (GiB)",
     [*VLLM_8B, "--gpu", "L40S"]),
    ("vllm_logs/v0.8.5dev_l40s_llama3.1-8b_len32768.log", "tokens", r"KV cache size: ([0-9,]+)", "GPU KV cache size (tokens)",
     [*VLLM_8B, "--gpu", "L40S"]),
    ("vllm_logs/v0.8.5dev_l40s_llama3.1-8b_len32768.log", "conc-len", r"concurrency for ([0-9,]+)",
     "maximum concurrency's tokens per request", [*VLLM_8B, "--gpu", "L40S"]),
    ("vllm_logs/v0.8.5dev_l40s_llama3.1-8b_len32768.log", "conc", r"request: ([0-9.]+)x", "log: maximum concurrency ",
     [*VLLM_8B, "--gpu", "L40S"]),
    ("vllm_logs/v0.6.4_rtx3090_llama3.1-8b_len20000.log", "total", r"total_gpu_memory=([0-9.]+)", "total GPU memory (GiB)",
     VLLM_8B),
    ("vllm_logs/v0.6.4_rtx3090_llama3.1-8b_len20000.log", "kv-size", r"kv_cache_size=([0-9.]+)",
     "available KV cache memory (GiB)", VLLM_8B),
    ("vllm_logs/v0.6.4_rtx3090_llama3.1-8b_len20000.log", "blocks", r"GPU blocks: ([0-9]+)", "# GPU blocks", VLLM_8B),
    ("vllm_logs/v0.6.4_rtx3090_llama3.1-8b_len20000.log", "gmu", r"gpu_memory_utilization=([0-9.]+)",
     "gpu_memory_utilization", VLLM_8B),
    ("sglang_logs/v0.4.9docker_24gb-wsl_llama3.1-8b_default.log", "tokens", r"#tokens: ([0-9]+)", "SGLang #tokens", []),
    ("sglang_logs/v0.4.9docker_24gb-wsl_llama3.1-8b_default.log", "k-size", r"K size: ([0-9.]+)", "SGLang K size (GB)", []),
    ("sglang_logs/v0.4.9docker_24gb-wsl_llama3.1-8b_default.log", "v-size", r"V size: ([0-9.]+)", "SGLang V size (GB)", []),
    ("trtllm_logs/v0.13.0_l40s-x4_llama3-8b_engine_runpy-tp4.log", "pool", r"Allocated ([0-9.]+) GiB", "TRT-LLM KV pool (GiB)",
     []),
    ("trtllm_logs/v0.13.0_l40s-x4_llama3-8b_engine_runpy-tp4.log", "tokens", r"KV cache \(([0-9]+)\)",
     "TRT-LLM max tokens in paged KV cache", []),
    # a log with the "primary pool" line, without which the tokens per block are never read
    ("trtllm_logs/v0.12.0dev_h100_llama2-7b-fp8_engine_trtllm-bench.log", "per-block", r"per block: ([0-9]+)",
     "TRT-LLM tokens per block", []),
    ("llamacpp_logs/b5452_l40s_gemma3-27b_np16_iswa.log", "cells", r"\( *([0-9]+) cells", "KV cache cells", []),
    ("llamacpp_logs/b5452_l40s_gemma3-27b_np16_iswa.log", "layers", r"cells, *([0-9]+) layers", "KV cache layers", []),
    ("llamacpp_logs/b5452_l40s_gemma3-27b_np16_iswa.log", "k-mib", r"K \(f16\): *([0-9.]+)", "K size (MiB)", []),
    ("llamacpp_logs/b5452_l40s_gemma3-27b_np16_iswa.log", "buffer", r"CUDA0 KV buffer size = *([0-9.]+)",
     "CUDA0 KV buffer size (MiB)", []),
    ("llamacpp_logs/b5935_arm-rpc-2x-c8g_llama3.1-405b_q4_0.log", "kv-width", r"n_embd_k_gqa *= ([0-9]+)", "KV width", []),
    ("llamacpp_logs/b5935_arm-rpc-2x-c8g_llama3.1-405b_q4_0.log", "rpc-buffer", r"50052\] KV buffer size = *([0-9.]+)",
     "50052] KV buffer size (MiB)", []),
]
# a figure allowed below 0 by the engine (vLLM prints negative free KV memory when nothing is left)
NEGATIVE_OK = {("vllm_logs/v0.6.4_rtx3090_llama3.1-8b_len20000.log", "kv-size")}
LONG = "more than 300 digits"  # a number no engine prints, refused before any figure is read


def _log_case(case_id: str, name: str, pattern: str, bad: str, options: list[str], expect_in: str) -> None:
    def build(root: Path) -> list[str]:
        text = (DATA / name).read_text(encoding="utf-8")
        new = re.sub(pattern, lambda m: m.group(0)[: m.start(1) - m.start(0)] + bad + m.group(0)[m.end(1) - m.start(0):], text)
        assert new != text, (name, pattern)
        return ["check", write(root, "run.log", new), *options]

    add(case_id, build, expect_in=expect_in)


for name, label, pattern, figure, options in FIGURES:
    engine = name.split("_")[0]
    for key, bad in BAD.items():
        if key == "neg" and (name, label) in NEGATIVE_OK:
            continue
        _log_case(f"logs-{engine}-{label}-{key}", name, pattern, bad, options, LONG if key == "d5000" else figure)

# logged settings an engine never accepts (vLLM's config checks: block_size > 0, max_num_seqs >= 1 ...)
SETTINGS_LOG = "vllm_logs/v0.6.4_rtx3090_llama3.1-8b_len20000.log"
for n, (setting, expect_in) in enumerate([
        ("block_size=-16", "block_size is -16"), ("max_num_seqs=-1", "max_num_seqs is -1"),
        ("gpu_memory_utilization=nan", "gpu_memory_utilization must be a finite number, not nan"),
        ("gpu_memory_utilization=1.5", "gpu_memory_utilization is 1.5"), ("tensor_parallel_size=0", "tensor_parallel_size is 0"),
        ("max_model_len=0", "max_model_len is 0"), ("max_num_batched_tokens=" + "9" * 50, "max_num_batched_tokens '9999"),
        ("block_size=1e30", "block_size '1e30' is not a whole number"), ("gpu_memory_utilization=0", "gpu_memory_utilization is 0"),
        ("pipeline_parallel_size=-2", "pipeline_parallel_size is -2")]):
    def settings_build(root: Path, setting: str = setting) -> list[str]:
        text = (DATA / SETTINGS_LOG).read_text(encoding="utf-8")
        return ["check", write(root, "run.log", text + f"INFO engine config: model='llama-3.1-8b', {setting}, seed=0\n"), *VLLM_8B]

    add(f"logs-vllm-setting-{n}", settings_build, expect_in=expect_in)


def _file(case_id: str, data: bytes | str, expect_in: str, *extra: str) -> None:
    add(case_id, lambda root: ["check", write(root, "x.log", data), *extra], expect_in=expect_in)


NONE_FOUND = "no vLLM start-up figures found"
BINARY = "binary, not text"
_file("logs-empty", b"", NONE_FOUND)
_file("logs-binary", bytes(range(256)) * 64, BINARY)
_file("logs-binary-nul-in-vllm", b"Available KV cache memory: 1.0 GiB\x00\n", BINARY)
# UTF-16 with its byte-order mark (Windows PowerShell's `>`) is read as text, then judged as any log; without the mark
_file("logs-utf16", "Available KV cache memory: 1.0 GiB\n".encode("utf-16"), "the log does not name its model")
_file("logs-utf16-no-mark", "Available KV cache memory: 1.0 GiB\n".encode("utf-16-le"), BINARY)
_file("logs-digits-line", "7" * 1_000_000, LONG)
_file("logs-blank-lines", "\n" * 1_000_000, NONE_FOUND)
_file("logs-spaces", " " * 1_000_000, NONE_FOUND)
_file("logs-commas", "1," * 500_000, NONE_FOUND)
_file("logs-wrapped-digits", "\n0" * 500_000, LONG)  # vLLM's reader rejoins wrapped lines: one run of digits
# each literal a reader searches for, repeated on one line and then one per line: the time stays linear
for n, (prefix, expect_in) in enumerate([
        ("Available KV cache memory: ", NONE_FOUND), ("GPU KV cache size: ", NONE_FOUND), ("# GPU blocks: ", NONE_FOUND),
        ("Maximum concurrency for ", NONE_FOUND), ("NVIDIA A", NONE_FOUND), ("KV Cache is allocated. ", "no SGLang"),
        ("Load weight end.", "no SGLang"), ("Allocated ", NONE_FOUND), ("KV buffer size = ", NONE_FOUND),
        ("size = 1 MiB (", NONE_FOUND), ("- kv 1: ", NONE_FOUND), ("print_info: n_layer = ", NONE_FOUND),
        ("block_size", NONE_FOUND), ("vllm serve ", NONE_FOUND)]):
    _file(f"logs-prefix-flood-{n}", prefix * (200_000 // len(prefix)) + "\n" + (prefix + "\n") * (200_000 // (len(prefix) + 1)),
          expect_in)
_file("logs-vllm-only-zero-total", "total_gpu_memory=0.00GiB kv_cache_size=1.0GiB\n# GPU blocks: 5\n", "total GPU memory is 0 GiB")
_file("logs-sglang-zero-k", "KV Cache is allocated. #tokens: 100, K size: 0.00 GB, V size: 0.00 GB\n"
      "Load weight begin. avail mem=20.00 GB\nLoad weight end. avail mem=10.00 GB, mem usage=10.00 GB.\nmem_fraction_static=0.8\n",
      "SGLang K size is 0 GB")
_file("logs-sglang-zero-fraction", "KV Cache is allocated. #tokens: 100, K size: 1.00 GB, V size: 1.00 GB\n"
      "Load weight begin. avail mem=20.00 GB\nLoad weight end. avail mem=10.00 GB, mem usage=10.00 GB.\nmem_fraction_static=0\n",
      "mem_fraction_static is 0")
_file("logs-sglang-zero-page", "KV Cache is allocated. #tokens: 0, K size: 1.00 GB, V size: 1.00 GB\npage_size=0\n",
      "page_size is 0")
_file("logs-trt-zero-kv-per-token", "[TensorRT-LLM][INFO] Allocated 1.00 GiB for max tokens in paged KV cache (100).\n"
      "available KV cache memory when calculating max tokens: 1.00 GiB, kv size is 0\n", "kv size per token is 0")
_file("logs-trt-zero-per-block", "[TensorRT-LLM][INFO] Allocated 1.00 GiB for max tokens in paged KV cache (100).\n"
      "Number of blocks in KV cache primary pool: 4\nNumber of tokens per block: 0\n", "tokens per block is 0")
_file("logs-llamacpp-negative-width", "llama_context: n_ctx = 4096\nprint_info: n_embd_k_gqa = -1024\n"
      "llama_kv_cache: size = 512.00 MiB (  4096 cells,  32 layers,  1/1 seqs), K (f16): 256.00 MiB, V (f16): 256.00 MiB\n",
      "KV width is -1024")
_file("logs-llamacpp-seqs-zero", "llama_kv_cache: size = 512.00 MiB (  4096 cells,  32 layers,  1/0 seqs),"
      " K (f16): 256.00 MiB, V (f16): 256.00 MiB\n", "KV cache seqs is 0")
# A logged command a shell cannot split (the one place `kvbudget check/explain` splits a command itself):
# said in a warning, and the figures are still checked (exit 0).
for n, command in enumerate(["vllm serve 'llama-3.1-8b --max-model-len 4096", 'vllm serve "llama-3.1-8b --max-model-len 4096',
                             "VLLM_USE_V1=0 vllm serve llama-3.1-8b --max-model-len 4096 \\",
                             "python -m vllm.entrypoints.openai.api_server --model 'llama-3.1-8b"]):
    add(f"logs-vllm-command-unbalanced-{n}",
        lambda root, command=command: ["check", write(root, "x.log", f"$ {command}\nINFO GPU KV cache size: 100 tokens\n"),
                                       "--gpu", "H100", "--model", "llama-3.1-8b"], expect=0, expect_in="cannot be split into words")
add("logs-over-cap", lambda root: ["check", _sparse(root)], expect_in="bytes, more than the 67,108,864")
add("logs-fifo", lambda root: ["check", _fifo(root)], expect_in="not a regular file")
add("logs-dev-zero", lambda root: ["check", "/dev/zero"], expect_in="not a regular file")
add("logs-folder", lambda root: ["check", str(root)], expect_in="is a folder")
add("logs-missing", lambda root: ["check", str(root / "no-such.log")], expect_in="no such file")
add("logs-stdin-binary", lambda root: ["check", "-"], stdin=b"\x00\x01\x02" * 1000, expect_in=BINARY)
add("logs-stdin-empty", lambda root: ["check", "-"], stdin=b"", expect_in=NONE_FOUND)


def _sparse(root: Path) -> str:
    """A log one byte over the 64 MiB cap, made sparse (nothing written)."""
    path = root / "big.log"
    with open(path, "wb") as f:
        f.truncate(64 * 2**20 + 1)
    return str(path)


def _fifo(root: Path) -> str:
    path = root / "pipe.log"
    os.mkfifo(path)
    return str(path)


# A multi-rank vLLM log cut short: vLLM 0.10.0 prints "Available KV cache memory" once per rank and sizes every
# rank's cache by the smallest (52.11 GiB on rank 2 here); cut after rank 0's 52.21 or rank 3's 52.58 it was
# checked against that rank's figure, exit 0
TP4_LOG = "vllm_logs/v0.10.0_h100x4_qwen3-32b_tp4_yarn4_len131072_gmu0.95.log"
for n, (cut_after, expect_in) in enumerate([("rank=0 pid=4148421) INFO 08-07 11:12:30", "from 1 of 4 ranks ('rank=0')"),
                                            ("rank=3 pid=4148424) INFO 08-07 11:12:30", "from 2 of 4 ranks")]):
    def cut_build(root: Path, cut_after: str = cut_after) -> list[str]:
        text = (DATA / TP4_LOG).read_text(encoding="utf-8")
        at = text.index("\n", text.index(cut_after)) + 1
        return ["check", write(root, "run.log", text[:at]), "--gpu", "H100"]

    add(f"logs-vllm-tp4-cut-{n}", cut_build, expect_in=expect_in)


# Compressed logs: gzip is read (the stdlib's zlib, bounded at the 64 MiB a log may hold once decompressed); other
# archives are named. A gzip log was "binary, not text" (a wrong reason); a gzip bomb must stop at the cap.
def _gzip_of(data: bytes) -> bytes:
    import gzip

    return gzip.compress(data, mtime=0)


def _gzip_bomb(root: Path) -> str:
    """100 MiB of zeros, gzip-compressed a MiB at a time (100 KB on disk)."""
    import zlib

    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"\0" * 2**20
    with open(root / "bomb.log.gz", "wb") as f:
        for _ in range(100):
            f.write(z.compress(chunk))
        f.write(z.flush())
    return str(root / "bomb.log.gz")


_LOG_8B = "vllm_logs/v0.8.5dev_l40s_llama3.1-8b_len32768.log"
add("logs-gzip-read", lambda root: ["check", write(root, "run.log.gz", _gzip_of((DATA / _LOG_8B).read_bytes())), *VLLM_8B,
                                    "--gpu", "L40S"], expect=0)
add("logs-gzip-cut", lambda root: ["check", write(root, "run.log.gz", _gzip_of((DATA / _LOG_8B).read_bytes())[:400])],
    expect_in="gzip-compressed but cut short")
add("logs-gzip-damaged", lambda root: ["check", write(root, "run.log.gz", b"\x1f\x8b\x08\x00" + b"\xff" * 64)],
    expect_in="gzip-compressed but damaged")
add("logs-gzip-bomb", lambda root: ["check", _gzip_bomb(root)], expect_in="more than the 67,108,864 bytes")
add("logs-gzip-stdin", lambda root: ["check", "-"], stdin=_gzip_of((DATA / _LOG_8B).read_bytes()), expect_in="gzip-compressed")
for kind, magic in [("bzip2", b"BZh91AY&SY"), ("xz", b"\xfd7zXZ\x00\x00"), ("zstd", b"\x28\xb5\x2f\xfd\x00"), ("zip", b"PK\x03\x04")]:
    _file(f"logs-archive-{kind}", magic + b"\x00" * 64, f"a {kind} archive")
