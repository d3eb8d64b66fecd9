"""Tensor parallelism must split a Mamba / GatedDeltaNet layer's state as the engine splits it (hostile-input round
13). vLLM 0.33.0 model_executor/layers/mamba/mamba_utils.py (MambaStateShapeCalculator) divides each recurrent
layer's heads and convolution channels by TP with ``divide``, which asserts: a TP that splits the attention heads
but not those stops vLLM at start-up. Before, the state was floored per rank and the plan printed, exit 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvbudget.cli import main
from kvbudget.kvcache import check_tp, tp_layers
from kvbudget.model import catalog
from kvbudget.model.layers import Layer
from kvbudget.model.resolve import load_model
from kvbudget.model.spec import ModelSpec
from kvbudget.units import InputError


def test_tp_that_does_not_split_the_gated_delta_net_state_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    # Qwen3.5-27B (catalog config): 24 attention heads, 4 KV heads; GatedDeltaNet with 16 key heads and 48 value heads
    # of 128: convolution channels 2 x 16 x 128 + 48 x 128 = 10,240. TP 12 splits 24 heads and replicates the 4 KV
    # heads, splits the 48 value heads (4 each), but 10,240 / 12 is not whole.
    assert main(["fit", "qwen3.5-27b", "--gpu", "H100-SXM-80GB", "--tp", "12"]) == 2
    err = capsys.readouterr().err
    assert err == ("kvbudget: error: --tp 12 does not divide the 10,240 gated_delta_net convolution channels of "
                   "Qwen/Qwen3.5-27B (the engine stops at start-up): use one of [1, 2, 4, 8]\n")
    spec = load_model("qwen3.5-27b")
    for tp in (1, 2, 4, 8):  # 24 % tp, 48 % tp and 10,240 % tp are all 0
        check_tp(spec, tp)
    assert main(["kv", "qwen3.5-27b", "--tp", "12"]) == 2  # kv reads the same rule
    assert "10,240 gated_delta_net convolution channels" in capsys.readouterr().err


def test_mamba2_groups_are_replicated_before_the_split() -> None:
    # Nemotron-H-8B (catalog config): 32 attention heads, 8 KV heads, 128 Mamba-2 heads of 64, 8 groups of state 128.
    # TP 16: the 8 groups are replicated to 16 (extra_groups_for_head_shards), channels 128 x 64 + 2 x 16 x 128 =
    # 12,288 = 16 x 768, and the 128 heads split 8 a rank: vLLM starts, and so does the plan.
    check_tp(load_model("nemotron-h-8b-base-8k"), 16)
    with pytest.raises(InputError, match="--tp 64 does not divide the 32 attention heads"):
        check_tp(load_model("nemotron-h-8b-base-8k"), 64)


def test_value_heads_that_are_not_a_multiple_of_the_key_heads_are_refused(capsys: pytest.CaptureFixture[str],
                                                                           tmp_path: Path) -> None:
    """vLLM 0.33.0 gdn/qwen_gdn_linear_attn.py gives each key head num_v_heads // num_k_heads value heads (its
    reshapes need a whole number), as transformers' Qwen3-Next does. Before, 31 value heads on 16 key heads were
    planned (24,576 bytes of KV a token, exit 0)."""
    config = dict(catalog.find("qwen3-next-80b-a3b").config)  # type: ignore[union-attr]
    (tmp_path / "config.json").write_text(json.dumps({**config, "linear_num_value_heads": 31}))
    assert main(["kv", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "linear_num_value_heads 31 is not a multiple of linear_num_key_heads 16: fix the config.json" in err
    assert err.count("\n") == 1


def _refusal(spec: ModelSpec, tp: int, layers: tuple[Layer, ...] | None) -> str:
    try:
        check_tp(spec, tp, layers)
    except InputError as exc:
        return str(exc)
    return ""


def test_the_layers_a_search_gathers_once_refuse_as_every_layer_does() -> None:
    # kvcache.tp_layers keeps the first layer of each KV-head count and each distinct recurrent state: checking those
    # (as a plan search does, once per model) gives every catalog model and TP degree the same answer, and the same first
    # error, as walking every layer
    refused = 0
    for entry in catalog.entries():
        spec = load_model(entry.id)
        layers = tp_layers(spec)
        assert len(layers) <= len(spec.layers)
        for tp in (1, 2, 3, 4, 5, 6, 8, 12, 16, 32, 64):
            said = _refusal(spec, tp, None)
            assert _refusal(spec, tp, layers) == said, (entry.id, tp)
            refused += bool(said) and "attention heads" not in said
    assert refused  # some refusals came from the layers' KV heads or states, not the attention heads alone
