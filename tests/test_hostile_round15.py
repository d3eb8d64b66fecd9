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
    """``argv`` ends in exit 2 with one line on standard error holding each of ``said`` (argparse's usage errors leave
    main() by SystemExit(2), as the command line does)."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code  # type: ignore[assignment]
    assert code == 2
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


# --- k/K suffixes where vLLM's parser takes none: argparse type=int stops vLLM, kvbudget planned 1K as 1,024 ------------

@pytest.mark.parametrize(("version", "words", "said"), [
    (None, ["--max-num-seqs", "1K"], "`argument --max-num-seqs: invalid int value: '1K'`"),
    (None, ["--block-size", "1k"], "`argument --block-size: invalid int value: '1k'`"),
    (None, ["-tp", "2k"], "`argument -tp: invalid int value: '2k'`"),
    (None, ["--max-num-seqs=8K"], "`argument --max-num-seqs: invalid int value: '8K'`"),
    # human_readable_int came to --max-model-len in 0.8.4 and to --max-num-batched-tokens in 0.9.1
    ("0.8.3", ["--max-model-len", "8k"], "vLLM reads them there from 0.8.4"),
    ("0.6.3", ["--max-model-len", "32K"], "`argument --max-model-len: invalid int value: '32K'`"),
    ("0.9.0", ["--max-num-batched-tokens", "8k"], "vLLM reads them there from 0.9.1"),
])
def test_a_suffix_vllm_does_not_read_is_refused(capsys: pytest.CaptureFixture[str], version: str | None, words: list[str],
                                                said: str) -> None:
    release = ["--vllm-version", version] if version else []
    _refused(capsys, ["explain", "--gpu", "H100", *release, "--", "vllm", "serve", "llama-3.1-8b", *words], said)


def test_suffixes_where_vllm_reads_them_and_int_forms_it_takes(capsys: pytest.CaptureFixture[str]) -> None:
    """The releases that read suffixes still do; int()'s own forms (1_024, +16) are what argparse type=int takes."""
    out, _ = _runs(capsys, ["explain", "--gpu", "H100", "--vllm-version", "0.8.4", "--", "vllm", "serve", "llama-3.1-8b",
                            "--max-model-len", "8k"])
    assert "max_model_len 8,000" in out
    out, _ = _runs(capsys, ["explain", "--gpu", "H100", "--vllm-version", "0.9.1", "--", "vllm", "serve", "llama-3.1-8b",
                            "--max-num-batched-tokens", "8K", "--max-model-len", "8192"])
    assert "max_num_batched_tokens 8,192" in out
    out, _ = _runs(capsys, ["explain", "--gpu", "H100", "--", "vllm", "serve", "llama-3.1-8b", "--max-num-seqs", "1_024",
                            "-tp", "+2", "--max-model-len", "32K"])
    assert "max_num_seqs 1024" in out and "TP=2" in out and "max_model_len 32,768" in out
    _refused(capsys, ["explain", "--gpu", "H100", "--", "docker", "run", "--gpus", "all", "vllm/vllm-openai:v0.6.3",
                      "--model", "llama-3.1-8b", "--max-model-len", "8k"], "invalid int value: '8k'")


# --- two runs in one log whose engine prints no API server line (an offline LLM(...) run, a benchmark) ----------------

