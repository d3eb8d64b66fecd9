"""Launch commands of each engine with numeric flags outside the engine's own range (negative, zero
where the engine refuses it, NaN, infinite, 1e30, thousands of digits), unbalanced quotes, kvbudget's
own flags after --, and option files that are not what they claim. ``kvbudget explain`` must answer
each with one line and exit 2; llama.cpp's 0 = "the default" is accepted (exit 0)."""

from __future__ import annotations

from pathlib import Path

from corpus import add, argv, write

GPU = ["explain", "--gpu", "H100", "--"]
VLLM = ["vllm", "serve", "llama-3.1-8b"]
SGLANG = ["python", "-m", "sglang.launch_server", "--model-path", "llama-3.1-8b"]
TRT = ["trtllm-serve", "llama-3.1-8b"]
BAD = {"neg": "-3", "nan": "nan", "inf": "inf", "e30": "1e30", "big": "9" * 5000, "text": "lots", "empty": ""}

VLLM_FLAGS = {  # flag: the bad values beyond BAD (0 where vLLM refuses it)
    "--tensor-parallel-size": ["0"], "--pipeline-parallel-size": ["0"], "--data-parallel-size": ["0"],
    "--block-size": ["0", "-16"], "--max-num-seqs": ["0"], "--max-num-batched-tokens": ["0"],
    "--max-model-len": ["0", "-2", "1.5K"], "--gpu-memory-utilization": ["0", "1.5", "-0.1"],
    "--cpu-offload-gb": ["-5"], "--num-gpu-blocks-override": ["0"], "--kv-cache-memory-bytes": ["-1"],
    "--tensor_parallel_size": ["0"], "--gpu_memory_utilization": ["1.01"],
}
for flag, extra in VLLM_FLAGS.items():
    for key, value in [*BAD.items(), *((f"x{n}", v) for n, v in enumerate(extra))]:
        if flag in ("--gpu-memory-utilization", "--gpu_memory_utilization", "--cpu-offload-gb") and key == "e30":
            continue  # 1e30 is a float these take: refused by range below, not by form
        argv(f"cmd-vllm{flag}-{key}", [*GPU, *VLLM, flag, value])
        argv(f"cmd-vllm{flag}-eq-{key}", [*GPU, *VLLM, f"{flag}={value}"]) if key in ("neg", "nan") else None
argv("cmd-vllm-gmu-e30", [*GPU, *VLLM, "--gpu-memory-utilization", "1e30"])
argv("cmd-vllm-offload-e30", [*GPU, *VLLM, "--cpu-offload-gb", "1e30"])

SGLANG_FLAGS = {"--tp": ["0"], "--pp": ["0"], "--dp": ["0"], "--context-length": ["0", "-5"], "--page-size": ["0"],
                "--max-running-requests": ["0"], "--max-total-tokens": ["0"], "--chunked-prefill-size": ["0", "-2"],
                "--mem-fraction-static": ["0", "1", "1.5"], "--cuda-graph-max-bs": ["0"]}
for flag, extra in SGLANG_FLAGS.items():
    for key, value in [*BAD.items(), *((f"x{n}", v) for n, v in enumerate(extra))]:
        argv(f"cmd-sglang{flag}-{key}", [*GPU, *SGLANG, flag, value])

TRT_FLAGS = {"--tp_size": ["0"], "--pp_size": ["0"], "--max_batch_size": ["0"], "--max_num_tokens": ["0"],
             "--max_seq_len": ["0"], "--kv_cache_free_gpu_memory_fraction": ["0", "1", "1.5"]}
for flag, extra in TRT_FLAGS.items():
    for key, value in [*BAD.items(), *((f"x{n}", v) for n, v in enumerate(extra))]:
        argv(f"cmd-trt{flag}-{key}", [*GPU, *TRT, flag, value])

LLAMA = ["llama-server", "-m"]
LLAMA_FLAGS = {"-c": ["-1"], "-b": ["-1"], "-ub": ["-1"], "-np": ["0", "-2"], "-ngl": ["-2"]}
for flag, extra in LLAMA_FLAGS.items():
    for key, value in [*BAD.items(), *((f"x{n}", v) for n, v in enumerate(extra))]:
        add(f"cmd-llamacpp{flag}-{key}", lambda root, flag=flag, value=value: [*GPU, *LLAMA, "llama-3.1-8b", flag, value])
