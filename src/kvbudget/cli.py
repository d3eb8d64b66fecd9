"""Command line: parse, call the library, render. No arithmetic here."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .units import InputError, parse_size

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any, NoReturn

PROG = "kvbudget"


class _Formatter(argparse.HelpFormatter):
    """Help text at a fixed width unless COLUMNS says otherwise (argparse would import shutil
    to ask the terminal for every argument it adds, which costs start-up time)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None) -> None:
        cols = os.environ.get("COLUMNS", "")
        super().__init__(prog, indent_increment, max_help_position, width or (int(cols) - 2 if cols.isdigit() else 100))


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit code 2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{PROG}: error: {message} (see `{self.prog} --help`)\n")
        raise SystemExit(2)


def _count(text: str) -> int:
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        if text.lower().endswith("k") and text[:-1].isdigit():
            value = int(text[:-1]) * 1024
        else:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return value


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _size0(text: str) -> int:
    try:
        return parse_size(text, allow_zero=True)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON document (schema in the README)")
    p.add_argument("--units", choices=("GiB", "GB"), default="GiB", help="GiB = 2^30 bytes (default), GB = 10^9")


_COMMANDS = {
    "kv": "KV-cache bytes per token, per sequence, and over batch x context",
    "fit": "will it fit: per-GPU memory partition, largest batch, longest context",
    "models": "list the built-in models",
    "gpus": "list the built-in GPUs",
}


def _kv_args(kv: argparse.ArgumentParser) -> None:
    kv.add_argument("model", help="catalog name or alias, HF repo id, or path to a config.json (or its folder)")
    kv.add_argument("--context", type=_count, help="tokens per sequence (default: the model's max context)")
    kv.add_argument("--batch", type=_count, default=1, help="concurrent sequences (default 1)")
    kv.add_argument("--kv-dtype", default="auto", help="auto (model dtype), bf16, fp16, fp32, fp8, fp8_e5m2, int8, q8_0 ...")
    kv.add_argument("--tp", type=_count, default=1, help="tensor-parallel degree: figures are per GPU")


def _fit_args(fit: argparse.ArgumentParser) -> None:
    fit.add_argument("model", help="catalog name or alias, HF repo id, or path to a config.json (or its folder)")
    hw = fit.add_mutually_exclusive_group(required=True)
    hw.add_argument("--gpu", help="GPU name as people write it (H100, a100-80gb, RTX4090, MI300X ...)")
    hw.add_argument("--gpu-memory", type=_size, help="memory of a GPU not in the catalog, e.g. 48GiB")
    fit.add_argument("--num-gpus", type=_count, help="GPUs in total (tensor parallel unless --tp/--pp say otherwise)")
    fit.add_argument("--tp", type=_count, help="tensor-parallel degree")
    fit.add_argument("--pp", type=_count, help="pipeline-parallel degree")
    fit.add_argument("--weights-dtype", default="auto",
                     help="auto (checkpoint), bf16, fp16, fp32, fp8, int8, awq, gptq, nf4, mxfp4, nvfp4")
    fit.add_argument("--kv-dtype", default="auto", help="auto (model dtype), bf16, fp16, fp8, ...")
    fit.add_argument("--context", type=_count, help="tokens per sequence (default: the model's max context)")
    fit.add_argument("--batch", type=_count, default=1, help="concurrent sequences (default 1)")
    fit.add_argument("--prefill-chunk", type=_count, default=8192, help="tokens per forward step for the activation estimate")
    fit.add_argument("--overhead", type=_size0, help="runtime overhead per GPU instead of the built-in estimate, e.g. 4GiB")
    fit.add_argument("--activation", type=_size0, help="activation workspace per GPU instead of the estimate, e.g. 2GiB")
    fit.add_argument("--weights-memory", type=_size, help="measured weights per GPU instead of computing them, e.g. 14.99GiB")


_ARGS = {"kv": _kv_args, "fit": _fit_args}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The full parser, or with ``only`` set, one whose other subcommands are left bare
    (argparse formats every argument's help as it is added; building one command is faster)."""
    parser = _Parser(prog=PROG, description="Plan GPU memory for LLM serving: KV cache, weights, fit.")
    from . import __version__

    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, text in _COMMANDS.items():
        cmd = sub.add_parser(name, help=text, description=text)
        if only is None or only == name:
            if name in _ARGS:
                _ARGS[name](cmd)
            _common(cmd)
    return parser


def _parallelism(args: argparse.Namespace) -> tuple[int, int]:
    tp, pp, n = args.tp, args.pp, args.num_gpus
    if n is None:
        return tp or 1, pp or 1
    if tp is None and pp is None:
        return n, 1
    given = " x ".join(f"--{name} {v}" for name, v in (("tp", tp), ("pp", pp)) if v)
    if n % ((tp or 1) * (pp or 1)):
        raise InputError(f"--num-gpus {n} is not a multiple of {given}")
    tp = tp or n // (pp or 1)
    pp = pp or n // tp
    if tp * pp != n:
        raise InputError(f"--num-gpus {n} is not {given}")
    return tp, pp


def _run(args: argparse.Namespace) -> str:
    from . import api

    if args.json:
        from .report import json_doc
    else:
        from .report import text
    if args.command == "kv":
        r = api.kv(args.model, context=args.context, batch=args.batch, kv_dtype=args.kv_dtype, tp=args.tp)
        return json_doc.dumps(json_doc.kv_doc(r)) if args.json else text.kv_text(r, args.units)
    if args.command == "fit":
        tp, pp = _parallelism(args)
        p = api.fit(
            args.model, gpu=args.gpu, gpu_memory=args.gpu_memory, tp=tp, pp=pp,
            weights_dtype=args.weights_dtype, kv_dtype=args.kv_dtype, context=args.context, batch=args.batch,
            prefill_chunk=args.prefill_chunk, overhead_bytes=args.overhead, activation_bytes=args.activation,
            weights_bytes=args.weights_memory,
        )
        return json_doc.dumps(json_doc.fit_doc(p, args.units)) if args.json else text.fit_text(p, args.units)
    if args.command == "models":
        from .model import catalog

        entries = catalog.entries()
        params = {e.id: api.load_model(e.id).params for e in entries}
        if args.json:
            return json_doc.dumps(json_doc.models_doc(entries, params))
        return text.models_text([(e.id, str(e.config.get("model_type")), params[e.id], ", ".join(e.aliases[:3])) for e in entries])
    from .hardware import gpus

    items = gpus()
    return json_doc.dumps(json_doc.gpus_doc(items)) if args.json else text.gpus_text(items, args.units)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    first = argv[0] if argv else None
    args = build_parser(first if first in _COMMANDS else None).parse_args(argv)
    try:
        out = _run(args)
    except InputError as exc:
        sys.stderr.write(f"{PROG}: error: {exc}\n")
        return 2
    except BrokenPipeError:  # pragma: no cover - e.g. piped into head
        return 0
    sys.stdout.write(out + "\n")
    return 0
