"""GPU catalog: memory as the device reports it to the engine, bandwidth, FLOP/s, price.

One JSON file per GPU under ``hardware_data/``, each figure with its source.
"""

from __future__ import annotations

import functools
import json
import os

from ._record import record
from .units import InputError

DATA_DIR = os.path.join(os.path.dirname(__file__), "hardware_data")


class UnknownGPU(InputError):
    """A GPU name that is not in the catalog."""


@record
class GPU:
    """One accelerator. ``memory_bytes`` is the total that CUDA/HIP reports to the process
    (``cudaMemGetInfo``), which is what engines budget from — less than the marketing figure
    and less than nvidia-smi's total."""

    name: str
    memory_bytes: int
    aliases: tuple[str, ...] = ()
    vendor: str = "nvidia"
    marketing_memory: str = ""
    nvidia_smi_mib: int | None = None
    bandwidth_bytes_per_s: int | None = None
    bf16_tflops: float | None = None
    fp8_tflops: float | None = None
    fp8: bool = False
    price_per_hour: float | None = None
    memory_source: str = ""
    price_source: str = ""
    custom: bool = False
    compute_capability: str = ""  # "8.0" (NVIDIA sm), "gfx942" (AMD), "" unknown
    gpus_per_node: int = 8  # the most in one host / NVLink board: tensor parallelism stays within it


def capability(gpu: GPU) -> float | None:
    """The NVIDIA compute capability as a number (8.9), or None for AMD and unknown GPUs."""
    try:
        return float(gpu.compute_capability)
    except ValueError:
        return None


def custom_gpu(memory_bytes: int) -> GPU:
    """A GPU known only by its memory (``--gpu-memory 48GiB``)."""
    return GPU(name=f"custom ({memory_bytes / 2**30:.2f} GiB)", memory_bytes=memory_bytes, custom=True,
               memory_source="--gpu-memory")


_PUNCT = str.maketrans("", "", " \t-_./(),:;+*'\"")


def _norm(name: str) -> str:
    key = name.lower().translate(_PUNCT)
    for word in ("nvidia", "geforce", "amd", "instinct", "tesla"):
        key = key.replace(word, "")
    return key


def _read(path: str) -> GPU:
    with open(path, encoding="utf-8") as f:
        d = json.load(f)
    return GPU(
        name=d["name"],
        memory_bytes=int(d["cuda_total_bytes"]),
        aliases=tuple(d.get("aliases", ())),
        vendor=d.get("vendor", "nvidia"),
        marketing_memory=d.get("marketing_memory", ""),
        nvidia_smi_mib=d.get("nvidia_smi_mib"),
        bandwidth_bytes_per_s=d.get("memory_bandwidth_bytes_per_s"),
        bf16_tflops=d.get("bf16_dense_tflops"),
        fp8_tflops=d.get("fp8_dense_tflops"),
        fp8=bool(d.get("fp8_supported")),
        price_per_hour=d.get("price_per_hour_usd"),
        memory_source=d.get("cuda_total_source", ""),
        price_source=d.get("price_source") or "",
        compute_capability=str(d.get("compute_capability") or ""),
        gpus_per_node=int(d.get("gpus_per_node", 8)),
    )


@functools.lru_cache(maxsize=1)
def _all() -> tuple[GPU, ...]:
    """The GPU catalog files, read once per process (they ship with the package and do not change)."""
    paths = (os.path.join(DATA_DIR, n) for n in os.listdir(DATA_DIR) if n.endswith(".json"))
    return tuple(sorted((_read(p) for p in paths), key=lambda g: (g.vendor, g.memory_bytes, g.name)))


def gpus() -> list[GPU]:
    """Every catalog GPU, by vendor then memory."""
    return list(_all())


def other_variants(name: str, chosen: GPU) -> tuple[str, ...]:
    """Catalog GPUs besides ``chosen`` that ``name`` could also mean (``A100`` is read as the 40 GB SXM4 card;
    the 80 GB and PCIe ones are variants too), for a note that says which one was taken."""
    key = "-".join(name.lower().replace("_", " ").split())  # "RTX 4060 Ti" as catalog names write it: "rtx-4060-ti"
    if not key or _norm(key) == _norm(chosen.name):
        return ()

    def family(other: str) -> bool:  # "A100-SXM4-80GB" is an A100; "L40S-48GB" is not an L4
        other = other.lower()
        return other.startswith(key) and (len(other) == len(key) or not other[len(key)].isalnum())

    # only variants whose memory differs enough to change an answer (A100: 40 or 80 GB; not H100 SXM vs PCIe)
    return tuple(g.name for g in gpus() if g.name != chosen.name and family(g.name)
                 and abs(g.memory_bytes - chosen.memory_bytes) > chosen.memory_bytes // 4)


def find_gpu(name: str) -> GPU:
    """Look a GPU up by the names people write (``H100``, ``a100 80gb``, ``RTX3090``)."""
    if not isinstance(name, str):
        raise UnknownGPU(f"a GPU name is a string such as 'H100', not {type(name).__name__}")
    if len(name) > 100:  # no GPU name is that long; difflib on it would take seconds
        raise UnknownGPU(f"unknown GPU {name[:40]!r}... ({len(name):,} characters; see `kvbudget gpus`, or give --gpu-memory 48GiB)")
    key = _norm(name)
    if not key:
        raise UnknownGPU("empty GPU name: see `kvbudget gpus`, or give --gpu-memory 48GiB")
    table: dict[str, GPU] = {}
    for gpu in gpus():
        for alias in (gpu.name, *gpu.aliases):
            table.setdefault(_norm(alias), gpu)
    if key in table:
        return table[key]
    import difflib

    close = difflib.get_close_matches(key, list(table), n=3, cutoff=0.6) if len(key) <= 64 else []
    names = list(dict.fromkeys(table[c].name for c in close))
    did = f"; did you mean {' or '.join(names)}?" if names else ""
    raise UnknownGPU(f"unknown GPU {name!r}{did} (see `kvbudget gpus`, or give --gpu-memory 48GiB)")
