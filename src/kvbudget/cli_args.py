"""The command line's arguments: kvbudget's own flags, and each engine's options as the engines declare them
(``Option`` in ``engines/base.py``). Parsing only: values are checked here, answers come from the API."""

from __future__ import annotations

import argparse
import os
import sys

from ._record import replace
from .units import InputError, digits, excerpt, human_readable_int, parse_size

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, NoReturn

    from .engines.base import Option, Registry

PROG = "kvbudget"


class _Formatter(argparse.HelpFormatter):
    """Help text at a fixed width unless COLUMNS says otherwise (argparse would import shutil
    to ask the terminal for every argument it adds, which costs start-up time)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None) -> None:
        cols = os.environ.get("COLUMNS", "")
        # COLUMNS as a terminal sets it; anything else ('²', '0', a million) leaves the default width
        shown = int(cols) if digits(cols) and len(cols) <= 5 else 0
        super().__init__(prog, indent_increment, max_help_position, width or (shown - 2 if 20 <= shown <= 10_000 else 100))


def one_line(message: str, limit: int = 300) -> str:
    """An error as one line of at most ``limit`` characters: whatever input it quotes, the start and the end
    (where the fix is named) stay."""
    text = " ".join(message.split())
    return text if len(text) <= limit else f"{text[: limit - 100]} ... {text[-95:]}"


def error_line(exc: Exception, tp_from_num_gpus: int | None = None) -> str:
    """The one line kvbudget prints for a refused input (after ``kvbudget: error: ``); ``tp_from_num_gpus``: the
    --num-gpus the user gave, read as that tensor-parallel size, so that an error about it names their flag."""
    message, n = str(exc), tp_from_num_gpus
    if n is not None and message.startswith(f"--tp {n} "):
        message = (f"--num-gpus {n} (tensor parallel over all {n}) " + message[len(f"--tp {n} "):]
                   + f" (or split the layers: --num-gpus {n} --pp {n})")
    return one_line(message)


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit code 2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{PROG}: error: {one_line(message)} (see `{self.prog} --help`)\n")
        raise SystemExit(2)


def refuse_unknown(parser: argparse.ArgumentParser, command: str | None, extra: list[str]) -> NoReturn:
    """Refuse arguments no option of ``command`` takes, as the subcommand's own usage error: one line naming
    each unknown flag with the nearest real one, and pointing at ``kvbudget COMMAND --help`` (argparse alone
    names neither, and points at the top-level help)."""
    import difflib

    target: argparse.ArgumentParser = parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            target = action.choices[command]
    known = [o for a in target._actions for o in a.option_strings if o.startswith("--")]
    hints = []
    for word in extra:
        flag = word.split("=", 1)[0]
        if flag.startswith("-") and flag not in known:
            near = difflib.get_close_matches(flag if flag.startswith("--") else "-" + flag, known, n=1, cutoff=0.6)
            if near:
                hints.append(f"{flag}: did you mean {near[0]}?")
    target.error(f"unrecognized arguments: {' '.join(extra)}" + (f" ({'; '.join(hints)})" if hints else ""))


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


_PLOT, _MODEL, _TOKENIZER = "a file name (e.g. plot.png)", "a model (a catalog name, HF id or config.json)", \
    "a tokenizer.json file"


def _named(what: str) -> Callable[[str], str]:
    """An option's value that names something (a file, a model, a GPU): an empty one was taken as the option left out
    (calibrate --model '', kv --plot '': no plot, exit 0)."""
    def check(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"is empty: give {what}")
        return text

    check.__name__ = "value"
    return check


def _layers(text: str) -> int:
    """llama.cpp's -ngl: layers on the GPU, -1 for all."""
    try:
        value = int(text) if len(text) <= 12 else None
    except ValueError:
        value = None
    if value is None:
        raise argparse.ArgumentTypeError(f"{excerpt(text, 26)} is not a whole number of layers (-1: all)")
    try:
        from .engines.base import check_layers

        return check_layers(value, "--ngl")
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _json_file(path: str) -> object:
    """A JSON file an option names, read (bounded) and parsed."""
    from .inputs import MAX_CONFIG_BYTES, load_json, read_bytes

    try:
        data = read_bytes(path, "profile", MAX_CONFIG_BYTES)
        doc = load_json(data, path)
        twice = _keys_twice(data)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if twice:  # JSON readers keep the last value silently: a hand edit's first value was dropped, exit 0
        raise argparse.ArgumentTypeError(f"{path}: the key {twice[0][:60]!r} is given twice in one object (JSON readers "
                                         "keep the last one, unsaid): keep one")
    return doc


