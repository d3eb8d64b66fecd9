"""``kvbudget size``: the sizing checklist in one run. Each step's figures are the ones its own command prints (the
same documents), and the re-run budget is the static figure over (1 - the measured hit rate)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvbudget.cli import main

DATA = Path(__file__).parent / "data"
LOG = DATA / "vllm_logs" / "v0.6.5dev_h100_llama3-8b_default.log"  # vLLM printed it: Llama-3-8B, 8,192, one H100
METRICS = DATA / "metrics" / "vllm-0.33-busy.prom"
WORKLOAD = "requests=60,rate=4,prompt=uniform:100:900,output=uniform:10:120,prefixes=2x256@0.7,seed=4"


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(list(argv)) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_every_step_is_its_own_command(capsys: pytest.CaptureFixture[str]) -> None:
    model = ["meta-llama/Meta-Llama-3-8B", "--gpu", "H100", "--context", "8192"]
    doc = _json(capsys, "size", *model, "--log", str(LOG), "--synthetic", WORKLOAD, "--metrics", str(METRICS),
                "--json")
    assert doc["kv"] == _json(capsys, "kv", "meta-llama/Meta-Llama-3-8B", "--context", "8192", "--json")
    assert doc["fit"] == _json(capsys, "fit", *model, "--json")
    assert doc["check"] == _json(capsys, "check", str(LOG), "--model", "meta-llama/Meta-Llama-3-8B", "--gpu", "H100",
                                 "--json")
    sim = _json(capsys, "simulate", *model, "--synthetic", WORKLOAD, "--json")
    assert doc["simulate"] == sim
    assert doc["diagnose"]["servers"][0]["num_gpu_blocks"] is not None
    # step 5: the server's own hit rate (its counters since start), the static figure over (1 - it)
    server = doc["diagnose"]["servers"][0]
    hit = server["prefix_hits"] / server["prefix_queries"]
    r = doc["rerun"]
    assert r["source"] == "the server's metrics" and r["hit_rate"] == pytest.approx(hit)
    assert r["static_concurrency"] == pytest.approx(doc["fit"]["max_concurrency"])
    assert r["effective_concurrency"] == pytest.approx(r["static_concurrency"] / (1 - hit))
    assert r["simulated_concurrency"] == pytest.approx(sim["effective_concurrency"])
    assert [s["step"] for s in doc["steps"]] == ["KV per token", "start-up", "start-up log", "load test", "monitoring",
                                                 "budget re-run"]


def test_without_metrics_the_simulated_reuse_is_used_and_the_skipped_steps_say_how_to_run_them(
        capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(capsys, "size", "Qwen/Qwen3-8B", "--gpu", "L4", "--context", "8192", "--synthetic", WORKLOAD, "--json")
    steps = {s["step"]: s["done"] for s in doc["steps"]}
    assert "--log FILE" in steps["start-up log"] and "--metrics" in steps["monitoring"]
    assert doc["check"] is None and doc["diagnose"] is None
    r = doc["rerun"]
    assert r["source"] == "the simulation"
    assert r["hit_rate"] == pytest.approx(doc["simulate"]["policies"][0]["prefix_hit_tokens"]) and r["hit_rate"] > 0


@pytest.mark.parametrize("kind", ["md", "html"])
def test_the_report_file_holds_every_step_and_the_plots(kind: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / f"sizing.{kind}"
    assert main(["size", "Qwen/Qwen3-8B", "--gpu", "L4", "--context", "8192", "--synthetic", WORKLOAD,
                 "--report", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"report written: {out}" in text
    body = out.read_text()
    for title in ("1. KV cache per token", "2. What the engine allocates", "3. Load test", "4. Monitoring",
                  "5. The budget re-run"):
        assert title in body
    blocks = json.loads(_capture(capsys, "fit"))["num_gpu_blocks"]
    assert f"{blocks:,} blocks" in body  # the simulated pool is the one fit plans
    if kind == "md":
        assert (tmp_path / "sizing-1.png").stat().st_size > 1000 and "![" in body
    else:
        assert body.count("<svg") == 2 and "<script" not in body


def _capture(capsys: pytest.CaptureFixture[str], command: str) -> str:
    assert main([command, "Qwen/Qwen3-8B", "--gpu", "L4", "--context", "8192", "--json"]) == 0
    return capsys.readouterr().out


def test_size_refuses_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv, words in [
        (["--report", str(tmp_path / "r.pdf")], "give a .md or .html file"),
        (["--dcgm", str(DATA / "metrics" / "dcgm-h100-full.prom")], "read with --metrics"),
        (["--log", str(tmp_path / "none.log")], "none.log"),
    ]:
        assert main(["size", "Qwen/Qwen3-8B", "--gpu", "L4", "--context", "8192", *argv]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and words in err, err
