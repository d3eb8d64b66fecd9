"""Where llama.cpp puts each weight tensor: ``-ot PATTERN=BUFFER``, ``--cpu-moe`` and ``--n-cpu-moe N``.

Read from ggml-org/llama.cpp (b11312, 2026-08): ``common/arg.cpp`` (``parse_tensor_buffer_overrides``: the value is
split at ``,``, each part at its first ``=``; the buffer must be one a device offers, by its buffer type's name —
``CPU``, ``CUDA0`` ... — else "unknown buffer type" stops the program; ``-cmoe`` / ``--cpu-moe``
(``LLAMA_ARG_CPU_MOE``) adds ``llm_ffn_exps_cpu_override()``, ``-ncmoe N`` / ``--n-cpu-moe N``
(``LLAMA_ARG_N_CPU_MOE``) adds ``llm_ffn_exps_block_regex(i)`` for i < N, both to ``CPU``), ``common/common.h``
(``LLM_FFN_EXPS_REGEX``) and ``src/llama-model-loader.cpp`` (``create_tensor``: for every tensor, input and output
layers included, the overrides are tried in order and the first whose pattern ``std::regex_search`` finds in the
tensor's name sets its buffer; an override to ``CPU`` keeps the layer's KV cache where the layer is).

Patterns are matched with Python's ``re`` (ECMAScript and Python agree on what -ot patterns use: literals, ``\\.``,
``\\d``, groups, alternation, classes, ``*`` ``+`` ``?``). What the two read differently is refused, since llama.cpp's
``std::regex`` (ECMAScript grammar) throws ``regex_error`` on Python's own syntax when it loads the model, or reads it
otherwise: ``(?`` other than ``(?:`` ``(?=`` ``(?!`` (Python's lookbehind, named groups, inline flags, comments,
atomic groups), a possessive quantifier (``*+``), Python's ``\\A`` ``\\Z`` ``\\a`` ``\\N`` ``\\U`` escapes and
POSIX classes (``[[:alpha:]]``: a class to std::regex, a nested set to Python). A pattern whose matching can take
exponential time (a repeated group that itself repeats or alternates, as ``(a+)+`` or ``(a|a)*``) is refused:
std::regex backtracks on it as Python does.
"""

from __future__ import annotations

import re
import time
import warnings
from functools import lru_cache

from ...inputs import excerpt
from ...units import InputError

# common/common.h LLM_FFN_EXPS_REGEX: every MoE expert tensor (ffn_up_exps, ffn_down_exps, ffn_gate_exps, the
# fused ffn_gate_up_exps and the chunked *_chexps)
EXPS = r"\.ffn_(up|down|gate|gate_up)_(ch|)exps"
MAX_LAYERS = 512  # src/llama-hparams.h LLAMA_MAX_LAYERS: --n-cpu-moe past it matches nothing more
MAX_OVERRIDES = 4096  # src/llama.cpp llama_max_tensor_buft_overrides()
# From b7407 (auto-fit) common/arg.cpp pads the overrides with empty ones up to MAX_OVERRIDES, and common.cpp's
# common_model_params_to_llama asserts that the last is empty: MAX_OVERRIDES or more abort llama-server
# ("Tensor buffer overrides not terminated with empty pattern").
PADDED_FROM = 7407
MAX_PATTERN = 1024  # characters of one pattern kvbudget reads
MATCH_SECONDS = 2.0  # the most all tensor names may take against one plan's overrides

Override = tuple[str, str]  # (pattern, buffer type name)


def cpu_moe() -> Override:
    """``--cpu-moe``: every layer's expert tensors in host memory."""
    return EXPS, "CPU"


def n_cpu_moe(n: int, flag: str = "--n-cpu-moe", build: int = PADDED_FROM) -> tuple[Override, ...]:
    """``--n-cpu-moe N``: the expert tensors of layers 0 .. N-1 in host memory (``blk\\.I`` + EXPS each). llama.cpp
    adds all N overrides (common.h llm_add_n_cpu_ffn_overrides), so from ``PADDED_FROM`` N of ``MAX_OVERRIDES`` or
    more is refused here; past ``MAX_LAYERS`` the rest match nothing and are not made."""
    if n >= MAX_OVERRIDES and build >= PADDED_FROM:
        raise InputError(f"{flag} {n:,} adds {n:,} tensor overrides, one per layer: llama.cpp takes fewer than "
                         f"{MAX_OVERRIDES:,} (llama-server aborts: 'Tensor buffer overrides not terminated with empty "
                         f"pattern'); give at most the model's layer count (--cpu-moe: every layer)")
    return tuple((rf"blk\.{i}{EXPS}", "CPU") for i in range(min(n, MAX_LAYERS)))


