"""Quantization configs as users hand checkpoints over (hostile-input round 13): the file a config.json leaves its
quantization to, the ModelOpt algorithms and KV-cache formats vLLM reads, exclude lists, compressed-tensors groups.
Each case is read as vLLM 0.33.0 reads it (transformers_utils/config.py, model_executor/layers/quantization/
modelopt.py, compressed_tensors/compressed_tensors.py) or refused in one line; expected figures are the same
checkpoint's with the configuration written in config.json, which test_weights.py checks by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvbudget.cli import main
from kvbudget.model import catalog
from kvbudget.model.hf_config import spec_from_config
from kvbudget.model.resolve import load_model
from kvbudget.units import InputError

QWEN3_8B: dict[str, Any] = dict(catalog.find("Qwen/Qwen3-8B").config)  # type: ignore[union-attr]
MODELOPT_FP8 = {"producer": {"name": "modelopt", "version": "0.27.1"},
                "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8", "exclude_modules": ["lm_head"]}}


def _folder(tmp_path: Path, config: dict[str, Any], **files: object) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "config.json").write_text(json.dumps(config))
    for name, body in files.items():
        (tmp_path / name).write_text(body if isinstance(body, str) else json.dumps(body))
    return tmp_path


def test_hf_quant_config_file_beside_config_json_is_the_quantization_config(tmp_path: Path) -> None:
    """ModelOpt 0.29 and before write hf_quant_config.json and leave config.json without a quantization_config;
    vLLM 0.33.0 (transformers_utils/config.py) then takes the file as it. Before, the folder was read as a 16-bit
    checkpoint: fit printed 16,381,470,720 bytes of bf16 weights for Qwen3-8B FP8, exit 0."""
    folder = _folder(tmp_path, QWEN3_8B, **{"hf_quant_config.json": MODELOPT_FP8})
    inline = spec_from_config({**QWEN3_8B, "quantization_config": MODELOPT_FP8}, name="inline")
    for ref in (str(folder), str(folder / "config.json")):
        spec = load_model(ref)
        assert spec.weight_format == inline.weight_format
        assert (spec.weight_format.name, spec.weight_format.kv_cache) == ("fp8", "fp8")  # type: ignore[union-attr]
        assert spec.weight_format != spec_from_config(QWEN3_8B).weight_format
    # config.json's own quantization_config wins, as in vLLM (the file is read only when config.json has none)
    awq = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}
    both = _folder(tmp_path / "both", {**QWEN3_8B, "quantization_config": awq}, **{"hf_quant_config.json": MODELOPT_FP8})
    assert load_model(str(both)).weight_format.name == "awq"  # type: ignore[union-attr]


@pytest.mark.parametrize(("body", "said"), [
    ("[1, 2]", "hf_quant_config.json must hold a JSON object, not an array"),
    ('{"quantization": {"quant_algo": NaN}}', "hf_quant_config.json"),
    ("\udcff", "cannot read it as a hf_quant_config.json (not UTF-8 text"),
])
def test_a_broken_hf_quant_config_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str,
                                                   said: str) -> None:
    folder = _folder(tmp_path, QWEN3_8B)
    (folder / "hf_quant_config.json").write_bytes(body.encode("utf-8", "surrogateescape"))
    assert main(["kv", str(folder)]) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1
