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

from kvbudget._record import replace
from kvbudget.cli import main
from kvbudget.model import catalog
from kvbudget.model.hf_config import spec_from_config
from kvbudget.model.params import Tensor
from kvbudget.model.resolve import load_model
from kvbudget.model.weights import WeightFormat, from_quantization_config
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


def test_modelopt_quant_algo_is_one_vllm_loads() -> None:
    """vLLM 0.33.0 quantization/modelopt.py loads the LINEAR_ALGOS FP8, FP8_PER_CHANNEL_PER_TOKEN, FP8_PB_WO, NVFP4
    and W4A16_NVFP4, and stops on any other ("ModelOpt currently only supports"): FP8_BLOCK_SCALES too, an alias of
    FP8_PB_WO only in a MIXED_PRECISION layer's entry (_BLOCK_FP8_MOE_ALGOS; it was priced as FP8_PB_WO, exit 0).
    Before, any algo starting with FP8 was per-tensor FP8 and any holding FP4 was NVFP4: NVFP4_AWQ and W4A8_NVFP4_FP8
    were planned as NVFP4 (vLLM does not start), FP8_PER_CHANNEL_PER_TOKEN and FP8_PB_WO with per-tensor scales."""
    def fmt(algo: object, **more: object) -> WeightFormat:
        return from_quantization_config({"quant_method": "modelopt", "quant_algo": algo, **more}, "bf16")

    assert (fmt("FP8").fp8_scales, fmt("fp8").fp8_scales) == ("per_tensor", "per_tensor")  # upper-cased, as vLLM does
    assert fmt("FP8_PER_CHANNEL_PER_TOKEN").fp8_scales == "per_channel"
    for block in ("FP8_PB_WO", "fp8_pb_wo"):
        assert (fmt(block).fp8_scales, fmt(block).block) == ("block", (128, 128))
    assert fmt("W4A16_NVFP4").name == fmt("NVFP4").name == "nvfp4"
    for refused in ("NVFP4_AWQ", "W4A8_NVFP4_FP8", "W4A8_AWQ", "FP8_DEFAULT", "INT8", ["FP8"], "", "FP8_BLOCK_SCALES"):
        with pytest.raises(InputError, match="is not one vLLM loads"):
            fmt(refused)
    for unpriced in ("MXFP8", "MIXED_PRECISION"):
        with pytest.raises(InputError, match=f"ModelOpt quant_algo {unpriced} is not one kvbudget prices"):
            fmt(unpriced)
    # an FP8 weight of 4096 x 4096: 16,777,216 bytes and its scale (4 bytes per tensor, per output row, per block)
    w = Tensor("attention", 4096, 4096, linear=True)
    assert fmt("FP8").tensor_bytes(w) == 4096 * 4096 + 4
    assert fmt("FP8_PER_CHANNEL_PER_TOKEN").tensor_bytes(w) == 4096 * 4096 + 4 * 4096
    assert fmt("FP8_PB_WO").tensor_bytes(w) == 4096 * 4096 + 4 * 32 * 32


W4A16 = {"quant_algo": "W4A16_NVFP4", "kv_cache_quant_algo": None, "group_size": 16, "exclude_modules": ["lm_head"]}
PRODUCER = {"name": "modelopt", "version": "0.27.1"}


