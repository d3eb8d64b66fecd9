"""Reading SGLang's and TensorRT-LLM's launch commands: what the two readers share (the flag loop and the
checked values) and ``parse_other_command``, which tells the two commands apart and hands each to its
engine's reader (``engines/sglang/command.py``, ``engines/trtllm/command.py``)."""

from __future__ import annotations

import os
from collections.abc import Callable

from .._record import record
from ..inputs import excerpt, parse_real, parse_whole, split_command
from ..units import InputError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from .sglang.settings import SGLangSettings
    from .trtllm.settings import TrtllmSettings


@record
class OtherCommand:
    engine: str
    model: str
    sglang: SGLangSettings | None
    trtllm: TrtllmSettings | None
    warnings: tuple[str, ...] = ()


WHOLE = (1, 1 << 40)  # a count of at least 1: what a numeric flag takes unless its engine says otherwise
PARALLEL = (1, 1 << 16)  # --tp, --pp and --dp sizes


def flag_value(kind: str, text: str, flag: str, whole_range: tuple[int, int] = WHOLE, below_one: bool = True) -> object:
    """A flag's value of ``kind`` (int, float: a fraction in (0, 1), str), checked against the engine's range."""
    if kind == "int":
        lo, hi = whole_range
        return parse_whole(text, flag, lo, hi)
    if kind == "float":
        return fraction(parse_real(text, flag, 0, 1, lo_open=True), flag, below_one)
    t = text.strip()
    if not t or len(t) > 4096:
        raise InputError(f"{flag} {excerpt(text)}: give a value")
    return t


def fraction(value: float, label: str, below_one: bool = True) -> float:
    """A fraction of the GPU's memory in (0, 1): 1 leaves nothing for activations."""
    if below_one and value >= 1:
        raise InputError(f"{label} is {value:g}: it must be below 1 (a fraction of the GPU's memory)")
    return value


@record
class Parser:
    """What an engine's own command-line parser knows, so that a flag it would refuse is refused here too (it was
    passed over with a warning: a misspelt ``--mem-fraction-statc`` planned the default fraction, exit 0)."""
    label: str  # the engine, as the error names it
    flags: dict[str, int | str]  # every option string -> the values it takes (argparse nargs: 0, 1, '?', '+', '*')
    unknown: str  # the parser's error for an unknown option, {flag} in it
    extra: str  # its error for a stray word, {word} in it
    ambiguous: str = ""  # argparse's error for a prefix of several flags ({flag}, {matches}); "" where prefixes are not read


def _refuse(parser: Parser, message: str, flag: str, table: dict[str, tuple[str, str]]) -> InputError:
    import difflib

    close = difflib.get_close_matches(flag, [*parser.flags, *table], n=2, cutoff=0.75) if len(flag) <= 80 else []
    hint = f" (did you mean {' or '.join(dict.fromkeys(close))}?)" if close else ""
    return InputError(f"{parser.label} stops at start-up: `{message}`{hint}")


# Flags that pick a branch, tag or commit of the model's Hub repository (vLLM --revision / --code-revision, SGLang and
# trtllm-serve --revision): the config there may differ from the one kvbudget plans (the catalog's, or the default
# branch's). The tokenizer's revision changes no GPU memory and is passed over silently.
REVISION_FLAGS = ("--revision", "--code-revision")


def revision_said(flag: str, value: str) -> str:
    """The one-line warning for a revision kvbudget does not read."""
    return (f"{flag} {excerpt(value, 40)}: kvbudget reads the model's config from the catalog or the repo's default "
            "branch, not this revision; if its config.json differs, give that file (or its folder) as the model")


# Flags of the servers' HTTP front end, logging, tokenizer and chat template: they take no GPU memory, so a command
# that gives them is read without a warning (SGLang's server_args.py, trtllm-serve's serve.py), as vLLM's are.
_FRONT_END = frozenset({
    "host", "port", "api-key", "trust-remote-code", "log-level", "log-level-http", "log-requests", "served-model-name",
    "chat-template", "reasoning-parser", "tool-call-parser", "enable-metrics", "random-seed", "download-dir",
    "tokenizer", "tokenizer-path", "tokenizer-mode", "skip-tokenizer-init", "watchdog-timeout", "show-time-cost",
    "enable-cache-report", "decode-log-interval",
})


def front_end(flag: str) -> bool:
    """Whether ``flag`` (``--log-level``, ``--log_level``) is one of the front end's, which take no GPU memory."""
    return flag.lstrip("-").replace("_", "-") in _FRONT_END


