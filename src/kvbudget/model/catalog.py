"""Built-in models: one JSON file per model under ``catalog/``, each citing its sources."""

from __future__ import annotations

import functools
import json
import os

from .._record import record
from ..units import InputError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

CATALOG_DIR = os.path.join(os.path.dirname(__file__), "catalog")
# Speculative-decoding drafts (an EAGLE head is not a model one serves): their config.json only, each citing its source
DRAFTS_DIR = os.path.join(CATALOG_DIR, "drafts")


class UnknownModel(InputError):
    """A model reference that is not in the catalog, not a local config and not reachable."""


@record
class CatalogEntry:
    id: str
    aliases: tuple[str, ...]
    official_params: int
    official_params_source: str
    config_source: str
    config: dict[str, Any]
    official_params_text: int = 0
    notes: str = ""

    @property
    def names(self) -> tuple[str, ...]:
        return (self.id, *self.aliases)


def _key(name: str) -> str:
    return name.strip().lower()


def _read(path: str) -> CatalogEntry:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return CatalogEntry(
        id=data["id"],
        aliases=tuple(data.get("aliases", ())),
        official_params=int(data["official_params"]),
        official_params_source=data.get("official_params_source", ""),
        config_source=data.get("config_source", ""),
        config=data["config"],
        official_params_text=int(data.get("official_params_text") or 0),
        notes=data.get("notes", ""),
    )


@functools.lru_cache(maxsize=1)
def _all() -> tuple[CatalogEntry, ...]:
    """The catalog files, read once per process (they ship with the package and do not change)."""
    paths = (os.path.join(CATALOG_DIR, n) for n in os.listdir(CATALOG_DIR) if n.endswith(".json"))
    return tuple(sorted((_read(p) for p in paths), key=lambda e: e.id.lower()))


def entries() -> list[CatalogEntry]:
    """Every catalog entry, sorted by id."""
    return list(_all())


def _matches(entry: CatalogEntry, key: str) -> bool:
    for name in entry.names:
        k = _key(name)
        if key == k or key == k.rsplit("/", 1)[-1]:
            return True
    return False


def find(ref: str) -> CatalogEntry | None:
    """The entry whose HF id, short name or alias is ``ref`` (case-insensitive), else None."""
    key = _key(ref)
    # Fast path: the file named after the reference.
    slug = os.path.join(CATALOG_DIR, f"{key.rsplit('/', 1)[-1]}.json")
    if os.path.isfile(slug):
        entry = _read(slug)
        if _matches(entry, key):
            return entry
    for entry in entries():
        if _matches(entry, key):
            return entry
    return None


@functools.lru_cache(maxsize=1)
def _drafts() -> tuple[tuple[tuple[str, ...], dict[str, Any], str], ...]:
    """The draft files: (names, config, source), read once per process."""
    out = []
    for n in sorted(os.listdir(DRAFTS_DIR)):
        if n.endswith(".json"):
            with open(os.path.join(DRAFTS_DIR, n), encoding="utf-8") as f:
                data = json.load(f)
            out.append(((data["id"], *data.get("aliases", ())), data["config"], data["config_source"]))
    return tuple(out)


def find_draft(ref: str) -> tuple[str, dict[str, Any], str] | None:
    """A speculative-decoding draft's (id, config.json, source URL) when ``ref`` names one in ``catalog/drafts``
    (HF id, its last part or an alias, case-insensitive), else None."""
    key = _key(ref)
    for names, config, source in _drafts():
        if any(key in (_key(name), _key(name).rsplit("/", 1)[-1]) for name in names):
            return names[0], dict(config), source
    return None


def suggest(ref: str, n: int = 3) -> list[str]:
    """Close catalog names for a mistyped reference."""
    import difflib

    names: dict[str, str] = {}
    for entry in entries():
        for name in entry.names:
            names.setdefault(_key(name), entry.id)
            names.setdefault(_key(name).rsplit("/", 1)[-1], entry.id)
    if len(ref) > 120:  # no model name is that long; difflib's cost grows with the product of the lengths
        return []
    key = _key(ref)
    # names that begin with what was typed first ("qwen3-30b" -> Qwen3-30B-A3B), then the close ones
    starts = sorted(name for name in names if key and name.rsplit("/", 1)[-1].startswith(key.rsplit("/", 1)[-1]))
    hits = starts + difflib.get_close_matches(key, list(names), n=n * 3, cutoff=0.6)
    out: list[str] = []
    for hit in hits:
        if names[hit] not in out:
            out.append(names[hit])
    return out[:n]