def _keys_twice(data: bytes) -> list[str]:
    """The keys an object of this (valid, bounded) JSON document gives more than once."""
    import json

    from .inputs import repeated_keys

    twice, pairs = repeated_keys()
    json.loads(data, object_pairs_hook=pairs)
    return twice


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
    "calibrate": "a site's own start-up logs as a profile of the non-KV memory kvbudget's model misses there",
    "compare": "one model on one GPU under every engine (vLLM, SGLang, TensorRT-LLM, llama.cpp, transformers), side by side",
    "plan": "the cheapest deployments (GPU type x count x layout x precision) that serve a load",
    "levers": "what each lever (FP8, 4-bit, FP8 KV, context, GPUs, max_num_seqs, utilization) buys",
    "simulate": "replay traffic (a trace or a synthetic workload) through the engine's paged KV cache: usage, waste, "
                "preemptions, queueing, prefix-cache reuse",
    "diagnose": "read a running engine's /metrics (vLLM, SGLang) and GPU memory (DCGM, nvidia-smi): KV cache full, "
                "preemptions, max_num_seqs too low, framebuffer full, blocks against the plan, each with its fix",
    "size": "the sizing checklist in one run: KV per token, the engine's start-up figures (and its log), a load test, "
            "the running server's metrics, the budget re-run with the measured reuse; --report FILE.md|.html",
    "models": "list the built-in models",
    "gpus": "list the built-in GPUs",
    "serve": "a local web page on the same answers, and their JSON API (needs kvbudget[web])",
}


def _kv_args(kv: argparse.ArgumentParser) -> None:
    kv.add_argument("model", help="catalog name or alias, HF repo id, or path to a config.json (or its folder)")
    kv.add_argument("--context", type=_count, help="tokens per sequence (default: the model's max context)")
    kv.add_argument("--batch", type=_count, default=1, help="concurrent sequences (default 1)")
    kv.add_argument("--kv-dtype", default="auto", help="auto (model dtype), bf16, fp16, fp32, fp8, fp8_e5m2, int8, q8_0 ...")
    kv.add_argument("--tp", type=_count, default=1, help="tensor-parallel degree: figures are per GPU")
    kv.add_argument("--plot", metavar="FILE", type=_named(_PLOT), help="also draw KV vs length and batch, with the weights' crossover (.png/.svg)")


def _fit_args(fit: argparse.ArgumentParser, registry: Registry) -> None:
    fit.add_argument("model", help="catalog name or alias, HF repo id, or path to a config.json (or its folder)")
    _hardware(fit, "GPU name as people write it (H100, a100-80gb, RTX4090, MI300X ...)")
    _layout(fit)
    fit.add_argument("--weights-dtype", default="auto",
                     help="auto (checkpoint), bf16, fp16, fp32, fp8, int8, awq, gptq, nf4, mxfp4, nvfp4; "
                     "llama.cpp: a llama-quantize type (Q4_K_M, Q5_K_M, Q8_0, IQ4_XS ...)")
    fit.add_argument("--kv-dtype", default="auto", help="auto (model dtype), bf16, fp16, fp8, ...")
    fit.add_argument("--context", type=_count, help="tokens per sequence (default: the model's max context; llama.cpp: "
                     "-c, the cells its --np slots share, default: fitted to the GPU)")
    # default None, read as 1: so that --batch 1 is told from no --batch where an engine does not read it (llama.cpp)
    fit.add_argument("--batch", type=_count, default=None, help="concurrent sequences (default 1)")
    names = registry.names()
    fit.add_argument("--engine", choices=names, default=names[0],
                     help=f"whose rules (default {names[0]}): " + ", ".join(f"{e.name} ({e.label})" for e in registry))
    fit.add_argument("--plot", metavar="FILE", type=_named(_PLOT), help="also draw each GPU's memory partition as the engine splits it "
                     "(.png/.svg)")


