"""``kvbudget diagnose``: the exposition, DCGM and nvidia-smi readers on recorded pages (tests/data/metrics/README.md
names where each comes from), the diagnoses with hand-checked numbers, and the command end to end against a real
HTTP server on loopback (http.server in a thread) whose pages change between scrapes, go down, stall or answer 500.
Nothing is mocked: prometheus_client's parser and urllib do the reading."""

from __future__ import annotations

import json
import math
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from kvbudget import api
from kvbudget.cli import main
from kvbudget.ops.diagnose import Expected, diagnose
from kvbudget.ops.exposition import ScrapeError, Snapshot, fetch, parse
from kvbudget.ops.gpu_memory import parse_dcgm, parse_nvidia_smi
from kvbudget.questions.diagnose import diagnose_once, polls
from kvbudget.units import MiB

DATA = Path(__file__).parent / "data" / "metrics"


def page(name: str) -> str:
    return (DATA / name).read_text()


def one(text: str, name: str = "page") -> Snapshot:
    return parse(text, name, 0.0)


# --- a real HTTP server on loopback ----------------------------------------------------------------------------


class Site:
    """What the loopback server answers: ``bodies`` in turn (the last one repeats), a status, a stall."""

    def __init__(self, *bodies: str | bytes) -> None:
        self.bodies = [b if isinstance(b, bytes) else b.encode() for b in bodies] or [b""]
        self.statuses: list[int] = [200]
        self.delay = 0.0
        self.hits = 0

    def answer(self) -> tuple[int, bytes]:
        i = self.hits
        self.hits += 1
        return self.statuses[min(i, len(self.statuses) - 1)], self.bodies[min(i, len(self.bodies) - 1)]


@pytest.fixture
def site() -> Iterator[tuple[Site, str]]:
    s = Site()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, body = s.answer()
            if s.delay:
                time.sleep(s.delay)
            try:
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up first (the timeout test)
                pass

        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield s, f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


class Clock:
    """Scrape times 100 s, 102 s, ...: rates over exactly 2 s (the HTTP is real; only the stamps are chosen)."""

    def __init__(self, start: float = 100.0, step: float = 2.0) -> None:
        self.t, self.step = start - step, step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


# --- reading recorded pages -------------------------------------------------------------------------------------


def test_a_vllm_v0_page_reads_the_old_names() -> None:
    (s,) = one(page("vllm-v0-pstack318-qwen-coder.prom")).servers
    assert (s.engine, s.model, s.labels) == ("vllm", "Qwen/Qwen2.5-Coder-32B-Instruct",
                                             (("model_name", "Qwen/Qwen2.5-Coder-32B-Instruct"),))
    assert (s.running, s.waiting, s.kv_usage) == (0.0, 0.0, 0.0)
    assert s.num_gpu_blocks is None and s.preemptions is None


def test_vllm_0_10_reads_the_new_usage_and_the_deprecated_prefix_counter() -> None:
    (s,) = one(page("vllm-0.10-pstack617-glm45.prom")).servers
    assert s.model == "zai-org/GLM-4.5" and dict(s.labels)["engine"] == "0"
    assert s.kv_usage == pytest.approx(9.75010481363281e-06)
    assert (s.prefix_queries, s.prefix_hits) == (32.0, 0.0)  # hits from vllm:gpu_prefix_cache_hits_total
    assert s.hit_rate == 0.0 and s.running is None


def test_sglang_0_5_1_page_folds_the_rank_labels() -> None:
    (s,) = one(page("sglang-0.5.1-issue13485.prom")).servers
    assert (s.engine, s.model, s.running, s.kv_usage, s.waiting) == ("sglang", "Qwen-32B", 1.0, 0.0, None)
    assert s.labels == (("model_name", "Qwen-32B"),)  # tp_rank, pp_rank, engine_type are not identity


def test_vllm_0_33_page_with_cache_config_info() -> None:
    (s,) = one(page("vllm-0.33-busy.prom")).servers
    assert (s.running, s.waiting, s.kv_usage, s.preemptions) == (48.0, 9.0, 0.962, 12.0)
    assert s.hit_rate == pytest.approx(420_000 / 1_200_000) == pytest.approx(0.35)
    assert (s.num_gpu_blocks, s.block_size, s.gpu_memory_utilization, s.cache_dtype, s.kv_tokens) == \
        (24_000, 16, 0.92, "auto", 384_000)


