"""llama.cpp's KV cache (and Ollama's, which runs it), to the byte.

Rules from llama.cpp's sources (https://github.com/ggml-org/llama.cpp, 2026-09-28, file and function):
``src/llama-context.cpp`` (n_ctx padded to 256; streams and n_ctx_seq), ``src/llama-kv-cache.cpp``
(one K and one V tensor per layer with KV, ne = [n_embd_k_gqa, kv_size, n_stream]; no V for MLA),
``src/llama-kv-cache-iswa.cpp`` (the sliding-window cache's size), ``src/llama-memory-recurrent.cpp``
(f32 conv and SSM states, max(1, n_seq_max) cells), ``common/arg.cpp`` and ``tools/server`` (4
unified slots by default in llama-server), ``common/fit.cpp`` (auto-fit to free device memory:
``fit.py``). Older releases padded n_ctx to 32 without flash attention (2025-02 snapshot).
"""

from __future__ import annotations

from functools import lru_cache

from ..._bisect import largest
from ..._record import record, replace
from ...hardware import GPU
from ...kvcache import check_indexer_priced
from ...model.spec import WEIGHTS_FIX, ModelSpec, checkpoint_format
from ...units import GiB, InputError, MiB
from ..base import Replica
from . import calibration as eras
from .calibration import pad
from .kv_layout import _cache_layers, _has_state, mla_note, row_bytes
from .settings import LlamaCppSettings, _cache_type

Override = tuple[str, str]  # an -ot rule: (pattern, buffer type name)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from ..base import EnginePlan
    from .fit import Fitted

CUDA_ALIGN = 128  # ggml-cuda buffer type alignment


@record
class LlamaCppPlan:
    model: str
    gpu: str
    n_ctx: int
    n_ctx_seq: int
    n_seq_max: int
    n_stream: int
    unified: bool
    cells: int  # non-SWA cache cells per stream
    swa_cells: int  # SWA cache cells per stream (0: no SWA layers)
    kv_layers: int
    swa_layers: int
    type_k: str
    type_v: str
    k_bytes: int
    v_bytes: int
    swa_k_bytes: int
    swa_v_bytes: int
    recurrent_bytes: int
    recurrent_cells: int
    kv_bytes: int  # everything the context holds per token and per sequence
    kv_gpu_bytes: int  # the part on the GPU (layers offloaded)
    weights_gpu_bytes: int
    weights_cpu_bytes: int
    output_bytes: int
    compute_bytes: int
    offloaded: int  # layers on the GPU, counting the output layer as llama.cpp does
    n_layer: int
    total_gpu_bytes: int  # the fullest device's
    fits: bool
    fit_note: str
    log_lines: tuple[str, ...]
    notes: tuple[str, ...]
    weights_format: str
    device_bytes: tuple[int, ...] = ()  # weights + KV + compute buffer on each GPU
    kv_device_bytes: tuple[int, ...] = ()  # each GPU's "KV buffer size"
    served_file: str = ""  # a llama-quantize file type: the .gguf it writes, which llama-server -m serves
    overrides: tuple[tuple[str, str], ...] = ()  # the tensor overrides it loads with (the user's, or auto-fit's)
    fit_moved: bool = False  # auto-fit's step 3 chose -ngl and the overrides: the model does not fit the GPU alone
    expert_layers: int = 0  # layers with expert tensors
    experts_on_cpu: int = 0  # of them, layers with an expert tensor in host memory

    @property
    def placement(self) -> str:
        """Where the weights that are not on the GPU are, in words ("" when every weight is on the GPU)."""
        said = ""
        if self.experts_on_cpu:
            said = f"with {self.experts_on_cpu} of {self.expert_layers} layers' experts in host memory"
        elif self.offloaded < self.n_layer + 1 and self.gpu != "CPU":
            said = f"with {self.n_layer + 1 - self.offloaded} of {self.n_layer + 1} layers in host memory"
        if said and self.fit_moved:
            said += " (placed by auto-fit: the model does not fit the GPU alone)"
        return said


def _mib(n: int) -> str:
    return f"{n / MiB:.2f}"


MAX_SEQ = 256  # llama-cparams.h LLAMA_MAX_SEQ (64 in builds of 2024)


def _out_of_memory(lines: tuple[str, ...], weights: int, kv: int, compute: int, total: int) -> tuple[str, ...]:
    """The log up to the first buffer the GPU cannot hold, then the allocation failure llama.cpp prints there
    (ggml-cuda.cu, ggml_backend_cuda_buffer_type_alloc_buffer): the model buffer, else the KV cache, else the
    compute buffer. Nothing after it is printed: the load stops."""
    used = 0
    for size, marker in ((weights, "model buffer size"), (kv, "llama_kv_cache"), (compute, "compute buffer size")):
        if used + size > total:
            at = next((i for i, line in enumerate(lines) if marker in line), len(lines))
            return (*lines[:at], f"ggml_backend_cuda_buffer_type_alloc_buffer: allocating {size / MiB:.2f} MiB on "
                                 "device 0: cudaMalloc failed: out of memory")
        used += size
    return lines


