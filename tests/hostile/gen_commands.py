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


def _expected(label: str, key: str, value: str, real: bool) -> str:
    """The piece of the error line a bad value of a flag gives: the flag, and what is wrong with the value."""
    if key == "empty":
        return f"{label} is empty"
    if key == "big":
        return f"{label} '{'9' * 20}... is not a number kvbudget reads (more than 40 digits)"
    if key in ("nan", "inf"):
        return f"{label} must be a finite number, not {value}" if real else f"{label} '{value}' is not a whole number"
    if key == "text":
        return f"{label} 'lots' is not a {'number' if real else 'whole number'}"
    if key == "e30" and not real:
        return f"{label} '1e30' is not a whole number"
    if value.endswith("K"):  # vLLM's binary suffixes take no decimals
        return f"{label} '{value}': vLLM allows no decimals"
    return f"{label} is {float(value):g}" if real else f"{label} is {value}"


def _flag_cases(engine: str, words: list[str], flags: dict[str, list[str]], reals: tuple[str, ...], eq: bool = False) -> None:
    """Each bad value (BAD, then the flag's own: 0 where the engine refuses it, the value past its upper end)
    of each numeric flag; the error names the flag as the engine spells it (vLLM: dashes for underscores)."""
    for flag, extra in flags.items():
        label = "--" + flag[2:].replace("_", "-") if engine == "vllm" else flag
        for key, value in [*BAD.items(), *((f"x{n}", v) for n, v in enumerate(extra))]:
            expect_in = _expected(label, key, value, flag in reals)
            argv(f"cmd-{engine}{flag}-{key}", [*GPU, *words, flag, value], expect_in=expect_in)
            if eq and key in ("neg", "nan"):
                argv(f"cmd-{engine}{flag}-eq-{key}", [*GPU, *words, f"{flag}={value}"], expect_in=expect_in)


VLLM_REALS = ("--gpu-memory-utilization", "--gpu_memory_utilization", "--cpu-offload-gb")
_flag_cases("vllm", VLLM, {
    "--tensor-parallel-size": ["0"], "--pipeline-parallel-size": ["0"], "--data-parallel-size": ["0"], "--block-size": ["0"],
    "--max-num-seqs": ["0"], "--max-num-batched-tokens": ["0"], "--max-model-len": ["0", "1.5K"],
    "--gpu-memory-utilization": ["0", "1.5"], "--cpu-offload-gb": [], "--num-gpu-blocks-override": ["0"],
    "--kv-cache-memory-bytes": [], "--tensor_parallel_size": ["0"], "--gpu_memory_utilization": ["1.01"],
}, VLLM_REALS, eq=True)
_flag_cases("sglang", SGLANG, {
    "--tp": ["0"], "--pp-size": ["0"], "--dp": ["0"], "--context-length": ["0"], "--page-size": ["0"],
    "--max-running-requests": ["0"], "--max-total-tokens": ["0"], "--chunked-prefill-size": ["0"],
    "--mem-fraction-static": ["0", "1", "1.5"], "--cuda-graph-max-bs-decode": ["0"],
}, ("--mem-fraction-static",))
_flag_cases("trt", TRT, {
    "--tp_size": ["0"], "--pp_size": ["0"], "--max_batch_size": ["0"], "--max_num_tokens": ["0"], "--max_seq_len": ["0"],
    "--kv_cache_free_gpu_memory_fraction": ["0", "1", "1.5"],
}, ("--kv_cache_free_gpu_memory_fraction",))
LLAMA = ["llama-server", "-m", "llama-3.1-8b"]
_flag_cases("llamacpp", LLAMA, {"-c": [], "-b": [], "-ub": [], "-np": ["0"], "-ngl": []}, ())
for n, (shares, expect_in) in enumerate([
        ("nan", "-ts share must be a finite number, not nan"), ("-1", "-ts share is -1"), ("1,-1", "-ts share is -1"),
        ("0,0", "the shares add up to 0"), ("inf,1", "-ts share must be a finite number, not inf"),
        ("1e400", "-ts share is '1e400': far out of range"), ("a,b", "-ts share 'a' is not a number"),
        (",", "-ts ',': give one share per GPU"), ("1," * 300, "give one share per GPU")]):
    argv(f"cmd-llamacpp-ts-{n}", [*GPU, *LLAMA, "-ts", shares], expect_in=expect_in)
