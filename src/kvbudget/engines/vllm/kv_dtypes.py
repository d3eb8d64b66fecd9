"""Which ``--kv-cache-dtype`` values a vLLM release takes, and which of them an attention backend runs on a GPU.

Two checks, one boundary for every way a plan is asked (a launch command, ``kvbudget fit --kv-dtype``, the API):

* ``kv_dtype_taken``: the value as the release's parser takes it, written as it lists it (config/cache.py
  ``CacheDType`` of each release; argparse choices up to 0.10, matched case-sensitively: 'FP8' and 'half' stop
  vLLM at start-up).
* ``kv_dtype_runs``: from 0.12 vLLM picks the attention backend by the KV-cache dtype it supports
  (platforms/cuda.py ``get_valid_backends``; each backend's ``supported_kv_cache_dtypes`` and
  ``supports_compute_capability``) and stops with "No valid attention backend found" when none does.
"""

from __future__ import annotations

from functools import lru_cache

from ...hardware import capability
from ...inputs import excerpt
from ...units import InputError
from .settings import release_minor

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ...hardware import GPU

# --kv-cache-dtype's values by the release that added them (config/cache.py CacheDType of each release). Values
# kvbudget does not size (turboquant, octave ...) are refused where the plan reads the dtype.
KV_DTYPE_SINCE = {
    "auto": 0, "fp8": 0, "fp8_e4m3": 0, "fp8_e5m2": 0, "fp8_inc": 10, "bfloat16": 11, "fp8_ds_mla": 12,
    "float16": 18, "fp8_per_token_head": 20, "int8_per_token_head": 20, "nvfp4": 20, "int4_per_token_head": 25,
    "nvfp4_4over6": 28,
}
KV_DTYPE_UNSIZED = {  # values vLLM takes whose pages kvbudget does not size
    "turboquant_k8v4": 20, "turboquant_4bit_nc": 20, "turboquant_k3v4_nc": 20, "turboquant_3bit_nc": 20,
    "nvfp4_ds_mla": 30, "ultraquant_4bit": 32, "octave_k3v4": 33, "octave_k3v3": 33, "octave_k3v3_compact": 33,
}


def _newest(version: str) -> tuple[int, str]:
    """The minor release whose parser applies (a release line without a number: its newest) and how to say it."""
    minor = 10 if version == "v0" else release_minor(version)
    return minor, f"0.{minor}"


def kv_dtype_taken(value: str, version: str, label: str) -> None:
    """--kv-cache-dtype ``value`` as release ``version``'s parser takes it: a value it lists, written as it lists
    it; an InputError naming ``label`` (the flag, or the file and key it came from) otherwise."""
    newest, shown = _newest(version)
    since = KV_DTYPE_SINCE.get(value)
    if since is not None and since <= newest:
        return
    listed = ", ".join(k for k in ("auto", "fp8", "fp8_e5m2", "bfloat16", "float16", "nvfp4")
                       if KV_DTYPE_SINCE[k] <= newest)
    if since is not None:
        raise InputError(f"{label} {value}: vLLM {shown} does not take it (added in 0.{since}); give e.g. {listed}")
    if KV_DTYPE_UNSIZED.get(value, 99) <= newest:
        raise InputError(f"{label} {value}: kvbudget does not size this KV-cache format; give one it sizes, e.g. {listed}")
    near = value.lower().replace("half", "float16")
    hint = f" (names are matched as written: {near})" if KV_DTYPE_SINCE.get(near, 99) <= newest else ""
    if value.lower() in ("float32", "fp32"):
        hint = " (no release keeps the KV cache in float32)"
    raise InputError(f"{label} {excerpt(value, 30)[1:-1]}: not a KV-cache dtype vLLM {shown} takes, it stops at "
                     f"start-up{hint}; give e.g. {listed}")


# The --kv-cache-dtype values vLLM's CUDA MLA backends list (v1/attention/backends/mla/*.py
# supported_kv_cache_dtypes), by the release that first lists them: bfloat16 in 0.15, float16 in 0.18. No MLA
# backend lists fp8_e5m2, the per-token-head dtypes or nvfp4 (nvfp4_ds_mla, a format of its own, from 0.30).
_MLA_SINCE = {"auto": 12, "fp8": 12, "fp8_e4m3": 12, "fp8_ds_mla": 12, "bfloat16": 15, "float16": 18}


def _mla_runs(value: str, minor: int, cap: float) -> str:
    """Why no MLA attention backend of release 0.``minor`` holds a ``value`` cache on a GPU of compute capability
    ``cap`` ("" when one does). FP8 up to 0.17: FlashMLA (9.x, 10.x), CUTLASS MLA and FlashInfer MLA (10.x) list it;
    Triton MLA, which runs on every GPU, lists it from 0.18."""
    since = _MLA_SINCE.get(value)
    if since is None:
        return f"no MLA attention backend takes {value}"
    if minor < since:
        return f"MLA attention backends take {value} from 0.{since}"
    if value in ("fp8", "fp8_e4m3") and minor < 18 and int(cap) not in (9, 10):
        return "its MLA backends with an FP8 cache need compute capability 9.x or 10.x; Triton MLA takes FP8 from 0.18"
    return ""


