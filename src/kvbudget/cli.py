"""Command line: parse, call the library, render. No arithmetic here."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .units import InputError, excerpt, human_readable_int, noun, parse_size, plural

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any, NoReturn

    from .plan.levers import Lever

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
        sys.stderr.write(f"{PROG}: error: {_one_line(message)} (see `{self.prog} --help`)\n")
        raise SystemExit(2)


MAX_COUNT = 10**12  # no token count, batch or GPU count comes near it; larger is a typo or an attack


def _count(text: str) -> int:
    """A positive whole number: ``8192``, ``8,192``, ``8_192``, or with vLLM's suffixes ``8k`` (8,000) and
    ``8K`` (8,192), as vLLM reads ``--max-model-len``."""
    body = text.strip()
    import re

    if re.fullmatch(r"\s*-\s*\d[\d,_]*\s*", text) or body in ("0", "-0"):
        raise argparse.ArgumentTypeError(f"{excerpt(text, 26)} must be positive")
    human = human_readable_int(body)
    if human is not None:
        value = human
    elif len(body) > 20 or not re.fullmatch(r"\d{1,3}(,\d{3})+|\d+(_\d+)*", body):
        raise argparse.ArgumentTypeError(f"{excerpt(text, 26)} is not a whole number (write it like 8192, 8,192, 8K "
                                         "= 8,192 or 8k = 8,000, as vLLM reads them)")
    else:
        value = int(body.replace(",", "").replace("_", ""))
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    if value > MAX_COUNT:
        raise argparse.ArgumentTypeError(f"{text!r} is far larger than any deployment (at most {MAX_COUNT:,})")
    return value


def _fraction(text: str) -> float:
    """A memory fraction in (0, 1], as vLLM, SGLang and TensorRT-LLM take them."""
    try:
        value = float(text) if len(text) <= 20 else float("nan")
    except ValueError:
        value = float("nan")
    if not 0 < value <= 1:  # also refuses nan
        raise argparse.ArgumentTypeError(f"{excerpt(text, 26)} is not a fraction in (0, 1], e.g. 0.9")
    return value


def _layers(text: str) -> int:
    """llama.cpp's -ngl: layers on the GPU, -1 (or any negative) for all."""
    try:
        value = int(text) if len(text) <= 12 else None
    except ValueError:
        value = None
    if value is None:
        raise argparse.ArgumentTypeError(f"{excerpt(text, 26)} is not a whole number of layers (-1: all)")
    return max(value, -1)


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
    p.add_argument("--json", action="store_true", help="print one JSON document (schema in docs/json-schema.md)")
    p.add_argument("--units", type=lambda text: {"gib": "GiB", "gb": "GB"}.get(text.strip().lower(), text),
                   choices=("GiB", "GB"), default="GiB", help="GiB = 2^30 bytes (default), GB = 10^9 (any case)")
    p.add_argument("--wide", action="store_true", help="print full-width tables and lines (default: fit 120 columns)")


_COMMANDS = {
    "kv": "KV-cache bytes per token, per sequence, and over batch x context",
    "fit": "will it fit: per-GPU memory partition, largest batch, longest context",
    "explain": "what a pasted launch command (vLLM, SGLang, TensorRT-LLM, llama.cpp) will do and print at start-up",
    "check": "compare an engine's start-up log with kvbudget's prediction, figure by figure",
    "compare": "one model on one GPU under vLLM, SGLang, TensorRT-LLM and llama.cpp, side by side",
    "plan": "the cheapest deployments (GPU type x count x layout x precision) that serve a load",
    "levers": "what each lever (FP8, 4-bit, FP8 KV, context, GPUs, max_num_seqs, utilization) buys",
    "models": "list the built-in models",
    "gpus": "list the built-in GPUs",
}


def _kv_args(kv: argparse.ArgumentParser) -> None:
    kv.add_argument("model", help="catalog name or alias, HF repo id, or path to a config.json (or its folder)")
    kv.add_argument("--context", type=_count, help="tokens per sequence (default: the model's max context)")
    kv.add_argument("--batch", type=_count, default=1, help="concurrent sequences (default 1)")
    kv.add_argument("--kv-dtype", default="auto", help="auto (model dtype), bf16, fp16, fp32, fp8, fp8_e5m2, int8, q8_0 ...")
    kv.add_argument("--tp", type=_count, default=1, help="tensor-parallel degree: figures are per GPU")
    kv.add_argument("--plot", metavar="FILE", help="also draw KV vs length and batch, with the weights' crossover (.png/.svg)")


def _fit_args(fit: argparse.ArgumentParser) -> None:
    fit.add_argument("model", help="catalog name or alias, HF repo id, or path to a config.json (or its folder)")
    hw = fit.add_mutually_exclusive_group(required=True)
    hw.add_argument("--gpu", help="GPU name as people write it (H100, a100-80gb, RTX4090, MI300X ...)")
    hw.add_argument("--gpu-memory", type=_size, help="memory of a GPU not in the catalog, e.g. 48GiB")
    fit.add_argument("--num-gpus", type=_count, help="GPUs in total (tensor parallel unless --tp/--pp say otherwise)")
    fit.add_argument("--tp", type=_count, help="tensor-parallel degree")
    fit.add_argument("--pp", type=_count, help="pipeline-parallel degree")
    fit.add_argument("--weights-dtype", default="auto",
                     help="auto (checkpoint), bf16, fp16, fp32, fp8, int8, awq, gptq, nf4, mxfp4, nvfp4; "
                     "llama.cpp: a llama-quantize type (Q4_K_M, Q5_K_M, Q8_0, IQ4_XS ...)")
    fit.add_argument("--kv-dtype", default="auto", help="auto (model dtype), bf16, fp16, fp8, ...")
    fit.add_argument("--context", type=_count, help="tokens per sequence (default: the model's max context)")
    fit.add_argument("--batch", type=_count, default=1, help="concurrent sequences (default 1)")
    fit.add_argument("--prefill-chunk", type=_count, default=8192, help="tokens per forward step for the activation estimate")
    fit.add_argument("--overhead", type=_size0, help="runtime overhead per GPU instead of the built-in estimate, e.g. 4GiB")
    fit.add_argument("--activation", type=_size0, help="activation workspace per GPU instead of the estimate, e.g. 2GiB")
    fit.add_argument("--weights-memory", type=_size, help="measured weights per GPU instead of computing them, e.g. 14.99GiB")
    fit.add_argument("--engine", choices=("vllm", "sglang", "trtllm", "llama.cpp", "transformers", "textbook"),
                     default="vllm", help="whose rules: vllm (what vLLM will print, default), sglang, trtllm, llama.cpp, "
                     "transformers (plain generate), or textbook")
    fit.add_argument("--plot", metavar="FILE", help="also draw each GPU's memory partition (.png/.svg; vllm, textbook)")
    fit.add_argument("--cache", choices=("dynamic", "static"), default="dynamic",
                     help="transformers: DynamicCache (generate's default) or StaticCache")
    fit.add_argument("--mem-fraction-static", type=_fraction, help="SGLang's mem_fraction_static (default: by GPU memory)")
    fit.add_argument("--free-gpu-memory-fraction", type=_fraction, default=0.9, help="TensorRT-LLM's fraction (default 0.9)")
    _vllm_args(fit)
    _llamacpp_args(fit)


