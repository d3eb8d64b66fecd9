"""A small, bounded client for Prometheus's HTTP query API, and the fleet signals kvbudget reads from it.

Three layers, I/O only in the first:

* ``query`` / ``query_range`` send one PromQL query to ``/api/v1/query`` or ``/api/v1/query_range``
  (urllib, a timeout, a cap on the answer's size) and return frozen ``Series`` / ``RangeSeries``.
  Every failure is a ``PrometheusError`` (an ``InputError``) of one line that names the problem and
  the fix: server down, timeout, an HTTP error status, Prometheus's own ``"status": "error"``
  answer, an answer that is not JSON or not a query result.
* ``fleet_signals`` asks, for one label selector, the per-replica serving signals in a handful of
  instant queries evaluated at one instant, and ``fleet_from_results`` (pure) folds the answers into
  one ``FleetReplica`` per ``(instance, pod)``.
* ``rank_by_risk`` (pure) orders the replicas, the one nearest to running out of KV cache first, each
  with its reason in words.

Metric names, checked in the engines' sources:

* vLLM 0.33.0, ``vllm/v1/metrics/loggers.py``: gauges ``vllm:num_requests_running``,
  ``vllm:num_requests_waiting``, ``vllm:kv_cache_usage_perc`` (a fraction, 1 = full), counters
  ``vllm:num_preemptions``, ``vllm:prefix_cache_queries``, ``vllm:prefix_cache_hits`` (exposed with
  ``_total``), the info gauge ``vllm:cache_config_info`` whose labels are ``CacheConfig``'s fields
  (``num_gpu_blocks``, ``block_size``, ``gpu_memory_utilization`` ...); labels ``model_name``,
  ``engine`` (one engine per data-parallel rank). Older releases: ``vllm:gpu_cache_usage_perc``
  (deprecated for ``kv_cache_usage_perc`` in vLLM PR #18354, no longer shown by default) and
  ``vllm:gpu_prefix_cache_{queries,hits}_total`` (deprecated in 0.10 for ``prefix_cache_*``).
* SGLang 0.5.23, ``sglang/srt/observability/metrics_collector.py``: gauges
  ``sglang:num_running_reqs``, ``sglang:num_queue_reqs``, ``sglang:token_usage``,
  ``sglang:cache_hit_rate``, ``sglang:max_total_num_tokens``, counter
  ``sglang:num_retracted_requests_total`` (SGLang's preemption: a request retracted from the batch).
  Only the attention-TP rank 0 of each scheduler reports (one series per ``dp_rank``).
* NVIDIA DCGM exporter: ``DCGM_FI_DEV_FB_USED`` / ``DCGM_FI_DEV_FB_FREE`` (framebuffer MiB) with
  labels ``gpu``, ``UUID``, ``Hostname`` and, on Kubernetes, ``pod`` (``exported_pod`` when the
  scrape does not honour the exporter's labels).

Request counts are summed over a replica's series (its engines / DP ranks), usage fractions are the
largest of them: the fullest engine is the one that queues first.
"""

from __future__ import annotations

import http.client
import json
import math
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence

from .._record import record, replace
from ..units import InputError, excerpt
from .exposition import GRACE_S, cache_config_figures, within

DEFAULT_SELECTOR = '{job="vllm"}'
DEFAULT_WINDOW = "5m"
DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MAX_BYTES = 32 << 20
KV_FULL = 0.9  # KV usage from which a replica counts as full (vLLM preempts at 100%)
REPLICA_LABELS = ("instance", "pod")
_CHUNK = 1 << 16


class PrometheusError(InputError):
    """Prometheus could not be asked, or did not answer a query: one line, naming the fix."""

    def __init__(self, message: str, error_type: str | None = None) -> None:
        super().__init__(message)
        self.error_type = error_type


@record
class Prometheus:
    """Where the Prometheus server is, and the bounds on every request to it."""

    url: str
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_bytes: int = DEFAULT_MAX_BYTES


