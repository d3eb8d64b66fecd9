"""SGLang and TensorRT-LLM policies, their commands and logs, and `compare`.

Sources: SGLang 0.5.23 (the wheel on PyPI: arg_groups/memory_hook.py,
mem_cache/kv_cache_configurator.py, model_executor/pool_configurator.py) and TensorRT-LLM (github.com/NVIDIA/TensorRT-LLM
_torch/pyexecutor/_util.py, resource_manager.py, kvCacheManager.cpp).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import kvbudget
from kvbudget.cli import main
from kvbudget.engines import sglang, trtllm
from kvbudget.engines.cmdscan import parse_other_command
from kvbudget.engines.logscan import check_other_log
from kvbudget.questions.compare import compare
from kvbudget.units import GiB, InputError

LLAMA8 = "meta-llama/Llama-3.1-8B-Instruct"


DATA = Path(__file__).parent / "data"


def test_sglang_default_fraction_matches_the_worked_table() -> None:
    # SGLang 0.5.23 handle_gpu_memory_settings, worked by hand: H100-80G TP1 reserved 512 + 12288 + 128 + (512 + 464) = 13,904 MiB -> 0.830;
    # H200 -> 0.903; H100 TP4 reserved 14,800 MiB -> 0.819.
    spec = kvbudget.load_model(LLAMA8)
    h100 = sglang.plan(spec, kvbudget.find_gpu("H100"), sglang.SGLangSettings())
    assert (h100.mem_fraction_static, h100.reserved_mib, h100.chunked_prefill_size, h100.cuda_graph_max_bs) == (0.83, 13904, 8192, 256)
    assert sglang.plan(spec, kvbudget.find_gpu("H200"), sglang.SGLangSettings()).mem_fraction_static == 0.903
    tp4 = sglang.plan(kvbudget.load_model("meta-llama/Llama-3.1-70B-Instruct"), kvbudget.find_gpu("H100"), sglang.SGLangSettings(tp=4))
    assert (tp4.mem_fraction_static, tp4.reserved_mib) == (0.819, 14800)
    # the 0.4 line: by TP size
    assert sglang.plan(spec, kvbudget.find_gpu("L4"), sglang.SGLangSettings(version="0.4")).mem_fraction_static == 0.88


def test_sglang_pool_arithmetic() -> None:
    # rest = free after weights - (1 - f) x free before loading; tokens = rest // cell (page 1)
    spec = kvbudget.load_model(LLAMA8)
    p = sglang.plan(spec, kvbudget.find_gpu("H100"), sglang.SGLangSettings(mem_fraction_static=0.8))
    assert p.rest_bytes == int(p.after_load_bytes - p.pre_load_bytes * (1 - 0.8))
    assert p.cell_bytes == 32 * 2 * 8 * 128 * 2
    assert p.max_total_num_tokens == p.rest_bytes // p.cell_bytes
    assert p.k_size_bytes == (p.max_total_num_tokens + 1) * 32 * 8 * 128 * 2  # one padding page
    paged = sglang.plan(spec, kvbudget.find_gpu("H100"), sglang.SGLangSettings(mem_fraction_static=0.8, page_size=64))
    assert paged.max_total_num_tokens % 64 == 0
    # max_running_requests: clamp(int(tokens / context x 512), 2048, 4096), at most tokens // 2
    assert p.max_running_requests == min(max(int(p.max_total_num_tokens / p.context_len * 512), 2048), 4096)


def test_sglang_mla_is_not_split_and_hybrid_pools() -> None:
    v3 = sglang.plan(kvbudget.load_model("deepseek-ai/DeepSeek-V3"), kvbudget.find_gpu("H200"), sglang.SGLangSettings(tp=8))
    assert v3.cell_bytes == 61 * 576 * 2 and v3.v_size_bytes == 0
    g = sglang.plan(kvbudget.load_model("google/gemma-3-27b-it"), kvbudget.find_gpu("H100"), sglang.SGLangSettings())
    assert g.cell_bytes == int(10 * 8192 + 0.8 * 52 * 8192)  # full + 0.8 x sliding per token (swa_full_tokens_ratio)
    assert g.swa_tokens == int(0.8 * g.max_total_num_tokens)
    n = sglang.plan(kvbudget.load_model("Qwen/Qwen3-Next-80B-A3B-Instruct"), kvbudget.find_gpu("H200"), sglang.SGLangSettings(tp=2))
    assert n.mamba_cache_size > 0 and n.cell_bytes == 12 * 2 * 1 * 256 * 2


def test_sglang_no_room_for_kv() -> None:
    # 70B in bf16 (131 GiB) on an 80 GB H100: torch runs out of memory while the weights load
    p = sglang.plan(kvbudget.load_model("meta-llama/Llama-3.1-70B-Instruct"), kvbudget.find_gpu("H100"), sglang.SGLangSettings())
    assert not p.starts and p.error == "CUDA out of memory while loading the weights"
    assert not any(line.startswith("Load weight end") for line in p.log_lines)
    # Qwen3-32B (61 GiB) on an A100-80GB at a fraction of 0.7: it loads, then the pool's own check stops it
    # (sglang 0.5.23, srt/model_executor/pool_configurator.py)
    q = sglang.plan(kvbudget.load_model("Qwen/Qwen3-32B"), kvbudget.find_gpu("A100-80GB"),
                    sglang.SGLangSettings(mem_fraction_static=0.7))
    assert not q.starts and q.error == ("Not enough memory. Please try to increase --mem-fraction-static. "
                                        "Current value: mem_fraction_static=0.7")
    assert q.log_lines[-1] == f"RuntimeError: {q.error}"


def test_trtllm_pytorch_and_engine_paths() -> None:
    spec = kvbudget.load_model(LLAMA8)
    p = trtllm.plan(spec, kvbudget.find_gpu("H100"), trtllm.TrtllmSettings())
    assert p.tokens_per_block == 32 and p.per_token_bytes == 131072
    assert p.available_bytes == int((kvbudget.find_gpu("H100").memory_bytes - p.peak_bytes) * 0.9)
    assert p.max_tokens == p.available_bytes // 131072 // 32 * 32
    e = trtllm.plan(spec, kvbudget.find_gpu("H100"), trtllm.TrtllmSettings(backend="engine"))
    assert e.tokens_per_block == 64 and any("primary pool" in line for line in e.log_lines)
    capped = trtllm.plan(spec, kvbudget.find_gpu("H100"), trtllm.TrtllmSettings(max_tokens=8224))
    assert capped.max_tokens == 8224 // 32 * 32 and any("smaller value" in n for n in capped.notes)


def test_trtllm_per_token_quirk_beyond_kv_heads() -> None:
    # get_cache_size_per_token: head_dim x kv_heads // tp with no floor at one head (4 KV heads, TP 8)
    p = trtllm.plan(kvbudget.load_model("Qwen/Qwen3-235B-A22B"), kvbudget.find_gpu("H200"), trtllm.TrtllmSettings(tp=8))
    assert p.per_token_bytes == 94 * 2 * (128 * 4 // 8) * 2
    assert any("without a floor" in n for n in p.notes)
    with pytest.raises(InputError, match="free_gpu_memory_fraction"):
        trtllm.plan(kvbudget.load_model(LLAMA8), kvbudget.find_gpu("H100"), trtllm.TrtllmSettings(free_gpu_memory_fraction=1.0))


def test_other_commands() -> None:
    s = parse_other_command("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-70B-Instruct --tp 4 "
                            "--mem-fraction-static 0.85 --context-length 32768 --port 30000")
    assert s.engine == "sglang" and s.sglang is not None
    assert (s.model, s.sglang.tp, s.sglang.mem_fraction_static, s.sglang.context_length) == (
        "meta-llama/Llama-3.1-70B-Instruct", 4, 0.85, 32768)
    t = parse_other_command("trtllm-serve meta-llama/Llama-3.1-8B-Instruct --tp_size 2 --kv_cache_free_gpu_memory_fraction 0.8 "
                            "--max_batch_size 64")
    assert t.trtllm is not None and (t.model, t.trtllm.tp, t.trtllm.free_gpu_memory_fraction) == (LLAMA8, 2, 0.8)
    with pytest.raises(InputError, match="names no model"):
        parse_other_command("python -m sglang.launch_server --tp 2")



def test_other_command_spellings() -> None:
    """The spellings the engines' own CLIs take: `trtllm-serve serve MODEL` (tensorrt_llm/commands/serve.py: a
    click group whose default subcommand is serve) was refused ('unexpected extra argument'); an environment
    assignment before trtllm-serve was refused ('not an SGLang or TensorRT-LLM launch command'); `sglang serve`
    (SGLang 0.5.23's console script, sglang/cli/serve.py: a bare first word is --model-path) was refused."""
    for text in ("trtllm-serve serve meta-llama/Llama-3.1-8B-Instruct --tp_size 2",
                 "CUDA_VISIBLE_DEVICES=0,1 trtllm-serve meta-llama/Llama-3.1-8B-Instruct --tp_size 2"):
        t = kvbudget.explain(text, gpu="H100")
        assert (t.engine, t.model, t.settings.tp) == ("trtllm", LLAMA8, 2)
    for text in (f"sglang serve {LLAMA8} --tp 2 --context-length 4096",
                 f"sglang serve --model-path {LLAMA8} --model-type llm --tp 2 --context-length 4096",
                 f"python3 -m sglang.launch_server --model {LLAMA8} --tp 2 --context-length 4096"):
        s = kvbudget.explain(text, gpu="H100")
        assert (s.engine, s.model, s.settings.tp, s.settings.context_length) == ("sglang", LLAMA8, 2, 4096)
    with pytest.raises(InputError, match=r"^trtllm-serve disaggregated is not a server kvbudget plans"):
        kvbudget.explain("trtllm-serve disaggregated -c disagg.yaml", gpu="H100")
    with pytest.raises(InputError, match=r"--model-type 'diffusion': kvbudget plans the LLM server only"):
        kvbudget.explain("sglang serve --model-type diffusion black-forest-labs/FLUX.1-dev", gpu="H100")


def test_sglang_latent_pool_line() -> None:
    """MLA models' pools print one buffer per layer: "KV Cache is allocated. #tokens: N, KV size: X GB" (sglang
    0.5.23 mem_cache/memory_pool.py _finalize_allocation_log). Before, only "K size ... V size" was read: such a log
    gave no pool figure unless a max_total_num_tokens line followed. A real 0.5.8.post1 DeepSeek-R1 TP 16 log
    (provenance in its .json): (326,217 + 1 page) x 61 layers x 576 latent x 2 bytes = 21.35 GiB."""
    text = (DATA / "sglang_logs" / "v0.5.8.post1_h100x16-2node_deepseek-r1_tp16_pd-prefill.log").read_text()
    assert round((326217 + 1) * 61 * 576 * 2 / 2**30, 2) == 21.35
    by_name = {r[0]: r for r in check_other_log(text, "deepseek-ai/DeepSeek-R1")}
    assert by_name["SGLang KV size (GB) from #tokens"][1:] == (21.35, 21.35, True)
    assert "SGLang K size = V size (GB)" not in by_name
    bad = {r[0]: r for r in check_other_log(text.replace("KV size: 21.35 GB", "KV size: 22.35 GB"), "deepseek-ai/DeepSeek-R1")}
    assert not bad["SGLang KV size (GB) from #tokens"][3]
    # the pool line alone (no max_total_num_tokens line) is a pool figure
    only = "\n".join(line for line in text.splitlines() if "max_total_num_tokens" not in line)
    from kvbudget.engines.sglang.check import check_run

    c = check_run(only, {"model": "deepseek-ai/DeepSeek-R1", "gpu": "H100"})
    rows = {r.figure: r for r in c.rows}
    assert rows["KV tokens (max_total_num_tokens)"].reported == 326217
    assert rows["KV size (GB)"].reported == 21.35 and rows["KV size (GB)"].predicted is not None


def test_log_checks() -> None:
    # A real SGLang 0.4.3.post4 log (QwQ-32B, TP4 on L4s, provenance in its .json): free 21.63 GB before and
    # 6.09 GB after loading, fraction 0.85 -> (6.09 - 21.63 x 0.15) GB / 64 KiB per token = 46,620 +- 95.
    text = (DATA / "sglang_logs" / "v0.4.3.post4_l4x4_qwq-32b_tp4_default.log").read_text()
    by_name = {r[0]: r for r in check_other_log(text, "Qwen/QwQ-32B")}
    assert by_name["SGLang #tokens from the logged free memory"][1:] == (46611, 46620, True)
    # without the model, the K bytes per token come from the log's rounded K size: a looser window
    assert {r[0]: r for r in check_other_log(text)}["SGLang #tokens from the logged free memory"][3]
    assert by_name["SGLang K size = V size (GB)"][3]
    # the same log with the free memory made 1 GB larger must not pass
    bad = {r[0]: r for r in check_other_log(text.replace("avail mem=6.09 GB", "avail mem=7.09 GB"))}
    assert not bad["SGLang #tokens from the logged free memory"][3]
    trt = check_other_log(
        "[TensorRT-LLM][INFO] Number of blocks in KV cache primary pool: 4060\n[TensorRT-LLM][INFO] Number of tokens per block: 64.\n"
        "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 63.44 GiB for max tokens in paged KV cache (259840).\n")
    assert trt == [("TRT-LLM tokens = blocks x tokens per block", 259840, 259840, True)]
    # TensorRT-LLM 1.x names the pool in one line (a real 1.2.0rc2 log, provenance in its .json): 1,444 x 32 = 46,208
    v1 = (DATA / "trtllm_logs" / "v1.2.0rc2_rtx5060ti_qwen3-8b-fp8_pytorch_llmapi.log").read_text()
    assert check_other_log(v1)[0] == ("TRT-LLM tokens = blocks x tokens per block", 46208, 46208, True)
    assert not check_other_log(v1.replace("primary blocks=1444", "primary blocks=1445"))[0][3]
    with pytest.raises(InputError, match="no SGLang"):
        check_other_log("hello\n")


def test_compare_and_cli(capsys: pytest.CaptureFixture[str]) -> None:
    rows, omitted = compare(kvbudget.load_model(LLAMA8), kvbudget.find_gpu("H100"), 32768)
    assert [r.engine for r in rows] == ["vllm", "sglang", "trtllm", "llama.cpp", "transformers"] and not omitted
    assert all(r.starts and r.kv_budget_bytes > 40 * GiB for r in rows[:3])
    # llama-server's 4 unified slots are one stream: -c 0 is n_ctx_train (131,072 cells x 128 KiB), not 4 x that
    assert rows[3].starts and rows[3].kv_budget_bytes == 131072 * 128 * 1024
    # transformers: 9 sequences of 32768 tokens, each 4 GiB of cache plus a 2.5 GiB unchunked prefill
    assert (rows[4].max_concurrency, rows[4].kv_budget_bytes) == (9.0, 9 * 32768 * 128 * 1024)
    sg = next(r for r in rows if r.engine == "sglang")
    vl = next(r for r in rows if r.engine == "vllm")
    assert sg.kv_tokens < vl.kv_tokens  # SGLang's static fraction of pre-load free memory leaves less than vLLM's 0.92
    assert main(["compare", LLAMA8, "--gpu", "H100", "--json"]) == 0
    assert '"engine": "sglang"' in capsys.readouterr().out
    for engine in ("sglang", "trtllm"):
        assert main(["fit", LLAMA8, "--gpu", "H100", "--engine", engine, "--context", "8192", "--json"]) == 0
        assert '"kv_cache_tokens"' in capsys.readouterr().out
    assert main(["explain", "--gpu", "H100", "--", "python", "-m", "sglang.launch_server", "--model-path", LLAMA8]) == 0
    assert "KV Cache is allocated" in capsys.readouterr().out


def test_every_engine_json_has_the_core_keys(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    for engine in ("vllm", "sglang", "trtllm", "llama.cpp", "textbook"):
        assert main(["fit", LLAMA8, "--gpu", "H100", "--engine", engine, "--context", "8192", "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert {"memory", "kv_cache_tokens", "max_concurrency", "starts", "engine"} <= doc.keys(), engine
        assert {"weights_bytes", "kv_cache_bytes"} <= doc["memory"].keys(), engine
        assert doc["starts"] is True and doc["kv_cache_tokens"] >= 8192 and doc["max_concurrency"] >= 1, engine


def test_transformers_engine(capsys: pytest.CaptureFixture[str]) -> None:
    from kvbudget.engines import transformers as transformers_engine

    spec, h100 = kvbudget.load_model(LLAMA8), kvbudget.find_gpu("H100")
    # Llama-3.1-8B in bf16: 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes = 128 KiB per token
    dyn = transformers_engine.plan(spec, h100, 4, 8192)
    assert dyn.cache_bytes == 4 * 8192 * 128 * 1024
    # StaticCache adds one int64 cumulative_length per layer (cache_utils.py StaticLayer)
    static = transformers_engine.plan(spec, h100, 4, 8192, kind="static")
    assert static.cache_bytes == 4 * 8192 * 128 * 1024 + 32 * 8
    assert dyn.weights_bytes == spec.inventory.total * 2 and dyn.fits
    # beside 14.96 GiB of weights and 0.5 GiB of context, 63.72 GiB hold sequences of 1 GiB of cache plus their
    # share of the unchunked prefill, 8192 x (3 x 4096 + 2 x 14336) x 2 B = 0.625 GiB, and 128256 fp32 logits:
    # 63.72 / 1.6255 = 39.2
    assert dyn.max_batch == 39
    with pytest.raises(InputError, match="fp32, fp16 or bf16"):
        transformers_engine.plan(spec, h100, 1, 8192, dtype="fp8")
    assert main(["fit", LLAMA8, "--gpu", "H100", "--engine", "transformers", "--context", "8192", "--batch", "4",
                 "--cache", "static"]) == 0
    assert "StaticCache" in capsys.readouterr().out


def test_sglang_release_line_is_an_option_of_fit_and_explain(capsys: pytest.CaptureFixture[str]) -> None:
    """--sglang-version 0.4 plans with 0.4's rules (as SGLangSettings(version="0.4")), levers included."""
    import json

    spec, h100 = kvbudget.load_model(LLAMA8), kvbudget.find_gpu("H100")
    old = sglang.plan(spec, h100, sglang.SGLangSettings(version="0.4", context_length=8192))
    new = sglang.plan(spec, h100, sglang.SGLangSettings(context_length=8192))
    assert old.max_total_num_tokens != new.max_total_num_tokens
    argv = ["fit", LLAMA8, "--gpu", "H100", "--engine", "sglang", "--context", "8192", "--json"]
    assert main([*argv, "--sglang-version", "0.4"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kv_cache_tokens"] == old.max_total_num_tokens
    assert doc["levers"][0]["max_concurrency"] != 0 and doc["figures"]["version"] == "0.4"
    assert main([*argv, "--sglang-version", "0.5"]) == 0
    assert json.loads(capsys.readouterr().out)["kv_cache_tokens"] == new.max_total_num_tokens
    assert main(["explain", "--gpu", "H100", "--sglang-version", "0.4", "--json", "--", "python", "-m",
                 "sglang.launch_server", "--model-path", LLAMA8, "--context-length", "8192"]) == 0
    assert json.loads(capsys.readouterr().out)["kv_cache_tokens"] == old.max_total_num_tokens
    assert main(["fit", LLAMA8, "--gpu", "H100", "--sglang-version", "0.4"]) == 2
    assert "--sglang-version is not read under --engine vllm" in capsys.readouterr().err
