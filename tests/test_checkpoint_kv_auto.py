"""--kv-cache-dtype auto on a checkpoint whose ModelOpt quantization config names its KV format: vLLM from 0.14
(utils/torch_utils.py resolve_kv_cache_dtype_string) and SGLang from 0.5.3 (model_runner.py / mem_cache/
kv_cache_dtype.py configure_kv_cache_dtype) cache in that format; earlier releases, other quantization methods and
an explicit dtype keep their own."""

from __future__ import annotations

import kvbudget
from kvbudget.engines.sglang import SGLangSettings
from kvbudget.engines.sglang import plan as sglang_plan
from kvbudget.engines.vllm import VllmSettings
from kvbudget.engines.vllm import plan as vllm_plan
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
    assert any("kv_cache_quant_algo FP8" in line for line in current.notes)