def _llamacpp_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("llama.cpp (with --engine llama.cpp; --context is -c)")
    g.add_argument("--np", type=_count, help="-np: parallel sequences (llama-server default: 4, unified)")
    g.add_argument("--ctk", default="f16", help="-ctk: K cache type (f16, q8_0, q4_0 ...)")
    g.add_argument("--ctv", default="f16", help="-ctv: V cache type")
    g.add_argument("--ngl", type=_layers, default=-1, help="-ngl: layers on the GPU (default: all)")
    g.add_argument("--fa", choices=("on", "off", "auto"), default="auto", help="-fa: flash attention")
    g.add_argument("--ubatch", type=_count, default=512, help="-ub: physical batch size")
    g.add_argument("--swa-full", action="store_true", help="--swa-full: full-size cache for sliding-window layers")
    g.add_argument("--kv-unified", choices=("auto", "on", "off"), default="auto", help="--kv-unified")
    _build_arg(g)


def _build_arg(p: argparse._ActionsContainer) -> None:
    p.add_argument("--llamacpp-build", type=_count, metavar="N",
                   help="llama.cpp build number (its 'build: N' line) whose sizing rules apply (default: current)")


def _vllm_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--vllm-version", default="current", help="vLLM release whose accounting to use: 0.33.0, 0.10.1, 0.6.3, current, v1, v0")
    p.add_argument("--gpu-memory-utilization", type=_fraction, help="vLLM's budget fraction (default: the release's)")
    p.add_argument("--max-num-seqs", type=_count, help="vLLM max_num_seqs (default: by GPU and release)")
    p.add_argument("--max-num-batched-tokens", type=_count, help="vLLM max_num_batched_tokens (default: by GPU and release)")
    p.add_argument("--block-size", type=_count, help="tokens per KV block (default 16, raised for hybrid models)")
    p.add_argument("--enforce-eager", action="store_true", help="no CUDA graphs")
    p.add_argument("--dp", type=_count, default=1, help="data-parallel engines (figures are per engine)")


def _explain_args(p: argparse.ArgumentParser) -> None:
    hw = p.add_mutually_exclusive_group(required=True)
    hw.add_argument("--gpu", help="the GPU the command runs on (H100, a100-80gb, L4 ...)")
    hw.add_argument("--gpu-memory", type=_size, help="memory of a GPU not in the catalog, e.g. 48GiB")
    p.add_argument("--num-gpus", type=_count, help="GPUs on the machine (checked against the command's parallel sizes)")
    p.add_argument("--vllm-version", default=None, help="vLLM release: 0.33.0, 0.10.1, 0.6.3, current, v1, v0")
    _build_arg(p)
    p.add_argument("launch", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="after --: the launch command (vllm serve, python -m sglang.launch_server, "
                   "trtllm-serve, llama-server), as words or one quoted string")


def _check_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("log", help="a vLLM start-up log file (any release line), or - for standard input")
    p.add_argument("--model", help="the model, when the log does not name it (catalog name, HF id or config.json)")
    hw = p.add_mutually_exclusive_group()
    hw.add_argument("--gpu", help="the GPU, when the log does not show it")
    hw.add_argument("--gpu-memory", type=_size, help="memory of a GPU not in the catalog, e.g. 23.58GiB")
    p.add_argument("--vllm-version", default=None, help="override the release the log shows or implies")
    p.epilog = "After --: vLLM flags the run used, overriding what the log shows (e.g. -- --max-model-len 4096)."


def _compare_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="catalog name or alias, HF repo id, config.json or GGUF file")
    hw = p.add_mutually_exclusive_group(required=True)
    hw.add_argument("--gpu", help="GPU name (H100, L4 ...)")
    hw.add_argument("--gpu-memory", type=_size, help="memory of a GPU not in the catalog")
    p.add_argument("--context", type=_count, default=8192, help="tokens per request (default 8192)")
    p.add_argument("--num-gpus", type=_count, help="GPUs in total (tensor parallel unless --tp/--pp say otherwise)")
    p.add_argument("--tp", type=_count, help="tensor-parallel degree (default 1)")
    p.add_argument("--pp", type=_count, help="pipeline-parallel degree (default 1)")
    p.add_argument("--kv-dtype", default="auto", help="auto or fp8")


def _plan_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="catalog name or alias, HF repo id, config.json or model folder")
    p.add_argument("--concurrency", type=_count, required=True, help="requests served at once")
    p.add_argument("--context", type=_count, required=True, help="tokens per request (vLLM --max-model-len)")
    p.add_argument("--engine", choices=("vllm", "sglang", "trtllm", "llama.cpp"), default="vllm",
                   help="whose rules (vllm, sglang, trtllm: the PyTorch backend, llama.cpp: llama-server)")
    p.add_argument("--gpus", help="comma-separated GPU types to consider (default: every catalog GPU)")
    p.add_argument("--max-gpus", type=_count, default=64, help="most GPUs in one deployment (default 64)")
    p.add_argument("--gpus-per-node", type=_count,
                   help="GPUs per node for every GPU type: TP stays within one (default: the catalog's, e.g. 8 on an HGX "
                   "board, 1 GH200, 4 consumer cards; `kvbudget gpus --json`)")
    p.add_argument("--weights-dtype", help="weight formats to try (default auto,fp8; trtllm: auto; auto = the checkpoint's)")
    p.add_argument("--kv-dtype", help="KV cache dtypes to try (default auto,fp8; llama.cpp: auto,q8_0)")
    p.add_argument("--prices", help="a JSON or CSV file of $/hour per GPU, overriding the catalog's list prices")
    p.add_argument("--top", type=_count, default=10, help="rows to show (default 10; --json gives all)")
    p.add_argument("--plot", metavar="FILE", help="also draw capacity vs price per hour (.png/.svg)")
    p.add_argument("--vllm-version", default="current", help="vLLM release whose rules to use")


