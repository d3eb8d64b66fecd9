"""SGLang's KV pool, per rank, as SGLang sizes it: ``settings`` (server arguments), ``policy`` (the plan and the
engine interface); and, imported only by what needs them, ``command`` (launch commands), ``check`` (start-up
logs against SGLang's arithmetic), ``launch`` (the launch command of a plan). This package holds what the old
``engines/sglang.py`` module held, so ``from kvbudget.engines.sglang import plan, SGLangSettings`` reads as before.
"""

from __future__ import annotations

from ..lazy import lazy_exports

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from .policy import CONTEXT_BYTES, SGLangPlan, default_fraction, plan, replica, summary
    from .settings import KV_DTYPES, SGLangSettings

# the names the old module gave, loaded when first read (importing the package, e.g. for its ``engine`` module
# in the registry, loads none of its planners: every command's start-up pays only for what it uses)
_EXPORTS = (
    dict.fromkeys(("CONTEXT_BYTES", "SGLangPlan", "default_fraction", "plan", "replica", "summary",), ".policy")
    | dict.fromkeys(("KV_DTYPES", "SGLangSettings",), ".settings")
)


__getattr__ = lazy_exports(__name__, _EXPORTS)

__all__ = ["CONTEXT_BYTES", "KV_DTYPES", "SGLangPlan", "SGLangSettings", "default_fraction", "plan", "replica",
           "summary"]
