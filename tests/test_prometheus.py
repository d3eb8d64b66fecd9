"""kvbudget.ops.prometheus against a real Prometheus (Debian's package) scraping fake replicas on loopback.

The served samples are in tests/data/prometheus (see its README); the values below are checked by
hand against them. Failures are checked against loopback servers that answer badly on purpose.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvbudget.ops.prometheus import (
    Fleet,
    FleetReplica,
    GpuMemory,
    Prometheus,
    PrometheusError,
    Series,
    fleet_from_results,
    fleet_signals,
    parse_selector,
    query,
    query_range,
    rank_by_risk,
)
from kvbudget.units import InputError
from prom_fixture import canned_server, free_port, render, running_prometheus

WINDOW = "3s"  # the rate window: a few scrapes at 500 ms (a real deployment keeps the 5m default)
ALL = '{job=~"vllm|sglang"}'


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    with running_prometheus(tmp_path_factory.mktemp("prometheus")) as url:
        yield Prometheus(url, timeout_s=5.0)


@pytest.fixture(scope="module")
def fleet(prom: Prometheus) -> Fleet:
    return fleet_signals(prom, ALL, window=WINDOW)


def _by_instance(fleet: Fleet) -> dict[str, FleetReplica]:
    return {r.instance: r for r in fleet.replicas}


def test_vllm_0_33_replica_reads_back_what_it_serves(fleet: Fleet) -> None:
    a = _by_instance(fleet)["node-a:8000"]
    assert (a.engine, a.pod) == ("vllm", None)
    assert (a.running, a.waiting) == (12.0, 0.0)  # engines 0 and 1 summed: 7 + 5
    assert a.kv_usage == 0.41  # the fuller engine
    assert a.preemptions_per_s == 0.0  # the counter stands still
    assert a.prefix_hit_rate == pytest.approx((200 + 100) / (600 + 400), rel=0.02)
    assert (a.num_gpu_blocks, a.block_size, a.gpu_memory_utilization, a.max_total_num_tokens) == (27495, 16, 0.9, None)
    assert [(g.gpu, g.hostname, g.fb_used_mib, g.fb_free_mib) for g in a.gpus] == [
        ("0", "node-a", 73667.0, 7412.0),
        ("1", "node-a", 73681.0, 7398.0),
    ]


def test_legacy_vllm_metric_names_read_the_same(fleet: Fleet) -> None:
    b = _by_instance(fleet)["node-b:8000"]
    assert (b.engine, b.running, b.waiting, b.kv_usage) == ("vllm", 48.0, 17.0, 0.97)
    assert b.preemptions_per_s == pytest.approx(2.0, rel=0.05)
    assert b.prefix_hit_rate == pytest.approx(80 / 800, rel=0.02)
    assert (b.num_gpu_blocks, b.block_size, b.gpu_memory_utilization) == (9120, 16, 0.92)
    assert [(g.uuid, g.fb_used_mib, g.fb_free_mib) for g in b.gpus] == [("GPU-1f2e3d4c-0000-4b4b-8c8c-000000000000", 132000.0, 11040.0)]


def test_sglang_replica(fleet: Fleet) -> None:
    c = _by_instance(fleet)["node-c:30000"]
    assert (c.engine, c.running, c.waiting, c.kv_usage, c.prefix_hit_rate) == ("sglang", 20.0, 3.0, 0.62, 0.55)
    assert c.preemptions_per_s == pytest.approx(0.5, rel=0.05)
    assert (c.max_total_num_tokens, c.num_gpu_blocks, c.gpus) == (400000, None, ())
    assert fleet.unmatched_gpus == ()


def test_the_selector_picks_the_replicas(prom: Prometheus) -> None:
    fleet = fleet_signals(prom, window=WINDOW)  # the default, {job="vllm"}
    assert [r.instance for r in fleet.replicas] == ["node-a:8000", "node-b:8000"]
    only = fleet_signals(prom, '{job="vllm", instance!~"node-a.*"}', window=WINDOW)
    assert [r.instance for r in only.replicas] == ["node-b:8000"]
    assert fleet_signals(prom, '{job="nothing"}', window=WINDOW).replicas == ()
    assert len(fleet_signals(prom, "{}", window=WINDOW).replicas) == 3


def test_ranking_puts_the_overloaded_replica_first(fleet: Fleet) -> None:
    ranked = rank_by_risk(fleet.replicas)
    assert [(r.rank, r.replica.instance) for r in ranked] == [(1, "node-b:8000"), (2, "node-c:30000"), (3, "node-a:8000")]
    assert "17 requests waiting with the KV cache 97% full" in ranked[0].reason
    assert "preempting 2/s" in ranked[0].reason
    assert ranked[1].reason == "retracting 0.5/s with the KV cache 62% full: running requests are evicted to make room"
    assert ranked[2].reason == "KV cache 41% full, no queue, no preemption"


def test_instant_and_range_queries(prom: Prometheus) -> None:
    [s] = query(prom, 'vllm:num_requests_waiting{instance="node-b:8000"}')
    assert (s.value, s.label("job"), s.label("model_name")) == (17.0, "vllm", "Qwen/Qwen3-32B")
    assert dict(s.labels)["engine"] == "0" and list(s.labels) == sorted(s.labels)
    [scalar] = query(prom, "scalar(vllm:num_requests_waiting{instance='node-b:8000'}) * 2")
    assert (scalar.labels, scalar.value) == ((), 34.0)
    now = time.time()
    [r] = query_range(prom, 'sglang:token_usage{instance="node-c:30000"}', now - 2, now, 0.5)
    assert len(r.points) >= 4 and {v for _, v in r.points} == {0.62}


def test_a_selector_prometheus_cannot_parse_names_the_selector(prom: Prometheus) -> None:
    with pytest.raises(PrometheusError, match=r"^--selector was not accepted by Prometheus: .*(parse error|regexp).*\{job=") as err:
        fleet_signals(prom, '{job=~"("}', window=WINDOW)
    assert "\n" not in str(err.value) and err.value.error_type == "bad_data"


@pytest.mark.parametrize(
    ("selector", "complaint"),
    [
        ('job="vllm"', "is not a label selector"),
        ('{job="vllm"} or vector(1)', "is not a label selector"),
        ("up{job='vllm'}", "is not a label selector"),
        ("{job=vllm}", "cannot read a label matcher"),
        ('{job="vllm" instance="x"}', "cannot read a label matcher"),
        ('{__name__="up"}', "names a metric"),
        ('{job="vllm"}) or (up{a="b"}', "cannot read a label matcher"),
    ],
)
def test_selectors_other_than_label_matchers_are_refused(selector: str, complaint: str) -> None:
    with pytest.raises(InputError, match=complaint):
        parse_selector(selector)


def test_label_matchers_pass() -> None:
    assert parse_selector("{}") == ()
    assert parse_selector(' { job = "vllm" , ns=~\'p.*\', pod!~`x"y`, a!="b\\"}" , } ') == (
        'job="vllm"', "ns=~'p.*'", 'pod!~`x"y`', 'a!="b\\"}"',
    )


def _fails(prom: Prometheus, pattern: str) -> None:
    start = time.monotonic()
    with pytest.raises(PrometheusError, match=pattern) as err:
        query(prom, "up")
    assert time.monotonic() - start < 3 and "\n" not in str(err.value)


def test_closed_port() -> None:
    _fails(Prometheus(f"http://127.0.0.1:{free_port()}"), r"cannot reach Prometheus at http://127\.0\.0\.1:\d+: connection refused")


def test_not_a_url() -> None:
    _fails(Prometheus("localhost:9090"), r"is not a server address: give http://HOST:PORT")


@pytest.mark.parametrize(
    ("status", "body", "pattern"),
    [
        (500, b"upstream exploded\n", r"/api/v1/query answered HTTP 500 Internal Server Error: 'upstream exploded'"),
        (200, b"<html><body>Grafana</body></html>", r"is not JSON \(it begins '<html><body>Grafana"),
        (200, b'{"hello": "world"}', r"is JSON but not a Prometheus API answer"),
        (200, b'{"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, "x"]}]}}', r"value is not a number"),
        (200, b'{"status": "success", "data": {"resultType": "matrix", "result": []}}', r"resultType 'matrix', expected vector or scalar"),
        (422, json.dumps({"status": "error", "errorType": "execution", "error": "query processing would load too many samples"}).encode(),
         r"^Prometheus rejected the query 'up': execution: query processing would load too many samples$"),
        (200, json.dumps({"status": "error", "errorType": "timeout", "error": "query timed out in expression evaluation"}).encode(),
         r"rejected the query 'up': timeout: query timed out"),
    ],
)
def test_a_bad_answer_is_one_clear_line(status: int, body: bytes, pattern: str) -> None:
    with canned_server(status, body) as url:
        _fails(Prometheus(url), pattern)


def test_timeout_and_size_cap() -> None:
    with canned_server(200, b'{"status": "success"}', delay_s=1.0) as url:
        _fails(Prometheus(url, timeout_s=0.3), r"did not answer within 0\.3 s")
    with canned_server(200, b" " * 5000 + b'{"status": "success"}') as url:
        _fails(Prometheus(url, max_bytes=4096), r"is larger than 4,096 bytes: narrow --selector")


def test_counters_advance_with_time() -> None:
    assert render("c RATE(2.5)\ng 1.0", 4.0) == "c 10.0\ng 1.0"


def test_gpus_follow_the_pod_when_both_have_one() -> None:
    used = [
        Series((("exported_pod", "vllm-0"), ("gpu", "0"), ("instance", "10.0.0.9:9400")), 70000.0, 1.0),
        Series((("gpu", "1"), ("instance", "10.0.0.9:9400"), ("pod", "vllm-1")), 60000.0, 1.0),
        Series((("gpu", "0"), ("instance", "10.0.0.7:9400")), 1000.0, 1.0),
    ]
    replicas = [Series((("instance", "10.0.0.5:8000"), ("pod", p)), 1.0, 1.0) for p in ("vllm-0", "vllm-1")]
    fleet = fleet_from_results({"running": replicas, "fb_used": used}, 1.0)
    assert [[g.gpu for g in r.gpus] for r in fleet.replicas] == [["0"], ["1"]]
    assert fleet.unmatched_gpus == (GpuMemory("10.0.0.7:9400", "0", fb_used_mib=1000.0),)


def test_ranking_without_data_and_nan() -> None:
    nan = float("nan")
    fleet = fleet_from_results({"kv_usage": [Series((("instance", "x:1"),), nan, 1.0)], "waiting": [Series((("instance", "y:1"),), 4.0, 1.0)]}, 1.0)
    assert fleet.replicas[0].kv_usage is None
    ranked = rank_by_risk([*fleet.replicas, FleetReplica("z:1", waiting=2.0, kv_usage=0.3), FleetReplica("w:1", kv_usage=0.95)])
    assert [r.replica.instance for r in ranked] == ["w:1", "z:1", "y:1", "x:1"]
    assert "not for KV space" in ranked[1].reason
    assert ranked[2].reason.startswith("4 requests waiting; no KV cache usage reported")
    assert ranked[3].reason.startswith("no KV cache usage reported")


def test_the_fixture_files_exist() -> None:
    data = Path(__file__).resolve().parent / "data" / "prometheus"
    assert (data / "README.md").is_file() and len(list(data.glob("*.prom"))) == 5


def test_a_server_that_does_not_speak_http() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)

        def answer() -> None:
            conn, _ = listener.accept()
            with conn:
                conn.sendall(b"SSH-2.0-OpenSSH_9.2p1\r\n")

        thread = threading.Thread(target=answer, daemon=True)
        thread.start()
        _fails(Prometheus(f"http://127.0.0.1:{listener.getsockname()[1]}"), r"http://127\.0\.0\.1:\d+ does not answer in HTTP \(BadStatusLine.*is --prometheus the Prometheus server's HOST:PORT\?$")
        thread.join(2)


def test_diagnose_a_fleet_end_to_end(prom: Prometheus, capsys: pytest.CaptureFixture[str]) -> None:
    """`kvbudget diagnose --prometheus URL` against the real Prometheus: every replica ranked by risk, each judged as
    a single server would be (the overloaded vLLM replica: KV cache full and preempting), the DCGM GPUs in bytes."""
    from kvbudget.cli import main

    argv = ["diagnose", "--prometheus", prom.url, "--selector", ALL, "--window", WINDOW]
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["instance"] for r in doc["ranking"]] == ["node-b:8000", "node-c:30000", "node-a:8000"]
    node_b = [d for d in doc["diagnoses"] if d["subject"] == "vllm (instance=node-b:8000)"]
    assert node_b[0]["severity"] == "critical" and "17 waiting with the KV cache 97.0% full" in node_b[0]["evidence"]
    a = next(g for g in doc["gpus"] if g["host"] == "node-a" and g["gpu"] == "0")
    assert (a["used_bytes"], a["free_bytes"]) == (73667 * 2**20, 7412 * 2**20)
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0].endswith(f"replicas matching {ALL}: 3 (rates over {WINDOW})")
    assert main([*argv, "--watch", "0.1", "--count", "2", "--json"]) == 0
    polls = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [p["poll"] for p in polls] == [1, 2] and not any(p["down"] for p in polls)


def test_diagnose_a_fleet_refuses_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from kvbudget.cli import main

    port = free_port()
    assert main(["diagnose", "--prometheus", f"http://127.0.0.1:{port}", "--timeout", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(port) in err
    assert main(["diagnose", "--metrics", "x.prom", "--selector", '{job="a"}']) == 2
    assert "--selector and --window are read with --prometheus" in capsys.readouterr().err
    assert main(["diagnose", "--prometheus", "http://127.0.0.1:1", "--window", "5 minutes"]) == 2
    assert "not a Prometheus duration" in capsys.readouterr().err


def test_one_server_scraped_twice_is_refused_and_nan_shows_as_a_dash(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A real Prometheus scraping node-a's vLLM page under two jobs holds each of its series twice; the fleet's
    sums counted it twice (24 running where the page says 7 + 5 = 12, exit 0), as a page saved twice did on the
    --metrics path. Now refused in one line; one job alone reads 12. A replica whose gauges are NaN shows '-'."""
    from kvbudget.cli import main
    from prom_fixture import DATA, Target

    nan_page = tmp_path / "nan.prom"
    text = (DATA / "vllm-0.33.0.prom").read_text(encoding="utf-8")
    nan_page.write_text(text.replace("vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} 0.41",
                                     "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} NaN")
                        .replace("vllm:kv_cache_usage_perc{engine=\"1\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} 0.35",
                                 "vllm:kv_cache_usage_perc{engine=\"1\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} NaN"),
                        encoding="utf-8")
    assert nan_page.read_text(encoding="utf-8").count(" NaN") == 2
    targets = (Target("a", "vllm-0.33.0.prom", "vllm", "node-a:8000"), Target("a", "vllm-0.33.0.prom", "vllm-copy", "node-a:8000"),
               Target("n", str(nan_page), "vllm-holes", "node-n:8000"))
    (tmp_path / "p").mkdir()
    with running_prometheus(tmp_path / "p", targets=targets) as url:
        argv = ["diagnose", "--prometheus", url, "--window", WINDOW, "--selector"]
        assert main([*argv, '{instance="node-a:8000"}']) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and 'instance="node-a:8000"} 2 times' in err and "narrow --selector" in err
        assert main([*argv, '{job="vllm"}', "--json"]) == 0
        [replica] = json.loads(capsys.readouterr().out)["servers"]
        assert replica["running"] == 7 + 5
        assert main([*argv, '{job="vllm-holes"}']) == 0
        out = capsys.readouterr().out
        row = next(line for line in out.splitlines() if line.strip().startswith("1  node-n:8000"))
        assert row.split()[3:6] == ["12", "0", "-"] and "nan" not in out.lower()


