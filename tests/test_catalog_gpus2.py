"""GPU catalog, round 2 (H800 ... Jetson AGX Thor): the names engines print resolve, each CUDA total is the figure
its cited report quotes or the derivation its source states, and the compute capability drives what vLLM does.

A card measured directly is checked against the figure quoted in its ``cuda_total_source`` (deviceQuery bytes, a
torch ``total_memory=N MB``, or a two-decimal GiB figure); a derived card against the arithmetic its source states,
recomputed here from the sibling entry it names, so that a sibling that moves drags the derivation with it or fails.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import kvbudget
from kvbudget import hardware
from kvbudget.engines.vllm.check import check_log
from kvbudget.engines.vllm.policy import check_capability, plan
from kvbudget.engines.vllm.quant import int4_kernel
from kvbudget.engines.vllm.settings import VllmSettings
from kvbudget.hardware import UnknownGPU, card_of_memory, find_gpu, other_variants
from kvbudget.model.weights import WeightFormat
from kvbudget.units import GiB, InputError, MiB

GPU_DIR = Path(hardware.DATA_DIR)

# catalog name: (the names engines print - torch/nvidia-smi/vLLM/ROCm - first, then short names people type)
NEW_CARDS: dict[str, tuple[str, ...]] = {
    "H800-SXM-80GB": ("NVIDIA H800", "H800"),
    "H800-PCIe-80GB": ("NVIDIA H800 PCIe", "H800 PCIe"),
    "H200-NVL-141GB": ("NVIDIA H200 NVL", "H200 NVL"),
    "H20-3e-141GB": ("NVIDIA H20-3e", "H20-3e", "H20 141GB"),
    "GB300-288GB": ("NVIDIA GB300", "GB300"),
    "MI355X-288GB": ("AMD Instinct MI355X", "AMD Instinct MI355_OAM", "MI355X"),
    "RX-9070-XT-16GB": ("AMD Radeon RX 9070 XT", "Radeon RX 9070 XT", "9070xt"),
    "Radeon-PRO-W7900-48GB": ("AMD Radeon PRO W7900", "W7900"),
    "RTX-4070-12GB": ("NVIDIA GeForce RTX 4070", "RTX 4070", "4070"),
    "RTX-4070-SUPER-12GB": ("NVIDIA GeForce RTX 4070 SUPER", "RTX 4070 Super", "4070super"),
    "RTX-4070-Ti-12GB": ("NVIDIA GeForce RTX 4070 Ti", "RTX 4070 Ti", "4070ti"),
    "RTX-3080-Ti-12GB": ("NVIDIA GeForce RTX 3080 Ti", "RTX 3080 Ti", "3080ti"),
    "RTX-3080-12GB": ("RTX 3080 12GB", "3080 12GB"),  # the printed name is the 10 GB card's too
    "RTX-3070-8GB": ("NVIDIA GeForce RTX 3070", "RTX 3070", "3070"),
    "RTX-3060-Ti-8GB": ("NVIDIA GeForce RTX 3060 Ti", "RTX 3060 Ti", "3060ti"),
    "RTX-4060-8GB": ("NVIDIA GeForce RTX 4060", "RTX 4060", "4060"),
    "RTX-4060-Ti-8GB": ("RTX 4060 Ti 8GB", "4060ti 8gb"),  # the printed name is the 16 GB card's too
    "RTX-5070-12GB": ("NVIDIA GeForce RTX 5070", "RTX 5070", "5070"),
    "RTX-5060-8GB": ("NVIDIA GeForce RTX 5060", "RTX 5060", "5060"),
    "RTX-4000-Ada-20GB": ("NVIDIA RTX 4000 Ada Generation", "RTX 4000 Ada"),
    "A800-PCIe-80GB": ("NVIDIA A800 80GB PCIe", "A800 PCIe"),
    "V100-PCIe-16GB": ("Tesla V100-PCIE-16GB", "V100 PCIe 16GB"),
    "V100-PCIe-32GB": ("Tesla V100-PCIE-32GB", "V100 PCIe 32GB"),
    "V100S-PCIe-32GB": ("Tesla V100S-PCIE-32GB", "V100S"),
    "Quadro-RTX-8000-48GB": ("Quadro RTX 8000", "RTX 8000"),
    "Jetson-AGX-Orin-64GB": ("Orin", "Jetson AGX Orin"),
    "Jetson-AGX-Thor-128GB": ("NVIDIA Thor", "Jetson AGX Thor"),
}

# measured: catalog name -> how cuda_total_bytes follows from the figure its source quotes
QUOTED: dict[str, tuple[str, int | str]] = {
    "RX-9070-XT-16GB": ("MiB", 16304),  # torch total_memory=16304MB
    "RTX-3080-Ti-12GB": ("bytes", 12630491136),  # deviceQuery 12045 MBytes
    "RTX-3070-8GB": ("GiB", "7.78"),  # torch OOM "7.78 GiB total capacity"
    "RTX-3060-Ti-8GB": ("bytes", 8359641088),  # deviceQuery 7972 MBytes
    "RTX-5070-12GB": ("GiB", "11.50"),
    "RTX-5060-8GB": ("bytes", 8546484224),  # deviceQuery 8151 MBytes (Windows)
    "RTX-4000-Ada-20GB": ("bytes", 21125267456),  # deviceQuery 20147 MBytes
    "V100-PCIe-16GB": ("bytes", 16936927232),  # deviceQueryDrv 16152 MBytes
    "V100-PCIe-32GB": ("bytes", 34072559616),  # deviceQuery 32494 MBytes
    "Quadro-RTX-8000-48GB": ("GiB", "47.46"),  # torch OOM "47.46 GiB total capacity"
    "Jetson-AGX-Orin-64GB": ("bytes", 65893269504),  # deviceQuery 62841 MBytes
    "Jetson-AGX-Thor-128GB": ("bytes", 131881680896),  # deviceQuery 125772 MBytes
}


def _mem(name: str) -> int:
    return find_gpu(name).memory_bytes


def _derived() -> dict[str, int]:
    """Each derived card's total, recomputed from the sibling its source names."""
    b300 = find_gpu("B300")
    assert b300.nvidia_smi_mib is not None
    b300_gap = b300.nvidia_smi_mib - b300.memory_bytes // MiB  # nvidia-smi MiB the driver keeps from CUDA
    ada_gap = 20475 - find_gpu("RTX 4000 Ada").memory_bytes // MiB  # the AD104 workstation card's nvidia-smi 20475 MiB
    return {
        "H800-SXM-80GB": _mem("H100"),
        "H800-PCIe-80GB": _mem("H100 PCIe"),
        "H200-NVL-141GB": _mem("H200"),
        "H20-3e-141GB": _mem("H200"),
        "GB300-288GB": (284208 - b300_gap) * MiB,
        "MI355X-288GB": 288 * GiB - 16 * MiB,
        "Radeon-PRO-W7900-48GB": 48 * GiB - 16 * MiB,
        "RTX-4070-12GB": (12282 - ada_gap) * MiB,
        "RTX-4070-SUPER-12GB": (12282 - ada_gap) * MiB,
        "RTX-4070-Ti-12GB": (12282 - ada_gap) * MiB,
        "RTX-3080-12GB": _mem("RTX 3080 Ti"),
        "RTX-4060-8GB": 8325824512,  # the RTX 4060 Laptop GPU's deviceQuery (7940 MBytes, Linux)
        "RTX-4060-Ti-8GB": 8325824512,
        "A800-PCIe-80GB": _mem("A100 80GB PCIe"),
        "V100S-PCIe-32GB": _mem("V100 PCIe 32GB"),
    }


