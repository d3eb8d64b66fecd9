"""Hostile inputs, round 18: simulate's traces and workloads (memory and time), vLLM releases kvbudget has not read,
metrics pages, GGUF heads and the JSON of levers and plan. Each case failed on the code before it: a traceback, hours
or gigabytes before an answer or a refusal, or a plausible answer with exit 0. The required outcome is the engine's
own answer, or one error line naming the problem and the fix, exit 2."""

from __future__ import annotations

import json
import time
import tracemalloc
from pathlib import Path

import pytest

from test_hostile_round15 import _refused, _runs
from test_llamacpp import _tiny_gguf

SIM = ["simulate", "llama-3.1-8b", "--gpu", "H100", "--no-progress"]


@pytest.fixture(autouse=True)
def _short_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # files named shortly, so that an error line quoting one keeps its words whole


# --- simulate: memory held per token, per request, per step ------------------------------------------------------------

def test_requests_no_engine_runs_are_refused_without_making_their_token_ids(capsys: pytest.CaptureFixture[str],
                                                                              tmp_path: Path) -> None:
    """20 requests of 9,900,000 tokens, each past max_model_len: 16.8 s and 1.58 GB of token ids were made (the
    counts as arrays, then copied into the scheduler) before 'every request is refused'."""
    Path("t.jsonl").write_text("".join(json.dumps({"arrival": i, "prompt_tokens": 9_000_000, "output_tokens": 900_000})
                                       + "\n" for i in range(20)), encoding="utf-8")
    tracemalloc.start()
    began = time.perf_counter()
    try:
        _refused(capsys, [*SIM, "--trace", "t.jsonl"], "every request is refused by the engine",
                 "9,000,000 + output 900,000 tokens > max_model_len 131,072")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - began < 8
    assert peak < 100 * 2**20, peak


def test_counted_tokens_are_ranges_and_a_finished_request_lets_its_ids_go() -> None:
    """A count became an array of 8 bytes a token; each step kept a map of every request it ran (about 60 bytes an
    output token) and each finished request its ids and a list of its token steps: a 1,000,000-request trace ended in
    a MemoryError traceback past 4 GB."""
    from kvbudget.sim.run import replay
    from kvbudget.sim.scheduler import SchedulerSettings
    from kvbudget.sim.trace import TokenSource
    from kvbudget.sim.workload import generate, parse_workload

    assert isinstance(TokenSource().fresh(10_000_000), range)
    specs = generate(parse_workload("requests=40,arrivals=at-once,prompt=40,output=6,seed=3"))
    settings = SchedulerSettings(16, 8, 64, 4096)
    kept, lean = replay(specs, settings, 64), replay(specs, settings, 64, detail=False)
    assert [(s.running, s.waiting, s.slots_used) for s in kept.steps] == [(s.running, s.waiting, s.slots_used)
                                                                          for s in lean.steps]
    assert any(s.scheduled for s in kept.steps) and not any(s.scheduled or s.finished for s in lean.steps)
    assert all(r.finished_step is not None and not r.tokens and not r.keys and r.generated == 6 for r in lean.requests)


def test_a_workload_over_the_request_cap_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """Each request holds about 900 bytes through a replay: 1,000,000 of them (the cap) peaked at 1.07 GB."""
    _refused(capsys, [*SIM, "--synthetic", "requests=500001"], "--synthetic: requests=500,001 is outside 1..500,000; "
             "replay a sample")


def test_conversations_whose_histories_hold_too_many_ids_are_refused_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    """20 conversations of 100 turns resend 101 million tokens of history as ids: 41 s and 2.08 GB, exit 0."""
    began = time.perf_counter()
    _refused(capsys, [*SIM, "--synthetic", "requests=2000,turns=100,prompt=500,output=500"],
             "resent conversation histories come to more than 25,000,000 token ids held")
    assert time.perf_counter() - began < 8


