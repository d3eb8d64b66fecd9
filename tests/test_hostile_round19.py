"""Hostile inputs, round 19: llama.cpp's tensor placement (-ot, --n-cpu-moe) and auto-fit lists (-fitt, -ts) against
what common/arg.cpp and llama-model-loader.cpp do (llama.cpp as vendored by llama-cpp-python 0.3.36), the GPUs a
llama-server command sees, and the log readers' JSON records. Each case failed on the code before it: a traceback, a
second line on standard error, gigabytes or tens of seconds before a refusal, or a plausible answer with exit 0 for
a command llama.cpp refuses or runs otherwise. The required outcome is the engine's own answer, or one error line
naming the problem and the fix, exit 2."""

from __future__ import annotations

import time
import warnings

import pytest

from test_hostile_round15 import _refused, _runs

QWEN = "Qwen/Qwen3-30B-A3B"  # 48 layers, 128 experts: 56.29 GiB of bf16 weights
EXPLAIN = ["explain", "--gpu", "RTX-4090", "--", "llama-server", "-m", QWEN, "-c", "8192", "-ngl", "99"]


# --- -ot patterns: ECMAScript's std::regex, not Python's re --------------------------------------------------------------

@pytest.mark.parametrize(("pattern", "said"), [
    (r"(?<!x)\.ffn_up_exps", "'(?<!' is Python's group syntax"),  # lookbehind: no such thing in std::regex
    ("(?P<x>exps)", "'(?P<' is Python's group syntax"),
    ("(?i)EXPS", "'(?i)' is Python's group syntax"),  # an inline flag: regex_error in std::regex
    ("(?>exps)", "'(?>e' is Python's group syntax"),  # an atomic group
    ("(?#note)exps", "'(?#n' is Python's group syntax"),
    ("exps*+", "'*+' is Python's possessive quantifier"),  # std::regex: 'nothing to repeat'
    ("(exps){1}+", "'{1}+' is Python's possessive quantifier"),
    (r"exps\Z", "Python's escape"),
])
def test_python_only_regex_syntax_is_refused(capsys: pytest.CaptureFixture[str], pattern: str, said: str) -> None:
    """Python's re took each and planned the experts in host memory, exit 0; llama.cpp's std::regex (ECMAScript)
    throws regex_error on them as llama-model-loader.cpp compiles the pattern, and the model does not load."""
    _refused(capsys, [*EXPLAIN, "-ot", f"{pattern}=CPU"], said, "not ECMAScript", "llama.cpp's std::regex")


def test_a_posix_class_is_refused_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """[[:alpha:]] is a class of letters to std::regex and a set of '[', ':', 'a' ... to Python: the plan matched
    otherwise than llama.cpp, and Python's 'FutureWarning: Possible nested set' took two more lines on stderr."""
    _refused(capsys, [*EXPLAIN, "-ot", "[[:alpha:]]+_exps=CPU"], "'[:' is a POSIX class")


def test_set_operators_python_warns_about_are_matched_quietly(capsys: pytest.CaptureFixture[str]) -> None:
    """'--' in a class is a literal to both; Python's FutureWarning ('Possible set difference') went to stderr."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _runs(capsys, [*EXPLAIN, "-ot", "[a-y--]exps=CPU"])
    assert not [w for w in caught if issubclass(w.category, FutureWarning)], caught


# --- how many overrides llama.cpp takes ------------------------------------------------------------------------------

@pytest.mark.parametrize("words", [["--n-cpu-moe", "4096"], ["-ncmoe", "2147483647"]])
def test_n_cpu_moe_of_4096_or_more_is_refused(capsys: pytest.CaptureFixture[str], words: list[str]) -> None:
    """common/arg.cpp adds one override per layer asked, pads the list to llama_max_tensor_buft_overrides() (4096) and
    common.cpp asserts that its last is empty: llama-server aborts. kvbudget planned 48 of 48 layers' experts in host
    memory, exit 0."""
    _refused(capsys, [*EXPLAIN, *words], f"{words[0]} {int(words[1]):,} adds", "fewer than 4,096",
             "Tensor buffer overrides not terminated")


def test_n_cpu_moe_below_the_cap_and_an_older_build_plan(capsys: pytest.CaptureFixture[str]) -> None:
    """4095 overrides leave the one empty terminator; a build before auto-fit's padding (b7407) takes any count."""
    out, _ = _runs(capsys, [*EXPLAIN, "--n-cpu-moe", "4095"])
    assert "with 48 of 48 layers' experts in host memory" in out
    out, _ = _runs(capsys, ["explain", "--gpu", "RTX-4090", "--llamacpp-build", "7000", "--", *EXPLAIN[3:],
                            "--n-cpu-moe", "5000"])
    assert "with 48 of 48 layers' experts in host memory" in out


# --- -fitt and -ts lists as common/arg.cpp splits them ----------------------------------------------------------------

