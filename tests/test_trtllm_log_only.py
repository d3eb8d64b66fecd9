"""`kvbudget check LOG --model M --gpu G` with nothing else, as a new user runs it on a TensorRT-LLM log: the settings
the log prints in lines kvbudget once passed over (a pre-quantized checkpoint's quant lines, the PyTorch backend's own
profiling lines, trtllm-bench's CUDA graphs), the ones only its figures show (the KV pool's bytes per token, the
weights), and the warnings that name a setting the log truly lacks (the fraction of the 0.18 Dynamo log)."""

from __future__ import annotations

from pathlib import Path

from kvbudget.engines.logscan import open_log
from kvbudget.engines.trtllm.check import check_run
from kvbudget.engines.trtllm.log import read_run

LOGS = Path(__file__).parent / "data" / "trtllm_logs"
OOM = (LOGS / "v0.20.0_h100-sxm_llama3.1-8b-fp8_pytorch_trtllm-bench-kv095-mbs4096-oom.log").read_text(encoding="utf-8")
KV090 = (LOGS / "v0.20.0_h100-sxm_llama3.1-8b-fp8_pytorch_trtllm-bench-kv090-isl128-osl128.log").read_text(encoding="utf-8")
PCIE = (LOGS / "v0.20.0_h100pcie_llama3.1-8b-fp8_pytorch_trtllm-bench.log").read_text(encoding="utf-8")
DYNAMO = (LOGS / "v0.18dev_h100-x2_tinyllama-1.1b_pytorch_dynamo-disagg-tp2.log").read_text(encoding="utf-8")
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
KV090_NAME = "v0.20.0_h100-sxm_llama3.1-8b-fp8_pytorch_trtllm-bench-kv090-isl128-osl128"


def _recorded(name: str) -> int:
    """kvbudget's KV tokens for a corpus record planned with the settings its .json records."""
    import json

    import kvbudget
    from kvbudget._record import replace
    from kvbudget.engines import trtllm
    from kvbudget.units import GiB

    kb = json.loads((LOGS / f"{name}.json").read_text(encoding="utf-8"))["kvbudget"]
    gpu = kvbudget.find_gpu(kb["gpu"])
    if kb.get("gpu_memory_gib"):
        gpu = replace(gpu, memory_bytes=round(kb["gpu_memory_gib"] * GiB))
    return trtllm.plan(kvbudget.load_model(kb["model"]), gpu, trtllm.TrtllmSettings(**kb["settings"])).max_tokens


def _run(text: str) -> object:
    return read_run(open_log(text, "TensorRT-LLM"))


def _tokens(c: object) -> tuple[float | None, float | None]:
    r = next(r for r in c.rows if r.figure.startswith("KV tokens"))  # type: ignore[attr-defined]
    return r.reported, r.predicted


def test_the_checkpoints_kv_quant_line_sets_an_fp8_cache() -> None:
    # "Setting kv_cache_quant_algo=FP8 form HF quant config." (llmapi/llm_utils.py): the OOM run printed no
    # trtllm-bench report, so this line is the only one naming its cache
    run = _run(OOM)
    assert run.settings.kv_cache_dtype == "fp8" and not any(a.startswith("kv_cache_dtype") for a in run.assumed)
    # the PyTorch backend's profiling lines say which backend ran
    assert run.settings.backend == "pytorch" and not any(a.startswith("backend") for a in run.assumed)


def test_the_checkpoints_quant_algo_line_sets_its_weights() -> None:
    line = "[11/22/2025-11:19:23] [TRT-LLM] [I] Setting quant_algo={} form HF quant config.\n"
    pool = "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 3.17 GiB for max tokens in paged KV cache (46208).\n"
    assert _run(line.format("FP8_BLOCK_SCALES") + pool).settings.quantization == "fp8"
    assert _run(line.format("NVFP4") + pool).settings.quantization == "nvfp4"
    assert _run(line.format("W4A8_AWQ") + pool).settings.quantization is None  # not a format kvbudget reads


def test_trtllm_bench_captures_cuda_graphs_to_its_max_batch_size() -> None:
    # trtllm-bench's get_settings sets cuda_graph_max_batch_size = max_batch_size; the LLM API's default is 128
    assert _run(KV090).settings.cuda_graph_max_batch_size == 2048
    assert _run(OOM).settings.cuda_graph_max_batch_size == 4096
    # log-only, kvbudget now plans what it plans with the record's settings (the graphs were the difference)
    c = check_run(KV090, {"model": LLAMA, "gpu": "H100-SXM-80GB"})
    assert _tokens(c) == (1_002_304, _recorded(KV090_NAME))


def test_the_weights_line_reads_the_checkpoints_quantization() -> None:
    # "Rank 0 uses 8.46 GB for model weights" (model_engine.py, GiB): FP8, not the 14.96 GiB of the 16-bit model given
    c = check_run(OOM, {"model": LLAMA, "gpu": "H100-SXM-80GB"})
    assert dict(c.settings)["quantization"] == "fp8"
    assert any(n.startswith("quantization fp8 read from the log's weights (8.46 GiB") for n in c.notes)
    assert not any("quantization the checkpoint's" in n for n in c.notes)
    logged, planned = _tokens(c)
    assert logged is not None and planned is not None and abs(planned - logged) / logged < 0.05


