"""A model on a vLLM release whose registry does not list its architecture is refused as vLLM refuses it
(engines/vllm/archs.py; the table archs.json from each release's PyPI wheel, tools/gen_vllm_archs.py)."""

from __future__ import annotations

import json

import pytest

import kvbudget
from kvbudget.engines.vllm import VllmSettings, plan
from kvbudget.engines.vllm.archs import TABLE, check_architecture
from kvbudget.units import InputError


def test_the_table_is_the_registries_read() -> None:
    data = json.loads(TABLE.read_text())
    assert data["releases"][0] == "0.6.4" and data["releases"][-1] == "0.33.0" and len(data["releases"]) == 29
    first = data["first_listed"]
    # registry.py of 0.18.0 lists no Gemma 4 and 0.19.0 does; Qwen3-Next came with 0.10.2 (not in 0.10.0's wheel)
    assert first["Gemma4ForConditionalGeneration"] == "0.19.0"
    assert first["Qwen3NextForCausalLM"] == "0.10.2"
    assert first["LlamaForCausalLM"] == "0.6.4"  # the oldest release read: nothing said of older ones


def test_a_release_before_the_architecture_is_refused() -> None:
    notes: list[str] = []
    with pytest.raises(InputError, match=r"vLLM 0.18.0 has no Gemma4ForConditionalGeneration .* from 0.19.0"):
        check_architecture("Gemma4ForConditionalGeneration", "0.18.0", "m", notes)
    with pytest.raises(InputError, match=r"vLLM v0\.10\.1\.1 has no"):
        check_architecture("Gemma4ForConditionalGeneration", "v0.10.1.1", "m", notes)
    # between the last release read without it and the first with it: said, not refused
    check_architecture("Gemma4ForConditionalGeneration", "0.18.1", "m", notes)
    assert notes and "lists it from 0.19.0 (not in 0.18.0)" in notes[0]
    notes.clear()
    for fine in (("Gemma4ForConditionalGeneration", "0.19.0"), ("LlamaForCausalLM", "0.2.4"),
                 ("MyCustomForCausalLM", "0.5.0"), ("Gemma4ForConditionalGeneration", "current")):
        check_architecture(*fine, "m", notes)
    assert notes == []


def test_the_plan_reads_the_configs_architecture() -> None:
    spec = kvbudget.load_model("google/gemma-4-26B-A4B")
    assert spec.architecture == "Gemma4ForConditionalGeneration"
    h100 = kvbudget.find_gpu("H100")
    with pytest.raises(InputError, match="has no Gemma4ForConditionalGeneration"):
        plan(spec, h100, VllmSettings(version="0.17.0", max_model_len=8192))
    assert plan(spec, h100, VllmSettings(version="0.19.0", max_model_len=8192)).num_gpu_blocks > 0
