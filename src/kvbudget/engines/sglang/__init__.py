"""SGLang's KV pool, per rank, as SGLang sizes it: ``settings`` (server arguments), ``policy`` (the plan and the
engine interface); and, imported only by what needs them, ``command`` (launch commands), ``check`` (start-up
logs against SGLang's arithmetic), ``launch`` (the launch command of a plan). This package holds what the old
``engines/sglang.py`` module held, so ``from kvbudget.engines.sglang import plan, SGLangSettings`` reads as before.
"""

from __future__ import annotations

from .policy import CONTEXT_BYTES, SGLangPlan, default_fraction, plan, replica, summary
from .settings import KV_DTYPES, SGLangSettings

__all__ = ["CONTEXT_BYTES", "KV_DTYPES", "SGLangPlan", "SGLangSettings", "default_fraction", "plan", "replica",
           "summary"]
