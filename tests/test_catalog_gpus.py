"""The GPUs added for the cards people serve on (RTX A5000 ... GB10): the names engines print resolve,
each CUDA total is the figure its cited report quotes, and the compute capability drives what vLLM does.

The figures here are the ones quoted in each card's ``cuda_total_source`` (a deviceQuery byte count, a
torch ``total_memory=N MB`` / llama.cpp ``N MiB`` total, or a two-decimal GiB figure from a vLLM /
TensorRT-LLM / torch line), so a file that drifts from its own source fails.
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
from kvbudget.hardware import UnknownGPU, find_gpu
from kvbudget.model.weights import WeightFormat
from kvbudget.units import GiB, InputError, MiB

GPU_DIR = Path(hardware.DATA_DIR)

# catalog name: (the names engines print - torch/nvidia-smi/vLLM/llama.cpp - and short names people type)
NEW_CARDS: dict[str, tuple[str, ...]] = {
    "RTX-A5000-24GB": ("NVIDIA RTX A5000", "RTX A5000", "a5000"),
    "RTX-A4000-16GB": ("NVIDIA RTX A4000", "RTX A4000", "a4000"),
    "RTX-4060-Ti-16GB": ("RTX 4060 Ti 16GB", "4060 Ti 16GB"),  # the printed name is the 8 GB card's too
    "RTX-4070-Ti-SUPER-16GB": ("NVIDIA GeForce RTX 4070 Ti SUPER", "RTX 4070 Ti Super", "4070tisuper"),
    "RTX-4080-SUPER-16GB": ("NVIDIA GeForce RTX 4080 SUPER", "RTX 4080 Super", "4080super"),
    "RTX-5060-Ti-16GB": ("NVIDIA GeForce RTX 5060 Ti", "RTX 5060 Ti", "5060ti"),
    "RTX-5070-Ti-16GB": ("NVIDIA GeForce RTX 5070 Ti", "RTX 5070 Ti", "5070ti"),
    "RTX-5080-16GB": ("NVIDIA GeForce RTX 5080", "RTX 5080", "5080"),
    "RTX-PRO-6000-WS-96GB": ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
                             "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "RTX PRO 6000", "pro6000"),
    "RTX-PRO-6000-Server-96GB": ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX PRO 6000 Server", "pro6000-server"),
    "RTX-3060-12GB": ("NVIDIA GeForce RTX 3060", "RTX 3060", "3060"),
    "RTX-3090-Ti-24GB": ("NVIDIA GeForce RTX 3090 Ti", "RTX 3090 Ti", "3090ti"),
    "RTX-2080-Ti-11GB": ("NVIDIA GeForce RTX 2080 Ti", "GeForce RTX 2080 Ti", "2080ti"),  # older drivers: no "NVIDIA"
    "L20-48GB": ("NVIDIA L20", "L20"),
    "P40-24GB": ("Tesla P40", "P40"),
    "P100-PCIe-16GB": ("Tesla P100-PCIE-16GB", "P100"),
    "MI210-64GB": ("AMD Instinct MI210", "MI210"),
    "RX-7900-XTX-24GB": ("Radeon RX 7900 XTX", "AMD Radeon RX 7900 XTX", "7900xtx"),
    "GB10-128GB": ("NVIDIA GB10", "DGX Spark", "GB10"),
}

# catalog name: how its cuda_total_bytes follows from the figure its source quotes
QUOTED: dict[str, tuple[str, int | str]] = {
    "RTX-A5000-24GB": ("MiB", 24138),  # torch total_memory=24138MB
    "RTX-A4000-16GB": ("GiB", "15.61"),  # torch OOM "total capacity of 15.61 GiB"
    "RTX-4060-Ti-16GB": ("bytes", 17175150592),  # deviceQuery 16380 MBytes
    "RTX-4070-Ti-SUPER-16GB": ("MiB", 15934),
    "RTX-4080-SUPER-16GB": ("bytes", 16852844544),  # deviceQuery 16072 MBytes
    "RTX-5060-Ti-16GB": ("MiB", 16310),  # llama.cpp "CUDA0 : ... (16310 MiB, ...)"
    "RTX-5070-Ti-16GB": ("MiB", 16302),
    "RTX-5080-16GB": ("MiB", 16302),  # torch total_memory=16302MB
    "RTX-PRO-6000-Server-96GB": ("MiB", 97250),  # torch total_memory=97250MB = vLLM's 94.97 GiB
    "RTX-PRO-6000-WS-96GB": ("MiB", 97250),  # derived from the Server Edition (UNCERTAIN)
    "RTX-3060-12GB": ("bytes", 12629508096),  # deviceQuery 12044 MBytes
    "RTX-3090-Ti-24GB": ("MiB", 24114),
    "RTX-2080-Ti-11GB": ("bytes", 11554717696),  # deviceQuery 11019 MBytes
    "L20-48GB": ("bytes", 47803596800),  # vLLM total_gpu_memory 44.52056884765625 GiB
    "P40-24GB": ("MiB", 24438),
    "P100-PCIe-16GB": ("MiB", 16280),
    "MI210-64GB": ("MiB", 65520),
    "RX-7900-XTX-24GB": ("MiB", 24560),
    "GB10-128GB": ("GiB", "119.70"),  # TensorRT-LLM "device total memory 119.70 GiB"
}


def _marketing_gib(gpu: hardware.GPU) -> float:
    return float(gpu.marketing_memory.split()[0])


def test_the_tables_cover_the_same_cards_and_every_one_is_in_the_catalog() -> None:
    assert set(NEW_CARDS) == set(QUOTED)
    names = {g.name for g in hardware.gpus()}
    assert set(NEW_CARDS) <= names
    assert len(hardware.gpus()) >= 35 + len(NEW_CARDS)


@pytest.mark.parametrize(("name", "written"), NEW_CARDS.items(), ids=list(NEW_CARDS))
def test_engine_printed_and_short_names_resolve(name: str, written: tuple[str, ...]) -> None:
    for text in written:
        for variant in (text, text.lower(), text.upper(), f"  {text} "):
            assert find_gpu(variant).name == name, variant
    assert kvbudget.find_gpu(written[0]) == find_gpu(name)


@pytest.mark.parametrize("name", list(QUOTED))
def test_cuda_total_is_the_figure_its_source_quotes(name: str) -> None:
    gpu = find_gpu(name)
    unit, figure = QUOTED[name]
    assert str(figure) in gpu.memory_source, (name, figure)
    if unit == "MiB":
        assert isinstance(figure, int)
        assert gpu.memory_bytes == figure * MiB  # whole MiB as torch / llama.cpp print them (a lower bound)
    elif unit == "GiB":
        assert gpu.memory_bytes == round(float(figure) * GiB)
    else:
        assert gpu.memory_bytes == figure


@pytest.mark.parametrize("name", list(NEW_CARDS))
def test_cuda_total_is_below_the_marketing_size_and_above_90_percent_of_it(name: str) -> None:
    gpu = find_gpu(name)
    size = _marketing_gib(gpu)
    assert 0.9 * size * GiB < gpu.memory_bytes < size * GiB
    if gpu.nvidia_smi_mib is not None:
        assert gpu.memory_bytes <= gpu.nvidia_smi_mib * MiB


@pytest.mark.parametrize("name", list(NEW_CARDS))
def test_a_derived_or_single_host_figure_says_so(name: str) -> None:
    path = next(p for p in GPU_DIR.glob("*.json") if json.loads(p.read_text(encoding="utf-8"))["name"] == name)
    data = json.loads(path.read_text(encoding="utf-8"))
    if data["cuda_total_source"].startswith("derived"):
        assert "UNCERTAIN" in data["notes"]
    for key in ("datasheet_source", "gpus_per_node_source", "notes"):
        assert isinstance(data[key], str) and data[key].strip(), (name, key)
    assert data["price_per_hour_usd"] is None and data["price_source"] is None  # no public hourly price cited
    assert data["fp8_supported"] == (data["fp8_dense_tflops"] is not None)


def test_lookalike_names_stay_distinct() -> None:
    assert len({find_gpu(n).name for n in ("L20", "L4", "L40", "L40S")}) == 4
    assert find_gpu("RTX 6000 Ada").name == "RTX-6000-Ada-48GB"
    assert find_gpu("NVIDIA RTX 6000 Ada Generation").name == "RTX-6000-Ada-48GB"
    assert find_gpu("RTX PRO 6000").name == "RTX-PRO-6000-WS-96GB"
    with pytest.raises(UnknownGPU):  # a bare "RTX 6000" is the Ada card, the Blackwell one or the Turing Quadro
        find_gpu("RTX 6000")
    pairs = [("RTX 3090", "RTX 3090 Ti"), ("RTX 4080", "RTX 4080 SUPER"), ("RTX 5080", "RTX 5070 Ti"),
             ("RTX PRO 6000", "RTX PRO 6000 Server"), ("MI210", "MI250"), ("P40", "P100"), ("A10", "RTX A5000")]
    for a, b in pairs:
        assert find_gpu(a) != find_gpu(b), (a, b)
    assert find_gpu("RTX 4060").name == "RTX-4060-8GB"  # the 8 GB non-Ti card, not read as the 4060 Ti
    with pytest.raises(UnknownGPU, match="names cards of different memory"):  # the 8 or the 16 GB card
        find_gpu("RTX 4060 Ti")


def test_capabilities_are_the_architectures() -> None:
    cc = {n: find_gpu(n).compute_capability for n in NEW_CARDS}
    assert {cc[n] for n in ("RTX-A5000-24GB", "RTX-A4000-16GB", "RTX-3060-12GB", "RTX-3090-Ti-24GB")} == {"8.6"}
    assert {cc[n] for n in ("RTX-4060-Ti-16GB", "RTX-4070-Ti-SUPER-16GB", "RTX-4080-SUPER-16GB", "L20-48GB")} == {"8.9"}
    assert {cc[n] for n in ("RTX-5060-Ti-16GB", "RTX-5070-Ti-16GB", "RTX-5080-16GB", "RTX-PRO-6000-WS-96GB")} == {"12.0"}
    assert (cc["RTX-2080-Ti-11GB"], cc["P40-24GB"], cc["P100-PCIe-16GB"], cc["GB10-128GB"]) == ("7.5", "6.1", "6.0", "12.1")
    assert (cc["MI210-64GB"], cc["RX-7900-XTX-24GB"]) == ("gfx90a", "gfx1100")
    # FP8 tensor cores from Ada (8.9): Ampere and older have none
    for name in NEW_CARDS:
        gpu = find_gpu(name)
        cap = hardware.capability(gpu)
        if cap is not None:
            assert gpu.fp8 == (cap >= 8.9), name


# --- what the capability changes in vLLM's plan ---------------------------------------------------

FP8 = WeightFormat("fp8", bits=8)
AWQ = WeightFormat("awq", bits=4, dense_dtype="fp16")


def test_fp8_weights_run_on_ampere_cards_and_stop_on_pascal() -> None:
    """Fp8Config.get_min_capability is 80: an RTX A5000 / 3060 runs an FP8 checkpoint (Marlin W8A16, weight-only),
    a P40 / P100 is refused in one line naming the capability."""
    for name in ("RTX A5000", "RTX 3060", "RTX 4060 Ti 16GB", "RTX PRO 6000"):
        check_capability(FP8, find_gpu(name))
    for name, cap in (("P40", "6.1"), ("P100", "6.0"), ("RTX 2080 Ti", "7.5")):
        with pytest.raises(InputError, match=rf"fp8 weights need compute capability 8\.0 in vLLM; .* has {cap}"):
            check_capability(FP8, find_gpu(name))


def test_awq_kernel_follows_the_capability() -> None:
    """Marlin from compute capability 8.0 up to vLLM 0.13, from 7.5 on 0.14; no Marlin on ROCm."""
    assert int4_kernel(AWQ, "auto_awq", find_gpu("RTX A5000"), "0.13.0") == "marlin"
    assert int4_kernel(AWQ, "auto_awq", find_gpu("RTX 2080 Ti"), "0.13.0") == "awq"
    assert int4_kernel(AWQ, "auto_awq", find_gpu("RTX 2080 Ti"), "0.14.0") == "marlin"
    assert int4_kernel(AWQ, "auto_awq", find_gpu("MI210"), "current") == "awq"
    assert int4_kernel(AWQ, "auto_awq", find_gpu("RX 7900 XTX"), "current") == "awq"
    with pytest.raises(InputError, match=r"awq weights need compute capability 7\.5 in vLLM; P40-24GB has 6\.1"):
        check_capability(AWQ, find_gpu("P40"))


def test_bfloat16_runs_in_float16_below_compute_capability_8() -> None:
    spec = kvbudget.load_model("Qwen/Qwen3-8B")  # bfloat16 checkpoint
    settings = VllmSettings(max_model_len=4096)
    turing = plan(spec, find_gpu("RTX 2080 Ti"), settings)
    assert any("RTX-2080-Ti-11GB (compute capability 7.5) has no bfloat16: vLLM falls back to float16" in n
               for n in turing.notes)
    for name in ("RTX 3060", "RTX A4000", "MI210"):
        assert not any("no bfloat16" in n for n in plan(spec, find_gpu(name), settings).notes), name
    with pytest.raises(InputError, match=r"Bfloat16 is only supported on GPUs with compute capability of at least 8\.0"):
        plan(spec, find_gpu("2080ti"), VllmSettings(max_model_len=4096, dtype="bfloat16"))


# --- check LOG: the device name in the log now resolves --------------------------------------------

# vLLM 0.12 line shapes (tests/data/vllm_logs/v0.12.0_rtx-pro-6000_*.log); the figures are made up for the test
PRO6000_LOG = """\
(APIServer pid=4101) INFO 05-02 10:00:01 [api_server.py:1772] vLLM API server version 0.12.0
(APIServer pid=4101) INFO 05-02 10:00:01 [utils.py:253] non-default args: {'model': 'Qwen/Qwen3-30B-A3B', 'max_model_len': 8192}
(EngineCore_DP0 pid=4190) INFO 05-02 10:01:30 [gpu_model_runner.py:3549] Model loading took 56.9342 GiB memory and 80.1 seconds
(EngineCore_DP0 pid=4190) WARNING 05-02 10:01:31 [fused_moe.py:888] Using default MoE config. Performance might be sub-optimal! \
Config file not found at ['/opt/venv/lib/python3.12/site-packages/vllm/model_executor/layers/fused_moe/configs/\
E=128,N=768,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Workstation_Edition.json']
(EngineCore_DP0 pid=4190) INFO 05-02 10:01:40 [gpu_worker.py:359] Available KV cache memory: 25.12 GiB
(EngineCore_DP0 pid=4190) INFO 05-02 10:01:40 [kv_cache_utils.py:1286] GPU KV cache size: 274,368 tokens
"""


def test_check_reads_the_device_from_the_fused_moe_config_path() -> None:
    """vLLM names its MoE tuning file after the device with spaces as underscores: before these cards were in
    the catalog, a log naming only this device had nothing to stand on (no total memory printed either)."""
    result = check_log(PRO6000_LOG)
    assert result.log.gpu_name == "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
    assert result.gpu == "RTX-PRO-6000-WS-96GB"
    assert result.model == "Qwen/Qwen3-30B-A3B"


# vLLM 0.10.2's one-line memory summary (tests/data/vllm_logs/v0.10.2_rtx4090_*.log), on an 8 GB RTX 4060 Ti
SMALL_4060TI_LOG = """\
(APIServer pid=700) INFO 06-01 09:00:00 [api_server.py:1896] vLLM API server version 0.10.2
(APIServer pid=700) INFO 06-01 09:00:00 [utils.py:328] non-default args: {'model': 'ibm-granite/granite-3.0-3b-a800m-instruct', \
'max_model_len': 4096}
(EngineCore_DP0 pid=780) WARNING 06-01 09:00:20 [fused_moe.py:727] Using default MoE config. Performance might be sub-optimal! \
Config file not found at /opt/vllm/model_executor/layers/fused_moe/configs/E=40,N=512,device_name=NVIDIA_GeForce_RTX_4060_Ti.json
(EngineCore_DP0 pid=780) INFO 06-01 09:00:30 [gpu_worker.py:391] Free memory on device (7.41/7.63 GiB) on startup. \
Desired GPU memory utilization is (0.9, 6.87 GiB).
(EngineCore_DP0 pid=780) INFO 06-01 09:00:30 [gpu_worker.py:298] Available KV cache memory: 0.70 GiB
"""


def test_a_device_name_two_boards_share_takes_the_logs_own_total() -> None:
    """'NVIDIA GeForce RTX 4060 Ti' is the 8 GB and the 16 GB card: the name alone is refused, and the log's total
    (7.63 GiB) picks the 8 GB card - its compute capability 8.9 and the catalog's bytes."""
    result = check_log(SMALL_4060TI_LOG)
    assert result.log.gpu_name == "NVIDIA GeForce RTX 4060 Ti"
    assert result.log.total_gib == 7.63
    assert result.gpu == "RTX-4060-Ti-8GB"
    assert result.plan.total_bytes == find_gpu("RTX 4060 Ti 8GB").memory_bytes
    # the 16 GB card's own log keeps the catalog figure
    own = check_log(SMALL_4060TI_LOG.replace("(7.41/7.63 GiB)", "(15.70/15.99 GiB)"))
    assert own.gpu == "RTX-4060-Ti-16GB"
    assert own.plan.total_bytes == find_gpu("4060 Ti 16GB").memory_bytes
