"""`kvbudget check` on TensorRT-LLM logs that hold several ranks or several runs: TP read from the ranks the lines show,
the pool sized on the rank with the least free memory (kvCacheManager.cpp's allreduce MIN), and a log of two runs read
from the last one on (a version or LLM API backend line after a pool line starts another run)."""

from __future__ import annotations

from pathlib import Path

from kvbudget.engines.logscan import open_log
from kvbudget.engines.trtllm.check import check_run, check_trtllm_log
from kvbudget.engines.trtllm.log import last_run, ranks

LOGS = Path(__file__).parent / "data" / "trtllm_logs"
TP8 = (LOGS / "v0.16.0_h100x8_llama3.1-70b-fp8_engine_trtllm-bench-tp8.log").read_text(encoding="utf-8")
RTX = (LOGS / "v1.2.0rc2_rtx5060ti_qwen3-8b-fp8_pytorch_llmapi.log").read_text(encoding="utf-8")
RERANK = (LOGS / "v1.2.1_h100-sxm_qwen3-reranker-0.6b_pytorch_llmapi.log").read_text(encoding="utf-8")
LLAMA70 = {"model": "nvidia/Llama-3.1-70B-Instruct-FP8", "gpu": "H100-SXM-80GB"}


def _row(c: object, name: str) -> float | None:
    return next(r.reported for r in c.rows if r.figure.startswith(name))  # type: ignore[attr-defined]


def test_two_runs_pasted_are_read_from_the_last_one() -> None:
    c = check_run(RTX + RERANK, {"model": "Qwen/Qwen3-0.6B", "gpu": "H100"})
    assert any("holds 2 TensorRT-LLM runs" in w for w in c.warnings)
    assert _row(c, "KV tokens") == 643_136
    assert c.release == "current"  # the first run's 1.2.0rc2 version line is not the second run's
    # in the other order, the 1.2.0rc2 run is the last: its release and its final pool (not its estimation pass's)
    c = check_run(RERANK + RTX, {"model": "Qwen/Qwen3-8B", "gpu": "RTX-5060-Ti-16GB"})
    assert c.release == "1.2.0rc2" and _row(c, "KV tokens") == 46_208


def test_one_run_with_an_estimation_pass_is_one_run() -> None:
    runs, log = last_run(open_log(RTX, "TensorRT-LLM"))
    assert runs == 1 and log.text == open_log(RTX, "TensorRT-LLM").text
    assert not any("runs" in w for w in check_run(RTX, {"model": "Qwen/Qwen3-8B", "gpu": "RTX-5060-Ti-16GB"}).warnings)


def test_tp_from_the_ranks_the_lines_show() -> None:
    no_tp = "\n".join(line for line in TP8.splitlines() if not line.startswith("TP Size:"))
    assert ranks(open_log(no_tp, "TensorRT-LLM")) is not None
    c = check_run(no_tp, LLAMA70)
    assert dict(c.settings)["tp"] == 8 and any(n.startswith("TP 8 from the 8 ranks'") for n in c.notes)
    tagged = ("[11/22/2025-11:19:23] [TRT-LLM] [RANK 0] [I] Using LLM with PyTorch backend\n"
              "[11/22/2025-11:19:24] [TRT-LLM] [RANK 3] [I] loading\n"
              "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 3.17 GiB for max tokens in paged KV cache (46208).\n")
    assert ranks(open_log(tagged, "TensorRT-LLM")) == (4, "the ranks' tags ([RANK 0] ... [RANK 3])")
    assert dict(check_run(tagged, {"model": "Qwen/Qwen3-8B", "gpu": "H100", "flags": ["--pp_size", "2"]}).settings)["tp"] == 2
    mpi = "[TensorRT-LLM][INFO] MPI size: 4, rank: 0\n" + tagged.replace("[RANK 3]", "[RANK 0]")
    assert ranks(open_log(mpi, "TensorRT-LLM")) == (4, "the runtime's 'MPI size: 4' line")
    # a line naming TP wins over the ranks (the bench summary's "TP Size: 8")
    assert not any(n.startswith("TP 8 from") for n in check_run(TP8, LLAMA70).notes)


