"""A TensorRT-LLM start-up log read as a run: the settings it shows, its release, its device and the figures it
printed. The settings go through the same reader as a pasted ``trtllm-serve`` command (``command.trtllm_fields``):
the launch command where the log holds one (trtllm-serve, or trtllm-bench's flags by their trtllm-serve names), then
what the executor prints of its configuration (the C++ runtime's ``TRTGptModel`` lines of an engine, the PyTorch
backend's ``max_seq_len=..., max_num_requests=..., max_num_tokens=...``, trtllm-bench's summary), then the flags given
after ``--``. Settings no line shows are TensorRT-LLM's defaults, named in a note (``assumed``)."""

from __future__ import annotations

import re

from ..._record import record, replace
from ...inputs import excerpt, excerpt_path, split_command
from ...units import InputError
from ..logscan import MAX_GB, NUM, LogText, count, figure
from .build_command import build_fields
from .command import option_takes, trtllm_fields
from .settings import TrtllmSettings


@record
class TrtllmFigures:
    tokens: int | None = None  # "Allocated X GiB for max tokens in paged KV cache (T)": T
    pool_gib: float | None = None  # X
    blocks: int | None = None  # "Number of blocks in KV cache primary pool: N" / "primary blocks=N"
    total_gib: float | None = None  # the device total ("total: T GiB", "device total memory T GiB")
    available_gib: float | None = None  # engine: "available: A GiB" (free memory when the pool is sized; the least
    # over the ranks that print it: each rank's pool is the smallest rank's, kvCacheManager.cpp's allreduce MIN)
    available_most_gib: float | None = None  # the most any rank printed (the same as available_gib on one rank)
    kv_available_gib: float | None = None  # PyTorch: "available KV cache memory when calculating max tokens: A GiB"
    per_token: float | None = None  # PyTorch: "kv size [per token] is S" (bytes)
    started: bool | None = None
    weights_gib: float | None = None  # PyTorch: "Rank R uses X GB for model weights" (model_engine.py: GiB, 1024**3)
    # PyTorch: KvCacheCreator's profiling lines (_torch/pyexecutor/_util.py, 0.19 to main in 2026), in GiB
    outside_torch_gib: float | None = None  # "Memory used outside torch (e.g., NCCL and CUDA graphs) ...: X GiB"
    # "Memory used after loading model weights (outside torch) in memory usage profiling: X GiB": the device's used
    # memory less torch's allocated bytes before the dummy requests run (the estimation pool and CUDA graphs in it)
    after_loading_outside_gib: float | None = None
    peak_gib: float | None = None  # "Peak memory during memory usage profiling (torch + non-torch): X GiB"
    dynamic_gib: float | None = None  # "Memory dynamically allocated during inference (inside torch) ...: X GiB"
    temporary_kv_gib: float | None = None  # "tmp kv_mem X GiB" / "temporary kv cache memory during profiling X GiB"
    # a CUDA out-of-memory message's "Process P has X MiB memory in use" for each process on the GPU (PyTorch's
    # allocator, c10/cuda/CUDACachingAllocator.cpp): the GiB of all but the one holding the most (the run's own)
    other_processes_gib: float | None = None


@record
class TrtllmRun:
    model: str | None
    settings: TrtllmSettings
    read_from: tuple[str, ...]
    assumed: tuple[str, ...]  # the settings no line shows, as "name value (what it is)"
    gpu_name: str | None
    figures: TrtllmFigures
    warnings: tuple[str, ...]
    tp_from_ranks: str = ""  # where TP was read from the ranks the log shows ("": a line names it, or none shows ranks)


# A run's start: the version line TensorRT-LLM prints as it is imported ("[TensorRT-LLM] TensorRT-LLM version: X";
# 1.x "TensorRT LLM version") and the LLM API's backend line (llmapi/llm.py "Using LLM with PyTorch backend"). Every
# rank of one run starts before any of them sizes its pool (the pool is sized after the model is loaded, and agreed over
# the ranks: kvCacheManager.cpp's allreduce MIN), so a start after a pool line (or after the executor's failure) is
# another run's: a restarted server, or logs pasted one after another.
_RUN_STARTS = ("TensorRT-LLM version: ", "TensorRT LLM version: ", "Using LLM with PyTorch backend",
               "Using LLM with AutoDeploy backend")