def _hardware(p: argparse.ArgumentParser, gpu_help: str, required: bool = True) -> None:
    hw = p.add_mutually_exclusive_group(required=required)
    hw.add_argument("--gpu", type=_named("a GPU name (see `kvbudget gpus`), or --gpu-memory 48GiB"), help=gpu_help)
    hw.add_argument("--gpu-memory", type=_size, help="memory of a GPU not in the catalog, e.g. 48GiB")


def _layout(p: argparse.ArgumentParser) -> None:
    p.add_argument("--num-gpus", type=_count, help="GPUs in total (tensor parallel unless --tp/--pp say otherwise)")
    p.add_argument("--tp", type=_count, help="tensor-parallel degree (default 1)")
    p.add_argument("--pp", type=_count, help="pipeline-parallel degree (default 1)")


def _explain_args(p: argparse.ArgumentParser, registry: Registry) -> None:
    _hardware(p, "the GPU the command runs on (H100, a100-80gb, L4 ...)")
    p.add_argument("--num-gpus", type=_count, help="GPUs on the machine (checked against the command's parallel sizes)")
    p.add_argument("launch", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="after --: the launch command (vllm serve, "
                   "python -m sglang.launch_server, trtllm-serve, llama-server), as words or one quoted string")


def _check_args(p: argparse.ArgumentParser, registry: Registry) -> None:
    p.add_argument("log", help="a start-up log file (vLLM of any release line, SGLang, TensorRT-LLM, llama.cpp), or - "
                   "for standard input")
    p.add_argument("--model", type=_named(_MODEL), help="the model, when the log does not name it (catalog name, HF id or config.json)")
    _hardware(p, "the GPU, when the log does not show it", required=False)
    p.epilog = ("After --: the engine's flags the run used, where the log does not show them (vLLM: a flag that sets "
                "an engine argument the log prints to another value is refused) (vLLM: -- --max-model-len 4096; "
                "SGLang: -- --mem-fraction-static 0.85; TensorRT-LLM, trtllm-serve's: -- --tp_size 2), or the whole "
                "launch command (-- docker run ... IMAGE:TAG ..., -- python -m sglang.launch_server ..., "
                "-- trtllm-serve M ...): its model and its image's release are read too (vLLM: its environment).")


def _calibrate_args(p: argparse.ArgumentParser, registry: Registry) -> None:
    p.add_argument("logs", nargs="+", metavar="LOG", help="the site's start-up logs (vLLM, SGLang or TensorRT-LLM, "
                   "one engine's); - for standard input")
    p.add_argument("--model", type=_named(_MODEL), help="the model, when a log does not name it (catalog name, HF id or config.json)")
    _hardware(p, "the GPU, when a log does not show it", required=False)
    p.add_argument("--out", metavar="FILE", help="write the profile there (use it with --profile FILE on fit, explain, "
                   "levers)")


def _compare_args(p: argparse.ArgumentParser, registry: Registry) -> None:
    p.add_argument("model", help="catalog name or alias, HF repo id, config.json or GGUF file")
    _hardware(p, "GPU name (H100, L4 ...)")
    p.add_argument("--context", type=_count, default=8192, help="tokens per request (default 8192)")
    _layout(p)
    p.add_argument("--kv-dtype", default="auto", help="auto or fp8")
    p.add_argument("--weights-dtype", default="auto", help="auto (the checkpoint's), or a format every engine is "
                   "planned with: fp8, awq ... (an engine that does not take it is left out, with why), or a "
                   "llama-quantize type for llama.cpp alone")


def _engine_choice(p: argparse.ArgumentParser, registry: Registry) -> None:
    names = tuple(e.name for e in registry.searchable())
    p.add_argument("--engine", choices=names, default=names[0],
                   help=f"whose rules (default {names[0]}): " + ", ".join(f"{e.name} ({e.label})" for e in registry.searchable()))