def test_the_pool_is_the_smallest_ranks() -> None:
    c = check_run(TP8, LLAMA70)
    assert _row(c, "free when the pool is sized") == 57.87  # not the last rank's 61.39
    assert any("57.87 to 61.64 GiB free" in w and "allreduce MIN" in w for w in c.warnings)
    two = ("[TensorRT-LLM][INFO] Memory usage when calculating max tokens in paged kv cache: total: 79.10 GiB, available: "
           "57.87 GiB\n"
           "[TensorRT-LLM][INFO] Memory usage when calculating max tokens in paged kv cache: total: 79.10 GiB, available: "
           "61.39 GiB\n"
           "kv_cache_free_gpu_mem_fraction 0.9\n"
           "[TensorRT-LLM][INFO] Number of blocks in KV cache primary pool: 42668\n"
           "[TensorRT-LLM][INFO] Number of tokens per block: 64.\n"
           "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 52.08 GiB for max tokens in paged KV cache (2730752).\n")
    rows = {r[0]: r for r in check_trtllm_log(open_log(two, "TensorRT-LLM"))}
    assert rows["TRT-LLM pool GiB = available x fraction"][3]  # 0.9 x 57.87 = 52.08


def test_memory_held_outside_the_pool_implied_by_a_log_that_prints_only_its_pool() -> None:
    from kvbudget.engines.trtllm.check import HELD
    from kvbudget.units import GiB

    given = {"model": "nvidia/Qwen3-8B-FP8", "gpu": "RTX-5060-Ti-16GB", "flags": ["--max_batch_size", "1"]}
    c = check_run(RTX, given)
    row = next(r for r in c.rows if r.figure == HELD)
    total = 17_102_274_560  # the catalog's RTX 5060 Ti 16GB (the log prints no total)
    assert row.reported == round((total - 3.17 * GiB / 0.9) / GiB, 2) == 12.41  # 'Allocated 3.17 GiB', fraction 0.9
    assert c.plan is not None and row.predicted is not None and row.predicted < 10.5
    assert any(w.startswith("the log's pool implies 12.41 GiB held outside it") for w in c.warnings)
    # a log that prints the free memory the pool was sized from is compared on that figure instead
    assert not any(r.figure == HELD for r in check_run(TP8, LLAMA70).rows)
    # and a pool that max_tokens set implies nothing
    import kvbudget
    from kvbudget.engines import trtllm
    from kvbudget.engines.trtllm.check import held_outside
    from kvbudget.engines.trtllm.log import figures

    gpu = kvbudget.find_gpu("RTX-5060-Ti-16GB")
    spec = kvbudget.load_model("nvidia/Qwen3-8B-FP8")
    figs = figures(open_log(RTX, "TensorRT-LLM"))
    free = trtllm.plan(spec, gpu, trtllm.TrtllmSettings(max_batch_size=1))
    capped = trtllm.plan(spec, gpu, trtllm.TrtllmSettings(max_batch_size=1, max_tokens=4096))
    assert held_outside(figs, free, gpu.memory_bytes) is not None and capped.max_tokens_capped
    assert held_outside(figs, capped, gpu.memory_bytes) is None


def test_an_engine_logs_named_parts_beside_kvbudgets() -> None:
    c = check_run(TP8, LLAMA70)
    rows = {r.figure: r for r in c.rows}
    assert rows["runtime buffers (MiB)"].reported == round(1.63 * 1024, 2)
    assert rows["decoder (MiB)"].reported == round(3.30 * 1024, 2)
    assert rows["execution context (MiB)"].reported == 1013.01 and rows["loaded engine (MiB)"].reported == 8940
    # 2,048 x 128,256 x 2 B + 24 x 2,048 x 25,000 B = 1.634 GiB: 16-bit logits, where kvbudget plans float32's
    assert rows["runtime buffers (MiB)"].predicted == round((2048 * 128256 * 4 + 24 * 2048 * 25000) / 2**20, 2)
    assert any(w.startswith("the log's runtime buffers (1.63 GiB) are what 16-bit logits give") for w in c.warnings)
    # the 0.14 log's float32 logits: its runtime buffers and decoder are kvbudget's to the hundredth, no such line
    a4000 = (LOGS / "v0.14-era_rtx-a4000_qwen2.5-coder-0.5b-int8wo_engine_defaults.log").read_text(encoding="utf-8")
    c = check_run(a4000, {"model": "Qwen/Qwen2.5-Coder-0.5B-Instruct", "gpu": "RTX-A4000-16GB",
                          "flags": ["--max_batch_size", "2048", "--max_seq_len", "32768"]})
    rows = {r.figure: r for r in c.rows}
    for name in ("runtime buffers (MiB)", "decoder (MiB)"):
        assert abs(rows[name].predicted - rows[name].reported) <= 0.006 * 1024, name
    assert not any("16-bit logits" in w for w in c.warnings)