def _nvfp4_runs(value: str, minor: int, cap: float, head_size: int) -> str:
    """Why no attention backend of release 0.``minor`` holds an NVFP4 cache on a GPU of compute capability ``cap``
    ("" when one does). FlashInfer is the only backend that lists nvfp4 in any release. 0.20 lists nvfp4 in CacheDType but no
    backend (FlashInfer's supported_kv_cache_dtypes gains it in 0.21). 0.21-0.24: FlashInfer from compute
    capability 7.5 (8.0 in 0.24) to 12.1 (supports_compute_capability) whatever the dtype; its NVFP4 path is
    Blackwell's kernel, refused in ``kv_dtype_runs``. 0.25-0.31 (supports_kv_cache_dtype): Blackwell (capability
    family 10.x) only. 0.32 and 0.33: also 8.x, 9.x and 12.x through FlashAttention-2 prefill, nvfp4 only (not
    nvfp4_4over6) and not at head size 64 (supports_combination); FlashInfer itself runs from 8.0
    (supports_compute_capability)."""
    major = int(cap)
    if minor < 21:
        return "no attention backend of this release lists nvfp4: FlashInfer takes it from 0.21"
    if minor < 25:
        floor = 8.0 if minor == 24 else 7.5
        return f"FlashInfer, the only backend with an NVFP4 cache, needs compute capability {floor}" if cap < floor else ""
    if major == 10:
        return ""
    if minor < 32:
        return "runs only on Blackwell (compute capability 10.x) in this release"
    if major < 8:
        return "FlashInfer, the only backend with an NVFP4 cache, needs compute capability 8.0"
    if value != "nvfp4":
        return "runs only on Blackwell (compute capability 10.x); 8.x, 9.x and 12.x take plain nvfp4"
    if head_size == 64:
        return "FlashAttention-2 prefill misreads an NVFP4 cache at head size 64 off Blackwell"
    return ""


@lru_cache(maxsize=4096)  # pure, of hashable arguments: a search asks it for every plan (a refusal is not kept)
def kv_dtype_runs(value: str, version: str, gpu: GPU, head_size: int = 0, mla: bool = False) -> str:
    """Refuse a --kv-cache-dtype for which release ``version`` has no attention backend on ``gpu`` (the error
    vLLM stops with), or whose only backend cannot run there (0.21-0.24's NVFP4 off Blackwell: the trtllm-gen
    kernel, "supported if the platform is SM100" in utils/flashinfer.py supports_trtllm_attention); return a note
    where kvbudget cannot tell ("" otherwise). ``head_size``: the model's attention head size (0: unknown);
    ``mla``: the model's attention is MLA (vLLM picks among its MLA backends only)."""
    cap = capability(gpu)
    if gpu.vendor != "nvidia" or cap is None:
        return ""
    newest, shown = _newest(version)
    if value == "fp8_inc":  # Intel Gaudi's FP8 cache: listed by no CUDA attention backend of any release
        if newest >= 12:
            raise InputError(f"KV-cache dtype fp8_inc is Intel Gaudi's FP8 cache: vLLM {shown} stops on {gpu.name} "
                             "with 'No valid attention backend found' (no CUDA attention backend takes it); give fp8")
        return (f"KV-cache dtype fp8_inc (Intel Gaudi's FP8 cache) sized as 1-byte FP8; vLLM {shown}'s CUDA "
                "attention backends were not checked for it: fp8 is the CUDA form")
    if mla and newest >= 12:  # vLLM chooses among its MLA backends only
        if why := _mla_runs(value, newest, cap):
            raise InputError(f"KV-cache dtype {value} for an MLA model on {gpu.name} (compute capability {cap}): "
                             f"vLLM {shown} stops with 'No valid attention backend found' ({why}); give auto")
        return ""
    if value.endswith("_ds_mla"):  # DeepSeek's sparse-MLA page: listed by MLA backends only (flashmla_sparse.py ...)
        raise InputError(f"KV-cache dtype {value} is the sparse-MLA cache of DeepSeek-V3.2-style models: vLLM {shown} "
                         "stops with 'No valid attention backend found' for a model without MLA (no other attention "
                         "backend takes it); give fp8")
    if value.startswith("nvfp4") and newest >= 20:
        why = _nvfp4_runs(value, newest, cap, head_size)
        if why:
            raise InputError(f"KV-cache dtype {value} on {gpu.name} (compute capability {cap}): vLLM {shown} stops "
                             f"with 'No valid attention backend found' ({why}); give fp8")
        if newest < 25 and int(cap) != 10:  # FlashInfer is picked, and fails in the profiling forward
            raise InputError(f"KV-cache dtype {value} on {gpu.name} (compute capability {cap}): vLLM {shown} picks "
                             "FlashInfer, whose NVFP4 cache is read only by the trtllm-gen kernel, which runs on "
                             "Blackwell (compute capability 10.x) alone, so start-up fails in the first forward; "
                             "give fp8")
    return ""