def _plan_args(p: argparse.ArgumentParser, registry: Registry) -> None:
    p.add_argument("model", help="catalog name or alias, HF repo id, config.json or model folder")
    p.add_argument("--concurrency", type=_count, required=True, help="requests served at once")
    p.add_argument("--context", type=_count, required=True, help="tokens per request (vLLM --max-model-len)")
    _engine_choice(p, registry)
    p.add_argument("--gpus", help="comma-separated GPU types to consider (default: every catalog GPU)")
    p.add_argument("--max-gpus", type=_count, default=64, help="most GPUs in one deployment (default 64)")
    p.add_argument("--gpus-per-node", type=_count,
                   help="GPUs per node for every GPU type: TP stays within one (default: the catalog's, e.g. 8 on an HGX "
                   "board, 1 GH200, 4 consumer cards; `kvbudget gpus --json`)")
    p.add_argument("--weights-dtype", help="weight formats to try (default auto,fp8; trtllm and llama.cpp: auto; auto or "
                   "ckpt = the checkpoint's; llama.cpp: a llama-quantize type such as Q4_K_M)")
    p.add_argument("--kv-dtype", help="KV cache dtypes to try (default auto,fp8; llama.cpp: auto,q8_0; auto or ckpt = the "
                   "model's)")
    p.add_argument("--prices", help="a JSON or CSV file of $/hour per GPU, overriding the catalog's list prices")
    p.add_argument("--slo", metavar="ttft=2s,tpot=50ms",
                   help="a latency target: each replica runs only the batch that meets it (roofline step-time "
                        "estimate; prompt=N sets the prompt length TTFT is for, default the whole context)")
    p.add_argument("--top", type=_count, default=10, help="rows to show (default 10; --json gives all)")
    p.add_argument("--plot", metavar="FILE", type=_named(_PLOT), help="also draw capacity vs price per hour (.png/.svg)")


def _levers_args(p: argparse.ArgumentParser, registry: Registry) -> None:
    p.add_argument("model", help="catalog name or alias, HF repo id, config.json or model folder")
    _hardware(p, "GPU name (H100, L4 ...)")
    p.add_argument("--context", type=_count, required=True, help="tokens per request (--max-model-len)")
    _layout(p)
    p.add_argument("--weights-dtype", default="auto", help="the deployment's weight format (default: the checkpoint's)")
    p.add_argument("--kv-dtype", default="auto", help="the deployment's KV cache dtype")
    _engine_choice(p, registry)


def _deployment(p: argparse.ArgumentParser, registry: Registry) -> None:
    """The deployment simulate and size run on: the model, the GPU, the layout, the precisions and the engine."""
    p.add_argument("model", help="catalog name or alias, HF repo id, config.json or model folder")
    _hardware(p, "GPU name (H100, L4 ...)")
    _layout(p)
    p.add_argument("--weights-dtype", default="auto", help="the deployment's weight format (default: the checkpoint's)")
    p.add_argument("--kv-dtype", default="auto", help="the deployment's KV cache dtype")
    p.add_argument("--context", type=_count, help="max_model_len (default: the engine's, from the model)")
    _engine_choice(p, registry)


def _simulate_args(p: argparse.ArgumentParser, registry: Registry) -> None:
    _deployment(p, registry)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--trace", metavar="FILE", help="JSON Lines, one request per line: arrival (s), prompt (token ids), "
                     "prompt_tokens or text, output_tokens (docs/simulate.md)")
    src.add_argument("--synthetic", metavar="SPEC", help="e.g. requests=1000,rate=8,prompt=sharegpt,output=sharegpt,"
                     "prefixes=4x512@0.8,turns=3,seed=1 (docs/simulate.md)")
    p.add_argument("--tokenizer", metavar="FILE", type=_named(_TOKENIZER), help="a local tokenizer.json to count 'text' prompts (tokenizers package)")
    p.add_argument("--policies", default="paged,contiguous-max,contiguous-exact",
                   help="allocation policies side by side (paged is always run: it is the engine's)")
    p.add_argument("--no-prefix-caching", action="store_true", help="run with prefix caching off (vLLM: on by default)")
    p.add_argument("--no-chunked-prefill", action="store_true", help="prompts longer than the step budget wait whole")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on standard error")
    p.add_argument("--steps", action="store_true", help="with --json: every step's running, waiting and KV usage")
    p.add_argument("--plot", metavar="FILE", type=_named(_PLOT), help="also draw KV usage, running and waiting requests over time (.png/.svg)")


