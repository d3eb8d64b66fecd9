"""`--plot` on kv, fit and plan: each figure is rendered to a real PNG and SVG file, read back, and holds
its labelled elements (SVG text is kept as text)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image
import pytest

import kvbudget
from kvbudget.cli import main
from kvbudget.engines import vllm
from kvbudget.engines.base import default_registry
from kvbudget.report.plots import crossover
from kvbudget.units import GiB

LLAMA8 = "meta-llama/Llama-3.1-8B-Instruct"


def _png(path: Path) -> tuple[int, int]:
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    h, w = matplotlib.image.imread(str(path)).shape[:2]
    return w, h


def test_kv_plot_marks_where_the_cache_outgrows_the_weights(tmp_path: Path) -> None:
    spec = kvbudget.load_model(LLAMA8)
    # Llama-3.1-8B: 128 KiB of KV per token, 14.96 GiB of bf16 weights -> one sequence outgrows them past
    # 14.96 GiB / 128 KiB = 122,533 tokens; 32 sequences past 3,830 tokens each
    weights = spec.inventory.total * 2
    assert crossover(spec, weights, 1) == weights // (128 * 1024) + 1 == 122_533
    assert crossover(spec, weights, 32) == weights // (32 * 128 * 1024) + 1 == 3_830
    assert crossover(spec, 10**15, 1) is None
    assert main(["kv", LLAMA8, "--context", "8192", "--plot", str(tmp_path / "kv.png")]) == 0
    w, h = _png(tmp_path / "kv.png")
    assert w > 800 and h > 300
    assert main(["kv", LLAMA8, "--context", "8192", "--plot", str(tmp_path / "kv.svg")]) == 0
    svg = (tmp_path / "kv.svg").read_text()
    for label in ("crossover, batch 32: 3,830 tokens", "crossover, batch 1: 122,533 tokens", "weights 15.0 GiB",
                  "KV cache vs sequence length", "KV &gt; weights from batch 15"):
        assert label in svg, label


def test_fit_plot_is_the_memory_partition(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = kvbudget.load_model("meta-llama/Llama-3.1-70B-Instruct")
    p = vllm.plan(spec, kvbudget.find_gpu("H100"), vllm.VllmSettings(max_model_len=8192, tensor_parallel_size=4))
    parts = dict(default_registry().get("vllm").partition(p)[2][0])
    assert parts["weights"] == p.model_loading_bytes and parts["KV cache"] == p.available_kv_cache_bytes
    assert sum(parts.values()) == p.total_bytes  # the bar is the whole GPU: what is not used is "free"
    assert main(["fit", "llama-3.1-70b", "--gpu", "H100", "--num-gpus", "4", "--context", "8192",
                 "--plot", str(tmp_path / "fit.svg")]) == 0
    svg = (tmp_path / "fit.svg").read_text()
    for label in ("weights", "KV cache", "activation", "CUDA graphs", "free", "GPU 3", "GiB per GPU"):
        assert label in svg, label
    assert main(["fit", LLAMA8, "--gpu", "L4", "--engine", "textbook", "--context", "8192",
                 "--plot", str(tmp_path / "t.png")]) == 0
    _png(tmp_path / "t.png")
    assert main(["fit", LLAMA8, "--gpu", "L4", "--context", "8192", "--plot", str(tmp_path / "x.jpg")]) == 2
    assert "give a .png or .svg file" in capsys.readouterr().err


def test_plan_plot_marks_the_chosen_deployment(tmp_path: Path) -> None:
    assert main(["plan", "llama-3.1-70b", "--concurrency", "64", "--context", "8192", "--gpus", "H100,L40S,L4",
                 "--plot", str(tmp_path / "plan.svg")]) == 0
    svg = (tmp_path / "plan.svg").read_text()
    assert "capacity vs price per hour" in svg and "chosen: 8 x L4-24GB" in svg and "load: 64 requests" in svg
    assert main(["plan", "llama-3.1-70b", "--concurrency", "64", "--context", "8192", "--gpus", "H100",
                 "--plot", str(tmp_path / "plan.png")]) == 0
    _png(tmp_path / "plan.png")
    assert 14.9 < 2 * kvbudget.load_model(LLAMA8).inventory.total / GiB < 15.0


def test_fit_plot_draws_each_pipeline_stage(tmp_path: Path) -> None:
    spec = kvbudget.load_model("meta-llama/Llama-3.1-70B-Instruct")
    p = vllm.plan(spec, kvbudget.find_gpu("H100"), vllm.VllmSettings(max_model_len=8192, tensor_parallel_size=4,
                                                                  pipeline_parallel_size=2))
    stages = default_registry().get("vllm").partition(p)[2][::4]  # one TP rank of each stage
    assert len(stages) == 2 and all(sum(b for _, b in s) == p.total_bytes for s in stages)
    # 80 layers split 40/40: the same KV pool on both stages (every rank holds num_gpu_blocks blocks of its layers)
    kv = [dict(s)["KV cache"] for s in stages]
    assert kv[0] == kv[1] == p.num_gpu_blocks * p.bytes_per_block <= p.available_kv_cache_bytes
    # the first stage holds the token embedding, the last the lm_head and the sampler's logits
    assert dict(stages[1])["activation"] > dict(stages[0])["activation"]
    assert main(["fit", "llama-3.1-70b", "--gpu", "H100", "--tp", "4", "--pp", "2", "--context", "8192",
                 "--plot", str(tmp_path / "pp.svg")]) == 0
    svg = (tmp_path / "pp.svg").read_text()
    assert "stage 1" in svg and "GPU 7" in svg
