"""Model reference -> ModelSpec: a local config.json, the catalog, or the Hugging Face Hub."""

from __future__ import annotations

import os
import re
import sys

from .._record import replace
from ..inputs import MAX_CONFIG_BYTES, excerpt_path, files_refused, hub_refused, load_json, read_bytes
from ..units import InputError, excerpt
from . import catalog
from .catalog import UnknownModel
from .derived import derive
from .hf_config import ConfigError, spec_from_config
from .spec import ModelSpec

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def _where(path: str) -> str:
    """A path for an error line: whole when short, else its end (the file name is what tells)."""
    return path if len(path) <= 160 else "..." + path[-157:]


# A NaN / Infinity that json.dumps writes and strict JSON refuses, with the key it stands for (or whose list holds it).
_CONSTANT = re.compile(r'"([^"\\]{1,100})"\s*:\s*(?:\[[^\][{}"]*?)?(-?Infinity|NaN)\b')  # a value, or in a list
# An integer past a double's range (orjson: "number is infinity"): a run of digits tried from its start only
# (linear time), then the key just before it, if any.
_HUGE_INT = re.compile(r"(?<!\d)\d{300,}")
_KEY_BEFORE = re.compile(r'"([^"\\]{1,100})"\s*:\s*(?:\[[^\][{}"]*|-)?$')


def json_culprit(data: str | bytes, error: str) -> str:
    """What a strict-JSON refusal (``load_json``'s ``error``) was about, when the text says: ": field 'x' is NaN"."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    if "unexpected character" in error or "no digit after sign" in error:  # NaN, Infinity; -Infinity
        constant = _CONSTANT.search(text)
        if constant:
            return f": field {constant.group(1)!r} is {constant.group(2)}, give a number"
    elif "number is infinity" in error:
        huge = _HUGE_INT.search(text)
        if huge:
            key = _KEY_BEFORE.search(text, max(0, huge.start() - 400), huge.start())
            field = f"field {key.group(1)!r} is " if key else ""
            return f": {field}an integer of {len(huge.group()):,} digits, give a number"
    return ""


def read_config_file(path: str) -> dict[str, Any]:
    """Parse a config.json (or the one in a folder), turning every failure into a ConfigError
    that names the file: a regular file of at most MAX_CONFIG_BYTES, strict JSON (no NaN, no
    integers of thousands of digits, bounded nesting) holding an object."""
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    if not os.path.lexists(path):
        raise ConfigError(f"{_where(path)}: no such file (a model folder must hold a config.json)")
    side = os.path.join(os.path.dirname(path), QUANT_FILE)
    return with_quant_file(_json_object(path, "config.json"),
                           lambda: _json_object(side, QUANT_FILE) if os.path.lexists(side) else None)


QUANT_FILE = "hf_quant_config.json"


def with_quant_file(parsed: dict[str, Any], quant_file: Callable[[], dict[str, Any] | None]) -> dict[str, Any]:
    """A config.json with the repo's hf_quant_config.json (read by ``quant_file``, None when there is none) as its
    quantization_config when it has none. ModelOpt 0.29 and before keep the quantization config in that file, and
    vLLM 0.33.0 (transformers_utils/config.py) takes it so: a folder or Hub id of such an FP8 / NVFP4 checkpoint read
    without it was planned as 16-bit weights."""
    if parsed.get("quantization_config") is not None:
        return parsed
    quant = quant_file()
    return parsed if quant is None else {**parsed, "quantization_config": quant}


def _json_object(path: str, what: str) -> dict[str, Any]:
    """One JSON object from a file of at most MAX_CONFIG_BYTES, every failure a ConfigError naming the file."""
    where = _where(path)
    try:
        data = read_bytes(path, "config", MAX_CONFIG_BYTES)
    except InputError as exc:
        raise ConfigError(str(exc)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where}: cannot read it as a {what} (not UTF-8 text, byte {exc.start})") from None
    try:
        parsed = load_json(text, where)
    except InputError as exc:
        raise ConfigError(f"{exc}{json_culprit(text, str(exc))}") from None
    if not isinstance(parsed, dict):
        kind = {list: "an array", str: "a string", bool: "true or false", type(None): "null"}.get(type(parsed), "a number")
        raise ConfigError(f"{where}: {what} must hold a JSON object, not {kind}")
    return parsed


def _looks_like_path(ref: str) -> bool:
    return ref.endswith(".json") or ref.startswith((".", "/", "~"))


def hub_offline() -> bool:
    """HF_HUB_OFFLINE is set: nothing may be fetched from the Hub."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


