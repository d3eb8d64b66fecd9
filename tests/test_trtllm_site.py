"""`calibrate` on TensorRT-LLM logs and `--profile` on its plans: the free memory the pool was sized from, as the log
shows it and as kvbudget plans it, per GPU, release line and GPU count. Checked leave-one-out on three published
trtllm-bench runs of one site (tests/data/trtllm_logs, the same H100 SXM, release 0.20.0 and checkpoint): each
predicted with a profile of the other two."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import kvbudget
from kvbudget._record import replace
from kvbudget.cli import main
from kvbudget.engines.base import default_registry
from kvbudget.engines.site import SiteTerm, site_bytes
from kvbudget.questions.calibrate import Point
from kvbudget.units import GiB

DATA = Path(__file__).parent / "data" / "trtllm_logs"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"  # the catalog's, which the logs' FP8 checkpoint quantizes (they say so)
SITE = ["v0.20.0_h100-sxm_llama3.1-8b-fp8_pytorch_trtllm-bench-kv080-isl12-osl256",
        "v0.20.0_h100-sxm_llama3.1-8b-fp8_pytorch_trtllm-bench-kv090-isl128-osl128",
        "v0.20.0_h100-sxm_llama3.1-8b-fp8_pytorch_trtllm-bench-kv090-isl128-osl256"]


def _point(name: str) -> Point:
    k = json.loads((DATA / f"{name}.json").read_text())["kvbudget"]
    point = default_registry().get("trtllm").calibration_point(name, (DATA / f"{name}.log").read_text(),
                                                               {"model": MODEL, "gpu": k["gpu"]})
    assert point is not None
    return point  # type: ignore[no-any-return]


def test_leave_one_out_on_one_sites_runs() -> None:
    """Each run's free memory at sizing, predicted with a profile of the other two: about 1 GiB off alone (kvbudget
    plans 69.0-69.5 GiB where the logs show 68.0-68.5), within 0.1 GiB with its neighbours' term."""
    points = [_point(n) for n in SITE]
    assert {(p.gpu, p.release, p.gpus, p.figure) for p in points} == {
        ("H100-SXM-80GB", "0.20", 1, "free memory when the pool is sized")}
    for p in points:
        others = [q for q in points if q is not p]
        term = sorted(q.residual for q in others)[len(others) // 2]  # calibrate's median of the other two
        site = (SiteTerm(p.gpu, p.release, p.gpus, term, len(others)),)
        extra, _ = site_bytes(site, p.gpu, p.release, p.gpus)
        alone, calibrated = abs(p.residual), abs(p.residual - extra)
        assert alone > 0.9 * GiB and calibrated < 0.1 * GiB, (p.log, alone / GiB, calibrated / GiB)


def test_profile_takes_the_held_memory_off_the_pool(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """calibrate writes a TensorRT-LLM profile; fit with it on that GPU and release loses fraction x the term of its
    pool (TensorRT-LLM sizes it as fraction x the free memory), to a block; on another release it says none applies."""
    out = tmp_path / "site.json"
    logs = [str(DATA / f"{n}.log") for n in SITE]
    assert main(["calibrate", *logs, "--model", MODEL, "--gpu", "H100", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Free memory when the pool is sized, logged vs kvbudget's model" in printed and "--trtllm-release" in printed
    doc = json.loads(out.read_text())
    assert doc["engine"] == "trtllm" and [(t["release"], t["logs"]) for t in doc["terms"]] == [("0.20", 3)]
    held = doc["terms"][0]["bytes"]
    assert held == sorted(_point(n).residual for n in SITE)[1]
    from kvbudget.engines import trtllm

    spec, gpu = kvbudget.load_model(MODEL), kvbudget.find_gpu("H100")
    settings = trtllm.TrtllmSettings(release="0.20.0", quantization="fp8", kv_cache_dtype="fp8", max_seq_len=8192)
    alone = trtllm.plan(spec, gpu, settings)
    site = trtllm.plan(spec, gpu, replace(settings, site=default_registry().get("trtllm").site_terms(doc)))
    assert abs((alone.available_bytes - site.available_bytes) - 0.9 * held) <= 1  # fraction x the held memory
    assert abs((alone.max_tokens - site.max_tokens) - 0.9 * held / alone.per_token_bytes) <= alone.tokens_per_block
    assert any("site profile: +1.12 GiB from 3 log(s) of H100-SXM-80GB, 0.20" in n for n in site.notes)
    # fit takes the profile and the release line; without --trtllm-release it plans the current source, which
    # the site's runs do not cover, and says so
    options = {"profile": doc}
    fitted = kvbudget.fit(MODEL, gpu="H100", context=8192, engine="trtllm", weights_dtype="fp8", kv_dtype="fp8",
                          options={"profile": doc, "trtllm_release": "0.20.0"})
    assert fitted.plan.max_tokens == site.max_tokens
    current = kvbudget.fit(MODEL, gpu="H100", context=8192, engine="trtllm", options=options)
    assert any("site profile has no run on H100-SXM-80GB with TensorRT-LLM current" in n for n in current.plan.notes)


def test_a_log_without_its_settings_is_not_calibrated_on(capsys: pytest.CaptureFixture[str]) -> None:
    """A log that prints neither its fraction nor its batch limits: kvbudget plans TensorRT-LLM's defaults, whose
    difference from the run's settings a profile would take for site memory (17 GiB on the 0.19 RTX 5090 log)."""
    log = DATA / "v0.19.0_rtx5090_llama3.1-8b-fp8_engine_trtllm-serve.log"
    assert main(["calibrate", str(log), "--model", MODEL, "--gpu", "RTX 5090"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the log does not print free_gpu_memory_fraction, max_batch_size" in err


def test_a_trtllm_profile_release_is_a_line() -> None:
    from kvbudget.engines.site import site_profile
    from kvbudget.engines.trtllm.policy import is_release_key
    from kvbudget.units import InputError

    term = {"gpu": "H100", "gpus": 1, "bytes": 1, "logs": 1}
    doc = {"kvbudget_profile": 1, "engine": "trtllm", "terms": [{**term, "release": "0.20"}, {**term, "release": "current"}]}
    assert [t.release for t in site_profile(doc, "trtllm", "TensorRT-LLM", is_release_key)] == ["0.20", "current"]
    with pytest.raises(InputError, match=r"release '0\.20\.0' is not a TensorRT-LLM release line kvbudget knows: recal"):
        site_profile({**doc, "terms": [{**term, "release": "0.20.0"}]}, "trtllm", "TensorRT-LLM", is_release_key)
