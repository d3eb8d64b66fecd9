"""Settings a TensorRT-LLM log shows only through its figures, read where exactly one reading fits them.

A log that prints no line naming the KV cache dtype or the checkpoint's quantization still prints what they make:

- the KV pool's bytes per token: "Allocated X GiB for max tokens in paged KV cache (T)" gives X / T (the pool is
  blocks x tokens per block x the per-token size, ``kvCacheManager.cpp``), and the PyTorch backend prints the size
  itself ("kv size [per token] is S", ``_torch/pyexecutor/_util.py``);
- the weights: "Rank R uses X GB for model weights" (``_torch/pyexecutor/model_engine.py``: the rank's parameter
  bytes / 1024**3).

Where a setting was planned as its default (``log.assumed``) and the figure it sets is far from kvbudget's, the
settings kvbudget knows for it are tried one at a time (KV: FP8, TensorRT-LLM's only quantized cache in kvbudget's
model; weights: the quantized formats a pre-quantized checkpoint may hold) and the one that lands on the log's figure
is read, with a note; none or several: a warning naming the setting to give. The KV bytes per token also fall by the
TP size (each rank caches its share of the KV heads), so where TP is not in the log either, the warning says that a
16-bit cache split over TP ranks gives the same figure.
"""

from __future__ import annotations

from ..._record import replace
from ...units import GiB, InputError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from ...hardware import GPU
    from ...model.spec import ModelSpec
    from .log import TrtllmFigures
    from .policy import TrtllmPlan
    from .settings import TrtllmSettings

_KV_TRIES = ("fp8",)
_WEIGHT_TRIES = ("fp8", "nvfp4", "awq")  # int8 stores as fp8 does: fp8, the common one, is tried
_WEIGHTS_NEAR = 0.02  # a weights figure within this share of the log's (printed to 0.01 GiB) is the same


def logged_per_token(figs: TrtllmFigures) -> tuple[float, float] | None:
    """(bytes per token, how far the log's rounding lets it be off) from the log: the PyTorch backend's printed size,
    else the pool's GiB (to 0.01) over its tokens; None where the log shows neither."""
    if figs.per_token is not None:
        return figs.per_token, 0.5
    if figs.pool_gib is None or not figs.tokens or figs.pool_gib <= 0.01:
        return None
    per = figs.pool_gib * GiB / figs.tokens
    return per, 0.0051 * GiB / figs.tokens + 1


def _plan(spec: ModelSpec, gpu: GPU, s: TrtllmSettings) -> TrtllmPlan | None:
    from .policy import plan

    try:
        return plan(spec, gpu, s)
    except InputError:  # a format this model cannot take (e.g. TP above its KV heads)
        return None


def read_from_figures(spec: ModelSpec, gpu: GPU, s: TrtllmSettings, p: TrtllmPlan, figs: TrtllmFigures,
                      assumed: tuple[str, ...]) -> tuple[TrtllmSettings, tuple[str, ...], list[str], list[str]]:
    """The settings with what the log's figures fix of those it does not name, ``assumed`` less what was read, the
    notes saying what was read, and the warnings where the figures fit no setting kvbudget can plan, or several."""
    names = {a.split(" ")[0] for a in assumed}
    p0 = s
    notes: list[str] = []
    warnings: list[str] = []
    if "quantization" in names and figs.weights_gib is not None:
        s, p = _read_weights(spec, gpu, s, p, figs.weights_gib, notes, warnings)
    per = logged_per_token(figs)
    if per is not None and abs(p.per_token_bytes - per[0]) > per[1]:
        s = _read_kv(spec, gpu, s, p, per, names, notes, warnings)
    if "quantization" in names and figs.started and figs.weights_gib is None:
        q = _plan(spec, gpu, s) if s != p0 else p
        if q is not None and not q.starts:
            fp8_kv = "kv_cache_dtype" in names and s.kv_cache_dtype == "fp8"
            warnings.append(f"the run started, but {spec.name}'s weights as kvbudget reads them ({q.weights_bytes / GiB:.2f} "
                            f"GiB a rank) leave no KV cache on this GPU, and no line names the checkpoint's quantization"
                            + (" (an FP8 cache with no kv_cache_dtype given is a pre-quantized checkpoint's "
                               "kv_cache_quant_algo, llmapi/llm_utils.py)" if fp8_kv else "")
                            + ": give the checkpoint the run loaded as --model (its quantized one)")
    read = {name for name in ("quantization", "kv_cache_dtype") if getattr(s, name) != getattr(p0, name)}
    return s, tuple(a for a in assumed if a.split(" ")[0] not in read), notes, warnings


