"""The GGUF reader against files the real ``gguf`` package writes: its copied constants, long arrays
skipped (not decoded) across read chunks, and llama.cpp's layout checks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType, GGUFWriter

from kvbudget.model import gguf_reader
from kvbudget.model.gguf_reader import GGML_TYPES, VALUE_FORMATS, GGUFError, read_gguf_header
from kvbudget.units import InputError


def test_ggml_type_table_is_ggufs() -> None:
    assert {k: (name, block, size) for k, (name, block, size) in GGML_TYPES.items()} == {
        int(t): (t.name, *GGML_QUANT_SIZES[t]) for t in GGMLQuantizationType
    }
    assert set(VALUE_FORMATS) == {int(t) for t in GGUFValueType}
    assert (VALUE_FORMATS[GGUFValueType.STRING], VALUE_FORMATS[GGUFValueType.ARRAY]) == ("", None)


def _write(path: Path, arrays: dict[str, list[object]], tensors: int = 2) -> Path:
    w = GGUFWriter(str(path), "llama")
    for key, value in arrays.items():
        w.add_array(key, value)
    w.add_uint32("after.arrays", 7)
    for i in range(tensors):
        w.add_tensor(f"blk.{i}.attn_q.weight", np.ones((4, 32), dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_long_arrays_are_skipped_across_chunks(tmp_path: Path) -> None:
    # 300k short strings (3 MB: several 1 MiB read chunks), one string longer than a chunk, and
    # fixed-size arrays: all skipped to their length, and the keys and tensors after them read right
    tokens = [f"t{i}" for i in range(300_000)]
    huge = ["a" * (gguf_reader.CHUNK + 5), *tokens[:5000]]
    path = _write(tmp_path / "m.gguf", {"tok": tokens, "huge": huge, "scores": [0.5] * 70_000,
                                        "types": [1] * 9000, "short": [1, 2, 3], "names": ["x", "é"]})
    h = read_gguf_header(str(path))
    md = h.metadata
    assert (md["tok.length"], md["huge.length"], md["scores.length"], md["types.length"]) == (300_000, 5001, 70_000, 9000)
    assert (md["short"], md["names"], md["after.arrays"]) == ([1, 2, 3], ["x", "é"], 7)
    assert [t.name for t in h.tensors] == ["blk.0.attn_q.weight", "blk.1.attn_q.weight"]
    assert h.tensors[1].nbytes == 4 * 32 * 2


def test_tensor_data_must_lie_inside_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "m.gguf", {"short": [1]})
    data = path.read_bytes()
    (tmp_path / "cut.gguf").write_bytes(data[:-1])
    with pytest.raises(GGUFError, match=r"tensor 'blk\.1\.attn_q\.weight' \(\[32, 4\], F16\) ends at byte [\d,]+, past the end"):
        read_gguf_header(str(tmp_path / "cut.gguf"))


def test_a_path_that_is_not_a_regular_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is a folder, give a file"):
        read_gguf_header(str(tmp_path))
    with pytest.raises(InputError, match="not a regular file"):
        read_gguf_header("/dev/zero")