def _raw(name: str) -> dict[str, object]:
    for path in GPU_DIR.glob("*.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        if data["name"] == name:
            return data
    raise AssertionError(name)


def test_every_new_card_is_checked_once_and_is_in_the_catalog() -> None:
    derived = _derived()
    assert set(QUOTED) | set(derived) == set(NEW_CARDS)
    assert not set(QUOTED) & set(derived)
    assert set(NEW_CARDS) <= {g.name for g in hardware.gpus()}


@pytest.mark.parametrize(("name", "written"), NEW_CARDS.items(), ids=list(NEW_CARDS))
def test_engine_printed_and_short_names_resolve(name: str, written: tuple[str, ...]) -> None:
    for text in written:
        for variant in (text, text.lower(), text.upper(), f"  {text} "):
            assert find_gpu(variant).name == name, variant
    assert kvbudget.find_gpu(written[0]) == find_gpu(name)


@pytest.mark.parametrize("name", list(QUOTED))
def test_a_measured_total_is_the_figure_its_source_quotes(name: str) -> None:
    gpu = find_gpu(name)
    unit, figure = QUOTED[name]
    assert str(figure) in gpu.memory_source, (name, figure)
    assert not gpu.memory_source.startswith("derived")
    if unit == "MiB":
        assert isinstance(figure, int) and gpu.memory_bytes == figure * MiB
    elif unit == "GiB":
        assert gpu.memory_bytes == round(float(figure) * GiB)
    else:
        assert gpu.memory_bytes == figure


@pytest.mark.parametrize("name", list(_derived()))
def test_a_derived_total_follows_its_stated_derivation_and_says_uncertain(name: str) -> None:
    gpu = find_gpu(name)
    assert gpu.memory_bytes == _derived()[name]
    data = _raw(name)
    assert str(data["cuda_total_source"]).startswith("derived")
    assert "UNCERTAIN" in str(data["notes"])


@pytest.mark.parametrize("name", list(NEW_CARDS))
def test_cuda_total_is_below_the_marketing_size_and_above_90_percent_of_it(name: str) -> None:
    gpu = find_gpu(name)
    size = float(gpu.marketing_memory.split()[0])
    assert 0.9 * size * GiB < gpu.memory_bytes < size * GiB
    if gpu.nvidia_smi_mib is not None:
        assert gpu.memory_bytes <= gpu.nvidia_smi_mib * MiB
    data = _raw(name)
    for key in ("datasheet_source", "gpus_per_node_source", "notes"):
        assert isinstance(data[key], str) and data[key].strip(), (name, key)
    assert data["price_per_hour_usd"] is None and data["price_source"] is None  # no public hourly price cited
    assert data["fp8_supported"] == (data["fp8_dense_tflops"] is not None)


def test_names_moved_off_the_cards_they_used_to_share() -> None:
    """H800, H200 NVL and the V100 PCIe cards were aliases of the SXM entries; each is its own card now."""
    assert find_gpu("H800") != find_gpu("H100")
    assert find_gpu("H200 NVL").bf16_tflops == 836.0 and find_gpu("H200").bf16_tflops == 989.4
    assert find_gpu("Tesla V100-PCIE-16GB").bf16_tflops == 112.0 and find_gpu("V100-16GB").name == "V100-SXM2-16GB"
    assert find_gpu("V100S").bandwidth_bytes_per_s == 1_134_000_000_000


def test_names_two_boards_print_resolve_as_nvidia_smi_names_them_or_are_refused() -> None:
    # nvidia-smi prints "NVIDIA GeForce RTX 3080" for the 10 and the 12 GB card (a fifth apart: read as the 10 GB one),
    # "... RTX 4060 Ti" for the 8 and 16 GB one (refused; a log's total picks the board)
    assert find_gpu("NVIDIA GeForce RTX 3080").name == "RTX-3080-10GB"
    with pytest.raises(UnknownGPU, match="RTX-4060-Ti-16GB, RTX-4060-Ti-8GB"):  # 16 or 8 GB: more than a quarter apart
        find_gpu("NVIDIA GeForce RTX 4060 Ti")
    assert card_of_memory("NVIDIA GeForce RTX 4060 Ti", round(7.63 * GiB)) == find_gpu("RTX 4060 Ti 8GB")
    assert card_of_memory("NVIDIA GeForce RTX 3080", round(11.76 * GiB)) == find_gpu("RTX 3080 12GB")
    # a model word (Ti, SUPER, 3e) is another card, not a size of this one
    for name in ("RTX 4060", "RTX 3060", "RTX 4070", "RTX 5060", "RTX 5070", "H20"):
        assert other_variants(name, find_gpu(name)) == (), name
    # "NVIDIA H20" is the 96 GB card, the 141 GB one prints "NVIDIA H20-3e"; a bare H20 says the other exists
    assert find_gpu("NVIDIA H20").name == "H20-96GB"
    for bare in ("V100 PCIe", "RTX 4000", "RTX 6000"):  # 16 or 32 GB; Turing or Ada; Turing, Ada or Blackwell
        with pytest.raises(UnknownGPU):
            find_gpu(bare)
    pairs = [("RTX 4070", "RTX 4070 Ti"), ("RTX 4070 Ti", "RTX 4070 Ti SUPER"), ("RTX 4070", "RTX 4070 SUPER"),
             ("RTX 3080", "RTX 3080 Ti"), ("RTX 5070", "RTX 5070 Ti"), ("RTX 5060", "RTX 5060 Ti"), ("RTX 3060", "RTX 3060 Ti"),
             ("H800", "H800 PCIe"), ("A800", "A800 PCIe"), ("GB300", "B300"), ("GB300", "GB200"), ("MI355X", "MI325X")]
    for a, b in pairs:
        assert find_gpu(a) != find_gpu(b), (a, b)


def test_capabilities_are_the_architectures() -> None:
    cc = {n: find_gpu(n).compute_capability for n in NEW_CARDS}
    assert {cc[n] for n in ("H800-SXM-80GB", "H800-PCIe-80GB", "H200-NVL-141GB", "H20-3e-141GB")} == {"9.0"}
    assert {cc[n] for n in ("RTX-4070-12GB", "RTX-4070-SUPER-12GB", "RTX-4070-Ti-12GB", "RTX-4060-8GB",
                            "RTX-4060-Ti-8GB", "RTX-4000-Ada-20GB")} == {"8.9"}
    assert {cc[n] for n in ("RTX-3080-Ti-12GB", "RTX-3080-12GB", "RTX-3070-8GB", "RTX-3060-Ti-8GB")} == {"8.6"}
    assert {cc[n] for n in ("RTX-5070-12GB", "RTX-5060-8GB")} == {"12.0"}
    assert (cc["GB300-288GB"], cc["A800-PCIe-80GB"], cc["Quadro-RTX-8000-48GB"]) == ("10.3", "8.0", "7.5")
    assert (cc["Jetson-AGX-Orin-64GB"], cc["Jetson-AGX-Thor-128GB"], cc["V100S-PCIe-32GB"]) == ("8.7", "11.0", "7.0")
    assert (cc["MI355X-288GB"], cc["RX-9070-XT-16GB"], cc["Radeon-PRO-W7900-48GB"]) == ("gfx950", "gfx1201", "gfx1100")
    for name in NEW_CARDS:  # FP8 tensor cores from Ada (8.9) on NVIDIA
        gpu = find_gpu(name)
        cap = hardware.capability(gpu)
        if cap is not None:
            assert gpu.fp8 == (cap >= 8.9), name


# --- what the capability changes in vLLM's plan ---------------------------------------------------

FP8 = WeightFormat("fp8", bits=8)
AWQ = WeightFormat("awq", bits=4, dense_dtype="fp16")


def test_fp8_weights_need_ampere() -> None:
    """Fp8Config.get_min_capability is 80: Ampere cards run FP8 checkpoints weight-only (Marlin), Volta/Turing stop."""
    for name in ("RTX 3070", "RTX 3080 Ti", "A800 PCIe", "Jetson AGX Orin", "RTX 4070", "H800", "GB300"):
        check_capability(FP8, find_gpu(name))
    for name, cap in (("V100S", "7.0"), ("Tesla V100-PCIE-16GB", "7.0"), ("Quadro RTX 8000", "7.5")):
        with pytest.raises(InputError, match=rf"fp8 weights need compute capability 8\.0 in vLLM; .* has {cap}"):
            check_capability(FP8, find_gpu(name))


def test_awq_kernel_follows_the_capability() -> None:
    """Marlin from compute capability 8.0 up to vLLM 0.13 (7.5 from 0.14); never on ROCm."""
    assert int4_kernel(AWQ, "auto_awq", find_gpu("Jetson AGX Orin"), "0.13.0") == "marlin"
    assert int4_kernel(AWQ, "auto_awq", find_gpu("Quadro RTX 8000"), "0.13.0") == "awq"
    assert int4_kernel(AWQ, "auto_awq", find_gpu("Quadro RTX 8000"), "0.14.0") == "marlin"
    for name in ("MI355X", "RX 9070 XT", "W7900"):
        assert int4_kernel(AWQ, "auto_awq", find_gpu(name), "current") == "awq", name


def test_bfloat16_runs_in_float16_on_volta_and_turing() -> None:
    spec = kvbudget.load_model("Qwen/Qwen3-8B")  # bfloat16 checkpoint
    settings = VllmSettings(max_model_len=4096)
    for name, cap in (("Quadro RTX 8000", "7.5"), ("V100S", "7.0")):
        gpu = find_gpu(name)
        assert any(f"{gpu.name} (compute capability {cap}) has no bfloat16: vLLM falls back to float16" in n
                   for n in plan(spec, gpu, settings).notes), name
    for name in ("RTX 3070", "RTX 4060", "Jetson AGX Thor"):
        assert not any("no bfloat16" in n for n in plan(spec, find_gpu(name), settings).notes), name


# --- check LOG: the device name in the log now resolves --------------------------------------------

# vLLM 0.10.2 line shapes (tests/data/vllm_logs/v0.10.2_rtx4090_*.log); the figures are made up for the test
LOG = """\
(APIServer pid=700) INFO 06-01 09:00:00 [api_server.py:1896] vLLM API server version 0.10.2
(APIServer pid=700) INFO 06-01 09:00:00 [utils.py:328] non-default args: {'model': 'ibm-granite/granite-3.0-3b-a800m-instruct', \
'max_model_len': 4096}
(EngineCore_DP0 pid=780) WARNING 06-01 09:00:20 [fused_moe.py:727] Using default MoE config. Performance might be sub-optimal! \
Config file not found at /opt/vllm/model_executor/layers/fused_moe/configs/E=40,N=512,device_name=DEVICE.json
(EngineCore_DP0 pid=780) INFO 06-01 09:00:30 [gpu_worker.py:391] Free memory on device (FREE/TOTAL GiB) on startup. \
Desired GPU memory utilization is (0.9, 6.87 GiB).
(EngineCore_DP0 pid=780) INFO 06-01 09:00:30 [gpu_worker.py:298] Available KV cache memory: 0.70 GiB
"""


def _log(device: str, free: str, total: str) -> str:
    return LOG.replace("DEVICE", device).replace("FREE", free).replace("TOTAL", total)


@pytest.mark.parametrize(("device", "free", "total", "expected"), [
    ("NVIDIA_H20-3e", "138.90", "139.80", "H20-3e-141GB"),
    ("NVIDIA_H800", "78.60", "79.18", "H800-SXM-80GB"),
    ("NVIDIA_GeForce_RTX_4070_SUPER", "11.20", "11.66", "RTX-4070-SUPER-12GB"),
    # the 12 GB RTX 3080 prints the 10 GB card's name, which resolves (a fifth apart): that card, the log's own total
    ("NVIDIA_GeForce_RTX_3080", "11.30", "11.76", "RTX-3080-10GB (11.76 GiB as the log prints)"),
    ("NVIDIA_GeForce_RTX_4060_Ti", "7.41", "7.63", "RTX-4060-Ti-8GB"),  # refused by name, picked by the total
])
def test_check_reads_the_new_cards_from_the_log(device: str, free: str, total: str, expected: str) -> None:
    result = check_log(_log(device, free, total))
    assert result.log.gpu_name == device.replace("_", " ")
    assert result.gpu == expected
    if "as the log prints" in expected:
        assert result.plan.total_bytes == round(float(total) * GiB)
    else:
        assert result.plan.total_bytes == find_gpu(expected).memory_bytes
