"""A real Prometheus scraping fake replicas on loopback, for the tests of ``kvbudget.ops.prometheus``.

``exposition_server`` serves the samples of ``tests/data/prometheus`` (counters advancing with time),
``running_prometheus`` starts Debian's ``prometheus`` binary scraping them every 500 ms and waits,
bounded, until every target has been scraped enough times for ``rate()``; both stop at the end.
``canned_server`` answers every request with one fixed HTTP status and body (a broken "Prometheus").
A missing ``prometheus`` binary fails the test (``make test`` installs it), it is never skipped.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent / "data" / "prometheus"
SCRAPE_INTERVAL = "500ms"
_RATE = re.compile(r"RATE\(([0-9.]+)\)")


@dataclass(frozen=True)
class Target:
    """One scrape target: the file it serves, at /<name>/metrics, and the labels Prometheus gives it."""

    name: str
    sample: str
    job: str
    instance: str


# The fleet of the tests: node-a runs vLLM 0.33.0 at ease, node-b an older vLLM with a queue on a full
# KV cache, node-c SGLang retracting requests; DCGM runs on node-a (2 GPUs) and node-b (1 GPU).
TARGETS = (
    Target("a", "vllm-0.33.0.prom", "vllm", "node-a:8000"),
    Target("b", "vllm-legacy.prom", "vllm", "node-b:8000"),
    Target("c", "sglang-0.5.23.prom", "sglang", "node-c:30000"),
    Target("dcgm-a", "dcgm-node-a.prom", "dcgm", "node-a:9400"),
    Target("dcgm-b", "dcgm-node-b.prom", "dcgm", "node-b:9400"),
)


def render(text: str, elapsed_s: float) -> str:
    """The exposition text with every ``RATE(x)`` replaced by the counter's value ``x * elapsed_s``."""
    return _RATE.sub(lambda m: repr(float(m.group(1)) * elapsed_s), text)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def _serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@contextmanager
def exposition_server(targets: tuple[Target, ...] = TARGETS) -> Iterator[int]:
    """A loopback HTTP server serving each target's sample at ``/<name>/metrics``; yields its port."""
    pages = {f"/{t.name}/metrics": (DATA / t.sample).read_text(encoding="utf-8") for t in targets}
    start = time.time()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            page = pages.get(self.path)
            body = (render(page, time.time() - start) if page is not None else "not found\n").encode()
            self.send_response(200 if page is not None else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    with _serving(Handler) as port:
        yield port


@contextmanager
def canned_server(status: int, body: bytes, delay_s: float = 0.0, content_type: str = "application/json") -> Iterator[str]:
    """A loopback "Prometheus" answering every GET with ``status`` and ``body`` after ``delay_s``; yields its URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            time.sleep(delay_s)
            try:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:  # the client gave up first (the timeout test)
                pass

        def log_message(self, format: str, *args: object) -> None:
            pass

    with _serving(Handler) as port:
        yield f"http://127.0.0.1:{port}"


def scrape_config(port: int, targets: tuple[Target, ...] = TARGETS) -> str:
    """prometheus.yml: one job per engine, each target with its own instance label and metrics path."""
    jobs: dict[str, list[Target]] = {}
    for t in targets:
        jobs.setdefault(t.job, []).append(t)
    lines = ["global:", f"  scrape_interval: {SCRAPE_INTERVAL}", f"  scrape_timeout: {SCRAPE_INTERVAL}", "scrape_configs:"]
    for job, members in jobs.items():
        lines += [f"  - job_name: {job}", "    static_configs:"]
        for t in members:
            lines += [
                f"      - targets: ['127.0.0.1:{port}']",
                f"        labels: {{instance: '{t.instance}', __metrics_path__: '/{t.name}/metrics'}}",
            ]
    return "\n".join(lines) + "\n"


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=2) as resp:
        data: bytes = resp.read()
        return data


@contextmanager
def running_prometheus(tmp: Path, scrapes: int = 6, wait_s: float = 30.0, targets: tuple[Target, ...] = TARGETS) -> Iterator[str]:
    """A real Prometheus scraping ``targets`` on loopback; yields its URL once every target has ``scrapes`` samples."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("the prometheus binary is not on PATH: `make test` installs it (apt-get install -y prometheus)", pytrace=False)
    with exposition_server(targets) as exporter_port:
        config = tmp / "prometheus.yml"
        config.write_text(scrape_config(exporter_port, targets), encoding="utf-8")
        port = free_port()
        log = tmp / "prometheus.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                stdout=out, stderr=subprocess.STDOUT,
            )
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_ready(proc, url, len(targets), scrapes, time.monotonic() + wait_s, log)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def _wait_ready(proc: subprocess.Popen[bytes], url: str, n_targets: int, scrapes: int, deadline: float, log: Path) -> None:
    """Until /-/ready answers and every target's ``up`` has ``scrapes`` samples; a clear failure past ``deadline``."""
    probe = f"{url}/api/v1/query?query=count(count_over_time(up%5B1m%5D)%20%3E%3D%20{scrapes})"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"prometheus exited with {proc.returncode}: {log.read_text(errors='replace')[-2000:]}", pytrace=False)
        try:
            result = json.loads(_get(probe))["data"]["result"] if _get(f"{url}/-/ready") else []
            if result and result[0]["value"][1] == str(n_targets):
                return
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.1)
    pytest.fail(f"prometheus at {url} did not scrape all {n_targets} targets {scrapes} times in time: {log.read_text(errors='replace')[-2000:]}", pytrace=False)