_RUN_ENDS = ("for max tokens in paged KV cache", "Executor creation failed")


def last_run(log: LogText) -> tuple[int, LogText]:
    """How many runs the log holds and the last one's lines (from its first start line after the previous run's pool),
    each line looked at once."""
    text = log.text
    runs, ended, begin = 1, False, 0
    for start, stop, _ in log.lines(_RUN_STARTS + _RUN_ENDS):
        if any(end in text[start:stop] for end in _RUN_ENDS):
            ended = True
        elif ended:
            runs, ended, begin = runs + 1, False, start
    return runs, (log if begin == 0 else LogText(text[begin:]))


_MAX_RANKS = 1 << 16


def ranks(log: LogText) -> tuple[int, str] | None:
    """The ranks (tp x pp) a run's lines show, and where: the LLM API's rank tags ("[TRT-LLM] [RANK 7] [I] ...",
    tensorrt_llm/logger.py), the C++ runtime's "MPI size: N, rank: R" (worldConfig.cpp), or an engine's
    per-rank lines: each rank loads its engine ("Loaded engine size", tllmRuntime.cpp) and allocates its own pool of
    the size every rank agreed on, so as many engine loads as pool lines of one size are that many ranks. None:
    one rank, or nothing shows how many."""
    tags = [int(m.group(1)) for m in log.each("[RANK ", r"\[RANK ([0-9]{1,5})\]")]
    if tags and max(tags) > 0:
        return max(tags) + 1, f"the ranks' tags ([RANK 0] ... [RANK {max(tags)}])"
    mpi = [int(m.group(1)) for m in log.each("MPI size: ", r"MPI size: ([0-9]{1,5}),")]
    if mpi and 1 < max(mpi) <= _MAX_RANKS:
        return max(mpi), f"the runtime's 'MPI size: {max(mpi)}' line"
    if log.has("Using LLM with PyTorch backend"):  # its estimation pass allocates a pool of its own
        return None
    engines = sum(1 for _ in log.lines("Loaded engine size: "))
    pools = {m.group(1) for m in log.each("GiB for max tokens in paged KV cache (", r"paged KV cache \(" + NUM + r"\)")}
    if engines > 1 and len(pools) == 1 and sum(1 for _ in log.lines("GiB for max tokens in paged KV cache (")) == engines:
        return engines, f"the {engines} ranks' engine loads and pools ('Loaded engine size', one pool size)"
    return None


# trtllm-bench's flags (tensorrt_llm/bench/benchmark/throughput.py and utils/general.py of 0.20) under the trtllm-serve
# names the same settings have; its other flags set no memory kvbudget models
_BENCH = {"--tp": "--tp_size", "--pp": "--pp_size", "--ep": "--ep_size", "--backend": "--backend",
          "--kv_cache_free_gpu_mem_fraction": "--kv_cache_free_gpu_memory_fraction", "--max_batch_size": "--max_batch_size",
          "--max_num_tokens": "--max_num_tokens", "--max_seq_len": "--max_seq_len"}
_OPTION_FILES = ("--extra_llm_api_options", "--config")


# What may stand before a command's program on its line: a shell prompt, environment assignments, a path, a wrapper
_SHELL = re.compile(r"(?:.{0,200}?(?:[$#>\u276f\u2717;|&]|&&) +)?(?:[A-Za-z_][A-Za-z0-9_]{0,60}=[^ ]{0,200} +){0,20}"
                    r"(?:[^ ]{0,200}/)?")