def _levers_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="catalog name or alias, HF repo id, config.json or model folder")
    hw = p.add_mutually_exclusive_group(required=True)
    hw.add_argument("--gpu", help="GPU name (H100, L4 ...)")
    hw.add_argument("--gpu-memory", type=_size, help="memory of a GPU not in the catalog")
    p.add_argument("--context", type=_count, required=True, help="tokens per request (--max-model-len)")
    p.add_argument("--num-gpus", type=_count, help="GPUs in total (tensor parallel unless --tp/--pp say otherwise)")
    p.add_argument("--tp", type=_count, help="tensor-parallel degree (default 1)")
    p.add_argument("--pp", type=_count, help="pipeline-parallel degree (default 1)")
    p.add_argument("--weights-dtype", default="auto", help="the deployment's weight format (default: the checkpoint's)")
    p.add_argument("--kv-dtype", default="auto", help="the deployment's KV cache dtype")
    p.add_argument("--engine", choices=("vllm", "sglang", "trtllm", "llama.cpp"), default="vllm",
                   help="whose rules (vllm, sglang, trtllm: the PyTorch backend, llama.cpp: llama-server)")
    p.add_argument("--gpu-memory-utilization", type=_fraction, help="vLLM's budget fraction (default: the release's)")
    p.add_argument("--mem-fraction-static", type=_fraction, help="SGLang's mem_fraction_static (default: by GPU memory)")
    p.add_argument("--free-gpu-memory-fraction", type=_fraction, help="TensorRT-LLM's fraction (default 0.9)")
    p.add_argument("--vllm-version", default="current", help="vLLM release whose rules to use")


_ARGS = {"kv": _kv_args, "fit": _fit_args, "explain": _explain_args, "check": _check_args, "compare": _compare_args,
         "plan": _plan_args, "levers": _levers_args}


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


# fit's options every engine reads (the rest, each engine names in its fit_flags)
_EVERY_ENGINE = frozenset({"model", "gpu", "gpu_memory", "context", "engine", "json", "units", "wide", "help", "plot"})


def _refuse_other_engines_flags(args: argparse.Namespace, defaults: dict[str, object]) -> None:
    """One line for the first flag given that ``args.engine`` does not read (instead of ignoring it): each
    engine says which of fit's options it reads (``fit_flags``) and what to give instead of another's."""
    if not {d for d, v in defaults.items() if getattr(args, d, v) != v} - _EVERY_ENGINE:
        return  # only options every engine reads: nothing to refuse, and no engine module to import
    from .engines.base import default_registry
    from .engines.textbook import FIT_FLAGS

    reads = {e.name: (e.fit_flags, dict(e.fit_instead)) for e in default_registry()}
    reads["textbook"] = (FIT_FLAGS, {})
    mine, instead = reads[args.engine]
    for dest in sorted(set().union(*(flags for flags, _ in reads.values())) - mine):
        if getattr(args, dest, None) == defaults.get(dest):
            continue
        flag = "--" + dest.replace("_", "-")
        owners = ", ".join(name for name, (flags, _) in reads.items() if dest in flags)
        raise InputError(f"{flag} is not read under --engine {args.engine}"
                         + (f": use {instead[dest]}" if dest in instead else f" (it is a setting of {owners})"))
    weights = getattr(args, "weights_dtype", None)
    if args.engine != "llama.cpp" and isinstance(weights, str):
        from .model.gguf_quant import is_preset, other_engine

        if is_preset(weights):  # Q4_K_M, IQ4_XS ...: only llama.cpp reads them
            raise other_engine(weights)


def _parallelism(args: argparse.Namespace) -> tuple[int, int]:
    tp, pp, n = args.tp, args.pp, args.num_gpus
    if n is None:
        return tp or 1, pp or 1
    if tp is None and pp is None:
        args.tp_from_num_gpus = n  # an error about this TP names --num-gpus, the flag the user gave
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
        if args.plot:
            _kv_plot(args)
        return json_doc.dumps(json_doc.kv_doc(r)) if args.json else text.kv_text(r, args.units)
    if args.command == "explain":
        return _explain(args)
    if args.command == "check":
        return _check(args)
    if args.command == "fit" and args.engine == "vllm":
        return _fit_vllm(args)
    if args.command == "fit" and args.plot and args.engine not in ("vllm", "textbook"):
        raise InputError(f"--plot draws the vllm and textbook partitions, not --engine {args.engine}'s")
    if args.command == "fit" and args.engine == "llama.cpp":
        return _fit_llamacpp(args)
    if args.command == "fit" and args.engine == "transformers":
        return _fit_transformers(args)
    if args.command == "fit" and args.engine in ("sglang", "trtllm"):
        return _fit_other(args)
    if args.command == "compare":
        return _compare(args)
    if args.command == "plan":
        return _plan(args)
    if args.command == "levers":
        return _levers(args)
    if args.command == "fit":
        tp, pp = _parallelism(args)
        p = api.fit(
            args.model, gpu=args.gpu, gpu_memory=args.gpu_memory, tp=tp, pp=pp,
            weights_dtype=args.weights_dtype, kv_dtype=args.kv_dtype, context=args.context, batch=args.batch,
            prefill_chunk=args.prefill_chunk, overhead_bytes=args.overhead, activation_bytes=args.activation,
            weights_bytes=args.weights_memory,
        )
        if args.plot:
            from .report.plots import fit_plot

            fit_plot(p, args.plot)
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


