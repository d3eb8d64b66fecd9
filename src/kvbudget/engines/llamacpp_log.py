"""Read llama.cpp start-up logs of every era, and check their KV figures to the byte.

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

from .._record import field, record, replace
from ..units import InputError, MiB
from .llamacpp import row_bytes

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from ..model.spec import ModelSpec

_F = r"([0-9]+(?:[.,][0-9]+)?)"  # some locales print a decimal comma


def _num(text: str) -> float:
    return float(text.replace(",", "."))


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


def _meta(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    keys = ("n_layer", "n_head", "n_head_kv", "n_embd", "n_embd_head_k", "n_embd_head_v", "n_embd_k_gqa", "n_embd_v_gqa",
            "n_swa", "n_ctx_train", "arch", "n_ctx", "n_ctx_per_seq", "n_ctx_seq", "n_seq_max", "n_batch", "n_ubatch",
            "flash_attn", "kv_unified", "n_expert", "n_rot", "n_vocab", "ssm_d_inner", "ssm_d_state", "ssm_d_conv")
    for key in keys:
        m = re.search(rf"(?:print_info|llm_load_print_meta|llama_context|llama_new_context_with_model|llama_init_from_model):"
                      rf"\s+{key}\s+=\s+([^\n]+)", text)
        if m:
            out[key] = m.group(1).strip()
    for m in re.finditer(r"- kv\s+\d+:\s+([\w.]+)\s+\S+\s+=\s+([^\n]+)", text):
        out.setdefault("gguf:" + m.group(1), m.group(2).strip())
    return out


def parse_llamacpp_log(text: str) -> LlamaCppLog:
    """The KV caches and buffers a llama.cpp log reports, and the hyper-parameters it prints."""
    text = text.replace("\r", "")
    caches: list[CacheLine] = []
    swa_next = False
    pending: list[tuple[str, float]] = []
    for line in text.splitlines():
        if "creating     SWA KV cache" in line or "creating SWA KV cache" in line:
            swa_next = True
        elif "creating non-SWA KV cache" in line:
            swa_next = False
        buf = re.search(r"(\S+) KV buffer size = *" + _F + " MiB", line)
        if buf:
            pending.append((buf.group(1), _num(buf.group(2))))
            continue
        m = re.search(r"size = *" + _F + r" MiB \( *(\d+) cells, *(\d+) layers(?:, *[\d/ ]+ seqs)?\), K \((\w+)\): *" + _F
                      + r" MiB, V \((\w+)\): *" + _F + " MiB", line)
        if m:
            caches.append(CacheLine(int(m.group(2)), int(m.group(3)), m.group(4), m.group(6), _num(m.group(5)),
                                    _num(m.group(7)), _num(m.group(1)), swa_next, tuple(pending)))
            pending = []
            continue
        m = re.search(r"KV self size *= *" + _F + r" MiB, K \((\w+)\): *" + _F + r" MiB, V \((\w+)\): *" + _F + " MiB", line)
        if m:
            init = re.search(r"kv_size = (\d+),.*?n_layer = (\d+)", text)
            # without the kv_size line, the cache held n_ctx cells (also printed as the slots' ctx_size)
            n_ctx = re.search(r"n_ctx += (\d+)", text) or re.search(r"\bctx_size = (\d+)", text)
            layers_meta = re.search(r"(?:print_info|llm_load_print_meta): n_layer += (\d+)", text)
            cells = int(init.group(1)) if init else int(n_ctx.group(1)) if n_ctx else 0
            layers = int(init.group(2)) if init else int(layers_meta.group(1)) if layers_meta else 0
            caches.append(CacheLine(cells, layers, m.group(2), m.group(4), _num(m.group(3)), _num(m.group(5)),
                                    _num(m.group(1)), False, tuple(pending)))
            pending = []
    buffers = [(m.group(1), _num(m.group(2))) for m in re.finditer(r"(\S+) KV buffer size = *" + _F + " MiB", text)]
    if not caches and not buffers:
        raise InputError("no llama.cpp KV-cache figures found in the log (looked for 'llama_kv_cache ... size =', "
                         "'KV self size', 'KV buffer size')")
    seqs = re.search(r"cells, *\d+ layers, *\d+/(\d+) seqs", text)
    build = re.search(r"\bbuild(?::| =) (\d+) \(", text) or re.search(r"\bversion: (\d+) \(", text)
    return LlamaCppLog(tuple(caches), tuple(buffers), tuple(_meta(text).items()), int(seqs.group(1)) if seqs else 1,
                       int(build.group(1)) if build else None, "KV self size" in text)


def _first_int(value: str) -> list[int]:
    return [int(x) for x in re.findall(r"-?\d+", value)]


@record
class CacheCheck:
    cache: CacheLine
    predicted_k_mib: float
    predicted_v_mib: float
    exact: bool
    n_embd_k_gqa: int
    n_embd_v_gqa: int
    layer_bytes: dict[str, int] = field(default_factory=dict)  # one layer's K+V allocation, per buffer
    buffer_layers: tuple[int, ...] = ()  # layers each reported buffer holds (whole numbers when they match)
    buffers_exact: bool = True


def _alloc(name: str, type_name: str, width: int, cells: int, flat: bool) -> int:
    """Bytes a K or V tensor of one layer takes in the buffer ``name``: ggml-cuda pads quantized rows to
    512 elements (once per tensor) and aligns to 128 bytes; host buffers align to 32."""
    from .llamacpp_eras import cuda_pad_elems, pad

    nbytes = row_bytes(type_name, width) * cells
    cuda = name.startswith(("CUDA", "ROCm")) and not name.endswith("_Host")
    extra = cuda_pad_elems(width * cells if flat else width, type_name not in ("f32", "f16", "bf16")) if cuda else 0
    return pad(nbytes + (row_bytes(type_name, extra) if extra else 0), 128 if cuda else 32)


def _buffers(cache: CacheLine, dk: int, dv: int, n_stream: int, flat: bool) -> tuple[dict[str, int], tuple[int, ...], bool]:
    """Split the cache's layers over its reported buffers: each must hold a whole number of layers and
    together all of them, to the printed 0.01 MiB."""
    if not cache.buffers or not dk or not cache.cells:
        return {}, (), True
    cells = cache.cells * n_stream
    per: dict[str, int] = {}
    counts = []
    exact = True
    for name, mib in cache.buffers:
        one = _alloc(name, cache.type_k, dk, cells, flat) + (_alloc(name, cache.type_v, dv, cells, flat) if dv and cache.v_mib else 0)
        per[name] = one
        n = round(mib * MiB / one)
        counts.append(n)
        exact = exact and f"{n * one / MiB:.2f}" == f"{mib:.2f}"
    return per, tuple(counts), exact and sum(counts) == cache.layers


def _gguf_dims(meta: dict[str, str]) -> tuple[list[int], list[int]]:
    """KV widths from the GGUF key/value dump at the top of a log."""
    arch = meta.get("gguf:general.architecture", "").strip("'\"")
    heads = _first_int(meta.get(f"gguf:{arch}.attention.head_count_kv", ""))
    head_k = _first_int(meta.get(f"gguf:{arch}.attention.key_length", ""))
    head_v = _first_int(meta.get(f"gguf:{arch}.attention.value_length", "")) or head_k
    if heads and head_k:
        return [h * head_k[0] for h in heads], [h * head_v[0] for h in heads]
    return [], []


def _spec_dims(spec: ModelSpec | None) -> tuple[list[int], list[int]]:
    if spec is None:
        return [], []
    from .llamacpp import _kv_dims

    dims = [_kv_dims(layer) for layer in spec.layers]
    return [d[0] for d in dims if d[0]], [d[1] for d in dims if d[0]]


def check_caches(log: LlamaCppLog, spec: ModelSpec | None = None) -> tuple[CacheCheck, ...]:
    """Recompute each reported cache from the log's own hyper-parameters (or, where the excerpt lacks
    them, the GGUF dump or ``spec``): layers x cells x streams x row bytes of n_embd_k_gqa (and
    n_embd_v_gqa) in the cache type. Exact to the printed 0.01 MiB."""
    meta = dict(log.meta)
    k_dims = _first_int(meta.get("n_embd_k_gqa", ""))
    v_dims = _first_int(meta.get("n_embd_v_gqa", ""))
    if not k_dims:
        heads = _first_int(meta.get("n_head_kv", ""))
        head_k = _first_int(meta.get("n_embd_head_k", ""))
        if heads and head_k:
            k_dims = [h * head_k[0] for h in heads]
            head_v = _first_int(meta.get("n_embd_head_v", "")) or head_k
            v_dims = [h * head_v[0] for h in heads]
    if not k_dims:
        k_dims, v_dims = _gguf_dims(meta)
    if not k_dims:
        k_dims, v_dims = _spec_dims(spec)
    spec_layers = len(_spec_dims(spec)[0])
    out = []
    for cache in log.caches:
        if not cache.layers and spec_layers:  # the excerpt lacks n_layer: the model's layers with KV
            cache = replace(cache, layers=spec_layers)
        dims_k = [d for d in k_dims if d] or [0]
        dims_v = [d for d in v_dims if d] or [0]
        dk, dv = max(dims_k), max(dims_v)  # uniform models print one number; varying ones are bounded
        k = cache.layers * cache.cells * log.n_stream * row_bytes(cache.type_k, dk) if dk else 0
        v = cache.layers * cache.cells * log.n_stream * row_bytes(cache.type_v, dv) if dv and cache.v_mib else 0
        exact = f"{k / MiB:.2f}" == f"{cache.k_mib:.2f}" and f"{v / MiB:.2f}" == f"{cache.v_mib:.2f}"
        per, counts, buffers_exact = _buffers(cache, dk, dv, log.n_stream, log.flat)
        out.append(CacheCheck(cache, round(k / MiB, 2), round(v / MiB, 2), exact, dk, dv, per, counts, buffers_exact))
    return tuple(out)