def test_the_pools_bytes_per_token_read_an_fp8_cache() -> None:
    # 52.51 GiB for 860,320 tokens: 65,536 B a token, FP8 (the 16-bit model gives 131,072); no line names the cache
    c = check_run(PCIE, {"model": LLAMA, "gpu": "H100-PCIe-80GB"})
    assert dict(c.settings)["kv_cache_dtype"] == "fp8"
    assert any(n.startswith("kv_cache_dtype fp8 read from the KV pool's 65,536 bytes per token") for n in c.notes)
    # TP is not in the log either: a 16-bit cache on two ranks gives the same figure, which a warning says
    assert any("TP 2 gives the same" in w for w in c.warnings)
    logged, planned = _tokens(c)
    assert logged is not None and planned is not None and abs(planned - logged) / logged < 0.10  # was -53.8%
    # the log's command loads the FP8 checkpoint, planned as the 16-bit one given: said
    assert any("'nvidia/Llama-3.1-8B-Instruct-FP8', planned as --model" in w for w in c.warnings)


def test_an_assumed_fraction_is_named_where_the_pool_is_far_below_it() -> None:
    # the Dynamo example's workers ran at gpu_fraction 0.25, which no line shows: the pool is 0.25 of what
    # kvbudget's peak leaves, and the warning says so instead of blaming another process alone
    c = check_run(DYNAMO, {"model": "TinyLlama/TinyLlama-1.1B-Chat-v1.0", "gpu": "H100-SXM-80GB"})
    said = next(w for w in c.warnings if w.startswith("the log's pool implies"))
    assert "no line shows the run's free_gpu_memory_fraction, and the pool is 0.25 of" in said
    # given the fraction, the line is the other one (memory another process holds)
    c = check_run(DYNAMO, {"model": "TinyLlama/TinyLlama-1.1B-Chat-v1.0", "gpu": "H100-SXM-80GB",
                           "flags": ["--kv_cache_free_gpu_memory_fraction", "0.25"]})
    assert not any("free_gpu_memory_fraction, and the pool is" in w for w in c.warnings)


def test_graphs_too_large_for_the_estimation_pool_are_captured_after_the_final_pool() -> None:
    # the warmup captures the largest batch first and stops where the estimation pool has fewer free blocks than the
    # batch (model_engine.py): the 0.20 logs' estimation pool has 288 blocks, so graphs to 2048 or 4096 are not in
    # the measured peak, which the logs show (11.77 and 11.86 GiB: 0.09 apart, where the graphs differ by ~1.7 GiB)
    import kvbudget
    from kvbudget._record import replace
    from kvbudget.engines import trtllm
    from kvbudget.engines.trtllm.policy import graphs_in_estimation

    assert graphs_in_estimation(128, 257) and graphs_in_estimation(0, 1) and not graphs_in_estimation(2048, 288)
    spec, gpu = kvbudget.load_model(LLAMA), kvbudget.find_gpu("H100-SXM-80GB")
    base = trtllm.TrtllmSettings(quantization="fp8", kv_cache_dtype="fp8", max_seq_len=257, release="0.20")
    plans = {b: trtllm.plan(spec, gpu, replace(base, max_batch_size=b, cuda_graph_max_batch_size=b)) for b in (2048, 4096)}
    assert abs(plans[4096].peak_bytes - plans[2048].peak_bytes) < 0.1 * (1 << 30)
    assert plans[4096].cuda_graph_bytes == 0 and plans[4096].capture_after_pool_bytes > 3 * (1 << 30)
    small = trtllm.plan(spec, gpu, base)  # LLM API default: graphs to 128, within the estimation pool's blocks
    assert small.cuda_graph_bytes > 0 and small.capture_after_pool_bytes == 0


def test_the_oom_at_graph_capture_is_read_and_warned() -> None:
    c = check_run(OOM, {"model": LLAMA, "gpu": "H100-SXM-80GB"})
    rows = {r.figure: r for r in c.rows}
    # "Failed to initialize executor on rank 0: CUDA out of memory" after the pool: the run did not start
    assert rows["starts"].reported is not None and not rows["starts"].reported
    said = next(w for w in c.warnings if w.startswith("the fraction 0.95 leaves 3.39 GiB after the final pool"))
    assert "which need 5.17 GiB or more (the largest graph's 3.44 GiB" in said
    # kvbudget's own plan does not start either (capture.py: batch 4096's graph pool beside batch 2048's eager run)
    assert rows["starts"].predicted is not None and not rows["starts"].predicted
    assert any(n.startswith("kvbudget's plan does not start: the CUDA-graph capture after the final KV pool") for n in
               c.notes)
    # the profiling lines beside kvbudget's terms: outside torch is the term that is off
    logged = {name: rows[name].reported for name in rows}
    assert logged["weights (GiB)"] == 8.46 and logged["allocated inside torch in the profiling run (GiB)"] == 1.05
    assert logged["peak during profiling, torch + outside (GiB)"] == 11.86
    outside = rows["outside torch in profiling: CUDA context, NCCL, CUDA graphs, estimation pool (GiB)"]
    assert outside.reported == 2.26 and outside.predicted is not None and outside.predicted < 1.5
    # the out-of-memory message's other process (trtllm-bench's launching process): 588 MiB
    assert rows["other processes on the GPU at the out-of-memory error (GiB)"].reported == 0.57
    assert any("other processes holding 0.57 GiB" in w for w in c.warnings)
    # at 0.90 with graphs to 2048 the fraction leaves room: no line, and it starts
    kv090 = check_run(KV090, {"model": LLAMA, "gpu": "H100"})
    assert not any("after the final pool" in w for w in kv090.warnings)
    assert kv090.plan is not None and kv090.plan.starts


