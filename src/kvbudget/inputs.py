"""Reading what the user gives, with bounds: files (regular files only, size-capped), JSON and
YAML (depth, digits, NaN, aliases), and numbers (finite, whole, in range). Every failure is one
``InputError`` line that names the input and the fix; nothing here echoes more than a short
excerpt of what it read."""

from __future__ import annotations

import math
import numbers
import os
import re
import stat
from collections.abc import Callable
from contextvars import ContextVar

from .units import InputError
from .units import excerpt as excerpt  # re-exported: the readers quote input with it

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any, BinaryIO

MiB_ = 1 << 20
# Caps on what kvbudget reads: a config.json is a few KB, a safetensors index a few MB, a start-up
# log rarely more than a few MB (the cap keeps memory bounded, not a guess at real sizes).
MAX_CONFIG_BYTES = 16 * MiB_
MAX_LOG_BYTES = 64 * MiB_
MAX_OPTIONS_BYTES = 4 * MiB_
MAX_JSON_DEPTH = 64
MAX_YAML_ALIASES = 100


# What a sealed caller (``kvbudget serve``: the inputs come from a web page) may not reach: each holds the reason
# given to the user, or None where it is allowed. Context variables, so that a seal holds for one request's
# thread and nothing else in the process.
_NO_FILES: ContextVar[str | None] = ContextVar("kvbudget_no_files", default=None)
_NO_HUB: ContextVar[str | None] = ContextVar("kvbudget_no_hub", default=None)


def sealed(files: str, hub: str | None) -> Any:
    """A context in which no file is read (``check_file``, and so every reader, refuses a path with the reason
    ``files``) and, when ``hub`` is a reason, no Hugging Face Hub lookup is made. For answers to inputs that come
    from elsewhere than the user's own shell: a path typed into a web page names a file on the server."""
    from contextlib import contextmanager

    @contextmanager
    def seal() -> Iterator[None]:
        tokens = _NO_FILES.set(files), _NO_HUB.set(hub)
        try:
            yield
        finally:
            _NO_HUB.reset(tokens[1])
            _NO_FILES.reset(tokens[0])

    return seal()


def files_refused() -> str | None:
    """Why no file may be read here (inside ``sealed``), or None."""
    return _NO_FILES.get()


def hub_refused() -> str | None:
    """Why the Hugging Face Hub may not be asked here (inside ``sealed``), or None."""
    return _NO_HUB.get()


def _why(exc: Exception) -> str:
    """An OS error in words ("Too many levels of symbolic links", "Permission denied"), else its class."""
    return getattr(exc, "strerror", None) or exc.__class__.__name__


def check_file(path: str, what: str, max_bytes: int) -> int:
    """The size of ``path`` if it is a regular file no larger than ``max_bytes``; otherwise InputError."""
    refused = _NO_FILES.get()
    if refused is not None:
        raise InputError(f"{what} {excerpt_path(path)}: {refused}")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{what} {excerpt_path(path)}: no such file") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{what} {excerpt_path(path)}: cannot read it ({_why(exc)})") from None
    return _regular(st, path, what, max_bytes)


def _regular(st: os.stat_result, path: str, what: str, max_bytes: int) -> int:
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{what} {excerpt_path(path)}: is a folder, give a file")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{what} {excerpt_path(path)}: not a regular file (a device, pipe or socket cannot be read)")
    if st.st_size > max_bytes:
        raise InputError(f"{what} {excerpt_path(path)}: {st.st_size:,} bytes, more than the {max_bytes:,} kvbudget reads"
                         " (is it the right file?)")
    return st.st_size


def open_regular(path: str, what: str, max_bytes: int) -> tuple[BinaryIO, int]:
    """``path`` opened for reading, and its size, when what was opened is a regular file of at most ``max_bytes``.

    ``check_file`` first (its messages), then the open itself is non-blocking and the opened descriptor is checked
    again: a path swapped for a FIFO or a device between the two would otherwise block the open (a FIFO with no
    writer) or the read for ever."""
    check_file(path, what, max_bytes)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
                     | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        raise InputError(f"{what} {excerpt_path(path)}: no such file") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{what} {excerpt_path(path)}: cannot read it ({_why(exc)})") from None
    try:
        size = _regular(os.fstat(fd), path, what, max_bytes)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)  # a regular file: reads never wait on it
        f = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    return f, size


