"""A site's own calibration (``kvbudget calibrate LOG ... --out PROFILE``, read back with ``--profile PROFILE``).

A profile holds, for one engine, terms per GPU, release line and GPU count: the memory the site's own start-up logs
show held outside kvbudget's model there (questions/calibrate.py says how each engine measures it). Each engine
applies its terms where that memory goes: vLLM adds them to the non-torch memory of its profiling run, SGLang takes
them from the free memory before loading (a desktop, WSL2's host or another process on the GPU).
"""

from __future__ import annotations

import re

from .._record import record
from ..units import InputError, excerpt

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Callable, Collection

    from ..hardware import GPU


@record
class SiteTerm:
    """Memory a site's own start-up logs show beyond kvbudget's model, for one GPU, release line and parallel size
    (``kvbudget calibrate``), applied to every plan that matches it."""

    gpu: str  # the GPU's catalog name (or "custom (N GiB)")
    release: str  # the engine's release line key
    gpus: int  # TP x PP of the logged runs
    bytes: int  # the median over the logs (negative: the site uses less than the model says)
    logs: int  # how many logs it comes from
    spread: int = 0  # the largest distance of one log's residual from the median


# What ``kvbudget calibrate --out`` writes (questions/calibrate.py): the profile's keys, and each term's
PROFILE_VERSION = 1
_PROFILE_KEYS = ("kvbudget_profile", "engine", "terms", "logs")
_TERM_KEYS = ("gpu", "release", "gpus", "bytes", "logs", "spread")
RECALIBRATE = "recalibrate with `kvbudget calibrate LOG ... --out FILE`"


def site_profile(doc: object, engine: str, label: str, releases: Collection[str] | Callable[[str], bool],
                 where: str = "--profile") -> tuple[SiteTerm, ...]:
    """A profile file read back for ``engine`` (its registry name; ``label`` as users know it), each field checked;
    ``releases``: the engine's release line keys, or a test of one (a term of another line matches no plan)."""
    from ..inputs import whole

    form = doc.get("kvbudget_profile") if isinstance(doc, dict) else None
    if type(form) is int and form > PROFILE_VERSION:  # was 'not a kvbudget profile', the file's own key saying otherwise
        raise InputError(f"{where}: a kvbudget profile of format {form if form < 10**6 else 'a large number'}, newer "
                         f"than the format {PROFILE_VERSION} this kvbudget reads: update kvbudget, or recalibrate with this one")
    if (not isinstance(doc, dict) or type(form) is not int or form != PROFILE_VERSION
            or not isinstance(doc.get("terms"), list)):
        raise InputError(f"{where}: not a kvbudget profile (write one with `kvbudget calibrate LOG ... --out FILE`)")
    # profiles written before SGLang's were vLLM's and may carry no engine
    if doc.get("engine", "vllm") != engine:  # another engine's memory: no plan of this one reads it
        raise InputError(f"{where}: a profile of engine {str(doc['engine'])[:40]!r}, and this plan is {label}'s: "
                         f"calibrate {label}'s own start-up logs (`kvbudget calibrate LOG ... --out FILE`)")
    if extra := sorted(str(k)[:40] for k in doc if k not in _PROFILE_KEYS):  # a hand edit kvbudget would not read
        raise InputError(f"{where}: key {extra[0]!r} is not a profile's (it has {', '.join(_PROFILE_KEYS)}): remove it, or "
                         f"{RECALIBRATE}")
    if not doc["terms"]:  # calibrate writes a term per GPU, release and GPU count of its logs: none is a hand edit
        raise InputError(f"{where}: the profile holds no terms, so it calibrates no run: {RECALIBRATE}")
    if len(doc["terms"]) > 10_000:
        raise InputError(f"{where}: {len(doc['terms']):,} terms: a profile holds at most 10,000")
    terms: list[SiteTerm] = []
    seen: dict[tuple[str, str, int], int] = {}
    for i, t in enumerate(doc["terms"]):
        at = f"{where}: terms[{i}]"
        if not isinstance(t, dict) or not isinstance(t.get("gpu"), str) or not isinstance(t.get("release"), str):
            raise InputError(f"{at}: needs gpu and release names")
        if extra := sorted(str(k)[:40] for k in t if k not in _TERM_KEYS):  # e.g. 'tp': 2, which no plan would read
            raise InputError(f"{at}: key {extra[0]!r} is not a term's (a term has {', '.join(_TERM_KEYS)}): remove it, or "
                             f"{RECALIBRATE}")
        known = releases(t["release"]) if callable(releases) else t["release"] in releases
        if not known:  # a term no plan would ever match: silently no calibration
            listed = "" if callable(releases) else f" ({', '.join(releases)})"
            raise InputError(f"{at}: release {t['release'][:40]!r} is not a {label} release line kvbudget knows{listed}: "
                             f"{RECALIBRATE} with this kvbudget")
        term = SiteTerm(_term_gpu(t["gpu"], at), t["release"], whole(t.get("gpus"), "gpus", 1, 1 << 20, at),
                        whole(t.get("bytes"), "bytes", -(1 << 50), 1 << 50, at),
                        whole(t.get("logs"), "logs", 1, 1 << 20, at), whole(t.get("spread", 0), "spread", 0, 1 << 50, at))
        key = (term.gpu, term.release, term.gpus)
        if key in seen:  # two figures for the same runs: the first one read would win, unannounced
            raise InputError(f"{at}: repeats terms[{seen[key]}] (GPU {term.gpu}, release {term.release}, {term.gpus} "
                             "GPUs); keep one term per GPU, release and GPU count")
        seen[key] = i
        terms.append(term)
    return tuple(terms)