# llama.cpp's 0 means "the default" for -c, -b and -ub: accepted
for flag in ("-c", "-b", "-ub"):
    argv(f"cmd-llamacpp{flag}-zero-is-default", [*GPU, *LLAMA, flag, "0"], expect=0)
argv("cmd-llamacpp-np-auto", [*GPU, *LLAMA, "-np", "-1"], expect=0)
# flags llama-server's parser of the given build does not list stop it ('error: invalid argument: X')
BUILD = ["explain", "--gpu", "H100", "--llamacpp-build"]
for n, (build, words, expect_in) in enumerate([
        ("7000", ["--ctx-sise", "8192"], "--ctx-sise is not a flag of llama-server b7000"),
        ("11312", ["-p", "hello"], "-p is not a flag of llama-server b11312"),
        ("11312", ["--no-mmap"], "--no-mmap is a flag of llama.cpp builds of 2025-08 that b11312 no longer has"),
        ("11312", ["--draft", "16"], "--draft: llama-server b11312 stops on it"),
        ("9000", ["extra.gguf"], "extra.gguf: llama-server b9000 takes no bare word"),
        ("9000", ["--" + "x" * 5000], "is not a flag of llama-server b9000")]):
    argv(f"cmd-llamacpp-build-flag-{n}", [*BUILD, build, "--", *LLAMA, *words], expect_in=expect_in)

# vLLM reads --tensor_parallel_size as --tensor-parallel-size: honoured, not ignored
argv("cmd-vllm-underscore-honoured", [*GPU, *VLLM, "--tensor_parallel_size", "2", "--gpu_memory_utilization=0.8"], expect=0)

# kvbudget's own flags after -- (a command with unbalanced quotes: gen_logs' logs-vllm-command-unbalanced-*)
OWN = "is kvbudget's flag, not the engine's"
argv("cmd-json-after-dashes", [*GPU, *VLLM, "--json"], expect_in="--json " + OWN)
argv("cmd-json-after-dashes-llamacpp", [*GPU, "llama-server", "-m", "x.gguf", "--json"], expect_in="--json " + OWN)
argv("cmd-units-after-dashes", [*GPU, *VLLM, "--units=GB"], expect_in="--units " + OWN)
add("cmd-check-json-after-dashes",  # a log that exists, so that the check of the words after -- is what refuses it
    lambda root: ["check", write(root, "x.log", "INFO GPU KV cache size: 100 tokens\n"), "--", "--json"],
    expect_in="--json " + OWN)


def _options(case_id: str, flag_words: list[str], data: str | bytes, expect_in: str) -> None:
    add(case_id, lambda root: [*GPU, *flag_words, write(root, "opts.yaml", data)], expect_in=expect_in)


BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x, x, x]\n" + "".join(f"{c}: &{c} [{', '.join(['*' + p] * 12)}]\n"
                                                              for p, c in zip("abcdefghi", "bcdefghij", strict=True))
SMALL_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n"
                                                          for p, c in zip("abcdefg", "bcdefgh", strict=True)) + "max_num_seqs: *h\n"
# (what the file holds, the error's words) for a file both engines read the same way
OPTION_FILES = {"bomb": (BOMB, "more than 100 aliases"), "utf16": ("max_batch_size: 8\n".encode("utf-16"), "not UTF-8 text"),
                "latin1": ("max_seq_len: 8\n# \xe9\n".encode("latin-1"), "not UTF-8 text"),
                "deep": ("a: " + "[" * 5000 + "]" * 5000 + "\n", "nested more than 64 levels deep"),
                "big": ("max_batch_size: " + "9" * 5000 + "\n", "holds an integer with thousands of digits"),
                "binary": (bytes(range(256)), "not UTF-8 text")}
