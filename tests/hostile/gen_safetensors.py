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


def folder_case(case_id: str, files: Callable[[], dict[str, bytes]], about: str, commands: tuple[str, ...] = ("kv",),
                expect: int = 2) -> None:
    """A model folder read by each command; the error line holds ``about``. Both commands read the folder
    with the same reader (``load_model``), so ``fit`` only where the case is about the weights' bytes."""
    for cmd in commands:
        def build(root: Path, files: Callable[[], dict[str, bytes]] = files, cmd: str = cmd) -> list[str]:
            folder = root / "model"
            write(folder, "config.json", json.dumps(CONFIG))
            for name, data in files().items():
                write(folder, name, data)
            return ["kv", str(folder)] if cmd == "kv" else ["fit", str(folder), "--gpu", "H100"]
        add(f"safetensors-{case_id}-{cmd}", build, expect, expect_in=about)


def entry_case(case_id: str, entry: object, about: str, data: int = 8, commands: tuple[str, ...] = ("kv",)) -> None:
    raw = json.dumps({NAME: entry}).encode()
    folder_case(case_id, lambda: {"model.safetensors": header_file(raw, data)}, about, commands)


# --- each field of a tensor entry, each bad value -----------------------------------------------------
FIELD_VALUES: dict[str, list[object]] = {
    "dtype": ["Q4_K", 7, None, "", "bf16", ["BF16"], "BF16\u0000", "x" * 10_000],
    "shape": [[-1, 2], [2.5, 2], ["2", "2"], [True, 2], None, "2x2", [2**70, 2], [1e300, 2], [2, 2, 2], [], [0] * 5000],
    "data_offsets": [[-1, 7], [8, 0], [0], [0, 8, 16], ["0", "8"], [0, 9], [0, 2**64], None, [0.0, 8.0], [1, 9], [0, 2**200]],
}
for field, values in FIELD_VALUES.items():
    for n, bad in enumerate(values):
        entry_case(f"{field}-{n}", {**GOOD[NAME], field: bad}, field)
    entry_case(f"{field}-missing", {k: v for k, v in GOOD[NAME].items() if k != field}, f"has no {field}")
for n, bad in enumerate(["nope", [1, 2], None, 3, {}]):
    entry_case(f"entry-{n}", bad, "has no dtype" if bad == {} else "must be an object with dtype, shape and data_offsets")
# The data section shorter or longer than the tensors (in fit too: the weights are these bytes).
entry_case("data-short", GOOD[NAME], "truncated: its tensors end at data byte 8 but the file holds 4", data=4, commands=("kv", "fit"))
entry_case("data-long", GOOD[NAME], "4 bytes after the last tensor", data=12)

