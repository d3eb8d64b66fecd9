"""Units and element types: bytes are ``int`` everywhere; conversion happens only in output."""

from __future__ import annotations

import math

from ._record import record

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
KB = 10**3
MB = 10**6
GB = 10**9

UNIT_SCALE = {"GiB": GiB, "GB": GB, "MiB": MiB, "MB": MB}


class InputError(ValueError):
    """Base class of every error that comes from what the user gave (exit code 2 in the CLI)."""


@record
class ElementType:
    """How many bytes a run of ``n`` elements takes.

    Packed and block formats are a block of ``block_elems`` elements stored in ``block_bytes``
    bytes (e.g. llama.cpp's q8_0 is 32 elements in 34 bytes: 32 int8 + one fp16 scale).
    Plain types are a block of one element.
    """

    name: str
    block_elems: int
    block_bytes: int

    def nbytes(self, n_elems: int) -> int:
        return -(-n_elems // self.block_elems) * self.block_bytes

    @property
    def bits(self) -> float:
        return 8 * self.block_bytes / self.block_elems


def _plain(name: str, nbytes: int) -> ElementType:
    return ElementType(name, 1, nbytes)


# Cache element types. GGUF block sizes follow ggml's type traits (ggml.c: type_traits,
# block_q8_0 = 32 int8 + fp16 d; block_q4_0 = 16 bytes + fp16 d; block_q4_1 = + fp16 m; ...).
# nvfp4: 16 fp4 values share one fp8 (e4m3) scale (NVIDIA NVFP4 format).
ELEMENT_TYPES: dict[str, ElementType] = {
    t.name: t
    for t in (
        _plain("fp32", 4),
        _plain("fp16", 2),
        _plain("bf16", 2),
        _plain("fp8_e4m3", 1),
        _plain("fp8_e5m2", 1),
        _plain("int8", 1),
        ElementType("q8_0", 32, 34),
        ElementType("q5_1", 32, 24),
        ElementType("q5_0", 32, 22),
        ElementType("q4_1", 32, 20),
        ElementType("q4_0", 32, 18),
        ElementType("iq4_nl", 32, 18),
        ElementType("nvfp4", 16, 9),
    )
}

_ALIASES = {
    "float32": "fp32", "float": "fp32", "f32": "fp32",
    "float16": "fp16", "half": "fp16", "f16": "fp16",
    "bfloat16": "bf16",
    "fp8": "fp8_e4m3", "float8_e4m3fn": "fp8_e4m3", "e4m3": "fp8_e4m3", "fp8_e4m3fn": "fp8_e4m3",
    "float8_e5m2": "fp8_e5m2", "e5m2": "fp8_e5m2",
    "i8": "int8",
}


def excerpt(value: object, limit: int = 60) -> str:
    """``repr`` of a value, cut to ``limit`` characters, for error messages."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**30:
        return f"an integer of {len(str(abs(value))) if value.bit_length() < 14000 else 'thousands of'} digits"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def element_type(name: str) -> ElementType:
    """Look up an element type by any of its usual spellings (``bfloat16``, ``fp8``, ``q8_0`` ...)."""
    key = name.strip().lower().replace("-", "_")
    key = _ALIASES.get(key, key)
    try:
        return ELEMENT_TYPES[key]
    except KeyError:
        known = ", ".join(sorted(ELEMENT_TYPES))
        raise InputError(f"unknown data type {name!r}: use one of {known}") from None


_SIZE_UNITS = {
    "b": 1, "kb": KB, "mb": MB, "gb": GB, "tb": 10**12,
    "kib": KiB, "mib": MiB, "gib": GiB, "tib": 1 << 40,
}


MAX_SIZE = 1 << 50  # 1 PiB: far beyond any GPU, host or model; a larger size is a typo


def _bare_size_hint(number: str, value: float) -> str:
    """What a number given without a unit most likely meant: a count of bytes (``51539607552``, what
    ``torch.cuda.mem_get_info`` prints) above 2^24, of MiB (``81559``, what nvidia-smi prints) from 1,024 up, else
    of GiB or GB."""
    if not value <= MAX_SIZE:
        return "even as a count of bytes it is more than 1 PiB: write it like 48GiB, 80GB or 512MiB"
    if value >= 1 << 24:
        gib = value / GiB
        return f"{number} looks like a count of bytes ({gib:,.4g} GiB): write it like {gib:.4g}GiB or {number}B"
    if value >= 1024:
        return (f"{number} looks like a count of MiB, as nvidia-smi prints ({value / 1024:,.4g} GiB): write it like "
                f"{number}MiB")
    return f"write it like {number}GiB, {number}GB or {number}MiB"


def parse_size(text: str, allow_zero: bool = False) -> int:
    """Parse ``48GiB``, ``80GB`` or ``512MiB`` into bytes. A bare number is refused (``48`` would be
    48 bytes, never what anyone means), except ``0`` where zero is allowed."""
    body = text.strip().lower().replace(" ", "")
    number = body.rstrip("kmgtib")
    unit = body[len(number):]
    shown = excerpt(text, 42)
    try:
        value = float(number) if len(number) <= 40 else -1.0
    except ValueError:
        value = -1.0
    if not unit and value == 0:
        if allow_zero:
            return 0
        raise InputError(f"memory size {shown} must be positive, e.g. 48GiB")
    if not unit and value >= 0 and number and not number.startswith(("+", "-")):
        raise InputError(f"memory size {shown} has no unit: {_bare_size_hint(number, value)}")
    if unit not in _SIZE_UNITS or value < 0 or number.startswith(("+", "-")) or value != value or value == float("inf"):
        raise InputError(f"cannot read memory size {shown}: write it like 48GiB, 80GB or 512MiB")
    if value * _SIZE_UNITS[unit] > MAX_SIZE:
        raise InputError(f"memory size {shown} is more than 1 PiB: write it like 48GiB, 80GB or 512MiB")
    nbytes = round(value * _SIZE_UNITS[unit])
    if nbytes < 0 or (nbytes == 0 and not allow_zero):
        raise InputError(f"memory size {shown} must be positive")
    return nbytes


# Counts in words: "1 request", "2 requests".


def noun(n: int, word: str) -> str:
    """``word`` as it goes with ``n``: ``request`` for 1 (or -1), ``requests`` otherwise."""
    return word if abs(n) == 1 else word + "s"


def verb(n: int, word: str) -> str:
    """A present-tense verb agreeing with ``n`` things: ``fits`` for 1, ``fit`` otherwise (``need``/``needs``)."""
    return word + "s" if abs(n) == 1 else word


def plural(n: int, word: str, sign: bool = False) -> str:
    """``n`` with thousands separators (a sign when ``sign``) and ``word``, plural unless ``n`` is 1 or -1."""
    return (f"{n:+,}" if sign else f"{n:,}") + " " + noun(n, word)


def digits(text: str) -> bool:
    """Whether ``text`` is one or more ASCII digits 0-9: ``str.isdigit`` also takes superscripts and other digit
    characters ('²', '①') that ``int()`` and ``float()`` refuse (a ValueError where a number was expected)."""
    return text.isascii() and text.isdigit()


def human_readable_int(text: str) -> int | None:
    """vLLM's human-readable integers (vllm/utils/argparse_utils.py ``human_readable_int``, 0.33.0): a lowercase
    suffix is decimal (``32k`` = 32,000, ``25.6k`` = 25,600), an uppercase one binary (``32K`` = 32,768, whole
    numbers only); None when ``text`` has no such suffix or is not of that form."""
    t = text.strip()
    if len(t) < 2 or len(t) > 40 or t[-1] not in "kKmMgGtT":
        return None
    number, suffix = t[:-1], t[-1]
    if suffix.islower():
        whole, _, frac = number.partition(".")
        if not digits(whole) or (frac and not digits(frac)):
            return None
        return int(float(number) * {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}[suffix])
    if not digits(number):
        return None
    return int(number) * {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[suffix]


def fmt_bytes(n: int | float, units: str = "GiB", digits: int = 2) -> str:
    """Format a byte count in the given unit, always labelled."""
    scale = UNIT_SCALE[units]
    return f"{n / scale:,.{digits}f} {units}"


def fmt_small(n: int) -> str:
    """Bytes per token or per layer: exact bytes with a binary-unit reading."""
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= scale:
            value = n / scale
            text = f"{value:.0f}" if value == math.floor(value) else f"{value:.2f}"
            return f"{n:,} B ({text} {unit})"
    return f"{n:,} B"
