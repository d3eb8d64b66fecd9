"""kvbudget against real vLLM start-up logs that users published.

Each ``tests/data/vllm_logs/<name>.log`` is an excerpt as published; ``<name>.json`` gives its URL,
date, vLLM version, model, GPU and flags, and under ``kvbudget`` how kvbudget is run on it (model,
GPU, release, flags) plus, where it applies, why a record is left out of the error statistics:
``exclude`` (something kvbudget does not model: LMCache's buffers, GGUF, a
model type kvbudget does not read, a known vLLM regression) or ``outlier`` (modelled, but the log
itself shows why the prediction cannot match: other processes on a rank, unstated settings ...).

Two checks, with tolerances that follow from what the logs are:
1. KV arithmetic, exact: fed the "Available KV cache memory" the log printed, kvbudget's blocks,
   tokens, concurrency and estimated max length must fall within what that figure allows, since
   vLLM prints it rounded to 0.01 GiB (we re-plan at the figure -0.005 and +0.005 GiB).
2. End to end, calibrated: from model, GPU and flags alone. Each record within 10% on its KV
   tokens (or blocks, or available memory), the start/no-start outcome the same, and the median
   error over the corpus at most 2.5% (2% before six harder rows joined the split).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from kvbudget import find_gpu, load_model
from kvbudget._record import replace
from kvbudget.engines.vllm import plan
from kvbudget.engines.vllm.check import CheckResult, check_log
from kvbudget.engines.vllm.log import parse_vllm_log
from kvbudget.hardware import custom_gpu
from kvbudget.units import GiB

DATA = Path(__file__).parent / "data" / "vllm_logs"
RECORDS = sorted(p.stem for p in DATA.glob("*.json"))


def _meta(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
    return data


def _check(name: str) -> CheckResult:
    k = _meta(name)["kvbudget"]
    gib = k.get("gpu_memory_gib")
    return check_log(
        (DATA / f"{name}.log").read_text(encoding="utf-8"), model=k["model"], gpu=k.get("gpu"),
        gpu_memory=round(gib * GiB) if gib else None, version=k.get("version"), flags=k.get("flags"),
    )


def _primary(result: CheckResult) -> tuple[str, float] | None:
    """The record's headline figure and kvbudget's error on it, in percent."""
    rows = {r.figure: r for r in result.rows}
    for figure in ("KV cache tokens", "GPU blocks", "available KV cache (GiB)"):
        row = rows.get(figure)
        if row is not None and row.error_pct is not None and (row.reported or 0) > 0:
            return figure, row.error_pct
    return None


def test_corpus_is_large_and_documented() -> None:
    assert len(RECORDS) >= 20
    for name in RECORDS:
        meta = _meta(name)
        assert meta["url"].startswith("https://"), name
        assert meta["vllm_version"] and meta["model"] and meta["gpu"], name
        assert (DATA / f"{name}.log").is_file(), name
        assert "kvbudget" in meta, name


@pytest.mark.parametrize("name", RECORDS)
def test_every_log_parses(name: str) -> None:
    log = parse_vllm_log((DATA / f"{name}.log").read_text(encoding="utf-8"))
    reported = _meta(name)["reported"]
    if reported.get("kv_cache_tokens") is not None:
        assert log.kv_cache_tokens == reported["kv_cache_tokens"]
    if reported.get("num_gpu_blocks") is not None:
        assert log.num_gpu_blocks == reported["num_gpu_blocks"]
    if reported.get("available_kv_cache_gib") is not None:
        assert log.available_kv_gib == pytest.approx(reported["available_kv_cache_gib"])
    if reported.get("max_concurrency") is not None:
        assert log.max_concurrency == pytest.approx(reported["max_concurrency"])
    if reported.get("estimated_max_model_len") is not None:
        assert log.estimated_max_model_len == reported["estimated_max_model_len"]


_FIGURES = ("kv_cache_tokens", "num_gpu_blocks", "max_concurrency", "estimated_max_model_len")
ARITHMETIC = [n for n in RECORDS if "model" in _meta(n)["kvbudget"] and not _meta(n)["kvbudget"].get("arith_outlier")
              and (_meta(n)["reported"].get("available_kv_cache_gib") or 0) > 0
              and any(_meta(n)["reported"].get(f) is not None for f in _FIGURES)]


@pytest.mark.parametrize("name", ARITHMETIC)
def test_kv_arithmetic_from_the_logged_memory_is_exact(name: str) -> None:
    result = _check(name)
    log = result.log
    assert log.available_kv_gib is not None
    lo, hi = (replace(result.settings, kv_cache_memory_bytes=round((log.available_kv_gib + d) * GiB)) for d in (-0.005, 0.005))
    spec = load_model(result.model)
    gpu = custom_gpu(result.plan.total_bytes) if result.gpu.startswith("custom") else find_gpu(result.gpu)
    low, high = plan(spec, gpu, lo), plan(spec, gpu, hi)
    checked = 0
    if log.kv_cache_tokens is not None and low.starts:
        assert low.kv_cache_tokens <= log.kv_cache_tokens <= high.kv_cache_tokens
        checked += 1
    if log.num_gpu_blocks is not None:
        assert low.num_gpu_blocks <= log.num_gpu_blocks <= high.num_gpu_blocks
        checked += 1
    if log.max_concurrency is not None and low.starts:
        assert round(low.max_concurrency, 2) - 0.01 <= log.max_concurrency <= round(high.max_concurrency, 2) + 0.01
        checked += 1
    if log.estimated_max_model_len is not None:
        assert (low.estimated_max_model_len or 0) <= log.estimated_max_model_len <= (high.estimated_max_model_len or 0)
        checked += 1
    assert checked, f"{name}: no figure to check"


# The tolerances below hold the "modelling" split (the logs kvbudget was fitted and checked against). Records of the
# "validation" split (added afterwards, held out) are measured by tools/accuracy.py and its table, not asserted here:
# a miss on them is reported, never tuned away.
MODELLING = [n for n in RECORDS if _meta(n).get("split") == "modelling"]
MODELLED = [n for n in MODELLING if "model" in _meta(n)["kvbudget"] and not _meta(n)["kvbudget"].get("exclude")]
IN_STATS = [n for n in MODELLED if not _meta(n)["kvbudget"].get("outlier")]


@pytest.mark.parametrize("name", IN_STATS)
def test_end_to_end_within_ten_percent(name: str) -> None:
    result = _check(name)
    starts = next(r for r in result.rows if r.figure == "starts")
    assert starts.error_pct is None, f"{name}: vLLM {'started' if starts.reported else 'did not start'}, kvbudget disagrees"
    primary = _primary(result)
    if primary is not None:
        figure, err = primary
        assert abs(err) <= 10.0, f"{name}: {figure} off by {err:+.2f}%"


def test_end_to_end_median_error_is_within_two_and_a_half_percent() -> None:
    errors = [abs(p[1]) for n in IN_STATS if (p := _primary(_check(n))) is not None]
    assert len(errors) >= 9
    # 2.0% until 2026-12-01, when six validation rows whose logs were examined while modelling the sampler path
    # (TP8 H100 runs, AWQ and MoE checkpoints, consumer cards) joined this split: that move alone took the median
    # from 1.29% to 2.32%, with no change to the model
    assert statistics.median(errors) <= 2.5, errors


@pytest.mark.parametrize("name", [n for n in MODELLED if _meta(n)["kvbudget"].get("outlier")])
def test_outliers_are_explained(name: str) -> None:
    assert len(_meta(name)["kvbudget"]["outlier"]) > 80
    _check(name)  # still runs end to end


def corpus_report() -> str:
    """The table for the issue note: python -c 'import tests.test_vllm_logs as t; print(t.corpus_report())'."""
    lines = []
    for name in RECORDS:
        k = _meta(name)["kvbudget"]
        if "model" not in k:
            lines.append(f"{name}: excluded ({k.get('exclude', '')[:60]})")
            continue
        result = _check(name)
        primary = _primary(result)
        tag = "excluded" if k.get("exclude") else "outlier" if k.get("outlier") else "in stats"
        arith = [f"{r.figure} {r.error_pct:+.2f}%" for r in result.arithmetic_rows if r.error_pct is not None and r.figure != "starts"]
        lines.append(f"{name}: {tag}; " + (f"{primary[0]} {primary[1]:+.2f}%" if primary else "no positive figure")
                     + (f"; arithmetic {', '.join(arith)}" if arith else ""))
    return "\n".join(lines)


@pytest.mark.parametrize("spelling", ["# GPU blocks", "GPU blocks", "# gpu blocks", "# cuda blocks", "# CUDA blocks"])
def test_gpu_blocks_are_read_whatever_their_length(spelling: str) -> None:
    """V0 prints ``# GPU blocks: N, # CPU blocks: M`` on one line: the GPU figure is read by its own
    literal, however long, never lost behind the CPU one (a figure of 50 digits is refused by name)."""
    from kvbudget.units import InputError

    assert parse_vllm_log(f"INFO {spelling}: 1952, # CPU blocks: 2048\n").num_gpu_blocks == 1952
    with pytest.raises(InputError, match="# GPU blocks is an integer of 50 digits"):
        parse_vllm_log(f"INFO {spelling}: {'9' * 50}, # CPU blocks: 2048\n")
    with pytest.raises(InputError, match="# GPU blocks is -7"):
        parse_vllm_log(f"INFO {spelling}: -7, # CPU blocks: 2048\n")
    with pytest.raises(InputError, match="no vLLM start-up figures"):  # the CPU figure alone is not the GPU's
        parse_vllm_log("INFO # CPU blocks: 2048\n")


def test_check_json_prediction_keeps_the_verdict_keys(capsys: pytest.CaptureFixture[str]) -> None:
    """check --json's prediction is fit's document: with batch, max_batch, max_context and fits (one request)."""
    import json

    from kvbudget.cli import main

    assert main(["check", str(DATA / "v0.6.5dev_h100_llama3-8b_default.log"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)["prediction"]
    # Llama-3-8B at 8,192 tokens on an H100 (vLLM 0.6.5's 0.9 budget): 55 requests' blocks, the whole context fits
    assert (doc["batch"], doc["max_batch"], doc["max_context"], doc["fits"]) == (1, 55, 8192, True)
    assert doc["max_batch"] == int(doc["max_concurrency"])


def test_lines_that_only_look_like_engine_arguments_are_not_read_as_them() -> None:
    """A fused-MoE tuning file's name carries dtype=fp8_w8a8 and vLLM 0.26's weight prefetcher prints
    block_size=16777216 bytes: neither is the engine's dtype or KV block size."""
    from kvbudget.engines.vllm.log import parse_vllm_log

    text = ("INFO [arg_utils.py:1] non-default args: {'model': 'Qwen/Qwen3-8B', 'dtype': 'bfloat16'}\n"
            "INFO [weight_utils.py:829] Prefetching checkpoint files into page cache started (in background, "
            "num_threads=8, block_size=16777216 bytes)\n"
            "INFO [fused_moe.py:1] Using configuration from /x/E=128,N=768,device_name=NVIDIA_H100,dtype=fp8_w8a8.json\n"
            "INFO [gpu_worker.py:1] Available KV cache memory: 10.00 GiB\n")
    settings = dict(parse_vllm_log(text).settings)
    assert settings.get("dtype") == "bfloat16"
    assert "block_size" not in settings


