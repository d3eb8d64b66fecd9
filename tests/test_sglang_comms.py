"""SGLang's TP group before the pre-load measurement (engines/sglang/comms.py): one pynccl communicator connected at
init (NCCL_CUMEM_ENABLE=0, NCCL_NVLS_ENABLE=0 from entrypoints/engine.py) and custom all-reduce's buffers, by hand
from NCCL's and SGLang's sources, and against the per-rank lines of the published 8 x H200 0.5.4 log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import kvbudget
from kvbudget.engines import sglang
from kvbudget.engines.sglang.command import sglang_command
from kvbudget.engines.sglang.comms import communicator_bytes
from kvbudget.engines.sglang.launch import sglang_argv
from kvbudget.engines.sglang.policy import CONTEXT_BYTES
from kvbudget.engines.vllm.nccl import connection_bytes
from kvbudget.units import GiB, MiB

LOGS = Path(__file__).parent / "data" / "sglang_logs"
H200_TP8 = "v0.5.4dev_h200x8_llama3.3-70b_tp8_piecewise"
H100_TP4 = "unknown-mid2025_h100x4_qwen3-235b-a22b-fp8_tp4_mem0.93"


def _bytes(gpu: str, **settings: object) -> int:
    return communicator_bytes(kvbudget.find_gpu(gpu), sglang.SGLangSettings(**settings))  # type: ignore[arg-type]


def test_buffers_by_hand() -> None:
    # ring + tree, send half 2 MiB and receive half 10 MiB a channel, 24 channels: 576 MiB on a middle rank;
    # custom all-reduce: cudaMalloc(meta_size() + 8 MiB) in 2 MiB granules = 10 MiB, cudaMalloc(8 MiB), and the
    # 8 MiB rank_data tensor
    nccl = 24 * (2 + 10 + 2 + 10) * MiB
    assert _bytes("H100-SXM-80GB", tp=4) == nccl + (10 + 8 + 8) * MiB == 602 * MiB
    assert _bytes("H200-SXM-141GB", tp=8, version="0.4") == 602 * MiB
    assert _bytes("H100-SXM-80GB", tp=4, disable_custom_all_reduce=True) == nccl
    assert _bytes("H100-SXM-80GB", tp=3) == nccl  # CustomAllreduce._SUPPORTED_WORLD_SIZES is 2, 4, 6, 8
    assert _bytes("H100-SXM-80GB", tp=8, ep_size=8) == 602 * MiB  # the expert group is the TP group itself


@pytest.mark.parametrize(("gpu", "settings"), [
    ("H100-SXM-80GB", {"tp": 1}), ("H100-SXM-80GB", {"tp": 2}),  # as vllm/nccl.py: from three ranks
    ("L4-24GB", {"tp": 4}), ("A100-SXM4-80GB", {"tp": 4}),  # PCIe and pre-NVSwitch-sm90 boards: not modelled
    ("H100-SXM-80GB", {"tp": 4, "pp": 2}), ("H100-SXM-80GB", {"tp": 8, "ep_size": 2}),  # more groups: not modelled
])
def test_where_it_is_not_modelled(gpu: str, settings: dict[str, object]) -> None:
    assert _bytes(gpu, **settings) == 0


def test_end_ranks_of_the_h200_log_hold_one_communicator_less() -> None:
    # "Init torch distributed ends. mem usage" and "Load weight begin. avail mem" by rank: the chain's root (TP0)
    # misses the tree's send half, its leaf (TP7) the receive half, of ONE communicator (vLLM's two show twice that)
    rep = json.loads((LOGS / f"{H200_TP8}.json").read_text())["reported"]
    root = (connection_bytes(8) - connection_bytes(8, "root")) / GiB
    leaf = (connection_bytes(8) - connection_bytes(8, "leaf")) / GiB
    assert root == pytest.approx(24 * 2 * MiB / GiB) and leaf == pytest.approx(24 * 10 * MiB / GiB)
    init, begin = rep["init_torch_distributed_mem_usage_gb"], rep["load_weight_begin_avail_mem_gb"]
    assert init["others"] - init["TP0"] == pytest.approx(root, abs=0.011)
    assert init["others"] - init["TP7"] == pytest.approx(leaf, abs=0.011)
    assert begin["TP0"] - begin["others"] == pytest.approx(root, abs=0.011)
    assert begin["TP7"] - begin["others"] == pytest.approx(leaf, abs=0.011)
    # the middle ranks' 2.01 GB hold more than the modelled 0.59 GiB: 0.75 GiB of it is the 256 MiB custom
    # all-reduce 0.5.4 allocates three times under --enable-piecewise-cuda-graph (not modelled), ~0.7 GiB unexplained
    assert init["others"] > _bytes("H200-SXM-141GB", tp=8) / GiB + 3 * 256 * MiB / GiB


def test_the_pool_formula_takes_them_before_the_pre_load_measurement() -> None:
    # Qwen3-235B-A22B-FP8 at TP 4 on 4 x H100, --mem-fraction-static 0.93 (the published command)
    meta = json.loads((LOGS / f"{H100_TP4}.json").read_text())
    kb = meta["kvbudget"]
    spec, gpu = kvbudget.load_model(kb["model"]), kvbudget.find_gpu(kb["gpu"])
    p = sglang.plan(spec, gpu, sglang.SGLangSettings(**kb["settings"]))
    assert p.comms_bytes == 602 * MiB
    assert p.pre_load_bytes == gpu.memory_bytes - CONTEXT_BYTES - 602 * MiB
    rest = int(p.pre_load_bytes - p.weights_bytes - p.pre_load_bytes * (1 - 0.93))
    cell = 94 * 1 * 128 * 2 * 2  # 94 layers, 4 KV heads over TP 4, head_dim 128, K and V in bf16
    assert p.cell_bytes == cell and p.max_total_num_tokens == rest // cell
    assert f"Load weight begin. avail mem={p.pre_load_bytes / GiB:.2f} GB" in p.log_lines
    # the log's 367,404 tokens: still 5.9% fewer than modelled (about 1 GiB of the rank's memory unexplained)
    assert 1.05 < p.max_total_num_tokens / meta["reported"]["kv_tokens"] < 1.07
    row = sglang.summary(p)
    assert ("NCCL and custom all-reduce", 602 * MiB, "modelled") in [(x.name, x.bytes, x.provenance) for x in row.parts]


def test_disable_custom_all_reduce_is_read_and_written() -> None:
    cmd = sglang_command(["--model-path", "Qwen/Qwen3-32B", "--tp", "4", "--disable-custom-all-reduce"])
    s = cmd.sglang
    assert isinstance(s, sglang.SGLangSettings) and s.disable_custom_all_reduce
    assert "--disable-custom-all-reduce" in sglang_argv("Qwen/Qwen3-32B", s)
    assert "--disable-custom-all-reduce" not in sglang_argv("Qwen/Qwen3-32B", sglang.SGLangSettings(tp=4))
    spec, gpu = kvbudget.load_model("Qwen/Qwen3-32B"), kvbudget.find_gpu("H100-SXM-80GB")
    on, off = sglang.plan(spec, gpu, sglang.SGLangSettings(tp=4)), sglang.plan(spec, gpu, s)
    assert on.pre_load_bytes - off.pre_load_bytes == -(10 + 8 + 8) * MiB
    assert any("connections and custom all-reduce" in n for n in on.notes)
    assert not any("custom all-reduce" in n for n in off.notes)
