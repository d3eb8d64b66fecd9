"""An engine's ``/metrics`` page (Prometheus text exposition), fetched or read from a saved file and parsed with
``prometheus_client``'s own parser into one ``Signals`` record per server: the figures a memory diagnosis needs.

Metric names, as each engine release defines them (checked in the engines' sources):

- vLLM 0.33.0, ``vllm/v1/metrics/loggers.py``: ``vllm:num_requests_running``, ``vllm:num_requests_waiting``,
  ``vllm:kv_cache_usage_perc`` (a fraction, "1 means 100 percent usage"), counters ``vllm:num_preemptions``,
  ``vllm:prefix_cache_queries``, ``vllm:prefix_cache_hits`` (exposed with ``_total``), and the info gauge
  ``vllm:cache_config_info`` whose labels are ``CacheConfig.metrics_info()`` (``vllm/config/cache.py``: every
  field as a string, ``num_gpu_blocks``, ``block_size``, ``gpu_memory_utilization``, ``cache_dtype``,
  ``kv_cache_size_tokens`` ...). Per-engine labels ``model_name`` and ``engine``.
- vLLM 0.10.1, ``vllm/v1/metrics/loggers.py``: the same, plus the deprecated ``vllm:gpu_cache_usage_perc`` and
  ``vllm:gpu_prefix_cache_queries`` / ``vllm:gpu_prefix_cache_hits``.
- vLLM 0.8.5 (V1 and V0) and 0.7.3 (V0), ``vllm/v1/metrics/loggers.py`` and ``vllm/engine/metrics.py``:
  ``vllm:gpu_cache_usage_perc``, counter ``vllm:num_preemptions_total``, V1's ``vllm:gpu_prefix_cache_queries`` /
  ``_hits``, V0's gauge ``vllm:gpu_prefix_cache_hit_rate``; label ``model_name`` only.
- SGLang 0.5.23, ``sglang/srt/observability/metrics_collector.py``: ``sglang:num_running_reqs``,
  ``sglang:num_queue_reqs``, ``sglang:token_usage`` (a fraction of the KV pool), ``sglang:cache_hit_rate``,
  ``sglang:max_total_num_tokens`` (the pool in tokens), ``sglang:page_size``, ``sglang:num_pages``, and the
  retraction counter ``sglang:num_retracted_requests_total`` (SGLang's preemption); labels ``model_name``,
  ``engine_type``, ``tp_rank``, ``pp_rank`` (and ``dp_rank``), emitted by attention-TP rank 0 only.

A counter declared with ``# TYPE x counter`` is exposed as ``x_total`` (and ``x_created``); samples are matched by
their exposed names, so pages with and without ``# TYPE`` lines read the same.
"""

from __future__ import annotations

import math

from .._record import record
from ..units import InputError, excerpt

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    T = TypeVar("T")

MiB_ = 1 << 20
MAX_EXPOSITION_BYTES = 8 * MiB_  # a busy vLLM page with every histogram is a few hundred KB; 8 MiB is far past it
DEFAULT_TIMEOUT_S = 5.0  # each wait of a scrape (Prometheus itself gives a scrape 10 s)
CHUNK = 64 * 1024
# past the deadline, the time a read under way has to end (at most the timeout again): the whole exchange is given
# up on after timeout + GRACE_S
# (it was twice the timeout: 10.5 s for a server trickling its headers, told as 'no answer within 5 s')
GRACE_S = 1.0
MAX_FIGURE = 1e15  # requests, tokens looked up since start, pool sizes: far below; past it, a page that is not a count
# the longest series line read, and the most labels on one: vLLM's cache_config_info (every CacheConfig field as a
# label) has about 40 labels in 2 KB; the parser's time grows with labels x line length (100,000 labels on one 2 MB
# line took 15 s; 500 lines of 1,250 labels, 8 s)
MAX_LINE_CHARS = 16 * 1024
MAX_LINE_LABELS = 128