# Memoized (bounded, typed, immutable results), as ``kv_layout._cache_layers`` and ``_weights`` below: a plan
# search over GPU types and slot counts works each out once.
@lru_cache(maxsize=256, typed=True)
def _split_layers(n_layer: int, ngl: int, shares: tuple[float, ...], output_first: bool = True) -> tuple[int, ...]:
    return tuple(eras.split_layers(n_layer, ngl, list(shares), output_first))


@record
class _Weights:
    head: int
    tail: int
    embd: int  # the token embedding (a tied output layer loads it again)
    per_layer: tuple[int, ...]
    load_lines: tuple[str, ...] = ()
    out_file: str = ""  # a llama-quantize file type: the .gguf it writes
    tensors: tuple[tuple[str, int, int], ...] = ()  # every GGUF tensor in file order: name, bytes, place (as sections)


@lru_cache(maxsize=16, typed=True)
def _weights(spec: ModelSpec) -> _Weights:
    """The bytes of each part of ``spec``'s weights in its own format (``spec.weight_format``, known), and of each
    tensor by its GGUF name (what -ot patterns match): a llama-quantize file type's by its tensor types, another
    format's layer (or embedding, or output) bytes shared over its tensors by their elements (exact for 16-bit)."""
    fmt = spec.weight_format
    assert fmt is not None
    inv = spec.inventory
    from ...model import gguf_quant

    if fmt.name == "gguf":  # a llama-quantize file type: each tensor's type depends on its place (gguf_quant)
        gw = gguf_quant.gguf_weights(spec, fmt.ftype)
        named = tuple((q.name, gguf_quant.GGML_TYPES[ty].nbytes(q.ne0, q.rows), at)
                      for q, ty, at in zip(gw.tensors, gw.types, gw.sections, strict=True))
        return _Weights(gw.head_bytes, gw.tail_bytes, gw.token_embd_bytes, tuple(gw.layer_bytes), gw.log_lines(),
                        gguf_quant.file_name(spec.name, fmt.ftype), named)
    head = sum(fmt.tensor_bytes(t) for t in inv.head)
    tail = sum(fmt.tensor_bytes(t) for t in inv.tail)
    embd = next((fmt.tensor_bytes(t) for t in inv.head if t.role == "embeddings" and t.split == "vocab"), 0)
    priced: dict[int, int] = {}  # equal layers share one block tuple (params.inventory): price each once
    per_layer = [priced[id(block)] if id(block) in priced else priced.setdefault(id(block), sum(fmt.tensor_bytes(t) for t in block))
                 for block in inv.layers]
    return _Weights(head, tail, embd, tuple(per_layer), (), "", _shared(gguf_quant.tensor_names(spec), head, per_layer, tail))


def _shared(names: tuple[tuple[str, int, int], ...], head: int, per_layer: list[int],
            tail: int) -> tuple[tuple[str, int, int], ...]:
    """Each section's bytes shared over its tensors by their elements, the remainder to its last tensor."""
    n = len(per_layer)
    elements: dict[int, int] = {}
    for _, count, at in names:
        elements[at] = elements.get(at, 0) + count
    total = {at: head if at < 0 else tail if at >= n else per_layer[at] for at in elements}
    given = dict.fromkeys(elements, 0)
    last = {at: i for i, (_, _, at) in enumerate(names)}
    out = []
    for i, (name, count, at) in enumerate(names):
        nbytes = total[at] - given[at] if i == last[at] else total[at] * count // max(elements[at], 1)
        given[at] += nbytes
        out.append((name, nbytes, at))
    return tuple(out)


@record
class _Layout:
    """Where the weights go for one -ngl and one list of tensor overrides."""

    ngl: int  # -ngl as a count (all: n_layer + 1)
    device_of: tuple[int, ...]  # each layer's device (-1: the CPU): its KV cache goes there, whatever -ot moves
    w_dev: tuple[int, ...]  # weight bytes on each GPU
    gpu_w: int
    cpu_w: int  # weight bytes in host memory
    cpu_buffer: int  # the CPU model buffer llama.cpp prints: with mmap, the file's span from first to last CPU tensor
    expert_layers: int  # layers with expert tensors
    experts_on_cpu: int  # of them, layers with an expert tensor in host memory