TRT_FILES = {**OPTION_FILES, "list": ("- 1\n- 2\n", "must hold a mapping of LLM API options"),
             "nan": ("max_batch_size: .nan\n", "opts.yaml': max_batch_size must be a whole number, not nan"),
             "neg": ("max_seq_len: -4\n", "opts.yaml': max_seq_len is -4"),
             "frac": ("kv_cache_config:\n  free_gpu_memory_fraction: .inf\n",
                      "opts.yaml': kv_cache_config.free_gpu_memory_fraction must be a finite number, not inf")}
VLLM_FILES = {**OPTION_FILES, "list": ("- 1\n", "must hold a mapping of engine arguments"),
              "nan": ("max_num_seqs: .nan\n", "opts.yaml': max_num_seqs 'nan' is not a whole number"),
              "neg": ("max_num_seqs: -4\n", "opts.yaml': max_num_seqs is -4"),
              "frac": ("gpu_memory_utilization: .nan\n", "opts.yaml': gpu_memory_utilization must be a finite number, not nan"),
              "small-bomb-in-a-flag": (SMALL_BOMB, "opts.yaml': max_num_seqs '<a list>' is not a whole number")}
for key, (data, expect_in) in TRT_FILES.items():
    _options(f"cmd-trt-options-{key}", [*TRT, "--extra_llm_api_options"], data, expect_in)
for key, (data, expect_in) in VLLM_FILES.items():
    _options(f"cmd-vllm-config-{key}", [*VLLM, "--config"], data, expect_in)
REGULAR = "not a regular file"
add("cmd-vllm-config-fifo", lambda root: [*GPU, *VLLM, "--config", _fifo(root)], expect_in=REGULAR)
add("cmd-vllm-config-dev-zero", lambda root: [*GPU, *VLLM, "--config", "/dev/zero"], expect_in=REGULAR)
add("cmd-trt-options-dev-zero", lambda root: [*GPU, *TRT, "--config", "/dev/zero"], expect_in=REGULAR)
add("cmd-vllm-config-folder", lambda root: [*GPU, *VLLM, "--config", str(root)], expect_in="is a folder")
add("cmd-vllm-config-over-cap", lambda root: [*GPU, *VLLM, "--config", _sparse(root)], expect_in="more than the 4,194,304 kvbudget reads")


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

# CUDA_VISIBLE_DEVICES before the program hides GPUs the parallel sizes need: the engine stops at start-up (was exit 0).
HIDDEN = "shows 1: vLLM stops at start-up"
argv("cmd-visible-devices-one-tp2", [*GPU, "CUDA_VISIBLE_DEVICES=0", *VLLM, "--tensor-parallel-size", "2"], expect_in=HIDDEN)
argv("cmd-visible-devices-stop-at-minus-one", [*GPU, "env", "CUDA_VISIBLE_DEVICES=0,-1,2", *VLLM, "-tp", "2"], expect_in=HIDDEN)
argv("cmd-visible-devices-none-sglang", [*GPU, "CUDA_VISIBLE_DEVICES=", *SGLANG], expect_in="shows 0: SGLang stops")
argv("cmd-visible-devices-enough", [*GPU, "CUDA_VISIBLE_DEVICES=0,1", *VLLM, "--tensor-parallel-size", "2"], expect=0)

