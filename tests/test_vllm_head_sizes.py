"""Attention head sizes a vLLM release has no backend for stop it at start-up (engines/vllm/head_sizes.py); each was
planned, exit 0. Read from the 0.6.4, 0.7.3, 0.8.0, 0.8.5, 0.9.0, 0.9.1, 0.9.2, 0.10.2 and 0.33.0 wheels: V0's
XFormers / PagedAttention (head sizes 32, 64, 80, 96, 112, 120, 128, 192, 256) behind FlashAttention-2 (32, 64, 96,
128, 160, 192, 224, 256) where FlashAttention runs; V1's FlashAttention alone from 0.8.0 to 0.9.1 on compute
capability 8.0 on; FlexAttention, which takes any head size, as the fallback from 0.9.2 (0.10.2 below 8.0).
phi-2 (head size 80) on 0.8.x stops so in the wild: https://github.com/kaito-project/kaito/issues/1101."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

import kvbudget
from kvbudget.cli import main
from kvbudget.engines.vllm import VllmSettings, plan
from kvbudget.hardware import find_gpu
from kvbudget.model import catalog
from kvbudget.model.hf_config import spec_from_config
from kvbudget.model.spec import ModelSpec
from kvbudget.units import InputError

LLAMA = dict(catalog.find("meta-llama/Llama-3.2-3B-Instruct").config)  # type: ignore[union-attr]  # head_dim 128


def _head(size: int) -> ModelSpec:
    """Llama-3.2-3B with another head size (3,072 hidden, 24 heads: head_dim given outright, as config.json may)."""
    return spec_from_config({**copy.deepcopy(LLAMA), "head_dim": size}, name=f"head-{size}")


def _plan(spec: ModelSpec, version: str, gpu: str, **kw: object) -> None:
    plan(spec, find_gpu(gpu), VllmSettings(version=version, max_model_len=2048, **kw))  # type: ignore[arg-type]


@pytest.mark.parametrize(("size", "version", "gpu", "words"), [
    # V1 0.8.0 - 0.9.1 on compute capability 8.0 on: FlashAttention alone
    (80, "0.8.5", "A100-SXM4-80GB", "'Head size 80 is not supported by FlashAttention'"),
    (80, "0.9.1", "H100-SXM-80GB", "or set VLLM_USE_V1=0"),  # V0's XFormers takes 80
    (72, "0.8.0", "L4", "'Head size 72 is not supported by FlashAttention'"),
    (120, "0.7.3", "A100-SXM4-80GB", "V1 engine runs FlashAttention alone"),  # the 0.7 alpha (VLLM_USE_V1=1)
    # V0: PagedAttention's list, plus FlashAttention-2's where it runs (8.0 on, 16-bit model and cache)
    (72, "0.6.4", "A100-SXM4-80GB", "'Head size 72 is not supported by PagedAttention'"),
    (160, "0.7.3", "T4", "FlashAttention-2 does not run here"),  # below 8.0: XFormers only
    (160, "0.8.5", "V100-SXM2-32GB", "V0 engine runs head size 160"),  # 0.8.0 - 0.10.1 fall back to V0 below 8.0
    (224, "0.6.4", "A100-SXM4-80GB", "PagedAttention"),  # FP8 cache: XFormers on 0.6, whatever the GPU
])
def test_a_head_size_no_backend_runs_is_refused(size: int, version: str, gpu: str, words: str) -> None:
    kw: dict[str, object] = {"use_v1": True} if version.startswith("0.7") and gpu.startswith("A100") else {}
    if size == 224:
        kw["kv_cache_dtype"] = "fp8"
    with pytest.raises(InputError, match="stops at start-up") as err:
        _plan(_head(size), version, gpu, **kw)
    assert words in str(err.value) and "give --vllm-version 0.10.2 or later" in str(err.value)


@pytest.mark.parametrize(("size", "version", "gpu"), [
    (80, "0.6.4", "A100-SXM4-80GB"), (80, "0.7.3", "T4"),  # V0: XFormers takes 80
    (160, "0.6.4", "A100-SXM4-80GB"), (224, "0.7.3", "H100-SXM-80GB"),  # V0: FlashAttention-2 takes them
    (80, "0.8.5", "T4"),  # V0 fallback below 8.0: XFormers
    (80, "0.9.2", "A100-SXM4-80GB"), (72, "0.10.2", "T4"), (72, "0.33.0", "H100-SXM-80GB"),  # FlexAttention
    (96, "0.8.5", "A100-SXM4-80GB"), (256, "0.9.0", "B200"),
])
def test_a_head_size_some_backend_runs_is_planned(size: int, version: str, gpu: str) -> None:
    _plan(_head(size), version, gpu)


def test_phi_2_on_vllm_0_8_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fit", "microsoft/phi-2", "--gpu", "A100-SXM4-80GB", "--vllm-version", "0.8.5", "--context", "2048"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'Head size 80 is not supported by FlashAttention'" in err[0], err
    (tmp_path / "config.json").write_text(json.dumps({**LLAMA, "head_dim": 72}), encoding="utf-8")
    assert main(["fit", str(tmp_path), "--gpu", "A100-SXM4-80GB", "--vllm-version", "0.6.4", "--context", "2048"]) == 2
    assert "PagedAttention" in capsys.readouterr().err
    assert main(["fit", "microsoft/phi-2", "--gpu", "A100-SXM4-80GB", "--vllm-version", "0.9.2", "--context", "2048"]) == 0
    assert kvbudget.load_model("microsoft/phi-2").dims.head_dim == 80
