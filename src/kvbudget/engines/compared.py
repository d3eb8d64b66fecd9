"""What ``check`` hands the report for any engine: a logged figure beside kvbudget's (``Row``), and for SGLang and
TensorRT-LLM the whole answer (``OtherCheck``: the settings the log showed, the prediction's rows, the rows
recomputed from the log's own figures, notes and warnings). Also the run's device as SGLang and TensorRT-LLM logs
name it (``run_gpu``). And the one rule every engine's check reads the words after ``check LOG --`` by: a whole
launch command or the engine's bare flags (``is_launch_command``, ``launcher``, ``run_words``)."""

from __future__ import annotations

import os

from .._record import fields, record, replace
from ..hardware import GPU, UnknownGPU, custom_gpu, find_gpu
from ..model.spec import ModelSpec
from ..units import GiB, InputError

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


def settings_items(settings: object, defaults: object) -> tuple[tuple[str, object], ...]:
    """The fields of ``settings`` that differ from ``defaults`` (both records of one type), in field order."""
    return tuple((n, getattr(settings, n)) for n in fields(settings) if getattr(settings, n) != getattr(defaults, n))


def run_gpu(gpu: str | None, gpu_memory: int | None, logged_name: str | None, logged_total_gib: float | None,
            free_gib: float | None, engine: str) -> GPU | None:
    """The device of a logged run: ``gpu`` (else the name the log prints), with ``gpu_memory`` or the total the log
    prints (TensorRT-LLM's "total: X GiB") as its memory, or an unnamed card of that memory; None when neither the
    flags nor the log say. A card with less memory than the log had free (``free_gib``) is not the run's."""
    device: GPU | None = None
    if gpu:
        device = find_gpu(gpu)
    elif logged_name:
        try:
            device = find_gpu(logged_name)
        except UnknownGPU:
            device = None
    memory = gpu_memory if gpu_memory is not None else round(logged_total_gib * GiB) if logged_total_gib else None
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
# starts so (their flags start with '-').
_FIRST_WORDS = ("vllm", "sglang", "trtllm-serve", "trtllm-llmapi-launch", "llama-server", "python", "python3", "docker",
                "podman", "apptainer", "singularity", "env", "sudo", "nohup", "uv", "mpirun", "srun")


def is_launch_command(words: list[str]) -> bool:
    """Whether words given after ``check LOG --`` are a whole launch command (``VAR=1 vllm serve M ...``, ``docker run
    ... IMAGE ...``, ``python -m sglang.launch_server ...``, ``trtllm-serve M ...``) rather than an engine's flags."""
    if not words or words[0].startswith("-"):
        return False
    first = os.path.basename(words[0])
    name, eq, _ = first.partition("=")
    return first in _FIRST_WORDS or first.startswith("python3.") or bool(eq and name.isidentifier() and name.isupper())


_LLAMA_PROGRAMS = ("llama-server", "llama-cli", "llama-run", "llama-bench")


def launcher(words: list[str]) -> str | None:
    """The engine whose server ``words`` start, by its program, module or image: vLLM (``vllm serve``, its API server
    modules, the vllm/vllm-openai image or an Apptainer .sif of it), SGLang (``sglang.launch_server``, ``sglang
    serve``), TensorRT-LLM (``trtllm-serve``), llama.cpp (``llama-server`` ...); None where they name none."""
    for i, word in enumerate(words):
        base = os.path.basename(word)
        serve = words[i + 1:i + 2] == ["serve"]
        if (base == "vllm" and serve) or word.startswith("vllm.entrypoints.") or "vllm-openai" in base or "vllm/vllm-openai" in word:
            return "vLLM"
        if word == "sglang.launch_server" or (base == "sglang" and serve):
            return "SGLang"
        if base == "trtllm-serve":
            return "TensorRT-LLM"
        if base in _LLAMA_PROGRAMS:
            return "llama.cpp"
    return None


def run_words(flags: list[str] | None, engine: str, example: str) -> tuple[list[str], bool]:
    """The words after ``check LOG --`` for a log of ``engine`` (its label), and whether they are a whole launch
    command of it (``is_launch_command``) rather than its flags. One quoted string is split as a shell splits it;
    the shell's redirections (``> serve.log 2>&1``) and a closing ``&`` are dropped, as the shell takes them. Refused
    in one line: nothing after ``--``, a command too long, two commands, a command that launches another engine (or
    none: only environment assignments, a wrapper around another program). ``example``: the engine's launch command,
    for the messages."""
    from ..inputs import SHELL_OPERATORS, check_command_size, excerpt, split_command, without_redirections

    words = list(flags or ())
    check_command_size(sum(len(w) + 1 for w in words))
    if len(words) == 1 and any(c.isspace() for c in words[0]):  # the command pasted as one quoted string
        words = split_command(words[0])
    words = without_redirections(words)
    while words and words[-1] in SHELL_OPERATORS:  # `... &`: run in the background, the command is the same
        words.pop()
    if flags is not None and not any(w.strip() for w in words):  # `--`, `-- ""`
        raise InputError(f"nothing after --: give the {engine} run's flags (or its whole launch command, {example}) "
                         "after it, or drop the --")
    joined = next((w for w in words if w in SHELL_OPERATORS), None)
    if joined is not None:
        raise InputError(f"the words after -- hold two commands joined by {joined!r}: give the {engine} launch command "
                         "alone")
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


def command_env(words: list[str]) -> list[tuple[str, str]]:
    """The environment ``words`` (a whole launch command up to its program) set: NAME=VALUE words (first, or after
    ``env`` / ``sudo``), and ``docker run``'s -e / --env NAME=VALUE options (a bare -e NAME passes the host's value
    on: unknown here)."""
    out: list[tuple[str, str]] = []
    for i, word in enumerate(words):
        if word in ("-e", "--env") and i + 1 < len(words):
            value = words[i + 1]
        elif word.startswith("--env="):
            value = word[6:]
        elif word.startswith("-e") and len(word) > 2 and "=" in word:
            value = word[2:]
        elif not word.startswith("-") and "=" in word and (i == 0 or "=" in words[i - 1] or words[i - 1] in ("env", "sudo")):
            value = word
        else:
            continue
        key, eq, val = value.partition("=")
        if eq and key.isidentifier():
            out.append((key, val))
    return out
