"""Which vLLM releases serve a model's architecture: a release whose model registry does not list the config's
``architectures`` class stops at start-up ("Model architectures [...] are not supported for now",
model_executor/models/registry.py). The table (archs.json) is the registry of each release's PyPI wheel, 0.6.4 to
0.33.0 (29 releases), written by tools/gen_vllm_archs.py; a release between two read ones that differ is not
refused, only noted."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from ...units import InputError
from .settings import minor_patch

TABLE = Path(__file__).with_name("archs.json")


@lru_cache(maxsize=1)
def _table() -> tuple[tuple[tuple[int, int], ...], dict[str, tuple[int, int]]]:
    data = json.loads(TABLE.read_text())
    releases = tuple(_release(v) for v in data["releases"])
    return releases, {k: _release(v) for k, v in data["first_listed"].items()}


def _release(version: str) -> tuple[int, int]:
    read = minor_patch(version)
    assert read is not None, version  # the table holds release numbers only
    return read


def check_architecture(architecture: str, version: str, name: str, notes: list[str]) -> None:
    """Refuse ``architecture`` on vLLM ``version`` where the release read just before the first that lists it, or
    an older one, is asked for; note it where the release lies between that one and the first listing. Nothing is
    said for an architecture no release lists (a custom class, trust_remote_code) or a version without a number."""
    asked = minor_patch(version)
    if not architecture or asked is None:
        return
    releases, first = _table()
    since = first.get(architecture)
    if since is None or since == releases[0]:
        return
    before = max(r for r in releases if r < since)
    shown = f"0.{since[0]}.{since[1]}"
    if asked <= before:
        raise InputError(f"{name}: vLLM {version} has no {architecture} (its model registry lists it from {shown}); "
                         f"vLLM stops at start-up: give --vllm-version {shown} or later")
    if asked < since:
        notes.append(f"{architecture}: vLLM lists it from {shown} (not in 0.{before[0]}.{before[1]}); whether "
                     f"{version} has it is not known to kvbudget")