@lru_cache(maxsize=256, typed=True)
def _layout(wb: _Weights, n_layer: int, n_gpu_layers: int, overrides: tuple[Override, ...], devices: int,
            shares: tuple[float, ...], output_first: bool, tied: bool, mmap: bool) -> _Layout:
    """Each tensor's buffer: its layer's device (llama-model.cpp load_tensors: repeating layers i >= n_layer + 1 - ngl
    on the GPUs, split by -ts; the output layer on the last GPU once ngl >= 1, from b7467, #18148 — before, layers
    i >= n_layer - ngl and the output layer only when ngl > n_layer; the token embedding on the CPU), unless an
    override's pattern is found in its name first (llama-model-loader.cpp create_tensor). With mmap the CPU buffer is
    the file's range from the first CPU tensor to the end of the last (llama-model.cpp: get_mapping_range), in the
    order kvbudget writes a GGUF (the embedding, the layers in order, the output)."""
    from ...model.gguf_quant import EXPERT_NAMES
    from .placement import place

    ngl = n_layer + 1 if n_gpu_layers < 0 else n_gpu_layers
    device_of = [-1] * n_layer
    if devices:
        counts = _split_layers(n_layer, ngl, shares or (1.0,) * devices, output_first)
        il = max(n_layer + 1 - ngl, 0) if output_first else max(n_layer - ngl, 0)
        for d, count in enumerate(counts):
            for _ in range(count):
                if il < n_layer:
                    device_of[il] = d
                    il += 1
    out_dev = devices - 1 if devices and (ngl >= 1 if output_first else ngl > n_layer) else -1
    tensors = list(wb.tensors)
    if tied and out_dev >= 0:  # a tied output layer is the token embedding loaded again into the output layer's
        tensors.append(("token_embd.weight", wb.embd, n_layer))  # buffer (create_tensor ... TENSOR_DUPLICATED)
    where = place(tuple(name for name, _, _ in tensors), overrides)
    w_dev = [0] * max(devices, 1)
    cpu = offset = 0
    first, last = -1, 0
    experts: dict[int, bool] = {}
    for (name, nbytes, at), buf in zip(tensors, where, strict=True):
        home = -1 if at < 0 else out_dev if at >= n_layer else device_of[at]
        d = home if buf is None else -1 if buf == "CPU" else int(buf[4:])
        if d >= 0:
            w_dev[d] += nbytes
        else:
            cpu += nbytes
            if offset < wb_total(wb):  # the tied copy is not in the file
                first, last = (offset if first < 0 else first), offset + nbytes
        if 0 <= at < n_layer and any(x in name for x in EXPERT_NAMES):
            experts[at] = experts.get(at, False) or d < 0
        offset += nbytes
    span = (last - first if first >= 0 else 0) if mmap else cpu
    return _Layout(ngl, tuple(device_of), tuple(w_dev) if devices else (), sum(w_dev) if devices else 0, cpu, span,
                   len(experts), sum(experts.values()))


def wb_total(wb: _Weights) -> int:
    return wb.head + sum(wb.per_layer) + wb.tail


def _device_name(gpu: GPU) -> str:
    """The device as fit.cpp names it: the backend's name and the card's (``CUDA0 (NVIDIA GeForce RTX 4090)``)."""
    return f"CUDA0 ({next((a for a in gpu.aliases if a.startswith('NVIDIA ')), gpu.name)})"