def _command(log: LogText) -> tuple[list[str], list[str]] | None:
    """A trtllm-serve or trtllm-bench command in the log as trtllm-serve arguments (options files left out: the path is
    the run's machine's), and the warnings; None without one."""
    for start, stop, i in log.lines(("trtllm-serve ", "trtllm-bench ")):
        line = log.text[start:stop]
        if i - start > 2000 or not _SHELL.fullmatch(line[:i - start]):  # prose ("Starting trtllm-serve for ..."), not a command
            continue
        bench = line.find("trtllm-bench ", max(i - 1, 0), i + 14) >= 0
        try:
            words = split_command(line[i + len("trtllm-bench " if bench else "trtllm-serve "):])
        except InputError:
            return None
        warnings: list[str] = []
        out: list[str] = []
        model = None
        j = 0
        while j < len(words):
            name, eq, value = words[j].partition("=")
            j += 1
            takes = not eq and j < len(words) and not words[j].startswith("-")
            value = value if eq else words[j] if takes else ""
            if bench and name == "--model":
                model, j = value, j + takes
            elif name in _OPTION_FILES:
                warnings.append(f"the log's command reads {name} {excerpt(value, 60)}, a file of the run's machine: its "
                                "settings are not read (give them after --)")
                j += takes
            elif bench:
                if name in _BENCH:
                    out += [_BENCH[name], value]
                j += takes if name.startswith("--") else 0
            elif name == "serve" and not out and model is None:
                continue
            elif model is None and not name.startswith("-"):
                model = name
            else:
                out.append(words[j - 1])
        return ([model] if model else ["<no model>"]) + out, warnings
    return None


# Lines only the C++ runtime of a TensorRT engine prints (tllmRuntime.cpp, trtGptModelInflightBatching.cpp,
# kvCacheManager.cpp's engine-path measurement, TensorRT's own execution context)
_ENGINE_MARKS = ("Loaded engine size: ", "TRTGptModel ", "Engine version ", "IExecutionContext",
                 "Memory usage when calculating max tokens in paged kv cache", "for execution context memory")


# Lines only the PyTorch backend prints: the LLM API's backend line, and KvCacheCreator's profiling lines
# (_torch/pyexecutor/_util.py, 0.19 to main in 2026)
_PYTORCH_MARKS = ("Using LLM with PyTorch backend", "Peak memory during memory usage profiling",
                  "Estimated max tokens in KV cache")
# trtllm-bench's own lines: its batch heuristics (bench/benchmark/utils/general.py) and its report's configuration
_BENCH_MARKS = ("Using heuristics or pre-defined settings: max_batch_size=", "Max Runtime Batch Size:")
# A pre-quantized checkpoint's quant_algo as the LLM API logs it ("Setting quant_algo=FP8 form HF quant config.",
# llmapi/llm_utils.py, from the checkpoint's hf_quant_config.json; QuantAlgo names, tensorrt_llm/quantization/mode.py)
# and the weight format kvbudget plans for it; the others (mixed precision, W4A8, INT8 SmoothQuant) are not read
_QUANT_ALGOS = {"FP8": "fp8", "FP8_BLOCK_SCALES": "fp8", "FP8_PER_CHANNEL_PER_TOKEN": "fp8", "NVFP4": "nvfp4",
                "W4A16_AWQ": "awq", "W4A16_GPTQ": "gptq"}


def launcher(log: LogText) -> str | None:
    """The program that started the run, by its own lines: trtllm-bench (its heuristics or report lines, or its
    command), trtllm-serve (its command or start line), else the LLM API (its backend line, which trtllm-serve and
    trtllm-bench print too, through the LLM class they build); None where no line shows one."""
    if any(log.has(m) for m in _BENCH_MARKS) or log.has("trtllm-bench "):
        return "trtllm-bench"
    if log.has("trtllm-serve"):
        return "trtllm-serve"
    return "the LLM API" if log.has("Using LLM with PyTorch backend") else None


def _int(log: LogText, literal: str, pattern: str, name: str) -> int | None:
    m = log.last(literal, pattern)
    return count(m.group(1), name, 1, 1 << 40) if m else None


