"""Hostile inputs, round 15 (inputs other than config.json): start-up logs given to check / calibrate, launch commands
given to explain, option values and output paths. Each case failed on the code before it: a traceback, a refusal
for the wrong reason, or a plausible answer with exit 0. The required outcome is the engine's own answer, or one
error line naming the problem and the fix, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvbudget.cli import main

DATA = Path(__file__).parent / "data"
L4_LOG = DATA / "vllm_logs" / "v0.11.0_l4_llama3.1-8b_len32000_gmu0.92_mns128.log"


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str], *said: str) -> str:
    """``argv`` ends in exit 2 with one line on standard error holding each of ``said``."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("kvbudget: error: "), err
    for words in said:
        assert words in err, err
    return err


def _runs(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[str, str]:
    assert main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr()
    return out.out, out.err


# --- digit characters str.isdigit takes and int() / float() do not ('²', a superscript): a ValueError traceback --------

@pytest.mark.parametrize(("words", "said"), [
    (["--max-model-len", "²k"], "--max-model-len '²k' is not a whole number"),
    (["--max-model-len", "²K"], "--max-model-len '²K' is not a whole number"),
    (["--max-cudagraph-capture-size", "²"], "invalid int value: '²'"),
    (["--cudagraph-capture-sizes", "1", "²"], "invalid int value: '²'"),
    (["-cc", '{"cudagraph_capture_sizes": ["²"]}'], "cudagraph_capture_sizes '²' is not an integer"),
    (["-cc", '{"mode": "²"}'], "mode '²': give 0-3"),
])
def test_a_superscript_digit_in_a_vllm_flag_is_one_line(capsys: pytest.CaptureFixture[str], words: list[str],
                                                        said: str) -> None:
    _refused(capsys, ["explain", "--gpu", "H100", "--", "vllm", "serve", "llama-3.1-8b", *words], said)


def test_a_superscript_digit_in_a_vllm_release_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    _refused(capsys, ["explain", "--gpu", "H100", "--vllm-version", "0.²1", "--", "vllm", "serve", "llama-3.1-8b"],
             "unknown vLLM version '0.²1'")
    log = tmp_path / "run.log"
    log.write_text(L4_LOG.read_text(encoding="utf-8").replace("version 0.11.0", "version 0.²1.0"), encoding="utf-8")
    _refused(capsys, ["check", str(log), "--gpu", "L4"], "unknown vLLM version '0.²1.0'")


def test_docker_gpus_of_superscript_digits_is_no_count(capsys: pytest.CaptureFixture[str]) -> None:
    """docker run --gpus '²' (or count=²): no device count kvbudget can read (was int('²'): ValueError)."""
    for gpus in ("²", "count=²"):
        _runs(capsys, ["explain", "--gpu", "H100", "--", "docker", "run", "--gpus", gpus, "vllm/vllm-openai:v0.10.1",
                       "--model", "llama-3.1-8b", "--max-model-len", "8192"])


def test_a_model_named_with_a_superscript_size_plans_its_levers(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """levers' rule of thumb reads the size in a model's name ('-70b'): a folder named 'm-²b' crashed float('²')."""
    folder = tmp_path / "m-²b"
    folder.mkdir()
    (folder / "config.json").write_text(_llama_config(), encoding="utf-8")
    out, _ = _runs(capsys, ["levers", str(folder), "--gpu", "H100", "--context", "4096"])
    assert "FP8 weights" in out


def test_columns_of_superscript_digits_leaves_the_default_width(capsys: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    for columns in ("²", "0", "99999999999"):
        monkeypatch.setenv("COLUMNS", columns)
        _runs(capsys, ["gpus"])


def _llama_config() -> str:
    import json

    return json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
                       "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
                       "num_hidden_layers": 32, "vocab_size": 128256, "max_position_embeddings": 8192,
                       "torch_dtype": "bfloat16", "rms_norm_eps": 1e-5})
