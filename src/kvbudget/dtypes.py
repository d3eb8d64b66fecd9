"""KV-cache dtypes, parsed once where a planner starts.

Settings keep the KV dtype as the user typed it (``--kv-cache-dtype fp8``); each engine's planner turns it
into a ``KVDtype`` with ``parse_kv_dtype`` and its own table of the names it accepts, and asks the record
(element bytes, FP8 or not, which FP8) instead of comparing strings further down.
"""

from __future__ import annotations

from collections.abc import Mapping

from ._record import record
from .units import ElementType, InputError, element_type

_FP8 = {"fp8_e4m3": "e4m3", "fp8_e5m2": "e5m2"}


@record
class KVDtype:
    """A KV-cache dtype as an engine was asked for it.

    ``name``: as the user or the engine spells it, lower-cased, with ``auto`` (and SGLang's empty name)
    replaced by the model's dtype; ``element``: what one cached value is stored in; ``auto``: the model's own
    dtype was asked for."""

    name: str
    element: ElementType
    auto: bool = False

    @property
    def fp8(self) -> str:
        """The FP8 flavour asked for, ``e4m3`` or ``e5m2``; ``""`` for any other cache (``auto`` included)."""
        return "" if self.auto else _FP8.get(self.element.name, "")

    @property
    def is_fp8(self) -> bool:
        return bool(self.fp8)


def parse_kv_dtype(key: str, model_dtype: str, names: Mapping[str, str], error: str) -> KVDtype:
    """``key`` (as the engine compares it: vLLM folds case, SGLang does not) looked up in an engine's ``names``:
    its spelling -> the element type it stores (``""``: the model's dtype). A name not there raises
    ``InputError(error)``."""
    stored = names.get(key)
    if stored is None:
        raise InputError(error)
    auto = key in ("auto", "")
    return KVDtype(model_dtype if auto else key, element_type(stored or model_dtype), auto)