class ScrapeError(InputError):
    """A metrics source that cannot be read or parsed: one line naming the source, the problem and the fix."""


@record
class Signals:
    """What one server (one engine process: a vLLM engine index, an SGLang DP rank, a fleet replica) reports, in
    the engine's own units: requests, a KV-usage fraction, cumulative counters, and the cache as it was allocated.
    ``None``: the page does not carry that figure. ``labels``: the series' identifying labels (model_name, engine,
    dp_rank; a fleet reader adds instance, pod), so one record per replica can be told apart."""

    engine: str  # "vllm" or "sglang"
    model: str  # the model_name label ("" when the page has none)
    labels: tuple[tuple[str, str], ...] = ()
    running: float | None = None
    waiting: float | None = None
    kv_usage: float | None = None  # fraction of the KV pool in use, 0..1
    preemptions: float | None = None  # cumulative (vLLM preemptions, SGLang retractions)
    prefix_queries: float | None = None  # cumulative tokens looked up in the prefix cache
    prefix_hits: float | None = None  # cumulative tokens found there
    prefix_hit_rate: float | None = None  # a gauge, where the engine reports the rate itself (vLLM V0, SGLang)
    num_gpu_blocks: int | None = None  # vLLM cache_config_info
    block_size: int | None = None  # tokens per block (vLLM) or per page (SGLang)
    gpu_memory_utilization: float | None = None  # vLLM cache_config_info
    cache_dtype: str | None = None
    kv_tokens: int | None = None  # the pool in tokens (vLLM kv_cache_size_tokens, SGLang max_total_num_tokens)

    @property
    def key(self) -> tuple[str, str, tuple[tuple[str, str], ...]]:
        return self.engine, self.model, self.labels

    @property
    def name(self) -> str:
        """The server as the user reads it: the model, then any label that tells it apart."""
        extra = ", ".join(f"{k}={v}" for k, v in self.labels if k != "model_name")
        return f"{self.model or self.engine}" + (f" ({extra})" if extra else "")

    @property
    def hit_rate(self) -> float | None:
        """Prefix-cache hits over queries since the server started (or the engine's own gauge)."""
        if self.prefix_queries and self.prefix_hits is not None:
            return min(max(self.prefix_hits / self.prefix_queries, 0.0), 1.0)
        return self.prefix_hit_rate


@record
class Snapshot:
    """One scrape of one source: when it was taken (seconds, the caller's clock) and each server on it."""

    source: str
    taken_at: float
    servers: tuple[Signals, ...]


# Exposed sample name -> (engine, field). The first name listed for a field wins when a page has several
# (vLLM 0.10 exposes both kv_cache_usage_perc and the deprecated gpu_cache_usage_perc).
_FIELDS: dict[str, tuple[str, str]] = {
    "vllm:num_requests_running": ("vllm", "running"),
    "vllm:num_requests_waiting": ("vllm", "waiting"),
    "vllm:kv_cache_usage_perc": ("vllm", "kv_usage"),
    "vllm:gpu_cache_usage_perc": ("vllm", "kv_usage"),
    "vllm:num_preemptions_total": ("vllm", "preemptions"),
    "vllm:num_preemptions": ("vllm", "preemptions"),
    "vllm:prefix_cache_queries_total": ("vllm", "prefix_queries"),
    "vllm:gpu_prefix_cache_queries_total": ("vllm", "prefix_queries"),
    "vllm:prefix_cache_hits_total": ("vllm", "prefix_hits"),
    "vllm:gpu_prefix_cache_hits_total": ("vllm", "prefix_hits"),
    "vllm:gpu_prefix_cache_hit_rate": ("vllm", "prefix_hit_rate"),
    "sglang:num_running_reqs": ("sglang", "running"),
    "sglang:num_queue_reqs": ("sglang", "waiting"),
    "sglang:token_usage": ("sglang", "kv_usage"),
    "sglang:num_retracted_requests_total": ("sglang", "preemptions"),
    "sglang:cache_hit_rate": ("sglang", "prefix_hit_rate"),
    "sglang:max_total_num_tokens": ("sglang", "kv_tokens"),
    "sglang:page_size": ("sglang", "block_size"),
    "sglang:num_pages": ("sglang", "num_gpu_blocks"),
}
_PRIORITY = {name: i for i, name in enumerate(_FIELDS)}
_INTEGRAL = frozenset({"kv_tokens", "block_size", "num_gpu_blocks"})
_FRACTIONS = frozenset({"kv_usage"})  # SGLang's first cache_hit_rate was a percent: read as such below
# Labels that tell servers apart; any other label (tp_rank, pp_rank, engine_type, le ...) is folded by taking the
# largest value (SGLang emits from attention-TP rank 0 only; a page with several ranks reports the busiest).
IDENTITY = ("model_name", "engine", "dp_rank", "instance", "pod")


