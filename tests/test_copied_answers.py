"""Answers a user copies must be right (issue #9): every launch command kvbudget prints, read back by
`explain`, gives the figures it was printed beside; weights too large for the GPU stop while loading."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from kvbudget.cli import main

LLAMA70 = "meta-llama/Llama-3.1-70B-Instruct"


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(list(argv)) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _explained(capsys: pytest.CaptureFixture[str], command: str, gpu: str) -> dict:
    return _json(capsys, "explain", "--gpu", gpu, "--json", "--", *shlex.split(command))


@pytest.mark.parametrize("weights", ["awq", "gptq", "fp8", "nf4", "nvfp4", "bf16"])
def test_fit_launch_and_fewest_gpus_keep_the_weight_format(capsys: pytest.CaptureFixture[str], weights: str) -> None:
    doc = _json(capsys, "fit", LLAMA70, "--gpu", "H100", "--weights-dtype", weights, "--context", "8192", "--batch", "64",
                "--json")
    launch = doc["launch"]
    back = _explained(capsys, launch["command"], "H100")
    assert back["kv_cache_tokens"] == doc["kv_cache_tokens"]
    assert back["memory"]["weights_bytes"] == doc["memory"]["weights_bytes"]
    # formats vLLM cannot make from a 16-bit checkpoint say which checkpoint to serve
    assert ("note" in launch) == (weights in ("awq", "gptq", "nvfp4"))
    fewest = doc.get("fewest_gpus")
    if fewest:
        again = _explained(capsys, fewest["launch"]["command"], "H100")
        assert again["kv_cache_tokens"] >= 64 * 8192 or again["max_concurrency"] >= 64
        assert again["memory"]["weights_bytes"] < doc["memory"]["weights_bytes"]  # split over its TP ranks


def test_awq_fewest_gpus_text_names_the_format(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fit", LLAMA70, "--gpu", "H100", "--weights-dtype", "awq", "--context", "8192", "--batch", "64"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("  vllm serve"))
    assert "--quantization awq" in line
    assert "AWQ weights need an AWQ checkpoint of the model" in out


def test_weights_larger_than_the_gpu_stop_while_loading(capsys: pytest.CaptureFixture[str]) -> None:
    # DeepSeek-R1-Distill-Qwen-14B in bf16 is 27.59 GiB loaded (27.54 GiB of tensors in PyTorch's allocator blocks:
    # engines/vllm/allocations.py; the 0.8.5.post1 A100 log prints "Model loading took 27.59 GiB"); an RTX 4090 has 23.64
    assert main(["fit", "deepseek-r1-distill-qwen-14b", "--gpu", "RTX4090", "--context", "4096"]) == 0
    out = capsys.readouterr().out
    assert "Model loading took" not in out
    assert "torch.OutOfMemoryError: CUDA out of memory while loading the model: 27.59 GiB of weights per GPU" in out
    assert "gpu_memory_utilization" not in out.split("vLLM will stop with:")[1].split("Verdict")[0]
    # and what would fit: two GPUs, with the command
    assert "Fewest RTX-4090-24GB for 1 x 4,096-token request: 2 (TP2)" in out


def test_bare_number_memory_size_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["fit", "llama-3.1-8b", "--gpu-memory", "48"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has no unit: write it like 48GiB" in err
    assert main(["fit", "llama-3.1-8b", "--engine", "textbook", "--gpu-memory", "48GiB", "--overhead", "0"]) == 0


def test_compare_rows_that_do_not_start_hold_nothing_and_none_vanish(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(capsys, "compare", LLAMA70, "--gpu", "L40S", "--context", "32768", "--json")
    assert doc["engines"] and all(not e["starts"] for e in doc["engines"])  # 131 GiB of bf16 weights on a 44 GiB card
    assert all(e["kv_cache_tokens"] == 0 and e["max_concurrency"] == 0 and e["kv_budget_bytes"] == 0 for e in doc["engines"])
    two = _json(capsys, "compare", "llama-3.1-8b", "--gpu", "L4", "--context", "8192", "--tp", "2", "--json")
    shown = {e["engine"] for e in two["engines"]} | {e["engine"] for e in two["not_compared"]}
    assert shown == {"vllm", "sglang", "trtllm", "llama.cpp", "transformers"}
    assert two["not_compared"] == [{"engine": "transformers", "reason": two["not_compared"][0]["reason"]}]
    # llama.cpp over two GPUs splits its layers: each GPU holds about half the weights
    one = _json(capsys, "compare", "llama-3.1-8b", "--gpu", "L4", "--context", "8192", "--json")
    w1 = next(e["weights_bytes"] for e in one["engines"] if e["engine"] == "llama.cpp")
    w2 = next(e["weights_bytes"] for e in two["engines"] if e["engine"] == "llama.cpp")
    assert 0.4 * w1 < w2 < 0.6 * w1
    assert main(["compare", "llama-3.1-8b", "--gpu", "L4", "--context", "8192", "--tp", "2"]) == 0
    assert "Not compared: transformers:" in capsys.readouterr().out


def test_engine_flags_are_refused_where_the_engine_does_not_read_them(capsys: pytest.CaptureFixture[str]) -> None:
    cases = [
        (["--weights-dtype", "q4_k_m"], "q4_k_m is a llama.cpp GGUF type: use --engine llama.cpp"),
        (["--engine", "llama.cpp", "--batch", "8"], "use --np"),
        (["--np", "4"], "--np is not read under --engine vllm: use --max-num-seqs"),
        (["--engine", "sglang", "--gpu-memory-utilization", "0.8"], "use --mem-fraction-static"),
        (["--engine", "trtllm", "--block-size", "32"], "--block-size is not read under --engine trtllm"),
        (["--weights-memory", "14GiB"], "--weights-memory is not read under --engine vllm"),
        (["--engine", "transformers", "--tp", "2"], "--tp is not read under --engine transformers"),
    ]
    for extra, message in cases:
        assert main(["fit", "llama-3.1-8b", "--gpu", "H100", *extra]) == 2, extra
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err
    # the same --num-gpus on fit, levers and compare
    for command in (["fit", "llama-3.1-8b", "--gpu", "L4"], ["levers", "llama-3.1-8b", "--gpu", "L4", "--context", "8192"],
                    ["compare", "llama-3.1-8b", "--gpu", "L4"]):
        assert main([*command, "--num-gpus", "2", "--json"]) == 0, command
        capsys.readouterr()


def test_plan_nodes_come_from_the_gpu_catalog(capsys: pytest.CaptureFixture[str]) -> None:
    from kvbudget.hardware import gpus

    sizes = {g.name: g.gpus_per_node for g in gpus()}
    # HGX boards of 8, one GPU per GH200 superchip node, 4 per GB200 compute tray, at most 4 consumer cards
    assert sizes["H100-SXM-80GB"] == sizes["MI300X-192GB"] == sizes["L40S-48GB"] == 8
    assert sizes["GH200-96GB"] == 1 and sizes["GB200-186GB"] == 4
    assert sizes["RTX-3090-24GB"] == sizes["RTX-4090-24GB"] == 4
    doc = _json(capsys, "plan", LLAMA70, "--concurrency", "64", "--context", "8192", "--gpus", "RTX3090,GH200-96GB,H100", "--json")
    for row in doc["plans"]:
        assert row["tp"] <= sizes[row["gpu"]] == row["gpus_per_node"], row
        if row["pp"] > 1:  # PP across nodes only once TP fills a node
            assert row["tp"] == sizes[row["gpu"]]
    assert {r["tp"] for r in doc["plans"] if r["gpu"] == "H100-SXM-80GB"} == {1, 2, 4, 8}
    # --gpus-per-node overrides the catalog for every GPU type
    four = _json(capsys, "plan", LLAMA70, "--concurrency", "64", "--context", "8192", "--gpus", "H100", "--gpus-per-node", "4",
                 "--json")
    assert max(r["tp"] for r in four["plans"]) == 4


def test_transformers_has_a_verdict_and_counts_agree_in_number(capsys: pytest.CaptureFixture[str]) -> None:
    # Llama-3.1-8B on an L4: 4 sequences of 8,192 tokens (1 GiB of cache each) fit beside 14.96 GiB of weights, 5 do not
    assert main(["fit", "llama-3.1-8b", "--gpu", "L4", "--engine", "transformers", "--context", "8192", "--batch", "5"]) == 0
    out = capsys.readouterr().out
    assert "Verdict: does not fit: 5 x 8,192-token requests need more than the memory holds (at most 4 at once)" in out
    assert "total 23.58 GiB of 22.03 GiB" in out
    doc = _json(capsys, "fit", "llama-3.1-8b", "--gpu", "L4", "--engine", "transformers", "--context", "8192", "--batch", "4",
                "--json")
    assert (doc["fits"], doc["max_batch"], doc["batch"]) == (True, 4, 4)
    assert main(["fit", "llama-3.1-8b", "--gpu", "H100", "--engine", "sglang", "--context", "8192"]) == 0
    out = capsys.readouterr().out
    assert "Longest context for 1 request at once:" in out and "1 x 8,192-token request fits in the pool" in out
    assert "1 requests" not in out


def test_llamacpp_gguf_preset_launch_reads_back_to_the_same_plan(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(capsys, "fit", "llama-3.1-8b", "--gpu", "RTX4090", "--engine", "llama.cpp", "--weights-dtype", "q4_k_m",
                "--context", "16384", "--np", "2", "--json")
    command = doc["launch"]["command"]
    assert command.startswith("llama-server -m Llama-3.1-8B-Instruct-Q4_K_M.gguf")
    back = _explained(capsys, command, "RTX4090")
    assert back["memory"] == doc["memory"]
    assert back["memory"]["weights_bytes"] == 4_617_396_224  # the CUDA0 model buffer a real Q4_K_M load prints
    # a name that is not a catalog model's quantized file is a missing file, as before
    assert main(["explain", "--gpu", "RTX4090", "--", "llama-server", "-m", "Nope-Q4_K_M.gguf"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_data_parallel_engines_share_the_load(capsys: pytest.CaptureFixture[str]) -> None:
    # Llama-3.1-8B at 8K on an H100: 55 requests per vLLM engine (55.34x; 56.15x before the profiling run's floor
    # from vLLM 0.33's source, whose V2 runner's warm-up sampler pass holds 1.78 GiB); 100 requests over 2 DP engines
    # is 50 each, which fits, on 2 GPUs; on one engine it does not
    assert main(["fit", "llama-3.1-8b", "--gpu", "H100", "--dp", "2", "--context", "8192", "--batch", "100"]) == 0
    out = capsys.readouterr().out
    assert "on 2 x H100-SXM-80GB" in out and "55 per engine, 110 over 2 DP engines" in out
    assert "Verdict: fits: 100 x 8,192-token requests over 2 DP engines (50 each) fit in each engine's pool" in out
    assert "Fewest" not in out
    doc = _json(capsys, "fit", "llama-3.1-8b", "--gpu", "H100", "--dp", "2", "--context", "8192", "--batch", "100", "--json")
    assert (doc["fits"], doc["max_batch"]) == (True, 110)
    one = _json(capsys, "fit", "llama-3.1-8b", "--gpu", "H100", "--context", "8192", "--batch", "100", "--json")
    assert (one["fits"], one["max_batch"]) == (False, 55)


def test_llama_server_hf_reads_as_the_catalog_models_quantized_file(capsys: pytest.CaptureFixture[str]) -> None:
    # llama-server -hf REPO:QUANT downloads that GGUF; for a model the catalog knows it is planned like -m FILE
    hf = _explained(capsys, "llama-server -hf bartowski/Meta-Llama-3.1-8B-Instruct-GGUF:Q4_K_M -c 16384", "RTX4090")
    m = _explained(capsys, "llama-server -m Llama-3.1-8B-Instruct-Q4_K_M.gguf -c 16384", "RTX4090")
    assert hf["memory"] == m["memory"] and hf["memory"]["weights_bytes"] == 4_617_396_224
    assert main(["explain", "--gpu", "RTX4090", "--", "llama-server", "-hf", "someone/Unknown-GGUF"]) == 2
    assert "download the GGUF and give -m PATH" in capsys.readouterr().err



def test_llama_server_hf_file_names_the_file_downloaded(capsys: pytest.CaptureFixture[str]) -> None:
    """--hf-file / -hff names the repo's file llama-server downloads, over -hf's tag (common/arg.cpp: the tag only
    picks a file when --hf-file is empty). Was 'not one kvbudget knows: ignored' and Q4_K_M planned for a Q8_0 run."""
    hff = _explained(capsys, "llama-server --hf-repo bartowski/Meta-Llama-3.1-8B-Instruct-GGUF --hf-file "
                     "Meta-Llama-3.1-8B-Instruct-Q8_0.gguf -c 16384", "RTX4090")
    m = _explained(capsys, "llama-server -m Llama-3.1-8B-Instruct-Q8_0.gguf -c 16384", "RTX4090")
    q4 = _explained(capsys, "llama-server -hf bartowski/Meta-Llama-3.1-8B-Instruct-GGUF -c 16384", "RTX4090")
    assert hff["memory"] == m["memory"] and hff["memory"]["weights_bytes"] > q4["memory"]["weights_bytes"]
    tagged = _explained(capsys, "llama-server -hf bartowski/Meta-Llama-3.1-8B-Instruct-GGUF:Q4_K_M -hff "
                        "Meta-Llama-3.1-8B-Instruct-Q8_0.gguf -c 16384", "RTX4090")
    assert tagged["memory"] == m["memory"]
    assert main(["explain", "--gpu", "RTX4090", "--", "llama-server", "-hff", "x-Q8_0.gguf"]) == 2
    assert "give the repo with -hf REPO" in capsys.readouterr().err


def test_llamacpp_that_does_not_fit_says_what_would(capsys: pytest.CaptureFixture[str]) -> None:
    # gemma-3-27b-it in bf16 (47.68 GiB of weights) does not fit one L40S (44.52 GiB) alone: llama-server's auto-fit
    # (common/fit.cpp step 3) keeps the layers that fit on the GPU and the rest in host memory, and it starts (this
    # said "llama.cpp will fail" with a cudaMalloc line it would not print)
    argv = ["fit", "gemma-3-27b", "--gpu", "L40S", "--context", "8192", "--engine", "llama.cpp"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "llama.cpp will log:" in out and "cudaMalloc failed" not in out
    assert "layers in host memory (placed by auto-fit: the model does not fit the GPU alone)" in " ".join(out.split())
    assert "note: a Q4_K_M file (--weights-dtype q4_k_m) fits" in out
    # llama-server's 4 default slots share the 8,192 cells of its unified cache: 4 requests of 2,048 tokens
    assert "Fewest L40S-48GB for 4 x 2,048-token requests: 2 (2 GPUs), holding 4 at once" in out
    doc = _json(capsys, *argv, "--json")
    assert doc["fits"] and doc["fewest_gpus"]["num_gpus"] == 2
    assert doc["suggestion"].startswith("a Q4_K_M file (--weights-dtype q4_k_m) fits")
    back = _explained(capsys, doc["fewest_gpus"]["launch"]["command"], "L40S")
    assert back["fits"] and back["n_seq_max"] == 4 and back["n_ctx"] == 8192


def test_a_gpu_name_cards_of_different_memory_share_is_refused_listing_them(capsys: pytest.CaptureFixture[str]) -> None:
    """A bare A100 is a 40 GB or an 80 GB card (V100: 16 or 32, GH200: 96 or 144): the answer for one is wrong for
    the other, so the name is refused listing the cards (hostile-input round 13; it was read as the 40 GB SXM4 card
    with a note, exit 0)."""
    assert main(["fit", "llama-3.1-8b", "--gpu", "A100", "--json"]) == 2
    assert capsys.readouterr().err == (
        "kvbudget: error: GPU 'A100' names cards of different memory: give one of A100-PCIE-40GB, A100-PCIe-80GB, "
        "A100-SXM4-40GB, A100-SXM4-80GB (or --gpu-memory 80GiB)\n")
    for name, said in (("NVIDIA V100", "V100-SXM2-16GB, V100-SXM2-32GB"), ("gh200", "GH200-144GB, GH200-96GB")):
        assert main(["fit", "llama-3.1-8b", "--gpu", name]) == 2
        assert said in capsys.readouterr().err
    # one memory size: H100 (SXM and PCIe are 80 GB; the 94 GB NVL is named H100 NVL), L4 (L40S is not an L4)
    for name, card in (("H100", "H100-SXM-80GB"), ("L4", "L4-24GB"), ("A100-80GB", "A100-SXM4-80GB"),
                       ("A100 40GB", "A100-SXM4-40GB"), ("V100 32GB", "V100-SXM2-32GB"), ("GH200 480GB", "GH200-96GB")):
        assert main(["fit", "llama-3.1-8b", "--gpu", name, "--json"]) == 0
        captured = capsys.readouterr()
        assert json.loads(captured.out)["gpu"] == card and captured.err == ""


def test_llamacpp_plans_and_levers_take_gguf_types(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(capsys, "plan", "qwen3-30b-a3b", "--concurrency", "16", "--context", "8192", "--engine", "llama.cpp",
                "--weights-dtype", "q4_k_m", "--gpus", "L40S", "--json")
    best = next(p for p in doc["plans"] if p["serves"])
    assert best["weights_dtype"] == "q4_k_m"
    command = best["launch"]["command"]
    assert command.startswith("llama-server -m Qwen3-30B-A3B-Q4_K_M.gguf -c 131072 -np 16")
    back = _explained(capsys, command, "L40S")  # the file llama-quantize makes, planned as that file
    assert back["fits"] and back["n_seq_max"] == 16 and back["memory"]["weights_bytes"] == best["weights_bytes"]
    lev = _json(capsys, "levers", "llama-3.1-8b", "--gpu", "RTX4090", "--context", "8192", "--engine", "llama.cpp",
                "--weights-dtype", "q4_k_m", "--json")
    assert lev["baseline"]["max_concurrency"] > 0
    assert main(["plan", "qwen3-30b-a3b", "--concurrency", "4", "--context", "8192", "--weights-dtype", "q4_k_m"]) == 2
    assert "llama.cpp GGUF type" in capsys.readouterr().err  # under vLLM, a GGUF type is refused


def test_another_engines_option_on_explain_or_check_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """An option the engine that reads the command or log does not have is one error line, not silently ignored."""
    data = Path(__file__).parent / "data"
    sglang_log = next(p for p in sorted((data / "sglang_logs").iterdir()) if p.suffix != ".json")
    llama_log = next(p for p in sorted((data / "llamacpp_logs").iterdir()) if p.suffix != ".json")
    for argv, said in [
        (["explain", "--gpu", "H100", "--llamacpp-build", "5000", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"],
         "--llamacpp-build is not read for vLLM's command"),
        # SGLang's log reads SGLang's flags after --: a vLLM flag is one SGLang's own parser refuses
        (["check", str(sglang_log), "--", "--max-model-len", "4096"],
         "the flags after --: SGLang 0.3.0 - 0.5.23 stops at start-up: `error: unrecognized arguments: --max-model-len`"),
        (["check", str(llama_log), "--", "-c", "4096"], "the flags after -- are read for vLLM, SGLang and TensorRT-LLM logs only"),
        (["check", str(llama_log), "--vllm-version", "0.6.3"], "--vllm-version is not read for llama.cpp's log"),
    ]:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and said in err, err


def test_a_flag_whose_memory_is_not_modelled_widens_the_band(capsys: pytest.CaptureFixture[str]) -> None:
    """--offload-group-size: a warning naming it, and the available KV memory's provenance says it is an upper bound."""
    argv = ["explain", "--json", "--gpu", "H100", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"]
    assert main([*argv, "--offload-group-size", "4"]) == 0
    doc = json.loads(capsys.readouterr().out)
    note = doc["provenance"]["available_kv_cache_bytes"]["note"]
    assert "the memory of --offload-group-size is not modelled" in note and "upper bound" in note
    assert any(w.startswith("--offload-group-size: kvbudget does not model the memory") for w in doc["warnings"])
    assert main(argv) == 0
    plain = json.loads(capsys.readouterr().out)
    assert plain["provenance"]["available_kv_cache_bytes"]["note"] == "" and plain["warnings"] == []
    assert plain["available_kv_cache_bytes"] == doc["available_kv_cache_bytes"]  # the figure itself is the model's


def test_data_parallel_moe_launch_reads_back_to_the_same_plan(capsys: pytest.CaptureFixture[str]) -> None:
    """fit --dp 4 on an MoE model plans the experts shared over the 4 engines, as one `vllm serve
    --data-parallel-size 4` runs them: its launch command says so and explains back to the same figures."""
    doc = _json(capsys, "fit", "gpt-oss-120b", "--gpu", "H100", "--tp", "1", "--dp", "4", "--json")
    command = doc["launch"]["command"]
    assert command == "vllm serve openai/gpt-oss-120b --data-parallel-size 4"
    assert "replicas: 1" in doc["launch"]["kubernetes"] and "nvidia.com/gpu: 4" in doc["launch"]["kubernetes"]
    back = _explained(capsys, command, "H100")
    assert back["memory"] == doc["memory"] and back["kv_cache_tokens"] == doc["kv_cache_tokens"]
