"""Counts in words: "1 request", "2 requests" (no third-party dependency, fast to import)."""

from __future__ import annotations


def plural(n: int, word: str, sign: bool = False) -> str:
    """``n`` with thousands separators (a sign when ``sign``) and ``word``, plural unless ``n`` is 1 or -1."""
    return (f"{n:+,}" if sign else f"{n:,}") + " " + word + ("" if abs(n) == 1 else "s")
