"""``calibrate``: a site's own start-up logs turned into a profile of the non-KV memory kvbudget's model misses there.

Each log is read by the engine that printed it; an engine that can be calibrated (``calibration_point``) gives, for
the run the log shows, the KV memory it logged and the one kvbudget predicts from model, GPU and flags alone. Their
difference is memory the site spends outside kvbudget's model (other processes, a driver's or a kernel's
workspace). The profile keeps the median per GPU, release line and TP x PP; ``--profile`` adds it to the engine's
non-torch memory on every plan that matches, and says so in the figure's provenance.
"""

from __future__ import annotations

import hashlib
import statistics

from .._record import record
from ..units import InputError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from ..engines.base import Registry
    from ..engines.vllm.settings import SiteTerm

PROFILE_VERSION = 1


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

    @property
    def residual(self) -> int:
        """Memory the site spent outside kvbudget's model: predicted minus logged KV memory."""
        return self.predicted - self.logged


@record
class Calibration:
    points: tuple[Point, ...]
    terms: tuple[SiteTerm, ...]
    skipped: tuple[tuple[str, str], ...]  # (log, why)


def calibrate(logs: Iterable[tuple[str, str]], given: dict[str, Any], registry: Registry) -> Calibration:
    """The profile of ``logs`` (name, text; read one at a time, so a thousand large logs are never in memory
    together): one term per GPU, release line and TP x PP, the median residual."""
    from ..engines.vllm.settings import SiteTerm

    points: list[Point] = []
    skipped: list[tuple[str, str]] = []
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
            skipped.append((name, f"{engine.label if engine else 'no engine'}'s logs are not calibrated yet "
                                  "(kvbudget calibrates vLLM's non-KV memory)"))
            continue
        try:
            p = point(name, text, given)
        except InputError as exc:
            skipped.append((name, str(exc)))
            continue
        if p is None:
            skipped.append((name, "the log prints no available KV cache memory to calibrate on"))
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
    return Calibration(tuple(points), tuple(terms), tuple(skipped))


def profile_doc(c: Calibration) -> dict[str, Any]:
    """The profile file ``--profile`` reads."""
    return {"kvbudget_profile": PROFILE_VERSION, "engine": "vllm",
            "terms": [{"gpu": t.gpu, "release": t.release, "gpus": t.gpus, "bytes": t.bytes, "logs": t.logs,
                       "spread": t.spread} for t in c.terms],
            "logs": [p.log for p in c.points]}