def test_the_engines_build_command_sets_its_limits() -> None:
    # the 0.5 issue's log opens with its build.py command: batch 25, 2048 + 4096 tokens, blocks of 16, activations for
    # 25 x 2048 tokens (0.5 has no --max_num_tokens); kvbudget planned trtllm-build's defaults (2048 x the model's
    # 4,096) before: +39.7% log-only, now -10% (the Triton config's fraction 0.95 is not in the log)
    a10 = (LOGS / "v0.5_a10_llama-2-7b_engine_triton.log").read_text(encoding="utf-8")
    s = _run(a10).settings
    assert (s.backend, s.max_batch_size, s.max_seq_len, s.max_num_tokens, s.tokens_per_block) == (
        "engine", 25, 6144, 51200, 16)
    logged, planned = _tokens(check_run(a10, {"model": "meta-llama/Llama-2-7b-chat-hf", "gpu": "A10"}))
    assert logged == 10_718 and planned is not None and abs(planned - logged) / logged < 0.15
    built = "$ trtllm-build --checkpoint_dir ckpt --max_batch_size 64 --max_seq_len=4096 --max_num_tokens 2048\n"
    s = _run(built + "[TensorRT-LLM][INFO] Using 10718 tokens in paged KV cache.\n").settings
    assert (s.backend, s.max_batch_size, s.max_seq_len, s.max_num_tokens) == ("engine", 64, 4096, 2048)


def test_a_run_that_started_on_weights_kvbudget_cannot_hold_names_the_quantization() -> None:
    # the 1.2.0rc2 RTX 5060 Ti run loaded Qwen3-8B-FP8; given the 16-bit Qwen3-8B (15.3 GiB) nothing is left on 16 GB
    rtx = (LOGS / "v1.2.0rc2_rtx5060ti_qwen3-8b-fp8_pytorch_llmapi.log").read_text(encoding="utf-8")
    c = check_run(rtx, {"model": "Qwen/Qwen3-8B", "gpu": "RTX-5060-Ti-16GB"})
    assert any(w.startswith("the run started, but Qwen/Qwen3-8B's weights") and "pre-quantized checkpoint's" in w
               for w in c.warnings)
    # where the weights leave room (an 80 GB card), no line
    assert not any("the run started" in w for w in check_run(rtx, {"model": "Qwen/Qwen3-8B", "gpu": "H100"}).warnings)


def test_an_engine_planned_at_default_limits_says_what_they_cost() -> None:
    # the 0.19 RTX 5090 log prints five lines and none of the engine's build limits (it was built for batch 2048 x
    # 2,048 tokens): planned at 2048 x the model's 131,072, the runtime buffers and decoder alone are 15 GiB
    rtx = (LOGS / "v0.19.0_rtx5090_llama3.1-8b-fp8_engine_trtllm-serve.log").read_text(encoding="utf-8")
    c = check_run(rtx, {"model": LLAMA, "gpu": "RTX-5090-32GB"})
    said = next(w for w in c.warnings if w.startswith("KV tokens"))
    assert "runtime buffers and decoder 15.02 GiB for max_batch_size 2,048 x max_seq_len 131,072" in said


def test_a_pre_09_log_prints_its_pool_in_bytes() -> None:
    # 0.8's "Allocate 69524783104 bytes for k/v cache." is the pool: 524,288 B for each of its 132,608 tokens, and
    # what it implies held outside it (7.31 GiB: an int8 SmoothQuant engine, against the 16-bit defaults' 15.40)
    a100 = (LOGS / "v0.8_a100-80gb_llama2-7b-class-sq_engine_runpy-beam5.log").read_text(encoding="utf-8")
    c = check_run(a100, {"model": "meta-llama/Llama-2-7b-chat-hf", "gpu": "A100-SXM4-80GB"})
    rows = {r.figure: r for r in c.rows}
    assert rows["KV pool (GiB)"].reported is not None and abs(rows["KV pool (GiB)"].reported - 64.75) < 0.005
    assert rows["held outside the KV pool: total - pool / fraction (GiB)"].reported == 7.31
