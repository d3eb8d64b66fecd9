"""A re-published checkpoint planned by its name (kvbudget.model.derived): which catalog model, which format.

The AWQ case is checked against the real thing: the catalog holds Qwen's own Qwen2.5-*-Instruct-AWQ config.json
files (https://huggingface.co/Qwen/Qwen2.5-14B-Instruct-AWQ/blob/main/config.json), so a name that re-publishes
Qwen2.5-14B-Instruct as AWQ must come out with the same layers and the same weight bytes as that file gives."""

from __future__ import annotations

import pytest

from kvbudget.model import catalog
from kvbudget.model.derived import derive, strip_suffixes
from kvbudget.model.hf_config import spec_from_config
from kvbudget.model.resolve import load_foreign_model
from kvbudget.model.spec import WEIGHTS_FIX, checkpoint_format
from kvbudget.units import InputError


@pytest.mark.parametrize(("name", "base", "words"), [
    ("Qwen3-8B-AWQ", "Qwen3-8B", ("awq",)),
    ("Meta-Llama-3.1-70B-Instruct-AWQ-INT4", "Meta-Llama-3.1-70B-Instruct", ("int4", "awq")),
    ("Meta-Llama-3.1-70B-Instruct-quantized.w8a8", "Meta-Llama-3.1-70B-Instruct", ("w8a8", "quantized")),
    ("Qwen2.5-7B-Instruct-bnb-4bit", "Qwen2.5-7B-Instruct", ("4bit", "bnb")),
    ("Llama-3.3-70B-Instruct-FP8-dynamic", "Llama-3.3-70B-Instruct", ("dynamic", "fp8")),
    ("Mistral-7B-Instruct-v0.3-GPTQ-4-bit", "Mistral-7B-Instruct-v0.3", ("4bit", "gptq")),
    ("Llama-3.1-8B", "Llama-3.1-8B", ()),  # "3.1" and "8B" are not format words
])
def test_format_words_come_off_the_end_only(name: str, base: str, words: tuple[str, ...]) -> None:
    assert strip_suffixes(name) == (base, words)


@pytest.mark.parametrize(("ref", "entry_id", "method", "bits"), [
    ("Qwen/Qwen3-4B-AWQ", "Qwen/Qwen3-4B", "awq", 4),
    ("hugging-quants/Meta-Llama-3.1-405B-Instruct-AWQ-INT4", "meta-llama/Llama-3.1-405B-Instruct", "awq", 4),
    # re-published under another owner, a name the catalog holds is that entry, with its own config.json
    ("someone/Qwen3-8B-AWQ", "Qwen/Qwen3-8B-AWQ", "awq", 4),
    ("mirror/Meta-Llama-3.1-70B-Instruct-AWQ-INT4", "hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4", "awq", 4),
    ("TheBloke/Llama-2-7B-Chat-GPTQ", "meta-llama/Llama-2-7b-chat-hf", "gptq", 4),
    ("unsloth/Qwen2.5-7B-Instruct-bnb-4bit", "Qwen/Qwen2.5-7B-Instruct", "nf4", 4),
    ("RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", "meta-llama/Llama-3.3-70B-Instruct", "fp8", 8),
    ("neuralmagic/Meta-Llama-3.1-70B-Instruct-quantized.w8a8", "meta-llama/Llama-3.1-70B-Instruct", "int8", 8),
    ("casperhansen/deepseek-r1-distill-qwen-14b-awq", "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", "awq", 4),
    ("unsloth/Llama-3.2-3B-Instruct", "meta-llama/Llama-3.2-3B-Instruct", "bf16", 16),  # another owner
    ("TheBloke/CodeLlama-13B-Instruct-fp16", "codellama/CodeLlama-13b-hf", "fp16", 16),  # "-hf" on both sides
])
def test_a_republished_name_is_its_catalog_model_in_its_format(ref: str, entry_id: str, method: str, bits: int) -> None:
    found = derive(ref)
    assert found is not None
    entry, config, note = found
    assert entry.id == entry_id and entry_id in note and ref in note
    fmt = checkpoint_format(spec_from_config(config, name=ref), WEIGHTS_FIX)
    assert fmt.name == method and (fmt.bits or 16) == bits


def test_a_derived_awq_config_weighs_what_the_published_one_does() -> None:
    published = catalog.find("Qwen/Qwen2.5-14B-Instruct-AWQ")
    found = derive("someone/Qwen2.5-14B-Instruct-AWQ-4bit")  # not the catalog's name: derived from the bf16 one
    assert published is not None and found is not None
    entry, config, _ = found
    assert entry.id == "Qwen/Qwen2.5-14B-Instruct"
    mine, theirs = spec_from_config(config), spec_from_config(published.config)
    assert mine.layers == theirs.layers
    fmt_mine, fmt_theirs = checkpoint_format(mine, WEIGHTS_FIX), checkpoint_format(theirs, WEIGHTS_FIX)
    assert fmt_mine == fmt_theirs
    mine_bytes = sum(fmt_mine.tensor_bytes(t) for t in mine.inventory.tensors())
    assert mine_bytes == sum(fmt_theirs.tensor_bytes(t) for t in theirs.inventory.tensors())
    assert 9.0 < mine_bytes / 2**30 < 10.0  # vLLM logs 9.38 GiB loading it (tests/data/vllm_logs, RTX A5000 0.13.0)


@pytest.mark.parametrize("ref", [
    "cpatonn/Qwen3-30B-A3B-Thinking-2507-AWQ-4bit",  # a fine-tune's own name: another config, not guessed
    "lmstudio-community/Llama-3.2-3B-Instruct-GGUF",  # a GGUF repo has no config.json that vLLM loads
    "acme/not-a-model-AWQ",
    "AWQ",
    "x" * 10_000 + "-AWQ",
    "",
])
def test_other_names_are_not_guessed(ref: str) -> None:
    assert derive(ref) is None


def test_a_log_s_local_path_is_planned_from_its_folder_name(capsys: pytest.CaptureFixture[str]) -> None:
    spec = load_foreign_model("/mnt/models/llama3-70b-awq")
    err = capsys.readouterr().err
    assert "planned as meta-llama/Meta-Llama-3-70B-Instruct" in err and "AWQ 4-bit" in err
    assert checkpoint_format(spec, WEIGHTS_FIX).name == "awq"
    with pytest.raises(InputError, match="no such file"):
        load_foreign_model("/mnt/models/my-own-model")
