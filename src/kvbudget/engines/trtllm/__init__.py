"""TensorRT-LLM's paged KV cache: ``settings`` (trtllm-serve flags, LLM API options), ``policy`` (the plan and the
engine interface); and, imported only by what needs them, ``command`` (launch commands and options files),
``check`` (start-up logs against TensorRT-LLM's arithmetic), ``launch`` (the launch command of a plan). This
package holds what the old ``engines/trtllm.py`` module held, so ``from kvbudget.engines.trtllm import plan,
TrtllmSettings`` reads as before.
"""

from __future__ import annotations

from ..lazy import lazy_exports

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from .policy import (
        NON_TORCH_BYTES,
        ProfilingPeak,
        TrtllmPlan,
        engine_buffers,
        per_token_bytes,
        plan,
        profiling_peak,
        replica,
        summary,
    )
    from .settings import TrtllmSettings

# the names the old module gave, loaded when first read (importing the package, e.g. for its ``engine`` module
# in the registry, loads none of its planners: every command's start-up pays only for what it uses)
_EXPORTS = (
    dict.fromkeys(("NON_TORCH_BYTES", "ProfilingPeak", "TrtllmPlan", "engine_buffers", "per_token_bytes",
        "plan", "profiling_peak", "replica", "summary",), ".policy")
    | dict.fromkeys(("TrtllmSettings",), ".settings")
)


__getattr__ = lazy_exports(__name__, _EXPORTS)

__all__ = ["NON_TORCH_BYTES", "ProfilingPeak", "TrtllmPlan", "TrtllmSettings", "engine_buffers",
           "per_token_bytes", "plan", "profiling_peak", "replica", "summary"]
