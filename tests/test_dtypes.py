"""KVDtype: a KV cache dtype parsed once, against an engine's table of names."""

from __future__ import annotations

import pytest

from kvbudget.dtypes import parse_kv_dtype
from kvbudget.engines.base import asked_kv
from kvbudget.engines.vllm import kv_cache_dtype
from kvbudget.units import InputError


def test_auto_is_the_model_dtype_and_not_fp8() -> None:
    kv = kv_cache_dtype(" AUTO ", "fp16")
    assert (kv.name, kv.element.name, kv.auto, kv.is_fp8) == ("fp16", "fp16", True, False)


def test_fp8_flavours() -> None:
    assert kv_cache_dtype("fp8", "bf16").fp8 == "e4m3"
    assert kv_cache_dtype("fp8_e5m2", "bf16").fp8 == "e5m2"
    assert kv_cache_dtype("fp8_ds_mla", "bf16").name == "fp8_ds_mla"  # vLLM's MLA layout keeps its own name
    assert asked_kv("fp8_inc", "bf16").is_fp8
    assert not asked_kv("int8_per_token_head", "bf16").is_fp8


def test_unknown_name_raises_the_engines_message() -> None:
    with pytest.raises(InputError, match="unknown --kv-cache-dtype 'fp9'"):
        kv_cache_dtype("fp9", "bf16")
    with pytest.raises(InputError, match=r"^nope$"):
        parse_kv_dtype("FP8", "bf16", {"fp8": "fp8_e4m3"}, "nope")  # the caller folds case, or not
