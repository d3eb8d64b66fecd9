"""Record what vLLM's own V1 scheduler does on small traces (a conformance oracle; not run in CI).

kvbudget never depends on vLLM. This script drives vLLM 0.33.0's synchronous V1 ``Scheduler``
(vllm/v1/core/sched/scheduler.py) with its real ``KVCacheManager`` / ``BlockPool`` over one
full-attention KV cache group, on the CPU, with no model and no GPU: a fake model runner hands each
scheduled request the next token of a scripted output. The per-step records it writes under
tests/data/vllm_sched/ are what ``kvbudget simulate`` must reproduce exactly.

Trace file (JSON)::

    {"settings": {"num_gpu_blocks", "block_size", "max_num_seqs", "max_num_batched_tokens",
                  "max_model_len", "enable_prefix_caching", "enable_chunked_prefill"},
     "requests": [{"id": str, "arrival_step": int, "prompt_ids": [int], "output_ids": [int]}]}

A request is added (``Scheduler.add_request``) just before the ``schedule()`` call of step
``arrival_step`` (steps count from 0), in file order; it asks for exactly ``len(output_ids)`` tokens
(``max_tokens``, ``ignore_eos``). After each ``schedule()`` every scheduled request whose prefill is
complete (``not request.is_prefill_chunk``) is given the next token of its ``output_ids``; a
request in a partial prefill chunk gets an empty sampled list; then ``update_from_output``.

Per step it records (keys of each element of "steps"):
    step        the step index
    running     len(scheduler.running) right after schedule()
    waiting     len(waiting) + len(kv_holding_waiting) right after schedule()
                (Scheduler.get_request_counts)
    sched       {request id: num_scheduled_tokens} of this step (SchedulerOutput.num_scheduled_tokens)
    preempted   sorted ids preempted by this schedule() call (SchedulerOutput.preempted_req_ids)
    finished    sorted ids that finished in this step's update_from_output
    used        KV blocks with ref_cnt > 0 after update_from_output: num_gpu_blocks - 1 -
                BlockPool.get_num_free_blocks() (the null block excluded; cached blocks with
                ref_cnt 0 sit in the free queue and are NOT counted)
    cached      blocks holding a prefix-cache hash after update_from_output (KVCacheBlock.block_hash
                is not None, null block excluded), whether in use or evictable in the free queue
    q, h        cumulative PrefixCacheStats.queries / .hits (tokens; new requests only)
    pq, ph      cumulative PrefixCacheStats.preempted_queries / .preempted_hits (tokens; lookups
                by requests resumed after a preemption)
    npre        cumulative number of preemptions
The stats are taken with KVCacheManager.make_prefix_cache_stats() (get-and-reset) right after each
schedule(), which is when get_computed_blocks records them.

Set up (CPU only, no CUDA download), as the developers' brief describes:
    python3 -m venv /tmp/vllmenv && /tmp/vllmenv/bin/pip install torch==2.13.0
    /tmp/vllmenv/bin/pip install --no-deps vllm==0.33.0   # then the few packages its imports ask
    # for (einops was one)
Run from the repository root (writes the traces and their recordings; no network):
    VLLM_TARGET_DEVICE=cpu HF_HUB_OFFLINE=1 /tmp/vllmenv/bin/python tools/vllm_sched_oracle.py \\
        --out tests/data/vllm_sched
Other uses:
    ... tools/vllm_sched_oracle.py --traces-only --out DIR     # write only the trace inputs
    ... tools/vllm_sched_oracle.py --replay TRACE.json -o OUT.json  # record one trace file
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

VLLM_VERSION = "0.33.0"
STEP_CAP = 20000

# --------------------------------------------------------------------------- traces


def _toks(rng: random.Random, n: int, lo: int = 1000, hi: int = 30000) -> list[int]:
    return [rng.randrange(lo, hi) for _ in range(n)]


def _settings(num_gpu_blocks: int, block_size: int, max_num_seqs: int, max_num_batched_tokens: int,
              max_model_len: int, enable_prefix_caching: bool, enable_chunked_prefill: bool = True) -> dict[str, Any]:
    return {"num_gpu_blocks": num_gpu_blocks, "block_size": block_size, "max_num_seqs": max_num_seqs,
            "max_num_batched_tokens": max_num_batched_tokens, "max_model_len": max_model_len,
            "enable_prefix_caching": enable_prefix_caching, "enable_chunked_prefill": enable_chunked_prefill}


def trace_shared_prefix(seed: int = 1) -> dict[str, Any]:
    """40 requests; 3 system prompts of 100 tokens shared by most; unique suffixes; staggered arrivals."""
    rng = random.Random(seed)
    systems = [[100 * (k + 1) + i % 97 for i in range(100)] for k in range(3)]  # distinct 100-token prompts
    reqs, step = [], 0
    for i in range(40):
        step += rng.choice((0, 0, 1, 1, 2, 3))
        suffix = _toks(rng, rng.randint(5, 60))
        prompt = suffix if rng.random() < 0.15 else systems[rng.randrange(3)] + suffix
        reqs.append({"id": f"r{i:02d}", "arrival_step": step, "prompt_ids": prompt,
                     "output_ids": _toks(rng, rng.randint(3, 24))})
    return {"settings": _settings(512, 16, 16, 512, 1024, True), "requests": reqs}


def _conversations(rng: random.Random, n: int, first: Any, out: tuple[int, int], user: tuple[int, int],
                   gap: tuple[int, int]) -> list[dict[str, Any]]:
    """``n`` conversations of 4 turns: turn t+1's prompt is turn t's prompt + its output + ``user`` new tokens, and
    arrives ``gap`` steps after turn t could have finished (arrival + output length)."""
    reqs = []
    for c in range(n):
        prompt = first(c)
        step = rng.randint(0, 5 if gap[1] < 10 else 6)
        for t in range(4):
            answer = _toks(rng, rng.randint(*out))
            reqs.append({"id": f"c{c}t{t}", "arrival_step": step, "prompt_ids": prompt, "output_ids": answer})
            prompt = prompt + answer + _toks(rng, rng.randint(*user))
            step = step + len(answer) + rng.randint(*gap)
    reqs.sort(key=lambda r: (r["arrival_step"], r["id"]))
    return reqs


def trace_multi_turn(seed: int = 2) -> dict[str, Any]:
    """6 conversations x 4 turns; turn t+1's prompt = turn t's prompt + output + new user tokens.

    Arrival rule: with max_num_batched_tokens (2048) above the sum of all live prompts, max_num_seqs
    above the 6 conversations and a pool that never fills, every request is prefilled in its
    arrival step and then decodes one token a step, so a turn with O output tokens arriving at step s
    finishes in step s + O - 1. The next turn arrives at s + O + gap (gap 1..4), after it finished.
    main() checks this on the recording.
    """
    rng = random.Random(seed)
    reqs = _conversations(rng, 6, lambda c: [50 + c] * 8 + _toks(rng, rng.randint(20, 40)), (5, 25), (8, 30), (1, 4))
    return {"settings": _settings(1024, 16, 16, 2048, 2048, True), "requests": reqs}


def trace_burst_preempt(seed: int = 3) -> dict[str, Any]:
    """30 requests in the first 3 steps with long outputs into 60 blocks of 16: preemption by recompute."""
    rng = random.Random(seed)
    shared = _toks(rng, 32)
    reqs = []
    for i in range(30):
        prompt = (shared if i % 3 == 0 else []) + _toks(rng, rng.randint(16, 60))
        reqs.append({"id": f"b{i:02d}", "arrival_step": i // 10, "prompt_ids": prompt,
                     "output_ids": _toks(rng, rng.randint(60, 110))})
    return {"settings": _settings(60, 16, 32, 512, 512, True), "requests": reqs}


def trace_chunked_prefill(seed: int = 4) -> dict[str, Any]:
    """Long prompts (several x the 64-token budget) mixed with short ones; prefix caching off."""
    rng = random.Random(seed)
    reqs, step = [], 0
    for i in range(16):
        n = rng.randint(150, 400) if i % 3 == 0 else rng.randint(5, 40)
        reqs.append({"id": f"p{i:02d}", "arrival_step": step, "prompt_ids": _toks(rng, n),
                     "output_ids": _toks(rng, rng.randint(4, 20))})
        step += rng.choice((0, 1, 2, 4))
    return {"settings": _settings(400, 16, 8, 64, 1024, False), "requests": reqs}


def trace_prefix_eviction(seed: int = 5) -> dict[str, Any]:
    """Prefix caching with eviction pressure: 6 prefixes of 64 tokens (4 blocks) cycled through 19 usable blocks."""
    rng = random.Random(seed)
    prefixes = [_toks(rng, 64) for _ in range(6)]
    order = [0, 1, 0, 2, 3, 4, 5, 0, 1, 2, 5, 4, 3, 0, 1, 1, 2, 3, 0, 5, 4, 0, 2, 1]
    reqs, step = [], 0
    for i, p in enumerate(order):
        reqs.append({"id": f"e{i:02d}", "arrival_step": step, "prompt_ids": prefixes[p] + _toks(rng, rng.randint(3, 30)),
                     "output_ids": _toks(rng, rng.randint(4, 16))})
        step += rng.randint(2, 8)
    return {"settings": _settings(20, 16, 2, 256, 256, True), "requests": reqs}


def trace_no_chunking(seed: int = 6) -> dict[str, Any]:
    """Chunked prefill off: a prompt is admitted only whole within the remaining token budget, and the
    first one that does not fit stops admission (later, shorter prompts wait); prefix caching on."""
    rng = random.Random(seed)
    shared = _toks(rng, 48)
    reqs, step = [], 0
    for i in range(16):
        n = rng.randint(80, 140) if i % 3 == 0 else rng.randint(5, 50)
        prompt = (shared if i % 2 else []) + _toks(rng, n)
        reqs.append({"id": f"n{i:02d}", "arrival_step": step, "prompt_ids": prompt,
                     "output_ids": _toks(rng, rng.randint(3, 15))})
        step += rng.choice((0, 0, 1, 3))
    return {"settings": _settings(200, 16, 16, 192, 192, True, False), "requests": reqs}


def trace_full_isl_gate() -> dict[str, Any]:
    """Admission needs blocks for the whole prompt (scheduler_reserve_full_isl), not just the first chunk:
    b (300 tokens, 19 blocks) waits while a holds 6 of the 20 usable blocks, though a 64-token chunk fits."""
    return {"settings": _settings(21, 16, 4, 64, 512, False),
            "requests": [{"id": "a", "arrival_step": 0, "prompt_ids": list(range(100, 180)), "output_ids": list(range(10))},
                         {"id": "b", "arrival_step": 1, "prompt_ids": list(range(1000, 1300)), "output_ids": [1, 2]},
                         {"id": "c", "arrival_step": 2, "prompt_ids": list(range(2000, 2020)), "output_ids": [3, 4, 5]}]}


def trace_hybrid_sliding(seed: int = 8) -> dict[str, Any]:
    """A hybrid model: one full-attention and two sliding-window (48 tokens) KV-cache groups on one pool of 200
    blocks. Shared system prompts longer than the window, long prompts in 64-token chunks (blocks leave the window
    mid-prefill), outputs long enough to free window blocks while decoding, and a burst that preempts."""
    rng = random.Random(seed)
    systems = [_toks(rng, 120), _toks(rng, 70)]
    reqs, step = [], 0
    for i in range(36):
        step += rng.choice((0, 0, 1, 2, 4)) if i < 24 else 0
        head = systems[i % 2] if i % 4 != 3 else []
        reqs.append({"id": f"h{i:02d}", "arrival_step": step, "prompt_ids": head + _toks(rng, rng.randint(4, 90)),
                     "output_ids": _toks(rng, rng.randint(10, 80))})
    settings = _settings(200, 16, 24, 64, 1024, True)
    settings["groups"] = [["full_attention", 0], ["sliding_window", 48], ["sliding_window", 48]]
    return {"settings": settings, "requests": reqs}


def trace_hybrid_multi_turn(seed: int = 9) -> dict[str, Any]:
    """Multi-turn conversations on a full + sliding-window (32 tokens) model: each turn resends the history, so the
    sliding group's hit needs the window's last blocks still cached; a pool of 120 blocks forces evictions."""
    rng = random.Random(seed)
    reqs = _conversations(rng, 5, lambda c: _toks(rng, rng.randint(20, 60)), (5, 30), (8, 40), (30, 60))
    settings = _settings(120, 16, 8, 256, 2048, True)
    settings["groups"] = [["full_attention", 0], ["sliding_window", 32]]
    return {"settings": settings, "requests": reqs}


def trace_edge_cases(seed: int = 7) -> dict[str, Any]:
    """Small edge cases: same-step prefix hits, a fully cached 64-token prompt, a 1-token output."""
    rng = random.Random(seed)
    p64 = _toks(rng, 64)
    tail = _toks(rng, 20)
    reqs = [
        # a and b arrive together with the same 84-token prompt: b hits a's blocks in the same schedule().
        {"id": "a", "arrival_step": 0, "prompt_ids": p64 + tail, "output_ids": _toks(rng, 3)},
        {"id": "b", "arrival_step": 0, "prompt_ids": p64 + tail, "output_ids": _toks(rng, 5)},
        # c: exactly the first 64 tokens, all cached: the hit is capped at num_tokens - 1 (48 tokens).
        {"id": "c", "arrival_step": 4, "prompt_ids": p64, "output_ids": _toks(rng, 2)},
        # d: one output token; e: a 16-token prompt (one full block, hit capped to 0).
        {"id": "d", "arrival_step": 4, "prompt_ids": p64[:40], "output_ids": _toks(rng, 1)},
        {"id": "e", "arrival_step": 5, "prompt_ids": p64[:16], "output_ids": _toks(rng, 4)},
    ]
    return {"settings": _settings(64, 16, 8, 256, 256, True), "requests": reqs}


TRACES = {
    "shared_prefix": trace_shared_prefix,
    "multi_turn": trace_multi_turn,
    "burst_preempt": trace_burst_preempt,
    "chunked_prefill": trace_chunked_prefill,
    "prefix_eviction": trace_prefix_eviction,
    "no_chunking": trace_no_chunking,
    "edge_cases": trace_edge_cases,
    "full_isl_gate": trace_full_isl_gate,
    "hybrid_sliding": trace_hybrid_sliding,
    "hybrid_multi_turn": trace_hybrid_multi_turn,
}

# --------------------------------------------------------------------------- vLLM

# A one-layer model config for ModelConfig to inspect offline; no weights are ever loaded.
TINY_MODEL_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
    "num_attention_heads": 2, "num_key_value_heads": 1, "num_hidden_layers": 1, "vocab_size": 32000,
    "max_position_embeddings": 8192, "torch_dtype": "float32", "rms_norm_eps": 1e-6,
}


def build_scheduler(settings: dict[str, Any], model_dir: str) -> Any:
    import torch
    from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
    from vllm.utils.hashing import get_hash_fn_by_name
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec, SlidingWindowSpec
    from vllm.v1.structured_output import StructuredOutputManager

    block_size = settings["block_size"]
    model_config = ModelConfig(model=model_dir, skip_tokenizer_init=True, dtype="float32",
                               max_model_len=settings["max_model_len"], seed=0)
    scheduler_config = SchedulerConfig(
        max_num_seqs=settings["max_num_seqs"], max_num_batched_tokens=settings["max_num_batched_tokens"],
        max_model_len=settings["max_model_len"], enable_chunked_prefill=settings["enable_chunked_prefill"],
        async_scheduling=False, policy="fcfs", is_encoder_decoder=False)
    cache_config = CacheConfig(block_size=block_size, enable_prefix_caching=settings["enable_prefix_caching"])
    vllm_config = VllmConfig(model_config=model_config, scheduler_config=scheduler_config, cache_config=cache_config)
    sc = vllm_config.scheduler_config
    # VllmConfig's post-init may rewrite settings for the platform; refuse to record anything else.
    got = (sc.async_scheduling, sc.enable_chunked_prefill, sc.max_num_batched_tokens, sc.max_num_seqs,
           sc.policy, vllm_config.cache_config.enable_prefix_caching, vllm_config.speculative_config,
           vllm_config.kv_transfer_config, vllm_config.lora_config)
    want = (False, settings["enable_chunked_prefill"], settings["max_num_batched_tokens"], settings["max_num_seqs"],
            "fcfs", settings["enable_prefix_caching"], None, None, None)
    if got != want:
        raise SystemExit(f"VllmConfig changed the settings: got {got}, wanted {want}")
    num_blocks = settings["num_gpu_blocks"]
    groups = []  # one layer per KV-cache group (a hybrid model's groups share the pool and the block size)
    for i, (kind, window) in enumerate(settings.get("groups", [["full_attention", 0]])):
        shape = {"block_size": block_size, "num_kv_heads": 1, "head_size": 64, "dtype": torch.float32}
        spec = FullAttentionSpec(**shape) if kind == "full_attention" else SlidingWindowSpec(**shape, sliding_window=window)
        groups.append(KVCacheGroupSpec([f"layer.{i}"], spec))
    kv_cache_config = KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[], kv_cache_groups=groups)
    vllm_config.cache_config.num_gpu_blocks = num_blocks
    scheduler = Scheduler(vllm_config=vllm_config, kv_cache_config=kv_cache_config,
                          structured_output_manager=StructuredOutputManager(vllm_config),
                          block_size=block_size, hash_block_size=block_size, log_stats=True)
    hasher = None
    if settings["enable_prefix_caching"]:  # as EngineCore.__init__ (vllm/v1/engine/core.py) sets it up
        hash_fn = get_hash_fn_by_name(vllm_config.cache_config.prefix_caching_hash_algo)
        init_none_hash(hash_fn)
        hasher = get_request_block_hasher(block_size, hash_fn, vllm_config.num_hash_lookahead_tokens)
    return scheduler, hasher


def replay(trace: dict[str, Any]) -> dict[str, Any]:
    from vllm.sampling_params import SamplingParams
    from vllm.v1.outputs import ModelRunnerOutput
    from vllm.v1.request import Request

    settings = trace["settings"]
    with tempfile.TemporaryDirectory() as model_dir:
        Path(model_dir, "config.json").write_text(json.dumps(TINY_MODEL_CONFIG))
        scheduler, hasher = build_scheduler(settings, model_dir)
    kvm = scheduler.kv_cache_manager
    pool = kvm.block_pool
    by_step: dict[int, list[dict[str, Any]]] = {}
    for r in trace["requests"]:
        by_step.setdefault(r["arrival_step"], []).append(r)
    outputs = {r["id"]: r["output_ids"] for r in trace["requests"]}
    given = dict.fromkeys(outputs, 0)
    pending = len(trace["requests"])
    last_arrival = max(by_step)
    q = h = pq = ph = npre = 0
    steps: list[dict[str, Any]] = []
    step = 0
    while pending or step <= last_arrival:
        if step >= STEP_CAP:
            raise SystemExit(f"step cap {STEP_CAP} reached with {pending} requests unfinished")
        for r in by_step.get(step, ()):
            sp = SamplingParams(max_tokens=len(r["output_ids"]), ignore_eos=True)
            scheduler.add_request(Request(request_id=r["id"], prompt_token_ids=list(r["prompt_ids"]),
                                          sampling_params=sp, pooling_params=None, arrival_time=float(step),
                                          block_hasher=hasher))
        out = scheduler.schedule()
        stats = kvm.make_prefix_cache_stats()
        q, h, pq, ph = q + stats.queries, h + stats.hits, pq + stats.preempted_queries, ph + stats.preempted_hits
        preempted = sorted(out.preempted_req_ids or ())
        npre += len(preempted)
        num_running, num_waiting = scheduler.get_request_counts()
        req_ids = list(out.num_scheduled_tokens)
        sampled: list[list[int]] = []
        for rid in req_ids:
            req = scheduler.requests[rid]
            if req.is_prefill_chunk:
                sampled.append([])
            else:
                assert given[rid] == req.num_output_tokens, (rid, given[rid], req.num_output_tokens)
                sampled.append([outputs[rid][given[rid]]])
                given[rid] += 1
        mro = ModelRunnerOutput(req_ids=req_ids, req_id_to_index={rid: i for i, rid in enumerate(req_ids)},
                                sampled_token_ids=sampled)
        engine_outputs = scheduler.update_from_output(out, mro)
        finished = sorted(o.request_id for eco in engine_outputs.values() for o in eco.outputs
                          if o.finish_reason is not None)
        for rid in finished:
            assert given[rid] == len(outputs[rid]), (rid, given[rid])
        pending -= len(finished)
        steps.append({"step": step, "running": num_running, "waiting": num_waiting,
                      "sched": dict(out.num_scheduled_tokens), "preempted": preempted, "finished": finished,
                      "used": pool.num_gpu_blocks - 1 - pool.get_num_free_blocks(),
                      "cached": sum(b.block_hash is not None for b in pool.blocks[1:]),
                      "q": q, "h": h, "pq": pq, "ph": ph, "npre": npre})
        step += 1
    return {"vllm": VLLM_VERSION, "settings": settings, "requests": trace["requests"], "steps": steps}


def check_multi_turn(rec: dict[str, Any]) -> None:
    """Each turn of a conversation must arrive after the step in which the previous turn finished."""
    done = {rid: s["step"] for s in rec["steps"] for rid in s["finished"]}
    arrive = {r["id"]: r["arrival_step"] for r in rec["requests"]}
    for rid, a in arrive.items():
        c, t = rid[1:].split("t")
        if t != "0":
            prev = f"c{c}t{int(t) - 1}"
            if not done[prev] < a:
                raise SystemExit(f"{rid} arrives at step {a} but {prev} finished at step {done[prev]}")


def dump(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":")) + "\n"


def summary(name: str, rec: dict[str, Any]) -> str:
    last = rec["steps"][-1]
    return (f"{name}: {len(rec['requests'])} requests, {len(rec['steps'])} steps, {last['npre']} preemptions, "
            f"prefix hits {last['h']}/{last['q']} tokens (resumed {last['ph']}/{last['pq']}), "
            f"peak blocks used {max(s['used'] for s in rec['steps'])}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/data/vllm_sched", help="directory for <trace>.json recordings")
    ap.add_argument("--only", nargs="*", choices=sorted(TRACES), help="record only these traces")
    ap.add_argument("--traces-only", action="store_true", help="write the trace inputs (<trace>.trace.json), no vLLM")
    ap.add_argument("--replay", help="record this trace file instead of the built-in ones")
    ap.add_argument("-o", "--output", help="with --replay: where to write the recording (default stdout)")
    args = ap.parse_args(argv)
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.replay:
        rec = replay(json.loads(Path(args.replay).read_text()))
        if args.output:
            Path(args.output).write_text(dump(rec))
        else:
            sys.stdout.write(dump(rec))
        print(summary(Path(args.replay).stem, rec), file=sys.stderr)
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in args.only or TRACES:
        trace = TRACES[name]()
        if args.traces_only:
            (out / f"{name}.trace.json").write_text(dump(trace))
            continue
        rec = replay(trace)
        if name in ("multi_turn", "hybrid_multi_turn"):
            check_multi_turn(rec)
        (out / f"{name}.json").write_text(dump(rec))
        print(summary(name, rec))
    return 0


if __name__ == "__main__":
    sys.exit(main())
