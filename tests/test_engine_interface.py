"""The engine interface (engines/base.py): a question written once asks every engine the same way, and an
engine kvbudget does not ship is one object added to a registry — here a toy engine with a rule simple enough
to check by hand."""

from __future__ import annotations

import pytest

import kvbudget
from kvbudget.engines.base import EnginePlan, Registry, Setup, Unsupported, default_registry, engine_plan
from kvbudget.engines.summary import compare
from kvbudget.hardware import GPU, find_gpu
from kvbudget.model.spec import ModelSpec
from kvbudget.report.text import compare_text
from kvbudget.units import GiB, InputError


class Toy:
    """Half the GPU for the KV cache, whatever the model weighs; bf16 only; one GPU only."""

    name, label = "toy", "Toy"
    multi_node, pipeline, tensor_parallel, pooled, lever_load, launch_hint = False, False, False, True, 1, ""
    kv_levers: tuple[str, ...] = ()
    fit_flags = frozenset({"batch"})
    fit_instead: tuple[tuple[str, str], ...] = ()

    def plan(self, spec: ModelSpec, gpu: GPU, setup: Setup) -> EnginePlan:
        if setup.kv_dtype != "auto":
            raise Unsupported("the toy caches bf16 only")
        per_token = kvbudget.kv(spec, context=1).bytes_per_token
        pool = gpu.memory_bytes // 2
        tokens = pool // per_token
        return engine_plan("toy", 0, pool, tokens, tokens / setup.context, setup.context, True, "half the GPU", "tokens")


def test_a_toy_engine_answers_compare_beside_the_real_ones() -> None:
    spec, h100 = kvbudget.load_model("llama-3.1-8b"), find_gpu("H100")
    registry = default_registry().with_engine(Toy())
    rows, omitted = compare(spec, h100, 8192, registry=registry)
    assert [r.engine for r in rows] == ["vllm", "sglang", "trtllm", "llama.cpp", "transformers", "toy"] and not omitted
    toy = rows[-1]
    # by hand: 79.18 GiB / 2 = 42,508,877,824 B; / 131,072 B per token (2 x 32 x 8 x 128 x 2) = 324,317 tokens
    assert toy.kv_budget_bytes == 85_017_755_648 // 2 and toy.kv_tokens == 324_317
    assert round(toy.max_concurrency, 2) == round(324_317 / 8192, 2)
    text = compare_text(rows, spec.name, 8192, "GiB", omitted)
    assert "toy" in text and "half the GPU" in text
    rows, omitted = compare(spec, h100, 8192, kv_dtype="fp8", registry=registry)
    assert ("toy", "the toy caches bf16 only") in omitted and "toy" not in [r.engine for r in rows]


def test_registry() -> None:
    registry = default_registry()
    assert registry.names() == ("vllm", "sglang", "trtllm", "llama.cpp", "transformers")
    assert registry.get("sglang").label == "SGLang"
    with pytest.raises(InputError, match="unknown engine 'tgi'"):
        registry.get("tgi")
    with pytest.raises(ValueError, match="two engines are named 'toy'"):
        Registry([Toy(), Toy()])
    assert default_registry().names() == registry.names()  # with_engine made a new registry


def test_an_engine_that_does_not_start_holds_nothing() -> None:
    # Llama-3.1-70B in bf16 (131 GiB) on one 80 GB H100: every engine's plan holds no pool, token or request
    rows, _ = compare(kvbudget.load_model("llama-3.1-70b"), find_gpu("H100"), 8192)
    assert rows and all(not r.starts and r.kv_budget_bytes == 0 and r.kv_tokens == 0 and r.max_concurrency == 0
                        for r in rows)
    vllm = rows[0]
    assert vllm.error and vllm.error.startswith("CUDA out of memory while loading")
    assert vllm.printed == (f"torch.OutOfMemoryError: {vllm.error}",)
    assert 131 * GiB < vllm.weights_bytes


def test_the_api_asks_any_engine_and_gets_the_row_compare_shows() -> None:
    spec, h100 = kvbudget.load_model("llama-3.1-8b"), find_gpu("H100")
    rows, _ = compare(spec, h100, 8192)
    for row in rows:
        assert kvbudget.engine_plan(spec, gpu="H100", engine=row.engine, context=8192) == row
    with pytest.raises(InputError, match="unknown engine 'tgi'"):
        kvbudget.engine_plan(spec, gpu="H100", engine="tgi")
    with pytest.raises(InputError, match="--context"):
        kvbudget.engine_plan(spec, gpu="H100", context=float("nan"))  # type: ignore[arg-type]
    with pytest.raises(Unsupported, match="no fp8 cache"):
        kvbudget.engine_plan(spec, gpu="H100", engine="transformers", kv_dtype="fp8")


def test_every_engine_is_asked_a_kv_dtype_it_has_and_keeps_its_own_error() -> None:
    spec = kvbudget.load_model("llama-3.1-8b")
    for engine, kv in (("llama.cpp", "q4_0"), ("sglang", "bogus"), ("vllm", "nvfp4")):
        with pytest.raises(InputError, match="is not one every engine has: use auto or fp8"):
            kvbudget.engine_plan(spec, gpu="H100", engine=engine, kv_dtype=kv)
    assert kvbudget.engine_plan(spec, gpu="H100", engine="sglang", kv_dtype="FP8").starts
    # TensorRT-LLM's own reason, not a generic one: 70B in bf16 on one H100
    trt = kvbudget.engine_plan("llama-3.1-70b", gpu="H100", engine="trtllm", context=8192)
    assert not trt.starts and trt.error == "no GPU memory left for the KV cache after the weights and the profiled peak"


def test_an_fp8_flavour_one_engine_lacks_leaves_it_out_of_compare() -> None:
    rows, omitted = compare(kvbudget.load_model("llama-3.1-8b"), find_gpu("H100"), 8192, kv_dtype="fp8_e5m2")
    assert [r.engine for r in rows] == ["vllm", "sglang", "llama.cpp"]
    assert dict(omitted)["trtllm"].startswith("its FP8 KV cache is e4m3")
