"""Which vLLM releases could have printed a log, from the source lines its records name.

vLLM tags each record with the file and line of the logger call (``INFO 10-06 15:57:53 [gpu_worker.py:298] ...``;
before 0.8 ``INFO 01-30 03:18:12 gpu_model_runner.py:848] ...``; at debug level a shortened path,
``[v1/worker/gpu_worker.py:298]``; vllm/logger.py and logging_utils/formatter.py). The table (lines.json, written by
tools/gen_vllm_lines.py from each release's PyPI wheel, 0.6.0 to 0.33.0) holds the lines every file's logger calls
start on in each release. A (file, line) pair a log shows rules out the releases in which no file of that name has a
logger call on that line; it says nothing where the table does not know the file name (a plugin, another package)
or where the release has a file of that name the table leaves out (a model file, ``open`` in the table). A log's
releases are those no pair rules out, once two pairs at least have ruled some out: one pair alone can match a
release by chance. Pairs that rule out every release mean a release newer than the table, a development build or a
patched one: no release fits them all then, and the nearest are those that fit two thirds of them at least (a
build between two releases keeps most of its neighbours' lines: a 0.8.5 development build fits 0.8.5 on 7 of its 8
pairs, the NVIDIA container's 0.13.0 build fits 0.13.0 on 25 of 26, a 0.15.0 development build 0.15.0 on 17 of 23;
a ROCm 0.14.0rc1 build fits no release on more than 12 of its 25, and is named none)."""

from __future__ import annotations

import json
import re
from collections import Counter
from functools import lru_cache
from pathlib import Path

from ..._record import record

TABLE = Path(__file__).with_name("lines.json")
MIN_PAIRS = 2  # pairs that must rule releases out before the rest are named
NEAREST_SHARE = 2 / 3  # the share of the ruling pairs the nearest releases must fit where none fits them all

_ANSI = re.compile(r"\x1b\[[0-9;]{0,20}m")  # a colored log's escapes (logging_utils/formatter.py ColoredFormatter)
# the level and time vLLM's format puts before the tag (%(levelname)s %(asctime)s, date format %m-%d %H:%M:%S): other
# programs' "file.py:N]" (PyTorch's glog-style "W1006 15:57:53.123 1 torch/_dynamo/utils.py:1250]") are not vLLM's
_TAG = re.compile(r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) [0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]{1,6})? "
                  r"\[?((?:[\w.\-]{1,100}/){0,12}[\w.\-]{1,100}\.py):([0-9]{1,7})\]")


@record
class LineEvidence:
    """What a log's source lines say of its release."""

    releases: tuple[str, ...]  # the releases read that no pair rules out, oldest first (empty: none, or too few pairs)
    pairs: int  # distinct (file, line) pairs that ruled releases out
    # where no release fits every pair: the releases most of them fit (``NEAREST_SHARE`` of the pairs at least), and
    # how many pairs those fit (a development or patched build between releases keeps most lines of its neighbours)
    nearest: tuple[str, ...] = ()
    matched: int = 0

    @property
    def span(self) -> str:
        """The candidates as a reader says them: ``0.10.1-0.10.1.1`` where they follow each other in the releases
        read, else listed."""
        if len(self.releases) < 2:
            return "".join(self.releases)
        order = releases_read()
        if order.index(self.releases[-1]) - order.index(self.releases[0]) + 1 == len(self.releases):
            return f"{self.releases[0]}-{self.releases[-1]}"
        return ", ".join(self.releases)

    @property
    def one_minor(self) -> bool:
        """Whether the candidates are patch releases of one minor (0.10.1, 0.10.1.1): the rules kvbudget applies
        per release then agree on all of them but for patch-level fixes."""
        return len({r.split(".")[1] for r in self.releases}) == 1


@lru_cache(maxsize=1)
def _data() -> dict[str, object]:
    data: dict[str, object] = json.loads(TABLE.read_text())
    return data


def releases_read() -> tuple[str, ...]:
    """The releases the table was read from, oldest first."""
    releases = _data()["releases"]
    assert isinstance(releases, list)
    return tuple(releases)


def _mask(ranges: str) -> int:
    """'0-2,5' -> the bits 0, 1, 2 and 5."""
    bits = 0
    for part in ranges.split(","):
        first, _, last = part.partition("-")
        bits |= ((1 << (int(last or first) + 1)) - 1) ^ ((1 << int(first)) - 1)
    return bits


@lru_cache(maxsize=1024)
def _file(name: str) -> tuple[dict[int, int], int] | None:
    """A file name's lines (line -> the releases that log on it, as bits) and the releases it is open in; None for a
    name the table does not hold."""
    lines, left_out = _data()["lines"], _data()["open"]
    assert isinstance(lines, dict) and isinstance(left_out, dict)
    groups = lines.get(name)
    if groups is None:
        return None
    by_line: dict[int, int] = {}
    for ranges, numbers in groups.items():
        bits = _mask(ranges)
        for n in numbers:
            by_line[n] = by_line.get(n, 0) | bits
    return by_line, _mask(left_out[name]) if name in left_out else 0


def pairs(text: str) -> set[tuple[str, int]]:
    """The (file name, line) of every vLLM record tag in ``text``."""
    return {(path.rsplit("/", 1)[-1], int(line)) for path, line in _TAG.findall(_ANSI.sub("", text))}


def release_evidence(text: str) -> LineEvidence:
    """The releases (of those read) that could have printed every tagged record of ``text``; see the module."""
    order = releases_read()
    every = (1 << len(order)) - 1
    counted: Counter[int] = Counter()  # the releases a ruling pair allows (as bits) -> how many pairs allow just them
    by_name: dict[str, set[int]] = {}  # the pairs (``pairs``), read in one pass
    for path, line in _TAG.findall(_ANSI.sub("", text)):
        by_name.setdefault(path.rsplit("/", 1)[-1], set()).add(int(line))
    for name, lines in by_name.items():
        known = _file(name)
        if known is None:
            continue  # a file name the table does not hold: says nothing
        by_line, left_out = known
        counted.update(by_line.get(line, 0) | left_out for line in lines)
    counted.pop(every, None)  # a pair every release allows rules nothing out
    ruling = sum(counted.values())
    candidates = every
    for allowed in counted:
        candidates &= allowed
    if ruling < MIN_PAIRS:
        return LineEvidence((), ruling)
    if candidates:
        return LineEvidence(tuple(v for i, v in enumerate(order) if candidates >> i & 1), ruling)
    # the pairs each release fits, counted over the distinct masks (a million pairs share a few dozen): bounded time
    fits = [sum(n for m, n in counted.items() if m >> i & 1) for i in range(len(order))]
    best = max(fits)
    if best <= MIN_PAIRS or best < NEAREST_SHARE * ruling:
        return LineEvidence((), ruling)
    return LineEvidence((), ruling, tuple(v for i, v in enumerate(order) if fits[i] == best), best)