def _repeat_at(p: str, i: int) -> tuple[bool, int]:
    """Whether a quantifier starts at ``p[i]`` (``*``, ``+``, ``{m,}``, ``{m,n}`` with n > 1), and its length."""
    if i >= len(p):
        return False, 0
    if p[i] in "*+":
        return True, 1
    if p[i] == "?":
        return False, 1
    m = re.match(r"\{(\d{1,6})(,(\d{0,6}))?\}", p[i:i + 16])
    if m is None:
        return False, 0
    many = (m.group(2) is not None and (m.group(3) == "" or int(m.group(3)) > 1)) or int(m.group(1)) > 1
    return many, len(m.group(0))


# Escapes Python's re reads and ECMAScript's std::regex does not (there, an unknown escape is the letter itself)
_PYTHON_ESCAPES = frozenset("AZaNU")


def _not_ecmascript(pattern: str, construct: str, what: str) -> None:
    raise InputError(f"-ot pattern {excerpt(pattern, 40)}: {excerpt(construct, 10)} is {what}, not ECMAScript, which "
                     "llama.cpp's std::regex reads as it loads the model (regex_error, or other matches); write it "
                     "with literals, \\. \\d [a-z] ( | ) * + ?")


def _possessive(pattern: str, at: int, n: int) -> None:
    """A '+' right after a quantifier of ``n`` characters: Python's possessive form, 'nothing to repeat' to std::regex."""
    if n and pattern[at:at + 1] == "+":
        _not_ecmascript(pattern, pattern[at - n:at + 1], "Python's possessive quantifier")


