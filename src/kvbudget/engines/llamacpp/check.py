"""Check a llama.cpp start-up log's KV caches to the byte: each reported cache recomputed from the log's own
hyper-parameters (or the GGUF dump it starts with, or the model), and each ``KV buffer size`` split into whole
layers (``log.py`` reads the log)."""

from __future__ import annotations

import re

from ..._record import field, record, replace
from ...units import MiB
from ..logscan import count
from . import calibration as eras
from .calibration import cuda_pad_elems, pad
from .kv_layout import _cache_layers, row_bytes
from .log import CacheLine, LlamaCppLog

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from ...model.spec import ModelSpec


def _first_int(value: str, name: str = "KV width") -> list[int]:
    """The whole numbers a printed hyper-parameter holds (one, or one per layer), each checked."""
    return [count(x, name, 0, 1 << 24) for x in re.findall(r"-?(?:[0-9][0-9.eE+]*|(?i:nan|inf))", value[:100_000])]


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


def _spec_dims(spec: ModelSpec | None, build: int | None) -> tuple[list[int], list[int]]:
    """The model's K and V widths as the log's build caches them (an MLA latent, with or without its V, or every
    head's decompressed K and V before b5137); a log without a build line: today's rules."""
    if spec is None:
        return [], []
    b = eras.CURRENT if build is None else build
    rows = [r for r in _cache_layers(spec, eras.mla_has_v(b), eras.mla_latent(b)) if r[2]]  # (layer, state, k, v, ...)
    return [r[2] for r in rows], [r[3] for r in rows]


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
        k_dims, v_dims = _spec_dims(spec, log.build)
    spec_layers = len(_spec_dims(spec, log.build)[0])
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