def test_sglang_0_5_23_page() -> None:
    (s,) = one(page("sglang-0.5.23-busy.prom")).servers
    assert (s.running, s.waiting, s.kv_usage, s.preemptions, s.kv_tokens) == (40.0, 12.0, 0.93, 3.0, 364_058)
    assert s.hit_rate == 0.25


def test_the_current_usage_name_wins_over_the_deprecated_one_and_engines_stay_apart() -> None:
    text = ('vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.7\n'
            'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5\n'
            'vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.25\n'
            'vllm:cache_config_info{block_size="16",engine="1",num_gpu_blocks="777"} 1.0\n'
            'vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="555"} 1.0\n')
    a, b = one(text).servers
    assert (a.kv_usage, a.num_gpu_blocks, b.kv_usage, b.num_gpu_blocks) == (0.5, 555, 0.25, 777)


def test_a_v0_hit_rate_gauge_and_an_old_sglang_percentage() -> None:
    (v,) = one('vllm:gpu_prefix_cache_hit_rate{model_name="m"} 0.4\n').servers
    (g,) = one('sglang:cache_hit_rate{name="m"} 87.5\n').servers  # SGLang's first metrics (PR #1461): percent, "name"
    assert v.hit_rate == 0.4 and (g.model, g.hit_rate) == ("m", 0.875)


def test_dcgm_mig_instances_from_a_real_exporter_page() -> None:
    gpus = parse_dcgm(page("dcgm-a30-mig-issue317.prom"), "dcgm")
    assert [g.gpu for g in gpus] == ["0/3", "0/4", "0/5", "0/6", "1/3"]
    g = gpus[0]
    assert (g.name, g.host) == ("NVIDIA A30", "yg-data-k8s-gpu-a30-node-test-test0003.mt")
    assert (g.used_bytes, g.free_bytes, g.total_bytes) == (3 * MiB, 6012 * MiB, 6015 * MiB)


def test_dcgm_total_counts_the_reserved_framebuffer() -> None:
    g0, g1 = parse_dcgm(page("dcgm-h100-full.prom"), "dcgm")
    assert g0.total_bytes == (80_270 + 789 + 500) * MiB == 81_559 * MiB
    assert g0.used_fraction == pytest.approx(80_270 / 81_559)
    assert g1.used_fraction == pytest.approx(40_280 / 81_559)


def test_nvidia_smi_csv_with_and_without_header() -> None:
    g0, _ = parse_nvidia_smi(page("nvidia-smi-h100.csv"), "smi")
    (l4,) = parse_nvidia_smi(page("nvidia-smi-l4-noheader.csv"), "smi")
    assert (g0.gpu, g0.name, g0.used_bytes, g0.free_bytes, g0.total_bytes) == \
        ("0", "NVIDIA H100 80GB HBM3", 80_270 * MiB, 789 * MiB, 81_559 * MiB)
    assert (l4.name, l4.used_bytes, l4.free_bytes) == ("NVIDIA L4", 21_845 * MiB, (23_034 - 21_845) * MiB)
    with pytest.raises(ScrapeError, match=r"memory\.used is 'N/A'"):
        parse_nvidia_smi("0, X, N/A, 100\n", "smi")


# --- the diagnoses, by hand ---------------------------------------------------------------------------------------


def test_framebuffer_full_gives_the_utilization_that_leaves_2_gib() -> None:
    snap = one(page("vllm-0.33-busy.prom"))
    gpus = parse_dcgm(page("dcgm-h100-full.prom"), "dcgm")
    (fb,) = [d for d in diagnose(snap, gpus=gpus) if d.name == "framebuffer-full"]
    # 789 MiB free; 2 GiB - 789 MiB = 1,259 MiB short = 1.54% of 81,559 MiB -> 0.02 lower: 0.92 -> 0.90
    assert math.ceil((2048 - 789) / 81_559 * 100) / 100 == 0.02
    assert fb.subject.startswith("GPU 0 ") and "98.4%" in fb.evidence and "0.77 GiB free" in fb.evidence
    assert "--gpu-memory-utilization 0.90 (from 0.92)" in fb.fix
    without = one(page("vllm-0.33-busy.prom").replace('gpu_memory_utilization="0.92",', ""))
    (fb,) = [d for d in diagnose(without, gpus=gpus) if d.name == "framebuffer-full"]
    assert "lower --gpu-memory-utilization by 0.02" in fb.fix


def test_a_gpu_under_95_percent_is_not_full() -> None:
    (l4,) = parse_nvidia_smi(page("nvidia-smi-l4-noheader.csv"), "smi")  # 21,845 / 23,034 MiB = 94.8%
    assert not [d for d in diagnose(one(page("vllm-0.33-busy.prom")), gpus=[l4]) if d.name == "framebuffer-full"]


