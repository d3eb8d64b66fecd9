"""What a running deployment's own figures say about its memory plan: pure judgements of ``Signals`` (one scrape,
and the one before it for rates), the GPUs' framebuffer and, when given, the plan kvbudget predicts for the same
model, GPU and settings. Every ``Diagnosis`` carries its evidence and its fix in numbers; nothing here reads or
prints. Thresholds and why: docs/diagnose.md."""

from __future__ import annotations

import math

from .._record import record
from ..units import GiB

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Sequence

    from .exposition import Signals, Snapshot
    from .gpu_memory import GpuMemory

# Framebuffer at or above this fraction of the GPU is "near full": the engine's pool took what the CUDA context,
# NCCL buffers, a second process or a fragmentation spike would need (an allocation beyond it is an OOM).
FB_NEAR_FULL = 0.95
# What to leave free on a GPU an engine pre-allocates: the CUDA context and cuBLAS/NCCL workspaces of a second
# process, or the engine's own peak above its profile, are of the order of 1-2 GiB.
FB_HEADROOM = 2 * GiB
# KV usage at or above this with requests waiting: the pool is the limit (vLLM admits a request only when its
# blocks are free, and starts preempting when a running request cannot grow).
KV_FULL = 0.90
# KV usage below this with requests waiting: memory is not what holds them back (the scheduler's cap is).
KV_LOW = 0.50
# The engine's num_gpu_blocks differing from the prediction by more than this is worth a look (kvbudget's
# validation corpus lands within about 1-2% on the releases it models; docs/validation.md).
BLOCKS_TOLERANCE = 0.02
# The prefix-cache hit rate used in the capacity estimate is capped here: at 100% the estimate has no bound.
MAX_HIT_RATE = 0.95

SEVERITIES = ("critical", "warning", "info", "ok")

# Each engine's own names for the scheduler's cap on running requests and for its per-step token budget, as its
# server's flags spell them: vLLM's max_num_seqs and --max-num-batched-tokens (vllm/config/scheduler.py), SGLang's
# max_running_requests and --max-prefill-tokens / --chunked-prefill-size (sglang/srt/server_args.py).
_SCHEDULER = {"vllm": ("max_num_seqs", "--max-num-batched-tokens"),
              "sglang": ("max_running_requests", "--max-prefill-tokens or --chunked-prefill-size")}


def cap_setting(engine: str | None) -> str:
    """The engine's name for its cap on requests running at once (``max_num_seqs``, ``max_running_requests``)."""
    return _SCHEDULER.get(engine or "vllm", _SCHEDULER["vllm"])[0]


@record
class Diagnosis:
    """One finding about one server or GPU: what it is, how bad, the numbers that show it, and the fix."""

    # kv-cache-full, preempting, max-num-seqs (SGLang: max-running-requests), framebuffer-full, blocks-differ,
    # prefix-cache, healthy, rates
    name: str
    severity: str  # critical, warning, info, ok
    subject: str  # the server (model and labels) or the GPU it is about
    evidence: str
    fix: str = ""


@record
class LeverFigure:
    """What one lever of the plan buys: the flag, GPUs, and the requests of the plan's context held at once."""

    name: str
    flag: str
    gpus: int
    concurrency: int
    added: int


@record
class Expected:
    """The plan kvbudget predicts for the deployment (``--expect``): the figures the engine's metrics can be held
    against. ``blocks``: the engine's allocation units (vLLM blocks, SGLang tokens ...)."""

    label: str  # "vLLM, Qwen/Qwen3-8B on H100-SXM-80GB"
    engine: str
    blocks: int
    block_tokens: int
    kv_tokens: int
    kv_budget_bytes: int
    max_num_seqs: int  # the scheduler's cap (0: none)
    context: int
    max_concurrency: float  # requests of ``context`` tokens the pool holds
    gpus: int = 1
    utilization: float | None = None  # the memory fraction the plan assumed
    levers: tuple[LeverFigure, ...] = ()

    @property
    def bytes_per_token(self) -> float:
        return self.kv_budget_bytes / self.kv_tokens if self.kv_tokens else 0.0


@record
class Rates:
    """Changes between two scrapes of one server, per second."""

    seconds: float
    preemptions_per_s: float | None
    queue_per_s: float | None
    hit_rate: float | None  # prefix-cache hits over queries within the interval


