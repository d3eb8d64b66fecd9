"""What ``check`` hands the report for any engine: a logged figure beside kvbudget's (``Row``), and for SGLang and
TensorRT-LLM the whole answer (``OtherCheck``: the settings the log showed, the prediction's rows, the rows
recomputed from the log's own figures, notes and warnings). Also the run's device as SGLang and TensorRT-LLM logs
name it (``run_gpu``). And the one rule every engine's check reads the words after ``check LOG --`` by: a whole
launch command or the engine's bare flags (``is_launch_command``, ``launcher``, ``run_words``)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from .._record import fields, record, replace
from ..hardware import GPU, UnknownGPU, custom_gpu, find_gpu
from ..model.spec import ModelSpec
from ..units import GiB, InputError, digits

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from .base import EnginePlan


@record
class Row:
    figure: str
    reported: float | None
    predicted: float | None
    error_pct: float | None  # (predicted - reported) / |reported|


def row(figure: str, reported: float | None, predicted: float | None) -> Row:
    """A figure the log printed beside kvbudget's, with the error relative to the log's."""
    err = None
    if reported is not None and predicted is not None and reported != 0:
        err = 100.0 * (predicted - reported) / abs(reported)
    return Row(figure, reported, predicted, err)


# How far a predicted figure may sit from the log's before check says the settings it planned (defaults, where the
# log shows none) are likely not the run's: the larger of a floor (in the figure's unit) and a share of the log's
SETTINGS_GAP_SHARE = 0.10


def far_apart(predicted: float, reported: float, floor: float) -> bool:
    """The prediction is more than ``floor`` and more than SETTINGS_GAP_SHARE of the logged figure away from it."""
    return abs(predicted - reported) > max(floor, SETTINGS_GAP_SHARE * abs(reported))


def starts_row(started: bool, predicted: bool) -> Row:
    """Whether the run started (it logged its KV pool) against kvbudget's verdict; 100 % error where they differ."""
    return Row("starts", float(started), float(predicted), None if started == predicted else 100.0)


Recomputed = tuple[str, float, float, bool]  # (figure, reported, recomputed from the log's other figures, matches)


@record
class OtherCheck:
    """``check`` of an SGLang or TensorRT-LLM log: the run as the log shows it, planned by kvbudget."""

    engine: str  # the engine's label
    model: str | None  # the model planned (None: no prediction)
    gpu: str | None  # the device planned
    release: str  # the release line whose rules were applied
    settings: tuple[tuple[str, object], ...]  # the settings planned with, as the engine's fields
    read_from: tuple[str, ...]  # the log lines (and flags) they were read from
    rows: tuple[Row, ...]  # reported vs predicted
    recomputed: tuple[Recomputed, ...]  # reported vs recomputed from the log's own figures
    notes: tuple[str, ...]  # what kvbudget assumed, and the plan's own notes
    warnings: tuple[str, ...]
    plan: EnginePlan | None = None  # the prediction, as every engine's plan reads
    device_bytes: int | None = None  # the memory of the device planned (the catalog's, --gpu-memory or the log's total)
    assumed: tuple[str, ...] = ()  # settings no line of the log (nor --) showed, planned as the engine's defaults


def settings_items(settings: object, defaults: object) -> tuple[tuple[str, object], ...]:
    """The fields of ``settings`` that differ from ``defaults`` (both records of one type), in field order."""
    return tuple((n, getattr(settings, n)) for n in fields(settings) if getattr(settings, n) != getattr(defaults, n))


def not_the_run(gpu: str, device: GPU, logged_name: str | None, logged_total: int | None) -> None:
    """Refuse ``--gpu`` (found as ``device``) where the log shows another card: a device name of a card whose memory
    differs by more than a tenth, or a total more than a tenth off the card's that no board of its name has (check
    compared the logged run with a plan on the other card: an H100 log checked --gpu L4, -137% KV, exit 0)."""
    from ..hardware import card_of_memory
    from ..inputs import excerpt

    logged: GPU | None = None
    if logged_name:
        try:
            logged = find_gpu(logged_name)
        except UnknownGPU:
            logged = card_of_memory(logged_name, logged_total) if logged_total else None
    if logged is not None and (abs(logged.memory_bytes - device.memory_bytes) > logged.memory_bytes // 10
                               or _other_chip(logged, device)):
        raise InputError(f"--gpu {excerpt(gpu, 40)} ({device.name}) is not the run's device: the log names "
                         f"{excerpt(logged_name, 60)} ({logged.name}); drop --gpu, the log says which GPU it ran on")
    if (logged_total and abs(device.memory_bytes - logged_total) > logged_total // 10
            and card_of_memory(gpu, logged_total) is None):
        raise InputError(f"--gpu {excerpt(gpu, 40)} ({device.name}, {device.memory_bytes / GiB:.2f} GiB) is not the run's "
                         f"device: the log prints a total of {logged_total / GiB:.2f} GiB; drop --gpu, or give the card "
                         "it ran on")


def _other_chip(logged: GPU, given: GPU) -> bool:
    """Two cards of one memory size but other compute capabilities (an A100 80GB log checked as an H100's): the
    engines' kernels, workspaces and attention backends differ with it."""
    from ..hardware import capability

    a, b = capability(logged), capability(given)
    return a is not None and b is not None and abs(a - b) > 1e-6