# Each of these was read into a plan with exit 0 that the pasted command would not have run:
# a word-processor dash in place of '-' (the flag passed over: TP 1), a shell comment read as flags (TP 4), a
# CUDA_VISIBLE_DEVICES that names no device ('abc': CUDA shows none), two models (positional and --model: the
# second planned); a 1 MB pasted command held the reader for minutes (shlex grows a word one character at a time).
M = "meta-llama/Llama-3.1-8B-Instruct"
for n, (dash, flag) in enumerate([("\u2014", "tensor-parallel-size"), ("\u2013", "max-model-len"), ("\u2212", "tp"),
                                  ("\uff0d", "tp")]):
    for how, words in (("words", [*VLLM, f"{dash}{flag}", "2"]), ("quoted", [f"vllm serve {M} {dash}{flag} 2"])):
        argv(f"cmd-unicode-dash-{how}-{n}", [*GPU, *words], expect_in=f"starts with '{dash}'")
argv("cmd-unicode-dash-sglang", [*GPU, *SGLANG, "\u2014tp", "2"], expect_in="type -tp")
argv("cmd-unicode-dash-llama", [*GPU, "llama-server", "-m", "x.gguf", "\u2013c", "4096"], expect_in="type -c")
argv("cmd-comment-not-flags", [*GPU, f"vllm serve {M} --max-model-len 8192 # was -tp 4"], expect=0)
argv("cmd-comment-tp-checked", ["explain", "--gpu", "H100", "--num-gpus", "1", "--",
                                f"vllm serve {M} -tp 1 # -tp 4"], expect=0)
argv("cmd-comment-only", [*GPU, f"# vllm serve {M}"], expect_in="give the launch command")
for n, value in enumerate(["abc", "x,0", "none"]):
    argv(f"cmd-visible-devices-none-{n}", [*GPU, f"CUDA_VISIBLE_DEVICES={value}", *VLLM],
         expect_in="CUDA_VISIBLE_DEVICES shows 0")
argv("cmd-two-models", [*GPU, *VLLM, "--model", "qwen3-8b"], expect_in="the command names two models")
argv("cmd-two-models-eq", [*GPU, *VLLM, "--model=qwen3-8b"], expect_in="the command names two models")
argv("cmd-huge-word", [*GPU, f"vllm serve {M} --served-model-name " + "x" * 1_000_000],
     expect_in="1,000,064 characters, more than the 65,536")
argv("cmd-huge-words", [*GPU, *VLLM, *(["--max-model-len", "8192"] * 100_000)], expect_in="more than the 65,536")

# Two launch commands pasted together were read as one (the second's words as the first's flags, or the second
# engine's reader claiming the lot): exit 0 with a plan of neither. Refused; shell setup around one command is not.
TWO = "the text holds 2 launch commands"
for n, text in enumerate([f"vllm serve {M} -tp 2 && vllm serve Qwen/Qwen3-8B", f"vllm serve {M} -tp 2\nvllm serve Qwen/Qwen3-8B",
                          f"vllm serve {M}; python -m sglang.launch_server --model-path Qwen/Qwen3-8B",
                          f"trtllm-serve {M} || llama-server -m x.gguf", f"vllm serve {M} & vllm serve Qwen/Qwen3-8B &"]):
    argv(f"cmd-two-commands-{n}", [*GPU, text], expect_in=TWO)
argv("cmd-two-commands-words", [*GPU, *VLLM, "-tp", "2", "vllm", "serve", "qwen3-8b"], expect_in=TWO)
argv("cmd-two-commands-sglang-words", [*GPU, *SGLANG, "--tp", "2", *SGLANG], expect_in=TWO)
argv("cmd-one-command-in-setup", [*GPU, f"cd /srv && source venv/bin/activate; vllm serve {M} -tp 2 2>&1 | tee run.log"],
     expect=0)
