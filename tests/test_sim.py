"""``kvbudget simulate``: the block pool, the scheduler and the replay, checked by hand on small cases, against a
slow reference implementation on random traces (hypothesis), and end to end through the command line."""

from __future__ import annotations

import json
from array import array
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvbudget
from kvbudget.cli import main
from kvbudget.sim.hybrid import Group
from kvbudget.sim.pool import BlockPool
from kvbudget.sim.run import replay
from kvbudget.sim.scheduler import SchedulerSettings
from kvbudget.sim.trace import RequestSpec, TokenSource, TraceError, read_trace
from kvbudget.sim.workload import generate, parse_workload
from kvbudget.units import InputError


def req(rid: str, prompt: list[int], out: int, step: int = 0) -> RequestSpec:
    return RequestSpec(rid, 0.0, array("q", prompt), array("q", range(10_000 + 100 * int(rid[1:]),
                                                                      10_000 + 100 * int(rid[1:]) + out)), step)


# --- the block pool ---------------------------------------------------------------------------------------------


def test_the_null_block_is_never_handed_out() -> None:
    pool = BlockPool(4)
    assert pool.usable == 3 and pool.num_free() == 3
    taken = pool.take(3)
    assert [b.id for b in taken] == [1, 2, 3]
    with pytest.raises(ValueError):
        pool.take(1)


def test_freed_uncached_blocks_are_reused_first_and_cached_ones_last_least_recent_first() -> None:
    pool = BlockPool(7)
    a, b, c, d, *_ = pool.take(6)
    pool.cache(a, 100)
    pool.cache(b, 101)
    pool.release([b, a])  # a request's blocks, tail first: b is evicted before a
    pool.release([c])  # no prefix: handed out before any cached block
    pool.cache(d, 102)
    pool.release([d])  # cached, freed after a and b
    assert [x.id for x in pool.take(1)] == [c.id]
    assert [x.id for x in pool.take(1)] == [b.id] and pool.lookup(101) is None  # evicted: its prefix is gone
    assert pool.lookup(100) is a and pool.evictions == 1
    pool.touch([a])  # a hit takes a out of the free queue
    assert [x.id for x in pool.take(1)] == [d.id]
    assert pool.num_free() == 0 and pool.lookup(100) is a


# --- the scheduler, by hand ---------------------------------------------------------------------------------------


def test_a_prompt_fully_in_the_cache_still_computes_its_last_token() -> None:
    """32 prompt tokens = 2 full blocks of 16; the second request with the same prompt finds only the first block
    (hits are capped at num_tokens - 1: vLLM recomputes the last prompt token to sample from it)."""
    s = SchedulerSettings(16, 8, 512, 256)
    prompt = list(range(32))
    r = replay([req("r1", prompt, 1, 0), req("r2", prompt, 1, 5)], s, 20)
    assert r.steps[-1].prefix_queries == 64 and r.steps[-1].prefix_hits == 16
    assert r.steps[-1].scheduled == {"r2": 16}


def test_chunked_prefill_splits_a_long_prompt_by_the_token_budget() -> None:
    s = SchedulerSettings(16, 8, 64, 1024, enable_prefix_caching=False)
    r = replay([req("r1", list(range(150)), 2)], s, 64)
    assert [st.scheduled["r1"] for st in r.steps] == [64, 64, 22, 1]  # 150 = 64 + 64 + 22, then one decode step


def test_without_chunked_prefill_a_prompt_longer_than_the_budget_is_refused_in_one_line() -> None:
    s = SchedulerSettings(16, 8, 64, 1024, enable_prefix_caching=False, enable_chunked_prefill=False)
    with pytest.raises(InputError, match="can never be scheduled"):
        replay([req("r1", list(range(150)), 2)], s, 64)