def read_bytes(path: str, what: str, max_bytes: int) -> bytes:
    """The whole of a regular file of at most ``max_bytes`` bytes."""
    f, size = open_regular(path, what, max_bytes)
    try:
        with f:
            # read(n) allocates n bytes before it reads: ask for the file's size (+1 to see it grew), not the cap
            data = f.read(size + 1)
            if len(data) > size:  # it grew since stat: the rest, up to the cap
                data += f.read(max_bytes + 1 - len(data))
    except OSError as exc:
        raise InputError(f"{what} {excerpt_path(path)}: cannot read it ({_why(exc)})") from None
    if len(data) > max_bytes:
        raise InputError(f"{what} {excerpt_path(path)}: more than the {max_bytes:,} bytes kvbudget reads")
    return data


def read_text(path: str, what: str, max_bytes: int, errors: str = "strict") -> str:
    """A UTF-8 text file (``errors="replace"`` for logs, where a stray byte is harmless)."""
    data = read_bytes(path, what, max_bytes)
    if errors == "replace":
        return _decode_log(data)
    try:
        return data.decode("utf-8", errors=errors).removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} {excerpt_path(path)}: not UTF-8 text (byte {exc.start}; is it the right file?)") from None


# What a compressed file starts with (each format's magic number), for the ones kvbudget names but does not open
_ARCHIVES = ((b"BZh", "bzip2", "bunzip2"), (b"\xfd7zXZ\x00", "xz", "unxz"), (b"\x28\xb5\x2f\xfd", "zstd", "unzstd"),
             (b"PK\x03\x04", "zip", "unzip"), (b"7z\xbc\xaf\x27\x1c", "7-Zip", "7z x"))


def read_log(path: str, max_bytes: int = MAX_LOG_BYTES) -> str:
    """A log file as text: UTF-8 (a stray byte replaced) or UTF-16 with its mark (``read_text``), or gzip-compressed
    (``docker logs | gzip``, a rotated ``run.log.1.gz``), read through ``zlib`` up to ``max_bytes`` of text; another
    archive format is named, with the command that opens it."""
    data = read_bytes(path, "log", max_bytes)
    if data[:2] == b"\x1f\x8b":
        data = _gunzip(data, path, max_bytes)
    for magic, kind, tool in _ARCHIVES:
        if data.startswith(magic):
            raise InputError(f"log {excerpt_path(path)}: a {kind} archive, not text: decompress it ({tool}) and give the log")
    return _decode_log(data)


def _gunzip(data: bytes, path: str, max_bytes: int) -> bytes:
    """The first member of a gzip stream, at most ``max_bytes`` (a bomb stops at the cap: zlib is asked for no more)."""
    import zlib

    d = zlib.decompressobj(wbits=31)
    try:
        out = d.decompress(data, max_bytes + 1)
    except zlib.error as exc:
        raise InputError(f"log {excerpt_path(path)}: gzip-compressed but damaged ({exc}): give the log as text") from None
    if len(out) > max_bytes:
        raise InputError(f"log {excerpt_path(path)}: gzip-compressed, and more than the {max_bytes:,} bytes kvbudget "
                         "reads of a log once decompressed: give the part from the start-up")
    if not d.eof:
        raise InputError(f"log {excerpt_path(path)}: gzip-compressed but cut short: give the whole file, or the log as text")
    return out


def _decode_log(data: bytes) -> str:
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        # a log saved by Windows PowerShell 5 (`> run.log`, Out-File) is UTF-16 with its byte-order mark: it was
        # refused as binary (its NUL bytes); the mark says how to read it
        return plain_spaces(data.decode("utf-16", errors="replace"))
    return plain_spaces(data.decode("utf-8", errors="replace").removeprefix("\ufeff"))


# Spaces a copy from a web page, a chat or a rich-text editor puts where the engine printed a blank (no-break, figure
# and narrow no-break spaces), and characters it adds that print as nothing (zero-width space, a byte-order mark
# inside the text): engines print ASCII blanks, which every phrase kvbudget looks for holds
_PLAIN_SPACES = {0xA0: " ", 0x2007: " ", 0x202F: " ", 0x200B: None, 0xFEFF: None}


def plain_spaces(text: str) -> str:
    """A log's text with the blanks an engine printed as ASCII blanks again (``_PLAIN_SPACES``); in C, linear."""
    return text.translate(_PLAIN_SPACES) if not text.isascii() else text


def write_text(path: str, text: str, what: str = "--out") -> None:
    """Write ``text`` to ``path`` (one error line naming the OS's reason when it cannot)."""
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except (OSError, ValueError) as exc:
        raise InputError(f"{what} {excerpt_path(path)}: cannot write it ({_why(exc)})") from None