argv("cmd-export-applies", [*GPU, f"export CUDA_VISIBLE_DEVICES=0 && vllm serve {M} -tp 2"], expect_in=HIDDEN)
# A CUDA_VISIBLE_DEVICES set through sudo or env and their options, or inside a container (docker run -e), was not seen:
# a command vLLM stops on (2 GPUs asked, 1 shown) was planned on 2 GPUs, exit 0
for n, text in enumerate([f"sudo CUDA_VISIBLE_DEVICES=0 vllm serve {M} -tp 2", f"sudo -E -u svc CUDA_VISIBLE_DEVICES=0 vllm serve {M} -tp 2",
                          f"env -i CUDA_VISIBLE_DEVICES=0 vllm serve {M} -tp 2",
                          f"docker run --gpus all -e CUDA_VISIBLE_DEVICES=0 vllm/vllm-openai:v0.10.1 --model {M} -tp 2"]):
    argv(f"cmd-visible-devices-wrapped-{n}", [*GPU, text], expect_in="shows 1: vLLM stops at start-up")
# docker run --entrypoint PROG IMAGE ... and apptainer exec IMAGE.sif PROG ... run PROG (were read as the image's
# entrypoint with PROG's words as its arguments: refused as a stray word or as two launch commands)
for n, text in enumerate([f"docker run --gpus all --entrypoint vllm vllm/vllm-openai:v0.10.1 serve {M} -tp 2",
                          f"docker run --gpus all --entrypoint python3 vllm/vllm-openai:v0.10.1 -m "
                          f"vllm.entrypoints.openai.api_server --model {M} -tp 2",
                          f"apptainer exec --nv vllm-openai_v0.10.1.sif vllm serve {M} -tp 2"]):
    argv(f"cmd-entrypoint-{n}", [*GPU, text], expect=0)
# Shell substitutions in a pasted command were cut at their spaces by shlex ('unrecognized arguments: 16384)': a
# wrong reason); each stays one word, and a flag kvbudget reads names it as the shell's to fill in
for n, text in enumerate([f"vllm serve {M} --max-model-len $(echo 16384)", f"vllm serve {M} -tp `nvidia-smi -L | wc -l`",
                          f"vllm serve {M} --gpu-memory-utilization $GMU", f"vllm serve {M} -tp ${{TP:-2}}"]):
    argv(f"cmd-shell-expansion-{n}", [*GPU, text], expect_in="is a shell expansion, which kvbudget does not evaluate")
argv("cmd-shell-expansion-open", [*GPU, f"vllm serve {M} -tp $(nproc"], expect_in="opens $( without closing it")
argv("cmd-process-substitution", [*GPU, f"vllm serve {M} -tp 2 > >(tee 'serve log') 2>&1"], expect=0)
# A Kubernetes args: [...] list (or a compose command: [...]) pasted as words: refused as 'unrecognized arguments: args:'
argv("cmd-yaml-list-0", [*GPU, f'args: ["--model", "{M}", "--max-model-len", "8192"]'],
     expect_in="the words look like a YAML or JSON list")
# the lines of a container's command and args (YAML): read as the container runs them (hostile round 15)
argv("cmd-yaml-list-1", [*GPU, f'command: ["vllm", "serve"]\nargs: ["{M}", "--max-model-len", "8192"]'], expect=0)
argv("cmd-lines-without-backslashes", [*GPU, f"vllm serve {M}\n  --tensor-parallel-size 2\n  --max-model-len 8192\n"],
     expect=0)

# A flag SGLang's or trtllm-serve's own parser does not know was passed over with a warning (exit 0: a misspelt
# --mem-fraction-statc planned the default fraction); each stops the engine at start-up, and is refused so.
for n, (words, expect_in) in enumerate([
        ([*SGLANG, "--mem-fraction-statc", "0.8"], "unrecognized arguments: --mem-fraction-statc` (did you mean --mem-fraction-static?)"),
        ([*SGLANG, "--context-lenght=8192"], "unrecognized arguments: --context-lenght` (did you mean --context-length?)"),
        ([*SGLANG, "--tp", "2", "stray"], "unrecognized arguments: stray`"),
        ([*SGLANG, "--e", "2"], "ambiguous option: --e could match"),
        ([*TRT, "--max_batch_sze", "8"], "No such option: --max_batch_sze` (did you mean --max_batch_size?)"),
        ([*TRT, "--tp-size", "2"], "No such option: --tp-size` (did you mean --tp_size?)"),
        ([*TRT, "--kv-cache-free-gpu-memory-fraction", "0.5"], "No such option: --kv-cache-free-gpu-memory-fraction"),
        ([*TRT, "--host", "0.0.0.0", "stray"], "Got unexpected extra argument (stray)")]):
    argv(f"cmd-unknown-flag-{n}", [*GPU, *words], expect_in=expect_in)
