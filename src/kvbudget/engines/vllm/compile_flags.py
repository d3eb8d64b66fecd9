"""vLLM's compilation and CUDA-graph flags, per release: read from a launch command and resolved into the graphs vLLM
captures.

The flags (engine/arg_utils.py and the argument parser of each release: vllm/utils.py up to 0.8, utils/__init__.py
0.9-0.11, utils/argparse_utils.py from 0.12):
- ``--compilation-config JSON`` from 0.6.5 (0.6.4 has none). Its short form is ``-O`` up to 0.11 and ``-cc`` from 0.12.
  Up to 0.8 a bare 0-3 is the compilation level (CompilationConfig.from_cli) and other text a Python literal; from 0.9
  the value is JSON, and ``-O3`` / ``-O=3`` / ``-O 3`` are rewritten to the dotted ``-O.level=3``. From 0.9 a key can
  be given alone, dotted: ``--compilation-config.cudagraph_mode=FULL``, ``-O.level=3`` (0.9-0.12) or ``-cc.mode=3``
  (0.12 on). Its keys are CompilationConfig's fields of the release (``compile_keys.json``): from 0.13 an unknown key
  stops vLLM (extra="forbid"; 0.18 on through the ``@config`` decorator), up to 0.12 pydantic passes it over.
- From 0.12: ``-O N`` / ``-ON`` / ``--optimization-level N`` (0-3; config/vllm.py OptimizationLevel),
  ``--cudagraph-capture-sizes N [N ...]`` and ``--max-cudagraph-capture-size N``; a size given both as a flag and as a
  compilation-config key stops vLLM ("... are mutually exclusive", create_engine_config).

What they do to the graphs from 0.21, the releases whose KV budget subtracts the graphs' estimate (config/vllm.py
__post_init__, _set_cudagraph_sizes and OPTIMIZATION_LEVEL_00-03, read in 0.21.0-0.33.0):
- the optimization level (default 2) sets the compilation mode (torch.compile's VLLM_COMPILE above 0, NONE at 0)
  and, where the command sets none, cudagraph_mode: NONE at -O0, PIECEWISE at -O1, FULL_AND_PIECEWISE at -O2/-O3;
- --enforce-eager sets both to NONE, whatever else is given;
- a mode with PIECEWISE graphs needs VLLM_COMPILE: without it 0.21-0.29 fall back to NONE, 0.30 on drop the PIECEWISE
  part (PIECEWISE -> NONE, FULL_AND_PIECEWISE -> FULL_DECODE_ONLY; CUDAGraphMode.without_piecewise); 0.32 on also
  drop every graph of the V2 model runner under stock torch.compile (mode 1);
- the capture sizes: an explicit list (deduplicated, the sizes above max_num_batched_tokens dropped), else 1, 2, 4,
  steps of 8 below 256 and of 16 from 256 up to the largest size, max_num_batched_tokens when it is below that, and
  (0.31 on) max_num_seqs when it is within it; the largest size: the one given, else min(2 x max_num_seqs, 512; 1024
  on Blackwell from 0.28), never above max_num_batched_tokens; 1-32 every size with --performance-mode interactivity
  (0.17 on). A largest size below 1 stops vLLM (an assertion), and one that disagrees with the list given too
  ("should be consistent with the max value of cudagraph_capture_sizes"). The sequence-parallel pass (pass_config
  enable_sp, off by default: IS_DENSE is False) keeps only multiples of TP in 0.21-0.31: warned, not modelled.
- torch.compile on or off: the profiling run is the same dummy forward either way (gpu_model_runner.py profile_run);
  kvbudget's activation model does not depend on it, as for --enforce-eager, which also turns compilation off.

Before 0.21 the graphs are captured after the KV cache is allocated (gpu_model_runner.py capture_model, called from
compile_or_warm_up_model after initialize_kv_cache): these flags are read and checked, and change no figure.
"""

from __future__ import annotations

import ast
import json
import os
from functools import lru_cache