HUB_TIMEOUT_S = 10.0  # seconds for the one request for config.json (HF_HUB_ETAG_TIMEOUT overrides)


def _hub_timeout() -> float:
    try:
        value = float(os.environ.get("HF_HUB_ETAG_TIMEOUT", ""))
    except ValueError:
        return HUB_TIMEOUT_S
    return value if 0 < value <= 600 else HUB_TIMEOUT_S


_HUB_PART = r"[A-Za-z0-9_](?:[A-Za-z0-9_.\-]*[A-Za-z0-9_])?"  # no '-' or '.' at either end
_HUB_ID = re.compile(f"{_HUB_PART}/{_HUB_PART}", re.ASCII)


class HubUnreachable(UnknownModel):
    """The Hub could not be asked (sealed, offline, not installed, no connection): not a verdict on the name."""


def _from_hub(ref: str) -> dict[str, Any]:
    """A repo's config.json: from the Hugging Face cache when it is there, else one GET with a short
    timeout and no retries (``hf_hub_download`` retries a failed connection for about 25 s before it
    gives up). Every failure is one UnknownModel line naming the ways round it."""
    refused = hub_refused()
    if refused is not None:  # sealed (kvbudget serve without --allow-hub)
        raise HubUnreachable(f"model {ref!r} is not in the catalog and {refused}")
    # the Hub's own rule for a repo id (huggingface_hub validate_repo_id): huggingface_hub raised it as a traceback
    # for 'a/b\x00' or a name past 96 characters
    if not _HUB_ID.fullmatch(ref) or "--" in ref or ".." in ref or len(ref.split("/")[1]) > 96:
        hint = catalog.suggest(ref)
        did = f"; did you mean {' or '.join(hint)}?" if hint else ""
        raise UnknownModel(f"unknown model {excerpt(ref, 80)}: not a catalog name, a local path nor a Hugging Face id "
                           f"(owner/name in letters, digits, '-', '_' and '.'){did}")
    name = ref.split("/")[-1]
    ways = (f"pass a local copy (kvbudget kv ./{name}/config.json or its folder), use a catalog model"
            " (kvbudget models), or set HF_HUB_OFFLINE=1 to skip the Hub")
    try:
        import huggingface_hub as hub
    except ImportError:  # pragma: no cover - it is a dependency
        raise HubUnreachable(f"model {ref!r} is not in the catalog and huggingface_hub is not installed: {ways}") from None
    try:  # a copy already downloaded: no network
        cached = hub.try_to_load_from_cache(ref, "config.json")
    except Exception:  # an id the cache cannot hold (the Hub would refuse it too)
        cached = None
    if isinstance(cached, str):
        return read_config_file(cached)
    if hub_offline():
        raise HubUnreachable(f"model {ref!r} is not in the catalog nor the Hugging Face cache, and HF_HUB_OFFLINE is set:"
                           f" {ways.replace(', or set HF_HUB_OFFLINE=1 to skip the Hub', '')}, or unset HF_HUB_OFFLINE")
    print("fetching config.json from the Hub…", file=sys.stderr, flush=True)
    data = _hub_json(ref, "config.json", ways)
    if data is None:
        raise UnknownModel(f"model {ref!r}: not on the Hub (HTTP 404: no such repo, or no config.json in it): {ways}")
    return with_quant_file(data, lambda: _hub_json(ref, QUANT_FILE, ways))  # the same GET, when config.json needs it


