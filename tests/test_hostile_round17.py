"""Hostile inputs, round 17: calibrate over SGLang and TensorRT-LLM logs, site profiles read by their plans, check of
SGLang logs, unified-memory devices and vLLM's nearest release. Each case failed on the code before it: a traceback,
a refusal for the wrong reason, or a plausible answer with exit 0. The required outcome is the engine's own answer,
or one error line naming the problem and the fix, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvbudget.cli import main
from test_hostile_round15 import _refused

DATA = Path(__file__).parent / "data"
SGLANG_WSL = DATA / "sglang_logs" / "v0.4.9docker_24gb-wsl_llama3.1-8b_default.log"  # avail 7.37 GB, usage 15.02 GB
TRT_020 = DATA / "trtllm_logs" / "v0.20.0_h100-sxm_llama3.1-8b-fp8_pytorch_trtllm-bench-kv090-isl128-osl128.log"
VLLM_4090 = DATA / "vllm_logs" / "v0.10.2_rtx4090_qwen2.5-3b_fp16_len4096_mns1.log"  # Available KV cache memory: 15.31 GiB
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.fixture(autouse=True)
def _short_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # logs named shortly, so that an error line quoting one keeps its words whole


def _edited(tmp_path: Path, log: Path, old: str, new: str) -> str:
    """``log`` with ``old`` replaced, as a short relative name in ``tmp_path`` (the working directory)."""
    text = log.read_text(encoding="utf-8")
    assert old in text
    (tmp_path / "a.log").write_text(text.replace(old, new), encoding="utf-8")
    return "a.log"


# --- calibrate: a figure no site could show on the GPU given ------------------------------------------------------------

@pytest.mark.parametrize(("log", "old", "new", "model", "gpu", "said"), [
    # was: a term of -135.01 GiB written, exit 0 (--profile refuses it afterwards: more than a quarter of the GPU)
    (VLLM_4090, "Available KV cache memory: 15.31 GiB", "Available KV cache memory: 150.31 GiB", "Qwen/Qwen2.5-3B-Instruct",
     "RTX-4090-24GB", "its available KV cache memory is -135.01 GiB off kvbudget's, over a quarter of RTX-4090-24GB"),
    (VLLM_4090, "Available KV cache memory: 15.31 GiB", "Available KV cache memory: 0.01 GiB", "Qwen/Qwen2.5-3B-Instruct",
     "RTX-4090-24GB", "+15.29 GiB off kvbudget's, over a quarter of RTX-4090-24GB"),
    # was: -61,100 GiB (the available memory over a fraction of 0.001)
    (TRT_020, "0.8999999761581421", "0.001", LLAMA, "H100", "over a quarter of H100-SXM-80GB"),
])
def test_calibrate_refuses_a_log_no_site_of_that_gpu_could_print(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                                 log: Path, old: str, new: str, model: str, gpu: str,
                                                                 said: str) -> None:
    edited = _edited(tmp_path, log, old, new)
    _refused(capsys, ["calibrate", edited, "--model", model, "--gpu", gpu, "--out", str(tmp_path / "p.json")],
             "no log to calibrate on", said, "give --gpu of the card it ran on")
    assert not (tmp_path / "p.json").exists()


def test_sglang_free_before_loading_over_the_card_is_not_the_runs_gpu(capsys: pytest.CaptureFixture[str],
                                                                      tmp_path: Path) -> None:
    """Free after loading + the load's mem usage is the free memory before loading (SGLang computes the usage as
    their difference): 157.39 GB on a 24 GB card. check was exit 0 with a -85% row; calibrate wrote -134.30 GiB."""
    edited = _edited(tmp_path, SGLANG_WSL, "mem usage=15.02 GB", "mem usage=150.02 GB")
    for command in ("check", "calibrate"):
        _refused(capsys, [command, edited, "--model", LLAMA, "--gpu", "RTX-4090-24GB"],
                 "the log had 157.39 GB free before loading the weights, more than the 23.64 GiB of RTX-4090-24GB")


def test_sglang_pool_larger_than_the_free_memory_it_came_from_is_refused(capsys: pytest.CaptureFixture[str],
                                                                         tmp_path: Path) -> None:
    """0.00 GB free after loading, yet a pool of 4.66 GB: check warned of 23.09 GB held outside the server and told
    the user to calibrate on it; calibrate wrote +23.09 GiB, exit 0."""
    edited = _edited(tmp_path, SGLANG_WSL, "avail mem=7.37 GB, mem usage=15.02 GB", "avail mem=0.00 GB, mem usage=0.00 GB")
    for command in ("check", "calibrate"):
        _refused(capsys, [command, edited, "--model", LLAMA, "--gpu", "RTX-4090-24GB"],
                 "the log's KV pool (4.66 GB) is larger than the 0.00 GB it had free after loading the weights")


def test_two_engines_logs_are_refused_even_where_one_gives_no_point(capsys: pytest.CaptureFixture[str],
                                                                     tmp_path: Path) -> None:
    """A vLLM log that prints no available KV memory beside an SGLang log: the vLLM one was skipped and the profile
    written as SGLang's, exit 0, though the user named both for one profile."""
    text = "\n".join(line for line in VLLM_4090.read_text(encoding="utf-8").splitlines()
                     if "Available KV cache memory" not in line)
    (tmp_path / "v.log").write_text(text, encoding="utf-8")
    _refused(capsys, ["calibrate", "v.log", str(SGLANG_WSL), "--model", LLAMA, "--gpu", "RTX-4090-24GB"],
             "v.log and v0.4.9docker_24gb-wsl_llama3.1-8b_default.log are two engines' logs (vLLM, SGLang)")


