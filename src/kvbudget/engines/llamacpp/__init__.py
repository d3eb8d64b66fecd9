"""llama.cpp's KV cache (and Ollama's, which runs it), to the byte: ``settings`` (context parameters, cache
types), ``kv_layout`` (K/V widths and ggml row sizes), ``calibration`` (how the sizing rules changed from build
to build), ``policy`` (the plan and the engine interface); and, imported only by what needs them, ``command``
(launch commands), ``log`` (start-up logs), ``check`` (a log's caches recomputed), ``launch`` (the
``llama-server`` command of a plan). This package holds what the old ``engines/llamacpp.py`` module held, so
``from kvbudget.engines.llamacpp import plan, LlamaCppSettings`` reads as before.
"""

from __future__ import annotations

from .kv_layout import row_bytes
from .policy import CUDA_ALIGN, FIT_MARGIN, FIT_MIN_CTX, MAX_SEQ, LlamaCppPlan, plan, replica, summary
from .settings import CACHE_TYPES, LlamaCppSettings

__all__ = ["CACHE_TYPES", "CUDA_ALIGN", "FIT_MARGIN", "FIT_MIN_CTX", "MAX_SEQ", "LlamaCppPlan", "LlamaCppSettings",
           "plan", "replica", "row_bytes", "summary"]