def memory_not_the_run(gpu_memory: int | None, logged_total: int | None) -> None:
    """Refuse ``--gpu-memory`` more than a tenth off the total the log prints: the engine measured that total on the
    run's device, and a figure so far off sizes another card (24 GiB given for a 79.18 GiB run: -45 GiB "outside the
    model", exit 0; 100 GiB for a TensorRT-LLM run of 79.18: +21.83 GiB calibrated as the site's)."""
    if gpu_memory is not None and logged_total and abs(gpu_memory - logged_total) > logged_total // 10:
        raise InputError(f"--gpu-memory {gpu_memory / GiB:.2f} GiB is not the run's device: the log prints a total of "
                         f"{logged_total / GiB:.2f} GiB; drop --gpu-memory (the log's total is read)")


def run_gpu(gpu: str | None, gpu_memory: int | None, logged_name: str | None, logged_total_gib: float | None,
            free_gib: float | None, engine: str) -> GPU | None:
    """The device of a logged run: ``gpu`` (else the name the log prints), with ``gpu_memory`` or the total the log
    prints (TensorRT-LLM's "total: X GiB") as its memory, or an unnamed card of that memory; None when neither the
    flags nor the log say. A card with less memory than the log had free (``free_gib``) is not the run's."""
    device: GPU | None = None
    if gpu:
        device = find_gpu(gpu)
        not_the_run(gpu, device, logged_name, round(logged_total_gib * GiB) if logged_total_gib else None)
    elif logged_name:
        try:
            device = find_gpu(logged_name)
        except UnknownGPU:
            device = None
    total = round(logged_total_gib * GiB) if logged_total_gib else None
    memory_not_the_run(gpu_memory, total)
    memory = gpu_memory if gpu_memory is not None else total
    if memory is not None:
        source = "given with the GPU" if gpu_memory is not None else "the log's total GPU memory"
        device = (replace(device, memory_bytes=memory, nvidia_smi_mib=None if gpu_memory is not None else device.nvidia_smi_mib,
                          memory_source=source) if device is not None else custom_gpu(memory))
    if device is not None and free_gib is not None and free_gib * GiB > device.memory_bytes * 1.001:
        raise InputError(f"the log had {free_gib:.2f} GB free before loading the weights, more than the "
                         f"{device.memory_bytes / GiB:.2f} GiB of {device.name}: it is not the run's GPU; give the "
                         f"{engine} run's GPU with --gpu (or --gpu-memory)")
    return device


def logged_model(given: str | None, logged: str | None, warnings: list[str]) -> ModelSpec | None:
    """The model to predict with: ``--model``, else the one the log names (a stand-in where it is not here); None,
    with a warning saying what to give, where the log names none or its model cannot be loaded (``--model`` that
    cannot be loaded is an error)."""
    from ..inputs import excerpt
    from ..model.resolve import load_foreign_model

    ref = given or logged
    if not ref:
        warnings.append("the log does not name its model: give --model for kvbudget's prediction")
        return None
    try:
        return load_foreign_model(ref)
    except InputError as exc:
        if given:
            raise
        warnings.append(f"the log's model {excerpt(ref, 60)} could not be loaded ({exc}): give --model for "
                        "kvbudget's prediction")
        return None


# --- the words after `check LOG --`: a whole launch command, or the engine's own flags ---------------------------

# What a whole launch command starts with: an engine's program (vllm serve, sglang serve, trtllm-serve, llama-server),
# the interpreter of its module (python -m sglang.launch_server), a container or job wrapper around it (docker run,
# apptainer run, mpirun, srun), or an environment assignment NAME=VALUE before any of them. No engine has a flag that
# starts so (their flags start with '-'). A word before an engine's program (``launcher``) also starts one: a wrapper
# kvbudget does not list (``numactl -N 0``, ``taskset -c 0-7``, ``time``, ``conda run -n env``), whose own options
# are passed over with it.
_FIRST_WORDS = ("vllm", "sglang", "trtllm-serve", "trtllm-llmapi-launch", "llama-server", "python", "python3", "docker",
                "podman", "apptainer", "singularity", "env", "sudo", "nohup", "uv", "mpirun", "srun", "time", "exec",
                "numactl", "taskset", "nice", "timeout", "stdbuf", "conda", "uvx", "torchrun")


def is_launch_command(words: list[str]) -> bool:
    """Whether words given after ``check LOG --`` are a whole launch command (``VAR=1 vllm serve M ...``, ``docker run
    ... IMAGE ...``, ``python -m sglang.launch_server ...``, ``trtllm-serve M ...``, ``numactl -N 0 vllm serve M``)
    rather than an engine's flags."""
    if not words or words[0].startswith("-"):
        return False
    first = os.path.basename(words[0])
    name, eq, _ = first.partition("=")
    return (first in _FIRST_WORDS or first.startswith("python3.") or bool(eq and name.isidentifier() and name.isupper())
            or launcher(words) is not None)


