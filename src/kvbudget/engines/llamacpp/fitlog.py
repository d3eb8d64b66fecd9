"""The auto-fit lines of a llama.cpp log (``common_params_fit_impl``, before PR #22171 ``llama_params_fit_impl``;
common/fit.cpp) and the device lines it sizes from (``llama_model_load_from_file_impl: using device CUDA0 (...) -
N MiB free``, src/llama.cpp), set beside the free memory kvbudget plans for a bare card (``fit.py``)."""

from __future__ import annotations

from ..._record import record
from ...units import InputError, MiB
from ..logscan import count

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    from ...hardware import GPU
    from ..logscan import LogText

_MAX_MIB = (1 << 40) - 1  # a figure in MiB beyond this (an exbibyte) is not a device's


@record
class FitLines:
    """What a log's auto-fit printed (MiB; None: not printed), and the devices it printed free memory for."""

    free_mib: int | None  # "... vs. Y MiB of free device memory": every device's free memory together
    projected_mib: int | None  # "projected to use X MiB": with the initial parameters
    reduced_from: int | None
    reduced_to: int | None
    aborted: str  # "n_gpu_layers already set by user to 999" ("": none)
    devices: tuple[tuple[str, int], ...]  # ("NVIDIA GeForce RTX 4090", free MiB) of each "using device" line


_PROJECTED = r"projected to use ([0-9]{1,13}) MiB (?:of device memory )?vs\.? ([0-9]{1,13}) MiB (?:of )?free"
_REDUCED = r"context size reduced from ([0-9]{1,10}) to ([0-9]{1,10})"
_ABORT = r"fail(?:ed)?(?: to fit params to free device memory)?: ([^\n]{1,200}?), abort"
_DEVICE = r"using device [A-Za-z0-9_]{1,32} \(([^\n]{1,200}?)\)(?: \([0-9a-fA-F:.]{1,40}\))? - ([0-9]{1,13}) MiB free"


def read_fit(log: LogText) -> FitLines | None:
    """The fit lines and device lines of ``log``; None when it prints neither."""
    projected = log.first("projected to use", _PROJECTED)
    reduced = log.first("context size reduced", _REDUCED)
    abort = log.first(", abort", _ABORT)
    devices = tuple((m.group(1).strip(), count(m.group(2), "device free memory (MiB)", 0, _MAX_MIB))
                    for m in log.each("using device", _DEVICE))
    if projected is None and reduced is None and not devices:
        return None
    return FitLines(count(projected.group(2), "fit's free device memory (MiB)", 0, _MAX_MIB) if projected else None,
                    count(projected.group(1), "fit's projected use (MiB)", 0, _MAX_MIB) if projected else None,
                    count(reduced.group(1), "fit's context (from)", 0, 1 << 32) if reduced else None,
                    count(reduced.group(2), "fit's context (to)", 0, 1 << 32) if reduced else None,
                    abort.group(1) if abort else "", devices)


def logged_free(f: FitLines) -> tuple[int, int, str] | None:
    """(free bytes per device, devices, where it comes from) as the log shows them: fit's own measurement, else the
    device lines printed at load."""
    nd = max(len(f.devices), 1)
    if f.free_mib is not None:
        return f.free_mib * MiB // nd, nd, "its auto-fit line"
    if f.devices:
        return sum(m for _, m in f.devices) * MiB // nd, nd, "its 'using device ... MiB free' line"
    return None


def log_gpu(f: FitLines, given: dict[str, Any]) -> GPU | None:
    """The card the log ran on: --gpu (or --gpu-memory), else the one its device line names, if kvbudget knows it."""
    from ...hardware import UnknownGPU, custom_gpu, find_gpu

    if given.get("gpu_memory"):
        return custom_gpu(int(float(given["gpu_memory"]) * 2**30))
    name = given.get("gpu") or (f.devices[0][0] if f.devices else None)
    if not name:
        return None
    try:
        return find_gpu(name)
    except UnknownGPU:
        if given.get("gpu"):
            raise
        return None


# How far below a bare card's free memory a log's may be before check says something else held memory: a tenth of
# the backend context share's band (fit.py) and 1% of the card
_HELD_FLOOR = 256 * MiB


def held_warning(f: FitLines, gpu: GPU) -> str | None:
    """A warning when the log's free memory is short of what kvbudget plans for a bare card of ``gpu``."""
    from .fit import backend_context_bytes

    logged = logged_free(f)
    if logged is None:
        return None
    free, _, where = logged
    bare = gpu.memory_bytes - backend_context_bytes(gpu.memory_bytes)
    gap = bare - free
    if gap <= max(_HELD_FLOOR, bare // 100):
        return None
    if gap > gpu.memory_bytes // 4:
        return (f"the log shows {free // MiB} MiB free per device ({where}), {gap // MiB} MiB less than a bare {gpu.name} "
                "(more than a quarter of it): the run likely used another card; give --gpu (or --gpu-memory) of the "
                "card it ran on")
    return (f"the log shows {free // MiB} MiB free per device ({where}), {gap // MiB} MiB less than kvbudget plans for "
            f"a bare {gpu.name} ({bare // MiB} MiB): memory held outside llama.cpp (a desktop, another process) is not "
            "modelled, and auto-fit sizes the context from what is left; to plan for a GPU shared like this, calibrate "
            "on this log (kvbudget calibrate LOG --out site.json) and give --profile site.json")


def fit_rows(f: FitLines, gpu: GPU | None) -> list[tuple[str, int | None, int | None]]:
    """(figure, the log's, kvbudget's) of the fit lines: kvbudget's free memory of a bare card where the GPU is
    known."""
    from .fit import backend_context_bytes

    logged = logged_free(f)
    bare = (gpu.memory_bytes - backend_context_bytes(gpu.memory_bytes)) // MiB if gpu is not None else None
    rows: list[tuple[str, int | None, int | None]] = []
    if logged is not None:
        rows.append((f"free device memory per device (MiB, {logged[2][4:]})", logged[0] // MiB, bare))
    if f.projected_mib is not None:
        rows.append(("projected use with the initial parameters (MiB)", f.projected_mib, None))
    if f.reduced_to is not None:
        rows.append((f"context reduced from {f.reduced_from} to", f.reduced_to, None))
    return rows


def check_free(f: FitLines) -> None:
    """Refuses a reduced context larger than the one it was reduced from (two runs' lines, or an edit)."""
    if f.reduced_from is not None and f.reduced_to is not None and f.reduced_to > f.reduced_from:
        raise InputError(f"the log's auto-fit reduced the context from {f.reduced_from} to a larger {f.reduced_to}: "
                         "the lines are from different runs or were edited; give one run's start-up log")
