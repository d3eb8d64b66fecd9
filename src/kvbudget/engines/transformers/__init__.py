"""Plain Hugging Face transformers: ``kv_layout`` (the cache as transformers allocates it, layer by layer) and
``policy`` (weights, cache and prefill activations on one GPU, and the engine interface). This package holds
what the old ``engines/transformers_engine.py`` module held (``plan``, ``row``, ``TransformersPlan``,
``ENGINE``); the old ``engines/transformers_cache.py`` is ``kv_layout``.
"""

from __future__ import annotations

from ..lazy import lazy_exports

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from .policy import TransformersPlan, plan, row

# the names the old module gave, loaded when first read (importing the package, e.g. for its ``engine`` module
# in the registry, loads none of its planners: every command's start-up pays only for what it uses)
_EXPORTS = (
    dict.fromkeys(("TransformersPlan", "plan", "row",), ".policy")
)


__getattr__ = lazy_exports(__name__, _EXPORTS)

__all__ = ["TransformersPlan", "plan", "row"]