_LLAMA_PROGRAMS = ("llama-server", "llama-cli", "llama-run", "llama-bench")
# llama.cpp's container images (its .devops/*.Dockerfile, published as ghcr.io/ggml-org/llama.cpp, earlier
# ghcr.io/ggerganov/llama.cpp): the ``server`` tags (server, server-cuda, server-rocm, server-vulkan ...) run
# /app/llama-server, the ``light`` tags /app/llama-cli; the words after the image are that program's arguments.
_LLAMA_IMAGE = re.compile(r"(?:[\w.\-]+/)?(?:ggml-org|ggerganov)/llama\.cpp:(server|light)(?:-[\w.\-]+)?")


def llama_image(word: str) -> str | None:
    """The llama.cpp program a llama.cpp image tag runs (``llama-server``, ``llama-cli``), or None."""
    m = _LLAMA_IMAGE.fullmatch(word)
    return None if m is None else "llama-server" if m.group(1) == "server" else "llama-cli"


def program_name(word: str) -> str:
    """A program's name as a word of a command runs it: its file name, less the release uvx pins with '@'
    (``uvx vllm@0.10.1 serve M`` runs vllm)."""
    base = os.path.basename(word)
    name, at, release = base.partition("@")
    return name if at and name and release[:1] in "v0123456789" and release[:1] else base


# A package the command pins where it installs or runs it: a setup step (pip install vllm==0.10.1 && ...), uv run
# --with vllm==0.10.1, uvx --from 'vllm[flashinfer]==0.10.1', pipx run --spec vllm==0.10.1, uvx vllm@0.10.1 serve
_PIN = re.compile(r"([A-Za-z0-9][A-Za-z0-9_.\-]{0,60})(?:\[[^\]]{0,200}\])?(?:===?|@v?)([0-9]{1,4}(?:\.[0-9]{1,4}){1,3}"
                  r"(?:\.?(?:post|rc|dev)[0-9]{1,6})*)")


def package_pins(words: list[str]) -> dict[str, str]:
    """The release each package is pinned to among the words (the last pin of a package wins, as pip's resolver
    refuses two that differ): {'vllm': '0.10.1'}. Names as PyPI normalizes them (lowercase, '_' as '-')."""
    pins: dict[str, str] = {}
    for word in words:
        for item in word.split(","):  # uv run --with a==1,b==2
            m = _PIN.fullmatch(item.strip().strip("'\""))
            if m is not None:
                pins[m.group(1).lower().replace("_", "-")] = m.group(2)
    return pins


def launcher(words: list[str]) -> str | None:
    """The engine whose server ``words`` start, by its program, module or image: vLLM (``vllm serve``, its API server
    modules, the vllm/vllm-openai image or an Apptainer .sif of it), SGLang (``sglang.launch_server``, ``sglang
    serve``), TensorRT-LLM (``trtllm-serve``), llama.cpp (``llama-server`` ...); None where they name none."""
    for i, word in enumerate(words):
        base = program_name(word)
        serve = words[i + 1:i + 2] == ["serve"]
        if (base == "vllm" and serve) or word.startswith("vllm.entrypoints.") or "vllm-openai" in base or "vllm/vllm-openai" in word:
            return "vLLM"
        if word == "sglang.launch_server" or (base == "sglang" and serve):
            return "SGLang"
        if base == "trtllm-serve":
            return "TensorRT-LLM"
        if base in _LLAMA_PROGRAMS or llama_image(word):
            return "llama.cpp"
    return None


def not_contradicted(printed: dict[str, object], given: dict[str, object], keys: tuple[str, ...], where: str,
                     shown: str) -> None:
    """Refuse ``given`` settings (the flags after ``check LOG --``) that set one of ``keys`` the log prints (``shown``:
    where it prints it) to another value: the run used the printed one, so a check against the other compares
    kvbudget's plan of a run that never happened with the logged run's figures."""
    for key in keys:
        if key in printed and key in given and printed[key] != given[key]:
            raise InputError(f"{where} set {key} to {given[key]}, but the log prints {key} {printed[key]} ({shown}): "
                             "they are not this run's flags; drop them, or give the log of the run that used them")