def test_a_figure_printed_once_per_rank_is_read_as_the_smallest() -> None:
    """vLLM 0.10 with TP prints "Available KV cache memory" per worker and "GPU KV cache size" per worker's config,
    then allocates the smallest on every rank; an earlier run's lines (another block) do not count."""
    from kvbudget.engines.vllm.log import parse_vllm_log

    text = ("INFO [kv_cache_utils.py:833] GPU KV cache size: 100 tokens\n"
            "INFO [api_server.py:1] restarting\n"
            "(VllmWorker rank=0) INFO [gpu_worker.py:255] Available KV cache memory: 35.74 GiB\n"
            "(VllmWorker rank=1) INFO [gpu_worker.py:255] Available KV cache memory: 35.65 GiB\n"
            "INFO [kv_cache_utils.py:833] GPU KV cache size: 1,590,736 tokens\n"
            "INFO [kv_cache_utils.py:837] Maximum concurrency for 32,768 tokens per request: 48.55x\n"
            "INFO [kv_cache_utils.py:833] GPU KV cache size: 1,611,664 tokens\n"
            "INFO [kv_cache_utils.py:837] Maximum concurrency for 32,768 tokens per request: 49.18x\n")
    log = parse_vllm_log(text)
    assert (log.kv_cache_tokens, log.max_concurrency, log.available_kv_gib) == (1_590_736, 48.55, 35.65)