argv("cmd-sglang-known-flags-taken", [*GPU, *SGLANG, "--host", "0.0.0.0", "--trust-remote-code", "--cuda-graph-bs-decode",
                                      "1", "2", "4", "--port", "30000"], expect=0)
argv("cmd-trt-known-flags-taken", [*GPU, *TRT, "--host", "0.0.0.0", "--trust_remote_code", "--log_level", "info"], expect=0)

# A speculative method whose draft is a model of its own, with no "model": vLLM 0.33's SpeculativeConfig stops (was a
# warning, exit 0); --spec-* short forms are read into the config, a key given both ways refused.
for n, (flags, expect_in) in enumerate([
        (["--speculative-config", '{"method": "eagle"}'], "method eagle needs 'model' and 'num_speculative_tokens'"),
        (["--speculative-config", '{"method": "eagle3", "num_speculative_tokens": 2}'], "method eagle3 needs 'model'"),
        (["--spec-method", "eagle", "--spec-tokens", "2"], "method eagle needs 'model'"),
        (["--spec-tokens", "2", "--speculative-config", '{"num_speculative_tokens": 1, "method": "mtp"}'],
         "are mutually exclusive"),
        (["--spec-tokens", "-1"], "--spec-tokens is -1")]):
    argv(f"cmd-vllm-speculative-{n}", [*GPU, *VLLM, *flags], expect_in=expect_in)

# NCCL's integer switches given text NCCL releases read differently (0, or the default): refused (were read as off/on)
for n, env in enumerate(["NCCL_NVLS_ENABLE=abc", "NCCL_CUMEM_ENABLE=true", "NCCL_NVLS_ENABLE=on"]):
    argv(f"cmd-vllm-nccl-text-{n}", [*GPU, env, *VLLM, "-tp", "2"], expect_in=f"{env} is not a number NCCL reads")
argv("cmd-vllm-hf-overrides-two-ropes", [*GPU, *VLLM, "--hf-overrides", '{"rope_parameters": {"rope_type": "yarn", "factor": 4, '
     '"original_max_position_embeddings": 8192}, "rope_scaling": {"rope_type": "linear", "factor": 2}}'],
     expect_in="sets rope_scaling and rope_parameters to different values")

# --limit-mm-per-prompt values vLLM 0.33 refuses (engine/arg_utils.py json.loads only since 0.10; config/multimodal.py's
# dummy options: a count that is not an integer, a size below 1, a key the modality forbids): were planned, exit 0
VL = ["vllm", "serve", "qwen2.5-vl-7b", "--limit-mm-per-prompt"]
for n, (value, expect_in) in enumerate([
        ("image=2,video=1", "vLLM 0.33 reads a JSON object only"), ("", "vLLM 0.33 reads a JSON object only"),
        ('{"image": "2"}', "'image' needs a whole count of 0 or more items, got '2'"),
        ('{"image": {"count": 2, "width": -5}}', "image.width must be a whole number of 1 or more, got '-5'"),
        ('{"image": {"count": 2, "width": 1e308}}', "image.width must be a whole number of 1 or more"),
        ('{"video": {"count": 1, "fps": 2}}', "'video' takes count, num_frames, width, height, not 'fps'")]):
    argv(f"cmd-vllm-mm-limits-{n}", [*GPU, *VL, value], expect_in=expect_in)
argv("cmd-vllm-mm-limits-dotted-nested", [*GPU, *VL[:3], "--limit-mm-per-prompt.image.width", "0"],
     expect_in="image.width must be a whole number of 1 or more, got '0'")
