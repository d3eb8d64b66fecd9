"""The attention head sizes a vLLM release runs on an NVIDIA GPU (standard attention; MLA has backends of its own).

Read from the wheels of 0.6.4, 0.7.3, 0.8.0, 0.8.5, 0.9.0, 0.9.1, 0.9.2, 0.10.2, 0.11.0 and 0.33.0:

* V0 engine (0.6 and 0.7, and 0.8.0 - 0.10.1 below compute capability 8.0, ``policy._v0_fallback``): the backend
  selector (attention/selector.py in 0.6, platforms/cuda.py from 0.7) runs FlashAttention-2 where it can (compute
  capability 8.0 on, a float16 or bfloat16 model, a block size that is a multiple of 16, an unquantized cache; from
  0.7 an FP8 one on Hopper's FlashAttention 3) and the head size is one of its ``FA_HEAD_SIZES``; anything else runs
  XFormers, whose PagedAttention decode kernel takes ``PAGED_HEAD_SIZES`` (attention/ops/paged_attn.py) and stops
  on any other: "Head size N is not supported by PagedAttention" (attention/backends/xformers.py).
* V1 engine 0.8.0 - 0.9.1 (and the 0.7 alpha): FlashAttention alone from compute capability 8.0 (0.9 tries FlashInfer
  first on Blackwell, whose 64, 128 and 256 are among FlashAttention's): "Head size N is not supported by
  FlashAttention. Set VLLM_USE_V1=0 to use another attention backend" (v1/attention/backends/flash_attn.py).
* From 0.9.2 a head size FlashAttention does not take falls back to FlexAttention, which takes any (platforms/
  cuda.py), and below compute capability 8.0 FlexAttention runs from 0.10.2; from 0.12 FlexAttention closes every
  priority list of an unquantized cache. Nothing is refused there.
"""

from __future__ import annotations

from ...hardware import GPU, capability
from ...model.layers import FullAttention
from ...model.spec import ModelSpec
from ...units import InputError
from .settings import VllmSettings, minor_patch

FA_HEAD_SIZES = (32, 64, 96, 128, 160, 192, 224, 256)  # FlashAttentionBackend.get_supported_head_sizes, 0.6 - 0.9.1
PAGED_HEAD_SIZES = (32, 64, 80, 96, 112, 120, 128, 192, 256)  # PagedAttention.get_supported_head_sizes, 0.6 - 0.10
_FIX = "give --vllm-version 0.10.2 or later"  # FlexAttention: any head size, on any GPU


def _sizes(sizes: tuple[int, ...]) -> str:
    return ", ".join(str(x) for x in sizes)


def _head_sizes(spec: ModelSpec) -> list[int]:
    """The standard attention layers' head sizes, smallest first (walked only for the releases that refuse some: a
    plan search asks the newest line thousands of times)."""
    return sorted({x.head_dim for x in spec.layers if isinstance(x, FullAttention)})


def check_head_sizes(spec: ModelSpec, gpu: GPU, settings: VllmSettings, release: str, model_dtype: str,
                     kv_dtype: str) -> None:
    """Refuse a model with an attention head size that no backend of the release runs on ``gpu``, as vLLM stops at
    start-up. ``release``: the line the plan follows (``v0``, ``v1`` or ``current``; the 0.7 alpha is ``v1``);
    ``model_dtype``: the dtype the model runs in; ``kv_dtype``: --kv-cache-dtype as asked."""
    cap = capability(gpu)
    if gpu.vendor != "nvidia" or cap is None:
        return
    number = minor_patch(settings.version)  # None: a line ("v0", after the fallback) or "current"
    if release == "v0":
        fp8_flash = int(cap) == 9 and (number is None or number >= (7, 0))  # FlashAttention 3 holds FP8 from 0.7
        flash = (cap >= 8.0 and model_dtype in ("bf16", "fp16") and (settings.block_size or 16) % 16 == 0
                 and (fp8_flash or not kv_dtype.startswith("fp8")))
        engine = "vLLM's V0 engine" if number is None else f"vLLM {settings.version}'s V0 engine"
        for h in _head_sizes(spec):
            if h not in PAGED_HEAD_SIZES and not (flash and h in FA_HEAD_SIZES):
                why = "not a FlashAttention-2 head size" if flash else "FlashAttention-2 does not run here"
                raise InputError(f"{spec.name}: {engine} runs head size {h} on {gpu.name} with XFormers ({why}), "
                                 f"whose PagedAttention takes {_sizes(PAGED_HEAD_SIZES)}, and stops at start-up: "
                                 f"'Head size {h} is not supported by PagedAttention'; {_FIX}")
        return
    if release != "v1" or number is None or number >= (9, 2) or cap < 8.0:
        return
    for h in _head_sizes(spec):
        if h not in FA_HEAD_SIZES:
            v0 = ", or set VLLM_USE_V1=0" if h in PAGED_HEAD_SIZES and number >= (8, 0) else ""  # V0's XFormers
            raise InputError(f"{spec.name}: vLLM {settings.version}'s V1 engine runs FlashAttention alone on {gpu.name} "
                             f"(head sizes {_sizes(FA_HEAD_SIZES)}) and stops at start-up: 'Head size {h} is not "
                             f"supported by FlashAttention'; {_FIX}{v0}")
