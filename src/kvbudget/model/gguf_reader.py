"""GGUF header -> metadata and tensor list, streaming the header only (never the tensor data).

The layout is llama.cpp's (``ggml/src/gguf.cpp``, ``gguf_init_from_file_impl``; the same in
gguf-py's ``gguf_reader.py``): the magic ``GGUF``, a u32 version, u64 tensor and key counts, the
key/value pairs, the tensor infos (name, u32 n_dims, i64 ne[n_dims], u32 type, u64 offset), then
the data section, aligned to ``general.alignment`` (default 32). The checks are llama.cpp's:
no nested arrays, no duplicate keys or tensor names, names of at most 63 bytes, at most 4
dimensions each >= 0, a known tensor type whose block divides the row, each tensor's data where
the previous one's (padded) ends, and all of it inside the file.

Long arrays (the tokenizer's 128k tokens, scores and types, its merges) are skipped, not decoded:
fixed-size items by their count times their size, strings by walking their lengths in the bytes
read in bulk. Neither ``gguf`` nor numpy is imported here: the few constants are copied below.
"""

from __future__ import annotations

import struct

from .._record import record
from ..inputs import excerpt, open_regular
from ..units import InputError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import BinaryIO

MAX_STRING = 1 << 24  # no key, value or tensor name is 16 MiB long
MAX_NAME = 63  # llama.cpp's GGML_MAX_NAME (64) less its terminating zero
MAX_DIMS = 4  # GGML_MAX_DIMS
CHUNK = 1 << 20
_ANY_SIZE = 1 << 62  # check_file's cap: a GGUF is read by its header, whatever its size

# GGUF value types (ggml/src/gguf.cpp ``gguf_type``; gguf-py constants.py ``GGUFValueType``, gguf 0.19.0):
# id -> struct format of one item ("" for a string, None for an array).
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)
VALUE_FORMATS: dict[int, str | None] = {
    UINT8: "B", INT8: "b", UINT16: "H", INT16: "h", UINT32: "I", INT32: "i", FLOAT32: "f", BOOL: "?",
    STRING: "", ARRAY: None, UINT64: "Q", INT64: "q", FLOAT64: "d",
}
_SIZES = {k: struct.calcsize("<" + v) for k, v in VALUE_FORMATS.items() if v}