argv("cmd-vllm-mm-limits-old-release", ["explain", "--gpu", "H100", "--vllm-version", "0.9.2", "--", *VL, "image=2,video=0"],
     expect=0)

# --hf-overrides of config.json keys kvbudget reads were planned as the published config (exit 0, a warning); they
# are applied to the config, so a value transformers or vLLM refuses is refused as config.json's would be
for n, (value, expect_in) in enumerate([
        ('{"max_position_embeddings": -1}', "field 'max_position_embeddings' must be positive, got -1"),
        ('{"max_position_embeddings": 0}', "must be positive, got 0"), ('{"max_position_embeddings": 1e30}', "31 digits"),
        ('{"max_position_embeddings": "8192"}', "must be a whole number, not '8192'"),
        ('{"num_hidden_layers": 0}', "field 'num_hidden_layers' must be positive, got 0"),
        ('{"num_key_value_heads": 3}', "3 KV heads do not divide 32 attention heads")]):
    argv(f"cmd-vllm-hf-overrides-{n}", [*GPU, *VLLM, "--hf-overrides", value], expect_in=expect_in)
argv("cmd-vllm-hf-overrides-layers-applied", [*GPU, *VLLM, "--hf-overrides", '{"num_hidden_layers": 16}'], expect=0)

# a --kv-cache-dtype vLLM 0.33 takes but has no attention backend for on the GPU (platforms/cuda.py): was planned
add("cmd-vllm-kv-fp8-inc-nvidia", lambda _r: ["explain", "--gpu", "H100", "--", "vllm", "serve", "llama-3.1-8b",
                                              "--kv-cache-dtype", "fp8_inc"], expect_in="No valid attention backend")
# fp8_ds_mla is the sparse-MLA page (DeepSeek-V3.2, GLM-5): no attention backend for a model without MLA lists it
# (vLLM 0.12-0.33 flash_attn.py, triton_attn.py, flashinfer.py supported_kv_cache_dtypes): was planned as 1-byte FP8
add("cmd-vllm-kv-fp8-ds-mla-dense", lambda _r: ["explain", "--gpu", "H100", "--", "vllm", "serve", "llama-3.1-8b",
                                                "--kv-cache-dtype", "fp8_ds_mla"], expect_in="sparse-MLA cache")
add("cmd-vllm-kv-fp8-ds-mla-gemma4-fit", lambda _r: ["fit", "gemma-4-26b-a4b", "--gpu", "H200", "--kv-dtype",
                                                     "fp8_ds_mla"], expect_in="a model without MLA")
# an empty --kv-dtype: SGLang's parser lists no '' (server_args.py choices); was planned as auto, exit 0, and for a
# ModelOpt FP8-KV checkpoint as a bf16 cache (auto would be FP8)
add("cmd-sglang-kv-empty-fit", lambda _r: ["fit", "gemma-4-31b-it-nvfp4", "--gpu", "H100", "--engine", "sglang",
                                           "--kv-dtype", ""], expect_in="SGLang's --kv-cache-dtype is one of")
add("cmd-vllm-kv-nvfp4-4over6-hopper", lambda _r: ["explain", "--gpu", "H100", "--", "vllm", "serve", "llama-3.1-8b",
                                                   "--kv-cache-dtype", "nvfp4_4over6"], expect_in="runs only on Blackwell")

# python -m vllm.entrypoints.openai.api_server MODEL: only `vllm serve` reads a positional model (entrypoints/cli/serve.py);
# the module's parser keeps it as model_tag, unread, and serves the default model (0.10+): was planned for MODEL, exit 0
add("cmd-vllm-module-bare-model", lambda _r: ["explain", "--gpu", "H100", "--", "python", "-m",
                                              "vllm.entrypoints.openai.api_server", "llama-3.1-8b"],
    expect_in="does not read the bare word 'llama-3.1-8b' as the model")