@record
class Series:
    """One series of an instant query: its labels (sorted) and its value at ``timestamp`` (s)."""

    labels: tuple[tuple[str, str], ...]
    value: float
    timestamp: float

    def label(self, name: str) -> str | None:
        return dict(self.labels).get(name)


@record
class RangeSeries:
    """One series of a range query: its labels (sorted) and its ``(timestamp, value)`` points."""

    labels: tuple[tuple[str, str], ...]
    points: tuple[tuple[float, float], ...]


@record
class GpuMemory:
    """One GPU's framebuffer as the DCGM exporter reports it (MiB)."""

    instance: str
    gpu: str
    uuid: str | None = None
    hostname: str | None = None
    pod: str | None = None
    fb_used_mib: float | None = None
    fb_free_mib: float | None = None


@record
class FleetReplica:
    """What one serving replica reports; ``None`` where its engine does not export the signal."""

    instance: str
    pod: str | None = None
    engine: str | None = None  # "vllm" or "sglang"
    running: float | None = None
    waiting: float | None = None
    kv_usage: float | None = None  # fraction of the KV cache in use, 0..1
    preemptions_per_s: float | None = None  # vLLM preemptions / SGLang retractions, rate over the window
    prefix_hit_rate: float | None = None  # cached tokens / queried tokens over the window, 0..1
    num_gpu_blocks: int | None = None
    block_size: int | None = None
    gpu_memory_utilization: float | None = None
    max_total_num_tokens: int | None = None  # SGLang's KV pool, tokens
    gpus: tuple[GpuMemory, ...] = ()

    @property
    def name(self) -> str:
        return self.pod or self.instance


@record
class Fleet:
    """The replicas a selector matched, at one evaluation instant, and DCGM GPUs no replica claimed."""

    replicas: tuple[FleetReplica, ...]
    at: float
    unmatched_gpus: tuple[GpuMemory, ...] = ()


@record
class RankedReplica:
    """A replica's place in the risk order (1 = most at risk) and why, in words."""

    rank: int
    replica: FleetReplica
    reason: str


# --- the selector -------------------------------------------------------------------------------

_LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
_STRING = r'"(?:[^"\\\n]|\\.)*"' + r"|'(?:[^'\\\n]|\\.)*'" + r"|`[^`]*`"
_MATCHER = re.compile(rf"\s*({_LABEL})\s*(=~|!~|!=|=)\s*({_STRING})\s*(,|$)", re.DOTALL)
_WINDOW = re.compile(r"(?:[0-9]+(?:ms|s|m|h|d|w|y))+")
_SELECTOR_HINT = "give label matchers in braces, e.g. --selector '{job=\"vllm\",namespace=\"prod\"}'"


def parse_selector(selector: str) -> tuple[str, ...]:
    """The label matchers of ``{a="x", b=~"y"}``, each as ``name op "string"``; anything else refused.

    The selector is spliced into PromQL after a metric name, so only matchers pass: no metric name,
    no ``__name__`` matcher, no functions or operators, strings closed where they open.
    """
    text = selector.strip()
    if not (text.startswith("{") and text.endswith("}")):
        raise PrometheusError(f"--selector {selector!r} is not a label selector: {_SELECTOR_HINT}")
    body = text[1:-1].strip()
    matchers: list[str] = []
    pos = 0
    while pos < len(body):
        m = _MATCHER.match(body, pos)
        if m is None:
            raise PrometheusError(f"--selector {selector!r}: cannot read a label matcher at {body[pos:pos + 30]!r}: {_SELECTOR_HINT}")
        name, op, value, sep = m.groups()
        if name == "__name__":
            raise PrometheusError(f"--selector {selector!r} names a metric (__name__): leave it out, kvbudget picks the metrics; {_SELECTOR_HINT}")
        matchers.append(f"{name}{op}{value}")
        pos = m.end()
        if sep == "" and pos < len(body):
            raise PrometheusError(f"--selector {selector!r}: matchers must be separated by commas: {_SELECTOR_HINT}")
    return tuple(matchers)


