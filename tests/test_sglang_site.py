"""Memory held outside an SGLang server (a desktop, WSL2's host, another process): `check` says so where a log's
free memory before loading is short of a bare card's, and `calibrate` turns such logs into a profile that SGLang's
plans take off that free memory (`--profile`). Checked on two published runs under Docker Desktop / WSL2
(tests/data/sglang_logs), each of which SGLang itself sized from less free memory than a bare card has."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import kvbudget
from kvbudget._record import replace
from kvbudget.cli import main
from kvbudget.engines import sglang
from kvbudget.engines.sglang.check import check_run
from kvbudget.units import GiB

DATA = Path(__file__).parent / "data" / "sglang_logs"
WSL_4090 = "v0.4.9docker_24gb-wsl_llama3.1-8b_default"  # free after loading 7.37 GB + load's mem usage 15.02 GB
WSL_3090 = "v0.4.2-era_rtx3090-wsl_r1-distill-qwen-7b_docker"  # Load weight begin. avail mem=22.76 GB


def _given(name: str) -> dict[str, object]:
    k = json.loads((DATA / f"{name}.json").read_text())["kvbudget"]
    return {"model": k["model"], "gpu": k["gpu"], "sglang_version": k["settings"].get("version")}


def _logged_tokens(name: str) -> int:
    return int(json.loads((DATA / f"{name}.json").read_text())["reported"]["max_total_num_tokens"])


@pytest.mark.parametrize(("name", "pre_gb"), [(WSL_4090, 7.37 + 15.02), (WSL_3090, 22.76)])
def test_check_says_what_memory_outside_the_server_explains(name: str, pre_gb: float) -> None:
    """The free memory before loading the log shows (printed, or after loading plus the load's usage) against the
    bare card's: the gap, planned as a smaller card, brings the pool within 1.5% of the log's (it was +14.0% and
    +5.7% off), and the warning says so."""
    c = check_run((DATA / f"{name}.log").read_text(), _given(name))
    pre = next(r for r in c.rows if r.figure.startswith("free before loading"))
    assert pre.reported == pytest.approx(pre_gb, abs=0.005)
    gap = pre.predicted - pre.reported  # type: ignore[operator]
    held = [w for w in c.warnings if "held outside this server" in w]
    assert len(held) == 1 and f"{pre_gb:.2f} GB free before loading" in held[0] and f"{gap:.2f} GB less" in held[0]
    logged = _logged_tokens(name)
    tokens = next(r for r in c.rows if r.figure.startswith("KV tokens"))
    assert tokens.error_pct is not None and tokens.error_pct > 5  # the bare card's prediction
    gpu = kvbudget.find_gpu(str(_given(name)["gpu"]))
    smaller = replace(gpu, memory_bytes=gpu.memory_bytes - round(gap * GiB))
    settings = sglang.SGLangSettings(**dict(c.settings))  # as check read them from the log
    p = sglang.plan(kvbudget.load_model(str(_given(name)["model"])), smaller, settings)
    assert abs(p.max_total_num_tokens - logged) / logged < 0.015
    assert f"the pool is {p.max_total_num_tokens:,} tokens" in held[0]


@pytest.mark.parametrize("name", ["v0.5-era-mar2026_80gb_qwen2.5-3b_no-cuda-graph", "v0.4.1docs_h100_llama3.1-8b_default",
                                  "v0.4.3.post4_l4x4_qwq-32b_tp4_default", "v0.5.18_h100_qwen3-reranker-0.6b_mem0.3_no-radix"])
def test_no_such_warning_where_the_card_was_bare(name: str) -> None:
    c = check_run((DATA / f"{name}.log").read_text(), _given(name))
    assert any(r.figure.startswith("free before loading") for r in c.rows)
    assert not [w for w in c.warnings if "held outside" in w]


def test_calibrated_profile_moves_another_models_pool_by_the_held_memory(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """calibrate on the RTX 4090 WSL2 log writes an SGLang profile of the memory held there (22.39 GB free against
    kvbudget's bare card); fit of another model on that GPU and release line with --profile loses what SGLang's rule
    says: the pool is free-after-loading - (1 - f) x free-before-loading, so H held outside takes f x H off it,
    (f x H) / (bytes per token) tokens."""
    out = tmp_path / "site.json"
    given = _given(WSL_4090)
    assert main(["calibrate", str(DATA / f"{WSL_4090}.log"), "--model", str(given["model"]), "--gpu", str(given["gpu"]),
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Free memory before loading, logged vs kvbudget's model" in printed and "--sglang-version" in printed
    doc = json.loads(out.read_text())
    assert doc["engine"] == "sglang" and len(doc["terms"]) == 1
    term = doc["terms"][0]
    c = check_run((DATA / f"{WSL_4090}.log").read_text(), given)
    pre = next(r for r in c.rows if r.figure.startswith("free before loading"))
    assert term["bytes"] == round(pre.predicted * GiB) - round(pre.reported * GiB)  # type: ignore[operator]
    assert (term["gpu"], term["release"], term["gpus"]) == ("RTX-4090-24GB", "0.4.8", 1)
    options = {"sglang_version": "0.4.8"}
    bare = kvbudget.fit("Qwen/Qwen2.5-7B-Instruct", gpu="RTX-4090-24GB", context=8192, engine="sglang", options=options)
    site = kvbudget.fit("Qwen/Qwen2.5-7B-Instruct", gpu="RTX-4090-24GB", context=8192, engine="sglang",
                        options={**options, "profile": doc})
    cell = 28 * 4 * 128 * 2 * 2  # Qwen2.5-7B: layers x KV heads x head_dim x (K, V) x bf16 bytes
    fraction = bare.plan.mem_fraction_static
    lost = bare.plan.max_total_num_tokens - site.plan.max_total_num_tokens
    assert abs(lost - fraction * term["bytes"] / cell) <= 1
    assert any("site profile: +0.70 GiB from 1 log(s) of RTX-4090-24GB, 0.4.8" in n for n in site.plan.notes)
    # the logged run itself, replanned with its own profile: within 1% of what SGLang printed
    own = sglang.plan(kvbudget.load_model(str(given["model"])), kvbudget.find_gpu("RTX-4090-24GB"),
                      sglang.SGLangSettings(version="0.4.8", site=tuple(_terms(doc))))
    assert abs(own.max_total_num_tokens - _logged_tokens(WSL_4090)) / _logged_tokens(WSL_4090) < 0.01
    # another GPU: no term applies, and the plan says so
    other = kvbudget.fit("Qwen/Qwen2.5-7B-Instruct", gpu="L4", context=8192, engine="sglang",
                         options={**options, "profile": doc})
    assert any("site profile has no run on L4-24GB" in n for n in other.plan.notes)


def _terms(doc: dict[str, object]) -> tuple[object, ...]:
    from kvbudget.engines.sglang.settings import LINES
    from kvbudget.engines.site import site_profile

    return site_profile(doc, "sglang", "SGLang", LINES)


def test_profiles_stay_with_their_engine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sglang_doc = tmp_path / "sglang.json"
    sglang_doc.write_text(json.dumps({"kvbudget_profile": 1, "engine": "sglang", "terms": [
        {"gpu": "RTX-4090-24GB", "release": "0.4.8", "gpus": 1, "bytes": 751619277, "logs": 1}]}))
    vllm_doc = tmp_path / "vllm.json"
    vllm_doc.write_text(json.dumps({"kvbudget_profile": 1, "engine": "vllm", "terms": [
        {"gpu": "RTX-4090-24GB", "release": "v1", "gpus": 1, "bytes": 1, "logs": 1}]}))
    vllm_log = DATA.parent / "vllm_logs" / "v0.10.2_rtx4090_qwen2.5-3b_fp16_len4096_mns1.log"
    for argv, said in [
        (["fit", "llama-3.1-8b", "--gpu", "RTX-4090-24GB", "--profile", str(sglang_doc)],
         "a profile of engine 'sglang', and this plan is vLLM's"),
        (["fit", "llama-3.1-8b", "--gpu", "RTX-4090-24GB", "--engine", "sglang", "--profile", str(vllm_doc)],
         "a profile of engine 'vllm', and this plan is SGLang's"),
        (["explain", "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct", "--gpu",
          "RTX-4090-24GB", "--profile", str(vllm_doc)], "a profile of engine 'vllm', and this plan is SGLang's"),
        (["calibrate", str(vllm_log), str(DATA / f"{WSL_4090}.log"), "--gpu", "RTX-4090-24GB", "--model",
          "meta-llama/Llama-3.1-8B-Instruct"], "are two engines' logs (vLLM, SGLang): a profile holds one engine's terms"),
    ]:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and said in err, err


@pytest.mark.parametrize(("gpu", "unified"), [("GB10", True), ("Jetson AGX Orin", True), ("H100", False)])
def test_unified_memory_devices_say_what_is_not_counted(gpu: str, unified: bool) -> None:
    """On a device whose memory the CPU shares, the free memory an engine measures is the system's: every engine's
    plan says kvbudget counts none of the host's use (catalog: "unified_memory")."""
    for engine in ("sglang", "vllm"):
        answer = kvbudget.fit("Qwen/Qwen2.5-7B-Instruct", gpu=gpu, context=4096, engine=engine)
        said = [n for n in answer.plan.notes if "shares its memory with the CPU" in n]
        assert bool(said) == unified, (engine, gpu)