def test_a_trace_of_too_many_listed_ids_is_refused_before_making_them(capsys: pytest.CaptureFixture[str],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Ids given as lists are held, 8 bytes each, for the whole replay: up to 200 million (1.6 GB) were taken. The cap
    is lowered here so that a small file crosses it."""
    import kvbudget.sim.trace as trace

    monkeypatch.setattr(trace, "MAX_HELD_IDS", 1000)
    Path("t.jsonl").write_text("".join(json.dumps({"arrival": i, "prompt": list(range(600)), "output_tokens": 4}) + "\n"
                                       for i in range(2)), encoding="utf-8")
    _refused(capsys, [*SIM, "--trace", "t.jsonl"], "more than 1,000 token ids given as lists",
             "as counts ('prompt_tokens', 'output_tokens')")


def test_a_replay_that_cannot_end_within_the_step_cap_is_refused_before_it_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """1,600 requests of 60,000 + 60,000 tokens: 7 fit the pool at once, so at least 13.7 million decode steps. It
    ran more than 5 minutes (per policy) toward the 2,000,000-step refusal."""
    began = time.perf_counter()
    _refused(capsys, [*SIM, "--synthetic", "requests=1600,prompt=60000,output=60000,rate=1000"],
             "this traffic takes at least 13,714,285 engine steps", "at most 7 requests at once",
             "more than the 2,000,000 a replay runs")
    assert time.perf_counter() - began < 8


def test_a_line_separator_inside_a_json_string_is_part_of_its_line(capsys: pytest.CaptureFixture[str]) -> None:
    """U+2028 in a request's id or text is valid JSON; str.splitlines cut the line there: 'line 1: not JSON'."""
    Path("t.jsonl").write_text(json.dumps({"arrival": 0, "prompt_tokens": 10, "output_tokens": 5, "id": "a\u2028b"},
                                          ensure_ascii=False) + "\n", encoding="utf-8")
    out, _ = _runs(capsys, [*SIM, "--trace", "t.jsonl", "--json"])
    assert json.loads(out)["requests"] == 1


def test_a_csv_trace_is_named_for_what_it_is(capsys: pytest.CaptureFixture[str]) -> None:
    """A trace written as CSV (a header row, then rows) was 'line 1: not JSON', the format kvbudget reads unsaid."""
    Path("t.csv").write_text("arrival,prompt_tokens,output_tokens\n0,100,10\n", encoding="utf-8")
    _refused(capsys, [*SIM, "--trace", "t.csv"], "t.csv line 1: comma-separated values, not JSON",
             '{"arrival": 0.25, "prompt_tokens": 812, "output_tokens": 200}')


# --- a vLLM release kvbudget has not read ---------------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    [*SIM, "--synthetic", "requests=3", "--vllm-version", "99.0"],
    ["plan", "llama-3.1-8b", "--gpus", "H100", "--context", "8192", "--concurrency", "8", "--vllm-version", "99.0"],
])
def test_plan_and_simulate_say_the_release_is_newer_than_any_read(capsys: pytest.CaptureFixture[str],
                                                                   argv: list[str]) -> None:
    """fit, levers and explain noted it; plan and simulate planned 99.0 as 0.33.0 and said nothing (exit 0)."""
    out, _ = _runs(capsys, argv)
    assert "warning: vLLM '99.0' is newer than the newest release kvbudget has read (0.33.0)" in out.replace("\n  ", " ")
    out, _ = _runs(capsys, [*argv, "--json"])
    assert any("'99.0' is newer than the newest release" in w for w in json.loads(out)["warnings"])


@pytest.mark.parametrize("version", ["0.0.1", "0.5.4", "v0.1"])
def test_a_release_older_than_any_read_is_said(capsys: pytest.CaptureFixture[str], version: str) -> None:
    """0.0.1 (a placeholder on PyPI) and 0.5.4 were planned with the V0 rules of 0.6-0.7 and nothing said."""
    out, _ = _runs(capsys, ["fit", "llama-3.1-8b", "--gpu", "H100", "--vllm-version", version, "--json"])
    said = json.loads(out)
    assert any(f"'{version}' is older than the oldest release kvbudget has read (0.6.0)" in n
               for n in said["warnings"] + said.get("notes", [])), said
    out, _ = _runs(capsys, ["fit", "llama-3.1-8b", "--gpu", "H100", "--vllm-version", "0.6.0"])
    assert "older than" not in out


