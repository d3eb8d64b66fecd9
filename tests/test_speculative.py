"""#11: --speculative-config. MTP drafts from the model's own checkpoint (DeepSeek-V3, Qwen3-Next) as vLLM 0.33.0
builds them (engines/vllm/speculative.py); other drafts still warned of. Figures are hand computations from the
catalog configs."""

from __future__ import annotations

from pathlib import Path

import pytest

import kvbudget
from kvbudget._record import replace
from kvbudget.engines.vllm import VllmSettings, plan, request_blocks
from kvbudget.engines.vllm.command import parse_vllm_command
from kvbudget.engines.vllm.launch import vllm_argv
from kvbudget.engines.vllm.speculative import parse_speculative_config, with_mtp
from kvbudget.units import InputError

DSV3 = "deepseek-ai/DeepSeek-V3"
QNEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"
MTP2 = '{"method": "deepseek_mtp", "num_speculative_tokens": 2}'


def _spec(name: str) -> kvbudget.ModelSpec:  # type: ignore[name-defined]
    return kvbudget.load_model(name)


def test_deepseek_mtp_layer_bytes_by_hand() -> None:
    spec = _spec(DSV3)
    assert spec.mtp_layers == 1  # num_nextn_predict_layers
    h = 7168
    # one MoE MLA decoder layer: q_a 1536 x h, q_a norm, q_b 128*(128+64) x 1536, kv_a (512+64) x h, kv_a norm,
    # kv_b 128*(128+128) x 512, o h x 128*128; 256 routed + 1 shared expert of 3 x 2048 x h; router 256 x h
    attention = 1536 * h + 1536 + 128 * 192 * 1536 + 576 * h + 512 + 128 * 256 * 512 + h * 128 * 128
    moe = 257 * 3 * 2048 * h + 256 * h
    mtp = with_mtp(spec)
    layer = sum(t.params for t in spec.inventory.layers[60])
    assert attention + moe + 2 * h <= layer <= attention + moe + 2 * h + 256  # + e_score_correction_bias if read
    # plus eh_proj (2h -> h) and enorm, hnorm, shared_head.norm; the embedding and lm_head are the target's
    assert mtp.params - spec.params == layer + 2 * h * h + 3 * h
    # eh_proj is an nn.Linear: whole on every TP rank, never quantized
    eh = [t for t in mtp.inventory.tail if t.rows == h and t.cols == 2 * h]
    assert len(eh) == 1 and eh[0].split == "none" and not eh[0].linear


def test_deepseek_mtp_kv_and_loading() -> None:
    spec, gpu = _spec(DSV3), kvbudget.find_gpu("H200")
    base = VllmSettings(tensor_parallel_size=8, max_model_len=32768)
    a = plan(spec, gpu, base)
    b = plan(spec, gpu, replace(base, speculative_method="mtp", num_speculative_tokens=2))
    # one more MLA layer in the one pool: (512 + 64) x 2 bytes per token per layer, 61 -> 62 layers
    assert [g.kind for g in b.groups] == ["mla"] and len(b.groups[0].layers) == 62
    assert b.bytes_per_block * 61 == a.bytes_per_block * 62 == 62 * 61 * 1152 * a.block_size
    # no lookahead at start-up: FullAttentionSpec.max_memory_usage_bytes is cdiv(max_model_len, block_size)
    assert request_blocks(b, 32768) == request_blocks(a, 32768) == 32768 // a.block_size
    assert b.model_loading_bytes > a.model_loading_bytes and b.available_kv_cache_bytes < a.available_kv_cache_bytes


def test_qwen3_next_mtp_layer_and_groups() -> None:
    spec = _spec(QNEXT)
    assert spec.mtp_layers == 1  # config omits num_nextn_predict_layers: qwen3_next_mtp.py defaults it to 1
    mtp = with_mtp(spec)
    # one full-attention MoE decoder layer 1,642,076,672 + fc 2h x h 8,388,608 + 3 norms 6,144 (h = 2048)
    assert mtp.params - spec.params == 1_642_076_672 + 2 * 2048 * 2048 + 3 * 2048 == 1_650_471_424
    gpu = kvbudget.find_gpu("H200")
    base = VllmSettings(max_model_len=32768)
    a = plan(spec, gpu, base)
    b = plan(spec, gpu, replace(base, speculative_method="mtp", num_speculative_tokens=2))
    # 12 full + 36 GDN -> 13 full + 36 GDN: groups of 13 (36 >= 1.5 x 13), so 3 GDN groups with 3 padding layers
    full_a = [g for g in a.groups if g.kind == "full_attention"]
    full_b = [g for g in b.groups if g.kind == "full_attention"]
    assert [len(g.layers) for g in full_a] == [12] and [len(g.layers) for g in full_b] == [13]
    states = [g for g in b.groups if g.kind == "recurrent_state"]
    assert len(states) == 3 and sum(g.padding for g in states) == 3
    # MambaSpec num_speculative_blocks = num_speculative_tokens: 2 (align mode) + 2 state pages per request
    assert a.mamba_blocks == 2 and b.mamba_blocks == 4
    assert request_blocks(b, 32768) - request_blocks(a, 32768) == 3 * 2


def test_parse_command_and_config_file(tmp_path) -> None:
    cmd = parse_vllm_command(f"vllm serve {DSV3} -tp 8 --speculative-config '{MTP2}'")
    assert cmd.settings.speculative_method == "mtp" and cmd.settings.num_speculative_tokens == 2
    assert not cmd.warnings and not cmd.settings.unmodelled
    cfg = tmp_path / "c.yaml"
    cfg.write_text("speculative_config:\n  method: qwen3_next_mtp\n  num_speculative_tokens: 1\n")
    cmd = parse_vllm_command(f"vllm serve {QNEXT} --config {cfg}")
    assert (cmd.settings.speculative_method, cmd.settings.num_speculative_tokens) == ("mtp", 1)
    # n-gram takes no model and no KV: no warning
    cmd = parse_vllm_command(f"vllm serve {DSV3} --speculative-config "
                             "'{\"method\": \"ngram\", \"num_speculative_tokens\": 3, \"prompt_lookup_max\": 4}'")
    assert not cmd.warnings and cmd.settings.speculative_method == "ngram"


