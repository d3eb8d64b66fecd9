"""A RoPE scaling given on the command line (``--rope-scaling JSON`` up to 0.10, ``--hf-overrides
'{"rope_scaling": ...}'`` in every release) and the max_model_len vLLM derives from it.

vLLM's ``_get_and_verify_max_len`` (config.py / config/model.py): su, longrope and llama3 leave the length as the
config gives it; YaRN up to 0.30 derives ``original_max_position_embeddings x factor`` (0.10.1 config/__init__.py,
0.13-0.29 config/model.py), and from 0.31 takes max_position_embeddings as already scaled (the 0.31 and 0.33
wheels); any other type multiplies the length by its factor.
"""

from __future__ import annotations

import json
from typing import Any

from ...inputs import excerpt, load_json, real, whole
from ...units import InputError

_KEEP = ("su", "longrope", "llama3", "deepseek_yarn", "deepseek_llama_scaling")
_TYPES = (*_KEEP, "default", "linear", "dynamic", "yarn", "mrope", "ntk")


def json_object(text: str, limit: int) -> dict[str, Any] | None:
    """A flag's JSON object (inputs.load_json: strict, bounded nesting), or None when ``text`` is longer than
    ``limit``, not JSON or not an object: the caller names the fix."""
    try:
        data = load_json(text, "flag") if len(text) <= limit else None
    except InputError:
        return None
    return data if isinstance(data, dict) else None


def parse_rope(text: str, label: str) -> str:
    """The rope scaling object of ``--rope-scaling`` as canonical JSON, checked; one error line if it is not one."""
    rope = json_object(text, 4096)
    if rope is None:
        raise InputError(f"{label} {excerpt(text)}: give a JSON object such as "
                         '\'{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768}\'')
    kind = rope.get("rope_type", rope.get("type", "default"))
    if not isinstance(kind, str) or kind not in _TYPES:
        raise InputError(f"{label}: unknown rope_type {excerpt(kind)}: vLLM knows {', '.join(_TYPES)}")
    if "factor" in rope and kind != "default":
        real(rope["factor"], f"{label} factor", lo=1.0, hi=1e6)
    if "original_max_position_embeddings" in rope:
        whole(rope["original_max_position_embeddings"], f"{label} original_max_position_embeddings", 1, 1 << 30)
    elif kind == "yarn":
        raise InputError(f"{label}: a yarn rope scaling needs original_max_position_embeddings (vLLM reads it)")
    return json.dumps({"rope_type": kind, **{k: rope[k] for k in ("factor", "original_max_position_embeddings")
                                             if k in rope}}, sort_keys=True)


def derived_len(rope_json: str, config_len: int, minor: int | None) -> tuple[int, str]:
    """vLLM's derived max_model_len under the rope scaling ``rope_json`` (from parse_rope) for a config whose own
    length is ``config_len``, in release 0.``minor`` (None: the current one), and a note saying how."""
    rope = json.loads(rope_json)
    kind, factor = rope["rope_type"], float(rope.get("factor", 1.0))
    if kind in _KEEP or (kind == "yarn" and (minor is None or minor >= 31)):
        return config_len, f"RoPE scaling {kind}: the model's own length {config_len:,} stands (vLLM takes it as scaled)"
    base = int(rope["original_max_position_embeddings"]) if kind == "yarn" else config_len
    length = int(base * factor)
    return length, f"RoPE scaling {kind} x{factor:g}: max_model_len {base:,} x {factor:g} = {length:,}, as vLLM derives it"