def test_sglang_check_on_a_card_far_larger_than_the_runs_names_the_card(capsys: pytest.CaptureFixture[str]) -> None:
    """An L4 run (21.63 GB free before loading) checked with --gpu H100: the warning said 55.15 GB was held outside
    the server by a desktop or another process and told the user to calibrate on the log, whose profile --profile
    then refuses (more than a quarter of the GPU). It names the card instead."""
    log = DATA / "sglang_logs" / "v0.4.3.post4_l4x4_qwq-32b_tp4_default.log"
    assert main(["check", str(log), "--gpu", "H100"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the report wraps its lines
    assert "55.15 GB less than kvbudget plans for a bare H100-SXM-80GB (76.78 GB), more than a quarter of it" in out
    assert "give --gpu (or --gpu-memory) of the card it ran on" in out and "calibrate on this log" not in out
    assert main(["check", str(log), "--gpu", "L4"]) == 0
    assert "held outside" not in capsys.readouterr().out
    assert main(["check", str(log), "--gpu", "GB10"]) == 0  # unified memory: the system's use is the first reading
    out = " ".join(capsys.readouterr().out.split())
    assert "97.52 GB less than kvbudget plans for a bare GB10-128GB (119.15 GB): its memory is the system's too" in out


@pytest.mark.parametrize(("gpu", "unified"), [("GB10", True), ("Jetson AGX Thor", True), ("H100", False)])
@pytest.mark.parametrize("engine", ["trtllm", "llama.cpp"])
def test_plans_on_unified_memory_say_what_is_not_counted(gpu: str, unified: bool, engine: str) -> None:
    """TensorRT-LLM sizes its pool from CUDA's free memory as vLLM and SGLang do (the 1.1.0rc3 DGX Spark log: 49 GiB
    the OS held), and llama-server auto-fits its context to it: their plans on a GB10 or a Jetson said nothing of
    the host's use, where vLLM's and SGLang's do."""
    import kvbudget

    answer = kvbudget.fit("Qwen/Qwen2.5-7B-Instruct", gpu=gpu, context=4096, engine=engine)
    assert bool([n for n in answer.plan.notes if "shares its memory with the CPU" in n]) == unified


def test_compare_on_unified_memory_says_what_no_engine_counts(capsys: pytest.CaptureFixture[str]) -> None:
    for gpu, unified in (("GB10", True), ("H100", False)):
        assert main(["compare", "Qwen/Qwen2.5-7B-Instruct", "--gpu", gpu]) == 0
        assert ("note: GB10-128GB shares its memory with the CPU" in capsys.readouterr().out) == unified


def test_a_vllm_log_of_a_million_fabricated_source_lines_is_read_in_bounded_time() -> None:
    """A million distinct [core.py:N] / [gpu_worker.py:N] tags no release has: the nearest-release count summed each
    release over every pair (66 x a million steps: check of a 39 MB log took 11.3 s, 7.4 s now). Timed against reading
    the pairs alone in the same process, so that a loaded machine slows both: it was 2.4-3 times that, 0.75 now."""
    import time

    from kvbudget.engines.vllm.release_lines import pairs, release_evidence

    text = "".join(f"INFO 10-06 15:57:53 [{name}:{n}] x\n" for name in ("core.py", "gpu_worker.py")
                   for n in range(1_000_000, 1_500_000))
    start = time.process_time()
    assert len(pairs(text)) == 1_000_000
    read = time.process_time() - start
    start = time.process_time()
    evidence = release_evidence(text)
    taken = time.process_time() - start
    assert evidence.pairs == 1_000_000 and evidence.releases == () and evidence.nearest == ()
    assert taken < 1.5 * read, (taken, read)


@pytest.mark.parametrize("command", ["check", "calibrate"])
def test_gpu_memory_far_off_the_total_a_trtllm_log_prints_is_refused(capsys: pytest.CaptureFixture[str],
                                                                      command: str) -> None:
    """--gpu-memory 100GiB for a run whose log prints 'device total memory 79.18 GiB': planned on 100 GiB, check
    exit 0 and calibrate a term of +21.83 GiB for the site (under a quarter of 100 GiB). vLLM's check refused it."""
    _refused(capsys, [command, str(TRT_020), "--model", LLAMA, "--gpu-memory", "100GiB"],
             "--gpu-memory 100.00 GiB is not the run's device: the log prints a total of 79.18 GiB")
    assert main([command, str(TRT_020), "--model", LLAMA, "--gpu-memory", "80GiB"]) == 0  # within a tenth


@pytest.mark.parametrize(("release", "said"), [
    # was planned with rules of releases that never were (0.1: 1,064,992 tokens where 0.5-era rules give others)
    ("0.1", "TensorRT-LLM release '0.1' is older than its first release, 0.5.0"),
    ("0.4.8", "TensorRT-LLM release '0.4.8' is older than its first release, 0.5.0"),
    # was the current source, unsaid (an unset shell variable)
    ("", "--trtllm-release is empty"),
    (" ", "--trtllm-release is empty"),
])
@pytest.mark.parametrize("command", ["fit", "check"])
def test_a_trtllm_release_that_never_was_is_refused(capsys: pytest.CaptureFixture[str], release: str, said: str,
                                                    command: str) -> None:
    argv = (["fit", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "H100", "--engine", "trtllm"] if command == "fit"
            else ["check", str(TRT_020), "--model", LLAMA])
    _refused(capsys, [*argv, "--trtllm-release", release], said)


def test_a_trtllm_profile_term_of_a_release_before_the_first_is_refused(capsys: pytest.CaptureFixture[str],
                                                                        tmp_path: Path) -> None:
    """A hand-edited term of release '0.4': read as a release line (0.20's shape), it matched only plans no release
    could be; now the profile names it."""
    import json

    (tmp_path / "p.json").write_text(json.dumps({"kvbudget_profile": 1, "engine": "trtllm", "terms": [
        {"gpu": "H100", "release": "0.4", "gpus": 1, "bytes": 10**9, "logs": 1}]}), encoding="utf-8")
    _refused(capsys, ["fit", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "H100", "--engine", "trtllm", "--profile", "p.json"],
             "terms[0]: release '0.4' is not a TensorRT-LLM release line kvbudget knows")


def _profile(tmp_path: Path, engine: str, release: str, held: int) -> str:
    import json

    (tmp_path / f"{engine}.json").write_text(json.dumps({"kvbudget_profile": 1, "engine": engine, "terms": [
        {"gpu": "RTX-4090-24GB", "release": release, "gpus": 1, "bytes": held, "logs": 1}]}), encoding="utf-8")
    return f"{engine}.json"


@pytest.mark.parametrize(("engine", "release", "words"), [
    ("sglang", "0.4.8", ["--sglang-version", "0.4.8"]),  # levers took no --sglang-version: such a term never applied
    ("trtllm", "0.20", ["--trtllm-release", "0.20.0"]),  # --trtllm-release was taken and passed over
    ("trtllm", "current", []),
])
def test_levers_and_fit_tables_take_the_site_profile(capsys: pytest.CaptureFixture[str], tmp_path: Path, engine: str,
                                                     release: str, words: list[str]) -> None:
    """levers --engine sglang/trtllm --profile: each lever was replanned without the profile's terms (the replica
    search knew none), so the table's 'as configured' was the bare card's (6.89 GiB for TensorRT-LLM where fit with
    the same profile says 4.19), exit 0. Now the baseline is fit's own figure."""
    import json

    profile = _profile(tmp_path, engine, release, 3 << 30)
    common = ["Qwen/Qwen2.5-7B-Instruct", "--gpu", "RTX-4090-24GB", "--context", "8192", "--engine", engine, *words,
              "--json"]
    assert main(["fit", *common, "--profile", profile]) == 0
    fitted = json.loads(capsys.readouterr().out)
    assert main(["levers", *common, "--profile", profile]) == 0
    levers = json.loads(capsys.readouterr().out)
    assert main(["levers", *common]) == 0
    bare = json.loads(capsys.readouterr().out)
    assert levers["baseline"]["kv_cache_bytes"] < bare["baseline"]["kv_cache_bytes"] - (1 << 30)
    assert levers["baseline"]["max_concurrency"] == int(fitted["max_concurrency"])  # fit's own plan, whole requests
    assert fitted["levers"] == levers["levers"]  # fit's lever table: the same replanning, the same profile


def test_levers_say_when_no_term_of_the_profile_applies(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    profile = _profile(tmp_path, "sglang", "0.4.8", 3 << 30)
    assert main(["levers", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "RTX-4090-24GB", "--context", "8192", "--engine",
                 "sglang", "--profile", profile]) == 0
    assert "the site profile has no run on RTX-4090-24GB with SGLang's current line" in capsys.readouterr().out


def test_explain_plans_a_trtllm_command_under_the_release_named(capsys: pytest.CaptureFixture[str],
                                                                  tmp_path: Path) -> None:
    """explain --trtllm-release R -- trtllm-serve ...: R was accepted and passed over (even 'garbage', exit 0), as was
    the release an nvcr.io image tag names, so a profile's term of that release never applied."""
    profile = _profile(tmp_path, "trtllm", "0.20", 3 << 30)
    serve = ["trtllm-serve", "Qwen/Qwen2.5-7B-Instruct"]
    image = ["docker", "run", "--gpus", "all", "nvcr.io/nvidia/tensorrt-llm/release:0.20.0", *serve]
    for words, given in ((serve, ["--trtllm-release", "0.20.0"]), (image, [])):
        assert main(["explain", "--gpu", "RTX-4090-24GB", "--profile", profile, *given, "--", *words]) == 0
        out = " ".join(capsys.readouterr().out.split())
        assert "site profile: +3.00 GiB from 1 log(s) of RTX-4090-24GB, 0.20" in out, out
    _refused(capsys, ["explain", "--gpu", "RTX-4090-24GB", "--trtllm-release", "garbage", "--", *serve],
             "TensorRT-LLM release 'garbage' is not a release line")
    assert main(["explain", "--gpu", "RTX-4090-24GB", "--trtllm-release", "1.1", "--", *image]) == 0
    assert "is TensorRT-LLM 0.20.0; planned with --trtllm-release 1.1 as given" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize(("tag", "line"), [("v0.4.6.post1-cu124", "0.4"), ("v0.4.9", "0.4.8"), ("latest", "current")])
def test_explain_plans_an_sglang_command_under_its_images_release(capsys: pytest.CaptureFixture[str], tag: str,
                                                                  line: str) -> None:
    """explain -- docker run lmsysorg/sglang:TAG python3 -m sglang.launch_server ...: the current line was planned for
    any image, where check LOG -- (the same command) plans the release the tag names."""
    import json

    assert main(["explain", "--gpu", "RTX-4090-24GB", "--json", "--", "docker", "run", "--gpus", "all",
                 f"lmsysorg/sglang:{tag}", "python3", "-m", "sglang.launch_server", "--model-path",
                 "Qwen/Qwen2.5-7B-Instruct"]) == 0
    out = capsys.readouterr().out
    assert f'"version": "{line}"' in out and json.loads(out)


@pytest.mark.parametrize(("engine", "said"), [
    # was: the free memory before loading planned 2.45 GiB over the card's total, exit 0
    ("sglang", "is -3.00 GiB, more than the 0.55 GiB of the CUDA context and the TP group's buffers before loading"),
    # was: a profiled peak 2.4 GiB below the weights it holds (9.59 GiB of pool where the bare card gives 6.89)
    ("trtllm", "is -3.00 GiB, more than the 1.80 GiB of the profiled peak beyond the weights"),
])
def test_a_negative_term_beyond_what_the_model_holds_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                                engine: str, said: str) -> None:
    argv = ["fit", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "RTX-4090-24GB", "--context", "8192", "--engine", engine,
            "--profile"]
    _refused(capsys, [*argv, _profile(tmp_path, engine, "current", -3 << 30)], said, "recalibrate")
    assert main([*argv, _profile(tmp_path, engine, "current", -(1 << 28))]) == 0  # a quarter GiB less: taken
    assert "site profile: -0.25 GiB" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["check", "calibrate"])
def test_a_trtllm_log_printing_two_fractions_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                        command: str) -> None:
    """'fraction is set 0.5' beside 'Both free_gpu_memory_fraction and max_tokens are set (to 0.9 ...': the first was
    read and the other passed over; calibrate divided the available memory by 0.9 and wrote a term, exit 0."""
    edited = _edited(tmp_path, TRT_020, "fraction is set 0.8999999761581421", "fraction is set 0.5")
    _refused(capsys, [command, edited, "--model", LLAMA, "--gpu", "H100"],
             "the log prints two fractions, 0.8999999761581421 ('Both free_gpu_memory_fraction and max_tokens are "
             "set') and 0.5 ('fraction is set')")