def _size_args(p: argparse.ArgumentParser, registry: Registry) -> None:
    _deployment(p, registry)
    p.add_argument("--log", metavar="FILE", help="step 2: the engine's start-up log, checked against the prediction")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--trace", metavar="FILE", help="step 3: the traffic to replay (JSON Lines, docs/simulate.md)")
    src.add_argument("--synthetic", metavar="SPEC", help="step 3: a synthetic workload (default: "
                     "requests=500,rate=4,prompt=sharegpt,output=sharegpt,seed=0)")
    p.add_argument("--tokenizer", metavar="FILE", type=_named(_TOKENIZER), help="a local tokenizer.json to count a trace's 'text' prompts")
    p.add_argument("--metrics", metavar="URL|FILE", help="step 4: the running server's /metrics (or a saved copy)")
    gpu = p.add_mutually_exclusive_group()
    gpu.add_argument("--dcgm", metavar="URL|FILE", help="step 4: the DCGM exporter's /metrics")
    gpu.add_argument("--nvidia-smi", metavar="FILE", help="step 4: saved nvidia-smi --query-gpu CSV")
    p.add_argument("--interval", type=_seconds0, default=2.0, metavar="S",
                   help="seconds between the two scrapes of a metrics URL (default 2)")
    p.add_argument("--timeout", type=_seconds, default=5.0, metavar="S", help="seconds a scrape may take (default 5)")
    p.add_argument("--report", metavar="FILE", help="also write the whole report as one Markdown (.md, plots beside "
                   "it as PNG) or HTML (.html, plots inline) file")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on standard error")


def _seconds(text: str) -> float:
    """A positive number of seconds, at most a day (``0.5``, ``2``, ``10``)."""
    try:
        value = float(text) if len(text) <= 20 else float("nan")
    except ValueError:
        value = float("nan")
    if not 0 < value <= 86400:  # also refuses nan and inf
        raise argparse.ArgumentTypeError(f"{excerpt(text, 26)} is not a number of seconds in (0, 86400], e.g. 2")
    return value


def _seconds0(text: str) -> float:
    return 0.0 if text.strip() in ("0", "0.0") else _seconds(text)


def _diagnose_args(p: argparse.ArgumentParser, registry: Registry) -> None:
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--metrics", metavar="URL|FILE",
                        help="the engine's /metrics: http(s)://HOST:PORT/metrics, or a saved copy of the page")
    source.add_argument("--prometheus", metavar="URL",
                        help="a Prometheus server (http://HOST:9090) that scrapes the engines: every replica at once, "
                             "ranked by risk")
    p.add_argument("--selector", default='{job="vllm"}', metavar="'{job=\"vllm\"}'",
                   help="with --prometheus: the label matchers that pick the serving replicas (default {job=\"vllm\"})")
    p.add_argument("--window", default="5m", help="with --prometheus: the window rates are taken over (default 5m)")
    gpu = p.add_mutually_exclusive_group()
    gpu.add_argument("--dcgm", metavar="URL|FILE", help="the DCGM exporter's /metrics (DCGM_FI_DEV_FB_USED/FREE)")
    gpu.add_argument("--nvidia-smi", metavar="FILE", help="saved output of nvidia-smi --query-gpu=index,name,memory.used,"
                     "memory.total --format=csv")
    p.add_argument("--expect", metavar="MODEL", type=_named(_MODEL), help="hold the metrics against kvbudget's plan of MODEL (with --gpu and "
                   "fit's settings): blocks allocated, the scheduler's cap, what each lever would hold")
    _hardware(p, "the GPU the engine runs on (with --expect)", required=False)
    _layout(p)
    p.add_argument("--weights-dtype", default="auto", help="with --expect: the deployment's weight format")
    p.add_argument("--kv-dtype", default="auto", help="with --expect: the deployment's KV cache dtype")
    p.add_argument("--context", type=_count, help="with --expect: max_model_len (default: the engine's, from the model)")
    names = tuple(e.name for e in registry.searchable())
    p.add_argument("--engine", choices=names, help="with --expect: whose rules (default: the engine the page is from)")
    p.add_argument("--interval", type=_seconds0, default=2.0, metavar="S",
                   help="seconds between the two scrapes of a URL that give rates (default 2; 0: one scrape)")
    p.add_argument("--timeout", type=_seconds, default=5.0, metavar="S", help="seconds a scrape may take (default 5)")
    p.add_argument("--watch", type=_seconds, metavar="N", help="poll every N seconds and redraw the table until Ctrl-C")
    p.add_argument("--count", type=_count, metavar="K", help="with --watch: stop after K polls")