def scan_flags(engine: str, args: list[str], table: dict[str, tuple[str, str]], value: Callable[[str, str, str, str], object],
               switches: dict[str, str], positional_model: bool,
               parser: Parser | None = None) -> tuple[str, dict[str, object], list[str]]:
    """Walk the arguments after the program: ``--flag value`` and ``--flag=value`` of ``table`` (flag ->
    (field, kind); ``value(kind, text, flag, field)`` checks each, kind ``raw`` keeps the text as given),
    the ``switches`` (flag -> field set to True), a bare model name where the program takes one
    (``positional_model``); another flag of the engine's ``parser`` (and the values it takes) is ignored with a
    warning, and a flag or word the parser does not know is refused as the engine refuses it (with the closest
    flags); argparse's unambiguous prefixes read as the flag. The model, the fields and the warnings."""
    fields: dict[str, object] = {}
    model = ""
    warnings: list[str] = []
    i = 0
    while i < len(args):
        flag, eq, inline = args[i].partition("=")
        i += 1
        if parser is not None and flag.startswith("--") and flag not in table and flag not in switches:
            flag = _known(parser, flag, table)
        if flag in table:
            if not eq:
                if i >= len(args):
                    raise InputError(f"{flag} needs a value")
                inline, i = args[i], i + 1
            field, kind = table[flag]
            if field == "model":
                model = inline
            elif kind == "raw":
                fields[field] = inline
            else:
                fields[field] = value(kind, inline, flag, field)
        elif flag in switches:
            fields[switches[flag]] = True
        elif not flag.startswith("-") and positional_model and not model:
            model = flag
        elif parser is not None and (not flag.startswith("-") or flag == "-"):
            raise _refuse(parser, parser.extra.format(word=excerpt(args[i - 1], 60)[1:-1]), "", {})
        elif flag.startswith("-"):
            if parser is not None:
                takes = parser.flags.get(flag)
                if takes is None:
                    raise _refuse(parser, parser.unknown.format(flag=excerpt(flag, 60)[1:-1]), flag, table)
                if flag in REVISION_FLAGS and takes == 1 and (eq or i < len(args)):
                    warnings.append(revision_said(flag, inline if eq else args[i]))
                    i += 0 if eq else 1
                    continue
                if not eq and takes == 1 and i < len(args):
                    i += 1
                elif not eq and takes in ("?", "+", "*"):
                    while i < len(args) and not args[i].startswith("-"):
                        i += 1
                        if takes == "?":
                            break
            elif not eq and i < len(args) and not args[i].startswith("-"):
                i += 1
            if not front_end(flag):
                warnings.append(f"{engine} flag {flag} does not change memory in kvbudget's model: ignored")
    if not model:
        raise InputError("the command names no model")
    return model, fields, warnings


def _known(parser: Parser, flag: str, table: dict[str, tuple[str, str]]) -> str:
    """``flag`` as the engine's parser reads it: itself, or the one flag it is a prefix of (argparse's
    allow_abbrev); a prefix of several is argparse's 'ambiguous option' error."""
    if flag in parser.flags or not parser.ambiguous:
        return flag
    matches = [f for f in parser.flags if f.startswith(flag)] if len(flag) > 2 else []
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        shown = ", ".join(matches[:4]) + (", ..." if len(matches) > 4 else "")
        raise _refuse(parser, parser.ambiguous.format(flag=excerpt(flag, 60)[1:-1], matches=shown), "", {})
    return flag


# trtllm-serve's subcommands other than serve (tensorrt_llm/commands/serve.py: a first word that is not one of them
# is the model of the default ``serve``)
_TRTLLM_OTHERS = ("grpc", "disaggregated", "disaggregated_mpi_worker", "mm_embedding_serve")


def sglang_serve_at(tokens: list[str]) -> int | None:
    """Where ``sglang serve`` (SGLang 0.5's console script, sglang/cli/main.py) starts in ``tokens``."""
    return next((i for i, t in enumerate(tokens[:-1]) if os.path.basename(t) == "sglang" and tokens[i + 1] == "serve"),
                None)


def _sglang_serve_args(args: list[str]) -> list[str]:
    """The arguments of ``sglang serve`` as SGLang 0.5.23's sglang/cli/serve.py hands them to the server: its
    ``--model-type`` backend selector taken out, a first bare word read as ``--model-path``."""
    out: list[str] = []
    backend = "auto"
    i = 0
    while i < len(args):
        if args[i] == "--model-type" and i + 1 < len(args):
            backend, i = args[i + 1], i + 2
            continue
        if args[i].startswith("--model-type="):
            backend, i = args[i].split("=", 1)[1], i + 1
            continue
        out.append(args[i])
        i += 1
    if backend not in ("auto", "llm"):
        raise InputError(f"sglang serve --model-type {excerpt(backend, 30)}: kvbudget plans the LLM server only "
                         "(--model-type llm)")
    if out and not out[0].startswith("-"):
        out = ["--model-path", out[0], *out[1:]]
    return out


def launch_args(tokens: list[str]) -> tuple[str, list[str], int]:
    """The server an SGLang or TensorRT-LLM launch command starts ("sglang" or "trtllm"), the arguments its parser
    reads (environment assignments, wrappers and a container's options before the program passed over; ``sglang
    serve``'s read as the server takes them, ``trtllm-serve serve`` as the default subcommand) and where its program
    is in ``tokens``."""
    if "sglang.launch_server" in tokens:
        at = tokens.index("sglang.launch_server")
        return "sglang", tokens[at + 1:], at
    serve = sglang_serve_at(tokens)
    if serve is not None:
        return "sglang", _sglang_serve_args(tokens[serve + 2:]), serve
    trt = next((i for i, t in enumerate(tokens) if os.path.basename(t) == "trtllm-serve"), None)
    if trt is not None:
        args = tokens[trt + 1:]
        if args[:1] == ["serve"]:  # trtllm-serve serve MODEL: the default subcommand named
            args = args[1:]
        elif args[:1] and args[0] in _TRTLLM_OTHERS:
            raise InputError(f"trtllm-serve {args[0]} is not a server kvbudget plans: give trtllm-serve [serve] MODEL ...")
        return "trtllm", args, trt
    raise InputError("not an SGLang or TensorRT-LLM launch command")


def parse_other_command(argv: list[str] | str, sglang_version: str | None = None) -> OtherCommand:
    """Read an SGLang or TensorRT-LLM launch command (environment assignments and wrappers before the program
    passed over); an SGLang command's flags are checked against the release ``sglang_version`` names (a release
    or a line; None: the newest SGLang flag table holds)."""
    tokens = split_command(argv) if isinstance(argv, str) else list(argv)
    server, args, _ = launch_args(tokens)
    if server == "sglang":
        from .sglang.command import sglang_command

        return sglang_command(args, sglang_version)
    from .trtllm.command import trtllm_command

    return trtllm_command(args)
