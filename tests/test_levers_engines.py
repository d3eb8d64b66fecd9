"""What each lever buys under SGLang's, TensorRT-LLM's and llama-server's rules (`kvbudget levers --engine`,
and the levers of `plan`'s best row and of `fit --engine sglang|trtllm`).

Each lever row is checked against the engine module itself: the flag it prints, added to the baseline's launch
command and read back by `explain`'s parser, gives a plan whose pool holds exactly the row's requests."""

from __future__ import annotations

import json

import pytest

import kvbudget
from kvbudget.cli import main
from kvbudget.engines import llamacpp, sglang, trtllm
from kvbudget.engines.cmdscan import parse_other_command
from kvbudget.engines.llamacpp.command import parse_llamacpp_command
from kvbudget.engines.vllm import VllmSettings
from kvbudget.hardware import find_gpu
from kvbudget.plan import launch
from kvbudget.plan.levers import replica_levers
from kvbudget.plan.search import search, servers
from kvbudget.units import InputError

LLAMA8 = "meta-llama/Llama-3.1-8B-Instruct"
CTX = 8192


def _with(base: list[str], flag: str) -> list[str]:
    """The baseline command with the lever's flags set (replacing the same flag where it is already there)."""
    argv = list(base)
    words = flag.split()
    i = 0
    while i < len(words):
        name = words[i]
        value = words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("-") else None
        i += 2 if value is not None else 1
        if name in argv:
            at = argv.index(name)
            del argv[at:at + (2 if value is not None else 1)]
        argv += [name] + ([value] if value is not None else [])
    return argv


def test_sglang_levers_round_trip_through_explain() -> None:
    spec = kvbudget.load_model(LLAMA8)
    gpu = find_gpu("L40S")
    base, rows = replica_levers(spec, gpu, "sglang", CTX)
    p0 = sglang.plan(spec, gpu, sglang.SGLangSettings(context_length=CTX))
    # the baseline is the engine's own pool: max_total_num_tokens // 8192 requests (180,866 // 8192 = 22 on an L40S)
    assert base.concurrency == p0.max_total_num_tokens // CTX == 22
    names = [r.name for r in rows]
    assert names == ["FP8 weights", "4-bit weights (AWQ)", "FP8 KV cache", "half the context", "one more TP step",
                     "one more replica", "mem_fraction_static 0.87", "mem_fraction_static 0.81"]
    argv0 = launch.argv_for(spec.name, sglang.SGLangSettings(context_length=CTX))
    for r in rows:
        if r.name == "one more replica":
            assert (r.gpus, r.concurrency) == (2, 2 * base.concurrency)
            continue
        if r.name == "4-bit weights (AWQ)":  # not a flag: SGLang makes no AWQ weights from a 16-bit checkpoint
            assert r.flag == "an AWQ checkpoint"  # (it said "--quantization awq", which stops SGLang on this one)
            continue
        cmd = parse_other_command(_with(argv0, r.flag))
        assert cmd.sglang is not None and not cmd.warnings
        p = sglang.plan(spec, gpu, cmd.sglang)
        assert r.concurrency == p.max_total_num_tokens // r.context, r.name
        assert r.freed_bytes == max(p.rest_bytes, 0) - max(p0.rest_bytes, 0), r.name
        assert r.added == r.concurrency - base.concurrency
    by = {r.name: r for r in rows}
    # an FP8 KV cache halves the bytes per token (131,072 -> 65,536): the same memory holds twice the tokens
    assert by["FP8 KV cache"].freed_bytes == 0 and by["FP8 KV cache"].concurrency == 44
    # FP8 weights free what the weights shrink by (every linear weight 2 -> 1 byte + scales), as SGLang sizes it
    assert by["FP8 weights"].weights_bytes < base.weights_bytes
    assert by["mem_fraction_static 0.87"].added > 0 > by["mem_fraction_static 0.81"].added