def run_words(flags: list[str] | None, engine: str, example: str) -> tuple[list[str], bool]:
    """The words after ``check LOG --`` for a log of ``engine`` (its label), and whether they are a whole launch
    command of it (``is_launch_command``) rather than its flags. One quoted string is split as a shell splits it;
    the shell's redirections (``> serve.log 2>&1``) and a closing ``&`` are dropped, as the shell takes them, and
    shell setup around the one launch command (``cd DIR &&``, ``export A=1;``, ``| tee LOG``) is passed over as
    ``explain`` passes it over (``one_command``). Refused in one line: nothing after ``--``, a command too long, a
    flag typed with a word processor's dash, two commands, a command that launches another engine (or none: only
    environment assignments, a wrapper around another program). ``example``: the engine's launch command, for the
    messages."""
    from ..inputs import SHELL_OPERATORS, check_command_size, excerpt, split_command, without_redirections

    words = list(flags or ())
    check_command_size(sum(len(w) + 1 for w in words))
    from .orchestrators import helm_values_command, kubectl_command

    # a Kubernetes manifest, compose file or Helm values: its container's command
    manifest = manifest_command(words) or helm_values_command(words)
    if manifest is not None:
        words = list(manifest.words)
    elif len(words) == 1 and any(c.isspace() for c in words[0]):  # the command pasted as one quoted string
        words = split_command(words[0])
    run = kubectl_command(words)  # kubectl run NAME --image=IMAGE -- ARGS: its Pod's container
    words = without_redirections(shell_command(list(run.words) if run is not None else words))
    while words and words[-1] in SHELL_OPERATORS:  # `... &`: run in the background, the command is the same
        words.pop()
    if flags is not None and not any(w.strip() for w in words):  # `--`, `-- ""`
        raise InputError(f"nothing after --: give the {engine} run's flags (or its whole launch command, {example}) "
                         "after it, or drop the --")
    words_read(words)
    joined = next((w for w in words if w in SHELL_OPERATORS), None)
    if joined is not None:
        try:
            words = one_command(words)
        except InputError:
            words = []
        if launcher(words) is None:  # no piece, or more than one, launches an engine
            raise InputError(f"the words after -- hold two commands joined by {joined!r}: give the {engine} launch "
                             "command alone")
    if not is_launch_command(words):
        return words, False
    other = launcher(words)
    if other == engine:
        return words, True
    shown = excerpt(" ".join(words[:4]) + (" ..." if len(words) > 4 else ""), 70)
    if other is not None:
        raise InputError(f"the command after -- ({shown}) launches {other}, but the log is {engine}'s: give the command "
                         f"that started this {engine} run ({example}), or its flags alone")
    if all("=" in w and not w.startswith("-") for w in words):
        raise InputError(f"the words after -- ({shown}) set the environment but launch nothing: give the {engine} "
                         f"command after them ({example}), or the run's flags alone")
    raise InputError(f"the command after -- ({shown}) names no {engine} server kvbudget reads: give {example}, or the "
                     "run's flags alone")


def run_devices(words: list[str], used: int, engine: str) -> None:
    """Refuse a whole launch command after ``check LOG --`` whose CUDA_VISIBLE_DEVICES (or container's GPUs) shows
    fewer devices than the logged run's ``used`` (TP x PP x DP): that command stops at start-up, so it is not the
    command of this run."""
    devices_refused(words, used, engine, f"so it is not the command of this run: give the one that started it, or "
                    f"the {engine} run's flags alone")


def command_env(words: list[str]) -> list[tuple[str, str]]:
    """The environment ``words`` (a whole launch command up to its program) set: NAME=VALUE words (first, or after
    ``env`` / ``sudo`` and their options), and ``docker run``'s -e / --env NAME=VALUE options (a bare -e NAME passes
    the host's value on: unknown here)."""
    return assignments(words) + container_env(words)


def container_env(words: list[str]) -> list[tuple[str, str]]:
    """The NAME=VALUE pairs of ``docker run``'s -e / --env options in ``words``."""
    out: list[tuple[str, str]] = []
    for i, word in enumerate(words):
        if word in ("-e", "--env") and i + 1 < len(words):
            value = words[i + 1]
        elif word.startswith("--env="):
            value = word[6:]
        elif word.startswith("-e") and len(word) > 2 and "=" in word:
            value = word[2:]
        else:
            continue
        key, eq, val = value.partition("=")
        if eq and key.isidentifier():
            out.append((key, val))
    return out


# --- what every engine's command reader needs of a pasted launch command (explain, and check LOG -- COMMAND) --------

# Dashes a word processor or a chat window puts in place of '-': en and em dash, the minus sign, hyphens ...
_DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d"


_SHELLS = ("bash", "sh", "zsh", "dash", "ash")
_SHELL_C = re.compile(r"-[a-z]*c[a-z]*")  # -c, -lc, -ec, -xc: the option that takes the command string


def shell_command(words: list[str]) -> list[str]:
    """The words of ``bash -c 'vllm serve M ...'`` (sh, zsh ...; their single-letter options before it, such as -l,
    -e, -lc): the command string split as the shell runs it, after the assignments before the shell; ``words``
    themselves otherwise. The words after the string are the script's $0, $1 ...: not the command's."""
    from ..inputs import split_command

    at = 0
    while at < len(words) and "=" in words[at] and words[at].partition("=")[0].isidentifier():
        at += 1
    if at < len(words) and os.path.basename(words[at]) in _SHELLS:
        for i in range(at + 1, len(words) - 1):
            if _SHELL_C.fullmatch(words[i]):
                return [*words[:at], *split_command(words[i + 1])]
            if not re.fullmatch(r"-[a-z]+", words[i]):
                break
    return words