def test_kv_full_without_a_plan_states_the_blocks_needed() -> None:
    (d,) = [d for d in diagnose(one(page("vllm-0.33-busy.prom"))) if d.name == "kv-cache-full"]
    # (48 running + 9 waiting) / 48 x 96.2% = 1.142375 of the pool: 24,000 x 1.142375 = 27,417 blocks
    assert d.severity == "warning" and "9 waiting with the KV cache 96.2% full (48 running)" in d.evidence
    assert "about 27,417 blocks (now 24,000, 1.14x)" in d.fix


def test_sglang_kv_full_in_tokens() -> None:
    (d,) = [d for d in diagnose(one(page("sglang-0.5.23-busy.prom"))) if d.name == "kv-cache-full"]
    # 52 / 40 x 0.93 = 1.209 -> 364,058 x 1.209 = 440,146.1 -> 440,147 tokens
    assert "about 440,147 KV tokens (now 364,058, 1.21x)" in d.fix


def test_a_file_says_rates_are_unavailable_and_a_quiet_page_is_healthy() -> None:
    found = diagnose(one(page("vllm-v0-pstack318-qwen-coder.prom")))
    assert [d.name for d in found] == ["rates", "healthy"]  # worst first: info before ok
    assert found[1].evidence == "0 running, 0 waiting, KV cache 0.0% full"


def expected(**changes: object) -> Expected:
    base: dict[str, object] = dict(label="vLLM, m on H100", engine="vllm", blocks=25_000, block_tokens=16,
                                   kv_tokens=400_000, kv_budget_bytes=400_000 * 147_456, max_num_seqs=64, context=8192,
                                   max_concurrency=48.8, utilization=0.92)
    base.update(changes)
    return Expected(**base)  # type: ignore[arg-type]


def test_blocks_within_2_percent_match_and_beyond_differ() -> None:
    text = page("vllm-0.33-busy.prom")
    ok = [d for d in diagnose(one(text), expected=expected(blocks=24_400)) if d.name.startswith("blocks")]
    bad = [d for d in diagnose(one(text), expected=expected(blocks=25_000, utilization=0.9)) if d.name.startswith("blocks")]
    assert [(d.name, d.severity) for d in ok] == [("blocks-match", "ok")]  # 24,000 vs 24,400: -1.6%
    assert [(d.name, d.severity) for d in bad] == [("blocks-differ", "warning")]  # -4.0%
    assert "(-4.0%)" in bad[0].evidence and "give --gpu-memory-utilization 0.92" in bad[0].fix


def test_prefix_cache_capacity_estimate() -> None:
    (d,) = [d for d in diagnose(one(page("vllm-0.33-busy.prom")), expected=expected()) if d.name == "prefix-cache"]
    # 48.8 / (1 - 0.35) = 75.08
    assert "35.0% of prompt tokens" in d.evidence and "(420,000 of 1,200,000)" in d.evidence
    assert "about 75.1 requests of 8,192 tokens" in d.fix and "estimate" in d.fix


def test_waiting_with_a_free_cache_at_the_cap_is_max_num_seqs() -> None:
    (d,) = [d for d in diagnose(one(page("vllm-0.33-capped.prom")), expected=expected()) if d.name == "max-num-seqs"]
    # 64 running = the plan's cap 64, 30 waiting, KV 20%: the cache holds 64 / 0.2 = 320 at this footprint
    assert d.severity == "warning" and "= --max-num-seqs 64" in d.evidence
    assert "raise it to 320" in d.fix
    (d,) = [d for d in diagnose(one(page("vllm-0.33-capped.prom"))) if d.name == "max-num-seqs"]
    assert "memory is not the limit" in d.fix and "about 320" in d.fix


# --- two scrapes over real HTTP -----------------------------------------------------------------------------------


def busy(preemptions: float, waiting: float, hits: float = 420_000, queries: float = 1.2e6) -> str:
    return (page("vllm-0.33-busy.prom").replace("} 12.0", f"}} {preemptions}").replace("} 9.0", f"}} {waiting}")
            .replace("} 420000.0", f"}} {hits}").replace("} 1.2e+06", f"}} {queries}"))