def test_trtllm_levers_scale_the_pool_with_the_fraction() -> None:
    spec = kvbudget.load_model(LLAMA8)
    gpu = find_gpu("H100")
    base, rows = replica_levers(spec, gpu, "trtllm", CTX)
    by = {r.name: r for r in rows}
    # trtllm-serve takes a pre-quantized checkpoint: no FP8-weights lever; the KV dtype is a flag (--kv_cache_dtype)
    assert "FP8 weights" not in by and by["FP8 KV cache"].flag == "--kv_cache_dtype fp8"
    argv0 = launch.argv_for(spec.name, trtllm.TrtllmSettings(max_seq_len=CTX))
    p0 = trtllm.plan(spec, gpu, trtllm.TrtllmSettings(max_seq_len=CTX))
    assert base.concurrency == p0.max_tokens // CTX
    for name in ("free_gpu_memory_fraction 0.95", "free_gpu_memory_fraction 0.85", "half the context", "one more TP step",
                 "FP8 KV cache"):
        cmd = parse_other_command(_with(argv0, by[name].flag))
        assert cmd.trtllm is not None
        p = trtllm.plan(spec, gpu, cmd.trtllm)
        assert by[name].concurrency == p.max_tokens // by[name].context
        assert by[name].freed_bytes == p.pool_bytes - p0.pool_bytes
    # the pool is the fraction of the memory left after the profiled peak: 0.95 / 0.90 of it, to a block
    up = by["free_gpu_memory_fraction 0.95"]
    assert abs(up.kv_cache_bytes - base.kv_cache_bytes * 0.95 / 0.90) <= 2 * 32 * 131_072


