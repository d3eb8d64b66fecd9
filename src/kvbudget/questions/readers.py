"""``explain`` and ``check``, once for every engine: the engine that claims a pasted launch command or a start-up
log reads it; a command is then planned as ``fit`` plans it."""

from __future__ import annotations

from ..units import InputError, excerpt

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    from ..engines.base import Engine, Registry
    from ..hardware import GPU
    from .fit import FitAnswer


def explain(words: list[str], gpu: GPU, given: dict[str, Any], registry: Registry) -> tuple[Engine, FitAnswer]:
    """The engine whose launch command ``words`` is, and its plan of it (``given``: the engine options the user
    gave kvbudget, such as a vLLM release or a llama.cpp build, and ``num_gpus``, the GPUs the machine has)."""
    from ..engines.base import Ask
    from ..model.resolve import load_foreign_model
    from .fit import fit

    _words_read(words)
    words = _one_command(words, registry)
    engine = registry.reader(lambda e: e.reads_command(words))
    if engine is None:
        raise InputError(f"no engine kvbudget knows reads {words[0]!r}: give a vllm serve, python -m "
                         "sglang.launch_server, trtllm-serve or llama-server command")
    _only_its_own(engine, given, "explain", "command", registry)
    cmd = engine.read_command(words, given)
    used, have = engine.gpus(cmd.settings), given.get("num_gpus")
    gpus = f"{used} GPU{'s' if used != 1 else ''}"
    if have is not None and used > have:
        raise InputError(f"the command needs {gpus} (TP x PP x DP) but --num-gpus is {have}")
    shown = _visible_devices(words) or _container_gpus(words)
    if shown is not None and engine.name != "llama.cpp" and used > shown[1]:  # llama.cpp runs on the GPUs it sees
        raise InputError(f"the command needs {gpus} (TP x PP x DP) but its {shown[0]} shows {shown[1]}: "
                         f"{engine.label} stops at start-up; list {used} device{'s' if used != 1 else ''} there, or lower "
                         "the parallel sizes")
    return engine, fit(load_foreign_model(cmd.model, cmd.overrides), gpu, engine, Ask(), registry=registry, settings=cmd.settings,
                       warnings=cmd.warnings, inverse=False)


# Dashes a word processor or a chat window puts in place of '-': en and em dash, the minus sign, hyphens ...
_DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d"


def _words_read(words: list[str]) -> None:
    """What every engine's command reader needs of the words: a bounded size, and flags written with '-'. A word
    like '\u2014tensor-parallel-size' is a stray positional word to the engine's argparse (it stops at start-up),
    and kvbudget's readers passed it over: the plan was the default layout, exit 0."""
    from ..inputs import check_command_size

    check_command_size(sum(len(w) + 1 for w in words))
    for word in words:
        if word[:1] in _DASHES and word.lstrip(_DASHES)[:1].isalpha():
            name = word.lstrip(_DASHES).split("=")[0]
            fixed = ("-" if len(name) <= 3 else "--") + name  # -tp, -c, -ngl; --tensor-parallel-size
            raise InputError(f"{excerpt(word.split('=')[0], 40)} starts with {word[0]!r} (U+{ord(word[0]):04X}), not '-' "
                             f"(a text editor changed the dashes): the engine reads it as a stray word and stops; "
                             f"type {excerpt(fixed, 40)[1:-1]}")


# Where a launch command starts: ``vllm serve``, vLLM's API server modules and image, SGLang's module, trtllm-serve and
# llama.cpp's programs (by name, so that a second one pasted after the first is seen).
_VLLM_MODULES = ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server")
_PROGRAMS = ("sglang.launch_server", "trtllm-serve", "llama-server", "llama-cli", "llama-run", "llama-bench")


def _starts(words: list[str]) -> list[int]:
    """The indices of ``words`` where a launch command's program is named."""
    import os

    out = []
    for i, word in enumerate(words):
        base = os.path.basename(word)
        if ((base in ("vllm", "sglang") and words[i + 1:i + 2] == ["serve"]) or word in _VLLM_MODULES or base in _PROGRAMS
                or "vllm/vllm-openai" in word):
            out.append(i)
    return out


