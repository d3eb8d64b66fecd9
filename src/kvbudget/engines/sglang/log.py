"""An SGLang start-up log read as a run: the settings it shows, its release line, its device and the figures it
printed. The settings go through the same reader as a pasted launch command (``command.sglang_fields``, SGLang
0.5.23's own flag table): the launch command where the log holds one, then the ``server_args=ServerArgs(...)``
line (the values SGLang resolved, each field spelt as its flag with ``_``), then the flags given after ``--``."""

from __future__ import annotations

import re

from ..._record import record, replace
from ...inputs import excerpt, split_command
from ...units import InputError
from ..compared import not_contradicted
from ..logscan import MAX_GB, NUM, LogText, count, figure
from .command import known_flags, sglang_fields
from .settings import SGLangSettings


@record
class SGLangFigures:
    """What the log printed about its memory (GB as SGLang prints it: 2^30 bytes)."""

    tokens: int | None = None  # max_total_num_tokens, or the #tokens of "KV Cache is allocated"
    k_gb: float | None = None  # K size of one rank's pool
    kv_gb: float | None = None  # the one "KV size" of a pool with a single buffer per layer (MLA's latent cache)
    pre_load_gb: float | None = None  # "Load weight begin. avail mem": the smallest over the ranks printed
    after_load_gb: float | None = None  # "Load weight end. ... avail mem"
    weights_gb: float | None = None  # "Load weight end. ... mem usage"
    started: bool | None = None  # the pool was allocated (True), a memory error stopped the run (False)
    failure: str | None = None


@record
class SGLangRun:
    model: str | None  # as the log names it (launch command, server_args)
    settings: SGLangSettings
    read_from: tuple[str, ...]  # where the settings came from
    release_said: str  # how the release line was found
    gpu_name: str | None
    figures: SGLangFigures
    warnings: tuple[str, ...]
    tp_from_ranks: bool = False  # TP read from the ranks' tags (TP0 ... TPn-1), nothing else naming it


# Where a command's program is named: the server and the benchmarks that build its ServerArgs and memory pool
_PROGRAMS = ("sglang.launch_server", "sglang.bench_one_batch", "sglang.bench_latency", "sglang.bench_offline_throughput")
# bench_one_batch's own arguments (sglang 0.4.8 bench_one_batch.py BenchArgs; bench_latency was its name before):
# not server settings
_BENCH = ("--run-name", "--batch-size", "--batch", "--input-len", "--output-len", "--result-filename",
          "--correctness-test", "--cut-len", "--log-decode-step", "--profile", "--profile-filename-prefix")

# ServerArgs fields kvbudget plans with, as the flag each is read by (sglang 0.5.23 server_args.py: a field's flag is
# its name with '-'); switches are read where True. enable_ep_moe is 0.4's (server_args.py of 0.4.8 __post_init__:
# ep_size = tp_size).
_FIELDS = ("model_path", "tp_size", "pp_size", "dp_size", "ep_size", "attn_dp_size", "mem_fraction_static",
           "context_length", "kv_cache_dtype", "page_size", "max_running_requests", "chunked_prefill_size",
           "cuda_graph_max_bs", "max_total_tokens", "quantization", "swa_full_tokens_ratio", "mamba_ssm_dtype",
           "mamba_full_memory_ratio")
_SWITCHES = ("disable_cuda_graph", "enable_dp_attention", "disable_custom_all_reduce", "enable_ep_moe")
_VALUE = r"(None|True|False|'[^'\n]{0,4096}'|\"[^\"\n]{0,4096}\"|[^,)\s]{1,80})"

# Release lines by the lines only some releases print (each checked in the wheel's source: sglang 0.4.7, 0.4.8,
# 0.5.2, 0.5.3, 0.5.23 on PyPI), and by date (the wheels' build dates: 0.4.8 2025-06-24, 0.5.3 2025-10-06).
_LINE_04_8, _LINE_CURRENT = "2025-06-24", "2025-10-06"