def test_rising_preemptions_between_two_scrapes(site: tuple[Site, str]) -> None:
    s, url = site
    s.bodies = [busy(12, 9).encode(), busy(20, 15, 520_000, 1.4e6).encode()]
    a = diagnose_once(url, interval=2.0, sleep=lambda _: None, clock=Clock())
    assert s.hits == 2
    ((_, r),) = a.servers
    assert r is not None and r.seconds == 2.0
    assert (r.preemptions_per_s, r.queue_per_s, r.hit_rate) == (4.0, 3.0, 0.5)  # 8/2, 6/2, 100,000/200,000
    names = [d.name for d in a.diagnoses]
    assert names[0] == "kv-cache-full" and a.diagnoses[0].severity == "critical" and "rates" not in names
    assert "preemptions rising at 4.00/s over 2 s (20 since start)" in a.diagnoses[0].evidence
    assert "queue growing by 3.00 requests/s" in a.diagnoses[0].evidence
    (p,) = [d for d in a.diagnoses if d.name == "prefix-cache"]
    assert "50.0% of prompt tokens looked up were cached over the last 2 s" in p.evidence


def test_preemptions_alone_with_nobody_waiting(site: tuple[Site, str]) -> None:
    s, url = site
    s.bodies = [busy(12, 0).encode(), busy(13, 0).encode()]
    a = diagnose_once(url, sleep=lambda _: None, clock=Clock())
    assert a.diagnoses[0].name == "preempting" and "0.50/s" in a.diagnoses[0].evidence


def test_a_restarted_server_gives_no_rate(site: tuple[Site, str]) -> None:
    s, url = site
    s.bodies = [busy(12, 0).encode(), busy(0, 0).encode()]
    ((_, r),) = diagnose_once(url, sleep=lambda _: None, clock=Clock()).servers
    assert r is not None and r.preemptions_per_s is None


# --- the command, end to end --------------------------------------------------------------------------------------