def test_levers_json_carries_the_warnings_its_text_prints(capsys: pytest.CaptureFixture[str]) -> None:
    """A context past the model's is warned in the text; levers --json dropped it."""
    argv = ["levers", "llama-3.1-8b", "--gpu", "H100", "--context", "200000"]
    out, _ = _runs(capsys, argv)
    assert "warning: 200,000 tokens exceed" in out
    out, _ = _runs(capsys, [*argv, "--json"])
    assert any(w.startswith("200,000 tokens exceed") for w in json.loads(out)["warnings"])


# --- metrics pages -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("labels", "width", "said"), [
    (100_000, 10, "line 1 (1,988,918 characters, 100,000 labels)"),  # was 15.6 s, then 'healthy', exit 0
    (1_000, 4, "1,000 labels) is larger than any engine's series"),
])
def test_a_series_of_more_labels_than_any_engine_writes_is_refused_at_once(capsys: pytest.CaptureFixture[str],
                                                                          labels: int, width: int, said: str) -> None:
    """prometheus_client's parser takes time labels x line length: 500 lines of 1,250 labels took 8 s."""
    pairs = ",".join(f'l{i}="{"x" * width}"' for i in range(labels))
    Path("m.prom").write_text(f"vllm:num_requests_running{{{pairs}}} 1\n", encoding="utf-8")
    began = time.perf_counter()
    _refused(capsys, ["diagnose", "--metrics", "m.prom"], said, "is it the engine's own /metrics page?")
    assert time.perf_counter() - began < 5


def test_more_prefix_cache_hits_than_lookups_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """100 hits of 10 tokens looked up was read as a 100% hit rate ('100 of 10'), exit 0."""
    Path("m.prom").write_text('vllm:num_requests_running{model_name="m"} 1\n'
                              'vllm:kv_cache_usage_perc{model_name="m"} 0.5\n'
                              'vllm:prefix_cache_queries_total{model_name="m"} 10\n'
                              'vllm:prefix_cache_hits_total{model_name="m"} 100\n', encoding="utf-8")
    _refused(capsys, ["diagnose", "--metrics", "m.prom"],
             "m.prom: m counts 100 prefix-cache hits of 10 tokens looked up, more hits than lookups")


# --- GGUF ----------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("kv_heads", "said"), [
    (3, "layer 0 has 3 KV heads (llama.attention.head_count_kv), which do not divide its 4 attention heads"),
    ([2, 3, 2, 2], "layer 1 has 3 KV heads"),
])
def test_gguf_kv_heads_that_do_not_divide_the_heads_are_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                                kv_heads: object, said: str) -> None:
    """ggml broadcasts KV heads over query heads only where they divide them (llama.cpp stops at its first graph);
    kvbudget planned it, exit 0, where the same config.json was refused."""
    path = _tiny_gguf(tmp_path / "m.gguf", kv_heads=kv_heads)
    for argv in (["kv", "m.gguf"], ["fit", "m.gguf", "--engine", "llama.cpp", "--gpu", "H100"]):
        _refused(capsys, argv, said, "llama.cpp stops on it")
    assert path.exists()


# --- a metrics server or Prometheus that answers slowly ---------------------------------------------------------------

def test_a_prometheus_answering_each_query_just_in_time_is_asked_once_for_all(capsys: pytest.CaptureFixture[str]) -> None:
    """The fleet's ten queries went one after another: a server answering each in 4 s of a 5 s timeout took 41 s to
    say it holds no series; they are asked at once now, so the whole takes one answer's time."""
    from prom_fixture import canned_server

    empty = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()
    with canned_server(200, empty, delay_s=0.8) as url:
        began = time.perf_counter()
        _refused(capsys, ["diagnose", "--prometheus", url, "--timeout", "2"], "holds no vLLM or SGLang series")
        assert time.perf_counter() - began < 4  # ten answers of 0.8 s one after another: 8 s

