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


def case(case_id: str, make: Callable[[], tuple[bytes, int]], commands: tuple[str, ...] = ("kv",)) -> None:
    for cmd in commands:
        def build(root: Path, make: Callable[[], tuple[bytes, int]] = make, cmd: str = cmd) -> list[str]:
            header, size = make()
            path = write(root, "model.gguf", header)
            os.truncate(path, max(size if size < 1 << 32 else 0, len(header)))  # sparse: data never written
            return ["kv", path] if cmd == "kv" else ["fit", path, "--gpu", "H100", "--engine", "llama.cpp"]
        add(f"gguf-{case_id}-{cmd}", build)


def patched(made: tuple[bytes, int], old: bytes, new: bytes) -> tuple[bytes, int]:
    return made[0].replace(old, new), made[1]


def with_key(key: str, kind: int, v: object) -> Callable[[], tuple[bytes, int]]:
    def make() -> tuple[bytes, int]:
        kv = [x for x in base_kv() if x[0] != key] + [(key, kind, v)]
        return gguf(kv)
    return make


# --- each metadata value, each bad value -----------------------------------------------------------
BAD_NUMBERS: list[tuple[str, int, object]] = [
    ("minus1", I32, -1), ("2pow63", U64, 1 << 63), ("u64max", U64, (1 << 64) - 1), ("nan", F32, float("nan")),
    ("inf", F64, float("inf")), ("half", F32, 2.5), ("string", STR, "8"), ("bool", BOOL, True),
]
KEYS = ("block_count", "embedding_length", "attention.head_count", "attention.head_count_kv", "attention.key_length",
        "attention.value_length", "context_length", "attention.sliding_window", "expert_count", "feed_forward_length")
for key in KEYS:
    for label, kind, bad in BAD_NUMBERS:
        case(f"{key}-{label}", with_key(f"llama.{key}", kind, bad))
for key in ("block_count", "embedding_length", "context_length", "attention.key_length", "attention.value_length"):
    case(f"{key}-zero", with_key(f"llama.{key}", U32, 0), ("kv", "fit"))
case("block_count-huge", with_key("llama.block_count", U32, 1 << 30), ("kv", "fit"))
case("head_count_kv-array-short", with_key("llama.attention.head_count_kv", ARR, (U32, [2])))
case("head_count_kv-array-negative", with_key("llama.attention.head_count_kv", ARR, (I32, [2, -2])))
case("head_count_kv-array-strings", with_key("llama.attention.head_count_kv", ARR, (STR, ["2", "2"])))
case("shared_kv_layers-past-layers", with_key("llama.attention.shared_kv_layers", U32, 3))
case("expert_used-past-experts", lambda: gguf([*base_kv(), ("llama.expert_count", U32, 4), ("llama.expert_used_count", U32, 9)]))
case("file_type-string", with_key("general.file_type", STR, "Q4_K_M"))
case("no-architecture", lambda: gguf([x for x in base_kv() if x[0] != "general.architecture"]))
case("architecture-number", with_key("general.architecture", U32, 7))
case("architecture-huge", with_key("general.architecture", STR, "a" * 100_000))
case("no-block_count", lambda: gguf([x for x in base_kv() if x[0] != "llama.block_count"]), ("kv", "fit"))