def test_when_blocks_run_out_the_last_admitted_request_is_preempted_and_nobody_is_admitted_that_step() -> None:
    """5 usable blocks of 4 tokens; two requests of 4-token prompts decode until they need a third block each."""
    s = SchedulerSettings(4, 8, 64, 64, enable_prefix_caching=False)
    r = replay([req("r1", [1, 2, 3, 4], 12), req("r2", [5, 6, 7, 8], 12), req("r3", [9, 9, 9, 9], 1, 1)], s, 6)
    first = next(st for st in r.steps if st.preempted)
    assert first.preempted == ("r3",) or first.preempted == ("r2",)
    victim = first.preempted[0]
    assert victim not in first.scheduled  # preempted requests are not run in the step that preempted them
    assert r.steps[-1].preemptions >= 1
    assert all(q.finished_step is not None for q in r.requests)  # everyone finishes in the end


# --- a reference implementation: slow and plain, the same rules -------------------------------------------------------


def reference(specs: list[RequestSpec], s: SchedulerSettings, num_blocks: int) -> list[tuple]:
    """vLLM's V1 rules written again with plain lists: the free queue is a list, a cached block is known by the
    tuple of every token before its end, blocks are dicts."""
    bs = s.block_size
    blocks = [{"id": i, "ref": 0, "prefix": None} for i in range(num_blocks)]
    free = list(range(1, num_blocks))
    cache: dict[tuple, list[int]] = {}
    pending = sorted(specs, key=lambda x: x.arrival_step or 0)
    waiting: list[dict] = []
    running: list[dict] = []
    out = []
    step = 0
    queries = hits = preemptions = 0

    def take() -> int:
        bid = free.pop(0)
        p = blocks[bid]["prefix"]
        if p is not None:
            cache[p].remove(bid)
            if not cache[p]:
                del cache[p]
            blocks[bid]["prefix"] = None
        blocks[bid]["ref"] = 1
        return bid

    def release(r: dict) -> None:
        first, last = [], []
        for bid in reversed(r["blocks"]):
            blocks[bid]["ref"] -= 1
            if blocks[bid]["ref"] == 0:
                (last if blocks[bid]["prefix"] is not None and s.enable_prefix_caching else first).append(bid)
        for bid in reversed(first):
            free.insert(0, bid)
        free.extend(last)
        r["blocks"], r["cached"] = [], 0

    def allocate(r: dict, n: int, hit: list[int], admit: bool) -> bool:
        comp = r["computed"] + len(hit) * bs
        evictable = sum(1 for b in hit if blocks[b]["ref"] == 0)
        whole = -(-min(len(r["tokens"]), s.max_model_len) // bs) - len(hit) - len(r["blocks"])
        if admit and max(whole, 0) + evictable > len(free):
            return False
        need = -(-min(comp + n, s.max_model_len) // bs) - len(hit) - len(r["blocks"])
        if max(need, 0) + evictable > len(free):
            return False
        for b in hit:
            if blocks[b]["ref"] == 0:
                free.remove(b)
            blocks[b]["ref"] += 1
        r["blocks"] += hit
        for _ in range(max(need, 0)):
            r["blocks"].append(take())
        if s.enable_prefix_caching:
            full = min(comp + n, len(r["tokens"])) // bs
            for i in range(r["cached"], full):
                b = r["blocks"][i]
                if blocks[b]["prefix"] is None:
                    p = tuple(r["tokens"][:(i + 1) * bs])
                    blocks[b]["prefix"] = p
                    cache.setdefault(p, []).append(b)
            r["cached"] = max(r["cached"], full)
        return True

    while pending or waiting or running:
        while pending and (pending[0].arrival_step or 0) <= step:
            x = pending.pop(0)
            waiting.append({"id": x.id, "tokens": list(x.prompt), "out": list(x.output), "gen": 0, "computed": 0,
                            "blocks": [], "cached": 0})
        if not waiting and not running:
            step = pending[0].arrival_step or 0
            continue
        budget = s.max_num_batched_tokens
        sched: dict[str, int] = {}
        pre: list[str] = []
        i = 0
        while i < len(running) and budget > 0:
            r = running[i]
            n = min(len(r["tokens"]) - r["computed"], budget, s.max_model_len - r["computed"] - 1)
            ok = True
            while not allocate(r, n, [], False):
                v = running.pop()
                release(v)
                v["computed"] = 0
                waiting.insert(0, v)
                pre.append(v["id"])
                preemptions += 1
                if v is r:
                    ok = False
                    break
            if not ok:
                break
            sched[r["id"]] = n
            budget -= n
            i += 1
        if not pre:
            while budget > 0 and waiting and len(running) < s.max_num_seqs:
                r = waiting[0]
                hit: list[int] = []
                if r["computed"] == 0 and s.enable_prefix_caching:
                    for k in range(1, (len(r["tokens"]) - 1) // bs + 1):
                        holders = cache.get(tuple(r["tokens"][:k * bs]))
                        if not holders:
                            break
                        hit.append(holders[0])
                comp = r["computed"] + len(hit) * bs
                n = min(len(r["tokens"]) - comp, budget)
                if not allocate(r, n, hit, True):
                    break
                waiting.pop(0)
                if r["computed"] == 0 and s.enable_prefix_caching:
                    queries += len(r["tokens"])
                    hits += len(hit) * bs
                r["computed"] = comp
                running.append(r)
                sched[r["id"]] = n
                budget -= n
        counts = (len(running), len(waiting))
        done = []
        for rid, n in sched.items():
            r = next(x for x in running if x["id"] == rid)
            r["computed"] += n
            if r["computed"] >= len(r["tokens"]):
                r["tokens"].append(r["out"][r["gen"]])
                r["gen"] += 1
                if r["gen"] == len(r["out"]):
                    done.append(r)
        for r in done:
            running.remove(r)
            release(r)
        out.append((step, *counts, sched, tuple(pre), tuple(r["id"] for r in done), queries, hits,
                    preemptions))
        step += 1
    return out


SHARED = [list(range(1000, 1000 + n)) for n in (7, 16, 40)]


@st.composite
def traces(draw: st.DrawFn) -> tuple[list[RequestSpec], SchedulerSettings, int]:
    bs = draw(st.sampled_from([2, 4, 16]))
    n = draw(st.integers(1, 12))
    specs = []
    for i in range(n):
        head = SHARED[draw(st.integers(0, 2))] if draw(st.booleans()) else []
        tail = [draw(st.integers(1, 5)) for _ in range(draw(st.integers(0, 20)))]
        prompt = (head + tail) or [1]
        out = draw(st.integers(1, 12))
        specs.append(RequestSpec(f"r{i}", 0.0, array("q", prompt), array("q", [7 + (i * j) % 3 for j in range(out)]),
                                 draw(st.integers(0, 8))))
    longest = max(x.prompt_len + x.output_len for x in specs)
    s = SchedulerSettings(bs, draw(st.integers(1, 6)), draw(st.integers(8, 64)), longest + draw(st.integers(0, 8)),
                          draw(st.booleans()))
    blocks = -(-longest // bs) + 1 + draw(st.integers(0, 12))
    return specs, s, blocks


@settings(max_examples=300, deadline=None)
@given(traces())
def test_the_scheduler_matches_a_plain_reference_step_by_step(case: tuple) -> None:
    specs, s, blocks = case
    ours = replay(specs, s, blocks).steps
    theirs = reference(specs, s, blocks)
    assert [(x.step, x.running, x.waiting, x.scheduled, x.preempted, x.finished, x.prefix_queries, x.prefix_hits,
             x.preemptions) for x in ours] == theirs


# --- traces and workloads -----------------------------------------------------------------------------------------


def test_a_synthetic_workload_is_reproducible_from_its_seed() -> None:
    spec = "requests=50,rate=5,prompt=uniform:10:100,output=fixed:20,prefixes=2x64@0.5,turns=2,seed=7"
    a, b = generate(parse_workload(spec)), generate(parse_workload(spec))
    assert [(x.id, x.arrival, list(x.prompt), x.after) for x in a] == [(x.id, x.arrival, list(x.prompt), x.after) for x in b]
    assert len(a) == 50 and all(x.output_len == 20 for x in a)
    second = [x for x in a if x.after]  # each later turn resends the whole history: the previous prompt and answer
    prev = {x.id: x for x in a}
    assert second and all(list(x.prompt[:prev[x.after].prompt_len + 20]) == list(prev[x.after].prompt)
                          + list(prev[x.after].output) for x in second)


@pytest.mark.parametrize("spec, message", [
    ("requests=0", r"requests=0 is outside 1\.\.500,000"), ("rate=-1", "bad value for rate"), ("prompt=zipf:3", "expected N, fixed"),
    ("prefixes=4x", "KxP@F"), ("colour=blue", "unknown key"), ("requests", "not key=value"),
    ("prompt=uniform:500:10", "LOW <= HIGH"), ("rate=nan", "bad value for rate"), ("x" * 20_000, "longer than"),
    ("requests=5,requests=6", "given twice"),
])
def test_a_bad_workload_spec_is_one_clear_error(spec: str, message: str) -> None:
    with pytest.raises(TraceError, match=message):
        parse_workload(spec)


@pytest.mark.parametrize("line, message", [
    ("[1, 2]", "JSON object"), ('{"arrival": 0, "output_tokens": 5}', "exactly one of"),
    ('{"arrival": -1, "prompt_tokens": 5, "output_tokens": 5}', "arrival"),
    ('{"arrival": 0, "prompt_tokens": 1e30, "output_tokens": 5}', "outside"),
    ('{"arrival": 0, "prompt_tokens": 2.5, "output_tokens": 5}', "whole number"),
    ('{"arrival": 0, "prompt_tokens": 99999999999, "output_tokens": 5}', "outside"),
    ('{"arrival": 0, "prompt": [1, "a"], "output_tokens": 5}', "token ids"),
    ('{"arrival": 0, "prompt_tokens": 5}', "output_tokens"), ('{"arrival": 0, "text": "hi", "output_tokens": 5}', "tokenizer"),
    ("{not json", "not JSON"), ('{"arrival": 0, "prompt_tokens": 5, "output_tokens": 5, "after": "nobody"}', "earlier"),
    # token ids index a vocabulary: a negative id was replayed; one at 2^40 and up is the counter TokenSource gives
    # the prompts given as counts, so it shared their prefix-cache blocks (a reuse no engine would see)
    ('{"arrival": 0, "prompt": [5, -1], "output_tokens": 5}', "holds token id -1"),
    ('{"arrival": 0, "prompt": [1099511627776], "output_tokens": 5}', "holds token id 1,099,511,627,776"),
    ('{"arrival": 0, "prompt": [5], "output": [7, -3]}', "'output' holds token id -3"),
])
def test_a_bad_trace_line_is_one_clear_error(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(TraceError, match=message):
        read_trace(str(path))


def test_a_trace_reads_token_ids_counts_and_openai_style_lines(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"arrival": 0.5, "prompt": [1, 2, 3], "output_tokens": 4, "id": "a"}\n\n'
                    '{"arrival": 1, "prompt_tokens": 7, "output": [5, 6]}\n')
    a, b = read_trace(str(path))
    assert (a.id, list(a.prompt), a.output_len, b.prompt_len, list(b.output)) == ("a", [1, 2, 3], 4, 7, [5, 6])
    assert TokenSource().fresh(3)[0] > 1 << 39  # counts become ids no vocabulary has


# --- end to end ---------------------------------------------------------------------------------------------------


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(list(argv)) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_simulate_runs_on_the_pool_fit_plans(capsys: pytest.CaptureFixture[str]) -> None:
    fit = _json(capsys, "fit", "Qwen/Qwen3-8B", "--gpu", "L4", "--context", "8192", "--json")
    doc = _json(capsys, "simulate", "Qwen/Qwen3-8B", "--gpu", "L4", "--context", "8192", "--json",
                "--synthetic", "requests=120,rate=2,prompt=sharegpt,output=sharegpt,seed=3")
    assert doc["pool"]["blocks"] == fit["num_gpu_blocks"] and doc["pool"]["block_size"] == fit["block_size"]
    assert doc["pool"]["max_num_seqs"] == fit["max_num_seqs"]
    assert doc["pool"]["max_num_batched_tokens"] == fit["max_num_batched_tokens"]
    assert doc["static_concurrency"] == pytest.approx(fit["max_concurrency"], abs=5e-5)  # the fit's JSON: 4 decimals
    assert [p["policy"] for p in doc["policies"]] == ["paged", "contiguous-max", "contiguous-exact"]
    assert all(p["requests"] == 120 for p in doc["policies"])


def test_paged_waste_is_small_and_max_length_reservation_wastes_most_of_the_cache() -> None:
    """The PagedAttention paper's qualitative result (Kwon et al., SOSP 2023, sections 2.3 and 6): reserving the
    maximum length per request wastes most of the KV memory; paged allocation wastes under 4%."""
    a = kvbudget.simulate("Qwen/Qwen3-8B", gpu="L4", context=8192, prefix_caching=False,
                          synthetic="requests=300,rate=3,prompt=sharegpt,output=sharegpt,seed=1")
    paged, contiguous_max, exact = a.results
    assert paged.waste < 0.04
    assert contiguous_max.waste > 0.6
    assert exact.waste < contiguous_max.waste
    assert paged.max_running > contiguous_max.max_running


def test_simulate_refuses_bad_input_in_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["simulate", "Qwen/Qwen3-8B", "--gpu", "L4", "--synthetic", "requests=abc"]) == 2
    assert "bad value for requests" in capsys.readouterr().err
    missing = tmp_path / "none.jsonl"
    assert main(["simulate", "Qwen/Qwen3-8B", "--gpu", "L4", "--trace", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "none.jsonl" in err
    assert main(["simulate", "Qwen/Qwen3-8B", "--gpu", "L4", "--synthetic", "requests=5", "--policies", "lifo"]) == 2
    assert "unknown policy" in capsys.readouterr().err
    too_long = tmp_path / "long.jsonl"
    too_long.write_text('{"arrival": 0, "prompt_tokens": 5, "output_tokens": 9000000}\n')
    assert main(["simulate", "Qwen/Qwen3-8B", "--gpu", "L4", "--context", "8192", "--trace", str(too_long)]) == 2
    assert "every request is refused" in capsys.readouterr().err


def test_text_prompts_are_counted_with_a_real_tokenizer_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A tokenizer.json built and saved by the tokenizers package itself (a word-level vocabulary, so the counts
    are checkable by eye): each text prompt's length is its number of words, and two prompts sharing their first
    32 words share two 16-token blocks in the prefix cache."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = [f"w{i}" for i in range(64)]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(["[UNK]", *words])}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    shared = " ".join(words[:32])
    trace = tmp_path / "t.jsonl"
    trace.write_text(json.dumps({"arrival": 0, "text": shared + " w40 w41 w42", "output_tokens": 4}) + "\n"
                     + json.dumps({"arrival": 5, "text": shared + " w50", "output_tokens": 4}) + "\n")
    doc = _json(capsys, "simulate", "Qwen/Qwen3-8B", "--gpu", "L4", "--context", "8192", "--json", "--trace",
                str(trace), "--tokenizer", str(tmp_path / "tokenizer.json"), "--policies", "paged")
    paged = doc["policies"][0]
    assert paged["prefix_hit_tokens"] == pytest.approx(32 / (35 + 33))  # hits over the prompt tokens looked up
    assert paged["prefix_hit_blocks"] == pytest.approx(2 / (3 + 3))  # 2 hit blocks of the 6 the prompts span
    (tmp_path / "bad.json").write_text('{"model": 3}')
    assert main(["simulate", "Qwen/Qwen3-8B", "--gpu", "L4", "--trace", str(trace), "--tokenizer",
                 str(tmp_path / "bad.json")]) == 2
    assert "not a tokenizer.json" in capsys.readouterr().err


def test_a_bare_length_is_a_fixed_length() -> None:
    assert parse_workload("requests=3,prompt=2000,output=7") == parse_workload("requests=3,prompt=fixed:2000,output=fixed:7")


def test_a_progress_bar_goes_to_a_terminal_on_stderr_and_never_under_json(tmp_path: Path) -> None:
    """The CLI in a real pseudo-terminal: tqdm's bar on standard error, the report alone on standard output."""
    import os
    import pty
    import subprocess
    import sys

    def run(*extra: str) -> tuple[str, str]:
        master, slave = pty.openpty()
        argv = [sys.executable, "-m", "kvbudget", "simulate", "Qwen/Qwen3-8B", "--gpu", "L4", "--context", "8192",
                "--synthetic", "requests=3000,rate=50,seed=2", "--policies", "paged", *extra]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=slave, env={**os.environ, "COLUMNS": "100"})
        os.close(slave)
        err = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            err += chunk
        out = proc.communicate(timeout=300)[0].decode()
        os.close(master)
        assert proc.returncode == 0, err.decode(errors="replace")
        return out, err.decode(errors="replace")

    out, err = run()
    assert "simulating paged" in err and "req" in err and "3000/3000" not in out
    assert "policy" in out and "simulating" not in out
    out, err = run("--json")
    assert "simulating" not in err and json.loads(out)["requests"] == 3000


def test_a_hybrid_model_holds_a_block_table_per_kv_cache_group() -> None:
    """gemma-3-1b-it under vLLM: 26 layers, 22 sliding-window (512) and 4 full attention, in groups of 4 layers:
    6 sliding groups and 1 full group on one pool. One request of 2,000 prompt tokens and 3 output tokens, prefilled
    in one step (budget 2,048): every group first holds ceil(2000/16) = 125 blocks (nothing is out of the window
    before it is computed) = 875 blocks; at the decode step each sliding group frees the blocks wholly before the
    window of token 2,001 ((2000 - 512 + 1) // 16 = 93) and every group takes a block for token 2,001:
    126 + 6 x (125 - 93 + 1) = 324 blocks; the step that samples the last token frees them all."""
    trace = [RequestSpec("a", 0.0, array("q", range(1, 2001)), array("q", [7, 8, 9]), 0)]
    a = kvbudget.simulate("google/gemma-3-1b-it", gpu="L4", context=32768, policies=("paged",), trace=trace)
    assert sorted(a.groups) == [("full_attention", 0)] + [("sliding_window", 512)] * 6
    assert [st.slots_used // 16 for st in a.replay.steps] == [875, 324, 0]
    assert not a.warnings


# --- conformance with vLLM's own scheduler ------------------------------------------------------------------------

RECORDED = Path(__file__).parent / "data" / "vllm_sched"


@pytest.mark.parametrize("name", sorted(p.stem for p in RECORDED.glob("*.json")))
def test_every_step_matches_what_vllms_own_scheduler_recorded(name: str) -> None:
    """tools/vllm_sched_oracle.py ran vLLM 0.33.0's V1 Scheduler, KVCacheManager and BlockPool on these traces (CPU,
    no model); kvbudget's replay gives the same running and waiting counts, scheduled tokens, preemptions,
    finishes, blocks in use and prefix-cache hits at every step."""
    rec = json.loads((RECORDED / f"{name}.json").read_text())
    cfg = rec["settings"]
    groups = tuple(Group(kind, window) for kind, window in cfg.get("groups", ()))  # a hybrid model's KV-cache groups
    s = SchedulerSettings(cfg["block_size"], cfg["max_num_seqs"], cfg["max_num_batched_tokens"], cfg["max_model_len"],
                          cfg["enable_prefix_caching"], cfg["enable_chunked_prefill"], groups=groups)
    specs = [RequestSpec(r["id"], 0.0, array("q", r["prompt_ids"]), array("q", r["output_ids"]), r["arrival_step"])
             for r in rec["requests"]]
    ours = replay(specs, s, cfg["num_gpu_blocks"]).steps
    # the recording tool steps through idle time too (nothing running or waiting until the next arrival); kvbudget
    # jumps over it
    busy = [x for x in rec["steps"] if x["sched"] or x["running"] or x["waiting"]]
    assert len(ours) == len(busy)
    for mine, theirs in zip(ours, busy, strict=True):
        assert (mine.step, mine.running, mine.waiting, mine.scheduled, list(mine.preempted), sorted(mine.finished),
                mine.slots_used // cfg["block_size"], mine.prefix_queries, mine.prefix_hits, mine.preemptions) == (
            theirs["step"], theirs["running"], theirs["waiting"], theirs["sched"], theirs["preempted"],
            sorted(theirs["finished"]), theirs["used"], theirs["q"] + theirs["pq"], theirs["h"] + theirs["ph"],
            theirs["npre"]), f"step {theirs['step']}"


def test_an_openai_style_line_reads_content_parts_and_a_usage_of_any_shape(tmp_path: Path) -> None:
    """OpenAI's chat content as a list of parts is their text (not the list's Python repr); a 'usage' that is not an
    object is no usage (it was an AttributeError)."""
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"request": {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "a b c"}, {"type": "image_url", "image_url": {"url": "x"}}]}], "max_tokens": 4},
        "timestamp": 0, "response": {"usage": [1]}}) + "\n")
    seen: list[str] = []
    (req,) = read_trace(str(path), lambda s: seen.append(s) or list(range(len(s.split()))))
    assert seen == ["a b c"] and req.prompt_len == 3 and req.output_len == 4
    path.write_text(json.dumps({"request": {"messages": [{"content": 5}], "max_tokens": 4}, "timestamp": 0}) + "\n")
    with pytest.raises(TraceError, match="'content' must be a string or a list of parts"):
        read_trace(str(path), lambda s: [1])