for n, shares in enumerate(["nan", "-1", "1,-1", "0,0", "inf,1", "1e400", "a,b", ",", "1," * 300]):
    argv(f"cmd-llamacpp-ts-{n}", [*GPU, *LLAMA, "llama-3.1-8b", "-ts", shares])
# llama.cpp's 0 means "the default" for -c, -b and -ub: accepted
for flag in ("-c", "-b", "-ub"):
    argv(f"cmd-llamacpp{flag}-zero-is-default", [*GPU, *LLAMA, "llama-3.1-8b", flag, "0"], expect=0)
argv("cmd-llamacpp-np-auto", [*GPU, *LLAMA, "llama-3.1-8b", "-np", "-1"], expect=0)

# vLLM reads --tensor_parallel_size as --tensor-parallel-size: honoured, not ignored
argv("cmd-vllm-underscore-honoured", [*GPU, *VLLM, "--tensor_parallel_size", "2", "--gpu_memory_utilization=0.8"], expect=0)

# commands a shell could not split, kvbudget's own flags after --
for n, words in enumerate([["vllm serve 'llama-3.1-8b"], ['vllm serve "llama-3.1-8b'], ["llama-server -m 'x.gguf"],
                           ["python -m sglang.launch_server --model-path 'x"]]):
    argv(f"cmd-unbalanced-{n}", ["explain", "--gpu", "H100", "--", "bash", "-c", *words])
argv("cmd-json-after-dashes", [*GPU, *VLLM, "--json"])
argv("cmd-json-after-dashes-llamacpp", [*GPU, *LLAMA, "x.gguf", "--json"])
argv("cmd-units-after-dashes", [*GPU, *VLLM, "--units=GB"])
argv("cmd-check-json-after-dashes", ["check", "x.log", "--", "--json"])


def _options(case_id: str, flag_words: list[str], data: str | bytes) -> None:
    add(case_id, lambda root: [*GPU, *flag_words, write(root, "opts.yaml", data)])


BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x, x, x]\n" + "".join(f"{c}: &{c} [{', '.join(['*' + p] * 12)}]\n"
                                                              for p, c in zip("abcdefghi", "bcdefghij", strict=True))
SMALL_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n"
                                                          for p, c in zip("abcdefg", "bcdefgh", strict=True)) + "max_num_seqs: *h\n"
OPTION_FILES = {"bomb": BOMB, "utf16": "max_batch_size: 8\n".encode("utf-16"), "latin1": "max_seq_len: 8\n# \xe9\n".encode("latin-1"),
                "deep": "a: " + "[" * 5000 + "]" * 5000 + "\n", "list": "- 1\n- 2\n", "nan": "max_batch_size: .nan\n",
                "big": "max_batch_size: " + "9" * 5000 + "\n", "neg": "max_seq_len: -4\n",
                "frac": "kv_cache_config:\n  free_gpu_memory_fraction: .inf\n", "binary": bytes(range(256))}
for key, data in OPTION_FILES.items():
    _options(f"cmd-trt-options-{key}", [*TRT, "--extra_llm_api_options"], data)
    _options(f"cmd-vllm-config-{key}", [*VLLM, "--config"], data if key not in ("list", "neg", "frac", "nan") else
             {"list": "- 1\n", "neg": "max_num_seqs: -4\n", "frac": "gpu_memory_utilization: .nan\n",
              "nan": "max_num_seqs: .nan\n"}[key])
_options("cmd-vllm-config-small-bomb-in-a-flag", [*VLLM, "--config"], SMALL_BOMB)
add("cmd-vllm-config-fifo", lambda root: [*GPU, *VLLM, "--config", _fifo(root)])
add("cmd-vllm-config-dev-zero", lambda root: [*GPU, *VLLM, "--config", "/dev/zero"])
add("cmd-trt-options-dev-zero", lambda root: [*GPU, *TRT, "--config", "/dev/zero"])
add("cmd-vllm-config-folder", lambda root: [*GPU, *VLLM, "--config", str(root)])
add("cmd-vllm-config-over-cap", lambda root: [*GPU, *VLLM, "--config", _sparse(root)])


def _fifo(root: Path) -> str:
    import os

    path = root / "opts.fifo"
    os.mkfifo(path)
    return str(path)


def _sparse(root: Path) -> str:
    path = root / "big.yaml"
    with open(path, "wb") as f:
        f.truncate(4 * 2**20 + 1)
    return str(path)