from ..._record import record, replace
from ...units import InputError, digits, excerpt
from .settings import NEWEST_MINOR, CompileFlags, minor_patch

_KEYS_FILE = os.path.join(os.path.dirname(__file__), "compile_keys.json")
GRAPH_MODES = ("NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")
COMPILE_MODES = ("NONE", "STOCK_TORCH_COMPILE", "DYNAMO_TRACE_ONCE", "VLLM_COMPILE")  # CompilationMode, 0.12 on
_LEVEL_GRAPHS = {0: "NONE", 1: "PIECEWISE", 2: "FULL_AND_PIECEWISE", 3: "FULL_AND_PIECEWISE"}
_MAX_SIZE = 1 << 24  # no batch is wider: a bound that keeps the size lists small


def release(version: str | None) -> tuple[int, int]:
    """(minor, patch) whose parser a command is read with: the release's, else the newest read (0.33)."""
    return minor_patch(version) or (NEWEST_MINOR, 0)


def _shown(mp: tuple[int, int]) -> str:
    return f"vLLM 0.{mp[0]}.{mp[1]}"


def _keys() -> dict[str, tuple[tuple[int, int], tuple[int, int]]]:
    with open(_KEYS_FILE, encoding="utf-8") as f:
        data = json.load(f)["keys"]
    out = {}
    for key, (first, last) in data.items():
        lo, hi = minor_patch(first), minor_patch(last)
        assert lo is not None and hi is not None
        out[key] = ((lo[0], lo[1] if lo == (10, 1) else 0), (hi[0], 99))  # 0.10.1 added cudagraph_mode
    return out


def has_key(key: str, mp: tuple[int, int]) -> bool:
    """Whether CompilationConfig of release ``mp`` has the field ``key`` (0.6.5-0.7 taken as 0.8.5)."""
    span = _keys().get(key)
    probe = max(mp, (8, 0))
    return span is not None and span[0] <= probe <= span[1]


def refused_flag(name: str, mp: tuple[int, int]) -> str | None:
    """vLLM's own error for a compilation flag release ``mp`` does not have; None when it has it."""
    added = (6, 5) if name == "--compilation-config" else (12, 0)
    if name not in _FLAG_NAMES or mp >= added:
        return None
    return (f"vLLM stops at start-up: `vllm serve: error: unrecognized arguments: {name}` ({_shown(mp)} has no "
            f"{name}: 0.{added[0]}.{added[1]} added it)")


_FLAG_NAMES = ("--compilation-config", "-cc", "--optimization-level", "--cudagraph-capture-sizes",
               "--max-cudagraph-capture-size")


def short_o(tok: str, following: str | None, mp: tuple[int, int]) -> tuple[str, str | None, bool]:
    """A ``-O`` word as release ``mp``'s parser rewrites it: (flag, value, whether the next word was taken). The flag
    is --optimization-level (0.12 on), --compilation-config (a JSON value, up to 0.11) or ``-O.KEY`` (a dotted key
    of the compilation config, 0.9-0.12)."""
    if mp < (6, 5):
        raise InputError(f"vLLM stops at start-up: `vllm serve: error: unrecognized arguments: {excerpt(tok, 20)[1:-1]}` "
                         f"({_shown(mp)} has no -O: 0.6.5 added it as --compilation-config's short form)")
    rest = tok[2:]
    if rest.startswith(".") and (9, 0) <= mp < (13, 0):  # -O.level=3: a dotted key (0.12 warns it is deprecated)
        key, eq, value = rest.partition("=")
        if eq:
            return "-O" + key, value, False
        if following is None:
            raise InputError(f"{excerpt(tok, 40)[1:-1]} needs a value")
        return "-O" + key, following, True
    if rest:
        value = rest[1:] if rest.startswith("=") else rest
        if mp >= (12, 0):
            return "--optimization-level", value, False
        return ("--compilation-config", value, False) if mp < (9, 0) else ("-O.level", value, False)
    if following is not None and following in ("0", "1", "2", "3"):
        return ("--optimization-level" if mp >= (12, 0) else "-O.level" if mp >= (9, 0) else "--compilation-config",
                following, True)
    if mp >= (12, 0):
        raise InputError(f"vLLM stops at start-up: `vllm serve: error: unrecognized arguments: -O` ({_shown(mp)}'s -O "
                         "takes an optimization level 0-3, as -O3 or -O 3; a compilation config goes to -cc '{...}')")
    if following is None:
        raise InputError("-O needs a value: a compilation level 0-3 (-O3) or a compilation config ('{\"level\": 3}')")
    return "--compilation-config", following, True


