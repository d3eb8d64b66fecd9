"""Safetensors headers -> the exact bytes of every weight, by dtype and by role; and a ModelSpec that uses them.

The format (huggingface/safetensors, ``safetensors/src/tensor.rs``): 8 bytes holding N, a little-endian
u64; N bytes of UTF-8 JSON, an object mapping each tensor name to ``{"dtype", "shape", "data_offsets":
[begin, end]}`` (offsets into the data that follows the header) plus an optional ``"__metadata__"``
object of strings; then the data, which the tensors cover back to back. The library refuses headers
over 100 MB (``MAX_HEADER_SIZE``) and checks that ``end - begin`` is the shape's element count times
the dtype's width (``Dtype::bitsize``). Only the header is read here, never the data, so a 100 GB
shard costs what a 1 MB one does.

A model folder is read as the engines load it: the shards that ``model.safetensors.index.json``
names in its ``weight_map``, else every ``*.safetensors`` file. Whatever the quantization — int32
words packing 4-bit AWQ/GPTQ codes, U8 bytes of two fp4 codes (NVFP4, MXFP4) with their scales,
fp8 with fp32 scales — the stored bytes are summed as they are; the formats only matter for naming
a tensor's role and for recovering its logical shape (the parameter count).

The Hub's safetensors-metadata API (``huggingface_hub.get_safetensors_metadata``) parses the same
headers over HTTP range requests; ``read_hub_safetensors`` turns its answer into the same summary.
"""

from __future__ import annotations

import os
import re
import struct

from .._record import record, replace
from ..inputs import MAX_CONFIG_BYTES, excerpt, load_json, open_regular, read_bytes
from ..units import InputError
from .params import ROLES, Tensor
from .params import inventory as make_inventory
from .weights import WeightFormat

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any, Final, NoReturn

    from huggingface_hub.utils._safetensors import SafetensorsRepoMetadata

    from .params import Split
    from .spec import ModelSpec

MAX_HEADER = 100_000_000  # safetensors' MAX_HEADER_SIZE: the library refuses longer headers
INDEX_FILE = "model.safetensors.index.json"

# Bits per element of every safetensors dtype (safetensors/src/tensor.rs: Dtype::bitsize).
DTYPE_BITS: dict[str, int] = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32,
    "I64": 64, "U64": 64, "F64": 64, "C64": 64,
    "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
}
_FLOAT_DTYPES = {"F16": "fp16", "BF16": "bf16", "F32": "fp32"}


class SafetensorsError(InputError):
    """A safetensors file or index that is truncated, malformed or hostile."""


# One tensor as a header lists it, as a plain tuple (a DeepSeek-V3 checkpoint lists 92k of them):
# (begin, end, name, dtype, shape) from a header, in data order; the summary keeps (name, dtype,
# shape, nbytes) and adds the file, the name with its layer
# number replaced by "#" (the key its role is cached by) and the layer number.
if TYPE_CHECKING:
    Listed = tuple[int, int, str, Any, Any]  # data offsets begin and end, name, dtype, shape (a list)
    Stored = tuple[str, str, tuple[int, ...], int, str, str, int | None]
NAME: Final = 0
DTYPE: Final = 1
SHAPE: Final = 2
NBYTES: Final = 3
FILE: Final = 4
KEY: Final = 5
LAYER: Final = 6