def test_llamacpp_levers_are_the_largest_slot_counts_that_fit() -> None:
    spec = kvbudget.load_model(LLAMA8)
    gpu = find_gpu("L40S")
    base, rows = replica_levers(spec, gpu, "llama.cpp", CTX)
    by = {r.name: r for r in rows}
    assert list(by) == ["q8_0 KV cache", "q4_0 KV cache", "half the context", "twice the GPUs (-ts)", "one more replica"]

    def fits(n: int, ctx: int, cache: str = "f16", devices: int = 1) -> bool:
        s = llamacpp.LlamaCppSettings(n_ctx=n * ctx, n_parallel=n, kv_unified=True, type_k=cache, type_v=cache,
                                      flash_attn="on" if cache != "f16" else "auto", fit=False, devices=devices)
        return llamacpp.plan(spec, gpu, s).fits

    # each row's requests are the largest -np N whose -c N x context cache fits the GPU with the weights
    for n, ctx, cache, devices in ((base.concurrency, CTX, "f16", 1), (by["q8_0 KV cache"].concurrency, CTX, "q8_0", 1),
                                   (by["q4_0 KV cache"].concurrency, CTX, "q4_0", 1),
                                   (by["half the context"].concurrency, CTX // 2, "f16", 1),
                                   (by["twice the GPUs (-ts)"].concurrency, CTX, "f16", 2)):
        assert fits(n, ctx, cache, devices) and not fits(n + 1, ctx, cache, devices), (n, ctx, cache)
    # q8_0 stores 32 values in 34 bytes (vs 64 in f16): about 1.88x the slots, q4_0 (18 bytes) about 3.56x
    assert by["q8_0 KV cache"].concurrency > 1.8 * base.concurrency
    assert by["q4_0 KV cache"].concurrency > 3.4 * base.concurrency
    # the flags realise the row: the baseline's llama-server command with them set is a plan that fits with the
    # row's slots of the row's context
    argv0 = launch.argv_for("model.gguf", llamacpp.LlamaCppSettings(
        n_ctx=base.concurrency * CTX, n_parallel=base.concurrency, kv_unified=True, fit=False))
    for r in rows:
        if r.name == "one more replica":
            continue
        cmd = parse_llamacpp_command(_with(argv0, r.flag))
        got = cmd.settings
        assert got.n_parallel == r.concurrency and got.n_ctx == r.concurrency * r.context, r.name
        assert llamacpp.plan(spec, gpu, got).fits, r.name
    assert by["half the context"].flag == f"-np {by['half the context'].concurrency}"  # -c stays: 30 x 8K = 60 x 4K
    assert by["q8_0 KV cache"].flag.startswith(f"-c {by['q8_0 KV cache'].concurrency * CTX} -np ")


def test_llamacpp_has_no_fraction_and_unknown_engines_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    spec = kvbudget.load_model(LLAMA8)
    with pytest.raises(InputError, match="no memory fraction"):
        servers()["llama.cpp"](spec, find_gpu("L4"), 1, 1, "auto", "auto", 1, CTX, "current", 0.9)
    with pytest.raises(InputError, match="levers know the engines"):
        replica_levers(spec, find_gpu("L4"), "exllama", CTX)
    with pytest.raises(SystemExit) as exc:
        main(["levers", LLAMA8, "--gpu", "L4", "--context", "8192", "--engine", "exllama"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_cli_levers_engine(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["levers", LLAMA8, "--gpu", "L40S", "--context", "8192", "--engine", "sglang"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("meta-llama/Llama-3.1-8B-Instruct on 1 x L40S-48GB, requests of 8,192 tokens, SGLang's rules:")
    assert "--kv-cache-dtype fp8_e4m3" in text and "real: FP8 weights free 6.50 GiB (7.0 GB) on each GPU: SGLang fits +6" in text
    assert main(["levers", LLAMA8, "--gpu", "L40S", "--context", "8192", "--engine", "llama.cpp", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["engine"] == {"name": "llama.cpp"} and doc["levers"][0]["flag"] == "-c 458752 -np 56 -ctk q8_0 -ctv q8_0 -fa on"  # 56 slots of 8,192
    # fit --engine sglang carries the same rows
    assert main(["fit", LLAMA8, "--gpu", "L40S", "--context", "8192", "--engine", "sglang", "--json"]) == 0
    fit = json.loads(capsys.readouterr().out)
    assert fit["max_concurrency"] == pytest.approx(fit["kv_cache_tokens"] / 8192, abs=1e-3)
    assert [r["lever"] for r in fit["levers"]][:3] == ["FP8 weights", "4-bit weights (AWQ)", "FP8 KV cache"]
    # plan's best row under SGLang gets its levers
    assert main(["plan", LLAMA8, "--concurrency", "32", "--context", "8192", "--engine", "sglang", "--gpus", "L40S"]) == 0
    assert "For the best deployment (one replica) -- What each lever buys:" in capsys.readouterr().out


def test_inverse_questions_under_every_engine(capsys: pytest.CaptureFixture[str]) -> None:
    spec = kvbudget.load_model(LLAMA8)
    gpu = find_gpu("L40S")
    # SGLang's pool does not depend on the context: 180,866 tokens hold 22 requests of 8,192, and 30 requests
    # of at most 180,866 // 30 = 6,028 tokens
    pool = sglang.plan(spec, gpu, sglang.SGLangSettings(context_length=CTX)).max_total_num_tokens
    assert kvbudget.max_concurrency(spec, context=CTX, gpu=gpu, engine="sglang") == pool // CTX == 22
    assert kvbudget.max_context(spec, concurrency=30, gpu=gpu, engine="sglang") == pool // 30 == 6028
    # TensorRT-LLM's PyTorch backend: its max_tokens pool, likewise
    tokens = trtllm.plan(spec, gpu, trtllm.TrtllmSettings(max_seq_len=CTX)).max_tokens
    assert kvbudget.max_concurrency(spec, context=CTX, gpu=gpu, engine="trtllm") == tokens // CTX
    assert kvbudget.max_context(spec, concurrency=30, gpu=gpu, engine="trtllm") == tokens // 30
    # llama-server: the longest -c 30 x C over -np 30 slots that fits, and C + 1 does not
    longest = kvbudget.max_context(spec, concurrency=30, gpu=gpu, engine="llama.cpp")

    def fits(ctx: int) -> bool:
        s = llamacpp.LlamaCppSettings(n_ctx=30 * ctx, n_parallel=30, kv_unified=True, fit=False)
        return llamacpp.plan(spec, gpu, s).fits

    assert fits(longest) and not fits(longest + 1)
    # the model's limit caps it: one request of Llama-3.1-8B's 131,072 tokens fits an L40S under every engine
    assert kvbudget.max_context(spec, concurrency=1, gpu=gpu, engine="sglang") == 131072
    # the fewest GPUs under TensorRT-LLM's rules: no layout with fewer GPUs serves 16 x 32K of a 70B
    best = kvbudget.fewest_gpus("meta-llama/Llama-3.1-70B-Instruct", concurrency=16, context=32768, gpu="H100",
                                engine="trtllm")
    assert best is not None
    spec70 = kvbudget.load_model("meta-llama/Llama-3.1-70B-Instruct")
    for tp in (1, 2, 4, 8):
        s = trtllm.TrtllmSettings(tp=tp, max_seq_len=32768)
        holds = trtllm.plan(spec70, find_gpu("H100"), s).max_tokens // 32768
        assert (holds >= 16) == (tp >= best.tp), tp
    assert best.num_gpus == best.tp  # one replica: a second one of a smaller TP would need as many GPUs or more
    with pytest.raises(InputError, match="settings are not SGLang's"):
        kvbudget.max_concurrency(spec, context=CTX, gpu=gpu, engine="sglang", settings=VllmSettings())
    # fit --engine sglang --batch 30: the same answers, a verdict, and the fewest L40S that hold the load
    assert main(["fit", LLAMA8, "--gpu", "L40S", "--context", "8192", "--engine", "sglang", "--batch", "30"]) == 0
    text = capsys.readouterr().out
    assert ("Requests of 8,192 tokens held at once: 22\nLongest context for 30 requests at once:  6,028\n"
            "Verdict: does not fit: 30 x 8,192-token requests need more than the pool (22.08x)\n"
            "Fewest L40S-48GB for 30 x 8,192-token requests: 2 (TP2)") in text
    assert main(["fit", LLAMA8, "--gpu", "L40S", "--context", "8192", "--engine", "sglang", "--batch", "30", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["max_batch"], doc["max_context"], doc["fits"]) == (22, 6028, False)
    assert doc["fewest_gpus"]["tp"] == 2 and doc["fewest_gpus"]["launch"]["command"].startswith("python -m sglang")



def test_fit_verdicts_keep_the_users_settings(capsys: pytest.CaptureFixture[str]) -> None:
    # SGLang with --max-num-seqs 4 (max_running_requests): the pool holds 50 x 8K on an H100 but the scheduler runs 4
    argv = ["fit", LLAMA8, "--gpu", "H100", "--engine", "sglang", "--context", "8192", "--batch", "30"]
    assert main([*argv, "--max-num-seqs", "4"]) == 0
    text = capsys.readouterr().out
    assert "Requests of 8,192 tokens held at once: 4 (the scheduler's cap of 4; the pool holds 50)\n" in text and "Verdict: does not fit" in text
    # the fewest GPUs line says how: the same H100 under SGLang's own scheduler cap, with its command
    after = text.split("Fewest H100-SXM-80GB for 30 x 8,192-token requests: 1 (TP1), holding 50 at once:\n  ")[1]
    assert after.splitlines()[0] == f"python -m sglang.launch_server --model-path {LLAMA8} --context-length 8192"
    # a setting the search does not take is said, not dropped; a KV dtype SGLang does not have is refused
    assert main(["fit", LLAMA8, "--gpu", "H100", "--engine", "trtllm", "--context", "8192", "--weights-dtype", "awq"]) == 0
    assert "note: no longest context, levers or fewest GPUs: TensorRT-LLM is planned with the checkpoint's own weights" \
        in capsys.readouterr().out
    assert main(["fit", LLAMA8, "--gpu", "H100", "--engine", "sglang", "--kv-dtype", "int4"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "SGLang's --kv-cache-dtype is one of" in err
    # vLLM: the fewest-GPUs search keeps --gpu-memory-utilization (0.3 of an H100 cannot hold 30 x 8K of an 8B)
    assert main(["fit", LLAMA8, "--gpu", "H100", "--context", "8192", "--batch", "30", "--gpu-memory-utilization", "0.3"]) == 0
    text = capsys.readouterr().out
    best = kvbudget.fewest_gpus(LLAMA8, concurrency=30, context=8192, gpu="H100")
    assert best is not None and best.num_gpus == 1  # at the default 0.92 one H100 is enough ...
    line = next(x for x in text.splitlines() if x.startswith("Fewest"))
    assert not line.startswith("Fewest H100-SXM-80GB for 30 x 8,192-token requests: 1 ")  # ... not at 0.3
    assert "--gpu-memory-utilization 0.3" in text.split(line)[1].splitlines()[1]


def test_api_vllm_inverse_questions_take_the_layout() -> None:
    from kvbudget.engines import vllm

    spec = kvbudget.load_model("meta-llama/Llama-3.1-70B-Instruct")
    h100 = find_gpu("H100")
    s = vllm.VllmSettings(tensor_parallel_size=4, kv_cache_dtype="fp8", max_model_len=8192)
    p = vllm.plan(spec, h100, s)
    # whole requests of the pool: num_gpu_blocks // (8192 / 16), capped by max_num_seqs
    expect = min(p.num_gpu_blocks // 512, p.max_num_seqs)
    assert kvbudget.max_concurrency(spec, context=8192, gpu=h100, tp=4, kv_dtype="fp8") == expect
    assert kvbudget.max_concurrency(spec, context=8192, gpu=h100, settings=vllm.VllmSettings(
        tensor_parallel_size=4, kv_cache_dtype="fp8")) == expect
    assert kvbudget.max_context(spec, concurrency=10, gpu=h100, tp=4, kv_dtype="fp8") > 0
    with pytest.raises(InputError, match="inside settings"):
        kvbudget.max_context(spec, concurrency=10, gpu=h100, tp=4, settings=vllm.VllmSettings())


def test_llamacpp_takes_at_most_256_sequences(capsys: pytest.CaptureFixture[str]) -> None:
    spec = kvbudget.load_model(LLAMA8)
    # llama-cparams.h: LLAMA_MAX_SEQ 256; llama_context refuses n_seq_max above it
    with pytest.raises(InputError, match="n_seq_max must be <= 256"):
        llamacpp.plan(spec, find_gpu("H100"), llamacpp.LlamaCppSettings(n_ctx=300 * 16, n_parallel=300))
    assert main(["explain", "--gpu", "H100", "--", "llama-server", "-m", LLAMA8, "-c", "4800", "-np", "300"]) == 2
    assert "n_seq_max must be <= 256" in capsys.readouterr().err
    # tiny requests: the slots stop at 256 (the search is a bisection, not a walk)
    base, rows = replica_levers(spec, find_gpu("H100"), "llama.cpp", 16)
    assert base.concurrency == 256 and all(r.concurrency <= 256 * (2 if r.name == "one more replica" else 1) for r in rows)


@pytest.mark.parametrize(("engine", "flag", "message"), [
    ("sglang", "--free-gpu-memory-fraction", "its fraction is --mem-fraction-static"),
    ("trtllm", "--gpu-memory-utilization", "its fraction is --free-gpu-memory-fraction"),
    ("vllm", "--mem-fraction-static", "its fraction is --gpu-memory-utilization"),
    ("llama.cpp", "--gpu-memory-utilization", "llama.cpp allocates what -c and the cache types ask for"),
])
def test_levers_refuse_another_engines_fraction(engine: str, flag: str, message: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["levers", LLAMA8, "--gpu", "L4", "--context", "8192", "--engine", engine, flag, "0.8"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_sglang_refuses_a_kv_dtype_it_does_not_have(capsys: pytest.CaptureFixture[str]) -> None:
    # sglang server_args.py: --kv-cache-dtype choices auto, fp8_e5m2, fp8_e4m3, bf16/bfloat16 (no llama.cpp types)
    assert main(["levers", "google/gemma-3-27b-it", "--gpu", "L4", "--engine", "sglang", "--context", "8192",
                 "--kv-dtype", "q8_0"]) == 2
    assert "SGLang's --kv-cache-dtype is one of auto, fp8_e5m2, fp8_e4m3, bf16, bfloat16, not 'q8_0'" in capsys.readouterr().err
    rows = search(kvbudget.load_model(LLAMA8), 8, 8192, [find_gpu("L4")], kv=("q8_0",), engine="sglang")
    assert rows and all(not d.serves and "SGLang's --kv-cache-dtype" in d.reason for d in rows)


def test_llamacpp_verdict_says_the_slots_share_the_cells(capsys: pytest.CaptureFixture[str]) -> None:
    # llama-server's default 4 slots share -c's cells in one unified cache (n_ctx_seq = n_ctx): 32,768 cells are
    # 4 requests of 8,192 at once, and the longest context for 4 at once (19,200 here) needs -c raised to 4 x that
    from kvbudget.cli import main

    assert main(["fit", "llama-3.1-8b", "--gpu", "RTX-4090", "--engine", "llama.cpp", "--context", "32768"]) == 0
    out = capsys.readouterr().out
    held = next(line for line in out.splitlines() if line.startswith("Requests of"))
    assert held == "Requests of 8,192 tokens held at once: 4 (-c 32,768 cells shared by 4 slots)"
    longest = next(line for line in out.splitlines() if line.startswith("Longest context for"))
    n = int(longest.split(":")[1].split("(")[0].replace(",", ""))
    assert longest.endswith(f"(with -c raised to {4 * n:,})")


def test_llamacpp_longest_context_says_the_c_it_needs_for_every_slot_layout(capsys: pytest.CaptureFixture[str]) -> None:
    # An explicit -np 4 keeps per-slot streams: -c 32,768 is 4 slots of 8,192 each, so a longer context for the 4
    # slots needs -c raised to 4 x that, as with a unified cache; a lone slot's longer context needs -c raised too.
    # Before, only a unified cache's line said so, and "Longest context for 4 requests at once: 16,896" read as
    # reachable with the command's own -c 32,768.
    for argv, slots, cells in ((["fit", "llama-3.1-8b", "--gpu", "RTX-4090", "--engine", "llama.cpp", "--context", "32768",
                          "--np", "4", "--weights-dtype", "Q4_K_M"], 4, 32768),
                        (["explain", "--gpu", "RTX-4090", "--", "llama-cli", "-m", "Llama-3.1-8B-Instruct-Q4_K_M.gguf",
                          "-c", "4096"], 1, 4096)):
        assert main(argv) == 0
        out = capsys.readouterr().out
        longest = next(line for line in out.splitlines() if line.startswith("Longest context for"))
        n = int(longest.split(":")[1].split("(")[0].replace(",", ""))
        assert n * slots > cells and longest.endswith(f"(with -c raised to {slots * n:,})"), longest
        if slots > 1:
            held = next(line for line in out.splitlines() if line.startswith("Requests of"))
            assert held == "Requests of 8,192 tokens held at once: 4 (-c 32,768 cells split into 4 slots of 8,192)"