@pytest.mark.parametrize("value", ['{"method": "eagle3", "model": "someone/EAGLE3-Unknown-8B", '
                                   '"num_speculative_tokens": 3}',
                                   '{"method": "medusa", "model": "someone/medusa-head", "num_speculative_tokens": 4}',
                                   '{"model": "someone/Unknown-1B", "num_speculative_tokens": 4}'])
def test_unmodelled_draft_still_warns(value: str) -> None:
    cmd = parse_vllm_command(["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--speculative-config", value])
    assert any("does not model the memory" in w for w in cmd.warnings)
    assert cmd.settings.unmodelled == ("--speculative-config",)


def test_bad_values_and_no_mtp_layers() -> None:
    with pytest.raises(InputError, match="JSON"):
        parse_speculative_config("{method: mtp}")
    with pytest.raises(InputError, match="num_speculative_tokens"):
        parse_speculative_config('{"method": "mtp"}')
    with pytest.raises(InputError, match="no MTP layers"):
        plan(_spec("meta-llama/Llama-3.1-8B-Instruct"), kvbudget.find_gpu("H100"),
             VllmSettings(speculative_method="mtp", num_speculative_tokens=1))


def test_a_draft_method_without_its_model_stops_vllm() -> None:
    """config/speculative.py (0.33.0) SpeculativeConfig.__post_init__: with no "model", only mtp/dspark (the target's
    checkpoint), ngram/ngram_gpu/suffix (no weights) and extract_hidden_states have a draft; eagle, eagle3 and the
    inferred draft_model raise "num_speculative_tokens was provided but without speculative model", and with no
    num_speculative_tokens either, _verify_args raises. Was: a warning and a plan, exit 0."""
    for value, missing in [('{"method": "eagle"}', "'model' and 'num_speculative_tokens'"),
                           ('{"method": "eagle3", "num_speculative_tokens": 3}', "'model' ("),
                           ('{"num_speculative_tokens": 3}', "method draft_model needs 'model' ("),
                           ('{"method": "mtp"}', "'num_speculative_tokens' ("),
                           ('{"method": "ngram"}', "'num_speculative_tokens' (")]:
        with pytest.raises(InputError, match=r"needs .*\(vLLM stops") as err:
            parse_speculative_config(value)
        assert missing in str(err.value), (value, str(err.value))
    for value in ('{"method": "suffix", "num_speculative_tokens": 3}', '{"method": "dspark", "num_speculative_tokens": 3}',
                  '{"method": "eagle", "model": "yuhuili/EAGLE-LLaMA3.1-Instruct-8B"}'):  # n_predict may give the count
        parse_speculative_config(value)


def test_spec_short_flags_are_read_into_the_config() -> None:
    """--spec-method / --spec-model / --spec-tokens (0.33 engine/arg_utils.py create_speculative_config) set those keys
    of --speculative-config; a key given both ways stops vLLM. Were passed over: the MTP draft left out of the plan."""
    short = parse_vllm_command(f"vllm serve {DSV3} -tp 8 --spec-method deepseek_mtp --spec-tokens 2")
    long = parse_vllm_command(f"vllm serve {DSV3} -tp 8 --speculative-config '{MTP2}'")
    assert short.settings == long.settings and short.settings.speculative_method == "mtp"
    mixed = parse_vllm_command(f"vllm serve {DSV3} -tp 8 --spec-tokens 2 --speculative-config '{{\"method\": \"mtp\"}}'")
    assert mixed.settings == long.settings
    with pytest.raises(InputError, match=r"--spec-tokens and --speculative-config\['num_speculative_tokens'\] are mutually"):
        parse_vllm_command(f"vllm serve {DSV3} --spec-tokens 1 --speculative-config '{MTP2}'")
    with pytest.raises(InputError, match="method eagle needs 'model'"):
        parse_vllm_command(f"vllm serve {DSV3} --spec-method eagle --spec-tokens 3")


def test_launch_command_round_trip() -> None:
    s = VllmSettings(tensor_parallel_size=8, speculative_method="mtp", num_speculative_tokens=2)
    argv = vllm_argv(DSV3, s)
    back = parse_vllm_command(argv)
    assert (back.settings.speculative_method, back.settings.num_speculative_tokens) == ("mtp", 2)


def test_fit_option() -> None:
    from kvbudget.engines.vllm.engine import _speculative

    assert _speculative(MTP2) == {"speculative_method": "mtp", "num_speculative_tokens": 2, "speculative_draft": None}
    with pytest.raises(InputError, match="eagle"):
        _speculative('{"method": "eagle", "model": "x/EAGLE-LLaMA3-Instruct-8B", "num_speculative_tokens": 2}')


def test_a_config_with_thousands_of_mtp_layers_is_refused_in_one_line(tmp_path: Path) -> None:
    """num_nextn_predict_layers is read with a bound: 10^8 would build a draft larger than memory."""
    import json

    from kvbudget.model import catalog
    from kvbudget.model.resolve import load_model
    from kvbudget.units import InputError

    config = dict(catalog.find("deepseek-v3").config)  # type: ignore[union-attr]
    config["num_nextn_predict_layers"] = 100_000_000
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(InputError, match="num_nextn_predict_layers 100,000,000 is beyond any real model"):
        load_model(str(tmp_path))
