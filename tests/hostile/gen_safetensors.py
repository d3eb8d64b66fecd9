"""Hostile safetensors headers and indexes in a model folder (a tiny Llama config.json beside them):
each header field with each bad value, each header-length lie, JSON that no strict reader accepts,
index files that point outside the folder. Driven through `kv FOLDER` and `fit FOLDER --gpu H100`."""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable
from pathlib import Path

from corpus import add, write

CONFIG = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
          "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 4096,
          "torch_dtype": "bfloat16"}
GOOD = {"model.layers.0.mlp.down_proj.weight": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]}}
NAME = "model.layers.0.mlp.down_proj.weight"


def header_file(raw: bytes, data: int, length: int | None = None) -> bytes:
    return struct.pack("<Q", len(raw) if length is None else length) + raw + bytes(data)


def folder_case(case_id: str, files: Callable[[], dict[str, bytes]], commands: tuple[str, ...] = ("kv", "fit"),
                expect: int = 2) -> None:
    for cmd in commands:
        def build(root: Path, files: Callable[[], dict[str, bytes]] = files, cmd: str = cmd) -> list[str]:
            folder = root / "model"
            write(folder, "config.json", json.dumps(CONFIG))
            for name, data in files().items():
                write(folder, name, data)
            return ["kv", str(folder)] if cmd == "kv" else ["fit", str(folder), "--gpu", "H100"]
        add(f"safetensors-{case_id}-{cmd}", build, expect)


def entry_case(case_id: str, entry: object, data: int = 8, commands: tuple[str, ...] = ("kv", "fit")) -> None:
    raw = json.dumps({NAME: entry}).encode()
    folder_case(case_id, lambda: {"model.safetensors": header_file(raw, data)}, commands)


# --- each field of a tensor entry, each bad value -----------------------------------------------------
FIELD_VALUES: dict[str, list[object]] = {
    "dtype": ["Q4_K", 7, None, "", "bf16", ["BF16"], "BF16\u0000", "x" * 10_000],
    "shape": [[-1, 2], [2.5, 2], ["2", "2"], [True, 2], None, "2x2", [2**70, 2], [1e300, 2], [2, 2, 2], [], [0] * 5000],
    "data_offsets": [[-1, 7], [8, 0], [0], [0, 8, 16], ["0", "8"], [0, 9], [0, 2**64], None, [0.0, 8.0], [1, 9], [0, 2**200]],
}
for field, values in FIELD_VALUES.items():
    for n, bad in enumerate(values):
        entry_case(f"{field}-{n}", {**GOOD[NAME], field: bad})
    entry_case(f"{field}-missing", {k: v for k, v in GOOD[NAME].items() if k != field})
for n, bad in enumerate(["nope", [1, 2], None, 3, {}]):
    entry_case(f"entry-{n}", bad)
entry_case("data-short", GOOD[NAME], data=4)
entry_case("data-long", GOOD[NAME], data=12)