def _spaced(n: int, *, seconds: float = 0.0, steps: int = 0) -> list[RequestSpec]:
    """n requests of 100 prompt and 50 output tokens, ``seconds`` (or ``steps``) apart."""
    return [RequestSpec(f"r{i}", i * seconds, array("q", range(1000 * i + 1, 1000 * i + 101)), array("q", [7] * 50),
                        i * steps if steps else None) for i in range(n)]


def test_arrivals_are_replayed_on_the_clock_they_are_given_in() -> None:
    """A trace of arrival_step 0, 2000, 4000 ... (recorded from a scheduler) was replayed by time, every request at
    t=0 (its seconds defaulted to 0): 50 requests running at once, exit 0. Now replayed by step, one at a time (each
    finishes in 51 steps). Arrivals in seconds on a GPU with no step-time model landed on step 0 too: refused where
    they differ; equal ones (all at 0) still run."""
    by_step = kvbudget.simulate("llama-3.1-8b", gpu="H100", context=8192, policies=("paged",),
                                trace=_spaced(50, steps=2000))
    assert max(st.running for st in by_step.replay.steps) == 1
    assert any("replayed step by step" in w for w in by_step.warnings)
    with pytest.raises(InputError, match="arrivals in seconds cannot be placed on engine steps"):
        kvbudget.simulate("llama-3.1-8b", gpu_memory=80 * 2**30, context=8192, trace=_spaced(50, seconds=100.0))
    together = kvbudget.simulate("llama-3.1-8b", gpu_memory=80 * 2**30, context=8192, policies=("paged",),
                                 trace=_spaced(50))
    assert max(st.running for st in together.replay.steps) == 50
    mixed = [*_spaced(2, seconds=5.0), RequestSpec("s", 0.0, array("q", [1, 2]), array("q", [3]), 40)]
    with pytest.raises(InputError, match="some arrivals as engine steps"):
        kvbudget.simulate("llama-3.1-8b", gpu="H100", context=8192, trace=mixed)


def test_simulate_says_why_the_slots_are_a_block_short(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 1,856 blocks x 16 tokens printed as 29,680 token slots read as an arithmetic slip: the pool never hands out
    # its block 0 (vLLM's null block), and the header now says so beside the figure
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"arrival": 0.0, "prompt_tokens": 812, "output_tokens": 200}\n')
    assert main(["simulate", "llama-3.1-8b", "--gpu", "L4", "--context", "8192", "--trace", str(trace), "--wide"]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    blocks, size, slots = (int(x.replace(",", "")) for x in
                           (head.split(": ")[1].split(" blocks")[0], head.split(" x ")[1].split(" tokens")[0],
                            head.split("(")[1].split(" token slots")[0]))
    assert slots == (blocks - 1) * size and "token slots; block 0 is the pool's null block)" in head, head