def test_calibrate_takes_the_release_a_log_does_not_print(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A TensorRT-LLM log without its 'TensorRT-LLM version' line was calibrated as the current source's, and
    calibrate took no --trtllm-release to say otherwise (check does): the term never applied to a 0.20 plan."""
    import json

    text = "".join(line for line in TRT_020.read_text(encoding="utf-8").splitlines(keepends=True)
                   if "TensorRT-LLM version" not in line)
    (tmp_path / "a.log").write_text(text, encoding="utf-8")
    argv = ["calibrate", "a.log", "--model", LLAMA, "--gpu", "H100", "--out", "p.json"]
    assert main([*argv, "--trtllm-release", "0.20.0"]) == 0
    capsys.readouterr()
    assert [t["release"] for t in json.loads((tmp_path / "p.json").read_text())["terms"]] == ["0.20"]
    _refused(capsys, [*argv, "--sglang-version", "0.4"], "--sglang-version is not read for TensorRT-LLM's log a.log")


def test_trtllm_figure_over_the_logged_total_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A profiling peak of 111.77 GiB beside the 79.18 GiB total the log prints: check showed it as one run's row,
    exit 0; no figure of one run on that device can exceed its total."""
    edited = _edited(tmp_path, TRT_020, "(torch + non-torch): 11.77 GiB", "(torch + non-torch): 111.77 GiB")
    _refused(capsys, ["check", edited, "--model", LLAMA, "--gpu", "H100"],
             "the log's peak memory during profiling (111.77 GiB) is more than the device total it prints (79.18 GiB)")
    # an available KV memory of 610.17 GiB on that card: calibrate wrote a term of about -609 GiB (round 17 made it a
    # skip for being over a quarter of the GPU; the figure itself is refused now, before any plan)
    edited = _edited(tmp_path, TRT_020, "when calculating max tokens: 61.17", "when calculating max tokens: 610.17")
    _refused(capsys, ["calibrate", edited, "--model", LLAMA, "--gpu", "H100", "--out", str(tmp_path / "p.json")],
             "no log to calibrate on", "the log's available KV cache memory (610.17 GiB) is more than the device total")
    assert not (tmp_path / "p.json").exists()
