"""GPU prices per hour: the catalog's public list prices, overridden by a user's file.

The file is JSON (``{"H100": 2.49, "A100-80GB": 1.29}``) or CSV lines ``gpu,price``; names are
resolved like ``--gpu``. Bad input is one error line naming the file and the entry.
"""

from __future__ import annotations

import json

from ..hardware import find_gpu
from ..units import InputError


def read_prices(path: str) -> dict[str, float]:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read the prices file ({exc.__class__.__name__})") from None
    entries: list[tuple[str, object]]
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
        entries = [(str(k), v) for k, v in data.items()]
    else:
        entries = []
        for n, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#") or line.lower().startswith("gpu,"):
                continue
            gpu, sep, cost = line.partition(",")
            if not sep:
                raise InputError(f"{path}:{n}: expected 'gpu,price', got {line!r}")
            entries.append((gpu.strip(), cost.strip()))
    out: dict[str, float] = {}
    for name, value in entries:
        try:
            price = float(str(value)) if not isinstance(value, bool) else float("nan")
        except (TypeError, ValueError):
            raise InputError(f"{path}: price of {name!r} is not a number: {value!r}") from None
        if not 0 <= price < 1000:  # also NaN
            raise InputError(f"{path}: price of {name!r} must be between 0 and 1000 $/hour, got {price}")
        try:
            gpu = find_gpu(str(name)).name
        except InputError as exc:
            raise InputError(f"{path}: {exc}") from None
        if gpu in out:
            raise InputError(f"{path}: {name!r} names {gpu}, which the file already prices")
        out[gpu] = price
    return out
