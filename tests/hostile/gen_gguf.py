"""Hostile GGUF files: each metadata key with each bad value, and each part of the layout (magic,
version, counts, strings, arrays, tensor infos, alignment, data section) broken one way at a time;
paths that are not regular files. Driven through `kv FILE.gguf` and `fit FILE.gguf --engine llama.cpp`.

The files are written here byte by byte (little-endian, GGUF v3), from a small valid Llama file."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path

from corpus import add, write

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
FMT = {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32: "f", BOOL: "?", U64: "Q", I64: "q", F64: "d"}
F16, Q4_K = 1, 12
KV = tuple[str, int, object]  # key, value type, value (for an array: (item type, items))


def s(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def value(kind: int, v: object) -> bytes:
    if kind == STR:
        return s(v)  # type: ignore[arg-type]
    if kind == ARR:
        item, items = v  # type: ignore[misc]
        return struct.pack("<IQ", item, len(items)) + b"".join(value(item, x) for x in items)
    return struct.pack("<" + FMT[kind], v)


def base_kv() -> list[KV]:
    return [("general.architecture", STR, "llama"), ("llama.block_count", U32, 2), ("llama.context_length", U32, 4096),
            ("llama.embedding_length", U32, 64), ("llama.feed_forward_length", U32, 128),
            ("llama.attention.head_count", U32, 4), ("llama.attention.head_count_kv", U32, 2),
            ("tokenizer.ggml.tokens", ARR, (STR, [f"t{i}" for i in range(8)]))]


def base_tensors() -> list[tuple[str, tuple[int, ...], int]]:
    return [("token_embd.weight", (64, 256), F16), ("blk.0.attn_q.weight", (64, 64), F16),
            ("blk.1.attn_q.weight", (64, 64), F16), ("output.weight", (64, 256), F16)]


def gguf(kv: list[KV] | None = None, tensors: list[tuple[str, tuple[int, ...], int]] | None = None, *,
         magic: bytes = b"GGUF", version: int = 3, counts: tuple[int, int] | None = None,
         offsets: dict[int, int] | None = None, data: int | None = None, raw_kv: bytes = b"") -> tuple[bytes, int]:
    """(header bytes, total file size): the data section follows the header, 32-aligned, never written."""
    kv = base_kv() if kv is None else kv
    tensors = base_tensors() if tensors is None else tensors
    n_t, n_kv = counts if counts is not None else (len(tensors), len(kv) + (1 if raw_kv else 0))
    out = magic + struct.pack("<IQQ", version, n_t, n_kv)
    out += b"".join(s(k) + struct.pack("<I", t) + value(t, v) for k, t, v in kv) + raw_kv
    at = 0
    for i, (name, shape, kind) in enumerate(tensors):
        out += s(name) + struct.pack("<I", len(shape)) + b"".join(struct.pack("<Q", d) for d in shape)
        out += struct.pack("<IQ", kind, (offsets or {}).get(i, at))
        n = 1
        for d in shape:
            n *= d
        at += -(-(n * 2) // 32) * 32
    size = -(-len(out) // 32) * 32 + (at if data is None else data)
    return out, size


def case(case_id: str, make: Callable[[], tuple[bytes, int]], about: str, commands: tuple[str, ...] = ("kv",)) -> None:
    """One file, read by each command; the error line holds ``about``. Both commands read the file with the
    same reader (``load_model``), so ``fit`` only where what it does with the tensors matters."""
    for cmd in commands:
        def build(root: Path, make: Callable[[], tuple[bytes, int]] = make, cmd: str = cmd) -> list[str]:
            header, size = make()
            path = write(root, "model.gguf", header)
            os.truncate(path, max(size if size < 1 << 32 else 0, len(header)))  # sparse: data never written
            return ["kv", path] if cmd == "kv" else ["fit", path, "--gpu", "H100", "--engine", "llama.cpp"]
        add(f"gguf-{case_id}-{cmd}", build, expect_in=about)


def patched(made: tuple[bytes, int], old: bytes, new: bytes) -> tuple[bytes, int]:
    return made[0].replace(old, new), made[1]


def key_case(case_id: str, key: str, kind: int, v: object, extra: tuple[KV, ...] = ()) -> None:
    """The small Llama file with ``key`` set to ``v`` (after ``extra``): the error names the key."""
    def make() -> tuple[bytes, int]:
        return gguf([x for x in base_kv() if x[0] != key] + [*extra, (key, kind, v)])
    case(case_id, make, key)


def layout_case(case_id: str, about: str, **layout: object) -> None:
    """The small Llama file with one part of its layout changed (``gguf``'s keywords)."""
    case(case_id, lambda: gguf(**layout), about)  # type: ignore[arg-type]


def raw_key(case_id: str, about: str, raw: bytes) -> None:
    """One more key, written as raw bytes after the good ones."""
    layout_case(case_id, about, raw_kv=raw)


def tensor_case(case_id: str, about: str, tensor: tuple[str, tuple[int, ...], int]) -> None:
    """One more tensor after the good ones."""
    layout_case(case_id, about, tensors=[*base_tensors(), tensor])


def n(value: int) -> str:
    return f"{value:,}"


# --- each metadata value, each bad value -----------------------------------------------------------
BAD_NUMBERS: list[tuple[str, int, object]] = [
    ("minus1", I32, -1), ("2pow63", U64, 1 << 63), ("u64max", U64, (1 << 64) - 1), ("nan", F32, float("nan")),
    ("inf", F64, float("inf")), ("half", F32, 2.5), ("string", STR, "8"), ("bool", BOOL, True),
]
KEYS = ("block_count", "embedding_length", "attention.head_count", "attention.head_count_kv", "attention.key_length",
        "attention.value_length", "context_length", "attention.sliding_window", "expert_count", "feed_forward_length")
for key in KEYS:
    for label, kind, bad in BAD_NUMBERS:
        key_case(f"{key}-{label}", f"llama.{key}", kind, bad)
for key in ("block_count", "embedding_length", "context_length", "attention.key_length", "attention.value_length"):
    key_case(f"{key}-zero", f"llama.{key}", U32, 0)
key_case("block_count-huge", "llama.block_count", U32, 1 << 30)
key_case("head_count_kv-array-short", "llama.attention.head_count_kv", ARR, (U32, [2]))
key_case("head_count_kv-array-negative", "llama.attention.head_count_kv", ARR, (I32, [2, -2]))
key_case("head_count_kv-array-strings", "llama.attention.head_count_kv", ARR, (STR, ["2", "2"]))
key_case("shared_kv_layers-past-layers", "llama.attention.shared_kv_layers", U32, 3)
key_case("expert_used-past-experts", "llama.expert_used_count", U32, 9, extra=(("llama.expert_count", U32, 4),))
key_case("file_type-string", "general.file_type", STR, "Q4_K_M")
key_case("architecture-number", "general.architecture", U32, 7)
key_case("architecture-huge", "general.architecture", STR, "a" * 100_000)
key_case("architecture-empty", "general.architecture", STR, "")
for key in ("general.architecture", "llama.block_count"):
    case(f"no-{key.split('.')[-1]}", lambda key=key: gguf([x for x in base_kv() if x[0] != key]), key)  # type: ignore[misc]
for label, kind, bad in (("zero", U32, 0), ("three", U32, 3), ("string", STR, "32")):
    key_case(f"alignment-{label}", "general.alignment", kind, bad)

# --- the layout ----------------------------------------------------------------------------------------
layout_case("magic", "no GGUF magic", magic=b"GGML")
for version in (1, 0xFFFFFFFF):
    layout_case(f"version-{'huge' if version > 3 else version}", f"version {n(version)} is not supported", version=version)
for label, tensors, keys in (("tensor-count-2pow40", 1 << 40, 8), ("tensor-count-u64max", (1 << 64) - 1, 8),
                             ("key-count-2pow40", 4, 1 << 40)):
    layout_case(label, f"{n(tensors)} tensors and {n(keys)} keys cannot fit", counts=(tensors, keys))
# One key more than written: the last key swallows the first tensor's name and shape, whose next bytes are
# read as a name length. The reader cannot know which count lies, only that the tensor name is impossible.
layout_case("key-count-one-more", "a tensor name of", counts=(4, 9))
# One tensor more than written: its info is read from the zeros after the header, which moves the data section.
layout_case("tensor-count-one-more", "past the end of the", counts=(5, 8))
raw_key("key-length-2pow40", f"a key of {n(1 << 40)} bytes", struct.pack("<Q", 1 << 40) + b"x" * 64)
raw_key("key-not-utf8", "a key b'\\xff\\xfe' is not UTF-8", s(b"\xff\xfe") + struct.pack("<II", U32, 1))
case("key-duplicate", lambda: gguf([*base_kv(), ("llama.block_count", U32, 2)]), "duplicate key 'llama.block_count'")
for kind in (13, 0xFFFFFFFF):
    raw_key(f"value-type-{'huge' if kind > 13 else 'unknown'}", f"unknown value type {kind}",
            s("x") + struct.pack("<I", kind) + bytes(16))
raw_key("string-value-2pow63", f"the value of 'x' of {n(1 << 63)} bytes", s("x") + struct.pack("<IQ", STR, 1 << 63))
raw_key("string-value-not-utf8", "the value of 'x' b'\\xc3(' is not UTF-8", s("x") + struct.pack("<I", STR) + s(b"\xc3\x28"))
raw_key("array-of-arrays", "array of arrays", s("x") + struct.pack("<IIQ", ARR, ARR, 1) + struct.pack("<IQ", U8, 0))
raw_key("array-item-type-unknown", "array of unknown type 77", s("x") + struct.pack("<IIQ", ARR, 77, 1) + bytes(8))
for item in (U32, STR):
    raw_key(f"array{'-strings' if item == STR else ''}-count-2pow40", f"array of {n(1 << 40)} items, more than the file holds",
            s("x") + struct.pack("<IIQ", ARR, item, 1 << 40) + bytes(64))
# A string of 2^62 bytes in an array: skipped (a token list past 4,096 items) or read (a short one).
raw_key("array-string-2pow62", "a string runs past the end",
        s("x") + struct.pack("<IIQ", ARR, STR, 5000) + struct.pack("<Q", 1 << 62))
raw_key("array-short-string-2pow62", f"an item of 'x' of {n(1 << 62)} bytes",
        s("x") + struct.pack("<IIQ", ARR, STR, 3) + struct.pack("<Q", 1 << 62))
tensor_case("tensor-dims-5", "'x.weight' has 5 dimensions", ("x.weight", (1, 1, 1, 1, 1), F16))
case("tensor-dims-2pow32", lambda: patched(gguf(tensors=[*base_tensors(), ("x.weight", (), F16)]),
                                           s("x.weight") + struct.pack("<I", 0), s("x.weight") + struct.pack("<I", 0xFFFFFFFF)),
     f"'x.weight' has {n(0xFFFFFFFF)} dimensions")
tensor_case("tensor-dim-negative", "'x.weight' has a negative dimension", ("x.weight", (64, 1 << 63), F16))
# Dimensions whose product is far past the file: the tensor's end is past the end of the file (in both commands:
# fit sums the tensors' bytes into the weights).
case("tensor-dims-absurd", lambda: gguf(tensors=[*base_tensors(), ("x.weight", (1 << 40, 1 << 40, 1 << 40), F16)], data=1 << 20),
     "'x.weight' ([1099511627776, 1099511627776, 1099511627776], F16) ends at byte", ("kv", "fit"))
for kind in (4, 0xFFFFFFFF):
    tensor_case(f"tensor-type-{'removed' if kind == 4 else 'huge'}", f"'x.weight' has unknown ggml type {kind}", ("x.weight", (64,), kind))
tensor_case("tensor-row-not-blocks", "row of 100 is not a whole number of Q4_K blocks", ("x.weight", (100, 2), Q4_K))
layout_case("tensor-offset-misaligned", "'blk.0.attn_q.weight' data at offset 8,", offsets={1: 8})
layout_case("tensor-offset-past-file", f"'output.weight' data at offset {n(1 << 50)}", offsets={3: 1 << 50})
tensor_case("tensor-name-duplicate", "duplicate tensor name 'output.weight'", ("output.weight", (64,), F16))
tensor_case("tensor-name-long", "a tensor name of 100 bytes (at most 63)", ("x" * 100, (64,), F16))
case("tensor-name-not-utf8", lambda: patched(gguf(), b"output.weight", b"output.\xffeight"), "a tensor name b'output.\\xffeight' is not UTF-8")
case("data-truncated", lambda: gguf(data=1000), "past the end of the 1,672-byte file", ("kv", "fit"))
# The file cut short at each part of the header: magic, version, counts, keys, tensor infos.
for cut in (0, 3, 4, 10, 24, 40, 100, 300):
    case(f"cut-at-{cut}", lambda cut=cut: (gguf()[0][:cut], cut), f"({cut} bytes long)" if cut < 4 else f" {cut}-byte file")  # type: ignore[misc]


# --- paths that are not regular files ------------------------------------------------------------------
def _path_case(case_id: str, make: Callable[[Path], str], about: str) -> None:
    add(f"gguf-path-{case_id}", lambda root: ["kv", make(root)], expect_in=about)


_path_case("folder", lambda root: (os.makedirs(root / "dir.gguf"), str(root / "dir.gguf"))[1], "is a folder")
_path_case("fifo", lambda root: (os.mkfifo(root / "pipe.gguf"), str(root / "pipe.gguf"))[1], "not a regular file")
_path_case("dev-zero", lambda root: (os.symlink("/dev/zero", root / "zero.gguf"), str(root / "zero.gguf"))[1], "not a regular file")
_path_case("missing", lambda root: str(root / "missing.gguf"), "no such file")
_path_case("empty", lambda root: write(root, "empty.gguf", b""), "(0 bytes long)")