@record
class SafetensorsTensor:
    """One tensor as a header lists it (``SafetensorsSummary.tensor``)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    file: str  # the file's name (for a shard, relative to its folder)
    role: str  # ``tensor_role(name)``


@record
class SafetensorsSummary:
    """What a checkpoint's headers say: every tensor and its exact bytes, summed by dtype and by role.

    ``by_role`` puts quantization scales, zero points and indices in the role of the weight they
    belong to; ``quant_bytes`` is how many of the bytes are such tensors."""

    source: str
    files: tuple[str, ...]
    tensors: tuple[Stored, ...]  # in file order, then data order
    total_bytes: int
    by_dtype: tuple[tuple[str, int], ...]  # largest first
    by_role: tuple[tuple[str, int], ...]  # in kvbudget's role order, then "other"
    quant_bytes: int
    header_bytes: int  # bytes read from disk: 8 + N per file (0 for the Hub)

    @property
    def tensor_count(self) -> int:
        return len(self.tensors)

    def tensor(self, i: int) -> SafetensorsTensor:
        t = self.tensors[i]
        return SafetensorsTensor(t[NAME], t[DTYPE], t[SHAPE], t[NBYTES], t[FILE], _key_info(t[KEY], t[NAME])[0])

    def dtype_bytes(self) -> dict[str, int]:
        return dict(self.by_dtype)

    def role_bytes(self) -> dict[str, int]:
        return dict(self.by_role)


# --- reading headers -----------------------------------------------------------------------------


def _listed(entries: Iterable[tuple[str, object]], where: str, data_size: int | None) -> list[Listed]:
    """Validate a header's entries: dtype, shape and offsets of each, and that the tensors tile the
    data without gaps or overlaps (and, for a local file, end where the file ends). One tight loop:
    a shard of DeepSeek-V3 lists 600 tensors, the checkpoint 92k."""
    found: list[Listed] = []
    bits_of = DTYPE_BITS.get
    for name, entry in entries:
        if type(entry) is not dict:
            if name == "__metadata__":
                raise SafetensorsError(f"{where}: __metadata__ must be a JSON object")
            raise SafetensorsError(f"{where}: tensor {excerpt(name)} must be an object with dtype, shape and data_offsets")
        if name == "__metadata__":
            continue
        dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
        bits = bits_of(dtype) if type(dtype) is str else None
        n = bits
        if n is not None and type(shape) is list:
            for d in shape:
                if type(d) is not int or d < 0:
                    n = None
                    break
                n *= d
        if n is None or type(offsets) is not list or len(offsets) != 2:
            _bad_entry(name, entry, where)
        begin, end = offsets
        if type(begin) is not int or type(end) is not int or begin < 0 or end < begin or n & 7 or end - begin != n >> 3:
            _bad_entry(name, entry, where)
        found.append((begin, end, name, dtype, shape))
    found.sort()
    at = 0
    for begin, end, name, _, _ in found:
        if begin != at:
            what = "overlaps the tensor before it" if begin < at else f"leaves a gap of {begin - at:,} bytes before it"
            raise SafetensorsError(f"{where}: tensor {excerpt(name)} at data offset {begin:,} (data_offsets [{begin:,}, {end:,}]) {what}")
        at = end
    if data_size is not None and at != data_size:
        if at > data_size:
            raise SafetensorsError(f"{where}: truncated: its tensors end at data byte {at:,} but the file holds {data_size:,}")
        raise SafetensorsError(f"{where}: {data_size - at:,} bytes after the last tensor: not a well-formed safetensors file")
    return found


def _bad_entry(name: str, entry: dict[str, object], where: str) -> NoReturn:
    """Say what is wrong with one entry (the slow path of ``_listed``: only for a bad header)."""
    tensor = f"tensor {excerpt(name)}"
    for key in ("dtype", "shape", "data_offsets"):
        if key not in entry:
            raise SafetensorsError(f"{where}: {tensor} has no {key}")
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        raise SafetensorsError(f"{where}: {tensor} has unknown dtype {excerpt(dtype)} (safetensors dtypes: {', '.join(DTYPE_BITS)})")
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise SafetensorsError(f"{where}: {tensor} shape must be a list of whole numbers (0 or more), got {excerpt(shape)}")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(type(x) is int and x >= 0 for x in offsets):
        raise SafetensorsError(f"{where}: {tensor} data_offsets must be two whole numbers (0 or more), got {excerpt(offsets)}")
    begin, end = offsets
    if end < begin:
        raise SafetensorsError(f"{where}: {tensor} data_offsets [{begin:,}, {end:,}] end before they begin")
    elements = 1
    for d in shape:
        elements *= d
    bits = elements * DTYPE_BITS[dtype]
    if bits % 8:
        raise SafetensorsError(f"{where}: {tensor}: {excerpt(elements)} {dtype} elements are not a whole number of bytes")
    raise SafetensorsError(
        f"{where}: {tensor} data_offsets [{begin:,}, {end:,}] hold {end - begin:,} bytes, "
        f"but {dtype} of shape {excerpt(shape)} takes {excerpt(bits // 8)}"
    )


def parse_header(raw: bytes, where: str, data_size: int | None = None) -> list[Listed]:
    """The tensors of a header's JSON bytes (``data_size``: bytes of data after it, when known)."""
    try:
        doc = load_json(raw, f"{where}: the header")
    except InputError as exc:
        from .resolve import json_culprit

        raise SafetensorsError(f"{exc}{json_culprit(raw, str(exc))}: not a safetensors file") from None
    if not isinstance(doc, dict):
        raise SafetensorsError(f"{where}: the header must be a JSON object, got {type(doc).__name__}")
    return _listed(doc.items(), where, data_size)