def plan(spec: ModelSpec, gpu: GPU | None, s: LlamaCppSettings) -> LlamaCppPlan:
    """llama.cpp's context for ``spec`` with settings ``s``; with ``gpu``, where it all goes."""
    check_indexer_priced(spec, "llama.cpp")
    type_k, type_v = _cache_type(s.type_k), _cache_type(s.type_v)
    notes: list[str] = []
    if gpu is not None and gpu.unified_memory:  # what fits, and llama-server's auto-fit of n_ctx, is the system's free memory
        from ...hardware import unified_note

        notes.append(unified_note(gpu))
    flash = s.flash_attn
    if type_v not in ("f32", "f16", "bf16") and flash == "off":
        raise InputError("a quantized V cache (-ctv) needs flash attention (-fa on)")
    if flash == "auto" and type_v not in ("f32", "f16", "bf16"):
        notes.append("flash attention enabled: it is required for a quantized V cache")
    b = s.build
    parallel, unified = eras.server_slots(b, s.program, s.n_parallel, s.kv_unified)
    if parallel > MAX_SEQ:  # llama-context.cpp refuses it at start-up
        raise InputError(f"llama.cpp takes at most {MAX_SEQ} sequences (-np): n_seq_max must be <= {MAX_SEQ}, got {parallel}")
    train = spec.max_context
    if s.n_ctx < 0:
        raise InputError(f"-c must not be negative, got {s.n_ctx}")
    fit = eras.fit_default(b) if s.fit is None else s.fit
    n_ctx = s.n_ctx or train
    auto_ctx = s.n_ctx == 0 and fit
    n_stream = 1 if unified else parallel
    if auto_ctx:  # common/fit.cpp: n_ctx 0 becomes n_ctx_train x streams (one stream for a unified cache)
        n_ctx = train * n_stream
    padding = eras.ctx_padding(b, flash)
    n_layer = spec.num_layers
    hybrid = _has_state(spec)
    if s.devices < 1:
        raise InputError(f"devices must be at least 1, got {s.devices}")
    devices = (len(s.tensor_split) or s.devices) if gpu is not None else 1
    on_devices = devices if gpu is not None else 0
    from .placement import check_buffers

    check_buffers(s.overrides, on_devices, b)
    wb = _weights(spec)
    tied = not any(t.role == "lm_head" for t in spec.inventory.tail)

    def layout(n_gpu_layers: int, overrides: tuple[Override, ...]) -> _Layout:
        try:
            return _layout(wb, n_layer, n_gpu_layers, overrides, on_devices, tuple(s.tensor_split),
                           eras.output_first(b), tied, s.mmap)
        except ValueError as exc:
            raise InputError(f"-ts: {exc}") from None

    lay = layout(s.n_gpu_layers, s.overrides)
    if s.overrides:  # a rule no tensor matches: a typo llama.cpp does not point out
        from .placement import unused

        if idle := unused(tuple(name for name, _, _ in wb.tensors), s.overrides):
            notes.append(f"tensor override{'s' if len(idle) > 1 else ''} {', '.join(idle[:4])}"
                         f"{' ...' if len(idle) > 4 else ''} place{'' if len(idle) > 1 else 's'} no tensor of "
                         f"{spec.name} (no name matches, or an earlier rule took each one): llama.cpp loads as "
                         "without it; check the pattern against the model's tensor names (blk.N.ffn_up_exps.weight ...)")
    ngl, device_of = lay.ngl, lay.device_of
    overrides, moved_by_fit = s.overrides, False

    allocated: dict[tuple[str, int, int], int] = {}  # this plan's: layers of one shape allocate alike

    def tensor_gpu_bytes(type_name: str, width: int, cells: int) -> int:
        key = (type_name, width, cells)
        if key not in allocated:
            nbytes = row_bytes(type_name, width) * cells * n_stream
            ne0 = width * cells if eras.flat_tensors(b) else width
            extra = eras.cuda_pad_elems(ne0, type_name not in ("f32", "f16", "bf16"))
            allocated[key] = pad(nbytes + (row_bytes(type_name, extra) if extra else 0), CUDA_ALIGN)
        return allocated[key]

    def context(n: int, where: tuple[int, ...] | None = None) -> dict[str, int]:
        on = device_of if where is None else where
        total, n_seq = eras.stream_cells(b, n, parallel, unified, padding)
        batch = min(s.n_batch, n)  # llama_context: n_batch capped by the (unpadded) n_ctx
        ubatch = min(batch, s.n_ubatch)
        out = {"n_ctx": total, "n_ctx_seq": eras.ctx_seq(b, total, n_seq, parallel, unified), "cells": n_seq, "swa": 0}
        k = v = sk = sv = rec = gpu_kv = 0
        kv_dev = [0] * devices
        kv_layers = swa_layers = 0
        full_size = eras.hybrid_cells(b, total, n_seq, unified) if hybrid else n_seq
        swa_size: dict[int, int] = {}
        priced: dict[tuple[int, int, int], tuple[int, int]] = {}
        placed: dict[tuple[int, int, int], int] = {}
        for il, state, dk, dv, sliding, w in layers:
            on_gpu = gpu is not None and on[il] >= 0
            if state:
                rb = state * max(1, parallel)
                rec += rb
                if on_gpu:
                    gpu_kv += rb
                    kv_dev[on[il]] += rb
                continue
            if sliding:
                if w not in swa_size:
                    swa_size[w] = eras.swa_cells(b, n_seq, w, parallel, unified, batch, ubatch, padding, s.swa_full)
                size = out["swa"] = swa_size[w]
            else:
                size = out["cells"] = full_size
            key = (dk, dv, size)
            if key not in priced:  # layers of one shape take the same bytes
                priced[key] = row_bytes(type_k, dk) * size * n_stream, row_bytes(type_v, dv) * size * n_stream if dv else 0
            kb, vb = priced[key]
            if sliding:
                sk, sv, swa_layers = sk + kb, sv + vb, swa_layers + 1
            else:
                k, v, kv_layers = k + kb, v + vb, kv_layers + 1
            if on_gpu:
                if key not in placed:
                    placed[key] = tensor_gpu_bytes(type_k, dk, size) + (tensor_gpu_bytes(type_v, dv, size) if dv else 0)
                nb = placed[key]
                gpu_kv += nb
                kv_dev[on[il]] += nb
        out.update(k=k, v=v, sk=sk, sv=sv, rec=rec, gpu_kv=gpu_kv, kv_layers=kv_layers, swa_layers=swa_layers)
        for d, nb in enumerate(kv_dev):
            out[f"kv_dev{d}"] = nb
        return out

    fmt = checkpoint_format(spec, WEIGHTS_FIX)
    load_lines, out_file = wb.load_lines, wb.out_file
    if fmt.name == "gguf":
        from ...model import gguf_quant

        notes.append(f"weights as llama-quantize writes them (serve the result with llama-server -m {out_file}):")
        notes.append(f"llama-quantize {gguf_quant.file_name(spec.name, 'BF16')} {out_file} {fmt.ftype}")
    vocab, hidden = spec.dims.vocab_size, spec.dims.hidden_size
    output = eras.output_rows(b, parallel, s.n_batch) * vocab * 4  # llama_context output buffer: n_vocab floats per row
    compute = s.n_ubatch * (vocab + 4 * hidden) * 4 if gpu is not None else 0  # estimate: logits + activations

    layers = _cache_layers(spec, eras.mla_has_v(b), eras.mla_latent(b))  # what ``context`` walks
    if note := mla_note(spec, b):
        notes.append(note)
    c = context(n_ctx)
    fit_note = ""
    fit_lines: tuple[str, ...] = ()
    if gpu is not None and fit:
        from .fit import fit_context

        def measure(n: int) -> tuple[int, ...]:  # every device's model + context + compute buffers at context n
            cc = c if n == n_ctx else context(n)
            return tuple(lay.w_dev[d] + cc[f"kv_dev{d}"] + compute for d in range(devices))

        free = (_free_memory(gpu, s, devices, notes),) * devices
        fitted = fit_context(measure, free, s.fit_target_mib * MiB, n_ctx, auto_ctx, n_ctx, s.fit_ctx, n_stream,
                             lay.gpu_w, min(ngl, n_layer), spec.num_experts > 0, _placed_by_user(s, devices))
        fit_lines = tuple(f"common_params_fit_impl: {line}" for line in fitted.lines)
        fit_note = _fit_note(fitted, n_ctx)
        if fitted.n_ctx != n_ctx:
            c = context(fitted.n_ctx)
        if fitted.verdict == "moves weights" and devices == 1 and s.fit_weights:
            from .fit import fit_weights

            def mem(n_gpu_layers: int, overrides: tuple[Override, ...]) -> int:
                trial = layout(n_gpu_layers, overrides)
                return trial.w_dev[0] + context(fitted.n_ctx, trial.device_of)["kv_dev0"] + compute

            moved = fit_weights(mem, n_layer, spec.num_experts > 0, free[0], fitted.target, _device_name(gpu))
            lay = layout(moved.n_gpu_layers, moved.overrides)
            ngl, device_of = lay.ngl, lay.device_of
            overrides, moved_by_fit = moved.overrides, True
            c = context(fitted.n_ctx)
            fit_lines += tuple(f"common_params_fit_impl: {line}" for line in moved.lines)
            fit_lines += ("common_fit_params: successfully fit params to free device memory",)
            fit_note += f": -ngl {moved.n_gpu_layers}" + (f" with {len(moved.overrides)} -ot overrides to CPU"
                                                            if moved.overrides else "")
        elif fitted.verdict == "moves weights" and s.fit_weights:
            notes.append("llama.cpp's auto-fit would then move " + ("expert tensors of MoE layers" if spec.num_experts
                         else "layers") + f" to system memory over the {devices} GPUs (common/fit.cpp, step 3), which "
                         "kvbudget models on one GPU only: this plan keeps -ngl's layers on the GPUs; give -ngl and -ot "
                         "as llama.cpp prints them to plan them")
    kv_total = c["k"] + c["v"] + c["sk"] + c["sv"] + c["rec"]
    gpu_w, cpu_w, w_dev = lay.gpu_w, lay.cpu_w, lay.w_dev
    per_device = tuple(w_dev[d] + c[f"kv_dev{d}"] + compute for d in range(devices)) if gpu is not None else ()
    total_gpu = max(per_device) if per_device else 0
    fits = gpu is None or total_gpu <= gpu.memory_bytes
    lines = fit_lines + load_lines + _log_lines(c, type_k, type_v, parallel, n_stream, unified, gpu is not None, ngl,
                                                n_layer, lay, output, compute, s)
    if not fits and per_device:
        lines = _out_of_memory(lines, w_dev[0], c["kv_dev0"], compute, gpu.memory_bytes if gpu else 0)
    if c["n_ctx_seq"] < train and not auto_ctx:
        notes.append(f"{eras.ctx_seq_label(b)} ({c['n_ctx_seq']}) < n_ctx_train ({train}) -- the full capacity of the model "
                     "will not be utilized")
    return LlamaCppPlan(
        model=spec.name, gpu=gpu.name if gpu else "CPU", n_ctx=c["n_ctx"], n_ctx_seq=c["n_ctx_seq"], n_seq_max=parallel,
        n_stream=n_stream, unified=unified, cells=c["cells"], swa_cells=c["swa"], kv_layers=c["kv_layers"],
        swa_layers=c["swa_layers"], type_k=type_k, type_v=type_v, k_bytes=c["k"], v_bytes=c["v"], swa_k_bytes=c["sk"],
        swa_v_bytes=c["sv"], recurrent_bytes=c["rec"], recurrent_cells=max(1, parallel) if c["rec"] else 0,
        kv_bytes=kv_total, kv_gpu_bytes=c["gpu_kv"], weights_gpu_bytes=gpu_w, weights_cpu_bytes=cpu_w,
        output_bytes=output, compute_bytes=compute, offloaded=min(ngl, n_layer + 1), n_layer=n_layer,
        total_gpu_bytes=total_gpu, fits=fits, fit_note=fit_note, log_lines=lines, notes=tuple(notes),
        device_bytes=per_device, kv_device_bytes=tuple(c[f"kv_dev{d}"] for d in range(devices)) if gpu is not None else (),
        weights_format=fmt.describe(), served_file=out_file, overrides=overrides, fit_moved=moved_by_fit,
        expert_layers=lay.expert_layers, experts_on_cpu=lay.experts_on_cpu,
    )