# Everything but quotes, brackets and backslashes, deleted by str.translate (C speed on ASCII text).
_NOT_STRUCTURE = dict.fromkeys(i for i in range(128) if chr(i) not in '"[]{}\\')
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _depth_ok(text: str, limit: int) -> bool:
    """Bracket depth of JSON text at most ``limit`` (strings skipped), in one linear pass.

    Fast path (ASCII text, no escapes, no bracket inside a string, as in a safetensors header):
    keep only quotes and brackets, drop the ``""`` left of each string, and sum the steps in C."""
    if text.isascii():
        skeleton = text.translate(_NOT_STRUCTURE)
        if "\\" not in skeleton:
            skeleton = skeleton.replace('""', "")
            if '"' not in skeleton:  # every string held no bracket: what is left is the brackets
                from itertools import accumulate

                return max(accumulate(map(_DEPTH_STEP.__getitem__, skeleton)), default=0) <= limit
    depth = 0
    in_string = False
    escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return False
        elif ch in "]}":
            depth -= 1
    return True


def repeated_keys() -> tuple[list[str], Callable[[list[tuple[str, Any]]], dict[str, Any]]]:
    """An ``object_pairs_hook`` for Python's json that notes every key an object gives more than once (JSON readers
    keep the last one silently), and the list it fills."""
    twice: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()
        for key, _ in items:
            if key in seen:
                twice.append(key)
            seen.add(key)
        return dict(items)

    return twice, pairs


def load_json(text: str | bytes, where: str) -> Any:
    """Parse JSON strictly: no NaN/Infinity, no integers of thousands of digits, bounded nesting.

    orjson parses (about twice as fast as json on DeepSeek-V3's 12.7 MB of safetensors headers); it refuses
    NaN, Infinity, invalid UTF-8 and nesting past 1,024 levels itself, and reads an integer past 64 bits as a
    float, which every count's check refuses."""
    import orjson

    if text[:3] == b"\xef\xbb\xbf" or text[:1] == "\ufeff":  # UTF-8, but Python's json (transformers) refuses it too
        raise InputError(f"{where}: starts with a byte-order mark (BOM), which JSON readers refuse: save it as UTF-8 "
                         "without BOM")
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        if "UTF-8" in exc.msg:
            raise InputError(f"{where}: not UTF-8 text") from None
        line = (text.split("\n", exc.lineno)[exc.lineno - 1] if isinstance(text, str)
                else text.split(b"\n", exc.lineno)[exc.lineno - 1].decode("utf-8", "replace"))
        if line.lstrip().startswith(("//", "/*", "#")):
            raise InputError(f"{where}: not valid JSON (a comment at line {exc.lineno}: JSON has none, remove it)") from None
        if "depth" in exc.msg:
            raise InputError(f"{where}: JSON nested more than 1,024 levels deep") from None
        raise InputError(f"{where}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None


def load_yaml(text: str, where: str) -> Any:
    """``yaml.safe_load`` with at most MAX_YAML_ALIASES aliases (no alias bombs) and bounded nesting."""
    import yaml

    class _Loader(yaml.SafeLoader):
        aliases = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                self.aliases += 1
                if self.aliases > MAX_YAML_ALIASES:
                    raise yaml.YAMLError(f"more than {MAX_YAML_ALIASES} aliases")
            return super().compose_node(parent, index)

    if not _depth_ok(text, MAX_JSON_DEPTH):  # before the parser recurses (slowly) into it
        raise InputError(f"{where}: nested more than {MAX_JSON_DEPTH} levels deep")
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" at line {mark.line + 1}" if mark is not None else f" ({str(exc)[:80]})"
        raise InputError(f"{where}: not valid YAML{line}") from None
    except RecursionError:
        raise InputError(f"{where}: YAML nested too deeply") from None
    except ValueError:  # an integer past Python's digit limit, built by the YAML constructor
        raise InputError(f"{where}: holds an integer with thousands of digits") from None


def whole(value: object, name: str, lo: int | None = None, hi: int | None = None, where: str = "") -> int:
    """``value`` as a whole number in ``[lo, hi]`` (a float only when it is integral and finite;
    never a bool or a string); InputError naming ``name`` otherwise."""
    if type(value) is int and (lo is None or value >= lo) and (hi is None or value <= hi):
        return value  # the common case, without the checks below (numbers.Integral's is slow)
    label = f"{where}: {name}" if where else name
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, int)):
        value = int(value)  # numpy's integers (np.bool_ is no Integral)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{label} must be a whole number, not {excerpt(value)}")
    if isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            raise InputError(f"{label} must be a whole number, not {excerpt(value)}")
        value = int(value)
    if lo is not None and value < lo:
        raise InputError(f"{label} is {excerpt(value)}: it must be at least {lo:,}")
    if hi is not None and value > hi:
        raise InputError(f"{label} is {excerpt(value)}: it must be at most {hi:,}")
    return value