def _executor(log: LogText) -> tuple[list[str], dict[str, object]]:
    """What the executor and trtllm-bench print of the run's configuration: trtllm-serve flags, and the fields no
    flag sets."""
    argv: list[str] = []
    fields: dict[str, object] = {}
    # the C++ runtime (trtGptModelInflightBatching.cpp: "TRTGptModel maxBatchSize: N" ...), trtllm-bench's summary,
    # then the PyTorch executor's line (py_executor_creator.py: "max_seq_len=..., max_num_requests=..., max_num_tokens=")
    batch = (_int(log, "TRTGptModel maxBatchSize: ", r"TRTGptModel maxBatchSize: " + NUM, "TRT-LLM maxBatchSize")
             or _int(log, "Max Runtime Batch Size:", r"Max Runtime Batch Size:[ \t]{0,40}" + NUM, "TRT-LLM Max Runtime Batch Size")
             or _int(log, "max_num_requests=", r"max_num_requests=" + NUM, "TRT-LLM max_num_requests"))
    tokens = (_int(log, "TRTGptModel maxNumTokens: ", r"TRTGptModel maxNumTokens: " + NUM, "TRT-LLM maxNumTokens")
              or _int(log, "Max Runtime Tokens:", r"Max Runtime Tokens:[ \t]{0,40}" + NUM, "TRT-LLM Max Runtime Tokens")
              or _int(log, "max_num_tokens=", r"max_num_tokens=" + NUM, "TRT-LLM max_num_tokens"))
    seq = (_int(log, "TRTGptModel maxSequenceLen: ", r"TRTGptModel maxSequenceLen: " + NUM, "TRT-LLM maxSequenceLen")
           or _int(log, "Max Sequence Length:", r"Max Sequence Length:[ \t]{0,40}" + NUM, "TRT-LLM Max Sequence Length"))
    # 1.x's KV cache manager line: "..., max sequence length=N"
    seq = seq or _int(log, "max sequence length=", r"max sequence length=" + NUM, "TRT-LLM max sequence length")
    if seq is None and not log.has("Adjusted max_seq_len"):  # the first pass's, before the pool shortened it
        m = log.first("max_seq_len=", r"max_seq_len=" + NUM + r", max_num_requests=")
        seq = count(m.group(1), "max_seq_len", 1, 1 << 40) if m else None
    for flag, value in (("--max_batch_size", batch), ("--max_num_tokens", tokens), ("--max_seq_len", seq),
                        ("--tp_size", _int(log, "TP Size:", r"TP Size:[ \t]{0,40}" + NUM, "TRT-LLM TP Size")),
                        ("--pp_size", _int(log, "PP Size:", r"PP Size:[ \t]{0,40}" + NUM, "TRT-LLM PP Size"))):
        if value is not None:
            argv += [flag, str(value)]
    both = log.last("free_gpu_memory_fraction and max_tokens are set (to ",
                    r"free_gpu_memory_fraction and max_tokens are set \(to " + NUM)
    peak = log.last("fraction is set ", r"fraction is set " + NUM)
    if both and peak and abs(figure(both.group(1), "fraction", 0, 1) - figure(peak.group(1), "fraction", 0, 1)) > 1e-3:
        # one run prints one fraction (py_executor_creator.py, resource_manager.py): check and calibrate read the first
        raise InputError(f"the log prints two fractions, {both.group(1)[:20]} ('Both free_gpu_memory_fraction and "
                         f"max_tokens are set') and {peak.group(1)[:20]} ('fraction is set'): lines of two runs or an "
                         "edit; give one run's start-up log as TensorRT-LLM printed it")
    frac = both or peak
    if frac:
        argv += ["--kv_cache_free_gpu_memory_fraction", f"{round(figure(frac.group(1), 'fraction', 0, 1), 6):g}"]
    else:
        pct = log.last("KV Memory Percentage:", r"KV Memory Percentage:[ \t]{0,40}" + NUM + "%")
        if pct:
            argv += ["--kv_cache_free_gpu_memory_fraction", f"{figure(pct.group(1), 'KV Memory Percentage', 0, 100) / 100:g}"]
    if any(log.has(m) for m in _PYTORCH_MARKS):
        argv += ["--backend", "pytorch"]
    elif any(log.has(m) for m in _ENGINE_MARKS):
        argv += ["--backend", "tensorrt"]
    kv = (log.last("KV Cache Dtype:", r"KV Cache Dtype:[ \t]{0,40}([A-Za-z0-9_]{1,20})")
          or log.last("Setting kv_cache_quant_algo=", r"Setting kv_cache_quant_algo=(?:QuantAlgo\.)?(FP8)\b"))
    if kv and kv.group(1).lower() not in ("none", "auto"):
        argv += ["--kv_cache_dtype", kv.group(1).lower()]
    quant = log.last("Quantization:", r"(?m)^Quantization:[ \t]{0,40}([A-Za-z0-9_]{1,20})")
    algo = log.last("Setting quant_algo=", r"Setting quant_algo=(?:QuantAlgo\.)?([A-Z0-9_]{1,40}) f[or]{2}m HF")
    if quant and quant.group(1).lower() not in ("none", "auto"):
        fields["quantization"] = quant.group(1).lower()
    elif algo and algo.group(1) in _QUANT_ALGOS:
        fields["quantization"] = _QUANT_ALGOS[algo.group(1)]
    if batch is not None and "cuda_graph_max_batch_size" not in fields and any(log.has(m) for m in _BENCH_MARKS):
        # trtllm-bench captures CUDA graphs up to its max_batch_size (bench/benchmark/utils/general.py get_settings:
        # cuda_graph_max_batch_size = max_batch_size, padding on); an options file's cuda_graph_config would change it
        fields["cuda_graph_max_batch_size"] = batch
    tpb = (_int(log, "Number of tokens per block: ", r"Number of tokens per block: " + NUM, "TRT-LLM tokens per block")
           or _int(log, "tokens per block=", r"tokens per block=" + NUM, "TRT-LLM tokens per block"))
    if tpb is not None:
        fields["tokens_per_block"] = tpb
    beam = _int(log, "TRTGptModel maxBeamWidth: ", r"TRTGptModel maxBeamWidth: " + NUM, "TRT-LLM maxBeamWidth")
    if beam is not None:
        fields["max_beam_width"] = beam
    version = log.last(("TensorRT-LLM version: ", "TensorRT LLM version: ", "TensorRT-LLM Version: ", "Engine version "),
                       r"(?:TensorRT[- ]LLM [Vv]ersion: *|Engine version )v?([0-9]{1,2}\.[0-9]{1,3}[0-9A-Za-z.+-]{0,30})")
    if version:
        fields["release"] = version.group(1).rstrip(".")
    return argv, fields