def _free_memory(gpu: GPU, s: LlamaCppSettings, devices: int, notes: list[str]) -> int:
    """Each device's free memory as auto-fit measures it: the catalog total less a bare card's backend context
    (``fit.backend_context_bytes``), less what a site profile's term says is held there."""
    from .fit import backend_context_bytes

    context = backend_context_bytes(gpu.memory_bytes)
    held = 0
    if s.site:
        from ..site import held_by_site

        held = held_by_site(s.site, gpu, "current", devices, "llama.cpp", "off the free memory auto-fit sizes from",
                            notes, (context, "backend context"))
    return gpu.memory_bytes - context - held


def _placed_by_user(s: LlamaCppSettings, devices: int) -> str:
    from .fit import user_placement

    return user_placement(s.n_gpu_layers, s.ngl_given, s.tensor_split, devices, s.split_mode, bool(s.overrides))


def _fit_note(f: Fitted, asked: int) -> str:
    """What auto-fit did, in a line: its verdict against the free memory it measured."""
    free = f"{sum(f.free) // MiB} MiB free (bare card), {f.target // MiB} MiB target"
    said = {"fits": f"no change: the projection ({sum(f.projected) // MiB} MiB) leaves the target free ({free})",
            "context reduced": f"context size reduced from {asked} to {f.n_ctx} ({free})",
            "aborted": (f"context size reduced from {asked} to {f.n_ctx}, then " if f.n_ctx != asked else "")
            + f"fit aborted: {f.abort} ({free}); llama.cpp loads with these parameters",
            "moves weights": (f"context size reduced from {asked} to {f.n_ctx}, then " if f.n_ctx != asked else "")
            + f"weights moved to system memory ({free})"}
    return said[f.verdict]