def words_read(words: list[str]) -> None:
    """What every engine's command reader needs of the words: a bounded size, and flags written with '-'. A word
    like '\u2014tensor-parallel-size' is a stray positional word to the engine's argparse (it stops at start-up),
    and kvbudget's readers passed it over: the plan was the default layout, exit 0."""
    from ..inputs import check_command_size, excerpt, typographic_quotes

    check_command_size(sum(len(w) + 1 for w in words))
    typographic_quotes(words)
    for word in words:
        if _LISTED_FLAG.fullmatch(word):
            raise InputError(f"the words look like a YAML or JSON list ({excerpt(word, 40)}: a flag followed by ','): "
                             "kvbudget reads the command as a shell runs it; write its words without brackets, quotes "
                             "and commas (vllm serve M --max-model-len 8192 ...)")
        if word[:1] in _DASHES and word.lstrip(_DASHES)[:1].isalpha():
            name = word.lstrip(_DASHES).split("=")[0]
            fixed = ("-" if len(name) <= 3 else "--") + name  # -tp, -c, -ngl; --tensor-parallel-size
            raise InputError(f"{excerpt(word.split('=')[0], 40)} starts with {word[0]!r} (U+{ord(word[0]):04X}), not '-' "
                             f"(a text editor changed the dashes): the engine reads it as a stray word and stops; "
                             f"type {excerpt(fixed, 40)[1:-1]}")


# A flag as a Kubernetes ``args: ["--model", "M", ...]`` list or a compose file's ``command: [...]`` writes it, split by
# the shell: '[--model,', '--max-model-len,' (no engine's flag or value is a flag name followed by a comma)
_LISTED_FLAG = re.compile(r"\[?[\"']?--?[A-Za-z][\w.\-]{0,80}[\"']?,")


# Where a launch command starts: ``vllm serve``, vLLM's API server modules and image, SGLang's module, trtllm-serve and
# llama.cpp's programs (by name, so that a second one pasted after the first is seen).
_VLLM_MODULES = ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server")
_VLLM_CLI = "vllm.entrypoints.cli.main"  # the module of the `vllm` program (vLLM's pyproject.toml [project.scripts])
_PROGRAMS = ("sglang.launch_server", "trtllm-serve", *_LLAMA_PROGRAMS)


def program_starts(words: list[str]) -> list[int]:
    """The indices of ``words`` where a launch command's program is named."""
    out = []
    for i, word in enumerate(words):
        base = program_name(word)
        if (((base in ("vllm", "sglang") or word == _VLLM_CLI) and words[i + 1:i + 2] == ["serve"]) or word in _VLLM_MODULES
                or base in _PROGRAMS
                or (("vllm/vllm-openai" in word or llama_image(word))
                    and not any(w.startswith("--entrypoint") for w in words[:i]))):
            out.append(i)  # an image run with --entrypoint PROG runs PROG, named after it
    return out


def one_command(words: list[str], reads: Callable[[list[str]], bool] | None = None) -> list[str]:
    """The one launch command in ``words``: shell setup around it (``cd``, ``source``, ``| tee LOG``) is passed over,
    ``export NAME=VALUE`` before it applies to it; two launch commands (joined by ``&&``, ``;``, a line end, or
    pasted one after the other) are refused: each would be planned as the other's flags, or one of them unread.
    ``reads``: whether an engine reads a piece that names no program kvbudget knows as its command."""
    from ..inputs import SHELL_OPERATORS, excerpt

    segments: list[list[str]] = [[]]
    for word in words:
        if word in SHELL_OPERATORS:
            segments.append([])
        else:
            segments[-1].append(word)
    segments = [s for s in segments if s]
    if len(segments) == 1 and len(program_starts(segments[0])) < 2:
        return segments[0]
    launches: list[tuple[int, list[str]]] = []  # (its segment, its words)
    for n, segment in enumerate(segments):
        starts = program_starts(segment)
        if not starts and reads is not None and reads(segment):
            starts = [0]
        launches += [(n, segment[i:j]) for i, j in zip(starts, [*starts[1:], len(segment)][:len(starts)], strict=True)]
    if len(launches) > 1:
        first, second = launches[0][1], launches[1][1]
        if launches[0][0] == launches[1][0] and len(first) == 1 and ("vllm/vllm-openai" in first[0] or llama_image(first[0])):
            vllm = llama_image(first[0]) is None
            program, entry = ("vLLM's server", "vllm") if vllm else (str(llama_image(first[0])),) * 2
            raise InputError(f"the image {excerpt(first[0], 60)} already runs {program} (its entrypoint): the words "
                             f"`{excerpt(' '.join(second[:3]), 60)[1:-1]}` after it reach it as arguments and it stops; "
                             f"give the model and flags right after the image, or --entrypoint {entry}")
        shown = " and ".join(f"`{excerpt(' '.join(c[:3]), 60)[1:-1]}`" for _, c in launches[:2])
        raise InputError(f"the text holds {len(launches)} launch commands ({shown}): kvbudget plans one; "
                         "pass each on its own")
    if not launches:
        return segments[0] if segments else []
    at = launches[0][0]
    env: list[str] = []
    for segment in segments[:at]:
        assigned = segment[1:] if segment[0] == "export" else segment
        if assigned and all("=" in w and w.partition("=")[0].isidentifier() for w in assigned):
            env += assigned
    return env + segments[at]


_CONTAINER_PROGRAMS = ("docker", "podman", "nerdctl")
_VISIBLE = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")


