"""Read llama.cpp start-up logs of every era (``check.py`` checks their KV figures to the byte).

Formats (llama.cpp ``src/llama-kv-cache.cpp`` and ``src/llama-context.cpp``, ggml-org/llama.cpp 2026-09;
older ones from the 2025-02 sources and published logs): current ``llama_kv_cache: size = X MiB ( N cells, L layers, a/b seqs),
K (t): k MiB, V (t): v MiB`` and ``llama_kv_cache: CUDA0 KV buffer size = X MiB``; mid-2025
``llama_kv_cache_unified:`` (with ``_iswa`` for sliding-window models); early 2025 and before
``llama_kv_cache_init: kv_size = N, ..., type_k = 'f16', type_v = 'f16', n_layer = L`` and
``KV self size = X MiB, K (f16): k MiB, V (f16): v MiB``. The model's hyper-parameters come from the
``print_info:`` / ``llm_load_print_meta:`` block or the GGUF key/value dump the log starts with.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..._record import record
from ...units import InputError
from ..logscan import AHEAD, BACK, NUM_DECIMAL_COMMA, LogText, count, figure, open_log

_MIB = 1e9  # a figure in MiB beyond this (a petabyte) is not a real cache


def _num(text: str, name: str = "KV figure (MiB)") -> float:
    return figure(text, name, 0, _MIB, decimal_comma=True)


@record
class CacheLine:
    """One KV cache the log reports."""

    cells: int
    layers: int
    type_k: str
    type_v: str
    k_mib: float
    v_mib: float
    total_mib: float
    swa: bool = False
    buffers: tuple[tuple[str, float], ...] = ()  # the "KV buffer size" lines printed for this cache


@record
class LlamaCppLog:
    caches: tuple[CacheLine, ...]
    buffers_mib: tuple[tuple[str, float], ...]  # "KV buffer size" per buffer name
    meta: tuple[tuple[str, str], ...]  # hyper-parameters and context settings as printed
    n_stream: int = 1
    build: int | None = None  # the "build: N" the log prints
    flat: bool = False  # the pre-b5429 format ("KV self size"), when K and V were 1-D tensors


_META_KEYS = frozenset((
    "n_layer", "n_head", "n_head_kv", "n_embd", "n_embd_head_k", "n_embd_head_v", "n_embd_k_gqa", "n_embd_v_gqa",
    "n_swa", "n_ctx_train", "arch", "n_ctx", "n_ctx_per_seq", "n_ctx_seq", "n_seq_max", "n_batch", "n_ubatch",
    "flash_attn", "kv_unified", "n_expert", "n_rot", "n_vocab", "ssm_d_inner", "ssm_d_state", "ssm_d_conv"))
_META_PREFIXES = ("print_info:", "llm_load_print_meta:", "llama_context:", "llama_new_context_with_model:",
                  "llama_init_from_model:")
_META = (r"(?:print_info|llm_load_print_meta|llama_context|llama_new_context_with_model|llama_init_from_model):"
         r"[ \t]{1,16}(\w{1,32})[ \t]{1,16}=[ \t]{1,16}([^\n]{1,200})")
_GGUF_KV = r"- kv[ \t]{1,8}[0-9]{1,6}:[ \t]{1,8}([\w.]{1,128})[ \t]{1,8}\S{1,64}[ \t]{1,8}=[ \t]{1,8}([^\n]{1,200})"


# ik_llama.cpp (github.com/ikawrakow/ik_llama.cpp), a llama.cpp fork, prints these and llama.cpp never has: its
# context parameter ``mla_attn`` and its MLA cache's ``KV self size = X MiB, c^KV (type): X MiB, kv^T: ...``.
_FORK_MARKS = ("mla_attn", "c^KV")


def _meta(log: LogText) -> dict[str, str]:
    """The hyper-parameters the log prints (the first of each), then its GGUF key/value dump."""
    out: dict[str, str] = {}
    for m in log.each(_META_PREFIXES, _META):
        if m.group(1) in _META_KEYS:
            out.setdefault(m.group(1), m.group(2).strip())
    for m in log.each("- kv", _GGUF_KV):
        out.setdefault("gguf:" + m.group(1), m.group(2).strip())
    return out


# Figures as llama.cpp prints them: some locales print a decimal comma (logscan.NUM_DECIMAL_COMMA).
_CACHE = (r"size = {0,16}" + NUM_DECIMAL_COMMA + r" MiB \( {0,16}" + NUM_DECIMAL_COMMA + r" cells, {0,16}" + NUM_DECIMAL_COMMA
          + r" layers(?:, {0,16}[0-9/ ]{1,40} seqs)?\), K \((\w{1,16})\): {0,16}" + NUM_DECIMAL_COMMA
          + r" MiB, V \((\w{1,16})\): {0,16}" + NUM_DECIMAL_COMMA + " MiB")
_SELF = (r"KV self size {0,16}= {0,16}" + NUM_DECIMAL_COMMA + r" MiB, K \((\w{1,16})\): {0,16}" + NUM_DECIMAL_COMMA
         + r" MiB, V \((\w{1,16})\): {0,16}" + NUM_DECIMAL_COMMA + " MiB")
_BUFFER = r"(?<!\S)(\S{1,64}) KV buffer size = {0,16}" + NUM_DECIMAL_COMMA + " MiB"


def _lines_of(log: LogText, kind: str, literal: str) -> Iterator[tuple[int, str, int, int]]:
    return ((start, kind, stop, i) for start, stop, i in log.lines(literal))


def _events(log: LogText) -> Iterator[tuple[int, str, int, int]]:
    """(line start, kind, line end, position) of every line that changes what a cache holds, in order."""
    import heapq

    kinds = (("swa", "SWA KV cache"), ("buffer", "KV buffer size"), ("cache", " cells,"), ("self", "KV self size"))
    return heapq.merge(*(_lines_of(log, kind, lit) for kind, lit in kinds))


def parse_llamacpp_log(text: str) -> LlamaCppLog:
    """The KV caches and buffers a llama.cpp log reports, and the hyper-parameters it prints; each
    figure found by a literal and read in a bounded window of its line (linear time), and checked."""
    log = open_log(text, "llama.cpp")
    if mark := next((m for m in _FORK_MARKS if log.has(m)), None):
        raise InputError(f"an ik_llama.cpp log (its {mark!r} line), not llama.cpp's: that fork caches DeepSeek's MLA by "
                         "its own -mla modes and numbers its builds apart, which kvbudget does not model; give a "
                         "log of ggml-org/llama.cpp")
    text = log.text
    caches: list[CacheLine] = []
    swa_next = False
    pending: list[tuple[str, float]] = []
    buffers: list[tuple[str, float]] = []
    shape: tuple[str, str] | None = None
    last_line = -1
    for start, kind, stop, i in _events(log):
        line = text[start:stop] if stop - start <= 4096 else text[max(start, i - BACK):min(stop, i + AHEAD)]
        if kind == "swa":
            if "creating     SWA KV cache" in line or "creating SWA KV cache" in line:
                swa_next = True
            elif "creating non-SWA KV cache" in line:
                swa_next = False
            continue
        if start == last_line:  # a line is one record: the first kind that reads it
            continue
        if kind == "buffer":
            buf = re.search(_BUFFER, line)
            if buf:
                pending.append((buf.group(1), _num(buf.group(2), f"{buf.group(1)} KV buffer size (MiB)")))
                buffers.append(pending[-1])
                last_line = start
        elif kind == "cache":
            m = re.search(_CACHE, line)
            if m:
                caches.append(CacheLine(count(m.group(2), "KV cache cells", 0, 1 << 40), count(m.group(3), "KV cache layers", 0, 1 << 20),
                                        m.group(4), m.group(6), _num(m.group(5), "K size (MiB)"), _num(m.group(7), "V size (MiB)"),
                                        _num(m.group(1), "KV cache size (MiB)"), swa_next, tuple(pending)))
                pending = []
                last_line = start
        else:
            m = re.search(_SELF, line)
            if m:
                shape = shape or _self_shape(log)  # looked up once per log, not once per line
                caches.append(_self_cache(shape, m, tuple(pending)))
                pending = []
                last_line = start
    if not caches and not buffers:
        raise InputError("no llama.cpp KV-cache figures found in the log (looked for 'llama_kv_cache ... size =', "
                         "'KV self size', 'KV buffer size')")
    seqs = log.first(" cells,", r"cells, {0,16}[0-9]{1,12} layers, {0,16}[0-9]{1,12}/([0-9]{1,12}) seqs")
    build = (log.first(("build:", "build ="), r"\bbuild(?::| =) ([0-9]{1,9}) \(")
             or log.first("version: ", r"\bversion: ([0-9]{1,9}) \("))
    return LlamaCppLog(tuple(caches), tuple(buffers), tuple(_meta(log).items()),
                       count(seqs.group(1), "KV cache seqs", 1, 1 << 16) if seqs else 1,
                       int(build.group(1)) if build else None, log.has("KV self size"))


def _self_cache(shape: tuple[str, str], m: re.Match[str], pending: tuple[tuple[str, float], ...]) -> CacheLine:
    """A pre-b5429 ``KV self size`` cache: its cells and layers from the ``kv_size`` line, else n_ctx
    (also printed as the slots' ctx_size) and the printed n_layer (looked up once per log)."""
    cells, layers = shape
    return CacheLine(count(cells, "KV cache cells", 0, 1 << 40), count(layers, "KV cache layers", 0, 1 << 20), m.group(2), m.group(4),
                     _num(m.group(3), "K size (MiB)"), _num(m.group(5), "V size (MiB)"), _num(m.group(1), "KV self size (MiB)"), False,
                     pending)


def _self_shape(log: LogText) -> tuple[str, str]:
    init = log.first("kv_size = ", r"kv_size = ([0-9]{1,12}),[^\n]{0,400}?n_layer = ([0-9]{1,12})")
    n_ctx = log.first("n_ctx ", r"n_ctx {1,16}= ([0-9]{1,12})") or log.first("ctx_size = ", r"\bctx_size = ([0-9]{1,12})")
    layers_meta = log.first(("print_info:", "llm_load_print_meta:"), r"(?:print_info|llm_load_print_meta): n_layer {1,16}= ([0-9]{1,12})")
    cells = init.group(1) if init else n_ctx.group(1) if n_ctx else "0"
    layers = init.group(2) if init else layers_meta.group(1) if layers_meta else "0"
    return cells, layers