def _kv(p: argparse.ArgumentParser, registry: Registry) -> None:
    _kv_args(p)


def _serve_args(p: argparse.ArgumentParser, registry: Registry) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=_port, default=8765, help="port (default 8765; 0: any free one)")
    p.add_argument("--allow-hub", action="store_true",
                   help="look models up on the Hugging Face Hub by id (config.json only; off by default)")


def _port(text: str) -> int:
    if not digits(text.strip()) or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"{excerpt(text, 26)} is not a port (0 to 65535)")
    return int(text)


_ARGS = {"kv": _kv, "fit": _fit_args, "explain": _explain_args, "check": _check_args, "calibrate": _calibrate_args,
         "compare": _compare_args,
         "plan": _plan_args, "levers": _levers_args, "simulate": _simulate_args, "diagnose": _diagnose_args,
         "size": _size_args, "serve": _serve_args}
_METAVARS = {"count": "N", "layers": "N", "fraction": "F", "size": "SIZE", "size0": "SIZE", "text": "NAME",
             "json": "FILE"}
_KINDS = {"json": _json_file, "count": _count, "fraction": _fraction, "layers": _layers, "size": _size, "size0": _size0, "text": None,
          "choice": None}


def _engine_options(p: argparse.ArgumentParser, command: str, registry: Registry) -> None:
    """Each engine's own options for ``command``, in a group per engine (an option two engines read is the first's);
    simulate, diagnose and size take fit's."""
    command = "fit" if command in ("simulate", "diagnose", "size") else command
    seen: set[str] = set()
    readers: dict[str, list[str]] = {}  # an option several engines read: who
    for engine in registry:
        for o in engine.options:
            if command in o.commands:
                readers.setdefault(o.dest, []).append(engine.label)
    for engine in registry:
        mine = [o for o in engine.options if command in o.commands and o.dest not in seen]
        if not mine:
            continue
        group = p.add_argument_group(f"{engine.label} (with --engine {engine.name})" if command in ("fit", "levers")
                                     else engine.label)
        for o in mine:
            seen.add(o.dest)
            also = [label for label in readers[o.dest] if label != engine.label]
            _add_option(group, replace(o, help=o.help + f" (also {', '.join(also)})") if also else o, command)


def _add_option(group: argparse._ActionsContainer, o: Option, command: str) -> None:
    if o.kind == "switch":
        group.add_argument(o.flag, dest=o.dest, action="store_true", help=o.help)
        return
    extra: dict[str, Any] = {"choices": o.choices} if o.choices else {"metavar": _METAVARS.get(o.kind, "VALUE")}
    kind = _KINDS.get(o.kind, _unknown_kind(o))
    if kind is not None:
        extra["type"] = kind
    group.add_argument(o.flag, dest=o.dest, default=o.default if command == "fit" else None, help=o.help, **extra)


def _unknown_kind(o: Option) -> Any:
    if o.kind not in _KINDS:
        raise ValueError(f"option {o.dest}: unknown kind {o.kind!r} (one of {', '.join(_KINDS)}, switch)")
    return None


def build_parser(registry: Registry, only: str | None = None) -> argparse.ArgumentParser:
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
                _ARGS[name](cmd, registry)
                _engine_options(cmd, name, registry)
            if name != "serve":  # it prints no answer
                _common(cmd)
    return parser


