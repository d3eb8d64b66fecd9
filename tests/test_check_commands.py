"""`kvbudget check LOG -- <whole launch command>` on SGLang and TensorRT-LLM logs, and hostile words after --.

(1) Every corpus record (tests/data/sglang_logs, trtllm_logs) with a model and a GPU: the whole launch command
(``python -m sglang.launch_server --model-path M FLAGS``, ``trtllm-serve M FLAGS``, wrapped in ``docker run`` with
environment assignments and the shell's redirections) gives the very prediction the bare flags and --model give.
(2) The image's tag names the release where --sglang-version / --trtllm-release is not given: lmsysorg/sglang:v0.4.6.post1
plans the 0.4 line (sglang's .github/workflows/release-docker.yml tags each release v<version>-cu<CUDA>), an NGC
nvcr.io/nvidia/tensorrt-llm/release:0.18.0 image the 0.18 release (tagged with the TensorRT-LLM version it holds,
TensorRT-LLM's docker/README.md).
(3) An --extra_llm_api_options / --config file named in the command is read as the explain path reads it.
(4) Hostile words after --, through the CLI: exit 2, one line naming the problem and the fix, no traceback.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from kvbudget.cli import main
from kvbudget.engines.compared import is_launch_command, launcher
from kvbudget.engines.sglang.check import check_run as sglang_check
from kvbudget.engines.trtllm.check import check_run as trtllm_check

DATA = Path(__file__).resolve().parent / "data"
SGLANG_LAUNCH = ["python3", "-m", "sglang.launch_server"]

# the flags each record's run used that its stored log does not show (tests/test_other_check.py EXPECTED), and the
# release kvbudget must be told
FLAGS: dict[str, list[str]] = {
    "v0.5-era-feb2026_l40s_llama3.2-3b_mem0.2_hicache": [
        "--mem-fraction-static", "0.2", "--context-length", "35000", "--cuda-graph-max-bs", "32"],
    "v0.5-era-mar2026_24gb-x2_qwen3-14b_tp2_cpuoffload48": ["--mem-fraction-static", "0.65"],
    "v0.5-era-mar2026_80gb_qwen2.5-3b_no-cuda-graph": ["--disable-cuda-graph"],
    "v0.5-era-sep2026_16gb_qwen2.5-7b-awq_no-cuda-graph": ["--mem-fraction-static", "0.82", "--disable-cuda-graph"],
    "v0.18dev_h100-x2_tinyllama-1.1b_pytorch_dynamo-disagg-tp2": ["--tp_size", "2", "--kv_cache_free_gpu_memory_fraction", "0.25"],
}
TINY = DATA / "trtllm_logs" / "v0.18dev_h100-x2_tinyllama-1.1b_pytorch_dynamo-disagg-tp2.log"
QWEN_TP2 = DATA / "sglang_logs" / "v0.5-era-mar2026_24gb-x2_qwen3-14b_tp2_cpuoffload48.log"


def _records() -> list[Path]:
    out = []
    for sub in ("sglang_logs", "trtllm_logs"):
        for log in sorted((DATA / sub).glob("*.log")):
            kb = json.loads(log.with_suffix(".json").read_text(encoding="utf-8"))["kvbudget"]
            if "model" in kb and "gpu" in kb:
                out.append(log)
    return out


def _kb(log: Path) -> dict[str, Any]:
    return json.loads(log.with_suffix(".json").read_text(encoding="utf-8"))["kvbudget"]  # type: ignore[no-any-return]


def _check(log: Path, given: dict[str, Any]) -> Any:
    run = sglang_check if log.parent.name == "sglang_logs" else trtllm_check
    return run(log.read_text(encoding="utf-8"), {"gpu": _kb(log)["gpu"], **given})


def _same(a: Any, b: Any) -> None:
    """Two checks of one log that planned the same run: model, device, release, settings, every row."""
    assert (a.model, a.gpu, a.release, a.settings) == (b.model, b.gpu, b.release, b.settings)
    assert a.rows == b.rows and a.recomputed == b.recomputed
    assert (a.plan.kv_tokens if a.plan else None) == (b.plan.kv_tokens if b.plan else None)


@pytest.mark.parametrize("log", _records(), ids=lambda p: p.stem)
def test_a_whole_command_plans_what_its_bare_flags_plan(log: Path) -> None:
    model, flags = _kb(log)["model"], FLAGS.get(log.stem, [])
    extra = {"trtllm_release": "0.18"} if log == TINY else {}
    bare = _check(log, {"model": model, "flags": flags or None, **extra})  # None: no -- at all
    if log.parent.name == "sglang_logs":
        command = [*SGLANG_LAUNCH, "--model-path", model, *flags]
        wrapped = ["SGLANG_ENABLE_JIT_DEEPGEMM=0", "docker", "run", "--gpus", "all", "--ipc=host", "-e", "HF_TOKEN=x",
                   "lmsysorg/sglang:latest", *command, ">", "serve.log", "2>&1", "&"]
    else:
        command = ["trtllm-serve", model, *flags]
        wrapped = ["docker", "run", "--rm", "--gpus", "all", "nvcr.io/nvidia/tensorrt-llm/release:latest",
                   "mpirun", "-n", "1", "trtllm-llmapi-launch", *command, "2>/dev/null", "&"]
    for words in (command, wrapped, [" ".join(command)]):  # the model from the command, not --model
        whole = _check(log, {"flags": words, **extra})
        _same(whole, bare)
        assert "the command after --" in whole.read_from
    assert _check(log, {"model": model, "flags": command, **extra}).model == bare.model  # --model beside it: the same


def test_the_flags_after_dashes_over_the_log_are_those_of_the_command() -> None:
    # the 2 x 24 GB Qwen3-14B run: the log dropped its server_args line (mem_fraction_static 0.65); hand-made figures
    # aside, the fraction read from the command is the one planned, as from the bare flag
    whole = _check(QWEN_TP2, {"flags": [*SGLANG_LAUNCH, "--model-path", "Qwen/Qwen3-14B", "--mem-fraction-static", "0.65"]})
    assert dict(whole.settings)["mem_fraction_static"] == 0.65 and whole.model == "Qwen/Qwen3-14B"


def test_an_sglang_image_tag_names_the_release_line() -> None:
    model = _kb(QWEN_TP2)["model"]
    command = [*SGLANG_LAUNCH, "--model-path", model]
    tagged = _check(QWEN_TP2, {"flags": ["docker", "run", "lmsysorg/sglang:v0.4.6.post1-cu124", *command]})
    # the log's own 'Using KV cache dtype' line says the current line; the image (0.4.6.post1 < 0.4.8) says 0.4
    assert _check(QWEN_TP2, {"flags": command}).release == "current"
    assert tagged.release == "0.4"
    _same(tagged, _check(QWEN_TP2, {"flags": command, "sglang_version": "0.4"}))
    assert any("SGLang 0.4.6.post1, as the command's image" in n for n in tagged.notes)
    assert _check(QWEN_TP2, {"flags": ["docker", "run", "lmsysorg/sglang:v0.5.3-cu126", *command]}).release == "current"
    assert _check(QWEN_TP2, {"flags": ["docker", "run", "lmsysorg/sglang:v0.4.10.post2-cu126", *command]}).release == "0.4.8"
    # --sglang-version as given, the image's other line said; a tag that names no release: the log's line, said
    given = _check(QWEN_TP2, {"flags": ["docker", "run", "lmsysorg/sglang:v0.4.6.post1-cu124", *command],
                              "sglang_version": "current"})
    assert given.release == "current" and any("is SGLang 0.4.6.post1" in w for w in given.warnings)
    dev = _check(QWEN_TP2, {"flags": ["docker", "run", "lmsysorg/sglang:dev", *command]})
    assert dev.release == "current" and any("names no SGLang release" in w for w in dev.warnings)
    env = _check(QWEN_TP2, {"flags": ["SGLANG_ENABLE_JIT_DEEPGEMM=0", *command]})
    assert any("SGLANG_ENABLE_JIT_DEEPGEMM=0 is not read" in w for w in env.warnings)


def test_a_trtllm_image_tag_names_the_release() -> None:
    # the record's JSON plans release 0.18 (its whole blocks rounded up): the image's tag gives it, as
    # --trtllm-release 0.18 does; without either the current source's rules plan another pool
    kb, flags = _kb(TINY), FLAGS[TINY.stem]
    command = ["trtllm-serve", kb["model"], *flags]
    tagged = _check(TINY, {"flags": ["docker", "run", "nvcr.io/nvidia/tensorrt-llm/release:0.18.0", *command]})
    given = _check(TINY, {"flags": command, "trtllm_release": "0.18"})
    assert tagged.plan.kv_tokens == given.plan.kv_tokens
    assert tagged.plan.kv_tokens != _check(TINY, {"flags": command}).plan.kv_tokens
    assert "the command's image nvcr.io/nvidia/tensorrt-llm/release:0.18.0" in tagged.read_from
    other = _check(TINY, {"flags": ["docker", "run", "nvcr.io/nvidia/tensorrt-llm/release:1.0.0", *command],
                          "trtllm_release": "0.18"})
    assert other.plan.kv_tokens == given.plan.kv_tokens and any("is TensorRT-LLM 1.0.0" in w for w in other.warnings)
    triton = _check(TINY, {"flags": ["docker", "run", "nvcr.io/nvidia/tensorrt-llm/release:nightly", *command]})
    assert any("names no TensorRT-LLM release" in w for w in triton.warnings)


def test_an_options_file_in_the_command_is_read(tmp_path: Path) -> None:
    # tensor_parallel_size 2 and kv_cache_config.free_gpu_memory_fraction 0.25 from the LLM API options file: the
    # plan of the flags --tp_size 2 --kv_cache_free_gpu_memory_fraction 0.25
    options = tmp_path / "extra.yaml"
    options.write_text("tensor_parallel_size: 2\nkv_cache_config:\n  free_gpu_memory_fraction: 0.25\n", encoding="utf-8")
    model = _kb(TINY)["model"]
    bare = _check(TINY, {"model": model, "flags": FLAGS[TINY.stem], "trtllm_release": "0.18"})
    for option in ("--extra_llm_api_options", "--config"):
        whole = _check(TINY, {"flags": ["trtllm-serve", model, "--backend", "pytorch", option, str(options)],
                              "trtllm_release": "0.18"})
        assert whole.plan.kv_tokens == bare.plan.kv_tokens and whole.settings == bare.settings


def test_the_shared_rule() -> None:
    assert not is_launch_command(["--mem-fraction-static", "0.2"]) and not is_launch_command([])
    for words in (["python", "-m", "sglang.launch_server"], ["SGLANG_X=1", "sglang", "serve"], ["trtllm-serve", "M"],
                  ["docker", "run", "img"], ["mpirun", "-n", "2"], ["vllm", "serve", "M"]):
        assert is_launch_command(words), words
    assert launcher(["docker", "run", "vllm/vllm-openai:v0.10.2", "--model", "M"]) == "vLLM"
    assert launcher(["apptainer", "run", "vllm-openai_v0.10.2.sif", "--model", "M"]) == "vLLM"
    assert launcher(["A=1", "python3", "-m", "sglang.launch_server"]) == "SGLang"
    assert launcher(["sglang", "serve", "--model-path", "M"]) == "SGLang"
    assert launcher(["mpirun", "trtllm-llmapi-launch", "/usr/local/bin/trtllm-serve", "M"]) == "TensorRT-LLM"
    assert launcher(["llama-server", "-m", "x.gguf"]) == "llama.cpp"
    assert launcher(["docker", "run", "img", "python", "serve.py"]) is None


# --- hostile words after -- ---------------------------------------------------------------------------------

_SG = [*SGLANG_LAUNCH, "--model-path", "Qwen/Qwen3-14B"]
_TRT = ["trtllm-serve", "TinyLlama/TinyLlama-1.1B-Chat-v1.0"]


def _options(tmp: Path, kind: str) -> str:
    if kind == "folder":
        (tmp / "opts").mkdir()
        return str(tmp / "opts")
    path = tmp / f"{kind}.yaml"
    if kind == "binary":
        path.write_bytes(bytes(range(256)))
    elif kind == "huge":
        path.write_text("max_batch_size: 8\n# " + "x" * (5 << 20) + "\n", encoding="utf-8")
    elif kind == "list":
        path.write_text("- max_batch_size: 8\n- tensor_parallel_size: 2\n", encoding="utf-8")
    return str(path)  # "missing": not written


HOSTILE: dict[str, tuple[Path, list[str], tuple[str, ...]]] = {
    "nothing": (QWEN_TP2, [], ("nothing after --", "drop the --")),
    "empty-word": (QWEN_TP2, [""], ("nothing after --",)),
    "blank-string": (TINY, ["   "], ("nothing after --", "trtllm-serve MODEL")),
    "env-only": (QWEN_TP2, ["SGLANG_X=1", "CUDA_VISIBLE_DEVICES=0,1"], ("set the environment but launch nothing",
                                                                       "python -m sglang.launch_server")),
    "vllm-on-sglang": (QWEN_TP2, ["vllm", "serve", "Qwen/Qwen3-14B", "-tp", "2"], ("launches vLLM", "the log is SGLang's")),
    "vllm-image-on-sglang": (QWEN_TP2, ["docker", "run", "vllm/vllm-openai:v0.10.2", "--model", "M"],
                             ("launches vLLM", "the log is SGLang's")),
    "sglang-on-trtllm": (TINY, _SG, ("launches SGLang", "the log is TensorRT-LLM's", "trtllm-serve MODEL")),
    "trtllm-on-sglang": (QWEN_TP2, _TRT, ("launches TensorRT-LLM", "the log is SGLang's")),
    "llamacpp-on-trtllm": (TINY, ["llama-server", "-m", "x.gguf"], ("launches llama.cpp", "the log is TensorRT-LLM's")),
    "no-server": (QWEN_TP2, ["docker", "run", "img", "python", "serve.py"], ("names no SGLang server",)),
    "unbalanced-quote": (QWEN_TP2, [" ".join(_SG) + " --served-model-name 'qwen"], ("cannot be split", "close its quotes")),
    "huge-word": (QWEN_TP2, [*_SG, "--served-model-name", "q" * 100_000], ("more than the 65,536", "paste the command")),
    "huge-string": (TINY, ["trtllm-serve " + "m" * 200_000], ("more than the 65,536",)),
    "two-commands": (QWEN_TP2, [*_SG, "&&", *_SG], ("two commands joined by '&&'", "alone")),
    "bad-flag-in-command": (TINY, [*_TRT, "--tp-size", "2"], ("the command after --", "No such option: --tp-size")),
}
OPTION_FILES = {"missing": ("is not on this machine", "give the file's path here"), "folder": ("is a folder", "give a file"),
                "binary": ("not UTF-8 text", "is it the right file?"),
                "huge": ("more than the 4,194,304", "is it the right file?"),
                "list": ("must hold a mapping of LLM API options",)}


def _refused(capsys: pytest.CaptureFixture[str], log: Path, words: list[str], said: tuple[str, ...]) -> None:
    start = time.monotonic()
    assert main(["check", str(log), "--gpu", _kb(log)["gpu"], "--", *words]) == 2
    out, err = capsys.readouterr()
    assert time.monotonic() - start < 30
    assert out == "" and err.count("\n") == 1 and err.startswith("kvbudget: error: ") and "Traceback" not in err
    for piece in said:
        assert piece in err, (piece, err)


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_words_after_dashes_are_refused_in_one_line(case: str, capsys: pytest.CaptureFixture[str]) -> None:
    _refused(capsys, *HOSTILE[case])


@pytest.mark.parametrize("kind", sorted(OPTION_FILES))
@pytest.mark.parametrize("option", ["--extra_llm_api_options", "--config"])
def test_hostile_options_files_are_refused_in_one_line(kind: str, option: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    path = _options(tmp_path, kind)
    _refused(capsys, TINY, [*_TRT, option, path], (f"{option} ", *OPTION_FILES[kind]))
    _refused(capsys, TINY, [f"{option}={path}"], ("the flags after --", *OPTION_FILES[kind]))  # the bare flag alike


def test_redirections_and_a_closing_ampersand_are_the_shells(capsys: pytest.CaptureFixture[str]) -> None:
    command = [*_SG, "--mem-fraction-static", "0.65"]
    docs = []
    for words in (command, [*command, ">", "x.log", "2>&1", "&"], [*command, "2>/dev/null", "</dev/null"],
                  [" ".join(command) + " > x.log 2>&1 &"]):
        assert main(["check", str(QWEN_TP2), "--gpu", "RTX-4090", "--json", "--", *words]) == 0
        docs.append(json.loads(capsys.readouterr().out))
    assert all(d == docs[0] for d in docs[1:])


@pytest.mark.parametrize(("after", "said"), [
    ([], "nothing after --: give the vLLM run's flags"),
    (["python", "-m", "sglang.launch_server", "--model-path", "m"], "launches SGLang, but the log is vLLM's"),
    (["FOO=1"], "set the environment but launch nothing"),
    (["vllm", "serve", "a", "&&", "vllm", "serve", "b"], "two commands joined by '&&'"),
])
def test_vllm_logs_take_the_same_rule(after: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    # vLLM's check reads the words after -- through the same compared.run_words as SGLang's and TensorRT-LLM's
    log = str(DATA / "vllm_logs" / "v0.11-0.12_80gb-x2_gpt-oss-120b_tp2_default.log")
    assert main(["check", log, "--model", "openai/gpt-oss-120b", "--gpu", "A100-80GB", "--", *after]) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1 and "Traceback" not in err


VLLM_TP2 = DATA / "vllm_logs" / "v0.10.1.1_a100-40gb-x2_qwen2-7b_tp2-ray_gmu0.5.log"
_VLLM = "vllm serve Qwen/Qwen2-7B-Instruct --max-model-len 16384 --gpu-memory-utilization 0.5 -tp 2"


def _json(capsys: pytest.CaptureFixture[str], log: Path, gpu: str, words: list[str]) -> dict[str, Any]:
    assert main(["check", str(log), "--gpu", gpu, "--json", "--", *words]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


@pytest.mark.parametrize("words", [
    [_VLLM + " |& tee serve.log"], [_VLLM + " 2>&1 | tee -a serve.log"], ["cd /srv && source .venv/bin/activate && " + _VLLM],
    ["export HF_HOME=/data/hf; " + _VLLM], ["time", *_VLLM.split()], ["numactl", "--cpunodebind=0", *_VLLM.split()],
    ["taskset", "-c", "0-15", *_VLLM.split()], ["nice", "-n", "10", *_VLLM.split()], ["conda", "run", "-n", "vl", *_VLLM.split()],
    ["docker", "run", "--gpus", "all", "--entrypoint", "vllm", "vllm/vllm-openai:v0.10.1.1", *_VLLM.split()[1:]],
    ["docker", "run", "--gpus", "all", "--entrypoint", "python3", "vllm/vllm-openai:v0.10.1.1", "-m",
     "vllm.entrypoints.openai.api_server", "--model", *_VLLM.split()[2:]],
    ["apptainer", "exec", "--nv", "vllm-openai_v0.10.1.1.sif", *_VLLM.split()],
])
def test_shell_setup_and_wrappers_around_the_command_are_the_shells(words: list[str],
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # check LOG -- COMMAND reads the words explain reads: shell setup (cd, source, export, | tee) and wrappers
    # (time, numactl, taskset, nice, conda run; docker's --entrypoint, apptainer exec) around the one launch command
    # are the shell's; each was refused ('two commands joined by', 'unrecognized arguments: time', exit 2)
    plain = _json(capsys, VLLM_TP2, "A100-SXM4-40GB", _VLLM.split())
    assert _json(capsys, VLLM_TP2, "A100-SXM4-40GB", words) == plain


@pytest.mark.parametrize(("log", "words"), [
    (VLLM_TP2, ["CUDA_VISIBLE_DEVICES=0", *_VLLM.split()]),
    (VLLM_TP2, ["sudo", "-E", "CUDA_VISIBLE_DEVICES=1", *_VLLM.split()]),
    (VLLM_TP2, ["export CUDA_VISIBLE_DEVICES=0\n" + _VLLM]),
    (VLLM_TP2, ["docker", "run", "--gpus", "1", "vllm/vllm-openai:v0.10.1.1", *_VLLM.split()[2:]]),
    (QWEN_TP2, ["CUDA_VISIBLE_DEVICES=0", *SGLANG_LAUNCH, "--model-path", "Qwen/Qwen3-14B", "--tp", "2"]),
    (QWEN_TP2, ["env", "-i", "CUDA_VISIBLE_DEVICES=0", *SGLANG_LAUNCH, "--model-path", "Qwen/Qwen3-14B", "--tp", "2"]),
    (TINY, ["docker", "run", "-e", "CUDA_VISIBLE_DEVICES=0", "nvcr.io/nvidia/tensorrt-llm/release:0.18.0", "trtllm-serve",
            "TinyLlama/TinyLlama-1.1B-Chat-v1.0", "--tp_size", "2"]),
])
def test_a_command_that_shows_fewer_gpus_than_the_run_used_is_not_its_command(
        log: Path, words: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    # the engine stops at start-up on such a command (explain refuses it); check compared the log with it, exit 0
    _refused(capsys, log, words, ("shows 1:", "stops at start-up", "not the command of this run"))


def test_a_flag_typed_with_a_word_processors_dash_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    # explain names the dash; check said 'unrecognized arguments: \u2014max-model-len' (vLLM) or read it as a word
    _refused(capsys, VLLM_TP2, [_VLLM.replace("--max-model-len", "\u2014max-model-len")], ("U+2014", "type --max-model-len"))


@pytest.mark.parametrize(("words", "said"), [
    ([_VLLM.replace("-tp 2", "-tp $(nvidia-smi -L | wc -l)")], "-tp '$(nvidia-smi -L | wc -l)' is a shell expansion"),
    (["args:", '["--model",', '"Qwen/Qwen2-7B-Instruct",', '"--max-model-len",', '"16384"]'], "a YAML or JSON list"),
])
def test_words_the_shell_or_a_manifest_would_change_are_named(words: list[str], said: str,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    _refused(capsys, VLLM_TP2, words, (said,))