def container_gpus(words: list[str]) -> tuple[str, int] | None:
    """(how it is given, how many GPUs) a ``docker run`` gives its container before the image: ``--gpus N`` or
    ``--gpus '"device=0,1"'`` (Docker's CSV form), else ``-e NVIDIA_VISIBLE_DEVICES=0,1`` (the NVIDIA runtime); a
    ``-e CUDA_VISIBLE_DEVICES=...`` inside the container shows no more than it lists. None for ``all`` or no such
    option."""
    import csv

    at = next((i for i, w in enumerate(words[:-1]) if os.path.basename(w) in _CONTAINER_PROGRAMS and words[i + 1] == "run"),
              None)
    if at is None:
        return None
    found: tuple[str, str] | None = None
    inside: tuple[str, int] | None = None  # -e CUDA_VISIBLE_DEVICES=0: the devices CUDA shows in the container
    named: list[str] = []  # --device nvidia.com/gpu=0 (CDI, podman and docker 25+), --device /dev/nvidia0
    rest = words[at + 2:]
    for i, word in enumerate(rest):
        if word in ("--gpus", "-e", "--env", "--device") and i + 1 < len(rest):
            flag, value = word, rest[i + 1]
        elif word.startswith(("--gpus=", "--env=", "--device=")):
            flag, _, value = word.partition("=")
        elif not word.startswith("-") and (i == 0 or rest[i - 1] not in ("--gpus", "-e", "--env", "-p", "-v", "--name",
                                                                         "--runtime", "--ipc", "--shm-size", "--network",
                                                                         "-w", "--mount", "--env-file", "--entrypoint",
                                                                         "-u", "--user", "--device")):
            break  # the image: what follows is the container's command
        else:
            continue
        if flag == "--device":
            named += [value.partition(":")[0]] if _GPU_DEVICE.fullmatch(value.partition(":")[0]) else []
        elif flag == "--gpus":
            found = ("docker run --gpus", value)
        elif value.startswith("NVIDIA_VISIBLE_DEVICES=") and found is None:
            found = ("NVIDIA_VISIBLE_DEVICES", value.partition("=")[2])
        elif value.partition("=")[0] in _VISIBLE:
            name, _, devices_text = value.partition("=")
            inside = (f"-e {name}", _devices_listed(devices_text))
    if found is None and named and not any(d.endswith(("=all", "=*")) for d in named):
        found = ("--device", str(len(set(named))))  # one device each: as --gpus N counts them
    if found is None:
        return inside
    what, value = found
    if what == "NVIDIA_VISIBLE_DEVICES":  # a plain list of indices or UUIDs; all / none / void are no count
        listed = [d for d in value.split(",") if d.strip()]
        shown = None if not listed or listed[0].strip().lower() in ("all", "none", "void") else (what, len(listed))
        return shown if inside is None or (shown is not None and shown[1] <= inside[1]) else inside
    devices: int | None = None
    for n, field in enumerate(next(csv.reader([value]), [])):
        key, eq, item = field.strip().strip('"').partition("=")
        if not eq and n == 0:
            if key.strip().lower() == "all" or not digits(key.strip()):
                return inside
            devices = int(key)  # --gpus 2: two GPUs
        elif not eq and devices is not None and key.strip():
            devices += 1  # device=0,1 unquoted: CSV cut the list
        elif key == "device":
            devices = len([d for d in item.split(",") if d.strip()])
        elif key == "count":
            devices = int(item) if digits(item) else None
    if devices is None or (inside is not None and inside[1] < devices):
        return inside
    return what, devices


# A GPU a container's --device names: a CDI device (nvidia.com/gpu=0, =GPU-uuid, =all) or an NVIDIA device node
_GPU_DEVICE = re.compile(r"(?:nvidia\.com|amd\.com)/gpu=[\w\-.*]{1,80}|/dev/nvidia[0-9]{1,3}")


def _devices_listed(value: str) -> int:
    """The devices a CUDA_VISIBLE_DEVICES-like value shows: CUDA stops at the first entry that is not a device."""
    shown = 0
    for device in value.split(","):
        entry = device.strip()
        if not digits(entry) and not entry.upper().startswith(("GPU-", "MIG-")):
            break  # '-1', 'abc', '': CUDA shows the devices before it only
        shown += 1
    return shown


# The wrappers that set the environment of the program after them (``env A=1 prog``, ``sudo A=1 prog``) and their
# options that take a value (coreutils env; sudo 1.9): passed over to reach the assignments.
_ENV_WRAPPERS = {"env": ("-u", "--unset", "-C", "--chdir", "-S", "--split-string"),
                 "sudo": ("-u", "--user", "-g", "--group", "-h", "--host", "-p", "--prompt", "-C", "--close-from",
                          "-D", "--chdir", "-r", "--role", "-t", "--type", "-T", "--command-timeout", "-U", "--other-user")}


def assignments(words: list[str]) -> list[tuple[str, str]]:
    """The NAME=VALUE assignments before the program of ``words``, as the shell (or ``env`` / ``sudo``, their options
    passed over) hands them to it, in order (a later one of a name wins)."""
    out: list[tuple[str, str]] = []
    wrapper: str | None = None
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if os.path.basename(word) in _ENV_WRAPPERS:
            wrapper = os.path.basename(word)
            continue
        if wrapper is not None and word.startswith("-"):
            skip = word in _ENV_WRAPPERS[wrapper]  # -u USER: the option's value is the next word
            continue
        name, eq, value = word.partition("=")
        if not eq or not name.isidentifier():
            break  # the program: the assignments are over
        out.append((name, value))
    return out


