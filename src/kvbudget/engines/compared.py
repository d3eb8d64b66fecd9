"""What ``check`` hands the report for any engine: a logged figure beside kvbudget's (``Row``), and for SGLang and
TensorRT-LLM the whole answer (``OtherCheck``: the settings the log showed, the prediction's rows, the rows
recomputed from the log's own figures, notes and warnings). Also the run's device as SGLang and TensorRT-LLM logs
name it (``run_gpu``)."""

from __future__ import annotations

from .._record import fields, record, replace
from ..hardware import GPU, UnknownGPU, custom_gpu, find_gpu
from ..model.spec import ModelSpec
from ..units import GiB, InputError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from .base import EnginePlan


@record
class Row:
    figure: str
    reported: float | None
    predicted: float | None
    error_pct: float | None  # (predicted - reported) / |reported|


def row(figure: str, reported: float | None, predicted: float | None) -> Row:
    """A figure the log printed beside kvbudget's, with the error relative to the log's."""
    err = None
    if reported is not None and predicted is not None and reported != 0:
        err = 100.0 * (predicted - reported) / abs(reported)
    return Row(figure, reported, predicted, err)


def starts_row(started: bool, predicted: bool) -> Row:
    """Whether the run started (it logged its KV pool) against kvbudget's verdict; 100 % error where they differ."""
    return Row("starts", float(started), float(predicted), None if started == predicted else 100.0)


Recomputed = tuple[str, float, float, bool]  # (figure, reported, recomputed from the log's other figures, matches)


@record
class OtherCheck:
    """``check`` of an SGLang or TensorRT-LLM log: the run as the log shows it, planned by kvbudget."""

    engine: str  # the engine's label
    model: str | None  # the model planned (None: no prediction)
    gpu: str | None  # the device planned
    release: str  # the release line whose rules were applied
    settings: tuple[tuple[str, object], ...]  # the settings planned with, as the engine's fields
    read_from: tuple[str, ...]  # the log lines (and flags) they were read from
    rows: tuple[Row, ...]  # reported vs predicted
    recomputed: tuple[Recomputed, ...]  # reported vs recomputed from the log's own figures
    notes: tuple[str, ...]  # what kvbudget assumed, and the plan's own notes
    warnings: tuple[str, ...]
    plan: EnginePlan | None = None  # the prediction, as every engine's plan reads


def settings_items(settings: object, defaults: object) -> tuple[tuple[str, object], ...]:
    """The fields of ``settings`` that differ from ``defaults`` (both records of one type), in field order."""
    return tuple((n, getattr(settings, n)) for n in fields(settings) if getattr(settings, n) != getattr(defaults, n))


def run_gpu(gpu: str | None, gpu_memory: int | None, logged_name: str | None, logged_total_gib: float | None,
            free_gib: float | None, engine: str) -> GPU | None:
    """The device of a logged run: ``gpu`` (else the name the log prints), with ``gpu_memory`` or the total the log
    prints (TensorRT-LLM's "total: X GiB") as its memory, or an unnamed card of that memory; None when neither the
    flags nor the log say. A card with less memory than the log had free (``free_gib``) is not the run's."""
    device: GPU | None = None
    if gpu:
        device = find_gpu(gpu)
    elif logged_name:
        try:
            device = find_gpu(logged_name)
        except UnknownGPU:
            device = None
    memory = gpu_memory if gpu_memory is not None else round(logged_total_gib * GiB) if logged_total_gib else None
    if memory is not None:
        source = "given with the GPU" if gpu_memory is not None else "the log's total GPU memory"
        device = (replace(device, memory_bytes=memory, nvidia_smi_mib=None if gpu_memory is not None else device.nvidia_smi_mib,
                          memory_source=source) if device is not None else custom_gpu(memory))
    if device is not None and free_gib is not None and free_gib * GiB > device.memory_bytes * 1.001:
        raise InputError(f"the log had {free_gib:.2f} GB free before loading the weights, more than the "
                         f"{device.memory_bytes / GiB:.2f} GiB of {device.name}: it is not the run's GPU; give the "
                         f"{engine} run's GPU with --gpu (or --gpu-memory)")
    return device


def logged_model(given: str | None, logged: str | None, warnings: list[str]) -> ModelSpec | None:
    """The model to predict with: ``--model``, else the one the log names (a stand-in where it is not here); None,
    with a warning saying what to give, where the log names none or its model cannot be loaded (``--model`` that
    cannot be loaded is an error)."""
    from ..inputs import excerpt
    from ..model.resolve import load_foreign_model

    ref = given or logged
    if not ref:
        warnings.append("the log does not name its model: give --model for kvbudget's prediction")
        return None
    try:
        return load_foreign_model(ref)
    except InputError as exc:
        if given:
            raise
        warnings.append(f"the log's model {excerpt(ref, 60)} could not be loaded ({exc}): give --model for "
                        "kvbudget's prediction")
        return None