def _identity(labels: dict[str, str]) -> tuple[tuple[str, str], ...]:
    named = dict(labels)
    if "model_name" not in named and "name" in named:  # SGLang before 0.4 labelled the model "name"
        named["model_name"] = named["name"]
    return tuple((k, named[k]) for k in IDENTITY if k in named)


def parse(text: str, source: str, taken_at: float) -> Snapshot:
    """The servers on one exposition page. ScrapeError for text the parser refuses (garbage, a page cut off
    mid-line, HTML) and for a page with no vLLM or SGLang metric."""
    from prometheus_client.parser import text_string_to_metric_families

    found: dict[tuple[str, tuple[tuple[str, str], ...]], dict[str, tuple[int, float]]] = {}
    configs: list[dict[str, str]] = []
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()  # the series read: an engine exposes each once
    _check_lines(text, source)
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "vllm:cache_config_info":
                    configs.append(dict(sample.labels))
                    continue
                hit = _FIELDS.get(sample.name)
                if hit is None:
                    continue
                series = (sample.name, tuple(sorted(sample.labels.items())))
                if series in seen:  # two scrapes in one file (a page saved twice, tee -a): the larger was taken
                    labels = ",".join(f'{k}="{v}"' for k, v in series[1])
                    raise ScrapeError(f"{source}: {excerpt(sample.name + '{' + labels + '}', 100)[1:-1]} appears twice: "
                                      "the page holds more than one scrape; give one /metrics page")
                seen.add(series)
                engine, field = hit
                if not math.isfinite(sample.value) and field == "prefix_hit_rate":
                    continue  # a rate of no lookups yet (0 / 0)
                if field in _FRACTIONS and math.isfinite(sample.value) and not 0 <= sample.value <= 1:
                    # vLLM's kv_cache_usage_perc is 1 - free / total blocks, SGLang's token_usage used / total
                    # tokens: a percent written as 96.2 read as 9,620% full and a fix of 114x the pool (exit 0)
                    raise ScrapeError(f"{source}: {sample.name} is {sample.value:g}, which no engine reports (a fraction "
                                      "of the pool, 0..1, not a percent); is it the engine's own /metrics page?")
                if not (math.isfinite(sample.value) and 0 <= sample.value <= MAX_FIGURE):
                    # a count, a fraction or a size: none is negative, NaN or 1e300 (a NaN usage was shown as '-'
                    # and the server called healthy)
                    raise ScrapeError(f"{source}: {sample.name} is {sample.value:g}, which no engine reports (a "
                                      f"count or fraction, 0..{MAX_FIGURE:g}); is it the engine's own /metrics page?")
                slot = found.setdefault((engine, _identity(sample.labels)), {})
                rank = _PRIORITY[sample.name]
                old = slot.get(field)
                if old is None or rank < old[0] or (rank == old[0] and sample.value > old[1]):
                    slot[field] = (rank, float(sample.value))
    except ScrapeError:
        raise
    except Exception as exc:  # the parser raises ValueError, IndexError, KeyError ... on malformed text
        line = str(exc).splitlines()[0][:80] if str(exc) else exc.__class__.__name__
        raise ScrapeError(f"{source}: not Prometheus text exposition ({line}); give the engine's /metrics page "
                          "(vLLM: http://HOST:8000/metrics; SGLang: start it with --enable-metrics)") from None
    if not found and configs:
        found[("vllm", ())] = {}
    if not found:
        raise ScrapeError(f"{source}: no vLLM or SGLang metric on this page (no vllm:... or sglang:... series); "
                          "is it the engine's /metrics (SGLang needs --enable-metrics)?")
    servers = [_signals(engine, ident, {f: v for f, (_, v) in fields.items()}, configs, source)
               for (engine, ident), fields in found.items()]
    servers.sort(key=lambda s: (s.engine, s.model, s.labels))
    return Snapshot(source, taken_at, tuple(servers))


