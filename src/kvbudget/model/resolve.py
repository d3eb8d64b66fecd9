"""Model reference -> ModelSpec: a local config.json, the catalog, or the Hugging Face Hub."""

from __future__ import annotations

import os

from .._record import replace
from ..inputs import MAX_CONFIG_BYTES, excerpt, load_json, read_text
from ..units import InputError
from . import catalog
from .catalog import UnknownModel
from .hf_config import ConfigError, spec_from_config
from .spec import ModelSpec

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any


def read_config_file(path: str) -> dict[str, Any]:
    """Parse a config.json (or the one in a folder), turning every failure into a ConfigError
    that names the file: a regular file of at most MAX_CONFIG_BYTES, strict JSON (no NaN, no
    integers of thousands of digits, bounded nesting) holding an object."""
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
        if not os.path.exists(path):
            raise ConfigError(f"{excerpt(path)}: no such file (a model folder must hold a config.json)")
    try:
        text = read_text(path, "config", MAX_CONFIG_BYTES)
        data = load_json(text, excerpt(path))
    except ConfigError:
        raise
    except InputError as exc:
        raise ConfigError(str(exc)) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{excerpt(path)}: config.json must hold a JSON object, not {type(data).__name__}")
    return data


def _looks_like_path(ref: str) -> bool:
    return ref.endswith(".json") or ref.startswith((".", "/", "~"))


def hub_offline() -> bool:
    """HF_HUB_OFFLINE is set: nothing may be fetched from the Hub."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _from_hub(ref: str) -> dict[str, Any]:
    local_hint = f"download its config.json and pass the file or its folder, e.g. kvbudget kv ./{ref.split('/')[-1]}/config.json"
    if hub_offline():
        raise UnknownModel(f"model {ref!r} is not in the catalog and HF_HUB_OFFLINE is set: {local_hint}")
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:  # pragma: no cover - it is a dependency
        raise UnknownModel(f"model {ref!r} is not in the catalog and huggingface_hub is not installed: {local_hint}") from None
    try:
        path = hf_hub_download(ref, "config.json")
    except Exception as exc:  # any hub failure (offline, gated, missing) becomes one clear line
        raise UnknownModel(
            f"model {ref!r} is not in the catalog and its config.json could not be fetched from the Hub "
            f"({exc.__class__.__name__}): {local_hint}"
        ) from None
    return read_config_file(path)


def load_model(ref: str) -> ModelSpec:
    """Resolve a model reference: a GGUF file (its header only), a path to a config.json or a folder
    holding one (with its ``*.safetensors``, the weights are their headers' exact bytes), a catalog id
    or alias (case-insensitive), or a Hugging Face repo id fetched with huggingface_hub."""
    ref = ref.strip()
    if not ref:
        raise UnknownModel("empty model name: give a catalog name (see `kvbudget models`) or a config.json path")
    path = os.path.expanduser(ref)
    if path.lower().endswith(".gguf"):
        from .gguf_spec import spec_from_gguf

        return spec_from_gguf(path)
    if os.path.exists(path) or _looks_like_path(ref):
        spec = spec_from_config(read_config_file(path), name=path)
        if os.path.isdir(path):  # a model folder: exact weights from its safetensors headers, when it holds them
            from .safetensors_reader import with_folder_weights

            spec = with_folder_weights(spec, path)
        return spec
    entry = catalog.find(ref)
    if entry is not None:
        return spec_from_config(entry.config, name=entry.id)
    if ref.count("/") == 1 and all(ref.split("/")):
        spec = spec_from_config(_from_hub(ref), name=ref)
        # online already: the exact weights from the repo's safetensors headers (range requests, no weights
        # downloaded); a repo without them (or a failure) keeps the config-derived count, with a note
        from .safetensors_reader import SafetensorsError, with_hub_weights

        try:
            return with_hub_weights(spec, ref)
        except (SafetensorsError, ConfigError) as exc:
            return replace(spec, notes=(*spec.notes, f"weights from config.json: {exc}"))
    hint = catalog.suggest(ref)
    did = f"; did you mean {' or '.join(hint)}?" if hint else ""
    raise UnknownModel(f"unknown model {ref!r}{did} (see `kvbudget models`, or pass a config.json path)")
