"""A log that holds two start-ups (a restarted server appended to its log, two logs pasted together): SGLang's and
llama.cpp's readers mixed one run's lines with the other's (exit 0); vLLM's reads the last one, and now says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvbudget.cli import main

DATA = Path(__file__).resolve().parent / "data"
SGLANG = DATA / "sglang_logs" / "v0.4.1docs_h100_llama3.1-8b_default.log"  # prints server_args=ServerArgs(...) once
LLAMA = DATA / "llamacpp_logs" / "b4445_ggml-ci_v100_pythia-2.8b_f16.log"  # prints ggml_cuda_init: found ... once
VLLM_A = DATA / "vllm_logs" / "v0.10.1.1_a100-40gb-x2_qwen2-7b_tp2-ray_gmu0.5.log"
VLLM_B = DATA / "vllm_logs" / "v0.10.0_h100x8_qwen3-32b_tp8_kvfp8_len32768.log"


@pytest.mark.parametrize(("log", "said"), [(SGLANG, "2 start-ups of SGLang (its ServerArgs line printed 2 times"),
                                           (LLAMA, "2 start-ups of llama.cpp ('ggml_cuda_init: found N CUDA devices'")])
def test_two_start_ups_of_sglang_or_llamacpp_are_refused(log: Path, said: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(log)]) == 0  # one start-up: read
    capsys.readouterr()
    twice = tmp_path / "twice.log"
    twice.write_text(log.read_text(encoding="utf-8") * 2, encoding="utf-8")
    assert main(["check", str(twice)]) == 2
    err = capsys.readouterr().err
    assert said in err and "give one run's lines" in err and err.count("\n") == 1


def test_two_vllm_start_ups_check_the_last_and_say_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    both = tmp_path / "both.log"
    both.write_text(VLLM_A.read_text(encoding="utf-8") + VLLM_B.read_text(encoding="utf-8"), encoding="utf-8")
    assert main(["check", str(both), "--gpu", "H100", "--json"]) == 0
    doc = capsys.readouterr().out
    assert main(["check", str(VLLM_B), "--gpu", "H100", "--json"]) == 0
    alone = capsys.readouterr().out
    assert "the log holds 2 start-ups of the vLLM API server" in doc and "the last one is checked" in doc
    assert "start-ups" not in alone