def real(value: object, name: str, lo: float | None = None, hi: float | None = None, where: str = "",
         lo_open: bool = False) -> float:
    """``value`` as a finite number in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``)."""
    label = f"{where}: {name}" if where else name
    if isinstance(value, (numbers.Integral, numbers.Real)) and not isinstance(value, (bool, int, float)):
        value = float(value)  # numpy's floats and integers, Fraction (Decimal is no Real: refused)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{label} must be a number, not {excerpt(value)}")
    try:
        out = float(value)
    except OverflowError:
        raise InputError(f"{label} is {excerpt(value)}: far out of range") from None
    if not math.isfinite(out):
        raise InputError(f"{label} must be a finite number, not {excerpt(value)}")
    if lo is not None and (out < lo or (lo_open and out == lo)):
        raise InputError(f"{label} is {out:g}: it must be {'above' if lo_open else 'at least'} {lo:g}")
    if hi is not None and out > hi:
        raise InputError(f"{label} is {out:g}: it must be at most {hi:g}")
    return out


MAX_NUMBER_CHARS = 40  # longer than any number a flag or option takes (2^64 has 20 digits, 1e-300 six characters)


def _number_text(text: str, name: str, where: str, kind: str) -> tuple[str, str]:
    """The stripped text of a number and the label for messages; InputError when empty or too long to be one."""
    label = f"{where}: {name}" if where else name
    t = text.strip()
    if not t:
        raise InputError(f"{label} is empty: give {kind}")
    if len(t) > MAX_NUMBER_CHARS:
        what = "digits" if t.lstrip("+-").isdecimal() else "characters"
        raise InputError(f"{label} {excerpt(t, 24)} is not a number kvbudget reads (more than {MAX_NUMBER_CHARS} {what})")
    if t[:1] in "$`":  # $TP, ${LEN:-8192}, $(nproc), `echo 4`: the shell fills it in when it runs the command
        raise InputError(f"{label} {excerpt(t)} is a shell expansion, which kvbudget does not evaluate: write the "
                         f"value it stands for ({kind})")
    return t, label


def parse_whole(text: str, name: str, lo: int | None = None, hi: int | None = None, where: str = "",
                forms: str = "") -> int:
    """A whole number written as text (a flag's value): optional sign and decimal digits, at most
    MAX_NUMBER_CHARS long, in ``[lo, hi]``; one InputError naming ``name`` and quoting an excerpt otherwise
    (``forms``: the other spellings the engine takes, said when the text is none of them)."""
    t, label = _number_text(text, name, where, "a whole number")
    digits = t[1:] if t[0] in "+-" else t
    if not (digits.isdecimal() and digits.isascii()):
        raise InputError(f"{label} {excerpt(t)} is not a whole number" + (f" ({forms})" if forms else ""))
    return whole(int(t), name, lo, hi, where)


def parse_real(text: str, name: str, lo: float | None = None, hi: float | None = None, lo_open: bool = False,
               where: str = "") -> float:
    """A number written as text (``0.9``, ``1e-3``), finite, in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``)."""
    t, label = _number_text(text, name, where, "a number")
    try:
        value = float(t)
    except ValueError:
        raise InputError(f"{label} {excerpt(t)} is not a number") from None
    if math.isinf(value) and "inf" not in t.lower():  # 1e400: a finite number, far past any float
        raise InputError(f"{label} is {excerpt(t)}: far out of range")
    return real(value, name, lo, hi, where, lo_open)


def gpu_layout(num_gpus: int | None, tp: int | None, pp: int | None) -> tuple[int, int]:
    """Tensor- and pipeline-parallel sizes from ``--num-gpus`` and ``--tp`` / ``--pp`` as given (None: not given):
    all the GPUs tensor parallel unless ``tp`` or ``pp`` say otherwise; a split that does not multiply out refused."""
    n = num_gpus
    if n is None:
        return tp or 1, pp or 1
    if tp is None and pp is None:
        return n, 1
    given = " x ".join(f"--{name} {v}" for name, v in (("tp", tp), ("pp", pp)) if v)
    if n % ((tp or 1) * (pp or 1)):
        raise InputError(f"--num-gpus {n} is not a multiple of {given}")
    tp = tp or n // (pp or 1)
    pp = pp or n // tp
    if tp * pp != n:
        raise InputError(f"--num-gpus {n} is not {given}")
    return tp, pp