def _line_of(version: str) -> str:
    """kvbudget's release line of an SGLang version: 0.4 (up to 0.4.7), 0.4.8 (0.4.8 - 0.5.2), current (0.5.3 on)."""
    parts = [int(p) for p in re.findall(r"[0-9]+", version)[:3]] + [0, 0, 0]
    key = tuple(parts[:3])
    return "0.4" if key < (0, 4, 8) else "0.4.8" if key < (0, 5, 3) else "current"


def release(log: LogText, given: str | None, said: str = "given with --sglang-version") -> tuple[str, str]:
    """The release line whose rules apply, and how it was found: ``given`` (--sglang-version, or the image of the
    command after --: ``said`` says which), a version the log names, a line only some releases print, the date of the
    log's first time stamp, else the current line."""
    if given is not None:
        return ("current" if given in ("current", "0.5") else given), said
    text = log.text
    named = re.search(r"(?i)sglang(?:==|:v|-v| version:? v?| v)([0-9]{1,2}\.[0-9]{1,3}\.[0-9]{1,3})", text)
    if named:
        return _line_of(named.group(1)), f"SGLang {named.group(1)}, as the log names it"
    if "Using KV cache dtype: " in text or "KV Cache is allocated. dtype: " in text:
        return "current", "its 'Using KV cache dtype' / 'KV Cache is allocated. dtype:' line (0.5.3 on)"
    if "KV Cache is allocated. K size" in text or ("Memory pool end" in text and "KV Cache is allocated" not in text
                                                   and "Load weight end" in text):
        return "0.4", "its KV cache lines, worded as before 0.4.3"
    stamp = re.search(r"\[(20[0-9]{2}-[0-9]{2}-[0-9]{2})[ T][0-9]{2}:", text)
    if stamp:
        day = stamp.group(1)
        line = "0.4" if day < _LINE_04_8 else "0.4.8" if day < _LINE_CURRENT else "current"
        return line, f"the release line current on the log's date ({day}); give --sglang-version if the run used an older one"
    return "current", "kvbudget's default (the log names no release): give --sglang-version 0.4 or 0.4.8 for an older run"


def _command_words(log: LogText) -> tuple[str, list[str]] | None:
    """The program and the words after it of the first launch command in the log (a shell's '\\' continuations
    joined), or None."""
    text = log.text
    for start, stop, _ in log.lines(_PROGRAMS):
        line = text[start:stop]
        pieces = [line]
        while pieces[-1].rstrip().endswith("\\") and stop < len(text) and len(pieces) < 200:
            nxt = text.find("\n", stop + 1)
            nxt = len(text) if nxt < 0 else nxt
            pieces[-1] = pieces[-1].rstrip()[:-1]
            pieces.append(text[stop + 1:nxt])
            stop = nxt
        joined = " ".join(pieces)
        program = next(p for p in _PROGRAMS if p in joined)
        try:
            words = split_command(joined[joined.index(program) + len(program):])
        except InputError:
            return None
        return program, words
    return None


def _older_flags(program: str, words: list[str]) -> tuple[list[str], int | None, list[str]]:
    """The words with flags SGLang 0.5.23 no longer has taken out (a logged run's release took them; ``--enable-ep-moe``
    remembered: 0.4's experts over the whole TP group), and a benchmark's own arguments."""
    known = known_flags()
    out: list[str] = []
    warnings: list[str] = []
    ep_moe = None
    i = 0
    while i < len(words):
        word = words[i]
        name, eq, _ = word.partition("=")
        i += 1
        bench = program != "sglang.launch_server" and name in _BENCH
        if not name.startswith("--") or name in known or (not bench and any(f.startswith(name) for f in known)):
            out.append(word)
            continue
        if name == "--enable-ep-moe":
            ep_moe = 1
        elif not bench:
            warnings.append(f"the log's launch command: {excerpt(name, 50)} is not an option of SGLang 0.5.23 (an older "
                            "release's): ignored")
        switch = name.startswith(("--enable-", "--disable-")) or name == "--correctness-test"
        if not eq and not switch and i < len(words) and not words[i].startswith("-"):
            i += 1
    return out, ep_moe, warnings