def _read_weights(spec: ModelSpec, gpu: GPU, s: TrtllmSettings, p: TrtllmPlan, logged: float, notes: list[str],
                  warnings: list[str]) -> tuple[TrtllmSettings, TrtllmPlan]:
    planned = p.weights_bytes / GiB
    if abs(planned - logged) <= max(0.01, _WEIGHTS_NEAR * logged):
        return s, p
    fits = []
    for fmt in _WEIGHT_TRIES:
        q = _plan(spec, gpu, replace(s, quantization=fmt))
        if q is not None and abs(q.weights_bytes / GiB - logged) <= max(0.01, _WEIGHTS_NEAR * logged):
            fits.append((fmt, q))
    if len(fits) == 1:
        fmt, q = fits[0]
        notes.append(f"quantization {fmt} read from the log's weights ({logged:.2f} GiB a rank; kvbudget: "
                     f"{q.weights_bytes / GiB:.2f} GiB with {fmt}, {planned:.2f} as the checkpoint is read): no line "
                     "names the checkpoint's quantization")
        return replace(s, quantization=fmt), q
    said = " or ".join(f for f, _ in fits) if fits else "none of " + ", ".join(_WEIGHT_TRIES)
    warnings.append(f"the log's weights are {logged:.2f} GiB a rank, kvbudget's {planned:.2f} GiB with the checkpoint's "
                    f"own format, and no line names its quantization ({said} fits): give the checkpoint the run loaded "
                    "as --model")
    return s, p


def _read_kv(spec: ModelSpec, gpu: GPU, s: TrtllmSettings, p: TrtllmPlan, per: tuple[float, float], names: set[str],
             notes: list[str], warnings: list[str]) -> TrtllmSettings:
    logged, slack = per
    ratio = p.per_token_bytes / logged if logged else 0.0
    if "kv_cache_dtype" in names:
        for kv in _KV_TRIES:
            q = _plan(spec, gpu, replace(s, kv_cache_dtype=kv))
            if q is not None and abs(q.per_token_bytes - logged) <= slack:
                notes.append(f"kv_cache_dtype {kv} read from the KV pool's {logged:,.0f} bytes per token (kvbudget: "
                             f"{q.per_token_bytes:,} with {kv}, {p.per_token_bytes:,} with the model's dtype): no line "
                             "names the cache's dtype")
                if "tp" in names and round(ratio) == 2:
                    warnings.append(f"the KV pool's {logged:,.0f} bytes per token are half what one rank caches in 16 "
                                    f"bits ({p.per_token_bytes:,}): read as an FP8 cache on one rank; a 16-bit cache with "
                                    "TP 2 gives the same (each rank holds half the KV heads): give -- --tp_size 2 if the "
                                    "run had two ranks")
                return replace(s, kv_cache_dtype=kv)
    tps = [n for n in (2, 4, 8) if abs(ratio - n) < 0.02 * n] if "tp" in names else []
    hint = f": a run with TP {tps[0]} caches that (give -- --tp_size {tps[0]})" if tps else \
        ": give the run's --kv_cache_dtype and --tp_size after --"
    warnings.append(f"the KV pool holds {logged:,.0f} bytes a token, kvbudget plans {p.per_token_bytes:,} with the "
                    f"settings it read{hint}")
    return s
