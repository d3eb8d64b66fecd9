"""SGLang's launch flags per release (``flags.json``, written by ``tools/gen_sglang_flags.py`` from each release's
``sglang/srt/server_args.py``): which option strings a release's parser knows, the values each takes and its
choices, and the releases a version names (``window``): one release, the two read releases around one the table
skips, or a release line (``0.4``: 0.4.0 - 0.4.7.post1). SGLang's parser is argparse with its defaults, so a flag
of another release stops the server ("unrecognized arguments") and an abbreviation reads as the one flag it
begins (``resolve``), or stops it as ambiguous, by that release's flag set."""

from __future__ import annotations

import functools
import json
import os
import re

from ..._record import record

Nargs = int | str
# a run of releases alike: (first, last) indexes into ``releases()``, the values taken, dest ("": the flag's own),
# the literal choices (None: not known)
Run = tuple[int, int, Nargs, str, tuple[str, ...] | None]

_FILE = os.path.join(os.path.dirname(__file__), "flags.json")
_RELEASE = re.compile(r"v?(\d+)\.(\d+)\.(\d+)(?:\.?post(\d+))?")
# kvbudget's release lines (``--sglang-version``) -> the first and last releases they cover, by release_key
LINES = {"0.4": ((0, 4, 0, 0), (0, 4, 7, 99)), "0.4.8": ((0, 4, 8, 0), (0, 5, 2, 99)),
         "current": ((0, 5, 3, 0), None), "0.5": ((0, 5, 0, 0), None),
         # every release read: a logged run's words, which its own release took (its release is read after them)
         "any": ((0, 0, 0, 0), None)}


def release_key(version: str) -> tuple[int, int, int, int] | None:
    """``0.4.6.post5`` -> (0, 4, 6, 5), a release before its posts; None for text that names no release."""
    m = _RELEASE.fullmatch(version.strip())
    return None if m is None else (int(m[1]), int(m[2]), int(m[3]), int(m[4] or 0))


@functools.cache
def _table() -> tuple[tuple[str, ...], dict[str, tuple[Run, ...]]]:
    with open(_FILE, encoding="utf-8") as f:
        data = json.load(f)
    releases = tuple(data["releases"])
    at = {v: i for i, v in enumerate(releases)}
    flags = {flag: tuple((at[r[0]], at[r[1]], r[2], r[3] if len(r) > 3 else "",
                          tuple(r[4]) if len(r) > 4 and r[4] is not None else None) for r in runs)
             for flag, runs in data["flags"].items()}
    return releases, flags


def releases() -> tuple[str, ...]:
    """The releases the table was read from, oldest first."""
    return _table()[0]


def spec(flag: str, i: int) -> Run | None:
    """``flag`` as release ``i``'s parser has it, or None where it has no such option string."""
    return next((r for r in _table()[1].get(flag, ()) if r[0] <= i <= r[1]), None)


@functools.cache
def flags_at(i: int) -> dict[str, Nargs]:
    """Every option string of release ``i`` -> the values it takes."""
    return {flag: r[2] for flag, runs in _table()[1].items() for r in runs if r[0] <= i <= r[1]}


def history(flag: str) -> tuple[Run, ...]:
    """Every run of releases that has ``flag`` (none: no release read has it)."""
    return _table()[1].get(flag, ())


@record
class Window:
    """The releases a command is checked against: indexes ``lo`` to ``hi`` into ``releases()`` (one release:
    lo == hi), as the text names them (``label``), with a note where the table does not hold the release."""
    lo: int
    hi: int
    label: str
    note: str = ""


def window(version: str | None) -> Window:
    """The releases ``version`` names: None the newest read; a line of ``LINES``; a release read; one between two
    read releases, both of them; one before or after the table, its first or last release (with a note)."""
    rel = releases()
    keys = [release_key(v) for v in rel]
    newest = len(rel) - 1
    if version is None:
        return Window(newest, newest, rel[newest])
    v = version.strip()
    if v in LINES:
        first, last = LINES[v]
        inside = [i for i, k in enumerate(keys) if k is not None and k >= first and (last is None or k <= last)]
        span = f"{rel[inside[0]]} - {rel[inside[-1]]}"
        return Window(inside[0], inside[-1], span if v == "any" else f"{v} ({span})")
    key = release_key(v)
    table = f"kvbudget's SGLang flag table ({rel[0]} - {rel[newest]})"
    if key is None:
        return Window(newest, newest, rel[newest], f"SGLang {v[:40]} names no release {table} reads: flags "
                                                   f"checked against {rel[newest]}'s")
    shown = v.lstrip("v")
    if key > keys[newest]:  # type: ignore[operator]
        return Window(newest, newest, rel[newest], f"SGLang {shown} is newer than {table}: flags checked against "
                                                   f"{rel[newest]}'s")
    if key < keys[0]:  # type: ignore[operator]
        return Window(0, 0, rel[0], f"SGLang {shown} is older than {table}: flags checked against {rel[0]}'s")
    if key in keys:
        i = keys.index(key)
        return Window(i, i, rel[i])
    hi = next(i for i, k in enumerate(keys) if k is not None and k > key)
    return Window(hi - 1, hi, shown)


def whence(flag: str) -> str:
    """When ``flag`` came with SGLang (and went), from the releases read: ``came with SGLang 0.5.9 (not in
    0.5.8.post1)``, ``SGLang 0.3.1.post3 - 0.4.5 (removed in 0.4.5.post3)``; "" where no release read has it."""
    runs: list[tuple[int, int]] = []
    for r in history(flag):  # runs that differ only in dest or choices are one span of releases
        if runs and runs[-1][1] == r[0] - 1:
            runs[-1] = (runs[-1][0], r[1])
        else:
            runs.append((r[0], r[1]))
    if not runs:
        return ""
    rel = releases()
    if len(runs) == 1 and runs[0][1] == len(rel) - 1:
        first = runs[0][0]
        return f"came with SGLang {rel[first]}" + (f" (not in {rel[first - 1]})" if first > 0 else "")
    spans = ", ".join(rel[a] if a == b else f"{rel[a]} - {rel[b]}" for a, b in runs)
    gone = runs[-1][1] + 1
    return f"is a flag of SGLang {spans}" + (f" (not in {rel[gone]} on)" if gone < len(rel) else "")


def resolve(token: str, i: int) -> tuple[str, ...]:
    """What release ``i``'s argparse reads ``token`` (a ``--flag``, its ``=value`` cut off) as: the flag itself,
    the one flag it begins (allow_abbrev), several (ambiguous: argparse's error) or none (unrecognized)."""
    flags = flags_at(i)
    if token in flags:
        return (token,)
    return tuple(f for f in flags if f.startswith(token)) if len(token) > 2 else ()