def test_two_answers_for_one_replica_are_refused() -> None:
    """A running query answered for one instance twice (vLLM and SGLang series under one instance label, tagged apart
    by their engine label): the later one overwrote the earlier, silently."""
    running = [Series((("engine", e), ("instance", "x:1")), v, 1.0) for e, v in (("vllm", 3.0), ("sglang", 9.0))]
    with pytest.raises(PrometheusError, match=r"two running series for replica x:1 .*narrow --selector"):
        fleet_from_results({"running": running}, 1.0)


@pytest.mark.parametrize("blocks", ["-5", "abc", "1e99", "1e400"])
def test_a_cache_config_label_vllm_never_writes_is_refused(blocks: str) -> None:
    """The same label reader as a saved page (vLLM 0.33.0 vllm/config/cache.py metrics_info writes str() of an int):
    -5 was kept as -5 blocks, 1e99 as a 100-digit count, abc as absent, and 1e400 stopped with an OverflowError."""
    info = [Series((("__name__", "vllm:cache_config_info"), ("block_size", "16"), ("instance", "x:1"),
                    ("num_gpu_blocks", blocks)), 1.0, 1.0)]
    with pytest.raises(InputError, match=f"replica x:1: vllm:cache_config_info label num_gpu_blocks='{blocks}'"):
        fleet_from_results({"cache_config": info}, 1.0)
    good = [Series(tuple((k, "27495" if k == "num_gpu_blocks" else v) for k, v in info[0].labels), 1.0, 1.0)]
    assert fleet_from_results({"cache_config": good}, 1.0).replicas[0].num_gpu_blocks == 27495