# --- the layout ----------------------------------------------------------------------------------------
case("magic", lambda: gguf(magic=b"GGML"))
case("version-1", lambda: gguf(version=1))
case("version-huge", lambda: gguf(version=0xFFFFFFFF))
case("tensor-count-2pow40", lambda: gguf(counts=(1 << 40, 8)), ("kv", "fit"))
case("tensor-count-u64max", lambda: gguf(counts=((1 << 64) - 1, 8)))
case("key-count-2pow40", lambda: gguf(counts=(4, 1 << 40)))
case("key-count-one-more", lambda: gguf(counts=(4, 9)))
case("tensor-count-one-more", lambda: gguf(counts=(5, 8)))
case("key-length-2pow40", lambda: gguf(raw_kv=struct.pack("<Q", 1 << 40) + b"x" * 64))
case("key-not-utf8", lambda: gguf(raw_kv=s(b"\xff\xfe") + struct.pack("<II", U32, 1)))
case("key-duplicate", lambda: gguf([*base_kv(), ("llama.block_count", U32, 2)]))
case("value-type-unknown", lambda: gguf(raw_kv=s("x") + struct.pack("<I", 13) + bytes(16)))
case("value-type-huge", lambda: gguf(raw_kv=s("x") + struct.pack("<I", 0xFFFFFFFF) + bytes(16)))
case("string-value-2pow63", lambda: gguf(raw_kv=s("x") + struct.pack("<IQ", STR, 1 << 63)))
case("string-value-not-utf8", lambda: gguf(raw_kv=s("x") + struct.pack("<I", STR) + s(b"\xc3\x28")))
case("array-of-arrays", lambda: gguf(raw_kv=s("x") + struct.pack("<IIQ", ARR, ARR, 1) + struct.pack("<IQ", U8, 0)))
case("array-item-type-unknown", lambda: gguf(raw_kv=s("x") + struct.pack("<IIQ", ARR, 77, 1) + bytes(8)))
case("array-count-2pow40", lambda: gguf(raw_kv=s("x") + struct.pack("<IIQ", ARR, U32, 1 << 40) + bytes(64)))
case("array-strings-count-2pow40", lambda: gguf(raw_kv=s("x") + struct.pack("<IIQ", ARR, STR, 1 << 40) + bytes(64)))
case("array-string-2pow62", lambda: gguf(raw_kv=s("x") + struct.pack("<IIQ", ARR, STR, 5000) + struct.pack("<Q", 1 << 62)))
case("tensor-dims-5", lambda: gguf(tensors=[*base_tensors(), ("x.weight", (1, 1, 1, 1, 1), F16)]))
case("tensor-dims-2pow32", lambda: patched(gguf(tensors=[*base_tensors(), ("x.weight", (), F16)]),
                                          s("x.weight") + struct.pack("<I", 0), s("x.weight") + struct.pack("<I", 0xFFFFFFFF)))
case("tensor-dim-negative", lambda: gguf(tensors=[*base_tensors(), ("x.weight", (64, 1 << 63), F16)]))
case("tensor-dims-absurd", lambda: gguf(tensors=[*base_tensors(), ("x.weight", (1 << 40, 1 << 40, 1 << 40), F16)], data=1 << 20), ("kv", "fit"))
case("tensor-type-removed", lambda: gguf(tensors=[*base_tensors(), ("x.weight", (64,), 4)]))
case("tensor-type-huge", lambda: gguf(tensors=[*base_tensors(), ("x.weight", (64,), 0xFFFFFFFF)]))
case("tensor-row-not-blocks", lambda: gguf(tensors=[*base_tensors(), ("x.weight", (100, 2), Q4_K)]))
case("tensor-offset-misaligned", lambda: gguf(offsets={1: 8}))
case("tensor-offset-past-file", lambda: gguf(offsets={3: 1 << 50}), ("kv", "fit"))
case("tensor-name-duplicate", lambda: gguf(tensors=[*base_tensors(), ("output.weight", (64,), F16)]))
case("tensor-name-long", lambda: gguf(tensors=[*base_tensors(), ("x" * 100, (64,), F16)]))
case("tensor-name-not-utf8", lambda: patched(gguf(), b"output.weight", b"output.\xffeight"))
case("data-truncated", lambda: gguf(data=1000), ("kv", "fit"))
case("alignment-zero", with_key("general.alignment", U32, 0))
case("alignment-three", with_key("general.alignment", U32, 3))
case("alignment-string", with_key("general.alignment", STR, "32"))
for cut in (0, 3, 4, 10, 24, 40, 100, 300):
    case(f"cut-at-{cut}", lambda cut=cut: (gguf()[0][:cut], cut))  # type: ignore[misc]


# --- paths that are not regular files ------------------------------------------------------------------
def _path_case(case_id: str, make: Callable[[Path], str]) -> None:
    add(f"gguf-path-{case_id}", lambda root: ["kv", make(root)])


_path_case("folder", lambda root: (os.makedirs(root / "dir.gguf"), str(root / "dir.gguf"))[1])
_path_case("fifo", lambda root: (os.mkfifo(root / "pipe.gguf"), str(root / "pipe.gguf"))[1])
_path_case("dev-zero", lambda root: (os.symlink("/dev/zero", root / "zero.gguf"), str(root / "zero.gguf"))[1])
_path_case("missing", lambda root: str(root / "missing.gguf"))
_path_case("empty", lambda root: write(root, "empty.gguf", b""))