def _check_lines(text: str, source: str) -> None:
    """ScrapeError for a line longer, or with more labels, than any engine's series, before the parser spends
    seconds on it."""
    for n, line in enumerate(text.split("\n"), 1):
        labels = line.count('="') if len(line) > 500 else 0
        if len(line) > MAX_LINE_CHARS or labels > MAX_LINE_LABELS:
            raise ScrapeError(f"{source}: line {n:,} ({len(line):,} characters, {labels:,} labels) is larger than any "
                              f"engine's series (at most {MAX_LINE_CHARS:,} characters and {MAX_LINE_LABELS} labels); "
                              "is it the engine's own /metrics page?")


def _config_for(ident: dict[str, str], configs: list[dict[str, str]]) -> dict[str, str]:
    """vLLM's cache_config_info for this server: the one with its engine index (0.33.0 labels each engine), else
    the only one (older releases carry neither model_name nor engine)."""
    same = [c for c in configs if c.get("engine") == ident.get("engine")] if "engine" in ident else []
    if same:
        return same[0]
    unlabelled = [c for c in configs if "engine" not in c or not c["engine"]]
    return unlabelled[0] if len(unlabelled) == 1 else (configs[0] if len(configs) == 1 else {})


# vLLM's cache_config_info labels kvbudget reads: CacheConfig.metrics_info() writes every field with str() (vLLM 0.33.0,
# vllm/config/cache.py), so a count is a decimal whole number and a field not yet set is "None".
_CONFIG_COUNTS = ("num_gpu_blocks", "block_size", "kv_cache_size_tokens")


def cache_config_figures(labels: dict[str, str], where: str) -> dict[str, object]:
    """The figures of one ``vllm:cache_config_info`` series: num_gpu_blocks, block_size, kv_cache_size_tokens (whole
    numbers >= 1), gpu_memory_utilization (0 < f <= 1) and cache_dtype; a label absent or "None" is None. Any other
    value is refused naming the label (was taken as absent, and the blocks check skipped with exit 0): vLLM writes
    str() of an int or a float there, never -5, abc or 1e99."""
    out: dict[str, object] = {}
    for name in _CONFIG_COUNTS:
        text = labels.get(name)
        if text is None or text == "None":
            out[name] = None
            continue
        if not (text.isascii() and text.isdecimal() and len(text) <= 15 and int(text) >= 1):
            raise ScrapeError(f"{where}: vllm:cache_config_info label {name}={excerpt(text, 40)}, which vLLM never "
                              "writes (a whole number of at least 1, or None); give the engine's own /metrics page")
        out[name] = int(text)
    text = labels.get("gpu_memory_utilization")
    util: float | None = None
    if text is not None and text != "None":
        try:
            util = float(text) if len(text) <= 40 and text.isascii() and "_" not in text else math.nan
        except ValueError:
            util = math.nan
        if not 0 < util <= 1:
            raise ScrapeError(f"{where}: vllm:cache_config_info label gpu_memory_utilization={excerpt(text, 40)}, "
                              "which vLLM never runs with (a fraction in (0, 1]); give the engine's own /metrics page")
    out["gpu_memory_utilization"] = util
    out["cache_dtype"] = labels.get("cache_dtype")
    return out


