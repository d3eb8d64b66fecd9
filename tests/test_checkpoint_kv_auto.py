"""--kv-cache-dtype auto on a checkpoint whose ModelOpt quantization config names its KV format: vLLM from 0.14
(utils/torch_utils.py resolve_kv_cache_dtype_string) and SGLang from 0.5.3 (model_runner.py / mem_cache/
kv_cache_dtype.py configure_kv_cache_dtype) cache in that format; earlier releases, other quantization methods and
an explicit dtype keep their own."""

from __future__ import annotations

import json
from pathlib import Path

import kvbudget
from kvbudget.engines.sglang import SGLangSettings
from kvbudget.engines.sglang import plan as sglang_plan
from kvbudget.engines.vllm import VllmSettings
from kvbudget.engines.vllm import plan as vllm_plan
from kvbudget.model import catalog
from kvbudget.model.weights import from_quantization_config

MODEL = "nvidia/Llama-3.1-70B-Instruct-FP8"  # hf_quant_config: quant_algo FP8, kv_cache_quant_algo FP8
LAYERS, KV_HEADS, HEAD_DIM = 80, 8, 128  # Llama-3.1-70B config.json


def test_which_configs_name_vllms_auto_kv() -> None:
    def auto(qc: dict[str, object]) -> str:
        return from_quantization_config(qc, "bf16", 32).vllm_auto_kv

    assert auto({"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}) == "fp8_e4m3"
    assert auto({"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "fp8"}) == "fp8_e4m3"
    assert auto({"quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_quant_algo": "NVFP4"}) == "nvfp4"
    assert auto({"quant_method": "modelopt", "quant_algo": "FP8",
                 "kv_cache_scheme": {"dynamic": False, "num_bits": 8, "type": "float"}}) == "fp8_e4m3"
    # a value vLLM's map lacks falls back to auto (with a warning), as does no KV algorithm at all
    assert auto({"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "INT8"}) == ""
    assert auto({"quant_method": "modelopt", "quant_algo": "FP8"}) == ""
    # hf_quant_config.json's nested form is read as ModelOpt
    assert auto({"producer": {"name": "modelopt"},
                 "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}) == "fp8_e4m3"
    # compressed-tensors' kv_cache_scheme is the checkpoint's KV scales, not a dtype vLLM takes for auto
    ct = {"quant_method": "compressed-tensors", "format": "float-quantized",
          "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float",
                                                                           "strategy": "tensor"}}},
          "kv_cache_scheme": {"dynamic": False, "num_bits": 8, "type": "float"}}
    fmt = from_quantization_config(ct, "bf16", 32)
    assert fmt.kv_cache == "fp8" and fmt.vllm_auto_kv == ""


def _vllm(version: str, kv: str = "auto") -> kvbudget.engines.vllm.VllmPlan:  # type: ignore[name-defined]
    return vllm_plan(kvbudget.load_model(MODEL), kvbudget.find_gpu("H100-SXM-80GB"),
                     VllmSettings(version=version, tensor_parallel_size=2, max_model_len=8192, kv_cache_dtype=kv))


def test_vllm_takes_the_checkpoints_fp8_cache_from_0_14() -> None:
    per_rank = LAYERS * 2 * (KV_HEADS // 2) * HEAD_DIM  # K and V, 4 KV heads a rank at TP 2
    block = 16
    old, new, asked = _vllm("0.13.0"), _vllm("0.14.0"), _vllm("0.14.0", "bfloat16")
    assert old.kv_cache_dtype == "bf16" and old.bytes_per_block == per_rank * 2 * block
    assert new.kv_cache_dtype == "fp8_e4m3" and new.bytes_per_block == per_rank * 1 * block
    assert asked.kv_cache_dtype == "bfloat16" and asked.bytes_per_block == per_rank * 2 * block
    assert any("takes the checkpoint's ModelOpt KV format, fp8_e4m3" in n for n in new.notes)
    assert any("does not take for --kv-cache-dtype auto" in n for n in old.notes)


def test_sglang_takes_it_from_0_5_3() -> None:
    spec, gpu = kvbudget.load_model(MODEL), kvbudget.find_gpu("H100-SXM-80GB")
    token = LAYERS * (KV_HEADS // 2) * HEAD_DIM  # one of K or V, a rank at TP 2
    current = sglang_plan(spec, gpu, SGLangSettings(tp=2, context_length=8192))
    old = sglang_plan(spec, gpu, SGLangSettings(version="0.4", tp=2, context_length=8192))
    bf16 = sglang_plan(spec, gpu, SGLangSettings(tp=2, context_length=8192, kv_cache_dtype="bf16"))
    assert current.cell_bytes == 2 * token * 1
    assert old.cell_bytes == bf16.cell_bytes == 2 * token * 2
    assert any("ModelOpt KV format, FP8" in line for line in current.notes)


# SGLang 0.5.23 reads the KV format its own way (layers/quantization/modelopt_quant.py from_config of
# ModelOptFp8Config / ModelOptFp4Config, then mem_cache/kv_cache_dtype.py configure_kv_cache_dtype: FP8 only when the
# resulting kv_cache_quant_algo is "FP8" case-folded), not as vLLM does: (quantization_config, SGLang FP8, vLLM auto)
FP8, NVFP4 = {"quant_method": "modelopt", "quant_algo": "FP8"}, {"quant_method": "modelopt", "quant_algo": "NVFP4"}
READINGS = [
    ({**FP8, "kv_cache_quant_algo": "FP8"}, True, "fp8_e4m3"),
    ({**FP8, "kv_cache_quant_algo": "fp8"}, True, "fp8_e4m3"),
    # a dict scheme of 8-bit floats is FP8 to SGLang whatever "dynamic" says; vLLM wants dynamic false
    ({**FP8, "kv_cache_scheme": {"dynamic": True, "num_bits": 8, "type": "float"}}, True, ""),
    # ModelOptFp8Config ignores a string scheme (and reads no kv_cache_quant_algo here); vLLM maps it
    ({**FP8, "kv_cache_scheme": "FP8"}, False, "fp8_e4m3"),
    # ModelOptFp4Config takes a string scheme stripped and case-folded, FLOAT8 too; vLLM's map has neither form
    ({**NVFP4, "kv_cache_scheme": " float8 "}, True, ""),
    ({**NVFP4, "kv_cache_scheme": "FP8"}, True, "fp8_e4m3"),
    # a 4-bit scheme: vLLM nvfp4, SGLang its model dtype (the scheme wins over kv_cache_quant_algo in both)
    ({**FP8, "kv_cache_quant_algo": "FP8", "kv_cache_scheme": {"num_bits": 4, "type": "float"}}, False, "nvfp4"),
    ({**FP8, "kv_cache_quant_algo": "NVFP4"}, False, "nvfp4"),
    # hf_quant_config.json's nested form: kv_cache_quant_algo alone
    ({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}, True,
     "fp8_e4m3"),
]


def test_sglang_reads_the_kv_format_as_its_modelopt_configs_do() -> None:
    for qc, sglang, vllm in READINGS:
        fmt = from_quantization_config(qc, "bf16", 32)
        assert (fmt.sglang_auto_fp8, fmt.vllm_auto_kv) == (sglang, vllm), qc


def test_sglang_plans_the_cache_it_reads(tmp_path: Path) -> None:
    """End to end on Llama-3.1-8B's dims (32 layers, 8 KV heads of 128): K and V per token at TP 1, one byte each
    for FP8, two for bf16; vLLM 0.33 for the same configs the other way round. Both were SGLang-planned as vLLM reads
    them (a dynamic scheme: bf16, half the tokens; a string scheme: FP8, twice the tokens), exit 0."""
    token = 32 * 8 * 128 * 2
    entry = catalog.find("llama-3.1-8b")
    assert entry is not None
    base = dict(entry.config)
    gpu = kvbudget.find_gpu("H100-SXM-80GB")
    for n, (qc, sglang, vllm) in enumerate(READINGS[2:4]):
        folder = tmp_path / str(n)
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({**base, "quantization_config": qc}))
        spec = kvbudget.load_model(str(folder))
        plan = sglang_plan(spec, gpu, SGLangSettings(context_length=8192))
        assert plan.cell_bytes == token * (1 if sglang else 2), qc
        v = vllm_plan(spec, gpu, VllmSettings(max_model_len=8192))
        assert v.kv_cache_dtype == (vllm or "bf16"), qc