_UNIT_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def check_window(window: str) -> str:
    if not _WINDOW.fullmatch(window) or len(window) > 40:
        raise PrometheusError(f"rate window {window!r} is not a Prometheus duration: use e.g. 5m, 30s or 1h")
    seconds = sum(int(n) * _UNIT_S[u] for n, u in re.findall(r"([0-9]+)(ms|s|m|h|d|w|y)", window))
    if not 0 < seconds <= 10 * _UNIT_S["y"]:  # '0s' was sent, for Prometheus to refuse a zero-length range
        raise PrometheusError(f"rate window {window!r} is {'zero' if seconds == 0 else 'over ten years'}: give a "
                              "window of a few scrapes, e.g. 5m")
    return window


# --- HTTP -------------------------------------------------------------------------------------------


def _base_url(url: str) -> str:
    try:
        parts = urllib.parse.urlsplit(url.strip())
        parts.port  # noqa: B018 -- raises ValueError for a port that is not a number in 0..65535
    except ValueError:  # an unclosed IPv6 bracket, a bad port
        parts = urllib.parse.urlsplit("")
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise PrometheusError(f"--prometheus {url!r} is not a server address: give http://HOST:PORT (e.g. http://prometheus:9090)")
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))


def _read_capped(read: Callable[[int], bytes], limit: int, deadline: float, what: str) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk: bytes = read(_CHUNK)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise PrometheusError(f"the answer from {what} is larger than {limit:,} bytes: narrow --selector, or raise the size limit")
        if time.monotonic() > deadline:
            raise TimeoutError
        chunks.append(chunk)


def _snippet(data: bytes) -> str:
    text = data[:120].decode("utf-8", "replace")
    return " ".join(text.split()) or "(empty)"


def _error_answer(data: bytes) -> tuple[str, str] | None:
    """Prometheus's ``{"status": "error", "errorType": ..., "error": ...}``, if that is what ``data`` is."""
    try:
        doc = json.loads(data)
    except ValueError:
        return None
    if isinstance(doc, dict) and doc.get("status") == "error":
        return str(doc.get("errorType", "error")), str(doc.get("error", "(no message)"))
    return None


def _rejected(promql: str, error_type: str, error: str) -> PrometheusError:
    return PrometheusError(f"Prometheus rejected the query {promql!r}: {error_type}: {' '.join(error.split())}", error_type)


def _timed_out(base: str, prom: Prometheus) -> PrometheusError:
    return PrometheusError(f"Prometheus at {base} did not answer within {prom.timeout_s:g} s: check the address, or ask for a smaller --selector")


def _get(prom: Prometheus, path: str, params: Mapping[str, str]) -> object:
    """``data`` of a successful answer to GET ``path``: the one place that talks to the network.

    The socket timeout bounds each connect and read; the deadline between reads bounds the whole
    answer (at most ``timeout_s`` + ``GRACE_S``), and ``max_bytes`` its size.
    """
    base = _base_url(prom.url)
    url = f"{base}{path}?{urllib.parse.urlencode(dict(params))}"
    what = f"{base}{path}"
    promql = params.get("query", "")
    deadline = time.monotonic() + prom.timeout_s

    def get() -> tuple[bytes, urllib.error.HTTPError | None, bytes]:
        """(the body, or the HTTP error and the start of its body)"""
        request = urllib.request.Request(url, headers={"Accept": "application/json", "User-Agent": "kvbudget"})
        try:
            with urllib.request.urlopen(request, timeout=prom.timeout_s) as resp:
                return _read_capped(resp.read1, prom.max_bytes, deadline, what), None, b""
        except urllib.error.HTTPError as err:
            try:
                data = _read_capped(err.read1, 1 << 20, deadline, what) if err.fp is not None else b""
            except (OSError, http.client.HTTPException, AttributeError):
                data = b""
            return b"", err, data

    try:
        body, failed, data = within(prom.timeout_s + min(GRACE_S, prom.timeout_s), get)
        if failed is None:
            return parse_answer(body, what, promql)
    except TimeoutError:
        raise _timed_out(base, prom) from None
    except urllib.error.URLError as err:
        if isinstance(err.reason, TimeoutError):
            raise _timed_out(base, prom) from None
        if isinstance(err.reason, ConnectionRefusedError):
            raise PrometheusError(f"cannot reach Prometheus at {base}: connection refused; is it running, and is --prometheus its HOST:PORT?") from None
        raise PrometheusError(f"cannot reach Prometheus at {base}: {err.reason}; check --prometheus") from None
    except PrometheusError:
        raise
    except http.client.HTTPException as err:  # a malformed status line: not an HTTP server
        raise PrometheusError(f"{base} does not answer in HTTP ({err!r}): is --prometheus the Prometheus server's HOST:PORT?") from None
    except OSError as err:  # reset mid-answer ...
        raise PrometheusError(f"cannot read the answer of Prometheus at {base}: {err!r}; check --prometheus") from None
    except InputError:
        raise
    except ValueError as err:  # a URL urllib cannot read (a bad host)
        raise PrometheusError(f"--prometheus {base!r} is not a URL kvbudget can fetch ({str(err)[:80]}); give "
                              "http://HOST:9090") from None
    answer = _error_answer(data)
    if answer is not None:
        raise _rejected(promql, *answer)
    raise PrometheusError(f"{what} answered HTTP {failed.code} {failed.reason}: {_snippet(data)!r}; check that --prometheus is the Prometheus server's address")