def _log_lines(c: dict[str, int], tk: str, tv: str, parallel: int, n_stream: int, unified: bool, on_gpu: bool,
               ngl: int, n_layer: int, lay: _Layout, output: int, compute: int,
               s: LlamaCppSettings) -> tuple[str, ...]:
    """The lines llama.cpp prints (src/llama-model.cpp load_tensors, src/llama-kv-cache.cpp, llama-context.cpp
    formats), under the names and in the forms of ``s.build`` (``calibration.log_names``: an older build's as the
    corpus logs print them)."""
    b = s.build
    loader, ctx, kv = eras.log_names(b)
    lines = []
    if on_gpu:
        lines.append(f"{loader}: offloaded {min(ngl, n_layer + 1)}/{n_layer + 1} layers to GPU")
        lines += [f"{loader}: {f'CUDA{d}':>12} model buffer size = {nbytes / MiB:8.2f} MiB"
                  for d, nbytes in enumerate(lay.w_dev) if nbytes or d == 0]
    if lay.cpu_buffer or not on_gpu:
        lines.append(f"{loader}: {'CPU_Mapped' if s.mmap else 'CPU':>12} model buffer size = "
                     f"{lay.cpu_buffer / MiB:8.2f} MiB")
    if b >= 4801:  # the b4445 and older logs print no n_seq_max line
        lines.append(f"{ctx}: n_seq_max     = {parallel}")
    if b < 4445:  # the logs of 2024 (b3107, the PR #6122 and Ollama 0.1.3x ones) print no n_ctx_per_seq
        lines.append(f"{ctx}: n_ctx      = {c['n_ctx']}")
    else:
        lines.append(f"{ctx}: n_ctx         = {c['n_ctx']}")
        lines.append(f"{ctx}: {eras.ctx_seq_label(b):<13} = {c['n_ctx_seq']}")
    if b >= 5913:  # the option (and its line) came with b5913 (#14363)
        lines.append(f"{ctx}: kv_unified    = {'true' if unified else 'false'}")
    output_line = f"{ctx}: {'CUDA_Host' if on_gpu else 'CPU':>10}  output buffer size = {output / MiB:8.2f} MiB"
    if b >= 4905:  # from the llama_context refactor the output buffer is made before the cache
        lines.append(output_line)
    lines += _kv_lines(c, tk, tv, parallel, n_stream, unified, on_gpu, b, ctx, kv)
    if c["rec"]:
        lines.append(f"llama_memory_recurrent: size = {c['rec'] / MiB:7.2f} MiB ({max(1, parallel):6d} cells)")
    if b < 4905:
        lines.append(output_line)
    if on_gpu:
        lines.append(f"{'sched_reserve' if b >= 6325 else ctx}: {'CUDA0':>10} compute buffer size = "
                     f"{compute / MiB:8.2f} MiB (estimate)")
    return tuple(lines)


