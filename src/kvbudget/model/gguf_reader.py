"""GGUF header -> metadata and tensor list, streaming the header only (never the tensor data).

The file layout (magic, version, counts, key/value pairs, tensor infos) and the type constants
come from the ``gguf`` package (llama.cpp's gguf-py): ``GGUFValueType``, ``GGMLQuantizationType``
and ``GGML_QUANT_SIZES`` (block size and bytes per block of every tensor type). ``GGUFReader``
itself memory-maps the whole file; this reader reads only the header bytes, so a 100 GB file
costs what a 1 GB one does, and a truncated or hostile file gives one clear error.
"""

from __future__ import annotations

import struct
from typing import BinaryIO

from .._record import record
from ..units import InputError

MAX_STRING = 1 << 24  # no key, value or tensor name is 16 MiB long
MAX_ITEMS = 1 << 24  # nor has 16 M array items, keys or tensors


class GGUFError(InputError):
    """A file that is not a GGUF file, or a truncated or hostile one."""


@record
class GGUFTensor:
    name: str
    shape: tuple[int, ...]  # ne0 (the row), ne1, ...
    type_name: str
    nbytes: int


@record
class GGUFHeader:
    version: int
    metadata: dict[str, object]
    tensors: tuple[GGUFTensor, ...]
    header_bytes: int  # how much of the file was read


class _Stream:
    def __init__(self, f: BinaryIO, where: str) -> None:
        self.f = f
        self.where = where
        self.pos = 0

    def read(self, n: int) -> bytes:
        data = self.f.read(n)
        if len(data) != n:
            raise GGUFError(f"{self.where}: truncated GGUF (ends inside the header at byte {self.pos + len(data):,})")
        self.pos += n
        return data

    def unpack(self, fmt: str) -> int | float | bool:
        size = struct.calcsize(fmt)
        value: int | float | bool = struct.unpack("<" + fmt, self.read(size))[0]
        return value

    def string(self) -> str:
        n = int(self.unpack("Q"))
        if n > MAX_STRING:
            raise GGUFError(f"{self.where}: string of {n:,} bytes at byte {self.pos:,}: not a sane GGUF header")
        return self.read(n).decode("utf-8", errors="replace")


def read_gguf_header(path: str, keep_arrays: int = 4096) -> GGUFHeader:
    """Metadata and tensor infos of the GGUF file at ``path``. Arrays longer than
    ``keep_arrays`` (token lists) are kept as their length only, under ``<key>.length``."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType

    scalar = {
        GGUFValueType.UINT8: "B", GGUFValueType.INT8: "b", GGUFValueType.UINT16: "H", GGUFValueType.INT16: "h",
        GGUFValueType.UINT32: "I", GGUFValueType.INT32: "i", GGUFValueType.FLOAT32: "f", GGUFValueType.BOOL: "?",
        GGUFValueType.UINT64: "Q", GGUFValueType.INT64: "q", GGUFValueType.FLOAT64: "d",
    }
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise GGUFError(f"{path}: cannot read it ({exc.__class__.__name__})") from None
    with f:
        s = _Stream(f, path)
        if s.read(4) != b"GGUF":
            raise GGUFError(f"{path}: not a GGUF file (no GGUF magic)")
        version = int(s.unpack("I"))
        if version not in (2, 3):
            raise GGUFError(f"{path}: GGUF version {version} is not supported (2 or 3)")
        n_tensors, n_kv = int(s.unpack("Q")), int(s.unpack("Q"))
        if n_tensors > MAX_ITEMS or n_kv > MAX_ITEMS:
            raise GGUFError(f"{path}: {n_tensors:,} tensors and {n_kv:,} keys: not a sane GGUF header")

        def value(kind: int) -> object:
            try:
                vtype = GGUFValueType(kind)
            except ValueError:
                raise GGUFError(f"{path}: unknown value type {kind} at byte {s.pos:,}") from None
            if vtype == GGUFValueType.STRING:
                return s.string()
            if vtype == GGUFValueType.ARRAY:
                item, n = int(s.unpack("I")), int(s.unpack("Q"))
                if n > MAX_ITEMS:
                    raise GGUFError(f"{path}: array of {n:,} items at byte {s.pos:,}: not a sane GGUF header")
                items = [value(item) for _ in range(n)]
                return items if n <= keep_arrays else _Long(n)
            return s.unpack(scalar[vtype])

        metadata: dict[str, object] = {}
        for _ in range(n_kv):
            key = s.string()
            v = value(int(s.unpack("I")))
            if isinstance(v, _Long):
                metadata[key + ".length"] = v.n
            else:
                metadata[key] = v
        tensors = []
        for _ in range(n_tensors):
            name = s.string()
            n_dims = int(s.unpack("I"))
            if n_dims > 8:
                raise GGUFError(f"{path}: tensor {name!r} has {n_dims} dimensions: not a sane GGUF header")
            shape = tuple(int(s.unpack("Q")) for _ in range(n_dims))
            kind = int(s.unpack("I"))
            s.unpack("Q")  # data offset: not needed
            try:
                qtype = GGMLQuantizationType(kind)
            except ValueError:
                raise GGUFError(f"{path}: tensor {name!r} has unknown type {kind}") from None
            block, type_size = GGML_QUANT_SIZES[qtype]
            n = 1
            for d in shape:
                n *= d
            if shape and shape[0] % block:
                raise GGUFError(f"{path}: tensor {name!r} row of {shape[0]} is not a whole number of {qtype.name} blocks")
            tensors.append(GGUFTensor(name, shape, qtype.name, n // block * type_size))
        return GGUFHeader(version, metadata, tuple(tensors), s.pos)


class _Long:
    def __init__(self, n: int) -> None:
        self.n = n
