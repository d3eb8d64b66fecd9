"""TensorRT-LLM's paged KV cache: ``settings`` (trtllm-serve flags, LLM API options), ``policy`` (the plan and the
engine interface); and, imported only by what needs them, ``command`` (launch commands and options files),
``check`` (start-up logs against TensorRT-LLM's arithmetic), ``launch`` (the launch command of a plan). This
package holds what the old ``engines/trtllm.py`` module held, so ``from kvbudget.engines.trtllm import plan,
TrtllmSettings`` reads as before.
"""

from __future__ import annotations

from .policy import (
    ACT_BYTES_PER_TOKEN_HIDDEN,
    NON_TORCH_BYTES,
    TrtllmPlan,
    engine_buffers,
    per_token_bytes,
    plan,
    replica,
    summary,
)
from .settings import TrtllmSettings

__all__ = ["ACT_BYTES_PER_TOKEN_HIDDEN", "NON_TORCH_BYTES", "TrtllmPlan", "TrtllmSettings", "engine_buffers",
           "per_token_bytes", "plan", "replica", "summary"]
