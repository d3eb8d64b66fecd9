"""llama.cpp's KV cache (and Ollama's, which runs it), to the byte: ``settings`` (context parameters, cache
types), ``kv_layout`` (K/V widths and ggml row sizes), ``calibration`` (how the sizing rules changed from build
to build), ``policy`` (the plan and the engine interface); and, imported only by what needs them, ``command``
(launch commands), ``log`` (start-up logs), ``check`` (a log's caches recomputed), ``launch`` (the
``llama-server`` command of a plan). This package holds what the old ``engines/llamacpp.py`` module held, so
``from kvbudget.engines.llamacpp import plan, LlamaCppSettings`` reads as before.
"""

from __future__ import annotations

from ..lazy import lazy_exports

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from .fit import FIT_MARGIN, FIT_MIN_CTX
    from .kv_layout import row_bytes
    from .policy import CUDA_ALIGN, MAX_SEQ, LlamaCppPlan, plan, replica, summary
    from .settings import CACHE_TYPES, LlamaCppSettings

# the names the old module gave, loaded when first read (importing the package, e.g. for its ``engine`` module
# in the registry, loads none of its planners: every command's start-up pays only for what it uses)
_EXPORTS = (
    dict.fromkeys(("row_bytes",), ".kv_layout")
    | dict.fromkeys(("FIT_MARGIN", "FIT_MIN_CTX"), ".fit")
    | dict.fromkeys(("CUDA_ALIGN", "MAX_SEQ", "LlamaCppPlan", "plan", "replica", "summary",), ".policy")
    | dict.fromkeys(("CACHE_TYPES", "LlamaCppSettings",), ".settings")
)


__getattr__ = lazy_exports(__name__, _EXPORTS)

__all__ = ["CACHE_TYPES", "CUDA_ALIGN", "FIT_MARGIN", "FIT_MIN_CTX", "MAX_SEQ", "LlamaCppPlan", "LlamaCppSettings",
           "plan", "replica", "row_bytes", "summary"]