def _signals(engine: str, ident: tuple[tuple[str, str], ...], fields: dict[str, float],
             configs: list[dict[str, str]], source: str) -> Signals:
    model = dict(ident).get("model_name", "")
    values: dict[str, object] = {f: (int(v) if f in _INTEGRAL else v) for f, v in fields.items()}
    hits, queries = values.get("prefix_hits"), values.get("prefix_queries")
    if isinstance(hits, (int, float)) and isinstance(queries, (int, float)) and hits > queries:
        # vLLM counts a hit among the prompt tokens it looked up (v1/metrics/stats.py PrefixCacheStats): more hits
        # than lookups was shown as a 100% hit rate, '100 of 10', exit 0
        name = f"{model or engine}" + "".join(f", {k}={v}" for k, v in ident if k != "model_name")
        raise ScrapeError(f"{source}: {name} counts {hits:,.0f} prefix-cache hits of {queries:,.0f} tokens looked up, "
                          "more hits than lookups, which no engine counts; is the page one server's own /metrics?")
    rate = values.get("prefix_hit_rate")
    if isinstance(rate, float) and rate > 1:  # SGLang's first Prometheus metrics reported a percentage
        values["prefix_hit_rate"] = min(rate / 100, 1.0)
    if engine == "vllm" and configs:
        c = cache_config_figures(_config_for(dict(ident), configs), source)
        values.update(num_gpu_blocks=c["num_gpu_blocks"], block_size=c["block_size"],
                      gpu_memory_utilization=c["gpu_memory_utilization"], cache_dtype=c["cache_dtype"],
                      kv_tokens=c["kv_cache_size_tokens"])
    return Signals(engine, model, ident, **values)  # type: ignore[arg-type]


# --- reading a source: an http(s) URL or a saved file ------------------------------------------------------------


def is_url(source: str) -> bool:
    return source.lower().startswith(("http://", "https://"))


def within(seconds: float, call: Callable[[], T]) -> T:
    """``call()``, run in a daemon thread and given up on (TimeoutError) after ``seconds``: a server that trickles
    its status line or headers a byte at a time keeps every socket wait under the timeout, so only a clock around
    the whole exchange bounds it. The abandoned thread ends at its own socket timeout."""
    import threading

    box: list[tuple[bool, object]] = []

    def run() -> None:
        try:
            box.append((True, call()))
        except BaseException as exc:  # handed to the caller's thread, whatever it is
            box.append((False, exc))

    thread = threading.Thread(target=run, name="kvbudget-fetch", daemon=True)
    thread.start()
    thread.join(seconds)
    if not box:
        raise TimeoutError
    ok, value = box[0]
    if not ok:
        raise value  # type: ignore[misc]
    return value  # type: ignore[return-value]


