"""#11: speculative drafts with weights of their own (EAGLE, EAGLE-3, a separate draft model), as vLLM builds them
(engines/vllm/speculative.py: config/speculative.py, models/llama_eagle.py, models/llama_eagle3.py,
v1/spec_decode/llm_base_proposer.py and draft_model.py of vLLM 0.33.0). Figures are hand computations from the
configs: the EAGLE-3 head's config.json in the draft catalog (src/kvbudget/model/catalog/drafts, its source URL
there), Llama-3.1-8B-Instruct and Llama-3.2-1B-Instruct from the model catalog."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import kvbudget
from kvbudget._record import replace
from kvbudget.cli import main
from kvbudget.engines.vllm import VllmSettings, plan
from kvbudget.engines.vllm.command import parse_vllm_command
from kvbudget.engines.vllm.launch import vllm_argv
from kvbudget.engines.vllm.speculative import draft_method
from kvbudget.units import InputError

TARGET = "meta-llama/Llama-3.1-8B-Instruct"
EAGLE3 = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
SMALL = "meta-llama/Llama-3.2-1B-Instruct"
BASE = VllmSettings(version="0.33.0", max_model_len=8192)


def _cmd(spec_config: dict[str, object], version: str = "0.33.0", tp: int = 1) -> kvbudget.engines.vllm.command.LaunchCommand:  # type: ignore[name-defined]
    argv = ["vllm", "serve", TARGET, "--max-model-len", "8192", "-tp", str(tp), "--speculative-config",
            json.dumps(spec_config)]
    return parse_vllm_command(argv, replace(BASE, version=version))


def _plans(spec_config: dict[str, object]) -> tuple[object, object]:
    spec, gpu = kvbudget.load_model(TARGET), kvbudget.find_gpu("H100")
    cmd = _cmd(spec_config)
    assert not cmd.warnings, cmd.warnings
    return plan(spec, gpu, replace(cmd.settings, speculative_method=None, num_speculative_tokens=0,
                                   speculative_draft=None)), plan(spec, gpu, cmd.settings)


# Llama-3.1-8B: hidden 4096, 32 layers, 32 Q / 8 KV heads of 128, MLP 14336, vocabulary 128256
H, KV_TOKEN_TARGET = 4096, 32 * 2 * 8 * 128 * 2  # K and V, bf16: 131,072 bytes per token


def test_eagle3_head_weights_kv_and_buffers_by_hand() -> None:
    base, eagle = _plans({"method": "eagle3", "model": EAGLE3, "num_speculative_tokens": 3})
    # llama_eagle3.py: fc 3h -> h; one decoder layer whose qkv_proj reads 2h; MLP 3 x 14336 x h; 3 norms; the final
    # norm; lm_head of draft_vocab_size 32000 rows; draft_id_to_target_id (int64, 32000); embedding the target's
    fc = 3 * H * H
    qkv_o = (32 * 128 + 2 * 8 * 128) * 2 * H + H * 32 * 128
    mlp = 3 * 14336 * H
    params = fc + qkv_o + mlp + 3 * H + H + 32000 * H
    assert eagle.model_loading_bytes - base.model_loading_bytes == 2 * params + 8 * 32000  # 849,635,328
    # one more attention layer of 8 KV heads x 128 in the pool: 4,096 bytes per token, pages of 16 tokens
    assert base.bytes_per_block == 16 * KV_TOKEN_TARGET
    assert eagle.bytes_per_block == 16 * (KV_TOKEN_TARGET + 2 * 8 * 128 * 2)
    assert eagle.num_gpu_blocks == eagle.available_kv_cache_bytes // eagle.bytes_per_block
    # the proposer's buffers over max_num_batched_tokens 8192: hidden_states (h, bf16), input_ids int32, positions int64
    assert eagle.activation_bytes - base.activation_bytes == 8192 * (2 * H + 4 + 8)
    assert any("EAGLE-3 head" in n for n in eagle.notes)


def test_draft_model_is_a_second_model_by_hand() -> None:
    base, draft = _plans({"model": SMALL, "num_speculative_tokens": 5})
    # Llama-3.2-1B: hidden 2048, 16 layers, 32 Q / 8 KV heads of 64, MLP 8192, tied embedding of 128256 rows
    layer = (2048 * 2048 + 2 * 512 * 2048) + 2048 * 2048 + 3 * 8192 * 2048 + 2 * 2048
    params = 128256 * 2048 + 16 * layer + 2048
    assert draft.model_loading_bytes - base.model_loading_bytes == 2 * params  # nothing shared (draft_model.py)
    assert draft.bytes_per_block == 16 * (KV_TOKEN_TARGET + 16 * 2 * 8 * 64 * 2)
    assert draft.activation_bytes - base.activation_bytes == 8192 * (2 * 2048 + 12)


def test_eagle1_head_from_a_local_config(tmp_path: Path) -> None:
    """An EAGLE-1 head (llama_eagle.py): fc 2h -> h, no bias; one decoder layer without its input_layernorm; no final
    norm and no lm_head (the target's). A local folder is read as vLLM reads the repo."""
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": H, "intermediate_size": 14336,
           "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 1, "vocab_size": 128256,
           "rms_norm_eps": 1e-5, "torch_dtype": "float16"}
    folder = tmp_path / "EAGLE-LLaMA3-Instruct-8B"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    spec, gpu = kvbudget.load_model(TARGET), kvbudget.find_gpu("H100")
    cmd = _cmd({"model": str(folder), "num_speculative_tokens": 2})
    assert cmd.settings.speculative_method == "eagle"  # "eagle-" in the name (config/speculative.py)
    base = plan(spec, gpu, BASE)
    eagle = plan(spec, gpu, cmd.settings)
    params = 2 * H * H + (32 * 128 + 2 * 8 * 128) * H + H * 32 * 128 + 3 * 14336 * H + H
    assert eagle.model_loading_bytes - base.model_loading_bytes == 2 * params