def _int(value: object, what: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and digits(value.strip().lstrip("-")) and len(value.strip()) <= 12:
            value = int(value.strip())
        else:
            raise InputError(f"vLLM stops at start-up: {what} {excerpt(str(value), 30)} is not an integer")
    assert isinstance(value, int)
    if not lo <= value <= hi:
        raise InputError(f"vLLM stops at start-up: {what} is {value}: give {lo} to {hi:,}")
    return value


def optimization_level(value: str, label: str) -> int:
    """-O N / --optimization-level N: OptimizationLevel O0-O3 (config/vllm.py, 0.12-0.33)."""
    v = value.strip()
    if v not in ("0", "1", "2", "3"):
        raise InputError(f"vLLM stops at start-up: {label} {excerpt(value, 30)} is not an optimization level: give 0 "
                         "(no compilation, no CUDA graphs), 1 (torch.compile, PIECEWISE graphs), 2 (the default: FULL "
                         "and PIECEWISE graphs) or 3")
    return int(v)


def sizes(words: list[str], label: str) -> tuple[int, ...]:
    """--cudagraph-capture-sizes' words (argparse nargs='+', type=int), each a batch of at least one token (vLLM
    captures a graph of each size: zero or fewer tokens fail the capture at start-up)."""
    out = []
    for w in words[:4096]:
        if not digits(w.strip().lstrip("-")) or len(w.strip()) > 12:
            raise InputError(f"vLLM stops at start-up: `argument {label}: invalid int value: {excerpt(w, 30)}`")
        out.append(_size(int(w), label))
    return tuple(out)


def _size(n: int, label: str) -> int:
    if n < 1:
        raise InputError(f"{label}: a capture size of {n} tokens: vLLM captures a CUDA graph of every size given and "
                         "fails at start-up on one below 1; give sizes of at least 1")
    if n > _MAX_SIZE:
        raise InputError(f"{label}: a capture size of {n:,} tokens is beyond any batch vLLM schedules")
    return n


def _doc(value: str, label: str, mp: tuple[int, int]) -> dict[str, object]:
    """--compilation-config's value as the release reads it: up to 0.8 a bare level or a Python literal, from 0.9
    JSON (0.21 on: human-readable numbers such as 1k expanded first)."""
    v = value.strip()
    if mp < (9, 0) and v in ("0", "1", "2", "3"):
        return {"level": int(v)}
    try:
        if len(v) > 65536:
            raise ValueError
        doc = ast.literal_eval(v) if mp < (9, 0) else json.loads(v)
    except (ValueError, SyntaxError, RecursionError, MemoryError, TypeError):
        doc = None
    if not isinstance(doc, dict):
        raise InputError(f"vLLM stops at start-up: {label} {excerpt(value, 40)} is not a JSON object of "
                         "CompilationConfig keys: give e.g. '{\"cudagraph_mode\": \"PIECEWISE\", "
                         "\"cudagraph_capture_sizes\": [1, 2, 4, 8]}'" + (" or a level 0-3" if mp < (9, 0) else ""))
    return doc


def read_config(flags: CompileFlags, value: str, label: str, version: str | None) -> tuple[CompileFlags, list[str]]:
    """One --compilation-config value into ``flags`` (it replaces an earlier one: argparse keeps the last), checked
    as release ``version`` checks it; and the warnings for what kvbudget does not model."""
    mp = release(version)
    doc = _doc(value, label, mp)
    out = replace(flags, compile_mode=None, cudagraph_mode=None, config_sizes=None, config_max=None,
                  full_cuda_graph=None, use_cudagraph=None, sequence_parallel=False, encoder_graphs=False)
    said: list[str] = []
    for key in list(doc)[:200]:
        item = doc[key]
        where = f"{label}: {excerpt(str(key), 40)[1:-1]}"
        if not has_key(str(key), mp):
            if mp >= (13, 0):
                raise InputError(f"vLLM stops at start-up: CompilationConfig of {_shown(mp)} has no key "
                                 f"{excerpt(str(key), 40)} (extra keys are forbidden): see its config/compilation.py")
            said.append(f"{where}: {_shown(mp)} passes over a key its CompilationConfig does not have")
            continue
        if key in ("level", "mode"):
            out = replace(out, compile_mode=_compile_mode(item, where, key == "level"))
        elif key == "cudagraph_mode":
            out = replace(out, cudagraph_mode=_graph_mode(item, where) if item is not None else None)
        elif key == "cudagraph_capture_sizes":
            if item is not None and (not isinstance(item, list) or len(item) > 4096):
                raise InputError(f"vLLM stops at start-up: {where} must be a list of integers")
            out = replace(out, config_sizes=None if item is None else tuple(
                _size(_int(x, where, -(1 << 40), 1 << 40), where) for x in item))
        elif key == "max_cudagraph_capture_size":
            out = replace(out, config_max=None if item is None else _int(item, where, -(1 << 40), 1 << 40))
        elif key == "full_cuda_graph":
            out = replace(out, full_cuda_graph=bool(item))
        elif key == "use_cudagraph":
            out = replace(out, use_cudagraph=bool(item))
        elif key == "pass_config" and isinstance(item, dict):
            on = any(item.get(k) is True or str(item.get(k)).lower() == "true"
                     for k in ("enable_sp", "enable_sequence_parallelism", "fuse_gemm_comms", "enable_async_tp"))
            out = replace(out, sequence_parallel=on)
        elif key == "cudagraph_mm_encoder":
            out = replace(out, encoder_graphs=item is True or str(item).lower() == "true")
    return out, said


def _compile_mode(value: object, where: str, level: bool) -> int:
    """The compilation mode (0.12 on; CompilationMode's names or 0-3) or level (0.6.5-0.17: 0-3)."""
    if isinstance(value, str) and not digits(value.strip()):
        name = value.strip().upper()
        if level or name not in COMPILE_MODES:
            raise InputError(f"vLLM stops at start-up: {where} {excerpt(value, 30)}: give 0-3"
                             + ("" if level else f" or {', '.join(COMPILE_MODES)}"))
        return COMPILE_MODES.index(name)
    return _int(value, where, 0, 3)


def _graph_mode(value: object, where: str) -> str:
    """cudagraph_mode as CompilationConfig reads it (CUDAGraphMode[value.upper()], or its 0-2 value)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 2:
        return GRAPH_MODES[value]
    name = str(value).strip().upper() if isinstance(value, str) else ""
    if name not in GRAPH_MODES:
        raise InputError(f"vLLM stops at start-up: {where} {excerpt(str(value), 30)} is not a CUDAGraphMode: give "
                         f"{', '.join(GRAPH_MODES)}")
    return name


def checked(flags: CompileFlags, tp: int, version: str | None) -> tuple[CompileFlags, list[str]]:
    """What vLLM refuses of the whole command (a size given both ways), and the warnings for what these flags do to
    memory that kvbudget does not model."""
    mp = release(version)
    if flags.flag_sizes is not None and flags.config_sizes is not None:
        raise InputError("vLLM stops at start-up: \"cudagraph_capture_sizes and compilation_config."
                         "cudagraph_capture_sizes are mutually exclusive\": give the sizes one way")
    if flags.flag_max is not None and flags.config_max is not None:
        raise InputError("vLLM stops at start-up: \"max_cudagraph_capture_size and compilation_config."
                         "max_cudagraph_capture_size are mutually exclusive\": give the largest size one way")
    said = []
    if flags.sequence_parallel and tp > 1 and mp >= (21, 0):
        said.append("--compilation-config pass_config: kvbudget does not model the memory it takes (the "
                    "sequence-parallel pass: its buffers, and in 0.21-0.31 only capture sizes that are multiples of TP)")
    if flags.encoder_graphs:
        said.append("--compilation-config cudagraph_mm_encoder: kvbudget does not model the memory it takes (the "
                    "vision encoder's CUDA graphs, which vLLM's estimate includes)")
    if flags.compile_mode in (1, 2) and mp >= (21, 0):
        said.append(f"--compilation-config mode {COMPILE_MODES[flags.compile_mode]}: kvbudget does not model the memory "
                    "it takes (stock torch.compile: which CUDA graphs the model runner captures)")
    return flags, said


@record
class GraphPlan:
    """The CUDA graphs vLLM 0.21+ captures for a command: the mode, the capture sizes, whether torch.compile runs."""

    mode: str
    sizes: tuple[int, ...]
    compiled: bool
    why: str = ""  # how the flags led there, in words (empty: the release's defaults)


def default_sizes(top: int, max_num_tokens: int, interactive: bool) -> list[int]:
    """The default capture list up to ``top`` tokens (config/vllm.py _set_cudagraph_sizes, 0.21-0.33)."""
    out = list(range(1, min(top, 32) + 1)) if interactive else [i for i in (1, 2, 4) if i <= top]
    out += list(range(8, min(top + 1, 256), 8)) + list(range(256, top + 1, 16))
    if max_num_tokens <= top:
        out.append(max_num_tokens)
    return sorted(set(out))


@lru_cache(maxsize=4096)  # a pure function of hashable arguments: a plan search asks it alike ~8 times a plan
def graph_plan(flags: CompileFlags, version: str | None, *, enforce_eager: bool, max_num_seqs: int,
               max_num_tokens: int, blackwell: bool, runner: str = "v1", performance_mode: str | None = None) -> GraphPlan:
    """The mode and capture sizes release ``version`` (0.21 on) resolves the flags to (the module's docstring); an
    InputError where vLLM stops."""
    minor = release(version)[0]
    level = 2 if flags.optimization_level is None else flags.optimization_level
    why: list[str] = []
    if enforce_eager:
        return GraphPlan("NONE", (), False, "--enforce-eager: no torch.compile, no CUDA graphs")
    mode = flags.compile_mode if flags.compile_mode is not None else (3 if level > 0 else 0)
    graphs = flags.cudagraph_mode or _LEVEL_GRAPHS[level]
    if flags.cudagraph_mode:
        why.append(f"cudagraph_mode {graphs}")
    if flags.compile_mode is not None:
        why.append(f"compilation mode {COMPILE_MODES[mode]}")
    if graphs in ("PIECEWISE", "FULL_AND_PIECEWISE") and mode != 3:
        fallback = {"PIECEWISE": "NONE", "FULL_AND_PIECEWISE": "FULL_DECODE_ONLY"}[graphs] if minor >= 30 else "NONE"
        why.append(f"{graphs} needs VLLM_COMPILE: vLLM 0.{minor} runs {fallback}")
        graphs = fallback
    if mode == 1 and runner == "v2" and minor >= 32 and graphs != "NONE":
        why.append("stock torch.compile on the V2 model runner: no CUDA graphs")
        graphs = "NONE"
    compiled = mode != 0
    if graphs == "NONE":
        return GraphPlan("NONE", (), compiled, "; ".join(why))
    given_max = flags.config_max if flags.config_max is not None else flags.flag_max
    given = flags.config_sizes if flags.config_sizes is not None else flags.flag_sizes
    top = given_max
    if top is None:
        top = min(2 * max_num_seqs, 1024 if blackwell and minor >= 28 else 512)
    top = min(max_num_tokens, top)
    if top < 1:
        raise InputError(f"vLLM stops at start-up: the largest CUDA-graph capture size is {top} (\"Maximum cudagraph "
                         "size should be greater than or equal to 1 when using cuda graph\"): give one of at least 1, or "
                         "cudagraph_mode NONE")
    if given is not None:
        if not given:
            raise InputError("vLLM stops at start-up: \"cudagraph_capture_sizes should contain at least one element "
                             "when using cuda graph\"")
        out = sorted({s for s in given if s <= max_num_tokens})
    else:
        out = default_sizes(top, max_num_tokens, performance_mode == "interactivity" and minor >= 17)
        if given_max is None and minor >= 31 and max_num_seqs <= top and max_num_seqs <= max_num_tokens:
            out = sorted({*out, max_num_seqs})
    if given_max is not None and given is not None and out and given_max != out[-1]:
        raise InputError(f"vLLM stops at start-up: \"customized max_cudagraph_capture_size(={given_max}) should be "
                         f"consistent with the max value of cudagraph_capture_sizes(={out[-1]})\"")
    if given is not None:
        why.append(f"capture sizes as given{'' if len(out) == len(set(given)) else ' (those above max_num_batched_tokens dropped)'}")
    elif given_max is not None:
        why.append(f"largest capture size {given_max}" + (f" (vLLM truncates it to {out[-1]})" if out and out[-1] != given_max else ""))
    return GraphPlan(graphs, tuple(out), compiled, "; ".join(why))


@lru_cache(maxsize=1024)
def graph_sizes(mode: str, sizes: tuple[int, ...], max_num_seqs: int,
                decode_query_len: int = 1) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The PIECEWISE and the FULL graphs' sizes of a mode (v1/cudagraph_dispatcher.py initialize_cudagraph_keys,
    0.21-0.33): the mixed-batch mode takes every capture size; FULL decode graphs, in a mode that keeps them apart
    (FULL_DECODE_ONLY, FULL_AND_PIECEWISE), the sizes from the decode query length up to that times max_num_seqs."""
    decode = tuple(s for s in sizes if decode_query_len <= s <= decode_query_len * max_num_seqs)
    return {"NONE": ((), ()), "PIECEWISE": (sizes, ()), "FULL": ((), sizes), "FULL_DECODE_ONLY": ((), decode),
            "FULL_AND_PIECEWISE": (sizes, decode)}[mode]


def describe(flags: CompileFlags, version: str | None) -> str:
    """What was read, in words (``explain``'s note)."""
    parts = []
    mp = release(version)
    if flags.optimization_level is not None:
        parts.append(f"-O{flags.optimization_level}")
    if flags.compile_mode is not None:
        parts.append(f"compilation {'level' if mp < (12, 0) else 'mode'} {flags.compile_mode}")
    if flags.cudagraph_mode:
        parts.append(f"cudagraph_mode {flags.cudagraph_mode}")
    for name, value in (("capture sizes", flags.config_sizes), ("--cudagraph-capture-sizes", flags.flag_sizes)):
        if value is not None:
            parts.append(f"{name} {_span(value)}")
    for name, top in (("max_cudagraph_capture_size", flags.config_max), ("--max-cudagraph-capture-size", flags.flag_max)):
        if top is not None:
            parts.append(f"{name} {top}")
    if flags.full_cuda_graph is not None:
        parts.append(f"full_cuda_graph {str(flags.full_cuda_graph).lower()}")
    if flags.use_cudagraph is not None:
        parts.append(f"use_cudagraph {str(flags.use_cudagraph).lower()}")
    return ", ".join(parts)


def _span(sizes: tuple[int, ...]) -> str:
    if len(sizes) <= 6:
        return "[" + ", ".join(map(str, sizes)) + "]"
    return f"[{sizes[0]}, {sizes[1]}, ... {sizes[-1]}] ({len(sizes)} sizes)"