def test_a_log_of_two_start_ups_is_read_as_its_last_run() -> None:
    """Two runs pasted one after the other read the first run's model and settings with the last run's figures:
    qwen3-32b at TP 2 on A100 figures, 'kvbudget -13.26 GiB' in calibrate, exit 0."""
    from kvbudget.engines.vllm.log import parse_vllm_log

    here = Path(__file__).parent / "data" / "vllm_logs"
    first = (here / "v0.10.0_h100x8_qwen3-32b_tp8_kvfp8_len32768.log").read_text(encoding="utf-8", errors="replace")
    last = (here / "v0.10.1.1_a100-80gb-x2_qwen2-7b_tp2_gmu0.25.log").read_text(encoding="utf-8", errors="replace")
    from kvbudget._record import replace

    both = parse_vllm_log(first + "\n" + last)
    assert both.starts == 2 and parse_vllm_log(last).starts == 1  # check says it read the last of two
    assert replace(both, starts=1) == parse_vllm_log(last)
    assert both.model is not None and "Qwen2" in both.model and both != parse_vllm_log(first)


def test_a_log_saved_as_utf16_reads_as_its_utf8_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Windows PowerShell 5's `vllm serve ... > run.log` writes UTF-16 with a byte-order mark: it was refused as binary
    (its NUL bytes). Read through the mark, it gives the same check as the UTF-8 log; a UTF-8 mark is dropped too."""
    from kvbudget.cli import main

    log = Path(__file__).parent / "data" / "vllm_logs" / "v0.22.1_h100_qwen3-30b-a3b-2507_fp8-online_len8192_gmu0.92_mns64.log"
    text = log.read_text(encoding="utf-8")
    outs = []
    for name, data in [("utf8.log", text.encode("utf-8")), ("utf16.log", text.encode("utf-16")),
                       ("utf16be.log", b"\xfe\xff" + text.encode("utf-16-be")), ("bom8.log", b"\xef\xbb\xbf" + text.encode())]:
        (tmp_path / name).write_bytes(data)
        assert main(["check", str(tmp_path / name), "--gpu", "H100"]) == 0
        outs.append(capsys.readouterr().out.replace(str(tmp_path / name), "LOG"))
    assert "available KV cache (GiB)     42.54" in outs[0] and outs[1:] == outs[:1] * 3


def test_a_multi_rank_log_cut_short_is_refused_or_warned() -> None:
    """vLLM 0.10.0 prints "Available KV cache memory" once per rank (gpu_worker.py, logger.info) and "GPU KV cache
    size" once per worker's config before taking the smallest (v1/engine/core.py); the TP 4 log cut after rank 0's
    52.21 GiB (vLLM used rank 2's 52.11) was checked against 52.21, exit 0. Cut in the token lines: warned."""
    from kvbudget.units import InputError

    text = (DATA / "v0.10.0_h100x4_qwen3-32b_tp4_yarn4_len131072_gmu0.95.log").read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if "Available KV cache memory" in line)
    with pytest.raises(InputError, match=r"from 1 of 4 ranks \('rank=0'\).*vLLM 0\.10\.0 prints once per rank"):
        check_log("".join(lines[:at + 1]), gpu="H100")
    assert parse_vllm_log("".join(lines[:at + 4])).available_kv_gib == 52.11  # every rank: the smallest
    two_pairs = check_log("".join(lines[:at + 8]), gpu="H100")  # two of four ranks' token lines
    assert any("'GPU KV cache size' for 2 of 4 ranks" in w for w in two_pairs.warnings), two_pairs.warnings
    assert not any("of 4 ranks" in w for w in check_log(text, gpu="H100").warnings)