def rates(now: Signals, before: Signals | None, seconds: float) -> Rates | None:
    """The per-second changes of ``now`` against ``before``; None without a previous scrape. A counter that went
    down (the server restarted) gives no rate."""
    if before is None or seconds <= 0:
        return None

    def per_s(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None or a < b else (a - b) / seconds

    queue = None if now.waiting is None or before.waiting is None else (now.waiting - before.waiting) / seconds
    hit = None
    if now.prefix_queries is not None and before.prefix_queries is not None and now.prefix_hits is not None \
            and before.prefix_hits is not None and now.prefix_queries > before.prefix_queries:
        hit = min(max((now.prefix_hits - before.prefix_hits) / (now.prefix_queries - before.prefix_queries), 0.0), 1.0)
    return Rates(seconds, per_s(now.preemptions, before.preemptions), queue, hit)


def _gib(n: float) -> str:
    return f"{n / GiB:,.2f} GiB"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _n(x: float) -> str:
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:,.2f}"


def _fraction_flag(engine: str) -> str:
    return "--mem-fraction-static" if engine == "sglang" else "--gpu-memory-utilization"


def framebuffer(gpus: Sequence[GpuMemory], engines: Sequence[Signals]) -> list[Diagnosis]:
    """A GPU whose framebuffer is ``FB_NEAR_FULL`` or more used: the utilization that would leave FB_HEADROOM."""
    out = []
    util = next((s.gpu_memory_utilization for s in engines if s.gpu_memory_utilization), None)
    engine = engines[0].engine if engines else "vllm"
    for g in gpus:
        if g.used_fraction < FB_NEAR_FULL:
            continue
        evidence = (f"{_gib(g.used_bytes)} of {_gib(g.total_bytes)} used ({_pct(g.used_fraction)}), {_gib(g.free_bytes)} "
                    "free: nothing left for the CUDA context of another process, NCCL buffers or a spike above the "
                    "engine's profile")
        lower = math.ceil(max(FB_HEADROOM - g.free_bytes, 0) / g.total_bytes * 100) / 100
        if util is not None:
            fix = (f"{_fraction_flag(engine)} {util - lower:.2f} (from {util:g}) leaves about {_gib(FB_HEADROOM)} free; "
                   "the KV cache shrinks by as much")
        else:
            fix = (f"lower {_fraction_flag(engine)} by {lower:.2f} to leave about {_gib(FB_HEADROOM)} free (the "
                   "engine's own fraction is not on its page); the KV cache shrinks by as much")
        out.append(Diagnosis("framebuffer-full", "critical" if g.free_bytes < FB_HEADROOM / 4 else "warning", g.label,
                             evidence, fix))
    return out


def _needed(s: Signals) -> str:
    """Blocks (or tokens) the pool needs to hold the waiting requests as well, at the running ones' footprint."""
    running, waiting, usage = s.running or 0, s.waiting or 0, s.kv_usage or 0
    if running <= 0 or usage <= 0:
        return "give --expect MODEL --gpu G to size what more memory would hold"
    grow = round((running + waiting) / running * usage, 9)  # 57/48 x 0.962 is 1.142375, not a hair above it
    if s.num_gpu_blocks:
        unit = "pages" if s.engine == "sglang" else "blocks"
        need = math.ceil(round(s.num_gpu_blocks * grow, 6))
        return (f"about {need:,} {unit} (now {s.num_gpu_blocks:,}, {grow:.2f}x) hold the {_n(waiting)} waiting as well, "
                "at the running requests' mean footprint (an estimate)")
    if s.kv_tokens:
        return (f"about {math.ceil(round(s.kv_tokens * grow, 6)):,} KV tokens (now {s.kv_tokens:,}, {grow:.2f}x) hold the "
                f"{_n(waiting)} waiting as well, at the running requests' mean footprint (an estimate)")
    return f"about {grow:.2f}x the KV pool holds the {_n(waiting)} waiting as well (an estimate)"


def _lever_fix(expected: Expected, load: float) -> str:
    """The levers of the plan that hold ``load`` requests at once, the cheapest first (fewest GPUs)."""
    good = sorted((lv for lv in expected.levers if lv.concurrency >= load and lv.added > 0),
                  key=lambda lv: (lv.gpus, -lv.concurrency))
    chosen = good[:3] or sorted((lv for lv in expected.levers if lv.added > 0), key=lambda lv: -lv.concurrency)[:3]
    if not chosen:
        return ""
    words = "; ".join(f"{lv.name} ({lv.flag}): {lv.concurrency:,} on {lv.gpus} GPU{'s' if lv.gpus > 1 else ''}"
                      for lv in chosen)
    return (f"kvbudget's plan holds {expected.max_concurrency:,.1f} requests of {expected.context:,} tokens; "
            f"for {_n(load)}: {words}")


