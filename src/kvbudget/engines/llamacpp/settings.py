"""llama.cpp's context parameters (``LlamaCppSettings``) and the K/V cache types it takes; ``policy.py`` plans
with them, by the rules of the build they name (``calibration.py``)."""

from __future__ import annotations

from ..._record import record
from ...units import InputError
from . import calibration as eras

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from ..site import SiteTerm

# -ctk / -ctv types (common/arg.cpp kv_cache_types); kv_layout.row_bytes knows ggml's block layout of each.
CACHE_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")


def _cache_type(name: str) -> str:
    """A -ctk / -ctv value as llama.cpp takes it: common/arg.cpp kv_cache_type_from_str compares it with
    ggml_type_name(type) as written, so 'Q8_0' stops llama-server ("Unsupported cache type: Q8_0")."""
    key = name.strip()
    if key not in CACHE_TYPES:
        hint = f" (names are matched as written: {key.lower()})" if key.lower() in CACHE_TYPES else ""
        raise InputError(f"cache type {name!r} is not one llama.cpp allows{hint}: {', '.join(CACHE_TYPES)}")
    return key


@record
class LlamaCppSettings:
    """llama.cpp context parameters (``None``: the program's default)."""

    program: str = "server"  # server (llama-server, Ollama) | cli (llama-cli and the library)
    n_ctx: int = 0  # -c; 0: the model's training context
    n_parallel: int | None = None  # -np; llama-server: auto = 4 slots
    kv_unified: bool | None = None  # --kv-unified; llama-server auto-parallel sets it
    type_k: str = "f16"
    type_v: str = "f16"
    flash_attn: str = "auto"  # on | off | auto
    n_batch: int = 2048
    n_ubatch: int = 512
    swa_full: bool = False
    n_gpu_layers: int = -1  # -ngl; -1: all
    fit: bool | None = None  # --fit (auto-fit of n_ctx to free memory); None: the build's default
    fit_target_mib: int = 1024  # -fitt: MiB fit leaves free on each device (common/common.h fit_params_target)
    fit_ctx: int = 4096  # -fitc: the smallest context fit reduces to (fit_params_min_ctx)
    ngl_given: bool = False  # -ngl was on the command line (any value but auto): fit does not move layers
    split_mode: str = "layer"  # -sm: layer | row | none
    overrides: tuple[tuple[str, str], ...] = ()  # -ot / --cpu-moe / --n-cpu-moe rules in order: (pattern, buffer);
    # any at all: fit does not move tensors
    fit_weights: bool = True  # auto-fit may move weights to system memory (step 3); searches for what fits the GPU
    # alone (fewest GPUs, largest batch, compare) set it off
    mmap: bool = True  # --no-mmap: the CPU weights are read into a CPU buffer of their sum, not mapped
    site: tuple[SiteTerm, ...] = ()  # a site profile's terms (kvbudget calibrate --out): memory held outside llama.cpp
    build: int = eras.CURRENT  # llama.cpp build number (the log's "build: N"): whose rules apply
    devices: int = 1  # GPUs the layers are split over (-sm layer), each with the plan's GPU
    tensor_split: tuple[float, ...] = ()  # -ts shares per GPU (default: even; llama.cpp: by free memory)
    model_file: str = ""  # -m: the GGUF file to serve when it is not the model given (a llama-quantize output)
    quantize: str = ""  # the llama-quantize type (Q4_K_M ...) that file is made with, from a model given by name
