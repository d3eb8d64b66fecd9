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
