"""A model on an SGLang release line none of whose releases registers its architecture is refused as SGLang refuses
it (engines/sglang/archs.py; archs.json from each release's PyPI wheel, tools/gen_sglang_archs.py)."""

from __future__ import annotations

import json
import re

import pytest

import kvbudget
from kvbudget.engines.sglang import SGLangSettings, plan
from kvbudget.engines.sglang.archs import TABLE, check_architecture
from kvbudget.units import InputError


def test_the_table_is_the_wheels_entry_classes() -> None:
    data = json.loads(TABLE.read_text())
    assert data["releases"][0] == "0.3.0" and data["releases"][-1] == "0.5.23" and len(data["releases"]) == 68
    first = data["first_listed"]
    assert first["LlamaForCausalLM"] == "0.3.0"
    assert first["Gemma4ForConditionalGeneration"] == "0.5.11"  # models/gemma4_mm.py's EntryClass
    assert first["Qwen3ForCausalLM"] == "0.4.5.post3"  # the first 0.4.5 wheel read


def test_a_line_before_the_architecture_is_refused_and_one_spanning_it_noted() -> None:
    notes: list[str] = []
    for line in ("0.4", "0.4.8"):
        with pytest.raises(InputError, match=rf"SGLang.s {re.escape(line)} line has no Gemma4ForConditionalGeneration"):
            check_architecture("Gemma4ForConditionalGeneration", line, "m", notes)
    check_architecture("Gemma4ForConditionalGeneration", "current", "m", notes)  # 0.5.3 on: spans 0.5.11
    check_architecture("Qwen3ForCausalLM", "0.4", "m", notes)  # 0.4.0-0.4.7 spans 0.4.5
    assert len(notes) == 2 and "from 0.5.11" in notes[0] and "from 0.4.5.post3" in notes[1]
    notes.clear()
    check_architecture("LlamaForCausalLM", "0.4", "m", notes)
    check_architecture("MyCustomForCausalLM", "0.4", "m", notes)
    assert notes == []


def test_the_plan_reads_the_configs_architecture() -> None:
    spec, h100 = kvbudget.load_model("google/gemma-4-26B-A4B"), kvbudget.find_gpu("H100")
    with pytest.raises(InputError, match=r"0\.4 line has no Gemma4ForConditionalGeneration"):
        plan(spec, h100, SGLangSettings(version="0.4", context_length=8192))
    p = plan(spec, h100, SGLangSettings(context_length=8192))
    assert p.max_total_num_tokens > 0 and any("registers it from 0.5.11" in n for n in p.notes)
