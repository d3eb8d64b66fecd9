"""llama.cpp start-up logs users and llama.cpp's own CI published (tests/data/llamacpp_logs, one .json
of provenance per .log): every KV figure must be reproduced to the printed 0.01 MiB.

Two checks per log. (1) The log's own arithmetic: each ``size =`` / ``KV self size`` line recomputed from
the hyper-parameters the log prints (or, where the excerpt lacks them, the catalog model its
``kvbudget.model`` names), and each ``KV buffer size`` line a whole number of layers. (2) The prediction:
``kvbudget``'s llama.cpp plan for the model and the settings the log shows (``kvbudget.settings``, with
the build's rules) gives the same cells and the same K and V MiB as the log.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import kvbudget
from kvbudget.engines.llamacpp import LlamaCppSettings, plan
from kvbudget.engines.llamacpp import calibration as eras
from kvbudget.engines.llamacpp.check import check_caches
from kvbudget.engines.llamacpp.log import parse_llamacpp_log
from kvbudget.units import MiB

DATA = Path(__file__).parent / "data" / "llamacpp_logs"
CASES = sorted(p.stem for p in DATA.glob("*.json"))


def _case(name: str) -> tuple[str, dict[str, Any]]:
    meta = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
    return (DATA / f"{name}.log").read_text(encoding="utf-8"), meta["kvbudget"]


def test_the_corpus_is_large_and_documented() -> None:
    assert len(CASES) >= 15
    for name in CASES:
        meta = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
        assert meta["url"].startswith("https://") and "kvbudget" in meta, name


@pytest.mark.parametrize("name", CASES)
def test_log_arithmetic_is_exact(name: str) -> None:
    text, kb = _case(name)
    log = parse_llamacpp_log(text)
    spec = kvbudget.load_model(kb["model"]) if kb.get("model") else None
    checks = check_caches(log, spec)
    for cache in log.caches:  # a cache's buffers always add up to its size line
        if cache.buffers and not kb.get("partial_buffers"):
            assert f"{sum(m for _, m in cache.buffers):.2f}" == f"{cache.total_mib:.2f}", name
    if not kb.get("log_check", True):
        return
    assert checks, name
    for c in checks:
        assert c.exact, (name, c.cache, c.predicted_k_mib, c.predicted_v_mib)
        if kb.get("partial_buffers"):
            assert all(n * c.layer_bytes[b] / MiB == pytest.approx(mib, abs=0.005)
                       for (b, mib), n in zip(c.cache.buffers, c.buffer_layers, strict=True)), name
        else:
            assert c.buffers_exact, (name, c.buffer_layers)
    if "buffer_layers" in kb and checks:
        assert list(checks[0].buffer_layers) == kb["buffer_layers"], name


@pytest.mark.parametrize("name", [n for n in CASES if "settings" in _case(n)[1]])
def test_prediction_matches_the_log(name: str) -> None:
    text, kb = _case(name)
    log = parse_llamacpp_log(text)
    p = plan(kvbudget.load_model(kb["model"]), None, LlamaCppSettings(**kb["settings"]))
    if not log.caches:  # an excerpt with only the buffer lines: compare the total
        total = sum(m for _, m in log.buffers_mib)
        assert f"{(p.k_bytes + p.v_bytes + p.swa_k_bytes + p.swa_v_bytes) / MiB:.2f}" == f"{total:.2f}", name
        per_layer = (p.k_bytes + p.v_bytes) // p.kv_layers
        assert [m * MiB / per_layer for _, m in log.buffers_mib] == kb["buffer_layers"], name
        return
    for cache in log.caches:
        k, v = (p.swa_k_bytes, p.swa_v_bytes) if cache.swa else (p.k_bytes, p.v_bytes)
        cells = p.swa_cells if cache.swa else p.cells
        if cache.cells:
            assert cells == cache.cells, (name, cells, cache.cells)
        assert (f"{k / MiB:.2f}", f"{v / MiB:.2f}") == (f"{cache.k_mib:.2f}", f"{cache.v_mib:.2f}"), name


def test_tensor_split_reproduces_the_logged_layer_split() -> None:
    # b4462, -ngl 99 -ts 10,6 on 64 layers: the KV buffers hold 41 and 23 layers (2788 and 1564 MiB of 68 MiB)
    text, kb = _case("b4462_2x3090ti_qwen2.5-coder-32b_q8kv_split")
    assert eras.split_layers(64, 99, kb["tensor_split"]) == kb["buffer_layers"] == [41, 23]
    assert eras.split_layers(64, 99, [1, 1]) == [33, 31]  # an even split puts the extra layers first
    assert eras.split_layers(64, 10, [1]) == [10 - 1]  # -ngl 10: the output layer counts as one of them
    with pytest.raises(ValueError):
        eras.split_layers(64, 99, [0, 0])
    assert "-ts" not in text  # the command is in the .json, not the excerpt


def test_the_logged_command_predicts_each_gpus_kv_buffer() -> None:
    from kvbudget.engines.llamacpp.command import parse_llamacpp_command

    # b4462: llama-server ... -ts 10,6 -ngl 99 -c 32768 --flash-attn --cache-type-k q8_0 --cache-type-v q8_0 on two
    # RTX 3090 Ti: "CUDA0 KV buffer size = 2788.00 MiB", "CUDA1 KV buffer size = 1564.00 MiB"
    meta = json.loads((DATA / "b4462_2x3090ti_qwen2.5-coder-32b_q8kv_split.json").read_text(encoding="utf-8"))
    cmd = parse_llamacpp_command(meta["command"], 4462)  # a bare --flash-attn: a switch in that build
    assert cmd.settings.build == 4462
    assert (cmd.settings.tensor_split, cmd.settings.flash_attn, cmd.settings.type_k) == ((10.0, 6.0), "on", "q8_0")
    spec = kvbudget.load_model(meta["kvbudget"]["model"])
    p = plan(spec, kvbudget.find_gpu("RTX-3090"), cmd.settings)
    assert [b / MiB for b in p.kv_device_bytes] == [meta["reported"]["kv_buffer_mib"]["CUDA0"],
                                                    meta["reported"]["kv_buffer_mib"]["CUDA1"]] == [2788.0, 1564.0]


def test_a_log_without_kv_widths_needs_the_model() -> None:
    """A llama.cpp excerpt with the KV cache line but neither n_embd_k_gqa / n_head_kv nor the GGUF dump: before,
    `check` printed "0.00 / 0.00 DIFFERS" with exit 0 (a figure computed from nothing); now one error line asks for
    --model, and with it the caches are recomputed exactly (b4462, 2 x 3090 Ti, Qwen2.5-Coder-32B, q8_0 K and V:
    64 layers x 32,768 cells x 1,024 wide x 34/32 bytes = 2,176 MiB each)."""
    import subprocess
    import sys

    log = DATA / "b4462_2x3090ti_qwen2.5-coder-32b_q8kv_split.log"
    run = subprocess.run([sys.executable, "-m", "kvbudget", "check", str(log)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.count("\n") == 1 and "lacks the KV widths" in run.stderr and "--model" in run.stderr
    assert 64 * 32768 * 1024 * 34 // 32 / MiB == 2176.0
    checks = check_caches(parse_llamacpp_log(log.read_text()), kvbudget.load_model("Qwen/Qwen2.5-Coder-32B-Instruct"))
    assert [(c.predicted_k_mib, c.predicted_v_mib, c.exact) for c in checks] == [(2176.0, 2176.0, True)]


def _as_printed(text: str) -> set[str]:
    """The log's lines as llama.cpp wrote them: less a timestamp ("0.01.908.702 I "), a journal prefix
    ("... ollama[1756203]: ") and a decimal comma (a ROCm log of a comma locale)."""
    import re

    out = set()
    for line in text.splitlines():
        line = re.sub(r"^\d+\.\d+\.\d+\.\d+ [A-Z] ", "", line)
        line = re.sub(r"^.*?\]: (?=\w+: )", "", line)
        out.add(re.sub(r"(\d),(\d\d) MiB", r"\1.\2 MiB", line))
    return out


@pytest.mark.parametrize("name", [n for n in CASES if "settings" in _case(n)[1]])
def test_will_log_lines_are_the_builds_own(name: str) -> None:
    """The lines 'llama.cpp will log' for a build (--llamacpp-build N) are that build's: its function names
    (llama_new_context_with_model, llama_init_from_model, init, llama_kv_cache_init, llama_kv_cache_unified) and its
    KV line ("KV self size = ..." before b5429, "size = ... cells" without and with seqs after), each found verbatim
    in the corpus log wherever the log has a line of that kind. Every build printed today's 'llama_kv_cache: size'."""
    text, kb = _case(name)
    logged = _as_printed(text)
    p = plan(kvbudget.load_model(kb["model"]), None, LlamaCppSettings(**kb["settings"]))
    kinds = ("KV self size", "cells,", "creating", ": n_ctx ")
    mine = [line for line in p.log_lines if any(k in line for k in kinds)]
    assert any("KV self size" in line or "cells," in line for line in mine), name
    for kind in kinds:
        if any(kind in line for line in logged):
            for line in mine:
                if kind in line:
                    assert line in logged, (name, line)


def test_an_old_builds_kv_buffer_lines() -> None:
    """b4445 on a V100 (llama.cpp's CI): each GPU's KV buffer as llama_kv_cache_init printed it, then the context's
    KV self size line, and the context's own compute buffer line."""
    from kvbudget.hardware import find_gpu

    text, kb = _case("b4445_ggml-ci_v100_pythia-2.8b_f16")
    p = plan(kvbudget.load_model(kb["model"]), find_gpu("V100-PCIe-16GB"), LlamaCppSettings(**kb["settings"]))
    logged = _as_printed(text)
    kv = [line for line in p.log_lines if "KV" in line]
    assert kv == ["llama_kv_cache_init:      CUDA0 KV buffer size =   640.00 MiB",
                  "llama_new_context_with_model: KV self size  =  640.00 MiB, K (f16):  320.00 MiB, V (f16):  320.00 MiB"]
    assert all(line in logged for line in kv)
    assert any(line.startswith("llama_new_context_with_model:      CUDA0 compute buffer size") for line in p.log_lines)
    assert not any(line.startswith(("llama_context:", "llama_kv_cache:", "sched_reserve:")) for line in p.log_lines)
