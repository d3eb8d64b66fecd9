"""kvbudget: plan GPU memory for LLM serving.

Public API::

    import kvbudget
    spec = kvbudget.load_model("meta-llama/Llama-3.1-8B-Instruct")
    report = kvbudget.kv(spec, context=8192, batch=16)
    plan = kvbudget.fit(spec, gpu="H100", context=8192, batch=64)          # textbook partition
    vllm = kvbudget.vllm_plan(spec, gpu="H100")                             # what vLLM will print
"""

from __future__ import annotations

from .api import explain, fewest_gpus, find_gpu, fit, kv, load_model, max_concurrency, max_context, vllm_plan

__version__ = "0.1.0"
__all__ = ["__version__", "explain", "fewest_gpus", "find_gpu", "fit", "kv", "load_model", "max_concurrency", "max_context",
           "vllm_plan"]
