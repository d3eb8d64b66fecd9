"""``diagnose``: read a running engine's ``/metrics`` (twice, ``interval`` apart, when it is a URL: rates need two
scrapes), the GPUs' framebuffer when given, and, with ``--expect``, the plan ``fit`` makes for the same model, GPU
and settings; judge them (``ops/diagnose.py``). ``polls`` does the same every N seconds for ``--watch``, a source
that fails reported in the poll instead of ending it."""

from __future__ import annotations

from .._record import record
from ..ops.diagnose import Expected, LeverFigure, Rates, diagnose, rates
from ..ops.exposition import Signals, Snapshot, is_url, scrape, servers_by_key
from ..units import InputError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from ..ops.diagnose import Diagnosis
    from ..ops.gpu_memory import GpuMemory
    from ..ops.prometheus import Fleet, FleetReplica, RankedReplica
    from .fit import FitAnswer

DEFAULT_INTERVAL_S = 2.0  # vLLM refreshes its gauges every engine step and its log line every 10 s; 2 s sees a change


@record
class DiagnoseAnswer:
    """One diagnosis: the snapshot judged, the one before it (None: a single scrape), each server with its rates,
    the GPUs, the plan it was held against, the findings, and the sources that failed (``--watch`` only)."""

    source: str
    snapshot: Snapshot | None
    previous: Snapshot | None
    servers: tuple[tuple[Signals, Rates | None], ...]
    gpus: tuple[GpuMemory, ...]
    expected: Expected | None
    diagnoses: tuple[Diagnosis, ...]
    gpu_source: str = ""
    problems: tuple[str, ...] = ()


def expected_from_fit(answer: FitAnswer) -> Expected:
    """The figures of a ``fit`` answer the engine's metrics can be held against."""
    row, plan = answer.row, answer.plan
    util = getattr(plan, "utilization", None) or getattr(answer.settings, "mem_fraction_static", None)
    levers = tuple(LeverFigure(lv.name, lv.flag, lv.gpus, lv.concurrency, lv.added) for lv in answer.levers if lv.starts)
    gpus = answer.baseline.gpus if answer.baseline is not None else 1
    return Expected(f"{answer.label}, {answer.model} on {answer.device.name}", answer.engine, row.blocks,
                    row.block_tokens, row.kv_tokens, row.kv_budget_bytes, row.cap, row.context, row.max_concurrency,
                    gpus, float(util) if isinstance(util, (int, float)) else None, levers)


def read_gpus(dcgm: str | None, nvidia_smi: str | None) -> tuple[tuple[GpuMemory, ...], str]:
    """The GPUs from a DCGM exporter page (URL or file) or a saved nvidia-smi CSV, and which it was."""
    from ..ops.gpu_memory import read_dcgm, read_nvidia_smi

    if dcgm is not None:
        return read_dcgm(dcgm), "DCGM"
    if nvidia_smi is not None:
        return read_nvidia_smi(nvidia_smi), "nvidia-smi"
    return (), ""


def _answer(source: str, now: Snapshot, before: Snapshot | None, gpus: tuple[GpuMemory, ...], gpu_source: str,
            expected: Expected | None, problems: tuple[str, ...] = ()) -> DiagnoseAnswer:
    previous = servers_by_key(before)
    seconds = now.taken_at - before.taken_at if before is not None else 0.0
    servers = tuple((s, rates(s, previous.get(s.key), seconds)) for s in now.servers)
    return DiagnoseAnswer(source, now, before, servers, gpus, expected, diagnose(now, before, gpus, expected),
                          gpu_source, problems)


def answer_of(source: str, now: Snapshot, gpus: tuple[GpuMemory, ...], gpu_source: str,
              expected: Expected | None) -> DiagnoseAnswer:
    """One snapshot judged (a pasted page: no rates)."""
    return _answer(source, now, None, gpus, gpu_source, expected)


def diagnose_once(metrics: str, *, dcgm: str | None = None, nvidia_smi: str | None = None,
                  expect: Callable[[Snapshot], Expected] | None = None, interval: float = DEFAULT_INTERVAL_S,
                  timeout: float = 5.0, sleep: Callable[[float], None] | None = None,
                  clock: Callable[[], float] | None = None) -> DiagnoseAnswer:
    """Scrape ``metrics`` (twice, ``interval`` seconds apart, when it is a URL), read the GPUs, plan with
    ``expect`` (given the snapshot, to learn the engine), and judge. Any fault: one ScrapeError/InputError."""
    import time

    sleep, clock = sleep or time.sleep, clock or time.time
    before = None
    now = scrape(metrics, timeout=timeout, clock=clock)
    if is_url(metrics) and interval > 0:
        before = now
        try:
            sleep(interval)
        except KeyboardInterrupt:
            raise InputError("interrupted before the second scrape (rates need two; --interval 0 takes one)") from None
        now = scrape(metrics, timeout=timeout, clock=clock)
    gpus, gpu_source = read_gpus(dcgm, nvidia_smi)
    return _answer(metrics, now, before, gpus, gpu_source, expect(now) if expect is not None else None)


@record
class Poll:
    """One ``--watch`` poll: its number (from 1) and the answer (servers from the last good scrape, problems named)."""

    index: int
    answer: DiagnoseAnswer
    down: bool  # the metrics source failed this time