def _server_args(log: LogText) -> list[str] | None:
    """The ``ServerArgs(...)`` line's memory-relevant fields as the flags that set them (None: no such line)."""
    at = next(log.lines("ServerArgs("), None)
    if at is None:
        return None
    _, stop, i = at
    line = log.text[i:min(stop, i + 200_000)]
    argv: list[str] = []
    for name in _FIELDS + _SWITCHES:
        m = re.search(r"(?<![\w.])" + name + "=" + _VALUE, line)
        if m is None or m.group(1) in ("None", "False"):
            continue
        flag = "--" + name.replace("_", "-")
        if name in _SWITCHES:
            if m.group(1) != "True":
                raise InputError(f"the log's server_args {name}={excerpt(m.group(1), 30)}: SGLang prints True or False "
                                 "there (is the line edited?)")
            argv.append(flag)
            continue
        value = m.group(1)
        if value[:1] in "'\"":
            value = value[1:-1]
        elif value == "True":
            raise InputError(f"the log's server_args {name}=True: SGLang prints a value there, not a switch "
                             "(is the line edited?)")
        argv += [flag, value]
    return argv


_NO_MODEL = "<no model>"  # what the reader is handed where the words name no model (server_args, the flags after --)


def _names_model(words: list[str]) -> bool:
    return any(w in ("--model-path", "--model") or w.startswith(("--model-path=", "--model=")) for w in words)


def _fields(words: list[str], where: str) -> tuple[str | None, dict[str, object], list[str]]:
    """``sglang_fields`` of ``words`` (the model None where they name none), its refusal said as the log's."""
    try:
        # the words as some release's parser took them: the run's own release is read from the log after them
        model, fields, warnings = sglang_fields(words if _names_model(words) else ["--model-path", _NO_MODEL, *words],
                                                "any")
        # which releases read each flag is no news about a run that started with them
        warnings = [w for w in warnings if not w.endswith("give --sglang-version for the release you run")]
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None
    return (None if model == _NO_MODEL else model), fields, warnings


# The settings SGLang's server_args prints as it was given them (no post-init rule rewrites a value the user gave):
# flags after -- that set one of them to another value are not the logged run's
_PRINTED = ("tp", "pp", "dp", "ep_size", "mem_fraction_static", "context_length", "max_running_requests",
            "max_total_tokens")


