"""GPU catalog: memory as the device reports it to the engine, bandwidth, FLOP/s, price.

One JSON file per GPU under ``hardware_data/``, each figure with its source.
"""

from __future__ import annotations

import functools
import json
import os
import re

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
    unified_memory: bool = False  # GPU and CPU share one memory (GB10, Jetson): CUDA's free memory is the system's


def unified_note(gpu: GPU) -> str:
    """What a plan on a unified-memory device (``GPU.unified_memory``) cannot count, for the engines' notes."""
    return (f"{gpu.name} shares its memory with the CPU: CUDA's free memory is the system's, so the operating system, "
            "the page cache and other processes count against the engine's budget, and whatever they take while the "
            "engine measures its memory is charged to it; kvbudget counts none of it (a site profile from this "
            "machine's own start-up logs does: kvbudget calibrate)")


def capability(gpu: GPU) -> float | None:
    """The NVIDIA compute capability as a number (8.9), or None for AMD and unknown GPUs."""
    return _capability(gpu.compute_capability)


@functools.lru_cache(maxsize=256)  # a plan search asks it several times a plan, of a few dozen strings
def _capability(cc: str) -> float | None:
    if not cc or cc.startswith("gfx"):  # unknown, or AMD's architecture name: answered without raising
        return None
    try:
        return float(cc)
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
        unified_memory=bool(d.get("unified_memory", False)),
    )


@functools.lru_cache(maxsize=1)
def _all() -> tuple[GPU, ...]:
    """The GPU catalog files, read once per process (they ship with the package and do not change)."""
    paths = (os.path.join(DATA_DIR, n) for n in os.listdir(DATA_DIR) if n.endswith(".json"))
    return tuple(sorted((_read(p) for p in paths), key=lambda g: (g.vendor, g.memory_bytes, g.name)))


def gpus() -> list[GPU]:
    """Every catalog GPU, by vendor then memory."""
    return list(_all())


_VENDOR_WORDS = {"nvidia", "geforce", "amd", "instinct", "tesla", "radeon", "quadro"}


def _words(name: str) -> list[str]:
    return [w for w in re.split(r"[^0-9a-z]+", name.lower()) if w and w not in _VENDOR_WORDS]


# the words a catalog name adds for the same chip in another size or form factor (A100 -> A100-SXM4-80GB); a model
# word (Ti, SUPER, 3e) names another card that engines print apart: an RTX 4070 is not an RTX 4070 Ti SUPER
_SIZE_OR_FORM = re.compile(r"\d+gb|sxm\d*|pcie|nvl|gcd|oam")


def _family(words: list[str], gpu: GPU) -> bool:
    own = _words(gpu.name)
    return own[: len(words)] == words and all(_SIZE_OR_FORM.fullmatch(w) for w in own[len(words):])


def card_of_memory(name: str, memory_bytes: int) -> GPU | None:
    """The card ``name`` could mean (an RTX 4060 Ti has 8 or 16 GB) whose memory is within a tenth of
    ``memory_bytes`` (a log's own total), the nearest; None when none is."""
    words = _words(name)
    near = [g for g in gpus() if words and _family(words, g) and abs(g.memory_bytes - memory_bytes) <= memory_bytes // 10]
    return min(near, key=lambda g: abs(g.memory_bytes - memory_bytes)) if near else None


def other_variants(name: str, chosen: GPU) -> tuple[str, ...]:
    """Catalog GPUs besides ``chosen`` that ``name`` could also mean, by memory: the GPUs whose names start with
    ``name``'s words (``A100`` starts A100-PCIE-40GB, A100-SXM4-80GB, ...; ``L4`` does not start L40S-48GB) and
    whose memory differs from ``chosen``'s by more than a quarter (H100 SXM and PCIe, 80 GB each, are one answer)."""
    words = _words(name)
    if not words or _norm(name) == _norm(chosen.name):
        return ()
    return tuple(g.name for g in gpus() if g.name != chosen.name and _family(words, g)
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
    words = _words(name)
    family = [g for g in gpus() if _family(words, g)] if words else []
    if key in table:
        chosen = table[key]
        if not other_variants(name, chosen):
            return chosen
    if family and max(g.memory_bytes for g in family) > min(g.memory_bytes for g in family) * 5 // 4:
        # A100 (40 or 80 GB), V100 (16 or 32), GH200 (96 or 144): reading it as one card answered for another
        raise UnknownGPU(f"GPU {name.strip()!r} names cards of different memory: give one of "
                         f"{', '.join(sorted(g.name for g in family))} (or --gpu-memory 80GiB)")
    if key in table:
        return table[key]
    import difflib

    close = difflib.get_close_matches(key, list(table), n=3, cutoff=0.6) if len(key) <= 64 else []
    names = list(dict.fromkeys(table[c].name for c in close))
    did = f"; did you mean {' or '.join(names)}?" if names else ""
    raise UnknownGPU(f"unknown GPU {name!r}{did} (see `kvbudget gpus`, or give --gpu-memory 48GiB)")