def parse_answer(body: bytes, what: str, promql: str = "") -> object:
    """The ``data`` member of a Prometheus API answer; a ``PrometheusError`` for any other answer."""
    try:
        doc = json.loads(body)
    except ValueError:
        raise PrometheusError(
            f"the answer from {what} is not JSON (it begins {_snippet(body)!r}): is --prometheus the Prometheus server's address?"
        ) from None
    if not isinstance(doc, dict) or doc.get("status") not in ("success", "error"):
        raise PrometheusError(f"the answer from {what} is JSON but not a Prometheus API answer (no \"status\"): is --prometheus a Prometheus server?")
    if doc["status"] == "error":
        raise _rejected(promql, str(doc.get("errorType", "error")), str(doc.get("error", "(no message)")))
    return doc.get("data")


def _shape_error(what: str, detail: str) -> PrometheusError:
    return PrometheusError(f"the answer from {what} is not a query result ({detail}): is --prometheus a Prometheus server?")


def _labels(metric: object, what: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(metric, dict):
        raise _shape_error(what, "a series without its labels")
    return tuple(sorted((str(k), str(v)) for k, v in metric.items()))


def _point(pair: object, what: str) -> tuple[float, float]:
    if not (isinstance(pair, list) and len(pair) == 2):
        raise _shape_error(what, f"a sample that is not [time, value]: {str(pair)[:60]!r}")
    try:
        return float(pair[0]), float(pair[1])
    except (TypeError, ValueError):
        raise _shape_error(what, f"a sample whose value is not a number: {str(pair)[:60]!r}") from None


def _result(data: object, what: str, expected: Sequence[str]) -> tuple[str, list[object]]:
    if not isinstance(data, dict) or "result" not in data:
        raise _shape_error(what, "no data.result")
    kind = data.get("resultType")
    if kind not in expected:
        raise _shape_error(what, f"resultType {kind!r}, expected {' or '.join(expected)}")
    result = data["result"]
    if kind == "scalar":
        return str(kind), [{"metric": {}, "value": result}]
    if not isinstance(result, list):
        raise _shape_error(what, "data.result is not a list")
    return str(kind), result


def series_of(data: object, what: str = "Prometheus") -> tuple[Series, ...]:
    """The series of an instant query's ``data`` (a vector, or a scalar as one series without labels)."""
    _, result = _result(data, what, ("vector", "scalar"))
    out: list[Series] = []
    for item in result:
        if not isinstance(item, dict):
            raise _shape_error(what, "a series that is not an object")
        ts, value = _point(item.get("value"), what)
        out.append(Series(_labels(item.get("metric"), what), value, ts))
    return tuple(out)


def range_series_of(data: object, what: str = "Prometheus") -> tuple[RangeSeries, ...]:
    """The series of a range query's ``data`` (a matrix)."""
    _, result = _result(data, what, ("matrix",))
    out: list[RangeSeries] = []
    for item in result:
        if not isinstance(item, dict) or not isinstance(item.get("values"), list):
            raise _shape_error(what, "a range series without its values")
        out.append(RangeSeries(_labels(item.get("metric"), what), tuple(_point(p, what) for p in item["values"])))
    return tuple(out)


def query(prom: Prometheus, promql: str, at: float | None = None) -> tuple[Series, ...]:
    """An instant query (``/api/v1/query``), evaluated at ``at`` (Unix seconds) or now."""
    params = {"query": promql, "timeout": f"{prom.timeout_s:g}s"}
    if at is not None:
        params["time"] = f"{at:.3f}"
    return series_of(_get(prom, "/api/v1/query", params), f"{_base_url(prom.url)}/api/v1/query")


def query_range(prom: Prometheus, promql: str, start: float, end: float, step_s: float) -> tuple[RangeSeries, ...]:
    """A range query (``/api/v1/query_range``) from ``start`` to ``end`` (Unix seconds), one point per ``step_s``."""
    if not (step_s > 0 and end >= start):
        raise PrometheusError(f"range query from {start} to {end} step {step_s}: the step must be positive and the end not before the start")
    params = {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step_s:g}", "timeout": f"{prom.timeout_s:g}s"}
    return range_series_of(_get(prom, "/api/v1/query_range", params), f"{_base_url(prom.url)}/api/v1/query_range")


# --- the fleet signals --------------------------------------------------------------------------------

_BY = "by (" + ", ".join(REPLICA_LABELS) + ")"


def fleet_queries(selector: str = DEFAULT_SELECTOR, window: str = DEFAULT_WINDOW, dcgm_selector: str = "{}") -> dict[str, str]:
    """The PromQL of each fleet signal for ``selector``: both vLLM metric generations, then SGLang's."""
    inner = ",".join(parse_selector(selector))
    w = check_window(window)

    def s(metric: str) -> str:
        return f"{metric}{{{inner}}}"

    def agg(how: str, metric: str) -> str:
        return f"{how} {_BY} ({s(metric)})"

    def rate(metric: str) -> str:
        return f"sum {_BY} (rate({s(metric)}[{w}]))"

    def tagged(expr: str, engine: str) -> str:
        return f'label_replace({expr}, "engine", "{engine}", "", "")'

    dcgm = ",".join(parse_selector(dcgm_selector))
    counted = ",".join(('__name__=~"' + "|".join(_COUNTED) + '"', *parse_selector(selector)))
    return {
        "running": f"{tagged(agg('sum', 'vllm:num_requests_running'), 'vllm')} or {tagged(agg('sum', 'sglang:num_running_reqs'), 'sglang')}",
        "waiting": f"{agg('sum', 'vllm:num_requests_waiting')} or {agg('sum', 'sglang:num_queue_reqs')}",
        "kv_usage": " or ".join(agg("max", m) for m in ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage")),
        "preemptions_per_s": f"{rate('vllm:num_preemptions_total')} or {rate('sglang:num_retracted_requests_total')}",
        "prefix_hit_rate": (
            f"({rate('vllm:prefix_cache_hits_total')} / {rate('vllm:prefix_cache_queries_total')})"
            f" or ({rate('vllm:gpu_prefix_cache_hits_total')} / {rate('vllm:gpu_prefix_cache_queries_total')})"
            f" or {agg('avg', 'sglang:cache_hit_rate')}"
        ),
        "cache_config": s("vllm:cache_config_info"),
        "max_total_num_tokens": agg("max", "sglang:max_total_num_tokens"),
        "fb_used": f"DCGM_FI_DEV_FB_USED{{{dcgm}}}",
        "fb_free": f"DCGM_FI_DEV_FB_FREE{{{dcgm}}}",
        # one engine series held twice (two scrape jobs of one server): the sums above would count it twice
        "duplicates": f"count by (__name__, {', '.join(_SERIES_LABELS)}) ({{{counted}}}) > 1",
    }


# The series the fleet's sums add up, and the labels that tell one engine's series apart on a replica (vLLM's engine
# index and model, SGLang's ranks); what else differs (job, service, endpoint) is where Prometheus scraped it from.
_COUNTED = ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:num_preemptions_total",
            "sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:num_retracted_requests_total")
_SERIES_LABELS = (*REPLICA_LABELS, "engine", "model_name", "engine_type", "tp_rank", "pp_rank", "dp_rank", "moe_ep_rank")


def fleet_signals(
    prom: Prometheus,
    selector: str = DEFAULT_SELECTOR,
    *,
    window: str = DEFAULT_WINDOW,
    dcgm_selector: str = "{}",
    at: float | None = None,
) -> Fleet:
    """Every replica ``selector`` matches, with its serving signals, all evaluated at one instant."""
    from concurrent.futures import ThreadPoolExecutor

    queries = fleet_queries(selector, window, dcgm_selector)
    when = time.time() if at is None else at
    results: dict[str, tuple[Series, ...]] = {}
    # asked at once, each within the timeout: one after another, a server answering each just inside it took ten
    # timeouts (41 s at 5 s) before its answer or refusal; the first failure in the queries' order is the one told
    with ThreadPoolExecutor(max_workers=len(queries), thread_name_prefix="kvbudget-query") as pool:
        asked = {key: pool.submit(query, prom, promql, when) for key, promql in queries.items()}
    for key, future in asked.items():
        try:
            results[key] = future.result()
        except PrometheusError as err:
            if err.error_type == "bad_data":
                flag = "the DCGM selector" if key.startswith("fb_") else "--selector"
                raise PrometheusError(f"{flag} was not accepted by Prometheus: {err}; {_SELECTOR_HINT}", err.error_type) from None
            raise
    return fleet_from_results(results, when)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _key(s: Series) -> tuple[str, str | None]:
    return s.label("instance") or "", s.label("pod") or None


def _host(instance: str) -> str:
    if instance.startswith("["):
        return instance[1 : instance.find("]")] if "]" in instance else instance
    return instance.rsplit(":", 1)[0] if instance.count(":") == 1 else instance


def gpus_of(used: Iterable[Series], free: Iterable[Series]) -> tuple[GpuMemory, ...]:
    """DCGM's per-GPU framebuffer series merged into one ``GpuMemory`` per (instance, GPU)."""
    found: dict[tuple[str, str, str], GpuMemory] = {}
    for field, series in (("fb_used_mib", used), ("fb_free_mib", free)):
        for s in series:
            key = (s.label("instance") or "", s.label("gpu") or "", s.label("UUID") or "")
            gpu = found.get(key) or GpuMemory(
                key[0], key[1], s.label("UUID"), s.label("Hostname"), s.label("pod") or s.label("exported_pod")
            )
            found[key] = replace(gpu, **{field: _finite(s.value)})
    return tuple(gpu for _, gpu in sorted(found.items()))


def _serves(gpu: GpuMemory, replica: FleetReplica) -> bool:
    if gpu.pod and replica.pod:
        return gpu.pod == replica.pod
    host = _host(replica.instance)
    return host in (_host(gpu.instance), gpu.hostname)


def fleet_from_results(results: Mapping[str, Sequence[Series]], at: float) -> Fleet:
    """One ``FleetReplica`` per ``(instance, pod)`` from the answers to ``fleet_queries`` (pure)."""
    fields: dict[tuple[str, str | None], dict[str, object]] = {}

    def entry(s: Series) -> dict[str, object]:
        return fields.setdefault(_key(s), {})

    for s in results.get("duplicates", ())[:1]:
        said = ",".join(f'{k}="{v}"' for k, v in s.labels if k in (*REPLICA_LABELS, "engine", "tp_rank", "dp_rank"))
        raise PrometheusError(f"Prometheus holds {excerpt(s.label('__name__') or 'a series', 50)[1:-1]}{{"
                              f"{excerpt(said, 90)[1:-1]}}} {s.value:g} times (one server scraped by more than one "
                              "job?): the sums would count it that often; narrow --selector to one scrape job")
    for name in ("running", "waiting", "kv_usage", "preemptions_per_s", "prefix_hit_rate"):
        for s in results.get(name, ()):
            e = entry(s)
            if name in e:  # each query aggregates by replica: a second series is another engine's answer
                raise PrometheusError(f"Prometheus answered two {name} series for replica {excerpt(_key(s)[0], 60)[1:-1]}"
                                      f"{' pod ' + excerpt(_key(s)[1] or '', 60)[1:-1] if _key(s)[1] else ''} (vLLM and "
                                      "SGLang metrics under one instance label): narrow --selector to one engine's "
                                      "scrape job")
            e[name] = _finite(s.value)
            if name == "running" and s.label("engine"):
                e["engine"] = s.label("engine")
    for s in results.get("cache_config", ()):
        e = entry(s)
        c = cache_config_figures(dict(s.labels), f"Prometheus, replica {excerpt(_key(s)[0], 60)[1:-1]}")
        for name in ("num_gpu_blocks", "block_size", "gpu_memory_utilization"):
            e.setdefault(name, c[name])
        e.setdefault("engine", "vllm")
    for s in results.get("max_total_num_tokens", ()):
        value = _finite(s.value)
        entry(s)["max_total_num_tokens"] = None if value is None else int(value)
    gpus = gpus_of(results.get("fb_used", ()), results.get("fb_free", ()))
    replicas = [replace(FleetReplica(k[0], k[1]), **v) for k, v in sorted(fields.items(), key=lambda kv: (kv[0][0], kv[0][1] or ""))]
    claimed: set[GpuMemory] = set()
    out: list[FleetReplica] = []
    for r in replicas:
        mine = tuple(g for g in gpus if _serves(g, r))
        claimed.update(mine)
        out.append(replace(r, gpus=mine))
    return Fleet(tuple(out), at, tuple(g for g in gpus if g not in claimed))


# --- ranking ------------------------------------------------------------------------------------------


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _risk(r: FleetReplica) -> tuple[int, str]:
    waiting = r.waiting or 0.0
    preempt = r.preemptions_per_s or 0.0
    kv = r.kv_usage
    verb = "retracting" if r.engine == "sglang" else "preempting"  # SGLang's word for the same eviction
    preempting = f"{verb} {preempt:.2g}/s" if preempt > 0 else ""
    if kv is None:
        seen = ", ".join(x for x in (f"{waiting:g} requests waiting" if waiting > 0 else "", preempting) if x)
        return 5, f"{seen + '; ' if seen else ''}no KV cache usage reported: check that the selector matches the engine's metrics"
    if waiting > 0 and kv >= KV_FULL:
        extra = f", {preempting}" if preempting else ""
        return 0, f"{waiting:g} requests waiting with the KV cache {_pct(kv)} full{extra}: requests queue for KV cache space"
    if preempt > 0:
        return 1, f"{preempting} with the KV cache {_pct(kv)} full: running requests are evicted to make room"
    if kv >= KV_FULL:
        return 2, f"KV cache {_pct(kv)} full, nothing waiting yet: the next burst will queue"
    if waiting > 0:
        return 3, f"{waiting:g} requests waiting with the KV cache only {_pct(kv)} full: the queue is not for KV space (batch size or compute)"
    return 4, f"KV cache {_pct(kv)} full, no queue, no preemption"


def rank_by_risk(replicas: Iterable[FleetReplica]) -> tuple[RankedReplica, ...]:
    """The replicas, most at risk first: a queue with the KV cache near full, then preemptions, then KV usage."""
    scored = []
    for r in replicas:
        tier, reason = _risk(r)
        key = (tier, -(r.waiting or 0.0), -(r.preemptions_per_s or 0.0), -(r.kv_usage or 0.0), r.name)
        scored.append((key, r, reason))
    scored.sort(key=lambda t: t[0])
    return tuple(RankedReplica(i + 1, r, reason) for i, (_, r, reason) in enumerate(scored))