def read_header(path: str) -> tuple[list[Listed], int]:
    """The tensors one ``.safetensors`` file lists, and how many bytes were read (8 + N): the
    header only, whatever the size of the file."""
    f, size = open_regular(path, "safetensors file", 1 << 62)  # a FIFO swapped in after the stat is refused too
    with f:
        head = f.read(8)
        if len(head) < 8:
            raise SafetensorsError(f"{path}: {len(head)} bytes long: too short for a safetensors file (it starts with an 8-byte header length)")
        (n,) = struct.unpack("<Q", head)
        if n > MAX_HEADER:
            raise SafetensorsError(f"{path}: header length {n:,} bytes is over safetensors' 100 MB limit: not a safetensors file")
        if 8 + n > size:
            raise SafetensorsError(f"{path}: header length {n:,} bytes runs past the end of the {size:,}-byte file: truncated, or not a safetensors file")
        raw = f.read(n)
    if len(raw) != n:  # pragma: no cover - the file shrank while being read
        raise SafetensorsError(f"{path}: truncated while reading its header")
    return parse_header(raw, path, size - 8 - n), 8 + n


def safetensors_files(folder: str) -> tuple[str, ...]:
    """The weight files of a model folder, as an engine picks them: the shards the index's
    ``weight_map`` names, else every ``*.safetensors`` file (``consolidated*`` ones, Mistral's own
    format, only when there is nothing else). Empty when the folder holds none of them."""
    index = os.path.join(folder, INDEX_FILE)
    if os.path.isfile(index):
        try:
            raw = read_bytes(index, "safetensors index", MAX_CONFIG_BYTES)
        except InputError as exc:
            raise SafetensorsError(str(exc)) from None
        try:
            doc = load_json(raw, index)
        except InputError as exc:
            from .resolve import json_culprit

            raise SafetensorsError(f"{exc}{json_culprit(raw, str(exc))}") from None
        weight_map = doc.get("weight_map") if isinstance(doc, dict) else None
        if not isinstance(weight_map, dict):
            raise SafetensorsError(f"{index}: has no weight_map object of tensor name -> shard file")
        odd = next((item for item in weight_map.items() if not isinstance(item[1], str)), None)
        if odd is not None:
            raise SafetensorsError(f"{index}: weight_map gives tensor {excerpt(odd[0])} the shard {excerpt(odd[1])}, "
                                   "not a file name")
        names = sorted(set(weight_map.values()))
        for name in names:
            if not name or os.path.basename(name) != name or name in (".", ".."):
                raise SafetensorsError(f"{index}: shard {excerpt(name)} is not a file name in the model folder")
        present = [name for name in names if os.path.isfile(os.path.join(folder, name))]
        if present and len(present) < len(names):
            have = set(present)
            missing = [name for name in names if name not in have]
            odd_file = next((name for name in missing if os.path.lexists(os.path.join(folder, name))), None)
            if odd_file is not None:  # a folder, FIFO or device: never opened
                raise SafetensorsError(f"{index}: shard {excerpt(odd_file)} is not a regular file (a folder, device, pipe or socket)")
            raise SafetensorsError(
                f"{index}: {len(missing)} of its {len(names)} shards are not in the folder (first: {excerpt(missing[0])}): "
                f"finish the download, or pass the config.json alone"
            )
        return tuple(os.path.join(folder, name) for name in present)
    try:
        entries = sorted(os.listdir(folder))
    except OSError:
        return ()
    files = [e for e in entries if e.endswith(".safetensors") and os.path.isfile(os.path.join(folder, e))]
    own = [e for e in files if not e.startswith("consolidated")]
    return tuple(os.path.join(folder, e) for e in (own or files))


def read_safetensors(path: str, files: tuple[str, ...] = ()) -> SafetensorsSummary:
    """Summarise a ``.safetensors`` file, or a model folder's shards (``files``, when they are
    known already: ``safetensors_files(path)``), from their headers."""
    if files:
        pass
    elif os.path.isdir(path):
        files = safetensors_files(path)
        if not files:
            raise SafetensorsError(f"{path}: no .safetensors files in this folder")
    else:
        files = (path,)
    listed: list[tuple[str, list[Listed]]] = []
    read = 0
    for file in files:
        found, n = read_header(file)
        listed.append((os.path.basename(file), found))
        read += n
    return summarize(path, listed, read)