def check_pattern(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled, or one InputError: too long, not a regular expression, or one whose backtracking can take
    exponential time (a repeated group holding a repetition or an alternation)."""
    if len(pattern) > MAX_PATTERN:
        raise InputError(f"-ot pattern {excerpt(pattern, 40)} is {len(pattern):,} characters long: give at most "
                         f"{MAX_PATTERN:,} (a tensor name is under 100)")
    stack: list[bool] = []  # per open group: whether it holds a repetition or an alternation
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            if pattern[i + 1:i + 2] in _PYTHON_ESCAPES:
                _not_ecmascript(pattern, f"\\{pattern[i + 1]}", "Python's escape")
            i += 2
            continue
        if ch == "[":  # a class: its characters are literals (a ']' first is one too)
            j = i + 1 + (pattern[i + 1:i + 2] == "^")
            j += pattern[j:j + 1] == "]"
            while j < len(pattern) and pattern[j] != "]":
                if pattern[j] == "[" and pattern[j + 1:j + 2] in (":", "=", "."):
                    _not_ecmascript(pattern, pattern[j:j + 2], "a POSIX class (letters to std::regex, a set of its "
                                    "characters to Python)")
                j += 2 if pattern[j] == "\\" else 1
            i = j + 1
        elif ch == "(":
            if pattern[i + 1:i + 2] == "?" and pattern[i + 2:i + 3] not in (":", "=", "!"):
                _not_ecmascript(pattern, pattern[i:i + 4], "Python's group syntax")
            stack.append(False)
            i += 1
        elif ch == ")" and stack:
            inner = stack.pop()
            many, n = _repeat_at(pattern, i + 1)
            if inner and many:
                raise InputError(f"-ot pattern {excerpt(pattern, 60)}: a repeated group that itself repeats or "
                                 "alternates makes regex matching take exponential time (llama.cpp's std::regex "
                                 "too): write the tensor names out, such as blk\\.(1|2|3)\\.ffn_up_exps=CPU")
            if stack:
                stack[-1] = stack[-1] or inner or many
            _possessive(pattern, i + 1 + n, n)
            i += 1 + n
        else:
            many, n = _repeat_at(pattern, i)
            if (many or ch == "|") and stack:
                stack[-1] = True
            _possessive(pattern, i + n, n)
            i += max(n, 1)
    try:
        with warnings.catch_warnings():  # "Possible nested set": a second line on standard error
            warnings.simplefilter("ignore", FutureWarning)
            return re.compile(pattern)
    except re.error as exc:
        raise InputError(f"-ot pattern {excerpt(pattern, 60)} is not a regular expression ({exc}): llama.cpp stops "
                         "on it; fix the pattern") from None


def parse_overrides(value: str, flag: str = "-ot") -> tuple[Override, ...]:
    """``-ot PATTERN=BUFFER[,PATTERN=BUFFER...]`` as common/arg.cpp splits it (each part at its first ``=``)."""
    if len(value) > MAX_PATTERN * 16:
        raise InputError(f"{flag} value is {len(value):,} characters long: give at most {MAX_PATTERN * 16:,}")
    out = []
    for part in value.split(","):
        pattern, eq, buffer = part.partition("=")
        if not eq:
            raise InputError(f"{flag} {excerpt(part, 60)}: give PATTERN=BUFFER, such as exps=CPU (llama.cpp: "
                             "'invalid value')")
        check_pattern(pattern)
        out.append((pattern, buffer))
    return tuple(out)


def buffer_names(devices: int) -> tuple[str, ...]:
    """The buffer types a plan's devices offer, by the names -ot takes: the host's, then each GPU's."""
    return ("CPU", *(f"CUDA{d}" for d in range(devices)))


def check_buffers(overrides: tuple[Override, ...], devices: int, build: int = PADDED_FROM) -> None:
    """Every override's buffer is one the plan's devices offer, or one InputError (llama.cpp prints the available
    buffer types and stops: 'unknown buffer type'); from ``PADDED_FROM``, fewer than ``MAX_OVERRIDES`` of them."""
    if len(overrides) >= MAX_OVERRIDES and build >= PADDED_FROM:
        raise InputError(f"{len(overrides):,} tensor overrides: llama.cpp b{PADDED_FROM} and later take fewer than "
                         f"{MAX_OVERRIDES:,} (llama_max_tensor_buft_overrides; llama-server aborts: 'Tensor buffer "
                         "overrides not terminated with empty pattern'); merge patterns with |")
    names = buffer_names(devices)
    for pattern, buffer in overrides:
        if buffer not in names:
            said = "no GPU" if devices == 0 else f"{devices} GPU{'s' if devices > 1 else ''}"
            raise InputError(f"-ot {excerpt(pattern, 40)[1:-1]}={excerpt(buffer, 20)[1:-1]}: a plan with {said} has "
                             f"no buffer type {excerpt(buffer, 20)} (llama.cpp stops: 'unknown buffer type'); use one "
                             f"of {', '.join(names)}")


@lru_cache(maxsize=64)
@lru_cache(maxsize=8)
def _first_rules(names: tuple[str, ...], overrides: tuple[Override, ...]) -> tuple[int | None, ...]:
    """For each tensor name, the index of the first override whose pattern is found in it (None: none):
    llama-model-loader.cpp's order. Bounded: a plan whose names take over ``MATCH_SECONDS`` is refused. Kept for the
    plan's second question of the same rules (``place``, then ``unused``)."""
    compiled = [check_pattern(p).search for p, _ in overrides]
    out: list[int | None] = []
    start = time.monotonic()
    for name in names:
        out.append(next((i for i, search in enumerate(compiled) if search(name)), None))
        if time.monotonic() - start > MATCH_SECONDS:
            raise InputError(f"matching {len(overrides):,} -ot patterns against the model's tensor names takes over "
                             f"{MATCH_SECONDS:.0f} s: simplify the patterns")
    return tuple(out)


def place(names: tuple[str, ...], overrides: tuple[Override, ...]) -> tuple[str | None, ...]:
    """For each tensor name, the buffer of the first override whose pattern is found in it (None: no override)."""
    if not overrides:
        return (None,) * len(names)
    return tuple(None if i is None else overrides[i][1] for i in _first_rules(names, overrides))


def unused(names: tuple[str, ...], overrides: tuple[Override, ...]) -> tuple[str, ...]:
    """The ``PATTERN=BUFFER`` rules that place no tensor of ``names``: found in none, or only in names an earlier rule
    already placed (llama-model-loader.cpp takes the first match). llama.cpp loads as if they were not there, so a
    typo in a pattern passes unseen there; the plan says it."""
    generated = re.compile(r"(?:blk\\\.[0-9]{1,4})?" + re.escape(EXPS))  # --cpu-moe's, --n-cpu-moe's: one per layer
    if not overrides or all(generated.fullmatch(p) for p, _ in overrides):
        return ()
    used = set(_first_rules(names, overrides))
    return tuple(f"{p}={b}" for i, (p, b) in enumerate(overrides) if i not in used and not generated.fullmatch(p))
