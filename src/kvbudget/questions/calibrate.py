"""``calibrate``: a site's own start-up logs turned into a profile of the memory kvbudget's model misses there.

Each log is read by the engine that printed it; an engine that can be calibrated (``calibration_point``) gives, for
the run the log shows, a memory figure it logged and the one kvbudget predicts from model, GPU and flags alone: vLLM's
available KV cache memory, SGLang's free memory before loading, TensorRT-LLM's free memory when its pool is sized.
Their difference is memory the site spends outside kvbudget's model (other processes, a desktop or WSL2's host, a
driver's or a kernel's workspace). The profile keeps the median per GPU, release line and TP x PP, for one engine;
``--profile`` applies it to every plan of that engine that matches (vLLM: added to the non-torch memory; SGLang and
TensorRT-LLM: off the free memory they size their pool from) and says so in the plan's notes or the figure's
provenance.
"""

from __future__ import annotations

import hashlib
import statistics

from .._record import record
from ..engines.site import PROFILE_VERSION
from ..units import GiB, InputError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from ..engines.base import Registry
    from ..engines.site import SiteTerm



@record
class Point:
    """One logged run: where it ran, the KV memory the engine logged and the one kvbudget predicts (bytes)."""

    log: str
    engine: str
    gpu: str
    release: str
    gpus: int
    logged: int
    predicted: int
    figure: str = "available KV cache memory"  # what the engine logged, in bytes (SGLang: free memory before loading)
    device_bytes: int = 0  # the memory of the GPU planned (0: not known)

    @property
    def residual(self) -> int:
        """Memory the site spent outside kvbudget's model: predicted minus logged KV memory."""
        return self.predicted - self.logged


@record
class Calibration:
    points: tuple[Point, ...]
    terms: tuple[SiteTerm, ...]
    skipped: tuple[tuple[str, str], ...]  # (log, why)
    release_flag: str = "--vllm-version"  # the flag that names the release line a term applies to, for the engine


def calibrate(logs: Iterable[tuple[str, str]], given: dict[str, Any], registry: Registry) -> Calibration:
    """The profile of ``logs`` (name, text; read one at a time, so a thousand large logs are never in memory
    together): one term per GPU, release line and TP x PP, the median residual."""
    from ..engines.site import SiteTerm

    points: list[Point] = []
    skipped: list[tuple[str, str]] = []
    first: tuple[str, Any] | None = None  # the first log of an engine kvbudget calibrates, and that engine
    seen: dict[str, str] = {}  # a digest of each log's text -> its name: one run given twice is one point, not two
    for name, text in logs:
        digest = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()
        if digest in seen:
            skipped.append((name, f"the same log as {seen[digest]}: one run counts once"))
            continue
        seen[digest] = name
        engine = registry.reader(lambda e, t=text: e.reads_log(t))  # type: ignore[misc]
        point = getattr(engine, "calibration_point", None)
        if engine is None or point is None:
            which = ", ".join(f"{e.label}'s" for e in registry if getattr(e, "calibration_point", None) is not None)
            skipped.append((name, f"{engine.label if engine else 'no engine'}'s logs are not calibrated yet "
                                  f"(kvbudget calibrates {which})"))
            continue
        from .readers import _only_its_own

        _only_its_own(engine, given, "calibrate", f"log {_base(name)}", registry)  # another engine's release: refused
        first = first or (name, engine)
        if engine is not first[1]:  # one profile, one engine: each measures its own memory
            raise InputError(f"{_base(first[0])} and {_base(name)} are two engines' logs ({first[1].label}, {engine.label}): a profile "
                             "holds one engine's terms; calibrate each engine's logs into its own profile")
        try:
            p = point(name, text, given)
        except InputError as exc:
            skipped.append((name, str(exc)))
            continue
        if p is None:
            skipped.append((name, f"the log prints none of the memory figures kvbudget calibrates {engine.label} on"))
        elif p.device_bytes and abs(p.residual) > p.device_bytes // 4:  # --profile refuses such a term (site.py)
            skipped.append((name, f"its {p.figure} is {p.residual / GiB:+.2f} GiB off kvbudget's, over a quarter of "
                                  f"{p.gpu}: the log ran on another GPU or was edited (give --gpu of the card it ran on)"))
        else:
            points.append(p)
    groups: dict[tuple[str, str, int], list[Point]] = {}
    for p in points:
        groups.setdefault((p.gpu, p.release, p.gpus), []).append(p)
    terms = []
    for (gpu, release, gpus), ps in sorted(groups.items()):
        median = round(statistics.median(p.residual for p in ps))
        spread = max(abs(p.residual - median) for p in ps)
        terms.append(SiteTerm(gpu, release, gpus, median, len(ps), spread))
    option = getattr(registry.get(points[0].engine), "release_option", "") if points else ""
    flag = "--" + option.replace("_", "-") if option else "--vllm-version"
    return Calibration(tuple(points), tuple(terms), tuple(skipped), flag)


def _base(name: str) -> str:
    """A log's file name without its folders, so that an error naming two logs keeps both in its one line."""
    return name.replace("\\", "/").rsplit("/", 1)[-1][-80:] or name[-80:]


def profile_doc(c: Calibration) -> dict[str, Any]:
    """The profile file ``--profile`` reads."""
    return {"kvbudget_profile": PROFILE_VERSION, "engine": c.points[0].engine if c.points else "vllm",
            "terms": [{"gpu": t.gpu, "release": t.release, "gpus": t.gpus, "bytes": t.bytes, "logs": t.logs,
                       "spread": t.spread} for t in c.terms],
            "logs": [p.log for p in c.points]}