def summarize(source: str, listed: list[tuple[str, list[Listed]]], header_bytes: int = 0) -> SafetensorsSummary:
    """Totals of the tensors of each file; a name listed twice (in two shards) is an error. Each
    tensor's role is looked up by its name with the layer number replaced (``_layer_key``), so a
    role is worked out once per distinct tensor of a layer, not once per layer."""
    seen: set[str] = set()
    dtypes: dict[str, int] = {}
    roles = dict.fromkeys((*ROLES, "other"), 0)
    quant = 0
    out: list[Stored] = []
    for file, found in listed:
        names = [t[2] for t in found]
        if not seen.isdisjoint(names):
            name = next(n for n in names if n in seen)
            first = next(f for f, ts in listed if any(t[2] == name for t in ts))
            raise SafetensorsError(f"{source}: tensor {excerpt(name)} is in both {first} and {file}")
        seen.update(names)
        for begin, end, name, dtype, shape in found:
            nbytes = end - begin
            key, layer = _layer_key(name)
            role, aux, _ = _key_info(key, name)
            dtypes[dtype] = dtypes.get(dtype, 0) + nbytes
            roles[role] += nbytes
            if aux:
                quant += nbytes
            out.append((name, dtype, tuple(shape), nbytes, file, key, layer))
    return SafetensorsSummary(
        source=source, files=tuple(f for f, _ in listed), tensors=tuple(out), total_bytes=sum(dtypes.values()),
        by_dtype=tuple(sorted(dtypes.items(), key=lambda kv: (-kv[1], kv[0]))),
        by_role=tuple((r, b) for r, b in roles.items() if b), quant_bytes=quant, header_bytes=header_bytes,
    )


# --- the Hub ----------------------------------------------------------------------------------------


def summary_from_hub(meta: SafetensorsRepoMetadata, source: str) -> SafetensorsSummary:
    """The summary of ``huggingface_hub``'s parsed headers (``get_safetensors_metadata``), checked as
    a local file's are (except where the data ends, which the Hub's answer does not say)."""
    listed: list[tuple[str, list[Listed]]] = []
    for file in sorted(meta.files_metadata):
        entries = [
            (name, {"dtype": info.dtype, "shape": list(info.shape), "data_offsets": list(info.data_offsets)})
            for name, info in meta.files_metadata[file].tensors.items()
        ]
        listed.append((file, _listed(entries, f"{source}: {file}", None)))
    return summarize(source, listed)


def read_hub_safetensors(repo_id: str, revision: str | None = None) -> SafetensorsSummary:
    """Summarise a Hub repo's safetensors from their headers alone (HTTP range requests, no weights
    downloaded). Honours ``HF_HUB_OFFLINE``."""
    local_hint = "download config.json and the *.safetensors files and pass the folder"
    from .resolve import hub_offline

    if hub_offline():
        raise SafetensorsError(f"{repo_id}: HF_HUB_OFFLINE is set, so its safetensors headers cannot be read from the Hub: {local_hint}")
    try:
        from huggingface_hub import get_safetensors_metadata
    except ImportError:  # pragma: no cover - it is a dependency
        raise SafetensorsError(f"{repo_id}: huggingface_hub is not installed: {local_hint}") from None
    try:
        meta = get_safetensors_metadata(repo_id, revision=revision)
    except Exception as exc:  # any hub failure (offline, gated, missing, not safetensors) becomes one clear line
        raise SafetensorsError(f"{repo_id}: its safetensors headers could not be read from the Hub ({exc.__class__.__name__}): {local_hint}") from None
    return summary_from_hub(meta, repo_id)


# --- roles ------------------------------------------------------------------------------------------

