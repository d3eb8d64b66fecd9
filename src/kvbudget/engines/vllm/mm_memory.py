"""The multimodal encoder's weights in ``--mm-encoder-tp-mode data``, and ``--mm-ipc-gpu-memory-gb``'s carve-out.

What vLLM does (paths relative to the ``vllm`` package; 0.33.0 unless a release is named):

* ``--mm-encoder-tp-mode data`` (0.10.2 on; ``--enable-multimodal-encoder-data-parallel`` in 0.10-0.12): the vision
  tower's linear layers are built replicated (``use_data_parallel``: ReplicatedLinear instead of the column / row
  parallel ones, models/qwen2_5_vl.py, qwen3_vl.py, mllama4.py), so every TP rank holds the whole tower, in "Model
  loading took"; the images are split over the ranks (encoder_profile.py counts that pass). Only a model class with
  ``supports_encoder_tp_data`` takes it (model_executor/models/interfaces.py); for another, config/model.py warns and
  falls back to ``weights`` (the tower sharded like the decoder). Of the towers kvbudget reads, Qwen2.5-VL, Qwen3-VL
  and Llama 4's take data mode; SigLIP (Gemma 3) does not.
* ``--mm-ipc-gpu-memory-gb G`` (0.25 on; v1/worker/gpu_worker.py ``_reserve_mm_ipc_gpu_memory`` in 0.25-0.26,
  multimodal/gpu_ipc_memory.py ``reserve_mm_ipc_gpu_memory`` from 0.27): after the worker logs "Available KV cache
  memory", it takes ``int(G x 2^30)`` from it for the API server's decoded frames and sizes the KV cache on the rest
  (also with ``--kv-cache-memory-bytes``); a reservation that leaves nothing stops it ("frontend multimodal GPU
  decoding reserves ..."). With a GPU video decoder (PyNvVideoCodec) it also reserves each API server's decoder
  surfaces and CUDA context: not modelled (kvbudget does not read --media-io-kwargs).
"""

from __future__ import annotations

from ...model.spec import ModelSpec
from ...model.weights import WeightFormat
from ...units import GiB, InputError
from .settings import VllmSettings, minor_patch

DATA_MODE_TOWERS = ("qwen2_5_vl", "qwen3_vl", "llama4_vision_model")  # supports_encoder_tp_data, 0.33.0


def data_mode(spec: ModelSpec, settings: VllmSettings) -> bool:
    """Whether the vision tower runs in data mode (asked for, and the model's class takes it)."""
    v = spec.vision
    return settings.mm_encoder_tp_mode == "data" and v is not None and v.kind in DATA_MODE_TOWERS


def tower_extra_bytes(spec: ModelSpec, fmt: WeightFormat, tp: int) -> int:
    """What a whole vision tower holds on one TP rank beyond its tensor-parallel share (0 at TP 1)."""
    if tp == 1:
        return 0
    tower = [t for t in spec.inventory.tensors() if t.role == "vision"]
    return sum(fmt.tensor_bytes(t, 1) - fmt.tensor_bytes(t, tp) for t in tower)


def tower_note(spec: ModelSpec, settings: VllmSettings, extra: int, tp: int) -> str:
    """What the plan says of data mode."""
    v = spec.vision
    kind = v.kind if v is not None else "none"
    if kind not in DATA_MODE_TOWERS:
        return (f"--mm-encoder-tp-mode data: vLLM's class for the {kind} tower does not take data mode "
                "(supports_encoder_tp_data); it falls back to weights mode (the tower sharded like the decoder)")
    return (f"--mm-encoder-tp-mode data: the {kind} vision tower is whole on each of the {tp} TP ranks "
            f"(ReplicatedLinear), {extra / GiB:.2f} GiB more in 'Model loading took' than its tensor-parallel share")


def check_ipc(settings: VllmSettings) -> None:
    """--mm-ipc-gpu-memory-gb exists from 0.25."""
    number = minor_patch(settings.version)
    if settings.mm_ipc_bytes and number is not None and number < (25, 0):
        raise InputError(f"--mm-ipc-gpu-memory-gb: vLLM {settings.version} has no such flag (from 0.25)")


def ipc_error(reserved: int, available: int) -> str:
    """The error vLLM stops with when the carve-out leaves no KV cache memory."""
    return (f"frontend multimodal GPU decoding reserves {round(reserved / GiB, 2)} GiB ({round(reserved / GiB, 2)} GiB "
            f"raw-frame budget, 0.0 GiB decoder cache budget), but only {round(available / GiB, 2)} GiB is available for "
            "the KV cache. Reduce mm_ipc_gpu_memory_gb or hw_decoders, use a different video backend, or increase "
            "gpu_memory_utilization.")