def _fit_vllm(args: argparse.Namespace) -> str:
    from . import api
    from .engines.vllm import VllmSettings
    from .engines.vllm.fixes import suggestions
    from .model.resolve import load_model

    tp, pp = _parallelism(args)
    settings = VllmSettings(
        version=args.vllm_version, gpu_memory_utilization=args.gpu_memory_utilization, max_model_len=args.context,
        block_size=args.block_size, kv_cache_dtype="auto" if args.kv_dtype == "auto" else args.kv_dtype,
        quantization=None if args.weights_dtype == "auto" else args.weights_dtype, tensor_parallel_size=tp,
        pipeline_parallel_size=pp, data_parallel_size=args.dp, max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens, enforce_eager=args.enforce_eager,
    )
    spec = load_model(args.model)
    gpu = api._device(args.gpu, args.gpu_memory)
    p = api.vllm_plan(spec, gpu=gpu, settings=settings)
    if args.plot:
        from .report.plots import fit_plot

        fit_plot(p, args.plot)
    fixes = suggestions(spec, gpu, settings, p)
    from .report import plan_report

    more: dict[str, object] = {}
    tail = ""
    if not p.starts or p.max_concurrency < -(-args.batch // args.dp):  # the fewest GPUs of this type that hold it
        context = p.max_model_len if p.max_model_len > 0 else (args.context or spec.max_context)
        fewest = api.fewest_gpus(spec, concurrency=args.batch, context=context, gpu=gpu, weights=(args.weights_dtype,),
                                 kv_dtype=(args.kv_dtype,), version=args.vllm_version,
                                 fraction=args.gpu_memory_utilization)
        more["fewest_gpus"] = plan_report.fewest_doc(spec.name, fewest)
        tail = "" if args.json else "\n" + plan_report.fewest_text(spec.name, fewest, gpu.name, args.batch, context)
    if not p.starts:
        return _render_vllm(args, p, fixes, batch=args.batch, launch_for=(spec.name, settings), more=more) + tail
    from ._record import replace
    from .plan.levers import levers

    baseline, lever_rows = levers(spec, gpu, replace(settings, max_model_len=p.max_model_len))
    if args.json:  # the document gains one row per lever
        more["levers"] = plan_report.levers_doc(spec.name, gpu.name, baseline, lever_rows)["levers"]
        return _render_vllm(args, p, fixes, batch=args.batch, launch_for=(spec.name, settings), more=more)
    out = _render_vllm(args, p, fixes, batch=args.batch, launch_for=(spec.name, settings)) + tail
    return out + "\n\n" + plan_report.levers_table(lever_rows, p.max_model_len, args.units)


def _render_vllm(args: argparse.Namespace, p: object, fixes: object, extra: list[str] | None = None,
                 batch: int | None = None, launch_for: tuple[str, object] | None = None,
                 more: dict[str, object] | None = None) -> str:
    if args.json:
        from .report import json_doc

        doc = json_doc.vllm_doc(p, args.units, fixes, batch or 1)  # type: ignore[arg-type]
        if extra:
            doc["warnings"] = extra
        if launch_for is not None:  # the command that realises this plan, and a Kubernetes manifest running it
            from .engines.vllm.launch import vllm_argv
            from .plan import launch

            model, settings = launch_for
            argv = vllm_argv(model, settings)  # type: ignore[arg-type]
            s = settings
            try:
                manifest: str | None = launch.manifest(model, argv, s.tensor_parallel_size, s.pipeline_parallel_size,  # type: ignore[attr-defined]
                                                       s.data_parallel_size)  # type: ignore[attr-defined]
            except InputError as exc:
                manifest = None
                doc.setdefault("warnings", []).append(f"no Kubernetes manifest: {exc}")
            doc["launch"] = launch.launch_doc(model, argv, s.quantization, manifest)  # type: ignore[attr-defined]
        doc.update(more or {})
        return json_doc.dumps(doc)
    from .report import text

    out = text.vllm_text(p, args.units, fixes, batch)  # type: ignore[arg-type]
    return "\n".join([out, *(f"warning: {w}" for w in extra or [])])


def _fit_llamacpp(args: argparse.Namespace) -> str:
    from . import api
    from .engines.llamacpp import LlamaCppSettings, plan
    from .model.resolve import load_model

    unified = {"auto": None, "on": True, "off": False}[args.kv_unified]
    settings = LlamaCppSettings(
        n_ctx=args.context or 0, n_parallel=args.np, kv_unified=unified, type_k=args.ctk, type_v=args.ctv,
        flash_attn=args.fa, n_ubatch=args.ubatch, swa_full=args.swa_full, n_gpu_layers=args.ngl,
        devices=_parallelism(args)[0],  # --num-gpus / --tp: layers split over the GPUs (-sm layer, -ts even)
        **({"build": args.llamacpp_build} if args.llamacpp_build else {}),
    )
    spec = load_model(args.model)
    if args.weights_dtype != "auto":  # a llama-quantize file type (Q4_K_M, Q8_0, ...) made from the model
        from ._record import replace
        from .model import gguf_quant

        if spec.weight_format is not None and spec.weight_format.name == "stored":
            raise InputError(f"{args.model} is a GGUF file: its tensor types are the weights "
                             "(drop --weights-dtype, or give the original model to plan what llama-quantize makes)")
        spec = replace(spec, weight_format=gguf_quant.weight_format(args.weights_dtype))
    gpu = api._device(args.gpu, args.gpu_memory)
    p = plan(spec, gpu, settings)
    if p.fits:
        return _render_llamacpp(args, p, [], settings)
    # what would fit: the fewest GPUs of this type (layers split, -ts), and the 4-bit file of a 16-bit model
    from .report import plan_report

    # the load the failing command asked for: its slots, each with its share of a unified cache's cells
    each = max(p.n_ctx // p.n_seq_max, 1) if p.unified else p.n_ctx_seq
    fewest = api.fewest_gpus(spec, concurrency=p.n_seq_max, context=each, gpu=gpu, engine="llama.cpp")
    fewest_line = plan_report.fewest_text(spec.name, fewest, gpu.name, p.n_seq_max, each, "llama.cpp")
    fewest_doc = plan_report.fewest_doc(spec.name, fewest)
    hint = ""
    if spec.weight_format is not None and spec.weight_format.name in ("bf16", "fp16", "fp32"):
        from ._record import replace
        from .model import gguf_quant

        q4 = plan(replace(spec, weight_format=gguf_quant.weight_format("Q4_K_M")), gpu, settings)
        hint = (f"a Q4_K_M file (--weights-dtype q4_k_m) {'fits' if q4.fits else 'does not fit either'}: "
                f"{q4.total_gpu_bytes / 2**30:.2f} GiB on the GPU")
    if args.json:
        from .report import json_doc

        doc = json_doc.llamacpp_doc(p, [])
        doc["launch"] = _launch_doc(p.model, settings, 1)
        if hint:
            doc["suggestion"] = hint
        doc["fewest_gpus"] = fewest_doc
        return json_doc.dumps(doc)
    return "\n".join([_render_llamacpp(args, p, [], settings), *([f"note: {hint}"] if hint else []), fewest_line])


def _launch_doc(model: str, settings: object, gpus: int) -> dict[str, str | None]:
    """The launch command that realises a plan, and a single-node Kubernetes manifest running it."""
    from .plan import launch

    argv = launch.argv_for(model, settings)  # type: ignore[arg-type]
    return launch.launch_doc(model, argv, getattr(settings, "quantization", None), launch.kubernetes(model, argv, gpus))


def _render_llamacpp(args: argparse.Namespace, p: object, warnings: list[str], settings: object = None) -> str:
    if args.json:
        from .report import json_doc

        doc = json_doc.llamacpp_doc(p, warnings)  # type: ignore[arg-type]
        if settings is not None:
            served = p.served_file or p.model  # type: ignore[attr-defined]  # a GGUF type: the file llama-quantize writes
            doc["launch"] = _launch_doc(served, settings, 1)
            if p.served_file:  # type: ignore[attr-defined]
                doc["launch"]["note"] = next(n for n in p.notes if "llama-quantize" in n)  # type: ignore[attr-defined]
        return json_doc.dumps(doc)
    from .report import text

    return text.llamacpp_text(p, args.units, warnings)  # type: ignore[arg-type]


def _explain_llamacpp(args: argparse.Namespace, words: list[str]) -> str:
    from . import api
    from ._record import replace
    from .engines.llamacpp import plan
    from .engines.llamacpp.command import parse_llamacpp_command
    from .model.resolve import load_model

    cmd = parse_llamacpp_command(words)
    settings = replace(cmd.settings, build=args.llamacpp_build) if args.llamacpp_build else cmd.settings
    try:
        spec = load_model(cmd.model)
    except InputError:
        hf = next((w.split()[1].rstrip(":") for w in cmd.warnings if w.startswith("-hf ")), None)
        if hf is None:
            raise
        raise InputError(f"-hf {hf}: not a model kvbudget's catalog knows, so its file cannot be planned: download the "
                         "GGUF and give -m PATH (kvbudget reads its header)") from None
    p = plan(spec, api._device(args.gpu, args.gpu_memory), settings)
    return _render_llamacpp(args, p, list(cmd.warnings))


_LLAMACPP_PROGRAMS = ("llama-server", "llama-cli", "server", "main", "llama-run", "llama-bench")


def _explain(args: argparse.Namespace) -> str:
    from . import api

    words = list(args.launch)
    if words and words[0] == "--":
        words = words[1:]
    if len(words) == 1 and any(c.isspace() for c in words[0]):  # the command pasted as one quoted string
        from .inputs import split_command

        words = split_command(words[0])
    if not words:
        raise InputError("give the launch command after --, e.g. kvbudget explain --gpu H100 -- vllm serve MODEL")
    _no_own_flags_after_dashes(words, "explain --gpu H100 -- " + " ".join(words[:3]))
    program = next((w for w in words if "=" not in w or w.startswith("-")), "")
    if os.path.basename(program) in _LLAMACPP_PROGRAMS:
        return _explain_llamacpp(args, words)
    if "sglang.launch_server" in words or os.path.basename(program) == "trtllm-serve":
        return _explain_other(args, words)
    cmd, p, fixes = api.explain(words, gpu=args.gpu, gpu_memory=args.gpu_memory, version=args.vllm_version)
    extra = list(cmd.warnings)
    used = cmd.settings.tensor_parallel_size * cmd.settings.pipeline_parallel_size * cmd.settings.data_parallel_size
    if args.num_gpus is not None and used > args.num_gpus:
        raise InputError(f"the command needs {used} GPUs (TP x PP x DP) but --num-gpus is {args.num_gpus}")
    return _render_vllm(args, p, fixes, extra)


def _no_own_flags_after_dashes(words: list[str], example: str) -> None:
    """kvbudget's own output flags given after ``--`` would be read as the engine's: say so, with ``example``
    (the user's command up to its ``--``) rewritten the right way round."""
    for word in words:
        name = word.partition("=")[0]
        if name in ("--json", "--units"):
            command, _, rest = example.partition(" ")
            own = f"{name}{' GB' if name == '--units' else ''}"
            raise InputError(f"{name} is kvbudget's flag, not the engine's: put it before the -- "
                             f"(e.g. kvbudget {command} {own} {rest} ...)")


def _check(args: argparse.Namespace) -> str:
    from . import inputs
    from .engines.vllm.check import check_log

    _no_own_flags_after_dashes(list(args.flags), f"check {args.log} --")
    if args.log == "-":  # standard input, bounded like a file
        text = sys.stdin.read(inputs.MAX_LOG_BYTES + 1)
        if len(text) > inputs.MAX_LOG_BYTES:
            raise InputError(f"standard input: more than the {inputs.MAX_LOG_BYTES:,} characters kvbudget reads of a log")
    else:
        text = inputs.read_text(args.log, "log", inputs.MAX_LOG_BYTES, errors="replace")
    flags = list(args.flags)
    if "llama_kv_cache" in text or "KV self size" in text or "llama_context:" in text:
        return _check_llamacpp(args, text)
    if "KV Cache is allocated" in text or "[TensorRT-LLM]" in text or "[TRT-LLM]" in text:
        return _check_other(args, text)
    result = check_log(text, model=args.model, gpu=args.gpu, gpu_memory=args.gpu_memory,
                       version=args.vllm_version, flags=flags)
    if args.json:
        from .report import json_doc

        return json_doc.dumps(json_doc.check_doc(result, args.units))
    from .report import text as text_report

    return text_report.check_text(result, args.units)


def _check_llamacpp(args: argparse.Namespace, text: str) -> str:
    from .engines.llamacpp.check import CacheCheck, check_caches
    from .engines.llamacpp.log import parse_llamacpp_log
    from .model.resolve import load_model

    log = parse_llamacpp_log(text)
    spec = load_model(args.model) if args.model else None
    checks = check_caches(log, spec)
    if args.json:
        from .report import json_doc

        return json_doc.dumps({"engine": "llama.cpp", "caches": [
            {"cells": c.cache.cells, "layers": c.cache.layers, "type_k": c.cache.type_k, "type_v": c.cache.type_v,
             "swa": c.cache.swa, "reported_k_mib": c.cache.k_mib, "predicted_k_mib": c.predicted_k_mib,
             "reported_v_mib": c.cache.v_mib, "predicted_v_mib": c.predicted_v_mib, "exact": c.exact,
             "n_embd_k_gqa": c.n_embd_k_gqa, "n_embd_v_gqa": c.n_embd_v_gqa,
             "buffers": [{"name": b, "mib": m, "layers": n} for (b, m), n in zip(c.cache.buffers, c.buffer_layers, strict=False)],
             "buffers_exact": c.buffers_exact} for c in checks],
            "buffers_mib": dict(log.buffers_mib)})
    from .report.text import table

    def buffers(c: CacheCheck) -> str:
        if not c.cache.buffers:
            return "-"
        return ", ".join(f"{name} {mib:.2f} = {n} layers" for (name, mib), n in zip(c.cache.buffers, c.buffer_layers, strict=False)) \
            + ("" if c.buffers_exact else " (NOT whole layers)")

    rows = [[("SWA " if c.cache.swa else "") + f"{c.cache.cells:,} cells x {c.cache.layers} layers", c.cache.type_k + "/" + c.cache.type_v,
             f"{c.cache.k_mib:.2f} / {c.cache.v_mib:.2f}", f"{c.predicted_k_mib:.2f} / {c.predicted_v_mib:.2f}",
             "exact" if c.exact else "DIFFERS", buffers(c)] for c in checks]
    out = ["llama.cpp KV caches, reported vs recomputed (K / V MiB), and each KV buffer in whole layers:",
           table(["cache", "types", "log", "kvbudget", "", "KV buffers (MiB)"], rows,
                 right=[False, False, True, True, False, False])]
    if any(not c.n_embd_k_gqa for c in checks):
        out.append("warning: the log lacks the KV widths (n_embd_k_gqa): give --model")
    return "\n".join(out)


def _render_other(args: argparse.Namespace, p: object, warnings: list[str], more: dict[str, object] | None = None) -> str:
    from .engines import sglang, trtllm
    from .engines.sglang import SGLangPlan
    from .engines.transformers import TransformersPlan
    from .engines.transformers import row as transformers_row

    if isinstance(p, TransformersPlan):
        row = transformers_row(p)
    else:
        row = sglang.summary(p) if isinstance(p, SGLangPlan) else trtllm.summary(p)  # type: ignore[arg-type]
    lines = list(getattr(p, "log_lines", ()))
    notes = list(p.notes)  # type: ignore[attr-defined]
    if args.json:
        from .report import json_doc

        return json_doc.dumps({**json_doc.engine_doc(row, p, lines, notes, warnings), **(more or {})})
    from .report import text

    return text.engine_text(row, p.model, p.gpu, lines, notes + [f"warning: {w}" for w in warnings], args.units)  # type: ignore[attr-defined]


def _fit_other(args: argparse.Namespace) -> str:
    from . import api
    from .engines import sglang, trtllm
    from .model.resolve import load_model

    tp, pp = _parallelism(args)
    spec = load_model(args.model)
    gpu = api._device(args.gpu, args.gpu_memory)
    quant = None if args.weights_dtype == "auto" else args.weights_dtype
    settings: object
    if args.engine == "sglang":
        kv = "fp8_e4m3" if args.kv_dtype in ("fp8", "fp8_e4m3") else args.kv_dtype  # kvbudget's fp8: SGLang's e4m3
        settings = sglang.SGLangSettings(
            mem_fraction_static=args.mem_fraction_static, tp=tp, pp=pp, context_length=args.context, kv_cache_dtype=kv,
            max_running_requests=args.max_num_seqs, quantization=quant)
        p: object = sglang.plan(spec, gpu, settings)
    else:
        settings = trtllm.TrtllmSettings(
            free_gpu_memory_fraction=args.free_gpu_memory_fraction, tp=tp, pp=pp, kv_cache_dtype=args.kv_dtype,
            quantization=quant, max_seq_len=args.context)
        p = trtllm.plan(spec, gpu, settings)
    more: dict[str, object] = {"launch": _launch_doc(spec.name, settings, tp * pp)} if args.json else {}
    from .plan.capacity import longest_context
    from .plan.levers import replica_levers
    from .report import plan_report

    if isinstance(p, sglang.SGLangPlan):  # the requests this configuration holds: its pool, its scheduler's cap
        context, cap, pool = p.context_len, p.max_running_requests, p.max_total_num_tokens
    else:
        context, cap, pool = p.max_seq_len, settings.max_batch_size, p.max_tokens  # type: ignore[attr-defined,union-attr]
    held = min(pool // context, cap) if p.starts else 0  # type: ignore[attr-defined]
    fraction = args.mem_fraction_static if args.engine == "sglang" else args.free_gpu_memory_fraction
    know = {"tp": tp, "pp": pp, "weights": args.weights_dtype, "kv": args.kv_dtype, "fraction": fraction}
    batch = args.batch
    notes: list[str] = []
    try:
        longest = longest_context(spec, gpu, args.engine, batch, **know) if batch <= cap else 0
        baseline, rows = replica_levers(spec, gpu, args.engine, context, **know)
    except InputError as exc:  # a setting kvbudget's search does not take (TensorRT-LLM with AWQ weights ...)
        longest, baseline, rows = -1, None, []
        notes.append(f"no longest context, levers or fewest GPUs: {exc}")
    pool_held = pool // context if p.starts else 0  # type: ignore[attr-defined]
    capped = f" (the scheduler's cap of {cap:,}; the pool holds {pool_held:,})" if held < pool_held else ""
    verdict = [f"Requests of {context:,} tokens held at once: {held:,}{capped}"]
    if longest >= 0:
        verdict.append(f"Longest context for {plural(batch, 'request')} at once:  {longest:,}")
    verdict.append(f"Verdict: {'fits' if held >= batch else 'does not fit'}: {batch:,} x {context:,}-token "
                   + noun(batch, "request"))
    fewest = None
    if held < batch and longest >= 0:
        fewest = api.fewest_gpus(spec, concurrency=batch, context=context, gpu=gpu, weights=(args.weights_dtype,),
                                 kv_dtype=(args.kv_dtype,), engine=args.engine, fraction=fraction)
        verdict.append(plan_report.fewest_text(spec.name, fewest, gpu.name, batch, context, args.engine))
    verdict += [f"note: {n}" for n in notes]
    if args.json:  # the document gains the verdict and one row per lever
        more.update({"max_batch": held, "max_context": longest if longest >= 0 else None,
                     "batch": batch, "fits": held >= batch})
        if held < batch and longest >= 0:
            more["fewest_gpus"] = plan_report.fewest_doc(spec.name, fewest)
        if p.starts and baseline is not None:  # type: ignore[attr-defined]
            more["levers"] = plan_report.lever_docs(rows)
        if notes:
            more["notes_verdict"] = notes
        return _render_other(args, p, [], more)
    out = _render_other(args, p, []) + "\n\n" + "\n".join(verdict)
    return out + ("\n\n" + plan_report.levers_table(rows, context, args.units) if rows and p.starts else "")  # type: ignore[attr-defined]


def _fit_transformers(args: argparse.Namespace) -> str:
    from . import api
    from .engines import transformers as transformers_engine
    from .model.resolve import load_model

    spec = load_model(args.model)
    dtype = "auto" if args.weights_dtype == "auto" else args.weights_dtype
    gpu = api._device(args.gpu, args.gpu_memory)
    p = transformers_engine.plan(spec, gpu, args.batch, args.context or spec.max_context, dtype, args.cache)
    if args.json:
        return _render_other(args, p, [], {"batch": p.batch, "max_batch": p.max_batch, "fits": p.fits})
    from .units import fmt_bytes

    verdict = (f"Verdict: {'fits' if p.fits else 'does not fit'}: {p.batch:,} x {p.context:,}-token {noun(p.batch, 'sequence')} in one batch: "
               f"{fmt_bytes(p.total_bytes, args.units)} of {fmt_bytes(gpu.memory_bytes, args.units)}; "
               f"at most {p.max_batch:,} at once")
    return _render_other(args, p, []) + "\n\n" + verdict


def _explain_other(args: argparse.Namespace, words: list[str]) -> str:
    from . import api
    from .engines import sglang, trtllm
    from .engines.cmdscan import parse_other_command
    from .model.resolve import load_model

    cmd = parse_other_command(words)
    spec = load_model(cmd.model)
    gpu = api._device(args.gpu, args.gpu_memory)
    p: object = sglang.plan(spec, gpu, cmd.sglang) if cmd.sglang else trtllm.plan(spec, gpu, cmd.trtllm)  # type: ignore[arg-type]
    return _render_other(args, p, list(cmd.warnings))


def _check_other(args: argparse.Namespace, text: str) -> str:
    from .engines.logscan import check_other_log

    rows = check_other_log(text, args.model)
    if args.json:
        from .report import json_doc

        return json_doc.dumps({"comparison": [{"figure": f, "reported": r, "recomputed": c, "exact": e} for f, r, c, e in rows]})
    from .report.text import table

    return "\n".join(["Reported vs recomputed from the log's own figures (matches: within the log's 0.01 GB rounding):",
                      table(["figure", "log", "kvbudget", ""], [[f, f"{r:,}", f"{c:,}", "matches" if e else "DIFFERS"]
                                                               for f, r, c, e in rows])])


def _kv_plot(args: argparse.Namespace) -> None:
    from .engines.textbook import weight_format
    from .model.resolve import load_model
    from .parallel import stages
    from .report.plots import kv_plot

    spec = load_model(args.model)
    weights = stages(spec, weight_format(spec, "auto"), args.tp, 1)[0].weights_bytes
    kv_plot(spec, weights, args.plot, context=args.context, kv_dtype=args.kv_dtype, tp=args.tp)


def _plan(args: argparse.Namespace) -> str:
    from .hardware import find_gpu, gpus
    from .model.resolve import load_model
    from .plan.prices import read_prices
    from .plan.search import search
    from .report import plan_report

    spec = load_model(args.model)
    names = list(dict.fromkeys(g.strip() for g in args.gpus.split(",") if g.strip())) if args.gpus is not None else None
    if names is not None and len(names) > 64:
        raise InputError(f"--gpus names {len(names):,} GPU types: give at most 64 (see `kvbudget gpus`)")
    chosen = list({g.name: g for g in map(find_gpu, names)}.values()) if names is not None else gpus()
    if not chosen:
        raise InputError("--gpus names no GPU")
    prices = read_prices(args.prices) if args.prices else None
    # trtllm-serve takes pre-quantized checkpoints; llama.cpp runs a GGUF's own types and has q8_0, not fp8, caches
    default_w = "auto" if args.engine in ("trtllm", "llama.cpp") else "auto,fp8"
    default_kv = {"llama.cpp": "auto,q8_0"}.get(args.engine, "auto,fp8")
    weights = tuple(dict.fromkeys(w.strip() for w in (args.weights_dtype or default_w).split(",") if w.strip()))
    kv = tuple(dict.fromkeys(k.strip() for k in (args.kv_dtype or default_kv).split(",") if k.strip()))
    if not weights or not kv:
        raise InputError("--weights-dtype and --kv-dtype need at least one value each")
    if len(weights) > 12 or len(kv) > 12:
        raise InputError("--weights-dtype and --kv-dtype take at most 12 values each")
    from .engines.vllm import _KV_DTYPES
    from .model.gguf_quant import is_preset
    from .model.weights import parse_weight_format

    for w in weights:
        if w != "auto" and not (args.engine == "llama.cpp" and is_preset(w)):
            parse_weight_format(w)  # an unknown format is one error line, before the search
    from .engines.llamacpp import CACHE_TYPES

    for k in kv:
        if k not in _KV_DTYPES and not (args.engine == "llama.cpp" and k in CACHE_TYPES):
            raise InputError(f"unknown --kv-dtype {k!r}: use auto, fp8, fp8_e5m2, ... (llama.cpp: q8_0, q4_0 ...)")
    if args.context > spec.max_context:
        raise InputError(f"--context {args.context:,} exceeds {spec.name}'s maximum context of {spec.max_context:,} tokens")
    rows = search(spec, args.concurrency, args.context, chosen, max_gpus=args.max_gpus, gpus_per_node=args.gpus_per_node,
                  weights=weights, kv=kv, prices=prices, version=args.vllm_version, engine=args.engine)
    plot_warning = ""
    if args.plot:
        from .report.plots import plan_plot

        try:
            plan_plot(rows, args.plot, args.concurrency)
        except InputError as exc:
            if "no priced deployment" not in str(exc):
                raise
            plot_warning = f"warning: {exc} (no plot written)"
    best = next((d for d in rows if d.serves), None)
    lever_rows: list[Lever] = []
    if best is not None:  # what each lever would change for the chosen deployment
        from .plan.levers import levers, replica_levers

        if best.engine == "vllm":
            _, lever_rows = levers(spec, find_gpu(best.gpu), best.settings)  # type: ignore[arg-type]
        else:
            _, lever_rows = replica_levers(spec, find_gpu(best.gpu), best.engine, args.context, tp=best.tp, pp=best.pp,
                                           weights=best.weights_dtype, kv=best.kv_dtype, gpus_per_node=args.gpus_per_node)
    if args.json:
        from .report import json_doc

        doc = plan_report.plan_doc(spec.name, args.concurrency, args.context, rows, args.units)
        if best is not None:  # the best row carries its levers (one replica), as `levers --json` gives them
            doc["plans"][0]["levers"] = plan_report.lever_docs(lever_rows)
        return json_doc.dumps(doc)
    out = plan_report.plan_text(spec.name, args.concurrency, args.context, rows, args.units, args.top, args.max_gpus,
                                args.gpus_per_node) + (f"\n{plot_warning}" if plot_warning else "")
    if best is not None:
        out += "\n\nFor the best deployment (one replica) -- " + plan_report.levers_table(lever_rows, args.context, args.units)
    return out


def _levers(args: argparse.Namespace) -> str:
    from . import api
    from .engines.vllm import VllmSettings
    from .model.resolve import load_model
    from .plan.levers import levers, replica_levers, rule_of_thumb
    from .report import plan_report

    args.tp, args.pp = _parallelism(args)
    spec = load_model(args.model)
    gpu = api._device(args.gpu, args.gpu_memory)
    engine = args.engine
    own = {"vllm": "gpu_memory_utilization", "sglang": "mem_fraction_static", "trtllm": "free_gpu_memory_fraction"}
    for field in own.values():
        if getattr(args, field) is not None and own.get(engine) != field:
            raise InputError(f"--{field.replace('_', '-')} is not a setting of {engine}"
                             + (f" (its fraction is --{own[engine].replace('_', '-')})" if engine in own else
                                " (llama.cpp allocates what -c and the cache types ask for)"))
    if engine == "vllm":
        base = VllmSettings(version=args.vllm_version, max_model_len=args.context, tensor_parallel_size=args.tp,
                            pipeline_parallel_size=args.pp,
                            quantization=None if args.weights_dtype == "auto" else args.weights_dtype,
                            kv_cache_dtype=args.kv_dtype, gpu_memory_utilization=args.gpu_memory_utilization,
                            allow_long_max_model_len=args.context > spec.max_context)
        baseline, rows = levers(spec, gpu, base)
    else:
        fraction = args.mem_fraction_static if engine == "sglang" else args.free_gpu_memory_fraction
        baseline, rows = replica_levers(spec, gpu, engine, args.context, tp=args.tp, pp=args.pp,
                                        weights=args.weights_dtype, kv=args.kv_dtype, fraction=fraction)
    beyond = (f"warning: {args.context:,} tokens exceed {spec.name}'s {spec.max_context:,}: vLLM accepts it only with "
              "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" if engine == "vllm" and args.context > spec.max_context else "")
    thumb = None
    if any(r.name == "FP8 weights" for r in rows):  # the back-of-envelope reading beside vLLM's count
        whole = api.kv(spec, context=args.context, kv_dtype=args.kv_dtype).bytes_per_sequence
        thumb = rule_of_thumb(spec, args.tp * args.pp, whole)
    if args.json:
        from .report import json_doc

        return json_doc.dumps(plan_report.levers_doc(spec.name, gpu.name, baseline, rows, thumb, engine))
    out = plan_report.levers_text(spec.name, gpu.name, args.context, baseline, rows, args.units, thumb, engine)
    return out + (f"\n{beyond}" if beyond else "")


def _compare(args: argparse.Namespace) -> str:
    from . import api
    from .engines.summary import compare
    from .model.resolve import load_model

    tp, pp = _parallelism(args)
    rows, omitted = compare(load_model(args.model), api._device(args.gpu, args.gpu_memory), args.context, tp,
                            args.kv_dtype, pp)
    if args.json:
        from .report import json_doc

        return json_doc.dumps({"model": args.model, "context": args.context, "tp": tp, "pp": pp, "engines": [
            {"engine": r.engine, "weights_bytes": r.weights_bytes, "kv_budget_bytes": r.kv_budget_bytes,
             "kv_cache_tokens": r.kv_tokens, "max_concurrency": round(r.max_concurrency, 3), "context": r.context,
             "starts": r.starts, "budget_rule": r.budget_rule, "unit": r.unit} for r in rows],
            "not_compared": [{"engine": e, "reason": why} for e, why in omitted]})
    from .report import text

    return text.compare_text(rows, args.model, args.context, args.units, omitted)


def _note_gpu_variant(name: str | None) -> None:
    """A GPU name that several catalog GPUs share is read as one of them: say which, on stderr."""
    if not name or len(name) > 100:
        return
    from .hardware import find_gpu, other_variants

    try:
        chosen = find_gpu(name)
    except InputError:
        return  # the command itself says it, in its own words
    others = other_variants(name, chosen)
    if others:
        sys.stderr.write(f"note: --gpu {name} is read as {chosen.name}; give {' or '.join(others)} if yours is one\n")


def _one_line(message: str, limit: int = 300) -> str:
    """An error as one line of at most ``limit`` characters: whatever input it quotes, the start and the end
    (where the fix is named) stay."""
    text = " ".join(message.split())
    return text if len(text) <= limit else f"{text[: limit - 100]} ... {text[-95:]}"


def _defaults(parser: argparse.ArgumentParser, command: str) -> dict[str, object]:
    """Each option's default in ``command``'s parser."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {a.dest: a.default for a in sub.choices[command]._actions}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    first = argv[0] if argv else None
    tail: list[str] = []
    if first == "check" and "--" in argv:  # vLLM flags after -- belong to the logged run, not to kvbudget
        cut = argv.index("--")
        argv, tail = argv[:cut], argv[cut + 1:]
    parser = build_parser(first if first in _COMMANDS else None)
    args = parser.parse_args(argv)
    args.flags = tail
    try:
        if args.command == "fit":
            _refuse_other_engines_flags(args, _defaults(parser, "fit"))
        out = _run(args)
    except InputError as exc:
        message = str(exc)
        n = getattr(args, "tp_from_num_gpus", None)
        if n is not None and message.startswith(f"--tp {n} "):
            message = (f"--num-gpus {n} (tensor parallel over all {n}) " + message[len(f"--tp {n} "):]
                       + f" (or split the layers: --num-gpus {n} --pp {n})")
        sys.stderr.write(f"{PROG}: error: {_one_line(message)}\n")
        return 2
    except RecursionError:  # a structure nested past Python's stack in some reader: still one line
        sys.stderr.write(f"{PROG}: error: input nested too deeply to read\n")
        return 2
    except BrokenPipeError:  # pragma: no cover - e.g. piped into head
        return 0
    if not (args.json or args.wide):
        from .report.text import fit_width

        out = fit_width(out)
    sys.stdout.write(out + "\n")
    _note_gpu_variant(getattr(args, "gpu", None))  # after the answer: an error stays one line
    return 0