def _hub_json(ref: str, filename: str, ways: str) -> dict[str, Any] | None:
    """One JSON object file of a Hub repo: one GET with a short timeout and no retries, at most MAX_CONFIG_BYTES,
    strict JSON; None where the Hub answers 404 (no such file). Every other failure is one line."""
    import huggingface_hub as hub
    from huggingface_hub.utils._headers import build_hf_headers
    from huggingface_hub.utils._http import get_session

    endpoint = os.environ.get("HF_ENDPOINT", "").strip().rstrip("/") or None
    url = hub.hf_hub_url(ref, filename, endpoint=endpoint)
    try:
        with get_session().stream("GET", url, headers=build_hf_headers(), timeout=_hub_timeout()) as response:
            status = response.status_code
            body = bytearray()
            if status == 200:
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > MAX_CONFIG_BYTES:
                        raise ConfigError(f"{ref}: the Hub's {filename} is more than {MAX_CONFIG_BYTES:,} bytes")
    except ConfigError:
        raise
    except Exception as exc:  # connection refused, DNS, timeout, TLS, proxy: one line, no retry
        raise HubUnreachable(f"model {ref!r} is not in the catalog and the Hub could not be reached"
                             f" ({exc.__class__.__name__}): {ways}") from None
    if status in (401, 403):
        raise UnknownModel(f"model {ref!r}: the Hub has no public repo of that name (HTTP {status}: missing, private or"
                           f" gated; for a gated one accept its licence and log in, or set HF_TOKEN): {ways}")
    if status == 404:
        return None
    if status != 200:
        raise UnknownModel(f"model {ref!r}: the Hub answered HTTP {status} for its {filename}: {ways}")
    data = load_json(bytes(body), f"{ref} {filename} from the Hub")
    if not isinstance(data, dict):
        raise ConfigError(f"{ref}: its {filename} on the Hub does not hold a JSON object")
    return data


def _planned_gguf(path: str) -> ModelSpec | None:
    """A GGUF file that is not here but is named as kvbudget names what llama-quantize makes of a catalog
    model (``Llama-3.1-8B-Instruct-Q4_K_M.gguf``, in the launch commands it prints): that model with that
    file type, so that a printed command reads back to the same plan. None for any other name."""
    stem = os.path.basename(path)[: -len(".gguf")]
    base, _, ftype = stem.rpartition("-")
    entry = catalog.find(base) if base else None
    if entry is None:
        return None
    from .gguf_quant import is_preset, weight_format

    if not is_preset(ftype):
        return None
    spec = spec_from_config(entry.config, name=entry.id)
    note = (f"{os.path.basename(path)} is not here: planned as llama-quantize makes it from {entry.id} "
            f"({ftype.upper()}, tensor by tensor)")
    return replace(spec, weight_format=weight_format(ftype), notes=(*spec.notes, note))


class OverrideError(ConfigError):
    """A config that --hf-overrides makes wrong (a layer count of 0, KV heads that do not divide the heads)."""


