"""kvbudget: plan GPU memory for LLM serving.

Public API::

    import kvbudget
    spec = kvbudget.load_model("meta-llama/Llama-3.1-8B-Instruct")
    report = kvbudget.kv(spec, context=8192, batch=16)
    answer = kvbudget.fit(spec, gpu="H100", context=8192, batch=64)        # what `kvbudget fit` prints (vLLM)
    sgl = kvbudget.fit(spec, gpu="H100", context=8192, engine="sglang")    # any engine: the same FitAnswer
    vllm = kvbudget.vllm_plan(spec, gpu="H100")                             # vLLM's own plan for its settings
    row = kvbudget.engine_plan(spec, gpu="H100", engine="sglang", context=8192)  # the figures every engine has

``kvbudget.fit`` and the ``kvbudget fit`` command give the same answer for the same arguments, under the
engine's own rules (``engine="textbook"``: one rule for every engine). Bad arguments (wrong types, NaN,
negative or absurd numbers) raise ``kvbudget.InputError`` with the CLI's message.
"""

from __future__ import annotations

from .api import (
    FitAnswer,
    engine_plan,
    explain,
    fewest_gpus,
    find_gpu,
    fit,
    kv,
    levers,
    load_model,
    max_concurrency,
    max_context,
    plan_deployments,
    simulate,
    vllm_plan,
)
from .units import InputError

__version__ = "0.1.0"
__all__ = [
    "FitAnswer",
    "InputError",
    "__version__",
    "engine_plan",
    "explain",
    "fewest_gpus",
    "find_gpu",
    "fit",
    "kv",
    "levers",
    "load_model",
    "max_concurrency",
    "max_context",
    "plan_deployments",
    "simulate",
    "vllm_plan",
]
