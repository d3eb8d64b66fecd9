"""kvbudget: plan GPU memory for LLM serving.

Public API::

    import kvbudget
    spec = kvbudget.load_model("meta-llama/Llama-3.1-8B-Instruct")
    report = kvbudget.kv(spec, context=8192, batch=16)
    plan = kvbudget.fit(spec, gpu="H100", context=8192, batch=64)          # textbook partition (plan.engine)
    vllm = kvbudget.vllm_plan(spec, gpu="H100")                             # vLLM's rules: what `kvbudget fit` prints
    sgl = kvbudget.engine_plan(spec, gpu="H100", engine="sglang", context=8192)  # any engine, its common figures

``kvbudget.fit`` is the textbook estimate, one rule for every engine; the ``kvbudget fit`` command
follows vLLM's rules, as ``vllm_plan``, ``max_concurrency`` and ``max_context`` do. Bad arguments
(wrong types, NaN, negative or absurd numbers) raise ``kvbudget.InputError`` with the CLI's message.
"""

from __future__ import annotations

from .api import (
    TextbookPlan,
    engine_plan,
    explain,
    fewest_gpus,
    find_gpu,
    fit,
    kv,
    load_model,
    max_concurrency,
    max_context,
    vllm_plan,
)
from .units import InputError

__version__ = "0.1.0"
__all__ = ["InputError", "TextbookPlan", "__version__", "engine_plan", "explain", "fewest_gpus", "find_gpu", "fit", "kv", "load_model", "max_concurrency", "max_context",
           "vllm_plan"]