def with_overrides(raw: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """A config.json with vLLM's --hf-overrides applied as vLLM 0.33.0 applies them (config/model.py: flat keys
    through PretrainedConfig.update, a JSON object into a nested config such as text_config key by key, any other
    object set whole)."""
    out = dict(raw)
    for key, value in overrides.items():
        nested = out.get(key)
        out[key] = with_overrides(nested, value) if isinstance(value, dict) and isinstance(nested, dict) and (
            key.endswith("_config") and key != "quantization_config") else value
    return out


def load_model(ref: str, overrides: str = "") -> ModelSpec:
    """Resolve a model reference: a GGUF file (its header only), a path to a config.json or a folder
    holding one (with its ``*.safetensors``, the weights are their headers' exact bytes), a catalog id
    or alias (case-insensitive), or a Hugging Face repo id fetched with huggingface_hub. ``overrides``: a JSON
    object of config.json keys a launch command overrides (vLLM's --hf-overrides), applied to the config read."""
    if overrides:
        return _overridden(ref, load_json(overrides, "--hf-overrides"))
    ref = ref.strip()
    if not ref:
        raise UnknownModel("empty model name: give a catalog name (see `kvbudget models`) or a config.json path")
    no_files = files_refused()  # sealed (kvbudget serve): a path is refused without looking at the file system
    path = ref if no_files else os.path.expanduser(ref)
    if path.lower().endswith(".gguf"):
        planned = None if not no_files and os.path.lexists(path) else _planned_gguf(path)
        if planned is not None:
            return planned
        from .gguf_spec import spec_from_gguf

        return spec_from_gguf(path)
    if no_files and _looks_like_path(ref):
        raise UnknownModel(f"model {excerpt_path(ref)}: {no_files}")
    if not no_files and (os.path.exists(path) or _looks_like_path(ref)):
        spec = spec_from_config(read_config_file(path), name=path)
        if os.path.isdir(path):  # a model folder: exact weights from its safetensors headers, when it holds them
            from .safetensors_reader import with_folder_weights

            spec = with_folder_weights(spec, path)
        return spec
    entry = catalog.find(ref)
    if entry is not None:
        return spec_from_config(entry.config, name=entry.id)
    if ref.count("/") == 1 and all(ref.split("/")):
        try:
            raw = _from_hub(ref)
        except HubUnreachable:
            by_name = _by_name(ref)
            if by_name is None:
                raise
            return by_name
        spec = spec_from_config(raw, name=ref)
        # online already: the exact weights from the repo's safetensors headers (range requests, no weights
        # downloaded); a repo without them (or a failure) keeps the config-derived count, with a note
        from .safetensors_reader import SafetensorsError, with_hub_weights

        try:
            return with_hub_weights(spec, ref)
        except (SafetensorsError, ConfigError) as exc:
            return replace(spec, notes=(*spec.notes, f"weights from config.json: {exc}"))
    by_name = _by_name(ref) if "/" not in ref else None
    if by_name is not None:
        return by_name
    hint = catalog.suggest(ref)
    did = f"; did you mean {' or '.join(hint)}?" if hint else ""
    raise UnknownModel(f"unknown model {ref!r}{did} (see `kvbudget models`, or pass a config.json path)")


def _overridden(ref: str, overrides: dict[str, Any]) -> ModelSpec:
    """The model of ``ref`` planned from its config with ``overrides`` applied; a GGUF file or a model with no
    config.json here keeps its own shapes, with a note naming the keys not applied."""
    keys = ", ".join(sorted(map(str, overrides)))[:120]
    path = os.path.expanduser(ref.strip())
    raw: dict[str, Any] | None = None
    if not files_refused() and not path.lower().endswith(".gguf") and (os.path.exists(path) or _looks_like_path(ref)):
        raw = read_config_file(path)
    elif (entry := catalog.find(ref.strip())) is not None:
        raw, ref = dict(entry.config), entry.id
        path = ""
    elif ref.strip().count("/") == 1 and all(ref.strip().split("/")) and not path.lower().endswith(".gguf"):
        try:
            raw = _from_hub(ref.strip())
        except HubUnreachable:
            raw = None
    if raw is None:
        return _stand_in(load_model(ref), f"--hf-overrides of {keys} not applied: kvbudget has no config.json of "
                         f"{excerpt(ref.strip(), 60)} to apply it to")
    try:
        spec = spec_from_config(with_overrides(raw, overrides), name=ref.strip())
    except ConfigError as exc:
        said = str(exc).removeprefix(f"{ref.strip()}: ").replace(": fix the config.json", "")
        raise OverrideError(f"--hf-overrides {keys} on {excerpt(ref.strip(), 60)}: {said}: fix the override") from None
    if os.path.isdir(path) and not files_refused():
        from .safetensors_reader import with_folder_weights

        spec = with_folder_weights(spec, path)
    return _stand_in(spec, f"--hf-overrides: {keys} applied to the config.json of {excerpt(ref.strip(), 60)}")


def load_foreign_model(ref: str, overrides: str = "") -> ModelSpec:
    """A model named on another machine (in a start-up log, a pasted launch command): as ``load_model``, and
    when that fails (a local path over there, a Hub id with no Hub here), the catalog model its last path part
    names or re-publishes (``derived.derive``), with a note saying so."""
    try:
        return load_model(ref, overrides)
    except OverrideError:
        raise  # the overrides make a config kvbudget (and transformers) refuse: no stand-in hides that
    except InputError:
        cached = _cache_folder_model(ref, overrides)
        if cached is not None:
            return cached
        base = os.path.basename(ref.strip().rstrip("/"))
        if not base or base == ref.strip():
            raise
        # ModelScope's snapshot_download writes a '.' of the model's name as '___' (Qwen2___5-3B is Qwen2.5-3B)
        base = base.replace("___", ".")
        entry = catalog.find(base)
        if entry is not None:
            return _stand_in(load_model(entry.id, overrides) if overrides else spec_from_config(entry.config, name=entry.id),
                             f"{ref} is not here: planned as {entry.id}, the catalog model its folder is named after")
        spec = _by_name(base)
        if spec is None:
            raise
        if overrides:
            keys = ", ".join(sorted(map(str, load_json(overrides, "--hf-overrides"))))[:120]
            spec = _stand_in(spec, f"--hf-overrides of {keys} not applied: kvbudget has no config.json of "
                             f"{excerpt(ref.strip(), 60)} to apply it to")
        return spec


_HUB_CACHE = re.compile(r"(?:^|[/\\])models--([A-Za-z0-9][\w.-]*?)--([\w.-]+?)(?:[/\\]snapshots(?:[/\\][0-9a-f]{7,64})?)?"
                        r"[/\\]*$")


def hub_cache_repo(ref: str) -> str | None:
    """The Hub repository a Hugging Face cache folder holds (huggingface_hub names it ``models--ORG--NAME`` and
    keeps each revision under ``snapshots/COMMIT``): ``.../models--Qwen--Qwen2.5-7B-Instruct/snapshots/a09a...``
    is ``Qwen/Qwen2.5-7B-Instruct``; None for any other path."""
    m = _HUB_CACHE.search(ref.strip())
    return f"{m.group(1)}/{m.group(2)}" if m else None


def _cache_folder_model(ref: str, overrides: str) -> ModelSpec | None:
    """The model of the repository a Hugging Face cache folder on another machine holds, where kvbudget has its
    config (catalog, this machine's cache, the Hub); None otherwise."""
    repo = hub_cache_repo(ref)
    if repo is None:
        return None
    try:
        spec = load_model(repo, overrides)
    except OverrideError:
        raise
    except InputError:
        return None
    return _stand_in(spec, f"{ref.strip()} is not here: planned as {repo}, the Hugging Face cache folder's repository")


def draft_config(ref: str) -> tuple[dict[str, Any], str] | None:
    """The config.json of a speculative-decoding draft named in ``--speculative-config``'s ``model``, and where it
    came from: a local folder or file, the draft catalog (catalog/drafts: EAGLE heads), the model catalog (a small
    LM used as a draft), or the Hugging Face Hub (its cache first, as ``load_model`` asks it). None when none of
    them has it (a path on another machine, the Hub not reachable or sealed): the caller warns and keeps a band."""
    ref = ref.strip()
    if not ref:
        return None
    path = os.path.expanduser(ref)
    if not files_refused() and (os.path.exists(path) or _looks_like_path(ref)):
        try:
            return read_config_file(path), _where(path)
        except ConfigError:
            return None
    found = catalog.find_draft(ref)
    if found is not None:
        return found[1], found[2]
    entry = catalog.find(ref)
    if entry is not None:
        return dict(entry.config), entry.config_source
    if ref.count("/") == 1 and all(ref.split("/")):
        try:
            return _from_hub(ref), f"https://huggingface.co/{ref}/blob/main/config.json"
        except InputError:
            return None
    return None


def _by_name(ref: str) -> ModelSpec | None:
    """A re-published catalog model (``derived.derive``) planned from the catalog's config, with a note."""
    found = derive(ref)
    if found is None:
        return None
    _, config, note = found
    return _stand_in(spec_from_config(config, name=ref), note)


def _stand_in(spec: ModelSpec, note: str) -> ModelSpec:
    """A model planned from a catalog config standing in for the one named: said on stderr, kept in its notes."""
    print(f"kvbudget: warning: {note[:600]}", file=sys.stderr, flush=True)
    return replace(spec, notes=(*spec.notes, note))