def read_run(log: LogText, flags: list[str] | None = None, version: str | None = None, *,
             version_said: str = "given with --sglang-version", where: str = "the flags after --") -> SGLangRun:
    """The run an SGLang log shows: settings from its launch command, then its server_args, then ``flags`` (SGLang's
    own flags, after ``--``; the model where they name one), each over the one before; the release line
    (``release``: ``version``, found as ``version_said`` says); the device it names. ``where``: what the flags
    are, for the messages."""
    fields: dict[str, object] = {}
    printed: dict[str, object] = {}  # what the log's own command and server_args set (flags after -- may not differ)
    read_from: list[str] = []
    warnings: list[str] = []
    model: str | None = None
    ep_moe = None
    found = _command_words(log)
    if found is not None:
        program, words = found
        words, ep_moe, older = _older_flags(program, words)
        warnings += older
        try:
            name, got, more = _fields(words, "the log's launch command")
        except InputError as exc:
            warnings.append(f"{exc}: the command's settings are not read")
        else:
            model, fields = name, got
            printed.update(got)
            # the run's flags that change no memory are not worth a line each (a user's own, after --, are)
            warnings += [f"the log's launch command: {w}" for w in more if not w.endswith("in kvbudget's model: ignored")]
            read_from.append("launch command")
    server = _server_args(log)
    if server is not None:
        if "--enable-ep-moe" in server:
            server.remove("--enable-ep-moe")
            ep_moe = 1
        name, got, _ = _fields(server, "the log's server_args")
        model = name or model
        fields.update(got)
        printed.update(got)
        read_from.append("server_args")
    if ep_moe is not None and "ep_size" not in fields:
        fields["ep_size"] = fields.get("tp", 1)  # 0.4's --enable-ep-moe: the experts over the TP group
    ranks = [int(m.group(1)) for m in re.finditer(r"[\[ ]TP([0-9]{1,4})[\] ]", log.text)]
    tp_from_ranks = False
    if "tp" not in fields and ranks and max(ranks) > 0:
        fields["tp"] = max(ranks) + 1
        if ep_moe is not None and fields.get("ep_size") == 1:
            fields["ep_size"] = fields["tp"]
        tp_from_ranks = True
        read_from.append(f"the ranks' tags (TP0 ... TP{max(ranks)})")
    if flags:
        named, got, more = _fields(list(flags), where)
        not_contradicted(printed, got, _PRINTED, where, "its server_args or launch command")
        model = named or model
        fields.update(got)
        warnings += [f"{where}: {w}" for w in more]
        read_from.append(where)
    quant = log.last("Load weight end.", r"Load weight end\.[^\n]{0,300}?quant=([A-Za-z0-9_]{1,40})")
    if quant and "quantization" not in fields:
        fields["quantization"] = quant.group(1)
        read_from.append("the weight loader's quant=")
    line, said = release(log, version, version_said)
    try:
        settings = replace(SGLangSettings(version=line), **fields)
    except (TypeError, ValueError) as exc:
        raise InputError(f"the log's SGLang settings could not be read: {exc}") from None
    return SGLangRun(model or None, settings, tuple(read_from), said, _gpu_name(log), figures(log), tuple(warnings),
                     tp_from_ranks)


# SGLang's image (Docker Hub): its release workflow (.github/workflows/release-docker.yml of sglang) tags each release
# lmsysorg/sglang:v<python/sglang/version.py>-cu<CUDA>[-srt], and "latest" the newest; other tags (dev, nightly, a
# digest) name no release
_IMAGE = "lmsysorg/sglang"
_IMAGE_TAG = re.compile(r"v([0-9]{1,2}\.[0-9]{1,3}\.[0-9]{1,3}(?:\.post[0-9]{1,3}|rc[0-9]{1,3})?)(?:-[A-Za-z0-9_.-]{1,40})?")
COMMAND_EXAMPLE = "python -m sglang.launch_server --model-path M ..."


def whole_command(words: list[str], version: str | None) -> tuple[list[str], str | None, str, list[str]]:
    """A whole SGLang launch command after ``check LOG --`` (``compared.run_words``) as the launch server's arguments
    (``cmdscan.launch_args``, the reader ``explain`` uses), the release line to plan (``version``, else the one the
    lmsysorg/sglang:TAG image names), how it was found, and the warnings: the image's tag against --sglang-version,
    a tag that names no release, SGLang's environment variables (none is in kvbudget's model)."""
    from ..cmdscan import launch_args
    from ..compared import command_env

    _, args, at = launch_args(words)
    warnings = [f"the command after --: {excerpt(f'{key}={value}', 50)[1:-1]} is not read (no SGLang environment "
                "variable is in kvbudget's model)" for key, value in command_env(words[:at])
                if key.startswith(("SGLANG_", "SGL_"))]
    said = "given with --sglang-version"
    image = next((w for w in words[:at] if _IMAGE in w), None)
    if image is None:
        return args, version, said, warnings
    name = image.rsplit("/", 1)[-1]
    tag = name.partition(":")[2] if "@" not in name else ""
    m = _IMAGE_TAG.fullmatch(tag)
    if m is None:
        if version is None and tag not in ("", "latest"):
            warnings.append(f"the image tag {excerpt(tag or name, 40)} names no SGLang release: the release line is "
                            "read from the log; give --sglang-version for the one it runs")
        return args, version, said, warnings
    line = _line_of(m.group(1))
    if version is None:
        return args, line, f"SGLang {m.group(1)}, as the command's image {excerpt(image, 60)} names it", warnings
    if ("current" if version in ("current", "0.5") else version) != line:
        warnings.append(f"the image {excerpt(image, 60)[1:-1]} is SGLang {m.group(1)} (release line {line}); planned "
                        f"with --sglang-version {version} as given")
    return args, version, said, warnings