def polls(metrics: str, every: float, *, count: int | None = None, dcgm: str | None = None,
          nvidia_smi: str | None = None, expect: Callable[[Snapshot], Expected] | None = None, timeout: float = 5.0,
          sleep: Callable[[float], None] | None = None, clock: Callable[[], float] | None = None) -> Iterator[Poll]:
    """Scrape every ``every`` seconds (``count`` times, or until the caller stops), each poll judged against the
    previous good one. A source that fails is named in the poll's ``problems`` and watched again next time."""
    import time

    from ..ops.exposition import ScrapeError

    sleep, clock = sleep or time.sleep, clock or time.time
    last: Snapshot | None = None
    expected: Expected | None = None
    planned = False
    i = 0
    while count is None or i < count:
        i += 1
        if i > 1:
            sleep(every)
        problems: list[str] = []
        try:
            now: Snapshot | None = scrape(metrics, timeout=timeout, clock=clock)
        except ScrapeError as exc:
            now = None
            problems.append(f"down: {exc}")
        try:
            gpus, gpu_source = read_gpus(dcgm, nvidia_smi)
        except ScrapeError as exc:
            gpus, gpu_source = (), ""
            problems.append(f"GPU memory: {exc}")
        if now is not None and expect is not None and not planned:
            expected, planned = expect(now), True
        if now is None:
            empty = DiagnoseAnswer(metrics, last, None, (), gpus, expected, (), gpu_source, tuple(problems))
            yield Poll(i, empty, True)
            continue
        yield Poll(i, _answer(metrics, now, last, gpus, gpu_source, expected, tuple(problems)), False)
        last = now


# --- a fleet, through a Prometheus server ---------------------------------------------------------------------------

_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0, "y": 31536000.0}


def window_seconds(window: str) -> float:
    """A Prometheus duration (``5m``, ``1h30m``, ``90s``) in seconds."""
    import re

    from ..ops.prometheus import check_window

    check_window(window)
    return sum(float(n) * _UNIT_S[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(ms|[smhdwy])", window))


def replica_signals(r: FleetReplica, seconds: float) -> tuple[Signals, Rates]:
    """One replica as the single-server diagnoses read it: its gauges, and its rates over the query window."""
    labels = (("instance", r.instance),) + ((("pod", r.pod),) if r.pod else ())
    s = Signals(r.engine or "vllm", "", labels, r.running, r.waiting, r.kv_usage, prefix_hit_rate=r.prefix_hit_rate,
                num_gpu_blocks=r.num_gpu_blocks, block_size=r.block_size,
                gpu_memory_utilization=r.gpu_memory_utilization, kv_tokens=r.max_total_num_tokens)
    return s, Rates(seconds, r.preemptions_per_s, None, r.prefix_hit_rate)


def fleet_gpus(fleet: Fleet) -> tuple[GpuMemory, ...]:
    """The DCGM framebuffer of every GPU Prometheus holds for the fleet, in bytes (DCGM reports MiB)."""
    from ..ops.gpu_memory import GpuMemory

    out = []
    for g in [*(g for r in fleet.replicas for g in r.gpus), *fleet.unmatched_gpus]:
        if g.fb_used_mib is None or g.fb_free_mib is None:
            continue
        used, free = round(g.fb_used_mib * 2**20), round(g.fb_free_mib * 2**20)
        out.append(GpuMemory(g.gpu, "", g.pod or g.hostname or g.instance, used, used + free, free,
                             source="DCGM via Prometheus"))
    return tuple(out)


@record
class FleetAnswer:
    """``diagnose --prometheus``: every replica the selector matched, ranked by risk, with the findings."""

    prometheus: str
    selector: str
    window: str
    answer: DiagnoseAnswer  # the replicas as servers, rates over ``window``
    ranking: tuple[RankedReplica, ...]


def diagnose_fleet(url: str, *, selector: str, window: str, expect: Callable[[Snapshot], Expected] | None = None,
                   timeout: float = 10.0) -> FleetAnswer:
    """Ask the Prometheus server at ``url`` for every replica ``selector`` matches (one instant, rates over
    ``window``), judge each as ``diagnose`` judges one server, and rank them by risk."""
    from ..ops.diagnose import judge
    from ..ops.prometheus import Prometheus, fleet_signals, rank_by_risk

    seconds = window_seconds(window)
    fleet = fleet_signals(Prometheus(url, timeout), selector, window=window)
    if not fleet.replicas:
        raise InputError(f"Prometheus at {url} holds no vLLM or SGLang series matching {selector}: check --selector "
                         "(e.g. '{job=\"vllm\"}') and that Prometheus scrapes the engines' /metrics")
    servers = tuple(replica_signals(r, seconds) for r in fleet.replicas)
    gpus = fleet_gpus(fleet)
    snapshot = Snapshot(url, fleet.at, tuple(s for s, _ in servers))
    expected = expect(snapshot) if expect is not None else None
    answer = DiagnoseAnswer(f"Prometheus {url} {selector}", snapshot, None, servers, gpus, expected,
                            judge(servers, gpus, expected), "DCGM via Prometheus" if gpus else "")
    return FleetAnswer(url, selector, window, answer, rank_by_risk(fleet.replicas))
