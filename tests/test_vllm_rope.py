"""RoPE scaling from the command line (--rope-scaling, --hf-overrides) and vLLM's derived max_model_len
(config.py _get_and_verify_max_len: YaRN is original_max_position_embeddings x factor up to 0.30, taken as already
scaled from 0.31; su/longrope/llama3 keep the config's length; other types multiply it)."""

from __future__ import annotations

from pathlib import Path

import pytest

import kvbudget
from kvbudget.engines.vllm import VllmSettings, plan
from kvbudget.engines.vllm.check import check_log
from kvbudget.engines.vllm.command import parse_vllm_command
from kvbudget.engines.vllm.rope import derived_len, parse_rope
from kvbudget.units import InputError

YARN = '{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768}'
LOG = Path(__file__).parent / "data" / "vllm_logs" / "v0.10.0_h100x4_qwen3-32b_tp4_yarn4_len131072_gmu0.95.log"


def test_derived_length_per_release_and_type() -> None:
    assert derived_len(parse_rope(YARN, "x"), 40960, 10)[0] == 32768 * 4  # 0.10: the original x factor
    assert derived_len(parse_rope(YARN, "x"), 40960, 30)[0] == 131072
    assert derived_len(parse_rope(YARN, "x"), 40960, 31)[0] == 40960  # 0.31 on: max_position_embeddings as scaled
    assert derived_len(parse_rope(YARN, "x"), 40960, None)[0] == 40960
    assert derived_len(parse_rope('{"type":"linear","factor":2}', "x"), 4096, 10)[0] == 8192
    assert derived_len(parse_rope('{"rope_type":"llama3","factor":8}', "x"), 131072, 10)[0] == 131072


@pytest.mark.parametrize("bad", ['{"rope_type":"warp","factor":2}', '{"rope_type":3}', '[1]', "nope",
                                 '{"rope_type":"yarn","factor":4}', '{"rope_type":"linear","factor":-2}',
                                 '{"rope_type":"yarn","factor":4,"original_max_position_embeddings":0}'])
def test_bad_rope_scaling_is_one_line(bad: str) -> None:
    with pytest.raises(InputError):
        parse_vllm_command(f"vllm serve Qwen/Qwen3-32B --rope-scaling '{bad}'")


def _max_len(cmd: str, version: str) -> int:
    launch = parse_vllm_command(cmd, VllmSettings(version=version))
    return plan(kvbudget.load_model("Qwen/Qwen3-32B"), kvbudget.find_gpu("H100"), launch.settings).max_model_len


def test_the_command_line_lifts_the_length_as_vllm_does() -> None:
    base = "vllm serve Qwen/Qwen3-32B -tp 4 --max-model-len 131072 "
    assert _max_len(base + f"--rope-scaling '{YARN}'", "0.10.0") == 131072
    assert _max_len(base + f"--hf-overrides '{{\"rope_scaling\": {YARN}}}'", "0.20.0") == 131072
    with pytest.raises(InputError, match="greater than the derived max_model_len"):
        _max_len(base, "0.10.0")  # no scaling: 40,960
    with pytest.raises(InputError, match="greater than the derived max_model_len"):
        _max_len(base + f"--hf-overrides '{{\"rope_scaling\": {YARN}}}'", "0.33.0")  # 0.31 on: 40,960 stands
    # other overrides are kept for the config planned (test_overrides_apply_to_the_config)
    launch = parse_vllm_command('vllm serve Qwen/Qwen3-32B --hf-overrides \'{"num_hidden_layers": 2}\'')
    assert launch.overrides == '{"num_hidden_layers": 2}'
    with pytest.raises(InputError, match="JSON object"):
        parse_vllm_command("vllm serve Qwen/Qwen3-32B --hf-overrides '[1]'")


def test_check_reads_the_scaling_from_the_logs_arguments() -> None:
    # a published 0.10.0 TP 4 run with YaRN x4 (provenance in its .json): the log's own max_model_len is planned
    result = check_log(LOG.read_text(), gpu="H100-SXM-80GB")
    assert result.plan.max_model_len == 131072


def test_overrides_apply_to_the_config() -> None:
    """--hf-overrides' config.json keys are applied to the config planned, as vLLM 0.33.0 applies them
    (config/model.py: PretrainedConfig.update of the flat keys). Llama-3.1-8B's config (32 layers, 8 KV heads,
    head_dim 128) with 16 layers holds 16 x 2 x 8 x 128 x 2 B = 65,536 B of bf16 KV a token, not 131,072; before, the
    published config was planned (exit 0, a warning)."""
    half = kvbudget.explain("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192 "
                            "--hf-overrides '{\"num_hidden_layers\": 16}'", gpu="H100")
    whole = kvbudget.explain("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192", gpu="H100")
    assert half.plan.bytes_per_block // half.plan.block_size == 16 * 2 * 8 * 128 * 2
    assert whole.plan.bytes_per_block == 2 * half.plan.bytes_per_block
    # a value transformers or vLLM refuses is refused in one line naming the override (was planned, exit 0)
    for value, words in [('{"num_hidden_layers": 0}', "field 'num_hidden_layers' must be positive, got 0"),
                         ('{"max_position_embeddings": -1}', "must be positive, got -1"),
                         ('{"max_position_embeddings": "8192"}', "must be a whole number, not '8192'"),
                         ('{"num_key_value_heads": 3}', "3 KV heads do not divide 32 attention heads")]:
        with pytest.raises(InputError, match=f"--hf-overrides .* on 'meta-llama/Llama-3.1-8B-Instruct': .*{words}"):
            kvbudget.explain(["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--hf-overrides", value], gpu="H100")


LLAMA_LOG = Path(__file__).parent / "data" / "vllm_logs" / "v0.11.0_a100-40gb_llama3.1-8b_len4096.log"


def test_check_applies_the_logs_own_overrides() -> None:
    """A log whose non-default args carry hf_overrides ran with them applied (vLLM 0.33.0 config/model.py applies
    them before anything reads the config), so `check` plans the overridden config, as `explain` does for the flag:
    16 of Llama-3.1-8B's 32 layers hold 16 x 2 x 8 x 128 x 2 B = 65,536 B a token. Before, the published config was
    planned (exit 0, the log's 16-layer run compared against a 32-layer prediction)."""
    text = LLAMA_LOG.read_text()
    args = "'max_model_len': 4096}"
    assert args in text
    whole = check_log(text, gpu="A100-SXM4-40GB")
    assert whole.plan.bytes_per_block // whole.plan.block_size == 32 * 2 * 8 * 128 * 2
    half = check_log(text.replace(args, "'max_model_len': 4096, 'hf_overrides': {'num_hidden_layers': 16}}"),
                     gpu="A100-SXM4-40GB")
    assert half.plan.bytes_per_block // half.plan.block_size == 16 * 2 * 8 * 128 * 2
    # the flag after -- wins over the log's, as in the command line vLLM read last
    flag = check_log(text, gpu="A100-SXM4-40GB", flags=["--hf-overrides", '{"num_hidden_layers": 8}'])
    assert flag.plan.bytes_per_block // flag.plan.block_size == 8 * 2 * 8 * 128 * 2
    with pytest.raises(InputError, match=r"--hf-overrides num_hidden_layers on .*must be positive, got 0"):
        check_log(text.replace(args, "'max_model_len': 4096, 'hf_overrides': {'num_hidden_layers': 0}}"),
                  gpu="A100-SXM4-40GB")