# --- the header length, and JSON no strict reader accepts ------------------------------------------------
GOOD_RAW = json.dumps(GOOD).encode()
NOT_JSON = "the header: not valid JSON"
BAD_FILES: dict[str, tuple[bytes, str]] = {  # the file, and what the error says about it
    "empty-file": (b"", "0 bytes long: too short"),
    "seven-bytes": (b"\x01" * 7, "7 bytes long: too short"),
    "length-past-file": (header_file(GOOD_RAW, 8, length=len(GOOD_RAW) + 100), f"header length {len(GOOD_RAW) + 100} bytes runs past"),
    "length-2pow63": (header_file(GOOD_RAW, 8, length=1 << 63), f"header length {1 << 63:,} bytes is over"),
    "length-u64max": (header_file(GOOD_RAW, 8, length=(1 << 64) - 1), f"header length {(1 << 64) - 1:,} bytes is over"),
    "length-zero": (header_file(b"", 8, length=0), "empty document"),
    "length-over-100MB": (header_file(GOOD_RAW, 8, length=100_000_001), "header length 100,000,001 bytes is over"),
    "not-json": (header_file(b"{not json", 0), NOT_JSON),
    "not-utf8": (header_file(b'{"\xff\xfe": 1}', 0), "not UTF-8"),
    "name-not-utf8": (header_file(b'{"model.layers.0.\xc3\x28": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}', 1), "not UTF-8"),
    "nan-shape": (header_file(b'{"w": {"dtype": "U8", "shape": [NaN], "data_offsets": [0, 1]}}', 1), "field 'shape' is NaN"),
    "infinity-offset": (header_file(b'{"w": {"dtype": "U8", "shape": [1], "data_offsets": [0, Infinity]}}', 1),
                        "field 'data_offsets' is Infinity"),
    "huge-int": (header_file(b'{"w": {"dtype": "U8", "shape": [' + b"9" * 5000 + b'], "data_offsets": [0, 1]}}', 1),
                 "field 'shape' is an integer of 5,000 digits"),
    "deep-metadata": (header_file(b'{"__metadata__": ' + b"[" * 5000 + b"]" * 5000 + b"}", 0), "nested more than"),
    "deep-entry": (header_file(b'{"w": ' + b"{\"a\": " * 3000 + b"1" + b"}" * 3000 + b"}", 0), "nested more than"),
    "metadata-list": (header_file(b'{"__metadata__": [1]}', 0), "__metadata__ must be a JSON object"),
    "top-level-list": (header_file(b"[1, 2]", 0), "the header must be a JSON object"),
    "top-level-string": (header_file(b'"model"', 0), "the header must be a JSON object"),
    "trailing-garbage": (header_file(GOOD_RAW + b"}}", 8), "after document"),
    "overlap": (header_file(json.dumps({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                                        "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}}).encode(), 6),
                "tensor 'b' at data offset 2 (data_offsets [2, 6]) overlaps"),
    # JSON keeps the last of two equal keys, as safetensors' own (serde) reader does: the first 4 bytes are a gap
    "duplicate-key-gap": (header_file(b'{"w": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}, '
                                      b'"w": {"dtype": "U8", "shape": [4], "data_offsets": [4, 8]}}', 8), "leaves a gap of 4 bytes"),
    # a name of a million bytes, echoed as its first characters only (the line stays short)
    "long-name": (header_file(json.dumps({"n" * 1_000_000: {"dtype": "U8", "shape": [2], "data_offsets": [0, 1]}}).encode(), 1),
                  "nnnn... data_offsets [0, 1] hold 1 bytes"),
}
for case_id, (data, about) in BAD_FILES.items():
    folder_case(case_id, lambda data=data: {"model.safetensors": data}, about)  # type: ignore[misc]

# --- shards and the index ----------------------------------------------------------------------------------
SHARD = header_file(GOOD_RAW, 8)
OTHER = header_file(json.dumps({"model.norm.weight": {"dtype": "BF16", "shape": [64], "data_offsets": [0, 128]}}).encode(), 128)


def index(weight_map: object) -> bytes:
    return json.dumps({"metadata": {}, "weight_map": weight_map}).encode()


folder_case("same-tensor-two-shards", lambda: {"a.safetensors": SHARD, "b.safetensors": SHARD},
            f"tensor '{NAME}' is in both a.safetensors and b.safetensors")
folder_case("no-layer-weights", lambda: {"model.safetensors": OTHER}, "", expect=0)  # weights from config.json, with a note
NOT_A_NAME, NO_MAP = "is not a file name in the model folder", "has no weight_map object"
INDEXES: dict[str, tuple[bytes, str]] = {  # the index, and what the error says about it
    "parent": (index({NAME: "../outside.safetensors"}), f"'../outside.safetensors' {NOT_A_NAME}"),
    "absolute": (index({NAME: "/etc/passwd"}), f"'/etc/passwd' {NOT_A_NAME}"),
    "dot": (index({NAME: "."}), f"'.' {NOT_A_NAME}"),
    "missing-shard": (index({NAME: "model.safetensors", "x": "model-2.safetensors"}), "(first: 'model-2.safetensors')"),
    "list": (json.dumps({"weight_map": ["model.safetensors"]}).encode(), NO_MAP),
    "number-values": (index({NAME: 7}), f"gives tensor '{NAME}' the shard 7, not a file name"),
    "list-values": (index({NAME: ["model.safetensors"]}), f"gives tensor '{NAME}' the shard ['model.safetensors'], not a file name"),
    "no-map": (b'{"metadata": {}}', NO_MAP),
    "not-json": (b"{", "unexpected end of data"),
    "nan": (b'{"weight_map": NaN}', "field 'weight_map' is NaN"),
    "deep": (b'{"weight_map": ' + b"[" * 5000 + b"]" * 5000 + b"}", "nested more than"),
    "not-utf8": (b'{"weight_map": {"\xff": "model.safetensors"}}', "not UTF-8"),
    "huge-int": (b'{"weight_map": ' + b"9" * 5000 + b"}", "field 'weight_map' is an integer of 5,000 digits"),
    "long-name": (index({NAME: "model.safetensors", "x": "m" * 1_000_000}), "(first: 'mmmm"),
}
for case_id, (data, about) in INDEXES.items():
    folder_case(f"index-{case_id}", lambda data=data: {"model.safetensors": SHARD, "model.safetensors.index.json": data},  # type: ignore[misc]
                about)


# --- weight files that are not regular files: never opened, no hang (engines only load regular files)
def _special(case_id: str, make: Callable[[Path], None], expect: int, about: str = "") -> None:
    def build(root: Path) -> list[str]:
        folder = root / "model"
        write(folder, "config.json", json.dumps(CONFIG))
        make(folder)
        return ["kv", str(folder)]
    add(f"safetensors-path-{case_id}", build, expect, expect_in=about)


_special("fifo", lambda folder: os.mkfifo(folder / "model.safetensors"), 0)
_special("dev-zero", lambda folder: os.symlink("/dev/zero", folder / "model.safetensors"), 0)
_special("folder", lambda folder: os.makedirs(folder / "model.safetensors"), 0)
_special("index-shard-fifo", lambda folder: (write(folder, "a.safetensors", SHARD), os.mkfifo(folder / "b.safetensors"),
                                             write(folder, "model.safetensors.index.json",
                                                   index({NAME: "a.safetensors", "x": "b.safetensors"})))[-1] and None, 2,
         "shard 'b.safetensors' is not a regular file")