def _fields(words: list[str], where: str) -> tuple[str | None, dict[str, object], list[str]]:
    try:
        model, fields, warnings = trtllm_fields(words)
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None
    return (None if model == "<no model>" else model), fields, warnings


def read_run(log: LogText, flags: list[str] | None = None, release: str | None = None, *, whole: bool = False,
             release_from: str = "--trtllm-release") -> TrtllmRun:
    """The run a TensorRT-LLM log shows: settings from its launch command, then the executor's lines, then ``flags``
    (after ``--``: trtllm-serve's own flags, or with ``whole`` the arguments of a whole ``trtllm-serve MODEL ...``,
    whose model is taken), each over the one before; ``release`` (found as ``release_from`` says) over the log's."""
    where = "the command after --" if whole else "the flags after --"
    fields: dict[str, object] = {}
    read_from: list[str] = []
    warnings: list[str] = []
    model = None
    built = build_fields(log)  # the engine's build command: its limits, under what the run's own lines say
    if built:
        fields.update(built)
        read_from.append("the engine's build command")
    found = _command(log)
    if found is not None:
        words, said = found
        warnings += said
        try:
            model, launched, more = _fields(words, "the log's launch command")
            fields.update(launched)
        except InputError as exc:
            warnings.append(f"{exc}: the command's settings are not read")
        else:
            # the run's flags that change no memory are not worth a line each (a user's own, after --, are)
            warnings += [f"the log's launch command: {w}" for w in more if not w.endswith("in kvbudget's model: ignored")]
            read_from.append("launch command")
    argv, direct = _executor(log)
    if argv:
        fields.update(_fields(["<no model>", *argv], "the log's executor settings")[1])
    if argv or direct:
        read_from.append("the executor's settings lines")
    fields.update(direct)
    if flags:
        _options_here(flags, where)
        named, got, more = _fields(_with_model(flags) if whole else ["<no model>", *flags], where)
        model = named or model
        fields.update(got)
        warnings += [f"{where}: {w}" for w in more]
        read_from.append(where)
    tp_from_ranks = ""
    shown = ranks(log) if "tp" not in fields else None  # the ranks the lines show are tp x pp
    pp = fields.get("pp", 1)
    pp = pp if isinstance(pp, int) and pp > 0 else 1
    if shown is not None and shown[0] % pp == 0:
        fields["tp"] = shown[0] // pp
        tp_from_ranks = shown[1]
        read_from.append(shown[1])
    elif shown is not None:
        warnings.append(f"{shown[1]} show {shown[0]} ranks, which pp_size {pp} does not divide: TP is not read from "
                        "them (give -- --tp_size N)")
    if release is not None:
        from .policy import release_line

        release_line(release)  # refused here, in one line, if it names no release
        fields["release"] = release
        read_from.append(release_from)
    if log.has("Using LLM with AutoDeploy backend"):
        warnings.append("the run used TensorRT-LLM's AutoDeploy backend, which sizes its cache its own way: kvbudget "
                        "plans the PyTorch backend's")
    settings = replace(TrtllmSettings(), **fields)
    return TrtllmRun(model, settings, tuple(read_from), assumed(settings, fields), _gpu_name(log), figures(log),
                     tuple(warnings), tp_from_ranks)