def _kv_lines(c: dict[str, int], tk: str, tv: str, parallel: int, n_stream: int, unified: bool, on_gpu: bool,
              b: int, ctx: str, kv: str) -> list[str]:
    """The KV cache's lines in build ``b``'s form: each GPU's "KV buffer size" (before b6325, where the corpus logs
    print them beside the size line), then "KV self size = ..." (1-D K and V, before b5429) or "size = ... cells"
    per cache, with the sliding-window cache's own from b5429."""
    lines = []
    devices = sum(1 for key in c if key.startswith("kv_dev"))
    buffers = [f"{kv}: {f'CUDA{d}':>10} KV buffer size = {c[f'kv_dev{d}'] / MiB:8.2f} MiB"
               for d in range(devices) if c[f"kv_dev{d}"]]
    if b < 6325 and on_gpu and not c["swa_layers"]:  # one cache: its buffers are the GPUs' KV
        lines += buffers
    if b < eras.KV_SIZE_LINE_FROM:  # one 1-D K and V per layer, every layer full size
        size, k, v = c["k"] + c["v"] + c["sk"] + c["sv"], c["k"] + c["sk"], c["v"] + c["sv"]
        lines.append(f"{ctx if b < 5331 else kv}: KV self size  = {size / MiB:7.2f} MiB, K ({tk}): {k / MiB:7.2f} MiB, "
                     f"V ({tv}): {v / MiB:7.2f} MiB")
        return lines
    a, n = (parallel if unified else 1), n_stream
    seqs = "" if b < eras.KV_SEQS_FROM else f", {a:2d}/{n:2d} seqs" if b <= eras.KV_SEQS_WIDE_UNTIL else f", {f'{a}/{n}':>4} seqs"
    if c["swa_layers"]:
        lines.append(f"{kv}_iswa: creating non-SWA KV cache, size = {c['cells']} cells")
    if c["kv_layers"]:
        size = c["k"] + c["v"]
        lines.append(f"{kv}: size = {size / MiB:7.2f} MiB ({c['cells']:6d} cells, {c['kv_layers']:3d} layers{seqs}), "
                     f"K ({tk}): {c['k'] / MiB:7.2f} MiB, V ({tv}): {c['v'] / MiB:7.2f} MiB")
    if c["swa_layers"]:
        lines.append(f"{kv}_iswa: creating     SWA KV cache, size = {c['swa']} cells")
        size = c["sk"] + c["sv"]
        lines.append(f"{kv}: size = {size / MiB:7.2f} MiB ({c['swa']:6d} cells, {c['swa_layers']:3d} layers{seqs}), "
                     f"K ({tk}): {c['sk'] / MiB:7.2f} MiB, V ({tv}): {c['sv'] / MiB:7.2f} MiB")
    return lines


# --- the engine interface (engines/base.py) ---------------------------------------------------------------