_VISION = ("vision", "visual", "image", "multi_modal_projector", "mm_projector")
_TOKEN_EMBED = {"embed_tokens", "wte", "word_embeddings", "tok_embeddings", "embed_in", "embedding", "embeddings"}
_POS_EMBED = {"wpe", "embed_positions", "position_embeddings"}
_EMBEDDING = _TOKEN_EMBED | _POS_EMBED
_COL = {
    "q_proj", "qkv_proj", "query_key_value", "c_attn", "W_pack", "Wqkv", "wqkv", "wq", "query", "q_b_proj", "kv_b_proj",
    "gate_proj", "up_proj", "gate_up_proj", "w1", "w3", "fc1", "c_fc", "dense_h_to_4h", "fc_in",
    "in_proj", "in_proj_qkvz", "in_proj_ba", "dt_proj",
}
_ROW = {"o_proj", "out_proj", "dense", "c_proj", "wo", "down_proj", "w2", "fc2", "dense_4h_to_h", "fc_out", "x_proj"}
_KV = {"k_proj", "v_proj", "wk", "wv", "key", "value"}
_REPLICATED_LINEAR = {"q_a_proj", "kv_a_proj_with_mqa"}  # MLA's down projections (vLLM ReplicatedLinear)
_LINEAR_ROLES = {"attention", "mlp", "experts", "shared_experts", "mamba", "vision"}
_LINEAR_PROJ = _COL | _ROW | _KV | _REPLICATED_LINEAR
_ATTENTION = {"self_attn", "attn", "attention", "self_attention", "linear_attn", "cross_attn"}
_MLP = {"mlp", "feed_forward", "ffn", "mlp_block"}
_MAMBA = {"mamba", "mixer", "ssm"}
_ATTENTION_PROJ = {"q_proj", "o_proj", "qkv_proj", "query_key_value", "c_attn"}
# Tensors that quantize a weight rather than hold it: AWQ/GPTQ (qzeros, scales, g_idx), fp8 and NVFP4
# (weight_scale, weight_scale_inv, weight_scale_2, input_scale), compressed-tensors (weight_zero_point,
# weight_global_scale, weight_shape), bitsandbytes (SCB, weight.absmax, weight.quant_map, ...), KV-cache
# scales; MXFP4's ``*_scales`` come through _split_name as "scales".
_AUX = {
    "qzeros", "scales", "g_idx", "weight_scale", "weight_scale_inv", "weight_scale_2", "input_scale",
    "output_scale", "weight_zero_point", "input_zero_point", "weight_global_scale", "input_global_scale", "weight_g_idx",
    "weight_shape", "k_scale", "v_scale", "q_scale", "prob_scale", "SCB", "weight_format",
}
# Buffers some checkpoints carry that engines skip when loading (vLLM llama.py: rotary_emb.inv_freq,
# cos_cached, sin_cached; gpt2.py: ".attn.bias" and ".attn.masked_bias", the causal masks).
_BUFFERS = ("rotary_emb.inv_freq", "rotary_emb.cos_cached", "rotary_emb.sin_cached", ".attn.bias", ".attn.masked_bias")
_LAYER = re.compile(r"(?:^|\.)(?:layers|layer|h|blocks|block)\.(\d+)(?:\.|$)")


def _split_name(name: str) -> tuple[str, str]:
    """(module, leaf): ``model.layers.0.self_attn.q_proj.qweight`` -> (``...q_proj``, ``qweight``);
    bitsandbytes' ``q_proj.weight.absmax`` -> (``...q_proj``, ``weight.absmax``); MXFP4's
    ``experts.gate_up_proj_blocks`` -> (``experts.gate_up_proj``, ``blocks``)."""
    if ".weight." in name:
        module, _, rest = name.partition(".weight.")
        return module, "weight." + rest
    module, _, leaf = name.rpartition(".")
    for suffix in ("_blocks", "_scales", "_bias"):
        if leaf.endswith(suffix) and len(leaf) > len(suffix):
            return f"{module}.{leaf[: -len(suffix)]}" if module else leaf[: -len(suffix)], suffix[1:]
    return module, leaf


def _is_aux(leaf: str) -> bool:
    return leaf in _AUX or leaf.startswith("weight.")


def tensor_role(name: str) -> str:
    """The role of a tensor, by its name: one of ``params.ROLES`` or ``other``."""
    low = name.lower()
    if any(word in low for word in _VISION):
        return "vision"
    parts = low.split(".")
    names = set(parts)
    module = _split_name(name)[0].split(".")
    if not _EMBEDDING.isdisjoint(module):
        return "embeddings"
    if "lm_head" in names or "embed_out" in names or (parts[0] == "output" and len(parts) <= 3):
        return "lm_head"
    if "norm" in low or ("ln" in low and any(p.startswith("ln_") or p == "ln" for p in parts)):
        return "norms"
    if "shared_expert" in low:
        return "shared_experts"
    if "router" in names or "gate" in names:
        return "router"
    if "experts" in names:
        return "experts"
    if not _MAMBA.isdisjoint(names):
        return "mamba"
    proj = module[-1]
    if not _ATTENTION.isdisjoint(names) or proj in _KV or proj in _ATTENTION_PROJ:
        return "attention"
    if not _MLP.isdisjoint(names) or proj in _COL or proj in _ROW:
        return "mlp"
    return "other"