def test_cli_file_with_dcgm_and_a_plan(capsys: pytest.CaptureFixture[str]) -> None:
    fit = api.fit("Qwen/Qwen3-8B", gpu="H100", context=8192)
    code, out, err = run(capsys, "diagnose", "--metrics", str(DATA / "vllm-0.33-busy.prom"), "--dcgm",
                         str(DATA / "dcgm-h100-full.prom"), "--expect", "Qwen/Qwen3-8B", "--gpu", "H100",
                         "--context", "8192", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["interval_s"] is None and doc["gpu_source"] == "DCGM"
    assert doc["expected"]["blocks"] == fit.row.blocks and doc["expected"]["engine"] == "vllm"
    names = {d["name"] for d in doc["diagnoses"]}
    assert {"framebuffer-full", "kv-cache-full", "prefix-cache", "rates"} <= names
    off = (24_000 - fit.row.blocks) / fit.row.blocks
    assert ("blocks-differ" in names) == (abs(off) > 0.02)
    assert doc["gpus"][0]["total_bytes"] == 81_559 * MiB
    assert doc["servers"][0]["labels"] == {"model_name": "Qwen/Qwen3-8B", "engine": "0"}


def test_cli_max_num_seqs_against_the_planned_cap(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "diagnose", "--metrics", str(DATA / "vllm-0.33-capped.prom"), "--expect",
                         "Qwen/Qwen3-8B", "--gpu", "H100", "--context", "8192", "--max-num-seqs", "64")
    assert code == 0, err
    assert "[warning] max-num-seqs: Qwen/Qwen3-8B (engine=0)" in out
    assert "--max-num-seqs is 64 (the plan's) and all are running: raise it to 320" in out


def test_cli_sglang_page_plans_with_sglang(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    fit = api.fit("Qwen/Qwen3-8B", gpu="H100", context=8192, engine="sglang")
    path = tmp_path / "sglang.prom"
    path.write_text(page("sglang-0.5.23-busy.prom").replace("364058.0", f"{fit.row.kv_tokens}.0"))
    code, out, err = run(capsys, "diagnose", "--metrics", str(path), "--expect", "Qwen/Qwen3-8B", "--gpu", "H100",
                         "--context", "8192", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["expected"]["engine"] == "sglang"
    assert "blocks-match" in {d["name"] for d in doc["diagnoses"]}


def test_cli_url_takes_two_scrapes(capsys: pytest.CaptureFixture[str], site: tuple[Site, str]) -> None:
    s, url = site
    s.bodies = [busy(12, 9).encode(), busy(20, 15).encode()]
    code, out, err = run(capsys, "diagnose", "--metrics", url, "--interval", "0.2")
    assert code == 0, err
    assert s.hits == 2 and "2 scrapes" in out and "preemptions rising at" in out


@pytest.mark.parametrize(("setup", "words"), [
    ("garbage", "not Prometheus text exposition"),
    ("partial", "not Prometheus text exposition"),
    ("html", "not Prometheus text exposition"),
    ("other", "no vLLM or SGLang metric on this page"),
    ("status", "HTTP 500"),
    ("huge", "more than 8,388,608 bytes"),
])
def test_cli_faults_over_http_are_one_line(capsys: pytest.CaptureFixture[str], site: tuple[Site, str], setup: str,
                                           words: str) -> None:
    s, url = site
    body = {"garbage": "hello world\n", "partial": page("vllm-0.33-busy.prom")[:150],
            "html": "<html><body>Not here</body></html>\n", "other": "process_open_fds 45.0\n",
            "status": "oops", "huge": "# " + "x" * (9 << 20) + "\n"}[setup]
    s.bodies = [body.encode()]
    if setup == "status":
        s.statuses = [500]
    code, out, err = run(capsys, "diagnose", "--metrics", url)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and words in err and "Traceback" not in err


def test_cli_server_down_and_a_stalled_server(capsys: pytest.CaptureFixture[str], site: tuple[Site, str]) -> None:
    code, _, err = run(capsys, "diagnose", "--metrics", f"http://127.0.0.1:{closed_port()}/metrics")
    assert code == 2 and "connection refused" in err and err.count("\n") == 1
    s, url = site
    s.bodies, s.delay = [page("vllm-0.33-busy.prom").encode()], 3.0
    start = time.monotonic()
    code, _, err = run(capsys, "diagnose", "--metrics", url, "--timeout", "0.5")
    assert code == 2 and "no answer within 0.5 s" in err and time.monotonic() - start < 2.5


def test_cli_file_faults(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "diagnose", "--metrics", str(tmp_path / "nope.prom"))
    assert code == 2 and "no such file" in err
    big = tmp_path / "big.prom"
    big.write_bytes(b"# " + b"x" * (9 << 20))
    code, _, err = run(capsys, "diagnose", "--metrics", str(big))
    assert code == 2 and "9,437,186 bytes, more than the 8,388,608 kvbudget reads" in err
    code, _, err = run(capsys, "diagnose", "--metrics", str(DATA / "vllm-0.33-busy.prom"), "--dcgm",
                       str(DATA / "vllm-0.33-busy.prom"))
    assert code == 2 and "no DCGM_FI_DEV_FB_USED" in err
    code, _, err = run(capsys, "diagnose", "--metrics", "ftp://host/metrics")
    assert code == 2 and "only http:// and https://" in err


@pytest.mark.parametrize(("argv", "words"), [
    (["--gpu", "H100"], "--gpu is read with --expect MODEL"),
    (["--expect", "Qwen/Qwen3-8B"], "needs the GPU"),
    (["--count", "2"], "--count bounds --watch"),
])
def test_cli_flag_mistakes(capsys: pytest.CaptureFixture[str], argv: list[str], words: str) -> None:
    code, _, err = run(capsys, "diagnose", "--metrics", str(DATA / "vllm-0.33-busy.prom"), *argv)
    assert code == 2 and words in err


def test_watch_keeps_going_when_the_source_goes_down(capsys: pytest.CaptureFixture[str], site: tuple[Site, str]) -> None:
    s, url = site
    s.bodies = [busy(12, 9).encode(), b"", busy(20, 9).encode()]
    s.statuses = [200, 503, 200]
    code, out, err = run(capsys, "diagnose", "--metrics", url, "--watch", "0.05", "--count", "3")
    assert code == 0, err
    assert "poll 1" in out and "poll 2" in out and "poll 3" in out
    assert "source DOWN (still watching)" in out and "HTTP 503" in out
    assert out.rstrip().endswith("stopped after 3 polls")
    assert "\x1b[" not in out  # not a terminal: one block per poll, no redraw


def test_watch_json_lines_and_ctrl_c(capsys: pytest.CaptureFixture[str], site: tuple[Site, str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    s, url = site
    s.bodies = [busy(12, 9).encode(), busy(20, 9).encode()]
    code, out, err = run(capsys, "diagnose", "--metrics", url, "--watch", "0.05", "--count", "2", "--json")
    assert code == 0, err
    first, second = (json.loads(line) for line in out.splitlines())
    assert (first["poll"], second["poll"]) == (1, 2) and second["servers"][0]["rates"]["preemptions_per_s"] > 0

    def interrupt(_: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(time, "sleep", interrupt)  # Ctrl-C while waiting for the second poll
    code, out, err = run(capsys, "diagnose", "--metrics", url, "--watch", "5")
    assert code == 0 and err == "" and out.rstrip().endswith("stopped after 1 poll")


def test_polls_judge_each_scrape_against_the_last_good_one(site: tuple[Site, str]) -> None:
    s, url = site
    s.bodies = [busy(12, 9).encode(), b"", busy(20, 9).encode()]
    s.statuses = [200, 500, 200]
    got = list(polls(url, 1.0, count=3, sleep=lambda _: None, clock=Clock()))
    assert [p.down for p in got] == [False, True, False]
    ((_, r),) = got[2].answer.servers
    # the clock stamps good scrapes only (100 s, then 102 s): 20 - 12 preemptions over 2 s, against poll 1, not the outage
    assert r is not None and r.seconds == 2.0 and r.preemptions_per_s == 4.0


def test_fetch_reads_within_its_bounds(site: tuple[Site, str]) -> None:
    s, url = site
    s.bodies = [b"a 1\n" * 1000]
    assert fetch(url).count("\n") == 1000
    with pytest.raises(ScrapeError, match="more than 100 bytes"):
        fetch(url, max_bytes=100)


def test_watch_on_a_terminal_redraws_in_place(site: tuple[Site, str], monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import sys

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    s, url = site
    s.bodies = [busy(12, 9).encode()]
    screen = Terminal()
    monkeypatch.setattr(sys, "stdout", screen)
    assert main(["diagnose", "--metrics", url, "--watch", "0.05", "--count", "2"]) == 0
    assert screen.getvalue().count("\x1b[H\x1b[J") == 2 and "poll 2" in screen.getvalue()


def test_sglang_fixes_name_sglang_flags() -> None:
    found = diagnose(one(page("sglang-0.5.23-busy.prom")))
    (kv,) = [d for d in found if d.name == "kv-cache-full"]
    (hit,) = [d for d in found if d.name == "prefix-cache"]
    assert "--kv-cache-dtype fp8_e4m3" in kv.fix and hit.evidence == "prefix-cache hit rate 25.0% (the engine's own gauge)"


def _raw_server(reply: Callable[[socket.socket], None]) -> tuple[socket.socket, str]:
    """A loopback TCP server that answers every connection with ``reply(conn)`` (not HTTP's rules: the hostile ones)."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # closed: the test is over
                return

            def answer(conn: socket.socket = conn) -> None:
                try:
                    conn.recv(65536)
                    reply(conn)
                except OSError:
                    pass
                finally:
                    conn.close()

            threading.Thread(target=answer, daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return listener, f"http://127.0.0.1:{listener.getsockname()[1]}"


def _trickle_headers(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\n")
    for _ in range(200):  # one header every 0.1 s: each socket wait is short, the whole answer is not
        conn.sendall(b"X-Slow: 1\r\n")
        time.sleep(0.1)


def _trickle_body(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n")
    for _ in range(400):  # a byte every 0.05 s: read(64 KiB) waited for all of them
        conn.sendall(b"#")
        time.sleep(0.05)


@pytest.mark.parametrize(("reply", "timeout"), [(_trickle_headers, 0.5), (_trickle_body, 0.5), (_trickle_headers, 4.0)])
def test_a_server_that_trickles_is_cut_off_by_the_deadline(reply: Callable[[socket.socket], None], timeout: float) -> None:
    """Given up on at the timeout and at most a second more (hostile round 18: trickled headers held it for twice the
    timeout, 10.5 s at 5 s, told as 'no answer within 5 s')."""
    from kvbudget.ops.prometheus import Prometheus, PrometheusError, query

    listener, url = _raw_server(reply)
    try:
        start = time.monotonic()
        with pytest.raises(ScrapeError, match=rf"no answer within {timeout:g} s"):
            fetch(url + "/metrics", timeout=timeout)
        assert time.monotonic() - start < timeout + min(1.0, timeout) + 0.5
        start = time.monotonic()
        with pytest.raises(PrometheusError, match=rf"did not answer within {timeout:g} s"):
            query(Prometheus(url, timeout_s=timeout), "up")
        assert time.monotonic() - start < timeout + min(1.0, timeout) + 0.5
    finally:
        listener.close()


def test_an_answer_that_is_not_http_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    listener, url = _raw_server(lambda conn: conn.sendall(b"\x00\x01garbage\r\n\r\n"))
    try:
        code, out, err = run(capsys, "diagnose", "--metrics", url + "/metrics", "--interval", "0")
        assert code == 2 and out == "" and "is not HTTP (BadStatusLine)" in err and err.count("\n") == 1, err
    finally:
        listener.close()
    listener, url = _raw_server(lambda conn: conn.sendall(b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 200 + b"\r\n"))
    try:
        code, out, err = run(capsys, "diagnose", "--metrics", url + "/metrics", "--interval", "0")
        assert code == 2 and "is not HTTP (HTTPException)" in err and err.count("\n") == 1, err
    finally:
        listener.close()


@pytest.mark.parametrize("flag", ["--metrics", "--prometheus"])
@pytest.mark.parametrize("url", ["http://[::1", "http://localhost:99999/metrics", "http://localhost:abc/metrics"])
def test_a_url_urllib_cannot_split_is_one_line(capsys: pytest.CaptureFixture[str], flag: str, url: str) -> None:
    code, out, err = run(capsys, "diagnose", flag, url, "--interval", "0")
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert "not a URL kvbudget can fetch" in err or "is not a server address" in err, err


def test_credentials_in_the_url_are_named_not_an_unknown_host(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "diagnose", "--metrics", "http://user:secret@127.0.0.1:9/metrics", "--interval", "0")
    assert code == 2 and out == "" and err.count("\n") == 1 and "credentials in the URL are not sent" in err, err
    assert "secret" not in err and "unknown host" not in err


def test_too_large_a_page_says_so_not_bad_url(site: tuple[Site, str]) -> None:
    s, url = site
    s.bodies = [b"a 1\n" * 1000]
    with pytest.raises(ScrapeError, match=r"more than 100 bytes") as info:
        fetch(url, max_bytes=100)
    assert "not a URL" not in str(info.value)


@pytest.mark.parametrize("line", ['vllm:num_requests_running{model_name="m"} -5',
                                  'vllm:num_preemptions_total{model_name="m"} 1e308',
                                  'sglang:token_usage{model_name="m"} -0.5'])
def test_a_figure_no_engine_reports_is_refused_not_shown(line: str) -> None:
    """-5 requests running read as '[ok] healthy'; 1e308 preemptions printed a 309-digit count."""
    with pytest.raises(ScrapeError, match="which no engine reports"):
        parse(line + "\n", "page", 0.0)


def test_a_page_holding_two_scrapes_is_refused() -> None:
    """A series twice on one page (a /metrics page saved twice, `tee -a`): the larger value of each was shown as the
    server's state (99% KV used from a page that said 96.2%). An engine exposes each series once."""
    page = (DATA / "vllm-0.33-busy.prom").read_text()
    with pytest.raises(ScrapeError, match=r'vllm:num_requests_running\{engine="0",model_name="Qwen/Qwen3-8B"\} appears '
                                          "twice: the page holds more than one scrape"):
        parse(page + page, "twice.prom", 0.0)
    usage = next(line for line in page.splitlines() if line.startswith("vllm:kv_cache_usage_perc{"))
    with pytest.raises(ScrapeError, match=r"kv_cache_usage_perc.* appears twice"):
        parse(page + usage.rsplit(" ", 1)[0] + " 0.99\n", "dup.prom", 0.0)
    assert parse(page, "once.prom", 0.0).servers[0].kv_usage == pytest.approx(0.962)


@pytest.mark.parametrize(("page", "engine", "shown"), [("vllm-0.33-busy.prom", "sglang", "vllm"),
                                                       ("sglang-0.5.23-busy.prom", "vllm", "sglang"),
                                                       ("vllm-0.33-busy.prom", "trtllm", "vllm")])
def test_expect_under_another_engine_than_the_page_is_refused(page: str, engine: str, shown: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """--expect planned under --engine X against engine Y's page: one engine's blocks held against another's (exit 0)."""
    assert main(["diagnose", "--metrics", str(DATA / page), "--engine", engine, "--expect", "qwen3-8b", "--gpu",
                 "H100"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--engine {engine}, but the page is {shown}'s /metrics: give --engine {shown}" in err


@pytest.mark.parametrize(("value", "said"), [("96.2", "a fraction of the pool, 0..1, not a percent"),
                                             ("NaN", "is nan, which no engine reports"),
                                             ("+Inf", "is inf, which no engine reports")])
def test_a_kv_usage_no_engine_reports_is_refused(value: str, said: str) -> None:
    """vLLM's kv_cache_usage_perc is a fraction (1 - free / total blocks): 96.2 was shown as 9,620% full with a fix
    of 114x the pool, and NaN or +Inf as '-' with the server called healthy (exit 0)."""
    text = page("vllm-0.33-busy.prom").replace("} 0.962", "} " + value)
    with pytest.raises(ScrapeError, match=said):
        one(text)


def test_nvidia_smi_csv_of_other_units_or_two_queries_is_refused() -> None:
    """nvidia-smi prints MiB: a [GiB] column was read as MiB (78 GiB used shown as 0.08 GiB, CRITICAL framebuffer
    full); a file with GPU 0 twice (two queries appended) showed both rows as GPU 0 (exit 0)."""
    with pytest.raises(ScrapeError, match="not MiB as nvidia-smi prints it"):
        parse_nvidia_smi("index, name, memory.used [GiB], memory.total [GiB]\n0, H100, 78, 79\n", "smi")
    with pytest.raises(ScrapeError, match="GPU '0' appears twice"):
        parse_nvidia_smi(page("nvidia-smi-h100.csv") + "0, NVIDIA H100 80GB HBM3, 100 MiB, 81559 MiB, 81459 MiB\n", "smi")


@pytest.mark.parametrize(("label", "value"), [("num_gpu_blocks", "-5"), ("num_gpu_blocks", "abc"),
                                              ("num_gpu_blocks", "1e99"), ("num_gpu_blocks", "0"),
                                              ("num_gpu_blocks", "24000.0"), ("block_size", "-16"),
                                              ("kv_cache_size_tokens", "NaN"),
                                              ("gpu_memory_utilization", "1.5"), ("gpu_memory_utilization", "abc"),
                                              ("gpu_memory_utilization", "nan")])
def test_a_cache_config_label_vllm_never_writes_is_refused(label: str, value: str,
                                                           capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """vLLM writes cache_config_info's labels with str() of CacheConfig's fields (vLLM 0.33.0, vllm/config/cache.py,
    metrics_info): a count is a decimal whole number, an unset field "None". num_gpu_blocks="-5" (or abc, 1e99) was
    taken as absent and --expect's blocks check skipped (exit 0)."""
    text = page("vllm-0.33-busy.prom")
    assert f'{label}="' in text
    start = text.index(f'{label}="') + len(label) + 2
    bad = text[:start] + value + text[text.index('"', start):]
    with pytest.raises(ScrapeError, match=f"vllm:cache_config_info label {label}='?{value}'?, which vLLM never"):
        one(bad)
    path = tmp_path / "bad.prom"
    path.write_text(bad)
    assert main(["diagnose", "--metrics", str(path), "--interval", "0", "--expect", "qwen3-8b", "--gpu", "H100"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and label in err and "Traceback" not in err


def test_cache_config_labels_vllm_writes_are_read() -> None:
    """"None" is an unset field (str(None)); whole numbers and a fraction are read as written."""
    text = page("vllm-0.33-busy.prom")
    start = text.index('num_gpu_blocks="') + len('num_gpu_blocks="')
    (s,) = one(text[:start] + "None" + text[text.index('"', start):]).servers
    assert s.num_gpu_blocks is None and s.block_size == 16 and s.gpu_memory_utilization == 0.92


def test_an_sglang_server_is_told_sglangs_own_scheduler_settings(capsys: pytest.CaptureFixture[str],
                                                                 tmp_path: Path) -> None:
    """SGLang's cap is --max-running-requests and its per-step budget --max-prefill-tokens / --chunked-prefill-size:
    diagnose named vLLM's max_num_seqs (the finding, the plan's line) and --max-num-batched-tokens for it."""
    usage = 'sglang:token_usage{engine_type="unified",model_name="Qwen/Qwen3-8B",pp_rank="0",tp_rank="0"} '
    busy = page("sglang-0.5.23-busy.prom")
    assert busy.count(usage) == 1
    low = "\n".join(usage + "0.1" if line.startswith(usage) else line for line in busy.splitlines())  # 10% full
    found = diagnose(one(low), expected=expected(engine="sglang", label="SGLang, m on H100", block_tokens=1,
                                                 blocks=400_000, max_num_seqs=4096))
    (d,) = [d for d in found if d.name == "max-running-requests"]
    assert "not --max-running-requests (4,096)" in d.fix and "--max-prefill-tokens or --chunked-prefill-size" in d.fix
    assert not any("max-num-seqs" in x.name or "max-num" in x.fix or "max-num" in x.evidence for x in found)
    path = tmp_path / "sglang.prom"
    path.write_text(low)
    code, out, err = run(capsys, "diagnose", "--metrics", str(path), "--expect", "Qwen/Qwen3-8B", "--gpu", "H100")
    assert code == 0, err
    assert ", max_running_requests 4,096," in out and "[info] max-running-requests: Qwen/Qwen3-8B" in out
    assert "max_num_seqs" not in out and "max-num" not in out