# ggml tensor types: id -> (name, values per block, bytes per block). From ggml's type_traits
# (ggml/src/ggml.c: blck_size, type_size) as gguf-py copies them (constants.py GGML_QUANT_SIZES,
# gguf 0.19.0); tests/test_gguf_reader.py checks this table against the installed gguf package.
_QK_K = 256
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 40),
    10: ("Q2_K", _QK_K, 2 + 2 + _QK_K // 16 + _QK_K // 4), 11: ("Q3_K", _QK_K, 2 + _QK_K // 4 + _QK_K // 8 + 12),
    12: ("Q4_K", _QK_K, 2 + 2 + _QK_K // 2 + 12), 13: ("Q5_K", _QK_K, 2 + 2 + _QK_K // 2 + _QK_K // 8 + 12),
    14: ("Q6_K", _QK_K, 2 + _QK_K // 2 + _QK_K // 4 + _QK_K // 16), 15: ("Q8_K", _QK_K, 4 + _QK_K + _QK_K // 8),
    16: ("IQ2_XXS", _QK_K, 2 + _QK_K // 4), 17: ("IQ2_XS", _QK_K, 2 + _QK_K // 4 + _QK_K // 32),
    18: ("IQ3_XXS", _QK_K, 2 + _QK_K // 4 + _QK_K // 8), 19: ("IQ1_S", _QK_K, 2 + _QK_K // 8 + _QK_K // 16),
    20: ("IQ4_NL", 32, 18), 21: ("IQ3_S", _QK_K, 2 + _QK_K // 4 + _QK_K // 8 + _QK_K // 32 + 4),
    22: ("IQ2_S", _QK_K, 2 + _QK_K // 4 + _QK_K // 16), 23: ("IQ4_XS", _QK_K, 2 + 2 + _QK_K // 2 + _QK_K // 64),
    24: ("I8", 1, 1), 25: ("I16", 1, 2), 26: ("I32", 1, 4), 27: ("I64", 1, 8), 28: ("F64", 1, 8),
    29: ("IQ1_M", _QK_K, _QK_K // 8 + _QK_K // 16 + _QK_K // 32), 30: ("BF16", 1, 2),
    34: ("TQ1_0", _QK_K, 2 + 4 * 13), 35: ("TQ2_0", _QK_K, 2 + 64), 39: ("MXFP4", 32, 17), 40: ("NVFP4", 64, 36),
    41: ("Q1_0", 128, 18),
}

_U32 = struct.Struct("<I").unpack_from
_U64 = struct.Struct("<Q").unpack_from


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
    """The file's bytes from ``base``: ``buf[pos:]`` is what is read and not yet consumed."""

    def __init__(self, f: BinaryIO, where: str, size: int) -> None:
        self.f = f
        self.where = where
        self.size = size
        self.buf = b""
        self.base = 0  # file offset of buf[0]
        self.pos = 0

    @property
    def at(self) -> int:
        return self.base + self.pos

    def fail(self, what: str) -> GGUFError:
        return GGUFError(f"{self.where}: truncated or damaged GGUF: {what} at byte {self.at:,} (download or convert it again)")

    def need(self, n: int) -> None:
        """Make ``buf[pos:pos + n]`` hold the next n bytes of the file."""
        if self.pos + n <= len(self.buf):
            return
        if self.at + n > self.size:
            raise GGUFError(f"{self.where}: truncated GGUF: its header runs past the end of the {self.size:,}-byte file (download it again)")
        start = self.at
        self.f.seek(start)
        data = self.f.read(max(n, CHUNK))
        if len(data) < n:  # pragma: no cover - the file shrank while being read
            raise GGUFError(f"{self.where}: truncated GGUF (the file shrank while being read)")
        self.buf, self.base, self.pos = data, start, 0

    def skip(self, n: int) -> None:
        if self.at + n > self.size:
            raise GGUFError(f"{self.where}: truncated GGUF: its header runs past the end of the {self.size:,}-byte file (download it again)")
        self.pos += n

    def u32(self) -> int:
        self.need(4)
        (v,) = _U32(self.buf, self.pos)
        self.pos += 4
        return int(v)

    def u64(self) -> int:
        self.need(8)
        (v,) = _U64(self.buf, self.pos)
        self.pos += 8
        return int(v)

    def raw_string(self, limit: int = MAX_STRING, what: str = "a string") -> bytes:
        n = self.u64()
        if n > limit:
            raise self.fail(f"{what} of {n:,} bytes (at most {limit:,})")
        self.need(n)
        data = self.buf[self.pos:self.pos + n]
        self.pos += n
        return data

    def text(self, what: str, limit: int = MAX_STRING) -> str:
        raw = self.raw_string(limit, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{what} {excerpt(raw)} is not UTF-8") from None

    def items(self, fmt: str, n: int) -> list[object]:
        size = struct.calcsize("<" + fmt) * n
        self.need(size)
        out = list(struct.unpack_from(f"<{n}{fmt}", self.buf, self.pos))
        self.pos += size
        return out

    def skip_strings(self, n: int) -> None:
        """Step over n length-prefixed strings without decoding them: one unpack per string."""
        unpack = _U64
        while n:
            self.need(8)
            buf, p, done = self.buf, self.pos, 0
            try:
                for done in range(n):  # noqa: B007 - done is read after the loop
                    p += 8 + unpack(buf, p)[0]
                done = n
            except struct.error:  # the next length lies past what is read: read on from p
                pass
            n -= done
            self.pos = p
            if self.at > self.size:
                raise GGUFError(f"{self.where}: truncated GGUF: a string runs past the end of the {self.size:,}-byte file (download it again)")
            if p > len(buf):  # the last string ends past the buffer: continue from its end
                self.buf, self.base, self.pos = b"", self.at, 0


def read_gguf_header(path: str, keep_arrays: int = 4096) -> GGUFHeader:
    """Metadata and tensor infos of the GGUF file at ``path``. Arrays longer than
    ``keep_arrays`` (token lists) are skipped and kept as their length only, under ``<key>.length``."""
    f, size = open_regular(path, "GGUF file", _ANY_SIZE)  # a FIFO swapped in after the stat is refused too
    with f:
        s = _Stream(f, path, size)
        if size < 4:
            raise GGUFError(f"{path}: not a GGUF file ({size} bytes long)")
        s.need(4)
        if s.buf[:4] != b"GGUF":
            raise GGUFError(f"{path}: not a GGUF file (no GGUF magic)")
        s.pos = 4
        version = s.u32()
        if version not in (2, 3):
            raise GGUFError(f"{path}: GGUF version {version:,} is not supported (llama.cpp reads 2 and 3)")
        n_tensors, n_kv = s.u64(), s.u64()
        # the smallest tensor info takes 24 bytes (name length, n_dims, type, offset), the smallest key 13
        if n_tensors * 24 + n_kv * 13 > size - s.at:
            raise GGUFError(f"{path}: truncated or damaged GGUF: {n_tensors:,} tensors and {n_kv:,} keys cannot fit in "
                            f"a {size:,}-byte file (download or convert it again)")
        metadata: dict[str, object] = {}
        for _ in range(n_kv):
            key = s.text("a key")
            if key in metadata or key + ".length" in metadata:
                raise s.fail(f"duplicate key {excerpt(key)}")
            kind = s.u32()
            value = _value(s, kind, key, keep_arrays)
            if isinstance(value, _Long):
                metadata[key + ".length"] = value.n
            else:
                metadata[key] = value
        alignment = metadata.get("general.alignment", 32)
        if not isinstance(alignment, int) or isinstance(alignment, bool) or alignment <= 0 or alignment & (alignment - 1):
            raise GGUFError(f"{path}: damaged GGUF: general.alignment = {excerpt(alignment)} is not a power of 2 (convert it again)")
        infos = []
        names: set[str] = set()
        for _ in range(n_tensors):
            name = s.text("a tensor name", MAX_NAME)
            if name in names:
                raise s.fail(f"duplicate tensor name {name!r}")
            names.add(name)
            n_dims = s.u32()
            if n_dims > MAX_DIMS:
                raise s.fail(f"tensor {name!r} has {n_dims:,} dimensions (ggml has at most {MAX_DIMS})")
            shape = tuple(s.u64() for _ in range(n_dims))
            if any(d >= 1 << 63 for d in shape):  # an int64 below zero
                raise s.fail(f"tensor {name!r} has a negative dimension")
            kind = s.u32()
            offset = s.u64()
            if kind not in GGML_TYPES:
                raise s.fail(f"tensor {name!r} has unknown ggml type {kind}")
            infos.append((name, shape, kind, offset))
        header = s.at
        data_start = -(-header // alignment) * alignment
        tensors = []
        expected = 0
        for name, shape, kind, offset in infos:
            type_name, block, type_size = GGML_TYPES[kind]
            n = 1
            for d in shape:
                n *= d
            if shape and shape[0] % block:
                raise GGUFError(f"{path}: damaged GGUF: tensor {name!r} row of {shape[0]:,} is not a whole number of "
                               f"{type_name} blocks of {block} (convert it again)")
            nbytes = n // block * type_size
            if offset != expected:
                raise GGUFError(f"{path}: tensor {name!r} data at offset {offset:,}, where the tensors before it end at "
                                f"{expected:,}: damaged GGUF (convert it again)")
            expected += -(-nbytes // alignment) * alignment
            if data_start + offset + nbytes > size:
                raise GGUFError(f"{path}: tensor {name!r} ({excerpt(list(shape))}, {type_name}) ends at byte "
                                f"{data_start + offset + nbytes:,}, past the end of the {size:,}-byte file: truncated GGUF (download it again)")
            tensors.append(GGUFTensor(name, shape, type_name, nbytes))
        return GGUFHeader(version, metadata, tuple(tensors), header)


def _value(s: _Stream, kind: int, key: str, keep_arrays: int) -> object:
    fmt = VALUE_FORMATS.get(kind, "-")
    if fmt == "-":
        raise s.fail(f"key {excerpt(key)} has unknown value type {kind}")
    if fmt is None:  # an array: item type, count, items
        item, n = s.u32(), s.u64()
        item_fmt = VALUE_FORMATS.get(item, "-")
        if item_fmt is None or item_fmt == "-":  # llama.cpp refuses arrays of arrays too
            raise s.fail(f"key {excerpt(key)} is an array of {'arrays' if item_fmt is None else f'unknown type {item}'}")
        item_size = _SIZES.get(item, 8)  # a string takes at least its 8-byte length
        if n * item_size > s.size - s.at:
            raise s.fail(f"key {excerpt(key)} is an array of {n:,} items, more than the file holds")
        if n > keep_arrays:
            if item_fmt:
                s.skip(n * item_size)
            else:
                s.skip_strings(n)
            return _Long(n)
        if item_fmt:
            return s.items(item_fmt, n)
        return [s.raw_string(what=f"an item of {excerpt(key)}").decode("utf-8", errors="replace") for _ in range(n)]
    if fmt == "":
        return s.text(f"the value of {excerpt(key)}")
    (v,) = s.items(fmt, 1)
    return v


class _Long:
    def __init__(self, n: int) -> None:
        self.n = n