def _with_model(args: list[str]) -> list[str]:
    """trtllm-serve's arguments with the model it takes first (click reads it among the options): as they are where
    a word that is no option's value names it, else with a stand-in (the model is then --model's, or the log's)."""
    j = 0
    while j < len(args):
        name, eq, _ = args[j].partition("=")
        if not name.startswith("-"):
            return args
        j += 1 if eq or option_takes(name) == 0 else 2
    return ["<no model>", *args]


def _options_here(words: list[str], where: str) -> None:
    """An LLM API options file named after ``--`` must be on this machine (kvbudget reads it): one line where it is
    not, with the fix (the log's own command's file is the run's machine's, and is not read)."""
    import os

    for i, word in enumerate(words):
        name, eq, value = word.partition("=")
        if name not in _OPTION_FILES:
            continue
        path = value if eq else words[i + 1] if i + 1 < len(words) else ""
        if path and not os.path.lexists(path):
            raise InputError(f"{where}: {name} {excerpt_path(path)} is not on this machine: give the file's path here "
                             "(kvbudget reads its settings), or give its settings as trtllm-serve flags instead")


# NVIDIA's release image of TensorRT-LLM on NGC is tagged with the TensorRT-LLM version it holds
# (nvcr.io/nvidia/tensorrt-llm/release:x.y.z, docker/README.md of TensorRT-LLM; the weekly builds of main add rcN).
# Triton's tritonserver:YY.MM-trtllm-python-py3 images are tagged by Triton's month, not by it: not read.
_IMAGE = "tensorrt-llm/release:"
_IMAGE_TAG = re.compile(r"v?([0-9]{1,2}\.[0-9]{1,3}\.[0-9]{1,3}(?:rc[0-9]{1,3}(?:\.post[0-9]{1,3})?)?)")
COMMAND_EXAMPLE = "trtllm-serve MODEL ..."


def whole_command(words: list[str], release: str | None) -> tuple[list[str], str | None, str, list[str]]:
    """A whole TensorRT-LLM launch command after ``check LOG --`` (``compared.run_words``) as trtllm-serve's arguments
    (``cmdscan.launch_args``, the reader ``explain`` uses), the release to plan (``release``, else the one the
    nvcr.io/nvidia/tensorrt-llm/release:TAG image names), how it was found, and the warnings."""
    from ..cmdscan import launch_args
    from ..compared import command_env

    _, args, at = launch_args(words)
    warnings = [f"the command after --: {excerpt(f'{key}={value}', 50)[1:-1]} is not read (no TensorRT-LLM "
                "environment variable is in kvbudget's model)" for key, value in command_env(words[:at])
                if key.startswith(("TLLM_", "TRTLLM_"))]
    image = next((w for w in words[:at] if _IMAGE in w), None)
    if image is None:
        return args, release, "--trtllm-release", warnings
    tag = image.rsplit(":", 1)[-1] if "@" not in image else ""
    m = _IMAGE_TAG.fullmatch(tag)
    if m is None:
        if release is None and tag != "latest":
            warnings.append(f"the image tag {excerpt(tag or image, 40)} names no TensorRT-LLM release: planned with the "
                            "log's (or the current source's) rules; give --trtllm-release for the one it runs")
        return args, release, "--trtllm-release", warnings
    if release is None:
        return args, m.group(1), f"the command's image {excerpt(image, 60)[1:-1]}", warnings
    from .policy import release_line

    if release_line(release) != release_line(m.group(1)):
        warnings.append(f"the image {excerpt(image, 60)[1:-1]} is TensorRT-LLM {m.group(1)}; planned with "
                        f"--trtllm-release {release} as given")
    return args, release, "--trtllm-release", warnings


