"""Hostile and partial config.json files: kvbudget either reads them or raises an InputError
(one line, exit 2 in the CLI) — never another exception. Mutations of real catalog configs."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kvbudget
from kvbudget.model import catalog
from kvbudget.model.hf_config import spec_from_config
from kvbudget.units import InputError


def textbook_fit(*args: object, **kwargs: object) -> kvbudget.FitAnswer:
    """kvbudget.fit with the textbook partition (weights + KV + activations + overhead)."""
    return kvbudget.fit(*args, engine="textbook", **kwargs)  # type: ignore[arg-type]

CONFIGS = {e.id: e.config for e in catalog.entries()}
weird = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8), st.lists(st.one_of(st.integers(-3, 300), st.text(max_size=5), st.none()), max_size=6),
    st.dictionaries(st.text(max_size=6), st.integers(-3, 5), max_size=3),
)


def _mutate(config: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
    out = dict(config)
    target = out
    if isinstance(out.get("text_config"), dict) and data.draw(st.booleans()):
        target = out["text_config"] = dict(out["text_config"])
    keys = sorted(target)
    for _ in range(data.draw(st.integers(1, 4))):
        key = data.draw(st.sampled_from(keys))
        if data.draw(st.booleans()):
            target.pop(key, None)
        else:
            target[key] = data.draw(weird)
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(CONFIGS)), st.data())
def test_mutated_configs_read_or_raise_input_error(model: str, data: st.DataObject) -> None:
    config = _mutate(CONFIGS[model], data)
    try:
        spec = spec_from_config(config, name="config.json")
        kvbudget.kv(spec, context=4096, batch=2, tp=1)
        textbook_fit(spec, gpu="H100", context=4096, batch=2, weights_dtype="bf16")
    except InputError:
        pass