def test_method_a_bare_model_implies_per_release() -> None:
    """config/speculative.py: a model with no method is a draft_model unless its name says EAGLE; 0.10.1 took
    "eagle-" or "eagle3-" for EAGLE-1, 0.10.2 on tell "eagle3" apart."""
    assert draft_method("draft_model", EAGLE3, "0.33.0") == "eagle3"
    assert draft_method("draft_model", EAGLE3, "0.10.1") == "eagle"
    assert draft_method("draft_model", "yuhuili/EAGLE-LLaMA3-Instruct-8B", "0.20.0") == "eagle"
    assert draft_method("draft_model", SMALL, "0.33.0") == "draft_model"
    assert draft_method("eagle3", SMALL, "0.33.0") == "eagle3"
    assert _cmd({"model": EAGLE3, "num_speculative_tokens": 3}).settings.speculative_method == "eagle3"


def test_unknown_draft_config_warns_and_widens_the_band() -> None:
    cmd = _cmd({"method": "eagle3", "model": "someone/Unknown-EAGLE3-8B", "num_speculative_tokens": 3})
    assert any("no config.json for the draft" in w for w in cmd.warnings)
    assert cmd.settings.unmodelled == ("--speculative-config",) and cmd.settings.speculative_draft is None
    p = plan(kvbudget.load_model(TARGET), kvbudget.find_gpu("H100"), cmd.settings)
    band = dict(p.provenance)["available_kv_cache_bytes"].band  # type: ignore[attr-defined]
    assert "wider here: the memory of --speculative-config is not modelled" in band


def test_flags_vllm_refuses() -> None:
    with pytest.raises(InputError, match=r"draft_tensor_parallel_size 3 .*cannot be other value than 1"):
        _cmd({"method": "eagle3", "model": EAGLE3, "num_speculative_tokens": 3, "draft_tensor_parallel_size": 3}, tp=2)
    with pytest.raises(InputError, match="must be the same"):
        _cmd({"model": SMALL, "num_speculative_tokens": 3, "draft_tensor_parallel_size": 1}, tp=2)
    with pytest.raises(InputError, match=r"not supported yet.*0\.15\.0"):
        _cmd({"model": SMALL, "num_speculative_tokens": 3}, version="0.14.0")
    with pytest.raises(InputError, match="n_predict"):
        _cmd({"method": "eagle3", "model": EAGLE3})
    with pytest.raises(InputError, match="method eagle3 needs 'model'"):
        _cmd({"method": "eagle3", "num_speculative_tokens": 3})
    cmd = _cmd({"model": "Qwen/Qwen3-8B", "num_speculative_tokens": 3})  # another tokenizer: vLLM stops
    with pytest.raises(InputError, match="same vocabulary size"):
        plan(kvbudget.load_model(TARGET), kvbudget.find_gpu("H100"), cmd.settings)
    # EAGLE runs at the target's TP whatever draft_tensor_parallel_size says (its VllmConfig is the target's)
    tp1 = _cmd({"method": "eagle3", "model": EAGLE3, "num_speculative_tokens": 3, "draft_tensor_parallel_size": 1}, tp=2)
    assert tp1.settings.speculative_draft is not None


def test_cli_bad_draft_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["explain", f"vllm serve {TARGET} -tp 2 --speculative-config "
                 '\'{"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3, '
                 '"draft_tensor_parallel_size": 3}\'', "--gpu", "H100"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "draft_tensor_parallel_size" in err and "Traceback" not in err


def test_launch_round_trip_and_fit_option() -> None:
    cmd = _cmd({"method": "eagle3", "model": EAGLE3, "num_speculative_tokens": 3})
    back = parse_vllm_command(vllm_argv(TARGET, cmd.settings), replace(BASE, version="0.33.0"))
    assert back.settings.speculative_draft == cmd.settings.speculative_draft
    from kvbudget.engines.vllm.engine import _speculative

    fields = _speculative(json.dumps({"method": "eagle3", "model": EAGLE3, "num_speculative_tokens": 3}), "0.33.0")
    assert fields["speculative_method"] == "eagle3" and fields["speculative_draft"].draft_vocab == 32000