def test_ray_repeated_lines_count_the_ranks_they_stand_for() -> None:
    """Ray prints a message of one worker, then "[repeated 3x across cluster]" for the other three (the 4 x A100
    gpt-oss-120b log): four ranks, not refused as a log cut short."""
    log = parse_vllm_log((DATA / "v0.10.1.1_a100-80gb-x4_gpt-oss-120b_tp4-ray_gmu0.8.log").read_text(encoding="utf-8"))
    assert log.available_printed == 4 and log.kv_size_printed == 4


def test_check_takes_a_whole_launch_command_after_the_separator(capsys: pytest.CaptureFixture[str]) -> None:
    # the gpt-oss-120b TP 2 run was vLLM's image under Apptainer: as flags alone the sampler is the pip install's
    # PyTorch sort (-3.05%); the image's command (or VLLM_USE_FLASHINFER_SAMPLER=1 before vllm serve) takes FlashInfer
    from kvbudget.cli import main

    log = str(DATA / "v0.11-0.12_80gb-x2_gpt-oss-120b_tp2_default.log")
    base = ["check", log, "--model", "openai/gpt-oss-120b", "--gpu", "A100-80GB", "--json"]

    def tokens(*after: str) -> int:
        assert main([*base, "--", *after]) == 0
        out = json.loads(capsys.readouterr().out)
        return next(r["predicted"] for r in out["comparison"] if r["figure"] == "KV cache tokens")

    assert tokens("--tensor-parallel-size", "2") == 1011424
    image = tokens("apptainer", "instance", "run", "--nv", "vllm_vllm-openai_v0.10.2.sif", "svc", "--model", "/data/m")
    assert image == tokens("VLLM_USE_FLASHINFER_SAMPLER=1", "vllm", "serve", "openai/gpt-oss-120b") == 1044928
    assert tokens("docker", "run", "--gpus", "all", "vllm/vllm-openai:v0.10.2", "--model", "openai/gpt-oss-120b") == image
    assert tokens("docker", "run", "--gpus", "all", "vllm/vllm-openai:v0.10.2") == image  # the model: --model's