def layer_index(name: str) -> int | None:
    """The decoder layer a tensor belongs to (``model.layers.12.``, ``transformer.h.3.`` ...)."""
    return _layer_key(name)[1]


_LAYER_WORDS = frozenset({"layers", "layer", "h", "blocks", "block"})


def _layer_key(name: str) -> tuple[str, int | None]:
    """(the name with its layer number replaced by ``#``, the layer number): what ``_LAYER`` finds,
    by a split for the common ``model.layers.12.rest`` and by the expression otherwise. A number of
    more than 9 digits is no layer number."""
    parts = name.split(".", 3)
    if len(parts) >= 3 and parts[1] in _LAYER_WORDS and parts[2].isdecimal():
        if len(parts[2]) > 9:
            return name, None
        return f"{parts[0]}.{parts[1]}.#{'.' + parts[3] if len(parts) == 4 else ''}", int(parts[2])
    m = _LAYER.search(name)
    if m is None or len(m.group(1)) > 9:
        return name, None
    return f"{name[:m.start(1)]}#{name[m.end(1):]}", int(m.group(1))


_KEY_INFO: dict[str, tuple[str, bool, bool]] = {}


def _key_info(key: str, name: str) -> tuple[str, bool, bool]:
    """(role, whether it quantizes a weight, whether engines skip it as a buffer) of a tensor, worked
    out from its ``name`` once per ``key`` (the name less its layer number, which none of them reads)."""
    info = _KEY_INFO.get(key)
    if info is None:
        if len(_KEY_INFO) > 1 << 16:
            _KEY_INFO.clear()
        info = _KEY_INFO[key] = (tensor_role(name), _is_aux(_split_name(name)[1]), any(b in name for b in _BUFFERS))
    return info


# --- tensors for the inventory ------------------------------------------------------------------------


def _split(role: str, proj: str, leaf: str, kv_heads: int) -> Split:
    if leaf == "sinks":  # one attention sink per head, split with the heads
        return "col"
    if role == "embeddings":
        return "vocab" if proj in _TOKEN_EMBED else "none"
    if role == "lm_head":
        return "vocab"
    if role in ("norms", "router", "other"):
        return "none"
    if proj in _KV:
        return "kv" if kv_heads else "col"
    if proj in _ROW:
        return "row"
    if proj in _COL or role == "mamba":
        return "col"
    return "none"