def _one_command(words: list[str], registry: Registry) -> list[str]:
    """The one launch command in ``words``: shell setup around it (``cd``, ``source``, ``| tee LOG``) is passed over,
    ``export NAME=VALUE`` before it applies to it; two launch commands (joined by ``&&``, ``;``, a line end, or
    pasted one after the other) are refused: each would be planned as the other's flags, or one of them unread."""
    from ..inputs import SHELL_OPERATORS

    segments: list[list[str]] = [[]]
    for word in words:
        if word in SHELL_OPERATORS:
            segments.append([])
        else:
            segments[-1].append(word)
    segments = [s for s in segments if s]
    if len(segments) == 1 and len(_starts(segments[0])) < 2:
        return segments[0]
    named = [e for e in registry if not getattr(e, "default_reader", False)]
    launches: list[tuple[int, list[str]]] = []  # (its segment, its words)
    for n, segment in enumerate(segments):
        starts = _starts(segment)
        if not starts and any(e.reads_command(segment) for e in named):
            starts = [0]
        launches += [(n, segment[i:j]) for i, j in zip(starts, [*starts[1:], len(segment)][:len(starts)], strict=True)]
    if len(launches) > 1:
        shown = " and ".join(f"`{excerpt(' '.join(c[:3]), 60)[1:-1]}`" for _, c in launches[:2])
        raise InputError(f"the text holds {len(launches)} launch commands ({shown}): kvbudget explain plans one; "
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


def _container_gpus(words: list[str]) -> tuple[str, int] | None:
    """(how it is given, how many GPUs) a ``docker run`` gives its container before the image: ``--gpus N`` or
    ``--gpus '"device=0,1"'`` (Docker's CSV form), else ``-e NVIDIA_VISIBLE_DEVICES=0,1`` (the NVIDIA runtime);
    None for ``all`` or no such option."""
    import csv
    import os

    at = next((i for i, w in enumerate(words[:-1]) if os.path.basename(w) in _CONTAINER_PROGRAMS and words[i + 1] == "run"),
              None)
    if at is None:
        return None
    found: tuple[str, str] | None = None
    rest = words[at + 2:]
    for i, word in enumerate(rest):
        if word in ("--gpus", "-e", "--env") and i + 1 < len(rest):
            flag, value = word, rest[i + 1]
        elif word.startswith(("--gpus=", "--env=")):
            flag, _, value = word.partition("=")
        elif not word.startswith("-") and (i == 0 or rest[i - 1] not in ("--gpus", "-e", "--env", "-p", "-v", "--name",
                                                                         "--runtime", "--ipc", "--shm-size", "--network",
                                                                         "-w", "--mount", "--env-file", "--entrypoint")):
            break  # the image: what follows is the container's command
        else:
            continue
        if flag == "--gpus":
            found = ("docker run --gpus", value)
        elif value.startswith("NVIDIA_VISIBLE_DEVICES=") and found is None:
            found = ("NVIDIA_VISIBLE_DEVICES", value.partition("=")[2])
    if found is None:
        return None
    what, value = found
    if what == "NVIDIA_VISIBLE_DEVICES":  # a plain list of indices or UUIDs; all / none / void are no count
        listed = [d for d in value.split(",") if d.strip()]
        return None if not listed or listed[0].strip().lower() in ("all", "none", "void") else (what, len(listed))
    devices: int | None = None
    for n, field in enumerate(next(csv.reader([value]), [])):
        key, eq, item = field.strip().strip('"').partition("=")
        if not eq and n == 0:
            if key.strip().lower() == "all" or not key.strip().isdigit():
                return None
            devices = int(key)  # --gpus 2: two GPUs
        elif not eq and devices is not None and key.strip():
            devices += 1  # device=0,1 unquoted: CSV cut the list
        elif key == "device":
            devices = len([d for d in item.split(",") if d.strip()])
        elif key == "count":
            devices = int(item) if item.isdigit() else None
    return None if devices is None else (what, devices)


def _visible_devices(words: list[str]) -> tuple[str, int] | None:
    """(the variable, how many devices it shows) of a CUDA_VISIBLE_DEVICES-like assignment before the program;
    CUDA stops at the first entry that is not a device (``-1``)."""
    for word in words:
        name, eq, value = word.partition("=")
        if word == "env":
            continue
        if not eq or not name.isidentifier() or not name.isupper():
            return None  # the program: the assignments are over
        if name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
            shown = 0
            for device in value.split(","):
                entry = device.strip()
                if not (entry.isdigit() and entry.isascii()) and not entry.upper().startswith(("GPU-", "MIG-")):
                    break  # '-1', 'abc', '': CUDA shows the devices before it only
                shown += 1
            return name, shown
    return None


def check(text: str, given: dict[str, Any], registry: Registry) -> tuple[Engine, Any]:
    """The engine whose start-up log ``text`` is, and its check of the log against kvbudget's figures."""
    engine = registry.reader(lambda e: e.reads_log(text))
    if engine is None:
        raise InputError("no engine kvbudget knows printed this log: give a vLLM, SGLang, TensorRT-LLM or llama.cpp "
                         "start-up log")
    # logs of two engines pasted together: the first claimant read its part and the rest went unread, unannounced
    claims = [e.label for e in registry if not getattr(e, "default_reader", False) and e.reads_log(text)]
    claims += [e.label for e in registry if getattr(e, "default_reader", False) and any(m in text for m in _VLLM_MARKS)]
    if len(claims) > 1:
        raise InputError(f"the log holds start-up lines of {claims[0]} and of {claims[1]}: give one engine's log "
                         "(check each run on its own)")
    _only_its_own(engine, given, "check", "log", registry)
    if given.get("flags") and not getattr(engine, "reads_run_flags", False):
        raise InputError(f"this is {engine.label}'s log: the flags after -- are read for vLLM, SGLang and TensorRT-LLM logs only (drop them)")
    return engine, engine.check(text, given)


# Lines only vLLM prints (its API server's version, the KV budget of V1 and V0), each at the start of a run's figures.
_VLLM_MARKS = ("vLLM API server version ", "Available KV cache memory: ", "# GPU blocks: ")


def _only_its_own(engine: Engine, given: dict[str, Any], command: str, what: str, registry: Registry) -> None:
    """Refuse an engine option given for a command or log another engine reads (instead of ignoring it)."""
    mine = {o.dest for o in engine.options if command in o.commands}
    theirs = {o.dest for e in registry for o in e.options if command in o.commands} - mine
    for dest, value in given.items():
        if value is not None and dest in theirs:
            raise InputError(f"--{dest.replace('_', '-')} is not read for {engine.label}'s {what} (drop it)")
