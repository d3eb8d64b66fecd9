"""`kvbudget serve` under load: 5,000 POST /api/fit requests from 16 concurrent clients (keep-alive connections) to
one server process on loopback, three times. Reported: errors (any status but 200, or a failed connection: the
target is 0), requests per second, and the p50 / p99 latency (each the median of the runs). Targets: 0 errors and
p99 <= 1 s on one server process (the answers are computed in Python, on worker threads sharing the GIL).
Run by `make bench` (not by the tests). Exits 1 when a target is missed."""

from __future__ import annotations

import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

REQUESTS = int(os.environ.get("KVBUDGET_BENCH_WEB_REQUESTS", "5000"))
CLIENTS = 16
RUNS = 3
P99_TARGET_S = 1.0
BODY = json.dumps({"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100", "context": 32768, "batch": 8}).encode()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "kvbudget", "serve", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc
        except OSError:
            if proc.poll() is not None:
                raise SystemExit("kvbudget serve exited: is kvbudget[web] installed?") from None
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("kvbudget serve did not start within 30 s")


def client(port: int, n: int, latencies: list[float], errors: list[str]) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for _ in range(n):
        t0 = time.perf_counter()
        try:
            conn.request("POST", "/api/fit", BODY, {"content-type": "application/json"})
            response = conn.getresponse()
            response.read()
            if response.status != 200:
                errors.append(f"status {response.status}")
        except (OSError, http.client.HTTPException) as exc:
            errors.append(type(exc).__name__)
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        latencies.append(time.perf_counter() - t0)
    conn.close()


def one_run(port: int) -> tuple[float, float, float, int]:
    latencies: list[float] = []
    errors: list[str] = []
    shares = [REQUESTS // CLIENTS + (i < REQUESTS % CLIENTS) for i in range(CLIENTS)]
    threads = [threading.Thread(target=client, args=(port, n, latencies, errors)) for n in shares]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    latencies.sort()
    p50 = latencies[len(latencies) // 2]
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return len(latencies) / wall, p50, p99, len(errors)


def main() -> int:
    port = free_port()
    proc = start_server(port)
    try:
        client(port, 50, [], [])  # warm-up: the first answers import the engines
        runs = [one_run(port) for _ in range(RUNS)]
    finally:
        proc.terminate()
        proc.wait(10)
    rate = statistics.median(r[0] for r in runs)
    p50 = statistics.median(r[1] for r in runs)
    p99 = statistics.median(r[2] for r in runs)
    errors = sum(r[3] for r in runs)
    print(f"POST /api/fit, {REQUESTS:,} requests x {RUNS} runs, {CLIENTS} clients on loopback: {rate:,.0f} req/s, "
          f"p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms (medians), {errors} errors")
    ok = errors == 0 and p99 <= P99_TARGET_S
    print(f"{'PASS' if ok else 'FAIL'}: {errors} errors (target 0), p99 {p99 * 1000:.0f} ms (target <= {P99_TARGET_S * 1000:.0f} ms)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