_DEFAULTS = (("backend", "pytorch"), ("free_gpu_memory_fraction", "0.9"),
             ("tokens_per_block", "32 on the PyTorch backend, 64 for an engine"), ("max_batch_size", "2048"),
             ("max_num_tokens", "8192"), ("max_seq_len", "the model's max_position_embeddings"),
             ("tp", "1"), ("kv_cache_dtype", "auto"), ("quantization", "the checkpoint's"),
             ("release", "the current source"))


def assumed(settings: TrtllmSettings, fields: dict[str, object]) -> tuple[str, ...]:
    """The settings kvbudget planned with that nothing in the log (or after --) set: TensorRT-LLM's defaults."""
    return tuple(f"{name} {value}" for name, value in _DEFAULTS if name not in fields)


def _gpu_name(log: LogText) -> str | None:
    """The device a line names (Triton's "Collecting metrics for GPU 0: NVIDIA ...")."""
    m = log.last("for GPU 0: NVIDIA ", r"for GPU 0: NVIDIA ([A-Za-z0-9 -]{1,40})")
    return m.group(1).strip() if m else None


def rank_available(log: LogText) -> list[float]:
    """Every "Memory usage when calculating max tokens in paged kv cache: total: T GiB, available: A GiB" line's A (the
    engine path prints one a rank), in GiB."""
    return [figure(m.group(2), "TRT-LLM available GPU memory (GiB)", 0, MAX_GB)
            for m in log.each("Memory usage when calculating max tokens in paged kv cache",
                              r"total: " + NUM + r" GiB, available: " + NUM + r" GiB")]