def excerpt_path(path: str, limit: int = 60) -> str:
    """``repr`` of a path cut from the left to ``limit`` characters, so the file's name stays in the message."""
    text = repr(path)
    return text if len(text) <= limit else "'..." + text[len(text) - limit + 4:]


def load_options(path: str, flag: str) -> object:
    """An engine's option file (YAML or JSON) given by ``flag``: read with the size cap and regular-file
    check, nesting bounded before the YAML parser sees it, aliases capped."""
    return load_yaml(read_text(path, flag, MAX_OPTIONS_BYTES), f"{flag} {excerpt_path(path)}")


MAX_COMMAND_CHARS = 64 * 1024  # a launch command, option values and all, is a few KB; shlex is quadratic in a word


def check_command_size(size: int) -> None:
    if size > MAX_COMMAND_CHARS:
        raise InputError(f"the launch command is {size:,} characters, more than the {MAX_COMMAND_CHARS:,} kvbudget "
                         "reads: paste the command alone")


def _without_comments(text: str) -> str:
    """``text`` less its shell comments: a ``#`` that starts a word, outside quotes, to the end of its line (a ``#``
    inside a word, as in ``a#b``, is the word's, as the shell reads it; shlex's ``comments=True`` cut there)."""
    out: list[str] = []
    quote = ""
    i, n, word_start = 0, len(text), True
    while i < n:
        ch = text[i]
        if quote:
            if ch == quote:
                quote = ""
            elif ch == "\\" and quote == '"' and i + 1 < n:
                out.append(ch)
                i += 1
                ch = text[i]
        elif ch == "\\" and i + 1 < n:
            out.append(ch)
            i += 1
            ch = text[i]
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and word_start:
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        out.append(ch)
        word_start = ch.isspace()
        i += 1
    return "".join(out)


def split_command(text: str) -> list[str]:
    """A pasted launch command as a POSIX shell splits it: comments dropped (``... --max-model-len 8192 # -tp 4``
    planned TP 4), Windows line ends read as line ends, at most MAX_COMMAND_CHARS long; one line of error for an
    unbalanced quote."""
    import shlex

    check_command_size(len(text))
    text = _windows_continued(text.replace("\r\n", "\n"))
    if "#" in text:
        text = _without_comments(text)
    if "(" in text or "`" in text:
        text = _substitutions_whole(text)
    words: list[str] = []
    try:
        for part, operator in _shell_list(text):
            words += without_redirections(shlex.split(part))
            if operator:
                words.append(operator)
    except ValueError as exc:
        raise InputError(f"the launch command cannot be split into words ({exc}): close its quotes") from None
    while words and words[-1] in SHELL_OPERATORS:  # a line end or '&' after the command ends nothing
        words.pop()
    return [w.translate(_UNHIDE) for w in words] if any(c in text for c in _HIDDEN) else words


# A line continued as cmd.exe (`` ^``) or PowerShell (`` ` ``) continue it: docker run commands pasted from Windows
# docs. Taken as such only where every caret or backquote of the text ends a line (bash reads neither so).
_CONTINUED = {mark: re.compile(r"[ \t]" + re.escape(mark) + r"[ \t]*\n") for mark in "^`"}


def _windows_continued(text: str) -> str:
    for mark, pattern in _CONTINUED.items():
        if mark in text and len(pattern.findall(text)) == text.count(mark):
            text = pattern.sub(" ", text)
    return text


# Quotes a word processor or chat window puts in place of the shell's ' and " (the shell reads them as letters)
_TYPOGRAPHIC = frozenset("\u201c\u201d\u2018\u2019\u201e\u00ab\u00bb")


def typographic_quotes(words: list[str]) -> None:
    """Refuse a word quoted with typographic quotes (``“meta-llama/...”``): the shell passes them on as letters, and
    kvbudget said only 'unknown model'. One inside a word (``Meta’s``) is the word's own."""
    for word in words:
        mark = word[0] if word[:1] in _TYPOGRAPHIC else word[-1] if word[-1:] in _TYPOGRAPHIC else ""
        if mark:
            raise InputError(f"{excerpt(word, 40)} is quoted with {mark!r} (U+{ord(mark):04X}), a typographic quote: "
                             "the shell passes it on as a letter; type ' or \" (a text editor changed the quotes)")


