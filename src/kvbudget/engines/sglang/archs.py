"""Which SGLang release lines serve a model's architecture: SGLang loads a model by the config's ``architectures``
class among its models' ``EntryClass`` names and stops at start-up without one. The table (archs.json) holds the
first of 68 PyPI wheels, 0.3.0 to 0.5.23, whose models register each class (tools/gen_sglang_archs.py). kvbudget
plans SGLang by release line (flags.LINES): a line whose last release predates the first listing is refused; a line
that spans it gets a note."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from ...units import InputError
from .flags import LINES, release_key

TABLE = Path(__file__).with_name("archs.json")


@lru_cache(maxsize=1)
def _first() -> dict[str, tuple[int, int, int, int]]:
    data = json.loads(TABLE.read_text())
    table = {}
    for arch, version in data["first_listed"].items():
        key = release_key(version)
        assert key is not None, version  # the table holds release numbers only
        table[arch] = key
    return table


def check_architecture(architecture: str, line: str, name: str, notes: list[str]) -> None:
    """Refuse ``architecture`` on release line ``line`` where every release of the line predates its first listing;
    note it where the line spans that release. Nothing is said for a class no release lists."""
    since = _first().get(architecture) if architecture else None
    span = LINES.get("current" if line not in LINES else line)
    if since is None or span is None:
        return
    low, high = span
    shown = ".".join(map(str, since[:3])) + (f".post{since[3]}" if since[3] else "")
    if high is not None and high < since:
        raise InputError(f"{name}: SGLang's {line} line has no {architecture} (its models register it from {shown}); "
                         "SGLang stops at start-up: give a later --sglang-version (current)")
    if low < since:
        notes.append(f"{architecture}: SGLang registers it from {shown}; an earlier release of the {line} line "
                     "stops at start-up")