def kv_pressure(s: Signals, r: Rates | None, expected: Expected | None) -> list[Diagnosis]:
    """Requests waiting while the KV pool is full, or preemptions rising: the cache is too small for the load."""
    waiting, usage = s.waiting or 0, s.kv_usage
    full = waiting > 0 and usage is not None and usage >= KV_FULL
    preempting = r is not None and r.preemptions_per_s is not None and r.preemptions_per_s > 0
    if not (full or preempting):
        return []
    parts = []
    if full and usage is not None:
        parts.append(f"{_n(waiting)} waiting with the KV cache {_pct(usage)} full ({_n(s.running or 0)} running)")
    if preempting and r is not None and r.preemptions_per_s is not None:
        word = "retractions" if s.engine == "sglang" else "preemptions"
        parts.append(f"{word} rising at {r.preemptions_per_s:,.2f}/s over {r.seconds:g} s "
                     f"({_n(s.preemptions or 0)} since start)")
    if r is not None and r.queue_per_s is not None and r.queue_per_s > 0:
        parts.append(f"queue growing by {r.queue_per_s:,.2f} requests/s")
    load = (s.running or 0) + waiting
    fix = _lever_fix(expected, load) if expected is not None else ""
    if not fix:
        fp8 = "fp8_e4m3" if s.engine == "sglang" else "fp8"
        fix = _needed(s) + f"; FP8 KV cache (--kv-cache-dtype {fp8}) doubles the tokens of a 16-bit cache"
    name = "preempting" if preempting and not full else "kv-cache-full"
    return [Diagnosis(name, "critical" if preempting else "warning", s.name, "; ".join(parts), fix)]


def scheduler_cap(s: Signals, expected: Expected | None) -> list[Diagnosis]:
    """Requests waiting while the KV cache is mostly free: the scheduler's cap, not memory, holds them back."""
    waiting, usage, running = s.waiting or 0, s.kv_usage, s.running or 0
    if waiting <= 0 or usage is None or usage >= KV_LOW:
        return []
    cap = expected.max_num_seqs if expected is not None else 0
    setting, step = _SCHEDULER.get(s.engine or "vllm", _SCHEDULER["vllm"])
    name, flag = setting.replace("_", "-"), "--" + setting.replace("_", "-")
    evidence = f"{_n(waiting)} waiting, {_n(running)} running, KV cache only {_pct(usage)} full"
    holds = math.floor(round(running / usage, 6)) if usage > 0 and running > 0 else 0
    if cap and running >= cap:
        fix = (f"{flag} is {cap:,} (the plan's) and all are running: raise it to {max(holds, int(running + waiting)):,}; "
               f"at this footprint the cache holds about {holds:,} requests (an estimate)")
        return [Diagnosis(name, "warning", s.name, evidence + f" = {flag} {cap:,}", fix)]
    if cap:
        return [Diagnosis(name, "info", s.name, evidence,
                          f"not the KV cache and not {flag} ({cap:,}): the per-step token budget "
                          f"({step}) or a prefill-heavy burst; check the queue again")]
    fix = (f"memory is not the limit: if {_n(running)} is {flag}, raise it"
           + (f" (the cache holds about {holds:,} at this footprint, an estimate)" if holds else "")
           + "; give --expect MODEL --gpu G to check against the planned cap")
    return [Diagnosis(name, "warning", s.name, evidence, fix)]


def blocks_differ(s: Signals, expected: Expected | None) -> list[Diagnosis]:
    """The engine's allocated pool against the prediction, when they differ by more than BLOCKS_TOLERANCE."""
    if expected is None or not expected.blocks:
        return []
    if s.engine == "sglang":
        have, want, unit = s.kv_tokens, expected.kv_tokens, "KV tokens (max_total_num_tokens)"
    else:
        have, want, unit = s.num_gpu_blocks, expected.blocks, "blocks (num_gpu_blocks)"
    if not have or not want:
        return []
    off = (have - want) / want
    if abs(off) <= BLOCKS_TOLERANCE:
        return [Diagnosis("blocks-match", "ok", s.name, f"{have:,} {unit} allocated, {want:,} predicted ({off:+.1%})")]
    evidence = f"the engine allocated {have:,} {unit}; kvbudget predicts {want:,} for {expected.label} ({off:+.1%})"
    hints = []
    if s.gpu_memory_utilization and expected.utilization and abs(s.gpu_memory_utilization - expected.utilization) > 1e-6:
        hints.append(f"the engine runs with gpu_memory_utilization {s.gpu_memory_utilization:g}, the plan assumed "
                     f"{expected.utilization:g}: give --gpu-memory-utilization {s.gpu_memory_utilization:g}")
    if s.block_size and expected.block_tokens and s.block_size != expected.block_tokens and s.engine != "sglang":
        hints.append(f"block_size {s.block_size} (the plan's {expected.block_tokens})")
    if s.cache_dtype and s.cache_dtype not in ("auto", "None"):
        hints.append(f"cache_dtype {s.cache_dtype}: give --kv-dtype {s.cache_dtype}")
    fix = ("; ".join(hints) if hints else "give --expect the launch's settings (context, dtypes, parallelism), "
           "or fit a site profile with kvbudget calibrate on its start-up logs")
    return [Diagnosis("blocks-differ", "warning", s.name, evidence, fix)]