def test_two_offline_vllm_runs_check_the_last_one(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Two vLLM 0.29 runs of 'Initializing a V1 LLM engine' one after the other: the model was read from the first
    (Qwen2.5-0.5B) and the figures from the second (Qwen2.5-7B): -93% model loading, +992% tokens, exit 0."""
    small = DATA / "vllm_logs" / "v0.29.0_rtx5090_qwen2.5-0.5b_bf16_len8192_gmu0.9.log"
    large = DATA / "vllm_logs" / "v0.29.0_rtx5090_qwen2.5-7b_bf16_len8192_gmu0.9.log"
    both = tmp_path / "both.log"
    both.write_text(small.read_text(encoding="utf-8") + large.read_text(encoding="utf-8"), encoding="utf-8")
    import json

    assert main(["check", str(large), "--json"]) == 0
    alone = json.loads(capsys.readouterr().out)
    assert main(["check", str(both), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["model"] == alone["model"] == "Qwen/Qwen2.5-7B-Instruct"
    assert doc["comparison"] == alone["comparison"]
    assert any("2 start-ups of vLLM's engine" in w and "the last one is checked" in w for w in doc["warnings"])
    # one run whose data-parallel engines each print the line before any figure is one run
    dp = tmp_path / "dp.log"
    text = large.read_text(encoding="utf-8")
    first = text.index("Initializing a V1 LLM engine")
    line = text[text.rfind("\n", 0, first) + 1:text.index("\n", first) + 1]
    dp.write_text(text.replace(line, line + line.replace("EngineCore pid=118", "EngineCore_DP1 pid=119")), encoding="utf-8")
    assert main(["check", str(dp), "--json"]) == 0
    assert not any("start-ups" in w for w in json.loads(capsys.readouterr().out)["warnings"])


def test_a_log_of_a_release_newer_than_kvbudget_read_says_so(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A vLLM 0.45.2 log was compared with 0.33's rules (-20% KV, 'starts: DIFFERS') and the plan's note that the
    release is newer than any kvbudget has read was printed nowhere."""
    log = tmp_path / "newer.log"
    log.write_text(L4_LOG.read_text(encoding="utf-8").replace("0.11.0", "0.45.2"), encoding="utf-8")
    out, _ = _runs(capsys, ["check", str(log), "--gpu", "L4"])
    assert "vLLM '0.45.2' is newer than the newest release kvbudget has read (0.33.0)" in out
    out, _ = _runs(capsys, ["check", str(L4_LOG), "--gpu", "L4"])
    assert "newer than" not in out


# --- output paths ------------------------------------------------------------------------------------------------------

def test_calibrate_out_that_is_one_of_the_logs_is_refused_before_writing(capsys: pytest.CaptureFixture[str],
                                                                          tmp_path: Path) -> None:
    """calibrate LOG --out LOG wrote the profile over the site's log (exit 0); through a link, likewise."""
    log = tmp_path / "run.log"
    text = (DATA / "vllm_logs" / "v0.29.0_rtx5090_qwen2.5-7b_bf16_len8192_gmu0.9.log").read_text(encoding="utf-8")
    log.write_text(text, encoding="utf-8")
    (tmp_path / "link.log").symlink_to(log)
    for out in (log, tmp_path / "link.log"):
        _refused(capsys, ["calibrate", str(log), "--out", str(out)], "is one of the files it is made from",
                 "would overwrite that file")
        assert log.read_text(encoding="utf-8") == text
    # an empty --out was taken as no --out (no profile written, exit 0); a missing folder is said before any log is read
    _refused(capsys, ["calibrate", str(log), "--out", ""], "--out is empty")
    _refused(capsys, ["calibrate", str(tmp_path / "missing.log"), "--out", str(tmp_path / "no" / "p.json")],
             "does not exist: create it")
    out, _ = _runs(capsys, ["calibrate", str(log), "--out", str(tmp_path / "p.json")])
    assert (tmp_path / "p.json").is_file() and "wrote" in out


@pytest.mark.parametrize(("argv", "said"), [
    (["kv", "llama-3.1-8b", "--plot", ""], "argument --plot: is empty"),
    (["fit", "llama-3.1-8b", "--gpu", "H100", "--plot", " "], "argument --plot: is empty"),
    (["simulate", "llama-3.1-8b", "--gpu", "H100", "--synthetic", "requests=3", "--no-progress", "--plot", ""],
     "argument --plot: is empty"),
    (["simulate", "llama-3.1-8b", "--gpu", "H100", "--synthetic", "requests=3", "--no-progress", "--tokenizer", ""],
     "argument --tokenizer: is empty"),
    (["check", str(L4_LOG), "--gpu", "L4", "--model", ""], "argument --model: is empty"),
    (["check", str(L4_LOG), "--gpu", ""], "argument --gpu: is empty"),
    (["calibrate", str(L4_LOG), "--gpu", "L4", "--model", " "], "argument --model: is empty"),
    (["diagnose", "--metrics", str(DATA / "metrics" / "vllm-0.33-busy.prom"), "--expect", "", "--gpu", "H100"],
     "argument --expect: is empty"),
])
def test_an_empty_value_is_not_the_option_left_out(capsys: pytest.CaptureFixture[str], argv: list[str], said: str) -> None:
    """An empty --plot drew nothing, an empty --model / --gpu beside a log was passed over for the log's own, and an
    empty --tokenizer or --expect was ignored: each answered exit 0 as if the option had not been given."""
    _refused(capsys, argv, said)


# --- check LOG -- FLAGS: flags that contradict what the log prints of its own run ---------------------------------------

@pytest.mark.parametrize(("flags", "said"), [
    # compared as if the run had used 4096: max concurrency +659%, exit 0
    (["--max-model-len", "4096"], "set max_model_len to 4096, but the log prints max_model_len 32000"),
    # refused for a wrong reason: 'the log is cut short' (one of two ranks printed its figures)
    (["--tensor-parallel-size", "2"], "set tensor_parallel_size to 2, but the log prints tensor_parallel_size 1"),
    (["--max-num-seqs", "256"], "set max_num_seqs to 256, but the log prints max_num_seqs 128"),
    (["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192", "--max-num-seqs", "128"],
     "set max_model_len to 8192"),
])
def test_flags_after_dashes_that_contradict_the_log_are_refused(capsys: pytest.CaptureFixture[str], flags: list[str],
                                                                said: str) -> None:
    _refused(capsys, ["check", str(L4_LOG), "--gpu", "L4", "--", *flags], said, "drop them")


def test_flags_after_dashes_that_agree_with_the_log_are_read(capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = _runs(capsys, ["check", str(L4_LOG), "--gpu", "L4", "--", "--max-model-len", "32k",
                            "--gpu-memory-utilization", "0.920", "--max-num-seqs", "128", "--kv-cache-dtype", "auto"])
    assert "max_model_len 32,000" in out


@pytest.mark.parametrize(("version", "size", "taken"), [
    ("0.6.3", "64", "8, 16, 32"), ("0.6.5", "128", "8, 16, 32"), ("0.8.4", "24", "8, 16, 32, 64, 128"),
    ("0.10.0", "256", "1, 8, 16, 32, 64, 128"), ("0.12.0", "24", "1, 8, 16, 32, 64, 128, 256"),
    ("0.17.0", "48", "1, 8, 16, 32, 64, 128, 256"),
])
def test_a_block_size_the_release_does_not_offer_is_refused(capsys: pytest.CaptureFixture[str], version: str, size: str,
                                                            taken: str) -> None:
    """--block-size N was planned with N blocks for every release; up to 0.17 vLLM's parser offers a fixed list
    (`invalid choice`), from 0.18 any size."""
    _refused(capsys, ["explain", "--gpu", "H100", "--vllm-version", version, "--", "vllm", "serve", "llama-3.1-8b",
                      "--max-model-len", "4096", "--block-size", size], f"invalid choice: {size}", f"takes {taken})")


def test_a_block_size_the_release_offers_is_planned(capsys: pytest.CaptureFixture[str]) -> None:
    for version, size in (("0.6.4", "128"), ("0.12.0", "256"), ("0.18.0", "24"), ("0.33.0", "48")):
        out, _ = _runs(capsys, ["explain", "--gpu", "H100", "--vllm-version", version, "--", "vllm", "serve", "llama-3.1-8b",
                                "--max-model-len", "4096", "--block-size", size])
        assert f"block size {size}," in out


def test_max_model_len_auto_before_its_release_is_refused_and_not_suggested(capsys: pytest.CaptureFixture[str]) -> None:
    """--max-model-len auto (human_readable_int_or_auto) came with vLLM 0.14: 0.13 stops on the word, yet it was
    planned as an auto-fit, and fit suggested it to a 0.10 run that does not start."""
    _refused(capsys, ["explain", "--gpu", "L4", "--vllm-version", "0.13.0", "--", "vllm", "serve", "llama-3.1-8b",
                      "--max-model-len", "auto"], "invalid human_readable_int value: 'auto'", "came with 0.14")
    out, _ = _runs(capsys, ["explain", "--gpu", "L4", "--vllm-version", "0.14.0", "--", "vllm", "serve", "llama-3.1-8b",
                            "--max-model-len", "auto"])
    out, _ = _runs(capsys, ["fit", "llama-3.1-70b", "--gpu", "L4", "--vllm-version", "0.10.0"])
    assert "does not fit" in out and "--max-model-len auto" not in out
    out, _ = _runs(capsys, ["fit", "llama-3.1-70b", "--gpu", "L4"])
    assert "--max-model-len auto" in out


# --- a vLLM release the command itself pins ------------------------------------------------------------------------------

@pytest.mark.parametrize("command", [
    "uvx --from vllm==0.10.1 vllm serve llama-3.1-8b --max-model-len 8192",
    "uvx --from 'vllm[flashinfer]==0.10.1' vllm serve llama-3.1-8b --max-model-len 8192",
    "uv run --with vllm==0.10.1 vllm serve llama-3.1-8b --max-model-len 8192",
    "pipx run --spec vllm==0.10.1 vllm serve llama-3.1-8b --max-model-len 8192",
    "pip install -U vllm==0.10.1 && vllm serve llama-3.1-8b --max-model-len 8192",
    # uvx's own form: was refused as 'not a launch command'
    "uvx vllm@0.10.1 serve llama-3.1-8b --max-model-len 8192",
])
def test_a_release_the_command_pins_is_planned(capsys: pytest.CaptureFixture[str], command: str) -> None:
    """The command installs vLLM 0.10.1; it was planned with the newest release's rules (utilization 0.92 and CUDA
    graphs taken from the budget, where 0.10 takes 0.90 and no graphs), exit 0."""
    import json

    assert main(["explain", "--gpu", "H100", "--json", "--", command]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert main(["explain", "--gpu", "H100", "--vllm-version", "0.10.1", "--json", "--", "vllm", "serve", "llama-3.1-8b",
                 "--max-model-len", "8192"]) == 0
    same = json.loads(capsys.readouterr().out)
    assert doc["engine"]["version_line"] == "v1" and doc["kv_cache_tokens"] == same["kv_cache_tokens"]


def test_a_pin_beside_another_vllm_version_is_said(capsys: pytest.CaptureFixture[str]) -> None:
    out, err = _runs(capsys, ["explain", "--gpu", "H100", "--vllm-version", "0.33.0", "--", "pip install vllm==0.10.1 && "
                              "vllm serve llama-3.1-8b --max-model-len 8192"])
    assert "pins vLLM 0.10.1; planned with --vllm-version 0.33.0 as given" in out + err
    # a pinned release's own rules apply: 0.8.3 reads no suffix in --max-model-len
    _refused(capsys, ["explain", "--gpu", "H100", "--", "uvx --from vllm==0.8.3 vllm serve llama-3.1-8b --max-model-len 8k"],
             "invalid int value: '8k'")


@pytest.mark.parametrize(("command", "said"), [
    ("srun --gpus=1 vllm serve llama-3.1-8b -tp 2", "srun --gpus shows 1"),
    ("srun --partition gpu -G 1 vllm serve llama-3.1-8b -tp 2", "srun -G shows 1"),
    ("srun --gres=gpu:a100:2 vllm serve llama-3.1-8b -tp 4", "srun --gres shows 2"),
    ("srun -n1 --gpus-per-task=1 python -m sglang.launch_server --model-path llama-3.1-8b --tp 2",
     "srun --gpus-per-task shows 1"),
])
def test_srun_that_gives_fewer_gpus_than_the_layout_is_refused(capsys: pytest.CaptureFixture[str], command: str,
                                                                said: str) -> None:
    """Slurm shows the step's task the GPUs it allocated: a TP 2 server under srun --gpus=1 stops at start-up; it was
    planned on 2 GPUs, exit 0 (docker run --gpus and CUDA_VISIBLE_DEVICES were already held to it)."""
    _refused(capsys, ["explain", "--gpu", "H100", "--", command], said, "stops at start-up")


def test_srun_over_nodes_or_with_enough_gpus_is_planned(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("srun -N 2 --gpus-per-node=2 vllm serve llama-3.1-8b -tp 4 --max-model-len 8192",
                    "srun --gpus 2 --pty vllm serve llama-3.1-8b -tp 2 --max-model-len 8192"):
        _runs(capsys, ["explain", "--gpu", "H100", "--", command])


def test_a_flood_of_engine_starts_and_figures_is_read_in_linear_time(tmp_path: Path) -> None:
    """A run counted per engine start searched every figure to the end of the text from each one: 3 MB of alternating
    start and figure lines took 9 s (60 MB, minutes). Now each figure is searched forward once."""
    import time

    from kvbudget.engines.vllm.log import parse_vllm_log

    line = "INFO Initializing a V1 LLM engine (v0.11.0) with config: model='llama-3.1-8b'\nAvailable KV cache memory: 1.5 GiB\n"
    text = line * (8 * 2**20 // len(line))
    began = time.perf_counter()
    log = parse_vllm_log(text)
    assert time.perf_counter() - began < 3 and log.starts > 1 and log.available_kv_gib == 1.5


def test_sglang_flags_after_dashes_that_contradict_server_args_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """-- --tp 2 beside an SGLang log whose server_args print tp_size=4 was compared as a TP 2 run (K size -100%,
    free memory after loading -9.23 GB, 'starts: DIFFERS'), exit 0."""
    log = str(DATA / "sglang_logs" / "v0.4.3.post4_l4x4_qwq-32b_tp4_default.log")
    base = ["check", log, "--model", "Qwen/QwQ-32B", "--gpu", "L4", "--"]
    _refused(capsys, [*base, "--tp", "2"], "set tp to 2, but the log prints tp 4")
    _refused(capsys, [*base, "--mem-fraction-static", "0.5"], "set mem_fraction_static to 0.5, but the log prints "
             "mem_fraction_static 0.85")
    out, _ = _runs(capsys, [*base, "--tp", "4", "--mem-fraction-static", "0.85"])
    assert "tp 4" in out


def test_calibrate_reads_standard_input_as_check_does(capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """calibrate - said "log '-': no such file" (check reads '-' as standard input); '-' twice is one log given twice."""
    import io

    log = (DATA / "vllm_logs" / "v0.29.0_rtx5090_qwen2.5-7b_bf16_len8192_gmu0.9.log").read_text(encoding="utf-8")
    monkeypatch.setattr("sys.stdin", io.StringIO(log))
    out, _ = _runs(capsys, ["calibrate", "-"])
    assert "custom (31.36 GiB)" in out and "+0.04 GiB" in out
    _refused(capsys, ["calibrate", "-", "-"], "standard input ('-') is given more than once")


# --- a Kubernetes manifest or compose file pasted whole into explain -----------------------------------------------------

_DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.10.1
        command: ["vllm", "serve"]
        args:
        - meta-llama/Llama-3.1-8B-Instruct
        - --max-model-len
        - "8192"
        - --tensor-parallel-size
        - "2"
        resources:
          limits: {nvidia.com/gpu: GPUS}
        readinessProbe:
          exec: {command: ["curl", "localhost:8000/health"]}
---
apiVersion: v1
kind: Service
spec: {ports: [{port: 8000}]}
"""
_COMPOSE = """services:
  vllm:
    image: vllm/vllm-openai:v0.9.2
    environment:
      - VLLM_USE_V1=0
    command: --model meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192
  webui:
    image: ghcr.io/open-webui/open-webui:main
    environment: {OPENAI_API_BASE_URL: "http://vllm:8000/v1"}
"""


def _plan_of(capsys: pytest.CaptureFixture[str], *words: str) -> dict[str, object]:
    import json

    assert main(["explain", "--gpu", "H100", "--json", "--", *words]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def test_a_kubernetes_manifest_is_read_as_its_container_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """A Deployment pasted whole was refused for a wrong reason ('the command names no model': its args name it); its
    image's tag names the release (0.10.1), its command and args are the server's."""
    doc = _plan_of(capsys, _DEPLOYMENT.replace("GPUS", "2"))
    same = _plan_of(capsys, "docker", "run", "--gpus", "2", "vllm/vllm-openai:v0.10.1", "--model",
                    "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192", "--tensor-parallel-size", "2")
    assert doc["kv_cache_tokens"] == same["kv_cache_tokens"] and doc["tp"] == 2
    assert doc["engine"]["version_line"] == "v1"  # type: ignore[index]
    _refused(capsys, ["explain", "--gpu", "H100", "--", _DEPLOYMENT.replace("GPUS", "1")],
             "needs 2 GPUs (TP x PP x DP) but the pasted manifest gives it 1")


def test_a_compose_file_and_kvbudgets_own_manifests_are_read(capsys: pytest.CaptureFixture[str]) -> None:
    """compose: the image's entrypoint takes the command, the environment applies (VLLM_USE_V1=0 on 0.9.2: V0). The
    manifests kvbudget plan writes (a Deployment; a LeaderWorkerSet whose leader runs `sh -c 'ray start ... && vllm
    serve ...'` over 2 pods of 8 GPUs) read back to their command's plan."""
    import json

    doc = _plan_of(capsys, _COMPOSE)
    assert doc["engine"]["version_line"] == "v0"  # type: ignore[index]
    assert main(["plan", "llama-3.1-405b", "--concurrency", "4", "--context", "8192", "--gpus", "H100", "--max-gpus", "32",
                 "--json"]) == 0
    plans = json.loads(capsys.readouterr().out)["plans"]
    multi = next(p for p in plans if p["num_gpus"] > 8 and p["launch"] and p["launch"].get("kubernetes"))
    single = next(p for p in plans if p["num_gpus"] <= 8 and p["launch"] and p["launch"].get("kubernetes"))
    for p in (multi, single):
        assert _plan_of(capsys, p["launch"]["kubernetes"])["kv_cache_tokens"] == \
            _plan_of(capsys, p["launch"]["command"])["kv_cache_tokens"]


def test_a_manifest_with_no_engine_or_two_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    _refused(capsys, ["explain", "--gpu", "H100", "--", "services:\n  web:\n    image: nginx\n    command: [nginx]\n"],
             "no container that runs an engine")
    two = _DEPLOYMENT.replace("GPUS", "2").replace("      - name: vllm\n", "      - name: a\n        image: vllm/vllm-openai:v0.10.1\n"
                                                   "        command: [vllm, serve, llama-3.1-8b]\n      - name: vllm\n")
    _refused(capsys, ["explain", "--gpu", "H100", "--", two], "holds 2 containers that run an engine")
    _refused(capsys, ["explain", "--gpu", "H100", "--", "image: vllm/vllm-openai\ncommand: [unclosed\n"],
             "the pasted manifest: not valid YAML")


def test_a_gpu_the_log_shows_is_not_replaced_by_another(capsys: pytest.CaptureFixture[str]) -> None:
    """--gpu L4 beside a log of 'NVIDIA H100 80GB HBM3' (or of a 79.18 GiB total) was checked as an L4 run (-137%
    available KV, 'starts: DIFFERS'), the log's own device passed over; --gpu is for a log that does not show it."""
    named = str(DATA / "vllm_logs" / "v0.12.0_h100x2_qwen3-vl-30b-a3b_tp2_len65536.log")
    total = str(DATA / "vllm_logs" / "v0.10.2_h100_qwen3-30b-a3b-2507_bf16_len6144.log")
    _refused(capsys, ["check", named, "--gpu", "L4"], "--gpu 'L4' (L4-24GB) is not the run's device: the log names "
             "'NVIDIA H100 80GB HBM3'")
    _refused(capsys, ["check", total, "--gpu", "L4"], "the log prints a total of 79.18 GiB")
    trtllm = str(DATA / "trtllm_logs" / "v0.13.0_rtx4090_glm-4-9b-int8_engine_triton-openai.log")  # 'GeForce RTX 4090'
    _refused(capsys, ["check", trtllm, "--gpu", "H100"], "the log names 'GeForce RTX 4090'")
    for argv in (["check", named, "--gpu", "H100 PCIe"], ["check", total, "--gpu", "H100"],
                 ["check", trtllm, "--gpu", "RTX 4090"]):
        _runs(capsys, argv)