def _fit(ref: str, engine: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = main(["fit", ref, "--gpu", "H100-SXM-80GB", "--engine", engine])
    captured = capsys.readouterr()
    return code, captured.err.strip().splitlines() if code else []


@pytest.mark.parametrize("where", ["hf_quant_config.json", "config.json"])
def test_vllm_stops_on_w4a16_nvfp4_in_modelopts_nested_form(where: str, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """ModelOpt's nested form (producer modelopt, {"quantization": {"quant_algo": ...}}) goes through vLLM 0.33.0's
    config reader (transformers_utils/model_arch_config_convertor.py _normalize_quantization_config), which takes
    FP8, FP8_PER_CHANNEL_PER_TOKEN, FP8_PB_WO, NVFP4 and MIXED_PRECISION there and raises "Unknown ModelOpt quant
    algo" on any other: W4A16_NVFP4 was planned as NVFP4 weights, exit 0. SGLang 0.5.23 loads it (configs/
    model_config.py _parse_modelopt_quant_config: any FP4 algo is modelopt_fp4)."""
    qc = {"producer": PRODUCER, "quantization": W4A16}
    folder = (_folder(tmp_path, QWEN3_8B, **{"hf_quant_config.json": qc}) if where != "config.json"
              else _folder(tmp_path, {**QWEN3_8B, "quantization_config": qc}))
    spec = load_model(str(folder))
    assert spec.weight_format is not None and spec.weight_format.name == "nvfp4"
    code, err = _fit(str(folder), "vllm", capsys)
    assert code == 2 and len(err) == 1 and "Unknown ModelOpt quant algo" in err[0] and "W4A16_NVFP4" in err[0], err
    assert _fit(str(folder), "sglang", capsys)[0] == 0
    # the flat form vLLM loads (modelopt.py ModelOptNvFp4Config), with the same weights
    flat = _folder(tmp_path / "flat", {**QWEN3_8B, "quantization_config": {"quant_method": "modelopt", **W4A16}})
    assert _fit(str(flat), "vllm", capsys)[0] == 0
    assert load_model(str(flat)).weight_format == replace(spec.weight_format, vllm_stops="")


def test_a_modelopt_method_with_a_nested_quantization_is_read_from_it(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """vLLM 0.33.0 modelopt.py from_config reads the nested "quantization" object whenever the config has one; with
    quant_method "modelopt" beside it kvbudget read the (absent) top-level quant_algo and refused the checkpoint
    ("ModelOpt quant_algo (none) is not one vLLM loads")."""
    folder = _folder(tmp_path, {**QWEN3_8B, "quantization_config": {"quant_method": "modelopt", "quantization": W4A16}})
    spec = load_model(str(folder))
    assert spec.weight_format == from_quantization_config({"quant_method": "modelopt", **W4A16}, "bf16")
    assert _fit(str(folder), "vllm", capsys)[0] == 0
    with pytest.raises(InputError, match="'quantization' must be an object holding quant_algo"):
        from_quantization_config({"quant_method": "modelopt", "quantization": "NVFP4"}, "bf16")


@pytest.mark.parametrize("algo", ["NVFP4", "W4A16_NVFP4"])
def test_vllm_stops_on_a_nested_nvfp4_config_without_its_fields(algo: str, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """modelopt.py ModelOptNvFp4Config._from_config: the nested form of an NVFP4-family algo must name group_size,
    kv_cache_quant_algo and exclude_modules (null is enough), else "NVFP4 quantization requires the following fields
    in hf_quant_config.json"; SGLang needs group_size and exclude_modules only when it reads them as None."""
    nested = {"quant_algo": algo, "group_size": 16}
    qc: dict[str, Any] = {"quant_method": "modelopt", "quantization": nested}
    if algo == "NVFP4":
        qc = {"producer": PRODUCER, "quantization": nested}
    folder = _folder(tmp_path, {**QWEN3_8B, "quantization_config": qc})
    code, err = _fit(str(folder), "vllm", capsys)
    assert code == 2 and len(err) == 1 and "lacks kv_cache_quant_algo, exclude_modules" in err[0], err
    assert _fit(str(folder), "sglang", capsys)[0] == 0
    nested.update(kv_cache_quant_algo=None, exclude_modules=[])
    assert _fit(str(_folder(tmp_path / "whole", {**QWEN3_8B, "quantization_config": qc})), "vllm", capsys)[0] == 0


def test_modelopt_kv_cache_quant_algo_is_a_string_vllm_maps() -> None:
    """vLLM 0.33.0 modelopt.py refuses a kv_cache_quant_algo that is not a string (was: read as none, exit 0);
    utils/torch_utils.py maps FP8 and NVFP4 to the cache dtype and falls back to auto on any other string."""
    def kv(algo: object) -> str:
        return from_quantization_config({"quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": algo}}, "bf16").kv_cache

    assert (kv("FP8"), kv("fp8"), kv("NVFP4"), kv("INT8"), kv(None)) == ("fp8", "fp8", "nvfp4", "", "")
    for bad in (["FP8"], 8, {"FP8": True}):
        with pytest.raises(InputError, match="kv_cache_quant_algo must be a string"):
            kv(bad)


@pytest.mark.parametrize(("qc", "key"), [
    ({"quant_method": "modelopt", "quant_algo": "FP8", "exclude_modules": ["lm_head", "*"]}, "exclude_modules '*'"),
    ({"quantization": {"quant_algo": "NVFP4", "exclude_modules": ["model.layers.*"]}}, "exclude_modules 'model.layers.*'"),
    ({"quant_method": "fp8", "ignored_layers": ["re:.*"]}, "ignored_layers 're:.*'"),
    ({"quant_method": "compressed-tensors", "ignore": ["re:model\\.layers\\..*"],
      "config_groups": {"g": {"targets": ["Linear"], "weights": {"type": "float", "num_bits": 8}}}}, "ignore 're:model"),
    ({"quant_method": "awq", "bits": 4, "group_size": 128, "modules_to_not_convert": [".*"]}, "modules_to_not_convert"),
])
def test_a_skip_list_that_matches_every_layer_is_refused(qc: dict[str, Any], key: str) -> None:
    """vLLM matches exclude lists against each layer's name (modelopt.py fnmatch, compressed-tensors 're:' regular
    expressions): '*' leaves every layer unquantized, a 16-bit checkpoint. Before, the entry named no role and the
    weights were priced as quantized, exit 0."""
    with pytest.raises(InputError, match=f"{key}.* matches every layer, so none is quantized: drop the quantization"):
        from_quantization_config(qc, "bf16")
    # entries that name some modules keep their roles
    one = {**qc, "exclude_modules": ["lm_head", "*self_attn*"]} if "exclude_modules" in str(qc) else None
    if one is not None and "quantization" not in one:
        assert from_quantization_config(one, "bf16").skip_roles == {"lm_head", "attention"}


def test_a_skip_list_that_is_not_a_list_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """vLLM 0.33.0 modelopt.py: "exclude_modules must be a list". Before, a string was read as no list, exit 0."""
    qc = {"quant_method": "modelopt", "quant_algo": "FP8", "exclude_modules": "lm_head"}
    with pytest.raises(InputError, match="exclude_modules must be a list of module names, got 'lm_head'"):
        from_quantization_config(qc, "bf16")
    folder = _folder(tmp_path, {**QWEN3_8B, "quantization_config": qc})
    assert main(["fit", str(folder), "--gpu", "H100-SXM-80GB"]) == 2
    err = capsys.readouterr().err
    assert "exclude_modules must be a list" in err and err.count("\n") == 1


def _ct(**groups: object) -> dict[str, Any]:
    return {"quant_method": "compressed-tensors", "config_groups": groups}


INT4 = {"num_bits": 4, "type": "int", "group_size": 128, "symmetric": True, "strategy": "group"}
FP8_CHANNEL = {"num_bits": 8, "type": "float", "strategy": "channel"}


def test_compressed_tensors_groups_are_read_by_their_targets() -> None:
    """vLLM 0.33.0 compressed_tensors.py quantizes the layers each config group's targets name. Before, the first
    group's scheme priced every layer: a group with no targets (quantizing nothing) made a 16-bit checkpoint 4-bit,
    and of two groups (FP8 attention, int4 MLP) the first priced the MLP as FP8 too, each exit 0."""
    int4 = from_quantization_config(_ct(group_0={"targets": ["Linear"], "weights": INT4}), "bf16")
    assert (int4.name, int4.bits) == ("gptq", 4)
    # a group with no targets quantizes nothing; the other group is the scheme
    assert from_quantization_config(_ct(empty={"targets": [], "weights": FP8_CHANNEL},
                                        group_0={"targets": ["Linear"], "weights": INT4}), "bf16") == int4
    with pytest.raises(InputError, match="no compressed-tensors config group targets a layer, so none is quantized"):
        from_quantization_config(_ct(group_0={"targets": [], "weights": INT4}), "bf16")
    with pytest.raises(InputError, match=r"config groups 'attn' .*fp8.* and 'mlp' .*gptq 4-bit.* store layers differently"):
        from_quantization_config(_ct(attn={"targets": ["re:.*self_attn.*"], "weights": FP8_CHANNEL},
                                     mlp={"targets": ["re:.*mlp.*"], "weights": INT4}), "bf16")
    # two groups of one scheme (different targets) are that scheme
    assert from_quantization_config(_ct(a={"targets": ["re:.*self_attn.*"], "weights": INT4},
                                        b={"targets": ["re:.*mlp.*"], "weights": INT4}), "bf16") == int4
    for targets in (None, "Linear", [1]):
        with pytest.raises(InputError, match="config group 'g' needs a 'targets' list of layer names"):
            from_quantization_config(_ct(g={"targets": targets, "weights": INT4}), "bf16")
