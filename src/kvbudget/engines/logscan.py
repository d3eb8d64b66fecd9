"""Finding figures in a start-up log in time linear in its size.

A log is searched by a literal first (``str.find``/``rfind``, which skip text in C), and a regular
expression runs only on a bounded window of the line that holds it: ``BACK`` characters before the
literal (for a number printed ahead of it) and ``AHEAD`` after. Each line is looked at once per
figure, so no input (a megabyte of digits on one line, a million blank lines, a prefix repeated
without end) makes the work grow faster than the text. Every pattern is matched within one line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache
from itertools import pairwise, repeat
from typing import cast

from ..inputs import excerpt, real, whole
from ..units import InputError

BACK = 64  # characters before the literal a pattern may start at
AHEAD = 512  # characters after it a pattern may reach

# A number as logs print them (``1,234``, ``0.93``, ``1e30``), or the NaN and infinity a broken run
# prints in its place (read, then refused by name): whole, never the tail or head of a longer run of
# digits (the lookbehind rejects a start inside one at once, so a megabyte of digits costs one pass).
_NOT_A_NUMBER = r"(?i:nan|inf(?:inity)?)"
NUM = r"(?<![0-9.,])(-?(?:[0-9][0-9,]*(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|" + _NOT_A_NUMBER + r"))(?![0-9]|\.[0-9])"
# The same where a locale may print a decimal comma (llama.cpp: ``1,50 MiB``): one separator, ``.`` or ``,``,
# and no thousands separators (read with ``figure(..., decimal_comma=True)``).
NUM_DECIMAL_COMMA = (r"(?<![0-9.,])(-?(?:[0-9]+(?:[.,][0-9]+)?(?:[eE][+-]?[0-9]+)?|" + _NOT_A_NUMBER
                     + r"))(?![0-9]|[.,][0-9])")


MAX_DIGITS = 300
_LONG = re.compile(r"(?<![0-9])[0-9]{" + str(MAX_DIGITS + 1) + "}")


# A record a terminal or a paste wrapped: a line break followed by what can only continue the line before (not a
# "..." line, which marks lines a paste left out)
_WRAPPED = re.compile(r"\n(?=[a-z0-9.,;:%)\]x ])(?!\.\.\.)")


# What a collector puts before each line of a container's output, on at least half of a log's lines: a time stamp
# (``docker logs -t`` and ``kubectl logs --timestamps``' RFC 3339, ``ts``' or a shipper's "2025-10-14 19:22:01,123 "
# with its " | " or " - "), a Compose service (``vllm-1  | ``), a kubectl ``--prefix`` (``[pod/name/container] ``), a
# journald/syslog head (``Dec 01 10:00:00[.123456] host unit[123]: ``; ``journalctl -o short-iso``'s host and unit
# after its RFC 3339 stamp)
_LINE_PREFIXES = (
    re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]{1,9})?(?:Z|[+-][0-9]{2}:?[0-9]{2})?"
               r"(?: [|-])? ", re.M),
    re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62} {0,32}\| ", re.M),
    re.compile(r"^\[pod/[^\]\n]{1,250}\] ", re.M),
    re.compile(r"^[A-Z][a-z]{2} [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})? [^ \n]{1,64} [^ \n:]{1,64}: ", re.M),
    re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63} [A-Za-z0-9_.@-]{1,64}\[[0-9]{1,10}\]: ", re.M),
    # a paste's own mark: a Markdown quote ("> " on each line of an issue's raw text)
    re.compile(r"^> ?", re.M),
)
# What each of _LINE_PREFIXES holds on its line, (text, how many times): where a mark is found fewer times than on
# half the lines, that prefix's pass is skipped (a log of millions of lines is passed at once)
_PREFIX_MARKS: tuple[tuple[tuple[str, int], ...], ...] = (
    (("-", 2), (":", 2)), (("| ", 1),), (("[pod/", 1),), ((":", 3),), (("]: ", 1),), ((">", 1),))
# A Markdown code block's indent (four blanks or a tab), taken off where it heads every non-empty line (a traceback's
# own indented lines are never all of a log's)
_INDENT = re.compile(r"^(?:    |\t)", re.M)
_UNINDENTED = re.compile(r"^ {0,3}[^ \t\n]", re.M)  # a line whose text starts before the indent's end
# The container runtime's own log file (CRI: /var/log/pods/.../N.log, what a node's log shipper reads): an RFC 3339
# stamp, the stream and a tag, F for a full line or P for a piece of a long one that the next line continues
# (kubernetes/cri-api, the CRI logging format; containerd's and CRI-O's writers split lines at 16 KiB)
_CRI = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?(?:Z|[+-][0-9]{2}:[0-9]{2}) "
                  r"(?:stdout|stderr) ([FP]) ", re.M)


def _cri_lines(text: str, lines: int) -> str:
    """The log as the container printed it, where at least half of its lines are in the CRI format: each line's head
    taken off, and a partial ('P') line joined to the next."""
    if 2 * (text.count(" stdout ") + text.count(" stderr ")) < lines:  # in C: most logs are passed at once
        return text
    heads = list(_CRI.finditer(text))
    if 2 * len(heads) < lines:
        return text
    out, at, tag = [], 0, "F"
    for m in heads:
        piece = text[at:m.start()]
        out.append(piece[:-1] if tag == "P" and piece.endswith("\n") else piece)  # a piece: the next line continues it
        at, tag = m.end(), m.group(1)
    out.append(text[at:])
    return "".join(out)


# The keys a line-per-record JSON log keeps a container's line under: Docker's json-file driver ({"log": "...\n",
# "stream": "stderr", "time": ...}, what `docker inspect`'s LogPath holds and node shippers read), and the "message",
# "msg" or "textPayload" of a shipper's export (Fluent Bit, Vector, Cloud Logging)
_JSON_TEXT_KEYS = ("log", "message", "msg", "textPayload")
_JSON_LINE_MAX = 1 << 20  # longer lines are not decoded (a record no engine prints)


def json_records(text: str) -> str:
    """The log as the container printed it, where at least half of its lines are JSON records holding it as text
    (``_JSON_TEXT_KEYS``): each such record's text, a record without a final line break (Docker splits lines at 16
    KiB) joined to the next; other lines as they are. Bounded: a log whose lines cannot be half such records (a key
    named too few times) is passed at once, and the records are decoded a chunk at a time, in C."""
    lines = max(text.count("\n") + 1 - text.count("\n\n"), 1)
    if 2 * sum(text.count(f'"{key}"') for key in _JSON_TEXT_KEYS) < lines:  # in C: most logs are passed at once
        return text
    split = text.split("\n")
    out: list[str] = []
    decoded = 0
    # a CR or NUL in a record's text is escaped in its JSON ("\\r", "\\u000d", "\\u0000"): none here, none to take off
    clean = "\\r" not in text and "\\u000" not in text
    for start in range(0, len(split), _RECORDS_AT_ONCE):
        chunk = split[start:start + _RECORDS_AT_ONCE]
        texts = _docker_chunk(chunk)
        if texts is not None:  # Docker's json-file lines, every one: decoded and taken in C
            decoded += len(texts)
            out.extend(texts if clean else [t.replace("\r", "").replace("\x00", "") for t in texts])
            continue
        for line, record in zip(chunk, _records(chunk), strict=True):
            said, docker = None, False
            if isinstance(record, dict):
                said = next((v for k in _JSON_TEXT_KEYS if isinstance(v := record.get(k), str)), None)
                docker = said is not None and said is record.get("log")
            if said is None:
                out.append(line + "\n")
            else:  # Docker's "log" keeps the line's own break (none: a piece the next record continues); the others none
                decoded += 1
                said = said.replace("\r", "").replace("\x00", "")  # what open_log takes off the text it was given
                out.append(said if docker else said + "\n")
    if 2 * decoded < lines:
        return text
    return "".join(out).rstrip("\n") + "\n"


_RECORDS_AT_ONCE = 4096  # lines decoded in one json.loads call


def _docker_chunk(lines: list[str]) -> list[str] | None:
    """The texts of ``lines`` where every one is a record of Docker's json-file driver (an object whose "log" is a
    string, as Docker writes it: no blank around it), decoded as one JSON array; None otherwise."""
    if not lines or max(map(len, lines)) > _JSON_LINE_MAX:
        return None
    values = _array(lines)
    if values is None:
        return None
    try:
        # in C; a value that is no object raises
        texts: list[object] = list(map(dict.get, cast("list[dict[str, object]]", values), repeat("log")))
    except TypeError:
        return None
    return cast("list[str]", texts) if set(map(type, texts)) == {str} else None


def _records(lines: list[str]) -> Iterator[object]:
    """Each line, stripped, as JSON decodes it where it is an object of at most ``_JSON_LINE_MAX`` characters, else
    None (the lines of one chunk of ``_RECORDS_AT_ONCE``), the objects among them decoded as one JSON array (one
    call, in C), or line by line where they are not one."""
    bodies = [line.strip() for line in lines]
    at = [i for i, body in enumerate(bodies) if body[:1] == "{" and body[-1:] == "}" and len(body) <= _JSON_LINE_MAX]
    out: list[object] = [None] * len(bodies)
    values = _array([bodies[i] for i in at])
    if values is None:  # a line that is not one JSON value: each alone
        values = [_record(bodies[i]) for i in at]
    for i, value in zip(at, values, strict=True):
        out[i] = value
    yield from out


def _array(bodies: list[str]) -> list[object] | None:
    """``bodies`` decoded as the items of one JSON array, in one call; None where they are not one value each."""
    values = _record("[" + ",".join(bodies) + "]")
    return values if isinstance(values, list) and len(values) == len(bodies) else None


def _record(body: str) -> object:
    import json

    try:
        return json.loads(body)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than the decoder goes
        return None


def strip_line_prefixes(text: str) -> str:
    """The log without what a log collector put before every line (``_LINE_PREFIXES``, the CRI format's head), each
    kind taken off where it heads at least half of the non-empty lines (at most five passes of each kind: linear in
    the text)."""
    lines = max(text.count("\n") + 1 - text.count("\n\n"), 1)
    text = _cri_lines(text, lines)
    for _ in range(len(_LINE_PREFIXES)):  # one collector's prefix ahead of another's: each pass takes the outer one
        taken = False
        for rx, marks in zip(_LINE_PREFIXES, _PREFIX_MARKS, strict=True):
            if any(2 * (text.count(mark) // n) < lines for mark, n in marks):  # in C: a mark on too few lines
                continue
            stripped, n = rx.subn("", text)
            if 2 * n >= lines:
                text, taken = stripped, True
        if not taken:
            break
    return text if _UNINDENTED.search(text) else _INDENT.sub("", text)  # a code block's indent on every line


# The head of a record, where a line of the wrap width is followed by one: vLLM's and SGLang's levels (after a worker's
# "(VllmWorker rank=0 pid=1)"), SGLang's "[2025-01-01 10:00:00]", TensorRT-LLM's "[TensorRT-LLM]", llama.cpp's
# "llama_context: ", TensorRT-LLM's "[10/09/2024-11:35:25]", a time stamp, a "# " note, llama.cpp's time stamp and
# level of common/log.cpp ("0.00.314.339 I "), a date and time ("2025-02-04 21:21:33", Docker's and SGLang's)
_RECORD_HEAD = re.compile(r"(?:\([^)\n]{1,120}\) ?)?(?:INFO|WARNING|WARN|DEBUG|ERROR|CRITICAL)\b|\[[0-9]{4}-[0-9]{2}-"
                          r"[0-9]{2}|\[[0-9]{2}/[0-9]{2}/[0-9]{4}-|\[(?:TensorRT-LLM|TRT-LLM)\]|(?:[a-z][a-z0-9]{0,30}_[a-z0-9_]{1,40}|main|build|system_info): |(?:srv|slot|que) "
                          r"[0-9]{4}-[0-9]{2}-[0-9]{2}T|# |[0-9]{1,4}\.[0-9]{2}\.[0-9]{3}\.[0-9]{3} [IWED] "
                          r"|[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}")
MIN_WRAP_WIDTH = 60  # narrower "terminals" are more likely a log of short lines
_LONG_LINE = re.compile(f"^[^\\n]{{{MIN_WRAP_WIDTH}}}", re.M)  # a line of at least the narrowest wrap width
TERMINAL_WIDTHS = frozenset({80, 100, 120, 132, 160, 200})  # a terminal's usual widths: one wrapped line is enough


def unwrap_terminal(text: str) -> str:
    """A log copied from a terminal that wrapped it at W columns (80, 120 ...): each record longer than W is cut
    into lines of exactly W characters and a shorter last piece. W is the longest line's length where at least two
    lines have it (one, for a usual terminal width, ``TERMINAL_WIDTHS``); a line of W characters is joined to the
    next unless that one is empty, heads a record (``_RECORD_HEAD``) or carries a collector's prefix
    (``_LINE_PREFIXES``). One pass over the lines (the pieces are joined once, so a record of a million lines
    costs its length)."""
    if not _LONG_LINE.search(text):  # in C: no line a wrap could have cut (a log of millions of short lines)
        return text
    lines = text.split("\n")
    joins = _terminal_joins(lines)
    if not any(joins):
        return text
    out: list[str] = []
    record: list[str] = [lines[0]]
    for join, line in zip(joins, lines[1:], strict=True):
        if join:
            record.append(line)
        else:
            out.append("".join(record))
            record = [line]
    out.append("".join(record))
    return "\n".join(out)


def _terminal_joins(lines: list[str]) -> list[bool]:
    """For each line but the last, whether a terminal's wrap cut it from the next (``unwrap_terminal``)."""
    lengths = list(map(len, lines))  # in C: a log of millions of short lines is passed at once
    width = max(lengths)
    if width < MIN_WRAP_WIDTH or lengths.count(width) < (1 if width in TERMINAL_WIDTHS else 2):
        return [False] * (len(lines) - 1)
    return [before == width and bool(line) and not _heads_record(line)
            for before, line in zip(lengths, lines[1:], strict=False)]


def _heads_record(line: str) -> bool:
    return bool(_RECORD_HEAD.match(line)) or any(rx.match(line) for rx in _LINE_PREFIXES)


def unwrap_words(text: str) -> str:
    """A log an editor, a mail program or ``fold -s`` wrapped at W columns between words: a line is joined to the
    next where the next one's first word would not have fitted in W after it (the test a filling editor applies)
    and the next line neither is empty, starts with a blank (a traceback's indented lines), heads a record
    (``_RECORD_HEAD``) nor carries a collector's prefix; W is the longest line (``fold -s`` breaks before a word
    that ends at W, its blank not fitting). The blank at the break was kept at the line's end (``fold -s``) or
    dropped (one is put back); a line of W characters without a blank is a piece of a word ``fold -s`` cut (joined
    as it is). Left alone unless lines read as wrapped between words: one ending in its blank and none of exactly W
    cut inside a word (a terminal's wrap, ``unwrap_terminal``'s), or two shorter than W, four times as many as
    those cut; an unwrapped log's longest line (vLLM's engine config, a thousand characters and more) leaves room
    after every shorter one. A few passes over the lines."""
    if not _LONG_LINE.search(text):  # in C
        return text
    lines = text.split("\n")
    width = max(map(len, lines))

    def wrapped(line: str, after: str) -> bool:
        if not after or after[0] in " \t" or not line.strip() or _heads_record(after):
            return False
        word = len(after.split(" ", 1)[0])
        if word >= width - 1 and not (line.endswith(" ") or (" " not in line and len(line) >= width)):
            return False  # a word no line could hold (llama.cpp's row of progress dots) starts a line of its own
        return len(line.rstrip(" ")) + 1 + word >= width

    joins = [wrapped(line, after) for line, after in pairwise(lines)]
    kept = short = inside = 0  # wrapped lines that end in the blank, that dropped it, that a terminal cut at W
    for join, line in zip(joins, lines, strict=False):
        if join and " " in line:
            kept += line.endswith(" ")
            short += not line.endswith(" ") and len(line) < width
            inside += not line.endswith(" ") and len(line) == width
    if not ((kept and not inside) or (short >= 2 and 4 * inside <= short)):
        return text
    out = [lines[0]]
    for before, line, join in zip(lines, lines[1:], joins, strict=False):
        if not join:
            out.append(line)
            continue
        piece = before.endswith(" ") or (len(before) >= width and " " not in before)
        out[-1] += ("" if piece else " ") + line
    return "\n".join(out)


def open_log(text: str, engine: str, join_wrapped: bool = False) -> LogText:
    """A start-up log made ready to search: refused if binary (a NUL byte), carriage returns dropped, a
    JSON-lines records decoded (``json_records``), a collector's line prefixes taken off (``strip_line_prefixes``), lines a terminal wrapped at its width joined
    (``unwrap_terminal``), wrapped records rejoined
    (``join_wrapped``), and no number longer than any engine prints."""
    if text[:1] == "\x1f" and text[1:2] in ("\x8b", "\ufffd", "\udc8b"):  # gzip's magic number, however decoded
        raise InputError("the log is gzip-compressed: decompress it (gunzip, or zcat LOG | kvbudget check -) or give the "
                         ".gz file's path")
    if "\x00" in text:
        raise InputError(f"the log is binary, not text: give the text log {engine} printed")
    # wrapped as shown (a collector's prefix on each record's first piece), then as printed (on every piece)
    # JSON records first: a terminal's wrapped pieces make records of one length, which unwrap_terminal would join
    text = unwrap_terminal(strip_line_prefixes(unwrap_terminal(unwrap_words(json_records(text.replace("\r", ""))))))
    log = LogText(_WRAPPED.sub("", text) if join_wrapped else text)
    log.check_numbers()
    return log


@lru_cache(maxsize=256)
def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


class LogText:
    """A log's text, searched line window by line window."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def _line(self, i: int) -> tuple[int, int]:
        start = self.text.rfind("\n", 0, i) + 1
        stop = self.text.find("\n", i)
        return start, len(self.text) if stop < 0 else stop

    def lines(self, literals: str | tuple[str, ...], reverse: bool = False) -> Iterator[tuple[int, int, int]]:
        """(start, stop, at) of each line holding one of ``literals`` (``at``: the first occurrence in
        it, or with ``reverse`` the last), in order or from the end. Each literal is searched for
        once over the whole text, whatever the number of lines."""
        text = self.text
        if isinstance(literals, str) and reverse:  # the common case, without the bookkeeping of several
            i = text.rfind(literals)
            while i >= 0:
                start = text.rfind("\n", 0, i) + 1
                stop = text.find("\n", i)
                yield start, len(text) if stop < 0 else stop, i
                i = text.rfind(literals, 0, start)
            return
        lits = (literals,) if isinstance(literals, str) else literals
        if reverse:
            found = {lit: text.rfind(lit) for lit in lits}
            while (i := max(found.values())) >= 0:
                start, stop = self._line(i)
                yield start, stop, i
                for lit, at in found.items():
                    if at >= start:
                        found[lit] = text.rfind(lit, 0, start)
        else:
            found = {lit: text.find(lit) for lit in lits}
            while hits := [at for at in found.values() if at >= 0]:
                i = min(hits)
                start, stop = self._line(i)
                yield start, stop, i
                for lit, at in found.items():
                    if 0 <= at <= stop:
                        found[lit] = text.find(lit, stop)

    def last(self, literals: str | tuple[str, ...], pattern: str) -> re.Match[str] | None:
        """The last match of ``pattern`` near the last of ``literals`` in the last line where it matches."""
        rx = _rx(pattern)
        text = self.text
        for start, stop, i in self.lines(literals, reverse=True):
            end = min(stop, i + AHEAD)
            m = rx.search(text, max(start, i - BACK), end)
            while m is not None:  # the last in the window (one, in a real log)
                later = rx.search(text, max(m.end(), m.start() + 1), end)
                if later is None:
                    return m
                m = later
        return None

    def first(self, literals: str | tuple[str, ...], pattern: str) -> re.Match[str] | None:
        """The first match of ``pattern`` near the first of ``literals`` in the first line where it matches."""
        return next(self.each(literals, pattern), None)

    def each(self, literals: str | tuple[str, ...], pattern: str) -> Iterator[re.Match[str]]:
        """The matches of ``pattern`` near the first of ``literals`` in each line, in order."""
        rx = _rx(pattern)
        for start, stop, i in self.lines(literals):
            yield from rx.finditer(self.text, max(start, i - BACK), min(stop, i + AHEAD))

    def line_match(self, literals: str | tuple[str, ...], pattern: str) -> re.Match[str] | None:
        """``pattern`` matched from the start of the first line holding one of ``literals`` where it matches."""
        rx = _rx(pattern)
        for start, stop, _ in self.lines(literals):
            m = rx.match(self.text, start, min(stop, start + AHEAD))
            if m is not None:
                return m
        return None

    def check_numbers(self) -> None:
        """Refuse a number of more than ``MAX_DIGITS`` digits anywhere: no engine prints one, and a
        figure that long would run past the window it is read in (one pass: a run is entered once)."""
        m = _LONG.search(self.text)
        if m is not None:
            line = self.text.count("\n", 0, m.start()) + 1
            raise InputError(f"the log: line {line:,} holds a number of more than {MAX_DIGITS} digits,"
                             " which no engine prints (is it the right file?)")

    def has(self, literal: str) -> bool:
        return literal in self.text


def figure(value: str, name: str, lo: float | None = None, hi: float = 1e6, decimal_comma: bool = False,
           lo_open: bool = False) -> float:
    """A logged number (``1,234`` or, with ``decimal_comma``, ``1,5``), finite and in ``[lo, hi]``
    (``(lo, hi]`` with ``lo_open``); InputError naming the figure otherwise."""
    return real(_number(value, name, decimal_comma), name, lo, hi, where="the log", lo_open=lo_open)


def count(value: str, name: str, lo: int = 0, hi: int = 10**13) -> int:
    """A logged whole number in ``[lo, hi]`` (digits read exactly, so a refusal quotes their count)."""
    digits = value.replace(",", "")
    exact = int(digits) if digits.lstrip("-").isdecimal() and digits.isascii() and _GROUPED.fullmatch(value.rstrip(",")) else None
    return whole(_number(value, name, False) if exact is None else exact, name, lo, hi, where="the log")


# Thousands separators as engines print them ({:,}): groups of three digits after the first one to three
_GROUPED = re.compile(r"-?(?:[0-9]+|[0-9]{1,3}(?:,[0-9]{3})+)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


def _number(value: str, name: str, decimal_comma: bool) -> float:
    if not decimal_comma and "," in value and not _GROUPED.fullmatch(value.rstrip(",")):  # '1464, # CPU blocks'
        # '4,75 GiB', '14,9889 GiB': no engine prints that (Python's formatting takes no locale); read with the
        # commas dropped it was a figure 100 or 10,000 times too large
        raise InputError(f"the log: {name} {excerpt(value)} has a comma that is no thousands separator (a decimal "
                         "comma, or digits grouped other than in threes? engines print 4.75 and 38,944): give the log as "
                         "the engine wrote it")
    try:
        return float(value.replace(",", "." if decimal_comma else ""))
    except ValueError:
        raise InputError(f"the log: {name} {excerpt(value)} is not a number") from None


# --- SGLang and TensorRT-LLM logs, checked against the engines' own arithmetic -------------------------------

Row = tuple[str, float, float, bool]  # (figure, reported, recomputed, matches)
MAX_GB = 1e6  # a figure in GB beyond this is not a GPU's


def check_other_log(text: str, model: str | None = None) -> list[Row]:
    """(figure, reported, recomputed, matches) for every figure the log lets us recompute: SGLang's
    (``engines/sglang/check.py``), then TensorRT-LLM's (``engines/trtllm/check.py``). Each figure is found
    by a literal and read in a bounded window of its line (linear time), and checked: a log with 0 blocks
    per token, a NaN or a negative pool is refused, naming it."""
    from .sglang.check import check_sglang_log
    from .trtllm.check import check_trtllm_log
    from .trtllm.check import unrecomputable as trtllm_unrecomputable

    log = open_log(text, "the engine")
    rows = check_sglang_log(log, model) + check_trtllm_log(log)
    total = log.last("max_total_num_tokens=", r"max_total_num_tokens=" + NUM)
    if not rows and total:
        raise InputError(f"this SGLang log prints max_total_num_tokens={count(total.group(1), 'SGLang tokens'):,} but no 'KV Cache is allocated' "
                         "line (K and V sizes), so the pool cannot be recomputed from the log; compare the figure with "
                         "kvbudget fit MODEL --gpu G --engine sglang")
    said = None if rows else trtllm_unrecomputable(log)
    if said:
        raise InputError(said)
    if not rows:
        raise InputError("no SGLang ('KV Cache is allocated') or TensorRT-LLM ('Allocated ... for max tokens in paged KV cache') "
                         "figures found in the log")
    return rows
