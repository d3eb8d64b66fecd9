"""KVDtype: a KV cache dtype parsed once, against an engine's table of names."""

from __future__ import annotations

import pytest

from kvbudget.dtypes import parse_kv_dtype
from kvbudget.engines.base import default_registry
from kvbudget.engines.vllm import kv_cache_dtype
from kvbudget.units import InputError


def test_auto_is_the_model_dtype_and_not_fp8() -> None:
    kv = kv_cache_dtype(" AUTO ", "fp16")
    assert (kv.name, kv.element.name, kv.auto, kv.is_fp8) == ("fp16", "fp16", True, False)


def test_fp8_flavours() -> None:
    assert kv_cache_dtype("fp8", "bf16").fp8 == "e4m3"
    assert kv_cache_dtype("fp8_e5m2", "bf16").fp8 == "e5m2"
    assert kv_cache_dtype("fp8_ds_mla", "bf16").name == "fp8_ds_mla"  # vLLM's MLA layout keeps its own name
    assert kv_cache_dtype("fp8_inc", "bf16").is_fp8
    assert not kv_cache_dtype("int8_per_token_head", "bf16").is_fp8


def test_each_engine_accepts_its_own_caches() -> None:
    engines = default_registry()
    engines.get("vllm").check_kv("fp8_e5m2")
    with pytest.raises(InputError, match="matched as written: fp8_e5m2"):  # 0.33 matches as written (config/cache.py)
        engines.get("vllm").check_kv("FP8_E5M2")
    engines.get("sglang").check_kv("fp8")  # kvbudget's fp8: SGLang's fp8_e4m3
    engines.get("llama.cpp").check_kv("q4_0")
    with pytest.raises(InputError, match=r"--kv-dtype q4_0: not a KV-cache dtype vLLM 0\.33 takes"):
        engines.get("vllm").check_kv("q4_0")
    for engine, kv in (("trtllm", "fp8_e5m2"), ("sglang", "q8_0")):
        with pytest.raises(InputError, match=f"unknown --kv-dtype '{kv}': .* caches one of"):
            engines.get(engine).check_kv(kv)


def test_unknown_name_raises_the_engines_message() -> None:
    with pytest.raises(InputError, match="unknown --kv-cache-dtype 'fp9'"):
        kv_cache_dtype("fp9", "bf16")
    with pytest.raises(InputError, match=r"^nope$"):
        parse_kv_dtype("FP8", "bf16", {"fp8": "fp8_e4m3"}, "nope")  # the caller folds case, or not
