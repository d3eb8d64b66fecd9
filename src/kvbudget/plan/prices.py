"""GPU prices per hour: the catalog's public list prices, overridden by a user's file.

The file is JSON (``{"H100": 2.49, "A100-80GB": 1.29}``) or CSV lines ``gpu,price``; names are
resolved like ``--gpu``. Bad input is one error line naming the file and the entry.
"""

from __future__ import annotations

from ..hardware import find_gpu
from ..inputs import MAX_OPTIONS_BYTES, excerpt, load_json, read_text, real, repeated_keys
from ..units import InputError

MAX_PRICE = 1000.0  # $/hour for one GPU: no cloud list price comes near


def _keys_twice(text: str) -> list[str]:
    """The keys an object of this (valid, bounded) JSON text gives more than once."""
    import json

    twice, pairs = repeated_keys()
    json.loads(text, object_pairs_hook=pairs)
    return twice


def read_prices(path: str) -> dict[str, float]:
    """``{catalog GPU name: $/hour}`` from a prices file (a regular file of at most MAX_OPTIONS_BYTES)."""
    text = read_text(path, "prices file", MAX_OPTIONS_BYTES)
    where = path if len(path) <= 160 else "..." + path[-157:]  # the end names the file
    entries: list[tuple[str, object]]
    if text.lstrip().startswith(("{", "[")):
        try:
            data = load_json(text, where)
        except InputError as exc:
            from ..model.resolve import json_culprit

            raise InputError(f"{exc}{json_culprit(text, str(exc))}") from None
        if not isinstance(data, dict):
            raise InputError(f"{where}: a JSON prices file holds one object, {{\"H100\": 2.49, ...}}")
        entries = [(str(k), v) for k, v in data.items()]
        # a key written twice: JSON readers keep the last one silently (nested values are refused below)
        twice = [] if any(isinstance(v, (dict, list)) for _, v in entries) else _keys_twice(text)
        if twice:
            raise InputError(f"{where}: {excerpt(twice[-1], 40)} is priced twice (a JSON reader keeps only the "
                             "last): give each GPU one price")
    else:
        entries = []
        for n, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#") or line.lower().startswith("gpu,"):
                continue
            gpu, sep, cost = line.partition(",")
            if not sep:
                raise InputError(f"{where}:{n}: expected 'gpu,price', got {excerpt(line)}")
            entries.append((gpu.strip(), cost.strip()))
    if not entries:
        raise InputError(f"{where}: prices no GPU: give lines 'gpu,price' (H100,2.49) or a JSON object "
                         "{\"H100\": 2.49}, or drop --prices for the catalog's list prices")
    out: dict[str, float] = {}
    for name, value in entries:
        label = f"price of {excerpt(name, 40)}"
        if isinstance(value, str):
            try:
                value = float(value) if len(value) <= 40 else value
            except ValueError:
                raise InputError(f"{where}: {label} is not a number: {excerpt(value)} (give $/hour, e.g. 2.49)") from None
        price = real(value, label, where=where)
        if not 0 <= price < MAX_PRICE:
            raise InputError(f"{where}: {label} must be between 0 and {MAX_PRICE:g} $/hour, got {price:g}")
        try:
            gpu = find_gpu(name).name
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None
        if gpu in out:
            raise InputError(f"{where}: {excerpt(name, 40)} names {gpu}, which the file already prices")
        out[gpu] = price
    return out