# mem_cache/memory_pool.py ``_finalize_allocation_log`` (sglang 0.5.23): "KV Cache is allocated. dtype: D, #tokens: N,
# K size: X GB, V size: Y GB" for pools of separate K and V buffers, "... #tokens: N, KV size: X GB" for one buffer per
# layer (MLATokenToKVPool: DeepSeek's latent cache); older releases print no dtype, and before 0.4.3 no #tokens.
# Groups: #tokens, "K" or "KV", the size in GB.
ALLOCATED = (r"KV Cache is allocated\.(?: dtype: [\w.]{1,40},)?(?: #tokens: " + NUM + r",)? (KV|K) size: " + NUM
             + " GB")


def _gpu_name(log: LogText) -> str | None:
    """The device the log names: a kernel configuration file's ``device_name=NVIDIA_...`` (SGLang's tuned MoE and
    FP8 kernels) or a "GPU 0: NVIDIA ..." line."""
    m = log.last("device_name=NVIDIA_", r"device_name=NVIDIA_([A-Za-z0-9_-]{1,40})")
    if m:
        return m.group(1).replace("_", " ")
    m = log.last("GPU 0: NVIDIA ", r"GPU 0: NVIDIA ([A-Za-z0-9 -]{1,40})")
    return m.group(1).strip() if m else None


_FAILURES = ("Not enough memory. Please try to increase --mem-fraction-static", "CUDA out of memory",
             "OutOfMemoryError")


def figures(log: LogText) -> SGLangFigures:
    """The memory figures the log printed (the last of each; before loading, the smallest over the ranks)."""
    alloc = log.last("KV Cache is allocated.", ALLOCATED)
    size = figure(alloc.group(3), f"SGLang {alloc.group(2)} size (GB)", 0, MAX_GB) if alloc else None
    total = log.last("max_total_num_tokens=", r"max_total_num_tokens=" + NUM)
    tokens = (count(alloc.group(1), "SGLang #tokens") if alloc and alloc.group(1)
              else count(total.group(1), "SGLang max_total_num_tokens") if total else None)
    pre = [figure(m.group(1), "SGLang avail mem before loading (GB)", 0, MAX_GB)
           for m in log.each("Load weight begin. avail mem=", r"Load weight begin\. avail mem=" + NUM + " GB")]
    end = log.last("Load weight end.", r"Load weight end\.[^\n]{0,400}?avail mem=" + NUM + " GB")
    usage = log.last("Load weight end.", r"Load weight end\.[^\n]{0,400}?mem usage=" + NUM + " GB")
    failure = next((f for f in _FAILURES if log.has(f)), None)
    started = False if failure else True if tokens is not None else None
    return SGLangFigures(
        tokens=tokens, k_gb=size if alloc and alloc.group(2) == "K" else None,
        kv_gb=size if alloc and alloc.group(2) == "KV" else None,
        pre_load_gb=min(pre) if pre else None,
        after_load_gb=figure(end.group(1), "SGLang avail mem after loading (GB)", 0, MAX_GB) if end else None,
        weights_gb=figure(usage.group(1), "SGLang mem usage (GB)", 0, MAX_GB) if usage else None,
        started=started, failure=failure)