def test_fit_target_list_split_at_slashes(capsys: pytest.CaptureFixture[str]) -> None:
    """common/arg.cpp splits -fitt at runs of ',' and '/': '-fitt 10/20' was 'not a whole number', exit 2."""
    out, _ = _runs(capsys, ["explain", "--gpu", "H100", "--", "llama-server", "-m", "Qwen/Qwen3-8B", "-c", "0",
                            "-fitt", "2048/4096"])
    assert "kvbudget plans 2048 MiB on every device" in out


@pytest.mark.parametrize("flag", ["-fitt", "-ts"])
def test_sixteen_device_values_are_refused(capsys: pytest.CaptureFixture[str], flag: str) -> None:
    """llama.cpp refuses a list of llama_max_devices() (16) values or more ('got 16 input configs, but system only
    has 16 devices'); kvbudget planned it (-ts: on 16 GPUs), exit 0."""
    _refused(capsys, ["explain", "--gpu", "H100", "--", "llama-server", "-m", "Qwen/Qwen3-8B", "-c", "0", flag,
                      ",".join(["1"] * 16)], f"{flag} 1,1,", "16 values", "fewer than 16")


# --- the GPUs a llama-server command sees ---------------------------------------------------------------------------

def test_num_gpus_are_the_devices_llama_cpp_splits_over(capsys: pytest.CaptureFixture[str]) -> None:
    """llama-server splits the layers over every GPU it sees: --num-gpus 3 was passed over and the 56 GiB model
    planned on one 24 GiB card ('will not start')."""
    out, _ = _runs(capsys, ["explain", "--gpu", "RTX-4090", "--num-gpus", "3", "--", *EXPLAIN[3:], "--fit", "off"])
    assert "CUDA2 model buffer size" in out and "Verdict: fits" in out


def test_cuda_visible_devices_are_the_devices_llama_cpp_sees(capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = _runs(capsys, ["explain", "--gpu", "RTX-4090", "--", "CUDA_VISIBLE_DEVICES=0,1,2", *EXPLAIN[3:],
                            "--fit", "off"])
    assert "CUDA2 model buffer size" in out and "Verdict: fits" in out


def test_ot_to_the_second_gpu_num_gpus_gives(capsys: pytest.CaptureFixture[str]) -> None:
    """-ot exps=CUDA1 on a two-GPU machine was refused: 'a plan with 1 GPU has no buffer type CUDA1'."""
    out, _ = _runs(capsys, ["explain", "--gpu", "H100", "--num-gpus", "2", "--", *EXPLAIN[3:], "-ot", "exps=CUDA1"])
    assert "CUDA1 model buffer size = 56729.19 MiB" in out


def test_tensor_split_longer_than_the_gpus_seen(capsys: pytest.CaptureFixture[str]) -> None:
    """-ts 1,1,1 with --num-gpus 2 was planned on three GPUs; llama-model.cpp reads the shares of the devices it has
    (the first two), so the plan is -ts 1,1's, said in a warning. Shares of the seen GPUs adding up to 0 are refused."""
    out, _ = _runs(capsys, ["explain", "--gpu", "H100", "--num-gpus", "2", "--", *EXPLAIN[3:], "-ts", "1,1,1"])
    assert "CUDA2" not in out and "CUDA1 model buffer size" in out
    assert "-ts lists 3 shares for the 2 GPUs llama.cpp sees: it splits by the first 2 (1,1)" in out
    _refused(capsys, ["explain", "--gpu", "H100", "--num-gpus", "2", "--", *EXPLAIN[3:], "-ts", "0,0,1"],
             "-ts 0,0,1: the shares of the 2 GPUs llama.cpp sees add up to 0")


# --- log readers: a log of millions of short JSON lines -------------------------------------------------------------

def test_millions_of_json_lines_without_a_text_key_are_passed_at_once() -> None:
    """16 MiB of '{"a":1}' lines (2 million): every line was decoded with json.loads, then each passed through the
    wrap and prefix passes line by line (a 64 MiB one: 43 s and 1.27 GB before 'no vLLM start-up figures'). No line
    names a text key, no line is long enough to be wrapped, and no prefix's mark is on half the lines: each pass
    is one scan in C."""
    from kvbudget.engines.logscan import open_log

    text = '{"a":1}\n' * (2 << 20)
    began = time.perf_counter()
    assert open_log(text, "vLLM").text == text
    assert time.perf_counter() - began < 4


def test_docker_records_decoded_a_chunk_at_a_time_read_as_the_lines_they_hold() -> None:
    """The chunked decoding keeps each record's text where it was, and a chunk holding a line that is not JSON is
    decoded line by line (those lines kept as they are)."""
    import json

    from kvbudget.engines.logscan import json_records

    lines = [f"INFO line {i}" for i in range(10_000)]
    docker = "".join(json.dumps({"log": line + "\n", "stream": "stdout"}) + "\n" for line in lines)
    assert json_records(docker) == "\n".join(lines) + "\n"
    broken = docker.replace('{"log": "INFO line 5000\\n"', '{"log": INFO line 5000', 1)
    assert json_records(broken).split("\n")[5000].startswith('{"log": INFO line 5000')
    assert json_records(broken).split("\n")[5001] == "INFO line 5001"
