"""kvbudget: plan GPU memory for LLM serving.

Public API::

    import kvbudget
    spec = kvbudget.load_model("meta-llama/Llama-3.1-8B-Instruct")
    report = kvbudget.kv(spec, context=8192, batch=16)
    plan = kvbudget.fit(spec, gpu="H100", context=8192, batch=64)
"""

from __future__ import annotations

from .api import find_gpu, fit, kv, load_model

__version__ = "0.1.0"
__all__ = ["__version__", "find_gpu", "fit", "kv", "load_model"]
