"""NCCL's buffers at three or more TP ranks on an NVSwitch board (engines/vllm/nccl.py), by hand from NCCL's source
(init.cc DEFAULT_*_BUFFSIZE, transport/p2p.cc halves aligned to 2 MiB, transport/nvls.cc ncclNvlsBufferSetup) and
checked on the per-rank figures of two published vLLM 0.10.0 runs on 8 x H100 (provenance in their .json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import kvbudget
from kvbudget.engines.vllm import VllmSettings, plan
from kvbudget.engines.vllm.calibration import NON_TORCH_TP1_BYTES, NON_TORCH_TP_BYTES
from kvbudget.engines.vllm.nccl import connection_bytes, eager_nvswitch_bytes, nccl_line, nvls_bytes
from kvbudget.units import GiB, MiB

LOGS = Path(__file__).parent / "data" / "vllm_logs"
QWEN32 = "Qwen/Qwen3-32B"


@pytest.mark.parametrize(("version", "line"), [
    ("0.4.2", None), ("0.4.3", "2.20"), ("0.6.3.post1", "2.20"), ("0.6.4", "2.21"), ("0.8.5", "2.21"),
    ("0.9.0", "2.26"), ("0.10.0", "2.26"), ("0.10.1.1", "2.26"), ("0.10.2", None), ("0.11.0", None),
    ("0.33.0", None), ("current", None), ("v1", None), (None, None),
])
def test_nccl_line_per_release(version: str | None, line: str | None) -> None:
    # torch 2.3-2.4 ship NCCL 2.20.5, 2.5-2.6 2.21.5, 2.7 2.26.2; 0.10.2 stopped forcing NCCL_CUMEM_ENABLE=0
    assert nccl_line(version) == line


def test_buffers_by_hand() -> None:
    # NVLS from 2.22: 16 channels x 2 x (128 KiB x 8 steps) x 8 heads = 256 MiB, what NCCL itself logs on 8 x H100
    # ("NVLS comm ... nHeads 8 ... buffSize 1048576 nvlsPerRankSize 33554432 nvlsTotalSize 268435456")
    assert nvls_bytes("2.26", 8, 9) == 268435456
    assert nvls_bytes("2.26", 8, 10) == 2 * 268435456  # 32 NVLS channels on sm100
    assert nvls_bytes("2.21", 8, 9) == 16 * 2 * 3 * MiB * 8  # 1 MiB chunk + the 2 MiB area
    assert nvls_bytes("2.20", 4, 9) == 16 * 2 * 6 * MiB * 4  # the 4 MiB Simple buffer + the 2 MiB area
    assert nvls_bytes("2.26", 2, 9) == 0  # NCCL turns NVLS on from three GPUs
    # receive half: LL 512 KiB + LL128 120 x 640 x 8 x 8 B + Simple 4 MiB (+ header) -> 10 MiB; send half 2 MiB
    assert 512 * 1024 + 120 * 640 * 8 * 8 + 4 * MiB <= 10 * MiB
    assert connection_bytes(8) == 24 * (2 + 10 + 2 + 10) * MiB  # ring + tree on a middle rank
    assert connection_bytes(2) == 24 * 12 * MiB  # two ranks: the tree rides on the ring's connections
    # plus 712 MiB once per process, fitted on an SGLang 8 x H200 log (nccl.py EAGER_INIT_UNATTRIBUTED)
    assert eager_nvswitch_bytes("0.10.0", 8, 9) == 712 * MiB + 18 * MiB + 2 * (576 * MiB + 256 * MiB)
    assert eager_nvswitch_bytes("0.10.0", 4, 9) == 712 * MiB + 18 * MiB + 2 * (576 * MiB + 128 * MiB)
    assert eager_nvswitch_bytes("0.10.0", 2, 9) is None and eager_nvswitch_bytes("0.12.0", 8, 9) is None


@pytest.mark.parametrize("record", [
    "v0.10.0_h100x8_qwen3-32b_tp8_kvfp8_len32768", "v0.10.0_h100x8_qwen3-235b-a22b-fp8_tp8-ep_kvfp8_len32768"])
def test_end_ranks_hold_less_as_the_chain_says(record: str) -> None:
    # the chain's root misses the tree's send half (2 MiB a channel), its leaf the receive half (10 MiB), in both
    # communicators: 2 x 24 x 2 MiB = 0.09 GiB and 2 x 24 x 10 MiB = 0.47 GiB more KV memory than ranks 1-6
    rep = json.loads((LOGS / f"{record}.json").read_text())["reported"]
    middle = rep["available_kv_cache_gib"]
    assert rep["available_kv_cache_gib_rank0"] - middle == pytest.approx(2 * 24 * 2 * MiB / GiB, abs=0.011)
    assert rep["available_kv_cache_gib_rank7"] - middle == pytest.approx(2 * 24 * 10 * MiB / GiB, abs=0.011)


@pytest.mark.parametrize("record", [
    "v0.10.0_h100x8_qwen3-32b_tp8_kvfp8_len32768", "v0.10.0_h100x8_qwen3-235b-a22b-fp8_tp8-ep_kvfp8_len32768",
    "v0.10.0_h100x4_qwen3-32b_tp4_yarn4_len131072_gmu0.95"])
def test_the_sglang_fitted_constant_transfers_to_vllm(record: str) -> None:
    # EAGER_INIT_UNATTRIBUTED was fitted on one SGLang 0.5.4 8 x H200 log; these three vLLM 0.10.0 runs (other engine,
    # GPU and NCCL release; 4 and 8 ranks) were 0.68-0.69 GiB short without it and land within its 0.05 GiB band
    from kvbudget.engines.vllm.check import check_log

    meta = json.loads((LOGS / f"{record}.json").read_text())
    k = meta["kvbudget"]
    r = check_log((LOGS / f"{record}.log").read_text(), model=k["model"], gpu=k["gpu"], version=k.get("version"),
                  flags=k.get("flags"))
    predicted = r.plan.available_kv_cache_bytes / GiB
    assert predicted == pytest.approx(meta["reported"]["available_kv_cache_gib"], abs=0.05)


def _plan(gpu: str, **settings: object) -> kvbudget.engines.vllm.VllmPlan:  # type: ignore[name-defined]
    return plan(kvbudget.load_model(QWEN32), kvbudget.find_gpu(gpu), VllmSettings(**settings))  # type: ignore[arg-type]


def test_plan_charges_it_where_it_applies() -> None:
    p = _plan("H100-SXM-80GB", version="0.10.0", tensor_parallel_size=8, max_model_len=32768)
    assert p.non_torch_bytes == NON_TORCH_TP1_BYTES["v1"] + eager_nvswitch_bytes("0.10.0", 8, 9)
    assert any(n.startswith("NCCL at TP 8 on H100-SXM-80GB's NVSwitch: 0.10.0 runs NCCL 2.26") for n in p.notes)
    # two ranks, a board without NVSwitch, or a release that connects lazily: the calibrated two-GPU figure
    assert _plan("H100-SXM-80GB", version="0.10.0", tensor_parallel_size=2).non_torch_bytes == NON_TORCH_TP_BYTES
    assert _plan("H100-PCIe-80GB", version="0.10.0", tensor_parallel_size=8,
                 max_model_len=32768).non_torch_bytes == NON_TORCH_TP_BYTES
    lazy = _plan("H100-SXM-80GB", version="0.12.0", tensor_parallel_size=8, max_model_len=32768)
    assert lazy.non_torch_bytes == NON_TORCH_TP_BYTES
    assert any("NCCL at 8 ranks" in n for n in lazy.notes)  # still said, as not modelled


def test_nccl_environment_in_the_launch_command() -> None:
    from kvbudget.engines.vllm.command import parse_vllm_command

    def non_torch(cmd: str, version: str) -> int:
        launch = parse_vllm_command(cmd, VllmSettings(version=version))
        return plan(kvbudget.load_model(QWEN32), kvbudget.find_gpu("H100-SXM-80GB"), launch.settings).non_torch_bytes

    base = f"vllm serve {QWEN32} -tp 8 --max-model-len 32768"
    eager = NON_TORCH_TP1_BYTES["v1"] + eager_nvswitch_bytes("0.10.0", 8, 9)
    assert non_torch(base, "0.10.0") == eager
    # NCCL_NVLS_ENABLE=0: no SHARP buffers, 2 x 256 MiB less
    assert non_torch("NCCL_NVLS_ENABLE=0 " + base, "0.10.0") == eager - 2 * 256 * MiB
    # 0.8-0.10.1 keep a user's NCCL_CUMEM_ENABLE=1 (lazy: the calibrated figure); 0.7 overwrites it with 0
    assert non_torch("NCCL_CUMEM_ENABLE=1 " + base, "0.10.0") == NON_TORCH_TP_BYTES
    assert nccl_line("0.7.3", True) == "2.21"
    # from 0.10.2 a user's NCCL_CUMEM_ENABLE=0 brings eager connection back, with 2.26's buffer rules
    assert non_torch(base, "0.12.0") == NON_TORCH_TP_BYTES
    assert non_torch("NCCL_CUMEM_ENABLE=0 " + base, "0.12.0") == NON_TORCH_TP1_BYTES["v1"] + eager_nvswitch_bytes(
        "0.10.0", 8, 9)


def test_nccl_variables_are_read_as_nccl_reads_them() -> None:
    """NCCL reads NCCL_CUMEM_ENABLE / NCCL_NVLS_ENABLE with strtoll (src/misc/param.cc ncclLoadParam): any non-zero
    integer is on ('2' was read as off), '' is NCCL's default; text with no number is 0 to older NCCL and the default
    to newer, so it is refused ('true' and 'abc' were read as on and off)."""
    from kvbudget.engines.vllm.command import parse_vllm_command
    from kvbudget.units import InputError

    def read(env: str) -> tuple[bool | None, bool]:
        s = parse_vllm_command(f"{env} vllm serve m -tp 2").settings
        return s.nccl_cumem, s.nccl_nvls

    assert read("NCCL_CUMEM_ENABLE=2 NCCL_NVLS_ENABLE=0x0") == (True, False)
    assert read("NCCL_CUMEM_ENABLE=0 NCCL_NVLS_ENABLE=' 1'") == (False, True)
    assert read("NCCL_CUMEM_ENABLE= NCCL_NVLS_ENABLE=") == read("") == (None, True)
    for env in ("NCCL_NVLS_ENABLE=abc", "NCCL_CUMEM_ENABLE=true", "NCCL_CUMEM_ENABLE=-"):
        with pytest.raises(InputError, match=f"^{env.split('=')[0]}=.* is not a number NCCL reads"):
            read(env)