def summary(p: LlamaCppPlan, context: int | None = None) -> EnginePlan:
    """The figures every engine has, from a llama.cpp plan. Requests at once: the slots (-np), as far as
    the cells hold ``context`` tokens each; over several GPUs, the fullest GPU's share."""
    from ..base import Part, engine_plan

    tokens = p.cells * p.n_stream
    length = context or p.n_ctx_seq
    per_slot = p.cells // length if p.unified else (p.n_seq_max if p.n_ctx_seq >= length else 0)
    weights, kv = p.weights_gpu_bytes, p.kv_gpu_bytes
    if len(p.device_bytes) > 1:  # layers split over GPUs: the fullest GPU's share
        k = max(range(len(p.device_bytes)), key=lambda d: p.device_bytes[d])
        kv = p.kv_device_bytes[k]
        weights = max(p.device_bytes[k] - kv - p.compute_bytes, 0)
    return engine_plan(
        "llama.cpp", weights, kv, tokens, float(min(p.n_seq_max, per_slot)), length, p.fits,
        "exactly n_ctx cells (-c); llama-server auto-fits n_ctx to free memory minus 1 GiB, 4 slots",
        "cells (n_ctx padded to 256)", None if p.fits else "out of memory", p.log_lines, cap=p.n_seq_max,
        blocks=tokens, block_tokens=1, parts=(Part("weights", weights, "modelled"), Part("KV cache", kv, "modelled"),
                                              Part("compute buffer", p.compute_bytes, "estimate")),
    )


def replica(spec: ModelSpec, gpu: GPU, tp: int, pp: int, weights: str, kv: str, concurrency: int, context: int,
            version: str, fraction: float | None = None) -> Replica:
    """llama.cpp (llama-server): no tensor parallelism — ``tp`` GPUs split the layers (``-ts``, even) —; N
    requests of ``context`` tokens need ``-np N`` unified slots over ``-c N x context`` cells, so a replica
    holds the largest N whose cache, weights and compute buffer fit every GPU."""
    del version
    if fraction is not None:
        raise InputError("llama.cpp has no memory fraction: it allocates what -c and the cache types ask for")
    if pp > 1:
        raise InputError("llama.cpp splits layers over the GPUs of one server (-ts), it has no pipeline stages")
    served = ""
    if weights != "auto":  # a llama-quantize type (Q4_K_M ...) of a model given by name: the file it makes
        from ...model import gguf_quant

        if not gguf_quant.is_preset(weights) or (spec.weight_format is not None and spec.weight_format.name == "stored"):
            raise InputError("llama.cpp runs a GGUF's own tensor types: give the .gguf file, or a llama-quantize type "
                             "(Q4_K_M, Q8_0 ...) of a model given by name")
        spec = replace(spec, weight_format=gguf_quant.weight_format(weights))
        served = gguf_quant.file_name(spec.name, weights)
    cache = {"auto": "f16", "fp8": "q8_0", "fp8_e4m3": "q8_0"}.get(kv, kv)

    def settings(n: int) -> LlamaCppSettings:
        return LlamaCppSettings(n_ctx=n * context, n_parallel=n, kv_unified=True, type_k=cache, type_v=cache,
                                flash_attn="on" if cache != "f16" else "auto", fit=False, devices=tp, model_file=served)

    def fits(n: int) -> bool:
        return plan(spec, gpu, settings(n)).fits

    # the largest N that fits (searched past the load, to show the headroom, up to llama.cpp's sequence limit):
    # the straight line through N = 1 and 2 (each slot adds its cells to every GPU) is mostly exact; where
    # padding or buffers bend it, bisect on the side it missed
    top = min(4 * concurrency, MAX_SEQ)
    one, two = (plan(spec, gpu, settings(n)) for n in (1, min(2, top)))
    slope = max((b - a for a, b in zip(one.device_bytes, two.device_bytes, strict=True)), default=0)
    lo = 0
    if one.fits:
        room = gpu.memory_bytes - max(one.device_bytes, default=0)
        guess = min(top, 1 + room // slope) if slope > 0 else top
        if not fits(guess):
            lo = largest(fits, guess - 1)
        elif guess == top or not fits(guess + 1):
            lo = guess
        else:
            lo = largest(fits, top)
    p = plan(spec, gpu, settings(max(lo, 1)))
    s = settings(max(min(lo, concurrency), 1))  # launched with the slots the load needs
    kv_dev = max(p.kv_device_bytes, default=0)
    reason = "" if lo else (f"weights and one {context:,}-token slot need {max(p.device_bytes, default=0) / GiB:.2f} GiB "
                            f"on a {gpu.name}")
    return Replica(lo, reason, lo > 0, max(p.device_bytes, default=0) - kv_dev - p.compute_bytes, kv_dev, p.n_ctx, lo, s)