# --- the header length, and JSON no strict reader accepts ------------------------------------------------
GOOD_RAW = json.dumps(GOOD).encode()
BAD_FILES: dict[str, bytes] = {
    "empty-file": b"",
    "seven-bytes": b"\x01" * 7,
    "length-past-file": header_file(GOOD_RAW, 8, length=len(GOOD_RAW) + 100),
    "length-2pow63": header_file(GOOD_RAW, 8, length=1 << 63),
    "length-u64max": header_file(GOOD_RAW, 8, length=(1 << 64) - 1),
    "length-zero": header_file(b"", 8, length=0),
    "length-over-100MB": header_file(GOOD_RAW, 8, length=100_000_001),
    "not-json": header_file(b"{not json", 0),
    "not-utf8": header_file(b'{"\xff\xfe": 1}', 0),
    "name-not-utf8": header_file(b'{"model.layers.0.\xc3\x28": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}', 1),
    "nan-shape": header_file(b'{"w": {"dtype": "U8", "shape": [NaN], "data_offsets": [0, 1]}}', 1),
    "infinity-offset": header_file(b'{"w": {"dtype": "U8", "shape": [1], "data_offsets": [0, Infinity]}}', 1),
    "huge-int": header_file(b'{"w": {"dtype": "U8", "shape": [' + b"9" * 5000 + b'], "data_offsets": [0, 1]}}', 1),
    "deep-metadata": header_file(b'{"__metadata__": ' + b"[" * 5000 + b"]" * 5000 + b"}", 0),
    "deep-entry": header_file(b'{"w": ' + b"{\"a\": " * 3000 + b"1" + b"}" * 3000 + b"}", 0),
    "metadata-list": header_file(b'{"__metadata__": [1]}', 0),
    "top-level-list": header_file(b"[1, 2]", 0),
    "top-level-string": header_file(b'"model"', 0),
    "trailing-garbage": header_file(GOOD_RAW + b"}}", 8),
    "overlap": header_file(json.dumps({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                                       "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}}).encode(), 6),
    "duplicate-key-gap": header_file(b'{"w": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}, '
                                     b'"w": {"dtype": "U8", "shape": [4], "data_offsets": [4, 8]}}', 8),
    "long-name": header_file(json.dumps({"n" * 1_000_000: {"dtype": "U8", "shape": [2], "data_offsets": [0, 1]}}).encode(), 1),
}
for case_id, data in BAD_FILES.items():
    folder_case(case_id, lambda data=data: {"model.safetensors": data})  # type: ignore[misc]

# --- shards and the index ----------------------------------------------------------------------------------
SHARD = header_file(GOOD_RAW, 8)
OTHER = header_file(json.dumps({"model.norm.weight": {"dtype": "BF16", "shape": [64], "data_offsets": [0, 128]}}).encode(), 128)


def index(weight_map: object) -> bytes:
    return json.dumps({"metadata": {}, "weight_map": weight_map}).encode()


folder_case("same-tensor-two-shards", lambda: {"a.safetensors": SHARD, "b.safetensors": SHARD})
folder_case("no-layer-weights", lambda: {"model.safetensors": OTHER}, expect=0)  # weights from config.json, with a note
INDEXES: dict[str, bytes] = {
    "parent": index({NAME: "../outside.safetensors"}),
    "absolute": index({NAME: "/etc/passwd"}),
    "dot": index({NAME: "."}),
    "missing-shard": index({NAME: "model.safetensors", "x": "model-2.safetensors"}),
    "list": json.dumps({"weight_map": ["model.safetensors"]}).encode(),
    "number-values": index({NAME: 7}),
    "list-values": index({NAME: ["model.safetensors"]}),
    "no-map": b'{"metadata": {}}',
    "not-json": b"{",
    "nan": b'{"weight_map": NaN}',
    "deep": b'{"weight_map": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    "not-utf8": b'{"weight_map": {"\xff": "model.safetensors"}}',
    "huge-int": b'{"weight_map": ' + b"9" * 5000 + b"}",
    "long-name": index({NAME: "model.safetensors", "x": "m" * 1_000_000}),
}
for case_id, data in INDEXES.items():
    folder_case(f"index-{case_id}", lambda data=data: {"model.safetensors": SHARD, "model.safetensors.index.json": data})  # type: ignore[misc]


# --- weight files that are not regular files: never opened, no hang (engines only load regular files)
def _special(case_id: str, make: Callable[[Path], None], expect: int) -> None:
    def build(root: Path) -> list[str]:
        folder = root / "model"
        write(folder, "config.json", json.dumps(CONFIG))
        make(folder)
        return ["kv", str(folder)]
    add(f"safetensors-path-{case_id}", build, expect)


_special("fifo", lambda folder: os.mkfifo(folder / "model.safetensors"), 0)
_special("dev-zero", lambda folder: os.symlink("/dev/zero", folder / "model.safetensors"), 0)
_special("folder", lambda folder: os.makedirs(folder / "model.safetensors"), 0)
_special("index-shard-fifo", lambda folder: (write(folder, "a.safetensors", SHARD), os.mkfifo(folder / "b.safetensors"),
                                             write(folder, "model.safetensors.index.json",
                                                   index({NAME: "a.safetensors", "x": "b.safetensors"})))[-1] and None, 2)