def fetch(url: str, *, timeout: float = DEFAULT_TIMEOUT_S, max_bytes: int = MAX_EXPOSITION_BYTES,
          clock: Callable[[], float] | None = None) -> str:
    """The body of ``url`` (http or https), at most ``max_bytes`` bytes; ScrapeError naming the fault (refused, timed
    out, an HTTP error status, not HTTP, too large). Time: each socket wait is at most ``timeout``, the deadline is
    checked between reads (``read1``: whatever one wait brought), and the whole exchange is given up on after
    ``timeout`` + ``GRACE_S`` (``within``), so a server that trickles its headers or page is cut off."""
    import http.client
    import socket
    import time
    import urllib.error
    import urllib.parse
    import urllib.request

    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 -- raises ValueError for a port that is not a number in 0..65535
    except ValueError as exc:  # an unclosed IPv6 bracket, a bad port
        raise ScrapeError(f"{url[:200]}: not a URL kvbudget can fetch ({str(exc)[:80]}); give "
                          "http://HOST:PORT/metrics") from None
    if "@" in parts.netloc:  # urllib would take user:password@host as the host name ("unknown host")
        raise ScrapeError(f"{parts.scheme}://{parts.hostname or ''}{parts.path}: credentials in the URL are not sent; give "
                          "http://HOST:PORT/metrics, or save a page behind authentication with curl and pass the file")
    now = clock or time.monotonic
    deadline = now() + timeout

    def get() -> list[bytes]:
        request = urllib.request.Request(url, headers={"Accept": "text/plain;version=0.0.4", "User-Agent": "kvbudget"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            chunks: list[bytes] = []
            size = 0
            while True:
                if now() > deadline:
                    raise TimeoutError
                chunk = response.read1(CHUNK)
                if not chunk:
                    return chunks
                size += len(chunk)
                if size > max_bytes:
                    raise ScrapeError(f"{url}: more than {max_bytes:,} bytes, far more than an engine's /metrics page "
                                      "(is it the right URL?)")
                chunks.append(chunk)

    try:
        chunks = within(timeout + min(GRACE_S, timeout), get)
    except ScrapeError:  # too large (a ValueError, not a bad URL)
        raise
    except urllib.error.HTTPError as exc:
        raise ScrapeError(f"{url}: HTTP {exc.code} {exc.reason or ''}".rstrip()
                          + " (is it the engine's /metrics path and port?)") from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, ConnectionRefusedError):
            raise ScrapeError(f"{url}: connection refused (is the server running, and listening on this port?)") from None
        if isinstance(reason, TimeoutError):
            raise ScrapeError(f"{url}: no answer within {timeout:g} s (is the server overloaded, or the host "
                              "unreachable?)") from None
        if isinstance(reason, socket.gaierror):
            raise ScrapeError(f"{url}: unknown host (check the name in the URL)") from None
        raise ScrapeError(f"{url}: cannot connect ({str(reason)[:80]})") from None
    except TimeoutError:
        raise ScrapeError(f"{url}: no answer within {timeout:g} s (is the server overloaded, or stalled?)") from None
    except (ConnectionError, OSError) as exc:
        raise ScrapeError(f"{url}: the connection failed ({exc.__class__.__name__}); is the server running?") from None
    except http.client.InvalidURL as exc:
        raise ScrapeError(f"{url[:200]}: not a URL kvbudget can fetch ({str(exc)[:80]}); give "
                          "http://HOST:PORT/metrics") from None
    except http.client.HTTPException as exc:  # a bad status line, too many headers: not an HTTP server
        raise ScrapeError(f"{url}: the answer is not HTTP ({exc.__class__.__name__}); is it the engine's address and "
                          "port?") from None
    except ValueError as exc:  # a URL urllib cannot read (a bad port, a bad host)
        raise ScrapeError(f"{url}: not a URL kvbudget can fetch ({str(exc)[:80]})") from None
    return b"".join(chunks).decode("utf-8", errors="replace")


def read_source(source: str, what: str = "--metrics", *, timeout: float = DEFAULT_TIMEOUT_S) -> str:
    """The text of ``source``: fetched when it is an http(s) URL, else read as a saved file (size-capped)."""
    if is_url(source):
        return fetch(source, timeout=timeout)
    if "://" in source[:12]:
        raise ScrapeError(f"{what} {source[:60]!r}: only http:// and https:// URLs or a saved file")
    from ..inputs import read_text

    return read_text(source, what, MAX_EXPOSITION_BYTES, errors="replace")


def scrape(source: str, *, timeout: float = DEFAULT_TIMEOUT_S, clock: Callable[[], float] | None = None) -> Snapshot:
    """Read and parse one source; the snapshot is stamped with ``clock()`` (default: the wall clock) as read."""
    import time

    text = read_source(source, timeout=timeout)
    return parse(text, source, (clock or time.time)())


def servers_by_key(snapshot: Snapshot | None) -> dict[tuple[str, str, tuple[tuple[str, str], ...]], Signals]:
    return {} if snapshot is None else {s.key: s for s in snapshot.servers}