# What a substitution's text holds that would split it: white space, the shell's operators and quotes, each hidden
# as a private-use character until the command is split, then put back (``_substitutions_whole``).
_HIDE = str.maketrans({c: chr(0xE000 + i) for i, c in enumerate(" \t\n;&|<>'\"#")})
_UNHIDE = {ord(hidden): chr(code) for code, hidden in _HIDE.items()}
_HIDDEN = frozenset(_HIDE.values())


def _substitutions_whole(text: str) -> str:
    """``text`` with each command substitution (``$(nproc)``, a backquoted command), arithmetic (``$((8192*2))``)
    and process substitution (``>(tee log)``) outside single quotes kept in one word, as the shell keeps it until it
    runs them (split by shlex, ``$(echo 16384)`` became the stray words '$(echo' and '16384)'). Their values are
    the shell's to compute: a flag kvbudget reads refuses such a word (it is no number) where the value matters."""
    out: list[str] = []
    quote = ""
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if quote:
            if ch == quote:
                quote = ""
            elif ch == "\\" and quote == '"':
                out.append(text[i:i + 2])
                i += 2
                continue
        elif ch == "\\":
            out.append(text[i:i + 2])
            i += 2
            continue
        elif ch in "'\"":
            quote = ch
        if quote != "'" and (text.startswith(("$(", "<(", ">("), i) or ch == "`"):
            end = _closing(text, i)
            if end == i:  # the shell would wait for the rest of it
                opened = "`" if ch == "`" else text[i:i + 2]
                raise InputError(f"the launch command opens {opened} without closing it: close it, or write the value "
                                 "it stands for")
            out.append(text[i:end].translate(_HIDE))
            i = end
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _closing(text: str, i: int) -> int:
    """Where the substitution that starts at ``i`` ends (just past its ')' or closing backquote); ``i`` where it
    does not close (the shell would wait for more: shlex then says so)."""
    if text[i] == "`":
        end = text.find("`", i + 1)
        return end + 1 if end > i else i
    depth = 0
    for j in range(i + 1, len(text)):
        if text[j] == "(":
            depth += 1
        elif text[j] == ")":
            depth -= 1
            if depth == 0:
                return j + 1
    return i


_REDIRECTION = re.compile(r"[0-9]*(?:>>?|<|>&|&>>?)(.*)")  # > f, >> f, 2> f, 2>&1, &> f, < f, >f


def without_redirections(words: list[str]) -> list[str]:
    """The words without the shell's redirections (``> serve.log 2>&1``, ``2>/dev/null``, ``< /dev/null``): the
    shell takes them, the program never sees them."""
    out: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        m = _REDIRECTION.fullmatch(word)
        if m is None:
            out.append(word)
        elif not m.group(1):
            skip = True  # the redirection's target is the next word
    return out


# The words a shell runs one command after another by (a line end is ';'): ``split_command`` keeps each as a word.
SHELL_OPERATORS = frozenset((";", "&&", "||", "|", "&", "|&", ";;"))
_NEXT_LINE_FLAG = re.compile(r"[ \t]*-")


def _shell_list(text: str) -> list[tuple[str, str]]:
    """``text`` cut at the shell's list operators outside quotes (``;``, ``&&``, ``||``, ``|``, ``&``, a line end) as
    (the text before, the operator), so that two commands pasted together are not read as one. A line end after a
    backslash, or before a line that starts with '-' (a command copied from a page that dropped its backslashes),
    continues the command; ``&`` in a redirection (``2>&1``, ``&>``) is not an operator."""
    out: list[tuple[str, str]] = []
    quote = ""
    start, i, n = 0, 0, len(text)
    while i < n:
        ch = text[i]
        if quote:
            if ch == quote:
                quote = ""
            elif ch == "\\" and quote == '"':
                i += 1
        elif ch == "\\":
            i += 1
        elif ch in "'\"":
            quote = ch
        elif ch == "\n" and not _NEXT_LINE_FLAG.match(text, i + 1):
            out.append((text[start:i], ";"))
            start = i + 1
        elif ch in ";|&" and not (ch == "&" and ((text[i - 1:i] in "<>" and i > 0) or text[i + 1:i + 2] == ">")):
            op = text[i:i + 2] if text[i:i + 2] in ("&&", "||", "|&", ";;") else ch
            out.append((text[start:i], op))
            start = i = i + len(op)
            continue
        i += 1
    out.append((text[start:], ""))
    return out