def visible_devices(words: list[str]) -> tuple[str, int] | None:
    """(the variable, how many devices it shows) of a CUDA_VISIBLE_DEVICES-like assignment before the program,
    also after ``env`` or ``sudo`` and their options (the last one given wins, as in the shell); CUDA stops at the
    first entry that is not a device (``-1``)."""
    shown = [(name, _devices_listed(value)) for name, value in assignments(words) if name in _VISIBLE]
    return shown[-1] if shown else None


# srun's options that ask GPUs for one task on one node, each the count the step's task sees (Slurm sets its
# CUDA_VISIBLE_DEVICES to the GPUs allocated to it): --gpus / -G (the job's, one task), --gpus-per-task,
# --gpus-per-node, --gres=gpu[:TYPE]:N
_SRUN_GPUS = re.compile(r"(?:--gpus|-G|--gpus-per-task|--gpus-per-node)(?:=| |)([0-9]{1,4})|--gres(?:=| )gpu(?::[^:,\s]{1,40})?:([0-9]{1,4})")
_SRUN_SPREAD = re.compile(r"(?:--ntasks|-n|--nodes|-N|--ntasks-per-node)(?:=| |)([0-9]{1,6})")  # more than one task


def slurm_gpus(words: list[str]) -> tuple[str, int] | None:
    """(how, GPUs) an ``srun`` before the program gives its one task; None where it asks none, or runs more than one
    task or node (each task's share is Slurm's to decide)."""
    at = next((i for i, w in enumerate(words) if os.path.basename(w) == "srun"), None)
    if at is None:
        return None
    found: tuple[str, int] | None = None
    end = next((i for i in program_starts(words) if i > at), len(words))  # srun's options end where the program starts
    rest = words[at + 1:end]
    for i, word in enumerate(rest):
        pair = f"{word} {rest[i + 1]}" if i + 1 < len(rest) else word  # --gpus 2: the option and its value
        spread = _SRUN_SPREAD.fullmatch(word) or _SRUN_SPREAD.fullmatch(pair)
        if spread is not None and int(spread.group(1)) > 1:
            return None
        m = _SRUN_GPUS.fullmatch(word) or _SRUN_GPUS.fullmatch(pair)
        if m is not None:
            found = (f"srun {word.partition('=')[0]}", int(m.group(1) or m.group(2)))
    return found


def devices_refused(words: list[str], used: int, label: str, fix: str) -> None:
    """Refuse a launch command whose CUDA_VISIBLE_DEVICES (or container's GPUs, or srun's) shows fewer devices than
    the ``used`` its parallel sizes take: the engine (``label``) stops at start-up. ``fix``: what to do, {used} in it."""
    shown = visible_devices(words) or container_gpus(words) or slurm_gpus(words)
    if shown is not None and used > shown[1]:
        count = f"{used} device{'s' if used != 1 else ''}"
        raise InputError(f"the command needs {used} GPU{'s' if used != 1 else ''} (TP x PP x DP) but its {shown[0]} shows "
                         f"{shown[1]}: {label} stops at start-up; {fix.format(used=count)}")


# --- a Kubernetes manifest or compose file pasted in place of the command ------------------------------------------

# Keys that open a container's spec in a manifest (Deployment, Pod, StatefulSet, LeaderWorkerSet ...) or a compose
# file's service, at the start of a line: a pasted text that holds them is YAML, not a shell command line
_MANIFEST_KEY = re.compile(r"^[ \t]*(?:-[ \t]+)?(?:image|command|args|containers|services|entrypoint):", re.M)
_GPU_LIMITS = ("nvidia.com/gpu", "amd.com/gpu")
# Engines' own images, whose tag names the release and whose readers take `docker run [--entrypoint P] IMAGE ...`
_ENGINE_IMAGES = ("vllm/vllm-openai", "vllm-openai:", "lmsysorg/sglang", "ggml-org/llama.cpp", "ggerganov/llama.cpp")


@record
class Manifest:
    """The launch command a pasted manifest's container runs, and the GPUs its pod asks (None: none said)."""

    words: tuple[str, ...]
    gpus: int | None
    source: str = "the pasted manifest"  # what gives the GPUs (its GPU limit or reservation)


def manifest_command(words: list[str]) -> Manifest | None:
    """The command of the one container that runs an engine in a pasted Kubernetes manifest or compose file (its
    environment as NAME=VALUE, then its command and args; without a command, the image and its args, which the
    image's entrypoint takes; compose: entrypoint, else the image, then command), and its pod's GPU limit; None
    where the words are not such YAML. Kubernetes' container fields (core/v1 Container: command, args, env) and
    compose's service fields (image, entrypoint, command, environment)."""
    from ..inputs import check_command_size, load_yaml

    if len(words) != 1 or "\n" not in words[0] or not _MANIFEST_KEY.search(words[0]):
        return None
    check_command_size(len(words[0]))
    docs = [load_yaml(doc, "the pasted manifest") for doc in re.split(r"(?m)^---[ \t]*$", words[0])]
    found = [c for c in _containers(docs) if launcher(shell_command(list(c.words))) is not None]
    if not found:
        raise InputError("the pasted text is YAML (a Kubernetes manifest or compose file) with no container that runs an "
                         "engine kvbudget reads (vllm serve, sglang, trtllm-serve, llama-server): give the launch "
                         "command itself")
    if len(found) > 1:
        raise InputError(f"the pasted manifest holds {len(found)} containers that run an engine: paste the one to plan")
    return found[0]


