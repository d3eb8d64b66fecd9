"""``explain`` and ``check``, once for every engine: the engine that claims a pasted launch command or a start-up
log reads it; a command is then planned as ``fit`` plans it."""

from __future__ import annotations

from ..units import InputError

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
    from ..engines.compared import (
        devices_refused,
        manifest_command,
        one_command,
        package_pins,
        shell_command,
        words_read,
    )
    from ..engines.orchestrators import helm_values_command, kubectl_command
    from ..model.resolve import load_foreign_model
    from .fit import fit

    # a Kubernetes manifest, compose file or Helm values file pasted whole, or kubectl run: its container's command
    manifest = helm_values_command(words) or manifest_command(words) or kubectl_command(words)
    words = shell_command(list(manifest.words) if manifest is not None else words)
    words_read(words)
    pins = package_pins(words)  # also those of the setup before the command (pip install vllm==0.10.1 && ...)
    named = [e for e in registry if not getattr(e, "default_reader", False)]
    words = one_command(words, lambda segment: any(e.reads_command(segment) for e in named))
    engine = registry.reader(lambda e: e.reads_command(words))
    if engine is None:
        raise InputError(f"no engine kvbudget knows reads {words[0]!r}: give a vllm serve, python -m "
                         "sglang.launch_server, trtllm-serve or llama-server command")
    if getattr(engine, "package", None) in pins:  # the release the command installs, for an engine that reads it
        given = {**given, "pinned": pins[engine.package]}  # type: ignore[attr-defined]
    _only_its_own(engine, given, "explain", "command", registry)
    cmd = engine.read_command(words, given)
    used, have = engine.gpus(cmd.settings), given.get("num_gpus")
    gpus = f"{used} GPU{'s' if used != 1 else ''}"
    if have is not None and used > have:
        raise InputError(f"the command needs {gpus} (TP x PP x DP) but --num-gpus is {have}")
    if engine.name != "llama.cpp":  # llama.cpp runs on the GPUs it sees
        devices_refused(words, used, engine.label, "list {used} there, or lower the parallel sizes")
        if manifest is not None and manifest.gpus is not None and used > manifest.gpus:
            raise InputError(f"the command needs {gpus} (TP x PP x DP) but {manifest.source} gives it {manifest.gpus} "
                             f"(its GPU limit or reservation): {engine.label} stops at start-up; ask {used} there, or "
                             "lower the parallel sizes")
    return engine, fit(load_foreign_model(cmd.model, cmd.overrides), gpu, engine, Ask(), registry=registry, settings=cmd.settings,
                       warnings=cmd.warnings, inverse=False)


def check(text: str, given: dict[str, Any], registry: Registry) -> tuple[Engine, Any]:
    """The engine whose start-up log ``text`` is, and its check of the log against kvbudget's figures."""
    from ..inputs import plain_spaces

    text = plain_spaces(text)  # a copy from a web page: no-break spaces where the engine printed blanks
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
    _one_start(engine.name, engine.label, text)
    _only_its_own(engine, given, "check", "log", registry)
    if given.get("flags") and not getattr(engine, "reads_run_flags", False):
        raise InputError(f"this is {engine.label}'s log: the flags after -- are read for vLLM, SGLang and TensorRT-LLM logs only (drop them)")
    return engine, engine.check(text, given)


# Lines an engine prints once per start-up, before any figure (a second is another run: a restarted server, or logs
# pasted together, whose lines the engine's reader would mix into one run): SGLang's launch server logs its
# ServerArgs once (the scheduler processes do not); llama.cpp's programs print their build once (common.cpp
# print_build_info: 'build: N (hash) with ...', 'main: build = N (hash)' in older builds) and initialise the CUDA
# backend once ('ggml_cuda_init: found N CUDA devices', once for a draft model too). vLLM's reader takes the last
# of its start-ups itself (a warning says so).
_ONE_PER_START = {"sglang": ((r"server_args=ServerArgs\(", "its ServerArgs line"),),
                  "llama.cpp": ((r"(?m)^(?:main: )?build(?: = |: )[0-9]{1,6} \(", "its build line"),
                                (r"ggml_cuda_init: found [0-9]", "'ggml_cuda_init: found N CUDA devices'"))}


def _one_start(name: str, label: str, text: str) -> None:
    """Refuse a log that holds two start-ups of ``name``'s engine (one run's model and another's figures were read as
    one run: exit 0)."""
    import re

    for pattern, what in _ONE_PER_START.get(name, ()):
        count = len(re.findall(pattern, text))
        if count > 1:
            raise InputError(f"the log holds {count} start-ups of {label} ({what} printed {count} times: a restarted "
                             "server, or logs pasted together): give one run's lines (check each run on its own)")


# Lines only vLLM prints (its API server's version, the KV budget of V1 and V0), each at the start of a run's figures.
_VLLM_MARKS = ("vLLM API server version ", "Available KV cache memory: ", "# GPU blocks: ")


def _only_its_own(engine: Engine, given: dict[str, Any], command: str, what: str, registry: Registry) -> None:
    """Refuse an engine option given for a command or log another engine reads (instead of ignoring it)."""
    mine = {o.dest for o in engine.options if command in o.commands}
    theirs = {o.dest for e in registry for o in e.options if command in o.commands} - mine
    for dest, value in given.items():
        if value is not None and dest in theirs:
            raise InputError(f"--{dest.replace('_', '-')} is not read for {engine.label}'s {what} (drop it)")