def figures(log: LogText) -> TrtllmFigures:
    pool = log.last("GiB for max tokens in paged KV cache (",
                    r"Allocated " + NUM + r" GiB for max tokens in paged KV cache \(" + NUM + r"\)")
    blocks = (log.last("Number of blocks in KV cache primary pool: ", r"Number of blocks in KV cache primary pool: " + NUM)
              or log.last("primary blocks=", r"primary blocks=" + NUM))
    usage = log.last("Memory usage when calculating max tokens in paged kv cache",
                     r"total: " + NUM + r" GiB, available: " + NUM + r" GiB")
    free = rank_available(log)
    device = log.last("device total memory ", r"device total memory " + NUM + " GiB")
    per = log.last("available KV cache memory when calculating max tokens: ",
                   r"available KV cache memory when calculating max tokens: " + NUM
                   + r" GiB[^\n]{0,400}?kv size(?: per token)? is " + NUM)
    # before 0.9 (the pre-0.9 wording): "Using N tokens in paged KV cache", "Max tokens in paged KV cache: N."
    legacy = (log.last(" tokens in paged KV cache", r"Using " + NUM + r" tokens in paged KV cache")
              or log.last("Max tokens in paged KV cache: ", r"Max tokens in paged KV cache: " + NUM))
    # the executor's stop for lack of memory: before the pool (the C++ executor), or after it, as the PyTorch backend's
    # CUDA-graph capture on what the pool left ("Failed to initialize executor on rank 0: CUDA out of memory",
    # py_executor_creator.py / the LLM API's worker)
    # before 0.9 the pool's exact size: "Allocate N bytes for k/v cache." (the C++ runtime of 0.7 and 0.8)
    legacy_bytes = None if pool else log.last("bytes for k/v cache", r"Allocate " + NUM + r" bytes for k/v cache")
    failed = log.has("Executor creation failed due to insufficient GPU memory") or bool(
        log.last("Failed to initialize executor on rank", r"Failed to initialize executor on rank [0-9]{1,5}: CUDA out of memory"))
    total = usage.group(1) if usage else device.group(1) if device else None
    return _within_total(TrtllmFigures(
        tokens=(count(pool.group(2), "TRT-LLM max tokens in paged KV cache") if pool
                else count(legacy.group(1), "TRT-LLM tokens in paged KV cache") if legacy else None),
        pool_gib=(figure(pool.group(1), "TRT-LLM KV pool (GiB)", 0, MAX_GB) if pool
                  else count(legacy_bytes.group(1), "TRT-LLM k/v cache bytes") / (1 << 30) if legacy_bytes else None),
        blocks=count(blocks.group(1), "TRT-LLM blocks in KV cache primary pool") if blocks else None,
        total_gib=figure(total, "TRT-LLM total GPU memory (GiB)", 0, MAX_GB, lo_open=True) if total else None,
        available_gib=min(free) if free else None, available_most_gib=max(free) if free else None,
        kv_available_gib=figure(per.group(1), "TRT-LLM available KV cache memory (GiB)", 0, MAX_GB) if per else None,
        per_token=figure(per.group(2), "TRT-LLM kv size per token", 0, 1e12, lo_open=True) if per else None,
        started=False if failed else True if pool or legacy else None,
        weights_gib=_gib(log, "GB for model weights", r"[Uu]ses? " + NUM + r" GB for model weights", "model weights"),
        outside_torch_gib=_gib(log, "Memory used outside torch", r"Memory used outside torch[^\n:]{0,80}: " + NUM + " GiB",
                               "memory used outside torch"),
        after_loading_outside_gib=_gib(log, "Memory used after loading model weights (outside torch)",
                                       r"Memory used after loading model weights \(outside torch\)[^\n:]{0,80}: " + NUM
                                       + " GiB", "memory used outside torch after loading"),
        peak_gib=_gib(log, "Peak memory during memory usage profiling", r"Peak memory during memory usage profiling[^\n:]{0,40}: "
                      + NUM + " GiB", "peak memory during profiling"),
        dynamic_gib=_gib(log, "Memory dynamically allocated during inference", r"Memory dynamically allocated during "
                         r"inference[^\n:]{0,80}: " + NUM + " GiB", "memory allocated during inference"),
        temporary_kv_gib=_gib(log, ("tmp kv_mem ", "temporary kv cache memory during profiling "),
                              r"(?:tmp kv_mem|temporary kv cache memory during profiling) " + NUM + " GiB",
                              "temporary KV cache memory"),
        other_processes_gib=_other_processes(log)))


def _within_total(f: TrtllmFigures) -> TrtllmFigures:
    """The figures, where none of the run's own memory figures is more than the device total the log prints (to its
    0.01 GiB rounding): one above it is not one run's on that device (an edited log, or lines of two runs pasted)."""
    if f.total_gib is None:
        return f
    for name, value in (("peak memory during profiling", f.peak_gib), ("model weights", f.weights_gib),
                        ("KV pool", f.pool_gib), ("available KV cache memory", f.kv_available_gib)):
        if value is not None and value > f.total_gib + 0.01:
            raise InputError(f"the log's {name} ({value:.2f} GiB) is more than the device total it prints "
                             f"({f.total_gib:.2f} GiB): not one run's figures on one GPU; give one run's own lines")
    return f


def _other_processes(log: LogText) -> float | None:
    """GiB the other processes on the GPU held when the last CUDA out-of-memory message was printed: every process
    it lists but the one holding the most (the run's own); None without such a message or with one process."""
    m = log.last("CUDA out of memory", r"CUDA out of memory[^\n]{0,300}?(Process [0-9]{1,10} has [^\n]{0,400})")
    if m is None:
        return None
    held = [figure(n.group(1), "process memory in use", 0, MAX_GB * 1024) * (1024 if n.group(2) == "GiB" else 1)
            for n in re.finditer(r"Process [0-9]{1,10} has " + NUM + r" (MiB|GiB) memory in use", m.group(1)[:4000])]
    return round((sum(held) - max(held)) / 1024, 2) if len(held) > 1 else None


def _gib(log: LogText, literal: str | tuple[str, ...], pattern: str, name: str) -> float | None:
    """The GiB figure of the last line matching ``pattern`` (None where no line does)."""
    m = log.last(literal, pattern)
    return figure(m.group(1), f"TRT-LLM {name} (GiB)", 0, MAX_GB) if m else None