def _containers(node: object, depth: int = 0, pod: bool = False, pods: int = 1) -> list[Manifest]:
    """Every container spec under ``node``: a mapping with an image and a command, args or entrypoint (``pod``: in a
    Kubernetes ``containers`` list, whose command replaces the image's entrypoint; elsewhere a compose service's,
    whose command is the entrypoint's arguments). ``pods``: the pods of one replica (a LeaderWorkerSet's size: the
    leader's server runs on all of their GPUs)."""
    if depth > 40:
        return []
    if isinstance(node, list):
        return [c for item in node for c in _containers(item, depth + 1, pod, pods)]
    if not isinstance(node, dict):
        return []
    group = node.get("leaderWorkerTemplate")
    size = group.get("size") if isinstance(group, dict) else None
    pods = size if isinstance(size, int) and not isinstance(size, bool) and 1 <= size <= 1 << 16 else pods
    found = [c for key, value in node.items() if key not in ("env", "environment")
             for c in _containers(value, depth + 1, key in ("containers", "initContainers"), pods)]
    image = node.get("image")
    if any(k in node for k in ("command", "args", "entrypoint")):  # a container, or its command and args alone
        found.append(container_words(node, image if isinstance(image, str) else None, pod or "args" in node, pods))
    return found


def _words_of(value: object, what: str) -> list[str]:
    """A command, args or entrypoint as a list of words (compose also takes one string, split as a shell would)."""
    from ..inputs import excerpt, split_command

    if value is None:
        return []
    if isinstance(value, str):
        return split_command(value)
    if isinstance(value, list) and all(isinstance(w, (str, int, float)) and not isinstance(w, bool) for w in value):
        return [str(w) for w in value]
    raise InputError(f"the pasted manifest's {what} {excerpt(value, 40)} is not a list of words")


def container_words(spec: dict[str, object], image: str | None, pod: bool, pods: int) -> Manifest:
    env = spec.get("env", spec.get("environment"))
    assigned: list[str] = []
    if isinstance(env, list):  # Kubernetes [{name, value}], compose ["A=1"]
        assigned = [f"{e['name']}={e.get('value', '')}" if isinstance(e, dict) and "name" in e else str(e) for e in env]
    elif isinstance(env, dict):  # compose {A: 1}
        assigned = [f"{k}={'' if v is None else v}" for k, v in env.items()]
    assigned = [a for a in assigned if "=" in a and a.partition("=")[0].isidentifier()]
    # Kubernetes: command replaces the image's entrypoint, args are its arguments; compose: entrypoint and command
    program = _words_of(spec.get("command" if pod else "entrypoint"), "command" if pod else "entrypoint")
    rest = _words_of(spec.get("args" if pod else "command"), "args" if pod else "command")
    shell = bool(program) and os.path.basename(program[0]) in _SHELLS  # sh -c SCRIPT: the script says what runs
    if image is not None and any(name in image for name in _ENGINE_IMAGES) and not shell:
        # as docker runs it: the image's tag names the release, and its entrypoint runs where no command replaces it
        run = ["docker", "run", *[w for a in assigned for w in ("-e", a)],
               *(["--entrypoint", program[0], image, *program[1:]] if program else [image]), *rest]
        assigned = []
    elif not pod and image is None and not program:  # a compose command without its image: the command itself
        run = rest
    else:  # another image (a CUDA or Python base) with the engine installed: its program runs
        run = [*(program or ([image] if image else [])), *rest]
    count = gpus_asked(spec)
    return Manifest(tuple([*assigned, *run]), None if count is None else count * pods)


def gpus_asked(spec: dict[str, object]) -> int | None:
    """The GPUs a container asks: Kubernetes' resources.limits (nvidia.com/gpu, amd.com/gpu), compose's
    deploy.resources.reservations.devices (count, or device_ids); None where it says none (or 'all')."""
    resources = spec.get("resources")
    limits = resources.get("limits") if isinstance(resources, dict) else None
    asked = next((limits[k] for k in _GPU_LIMITS if k in limits), None) if isinstance(limits, dict) else None
    deploy = spec.get("deploy")
    node: object = deploy
    for key in ("resources", "reservations", "devices"):
        node = node.get(key) if isinstance(node, dict) else None
    for device in node if isinstance(node, list) else []:
        if isinstance(device, dict) and isinstance(device.get("device_ids"), list):
            asked = len(device["device_ids"])
        elif isinstance(device, dict) and "count" in device:
            asked = device["count"]
    if isinstance(asked, str) and digits(asked) and len(asked) < 7:
        return int(asked)
    return asked if isinstance(asked, int) and not isinstance(asked, bool) and asked >= 0 else None