def _logical(leaf: str, t: SafetensorsTensor, aux: dict[str, SafetensorsTensor], bits: int) -> list[int]:
    """The shape of the values a stored tensor holds: int32 words of 32/bits codes (AWQ, GPTQ,
    compressed-tensors pack-quantized), U8 bytes of two fp4 codes (NVFP4, MXFP4, bitsandbytes nf4)."""
    shape = list(t.shape) or [1]
    if t.dtype == "I32" and leaf == "qweight" and len(shape) == 2:
        scales, zeros = aux.get("scales"), aux.get("qzeros")
        out = scales.shape[-1] if scales is not None and scales.shape else 0
        pack = 32 // bits
        if out and zeros is not None and zeros.shape and zeros.shape[-1] and out % zeros.shape[-1] == 0:
            pack = out // zeros.shape[-1]  # qzeros pack the zero points of every output as qweight packs codes
        total = shape[0] * shape[1] * pack
        return [out, total // out] if out and total % out == 0 else [shape[0], shape[1] * pack]
    pack = 1
    if t.dtype == "I32" and leaf in ("weight_packed", "weight"):
        pack = 32 // bits
    elif t.dtype == "U8" and (
        leaf in ("blocks", "weight_packed")
        or any(a.startswith(("weight_scale", "weight_global_scale", "weight.quant_state.bitsandbytes__")) for a in aux)
    ):
        pack = 2
    shape[-1] *= pack
    return shape


def _block(tensors: list[SafetensorsTensor], bits: int, kv_heads: int) -> tuple[Tensor, ...]:
    """Inventory tensors of one block: each weight with its scales and zero points folded into its
    stored bytes, its logical shape, how TP splits it; identical tensors merged into a count."""
    modules: dict[str, list[tuple[str, SafetensorsTensor]]] = {}
    for t in tensors:
        module, leaf = _split_name(t.name)
        modules.setdefault(module, []).append((leaf, t))
    out: list[Tensor] = []
    for module, members in modules.items():
        proj = module.rsplit(".", 1)[-1]
        aux = {leaf: t for leaf, t in members if _is_aux(leaf)}
        mains = [t for leaf, t in members if not _is_aux(leaf) and leaf != "bias"]
        host = max(mains, key=lambda t: t.nbytes) if mains else None
        for leaf, t in members:
            if _is_aux(leaf) and host is not None:
                continue  # folded into the weight it scales
            role = t.role
            split = _split(role, proj, leaf, kv_heads)
            if leaf == "bias" or _is_aux(leaf):  # a bias, or a scale with no weight beside it
                elements = max(t.nbytes * 8 // DTYPE_BITS[t.dtype], 1)
                vector: Split = split if leaf == "bias" and split in ("col", "kv") else "none"
                out.append(Tensor(role, elements, split=vector, heads=kv_heads if vector == "kv" else 0, stored=t.nbytes))
                continue
            stored = t.nbytes + (sum(a.nbytes for a in aux.values()) if t is host else 0)
            shape = _logical(leaf, t, aux if t is host else {}, bits)
            count = 1
            if role == "experts" and len(shape) >= 3:  # fused experts: [experts, rows, ...]
                count, shape = shape[0], shape[1:]
                if proj == "gate_up_proj" and shape[0] % 2 == 0:  # gate and up apart, as vLLM pads them
                    count, shape = 2 * count, [shape[0] // 2, *shape[1:]]
            rows, cols = shape[0], 1
            for d in shape[1:]:
                cols *= d
            if count > 1 and stored % count:
                rows, count = rows * count, 1
            linear = len(shape) >= 2 and role in _LINEAR_ROLES and proj in _LINEAR_PROJ
            out.append(Tensor(role, rows, cols, count=count, split=split, heads=kv_heads if split == "kv" else 0,
                              linear=linear, stored=stored // count))
    merged: dict[tuple[str, int, int, Split, int, bool, int], int] = {}
    for x in out:
        key = (x.role, x.rows, x.cols, x.split, x.heads, x.linear, x.stored)
        merged[key] = merged.get(key, 0) + x.count
    return tuple(Tensor(role, rows, cols, n, split, heads, linear, stored)
                 for (role, rows, cols, split, heads, linear, stored), n in merged.items())


# --- the spec ----------------------------------------------------------------------------------------


def is_quantized(summary: SafetensorsSummary) -> bool:
    """Whether the checkpoint stores packed, 8-bit or scaled weights (not plain 16/32-bit floats)."""
    return summary.quant_bytes > 0 or any(t[DTYPE] in ("I32", "U8", "I8", "F8_E4M3", "F8_E5M2", "F4") and len(t[SHAPE]) >= 2
                                          for t in summary.tensors)


def _records(tensors: list[Stored], by_key: bool = False) -> list[SafetensorsTensor]:
    """Records of stored tensors for ``_block``; ``by_key``: named by their key (one layer's tensors)."""
    return [SafetensorsTensor(t[KEY] if by_key else t[NAME], t[DTYPE], t[SHAPE], t[NBYTES], t[FILE], _key_info(t[KEY], t[NAME])[0])
            for t in tensors]


def with_safetensors(spec: ModelSpec, summary: SafetensorsSummary) -> ModelSpec:
    """``spec`` (from the config) with its weights replaced by the tensors the headers list: exact
    bytes per tensor and per layer, so that pipeline stages and tensor-parallel shares use them.
    Layers past the config's count (multi-token-prediction heads, which engines skip unless asked
    for speculative decoding) are left out, with a note."""
    n = spec.num_layers
    head: list[Stored] = []
    tail: list[Stored] = []
    blocks: list[list[Stored]] = [[] for _ in range(n)]
    extra: list[Stored] = []
    skipped: list[Stored] = []
    tied = not any(x.role == "lm_head" for x in spec.inventory.tail)  # tie_word_embeddings: one copy is loaded
    for t in summary.tensors:
        if not t[NBYTES]:
            continue
        role, _, buffer = _key_info(t[KEY], t[NAME])
        if buffer or (tied and role == "lm_head"):
            skipped.append(t)
            continue
        il = t[LAYER]
        if role == "vision" and il is not None:
            il, t = None, (*t[:KEY], t[NAME], None)
        if il is None:
            (head if role in ("embeddings", "vision") else tail).append(t)
        elif il < n:
            blocks[il].append(t)
        else:
            extra.append(t)
    notes = list(spec.notes)
    empty = [i for i, b in enumerate(blocks) if not b and spec.inventory.layers[i]]
    if len(empty) == n:
        notes.append(f"weights from config.json: the tensor names in {summary.source} carry no layer numbers kvbudget reads")
        return replace(spec, notes=tuple(notes))
    if empty:
        raise SafetensorsError(
            f"{summary.source}: config.json has {n} layers but the safetensors files hold no weights for layer {empty[0]}"
            f"{f' (and {len(empty) - 1} more)' if len(empty) > 1 else ''}: the config and the weights do not belong together"
        )
    fmt = spec.weight_format
    bits = fmt.bits if fmt is not None and fmt.bits < 16 and 32 % fmt.bits == 0 else 4
    head_records = _records(head)
    head_records.sort(key=lambda t: t.role != "embeddings" or _split_name(t.name)[0].rsplit(".", 1)[-1] not in _TOKEN_EMBED)

    def kv_heads(i: int) -> int:
        return next((x.heads for x in spec.inventory.layers[i] if x.split == "kv"), 0)

    # Layers whose tensors are the same but for the layer number (the 58 MoE layers of DeepSeek-V3) give
    # the same block: work it out once.
    done: dict[tuple[object, ...], tuple[Tensor, ...]] = {}
    layer_blocks = []
    for i, b in enumerate(blocks):
        heads = kv_heads(i)
        sig = (heads, *((t[KEY], t[DTYPE], t[SHAPE], t[NBYTES]) for t in b))
        found = done.get(sig)
        if found is None:
            found = done[sig] = _block(_records(b, by_key=True), bits, heads)
        layer_blocks.append(found)
    inventory = make_inventory(_block(head_records, bits, 0), layer_blocks, _block(_records(tail), bits, 0))
    if extra:
        layers = sorted({t[LAYER] or 0 for t in extra})
        which = ", ".join(map(str, layers)) if len(layers) <= 4 else f"{layers[0]}-{layers[-1]}"
        notes.append(f"safetensors layer{'s' if len(layers) > 1 else ''} {which} past num_hidden_layers "
                     f"({sum(t[NBYTES] for t in extra):,} bytes, multi-token prediction) left out: engines load them only for speculative decoding")
    if skipped:
        notes.append(f"{len(skipped)} safetensors tensor{'s' if len(skipped) > 1 else ''} ({sum(t[NBYTES] for t in skipped):,} bytes: "
                     f"{excerpt(skipped[0][NAME])[1:-1]}{', ...' if len(skipped) > 1 else ''}) left out: engines do not load them "
                     f"(buffers, or an lm_head tied to the embeddings)")
    config_params = spec.params
    new_params = inventory.total
    if config_params and abs(new_params - config_params) > 0.02 * config_params:
        notes.append(f"the safetensors headers hold {new_params:,} parameters where config.json gives {config_params:,}")
    top = summary.by_dtype[0][0] if summary.by_dtype else "?"
    where = f"safetensors headers of {summary.source} ({len(summary.files)} file{'s' if len(summary.files) != 1 else ''}, {summary.tensor_count:,} tensors)"
    if fmt is not None and fmt.quantized:
        new_fmt: WeightFormat | None = replace(fmt, exact=True, label=f"{fmt.describe()}, exact from safetensors headers")
    elif fmt is None and is_quantized(summary):
        new_fmt = None  # a quantization kvbudget cannot name: the engines ask for it, as without the files
    else:
        dense = fmt.dense_dtype if fmt is not None else _FLOAT_DTYPES.get(top, spec.native_dtype)
        new_fmt = WeightFormat("stored", dense_dtype=dense, label=f"safetensors {top} (exact from headers)")
    return replace(spec, inventory=inventory, weight_format=new_fmt, sources=(*spec.sources, ("weights", where)), notes=tuple(notes))


def with_folder_weights(spec: ModelSpec, folder: str) -> ModelSpec:
    """``spec`` with exact weights from the folder's safetensors headers; unchanged when it has none."""
    files = safetensors_files(folder)
    if not files:
        return spec
    return with_safetensors(spec, read_safetensors(folder, files))


def with_hub_weights(spec: ModelSpec, repo_id: str, revision: str | None = None) -> ModelSpec:
    """``spec`` with exact weights from a Hub repo's safetensors headers (network: only when asked)."""
    return with_safetensors(spec, read_hub_safetensors(repo_id, revision))