def prefix_cache(s: Signals, r: Rates | None, expected: Expected | None) -> list[Diagnosis]:
    """The measured prefix-cache hit rate and, with a plan, the capacity it implies (an estimate)."""
    rate = r.hit_rate if r is not None and r.hit_rate is not None else s.hit_rate
    if rate is None:
        return []
    if r is not None and r.hit_rate is not None:
        evidence = f"{_pct(rate)} of prompt tokens looked up were cached over the last {r.seconds:g} s"
    elif s.prefix_queries and s.prefix_hits is not None:
        evidence = (f"{_pct(rate)} of prompt tokens looked up were cached since start ({s.prefix_hits:,.0f} of "
                    f"{s.prefix_queries:,.0f})")
    else:  # vLLM V0's and SGLang's gauge: the engine's own recent figure
        evidence = f"prefix-cache hit rate {_pct(rate)} (the engine's own gauge)"
    fix = ""
    if expected is not None and expected.max_concurrency > 0:
        used = min(rate, MAX_HIT_RATE)
        fix = (f"effective capacity about {expected.max_concurrency / (1 - used):,.1f} requests of {expected.context:,} "
               f"tokens against the {expected.max_concurrency:,.1f} the plan holds without sharing (capacity / (1 - hit "
               "rate): an estimate, shared prefixes held once)")
    return [Diagnosis("prefix-cache", "info", s.name, evidence, fix)]


def diagnose(now: Snapshot, before: Snapshot | None = None, gpus: Sequence[GpuMemory] = (),
             expected: Expected | None = None) -> tuple[Diagnosis, ...]:
    """Every finding for ``now`` (against ``before`` for rates), the worst first; a server with nothing wrong is
    reported ``healthy`` with its figures."""
    from .exposition import servers_by_key

    previous = servers_by_key(before)
    seconds = now.taken_at - before.taken_at if before is not None else 0.0
    return judge([(s, rates(s, previous.get(s.key), seconds)) for s in now.servers], gpus, expected)


def judge(servers: Sequence[tuple[Signals, Rates | None]], gpus: Sequence[GpuMemory] = (),
          expected: Expected | None = None) -> tuple[Diagnosis, ...]:
    """Every finding for each server with its rates (None: one snapshot), the worst first."""
    out: list[Diagnosis] = framebuffer(gpus, [s for s, _ in servers])
    for s, r in servers:
        found = [*kv_pressure(s, r, expected), *scheduler_cap(s, expected), *blocks_differ(s, expected)]
        if not any(d.severity in ("critical", "warning") for d in found):
            found.append(Diagnosis("healthy", "ok", s.name, _figures(s, r)))
        found += prefix_cache(s, r, expected)
        if r is None:
            found.append(Diagnosis("rates", "info", s.name, "one snapshot: preemption and queue rates are unavailable",
                                   "give a URL (two scrapes --interval apart) or use --watch N"))
        out += found
    return tuple(sorted(out, key=lambda d: SEVERITIES.index(d.severity)))


def _figures(s: Signals, r: Rates | None) -> str:
    parts = []
    if s.running is not None:
        parts.append(f"{_n(s.running)} running")
    if s.waiting is not None:
        parts.append(f"{_n(s.waiting)} waiting")
    if s.kv_usage is not None:
        parts.append(f"KV cache {_pct(s.kv_usage)} full")
    if r is not None and r.preemptions_per_s is not None:
        parts.append(f"no {'retractions' if s.engine == 'sglang' else 'preemptions'} over {r.seconds:g} s")
    return ", ".join(parts) or "no load figures on the page"
