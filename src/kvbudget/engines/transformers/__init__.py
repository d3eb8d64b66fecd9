"""Plain Hugging Face transformers: ``kv_layout`` (the cache as transformers allocates it, layer by layer) and
``policy`` (weights, cache and prefill activations on one GPU, and the engine interface). This package holds
what the old ``engines/transformers_engine.py`` module held (``plan``, ``row``, ``TransformersPlan``,
``ENGINE``); the old ``engines/transformers_cache.py`` is ``kv_layout``.
"""

from __future__ import annotations

from .policy import TransformersPlan, plan, row

__all__ = ["TransformersPlan", "plan", "row"]