def _term_gpu(name: str, at: str) -> str:
    """A term's GPU as a plan names it: the catalog's name of an alias ('H100' -> 'H100-SXM-80GB'), or a custom GPU
    as calibrate writes one ('custom (47.50 GiB)'). Another name matches no plan: the term would silently not apply."""
    from ..hardware import UnknownGPU, find_gpu

    if re.fullmatch(r"custom \([0-9]{1,7}\.[0-9]{2} GiB\)", name):
        return name
    try:
        return find_gpu(name).name
    except UnknownGPU:
        raise InputError(f"{at}: GPU {excerpt(name, 40)} is not a GPU kvbudget knows (see `kvbudget gpus`) nor a custom "
                         f"one ('custom (47.50 GiB)'): no plan would use the term; {RECALIBRATE}") from None


def site_bytes(site: tuple[SiteTerm, ...], gpu: str, release: str, gpus: int) -> tuple[int, SiteTerm | None]:
    """The site's extra bytes for this GPU, release line and TP x PP: the term of the same size, else the one of the
    nearest size on the same GPU and release (None: the site logged no run like it)."""
    same = [t for t in site if t.gpu == gpu and t.release == release]
    if not same:
        return 0, None
    term = min(same, key=lambda t: (abs(t.gpus - gpus), t.gpus))
    return term.bytes, term


def term_said(term: SiteTerm) -> str:
    """Where a term comes from, as a figure's provenance says it."""
    from ..units import GiB

    return (f"site profile: {term.bytes / GiB:+.2f} GiB from {term.logs} log(s) of {term.gpu}, {term.release}, "
            f"{term.gpus} GPU(s) (spread {term.spread / GiB:.2f} GiB)")


def held_by_site(site: tuple[SiteTerm, ...], gpu: GPU, release: str, gpus: int, line: str, where: str,
                 notes: list[str], modelled: tuple[int, str] | None = None) -> int:
    """The bytes a profile's term for this GPU, release line and TP x PP says the site holds outside the engine's
    memory (0 where it has none, with a note saying so), noted as ``where`` it comes off; ``line``: the release line
    as users read it. A term of more than a quarter of the GPU is a profile of another GPU: refused. ``modelled``:
    the bytes kvbudget's model holds there that a negative term can take back, and what they are; a term below
    that would free memory the card does not have (calibrate's terms never are: a log's figure is the card's)."""
    from ..units import GiB

    if not site:
        return 0
    held, term = site_bytes(site, gpu.name, release, gpus)
    if term is None:
        notes.append(f"the site profile has no run on {gpu.name} with {line}: kvbudget's own model applies")
        return 0
    if abs(held) > gpu.memory_bytes // 4:  # no site holds a quarter of a GPU outside the model
        raise InputError(f"--profile: its term for {gpu.name} is {held / GiB:+.2f} GiB, more than a quarter of the GPU: "
                         "recalibrate with the GPU the logs ran on (kvbudget calibrate LOG ... --gpu G)")
    if modelled is not None and held < -modelled[0]:  # a hand edit: more free memory than the card has
        raise InputError(f"--profile: its term for {gpu.name} is {held / GiB:+.2f} GiB, more than the "
                         f"{modelled[0] / GiB:.2f} GiB of {modelled[1]} kvbudget models there: no site frees memory "
                         f"its GPU does not spend; {RECALIBRATE}")
    notes.append(f"{term_said(term)}, {where}")
    return held
