"""A vLLM >= 0.21 start that compiles afresh: Inductor's compile-time benchmark of the embedding lookup (a random copy
of the rank's embedding table) inside the profiling run, against a start that loads its compiled graph
(engines/vllm/compile_cache.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

import kvbudget
from kvbudget._record import replace
from kvbudget.cli import main
from kvbudget.engines.vllm import VllmSettings, plan
from kvbudget.engines.vllm.check import check_log
from kvbudget.engines.vllm.compile_cache import cold_compile_bytes, embedding_table_bytes, pinned_copy_bytes
from kvbudget.engines.vllm.log import parse_vllm_log
from kvbudget.units import GiB, InputError

LOGS = Path(__file__).parent / "data" / "vllm_logs"
LLAMA8 = "meta-llama/Llama-3.1-8B-Instruct"


def _plan(model: str, gpu: str, **settings: object) -> kvbudget.engines.vllm.VllmPlan:  # type: ignore[name-defined]
    return plan(kvbudget.load_model(model), kvbudget.find_gpu(gpu), VllmSettings(**settings))  # type: ignore[arg-type]


def test_the_embedding_table_per_rank_by_hand() -> None:
    llama = kvbudget.load_model(LLAMA8)  # config.json: vocab_size 128256, hidden_size 4096, bf16
    assert embedding_table_bytes(llama, 1, "bf16") == 128256 * 4096 * 2 == 1_050_673_152
    # VocabParallelEmbedding splits the padded vocabulary over the TP ranks
    assert embedding_table_bytes(llama, 4, "bf16") == 128256 // 4 * 4096 * 2
    assert embedding_table_bytes(llama, 1, "fp32") == 128256 * 4096 * 4
    # a vocabulary that is no multiple of 64 is padded to one (DEFAULT_VOCAB_PADDING_SIZE), then split
    odd = replace(llama, dims=replace(llama.dims, vocab_size=32001))
    assert embedding_table_bytes(odd, 1, "bf16") == 32064 * 4096 * 2
    assert embedding_table_bytes(odd, 3, "bf16") == 10688 * 4096 * 2  # 32,064 / 3 ranks


def test_no_benchmark_copy_without_a_fresh_compile_of_the_embedding() -> None:
    llama = kvbudget.load_model(LLAMA8)
    table = embedding_table_bytes(llama, 1, "bf16")
    assert cold_compile_bytes(llama, 1, "bf16", first_stage=True, compiled=True, cache="cold") == table
    assert cold_compile_bytes(llama, 1, "bf16", first_stage=True, compiled=True, cache="warm") == 0
    assert cold_compile_bytes(llama, 1, "bf16", first_stage=True, compiled=False, cache="cold") == 0
    assert cold_compile_bytes(llama, 1, "bf16", first_stage=False, compiled=True, cache="cold") == 0
    # a multimodal model takes inputs_embeds computed outside the compiled graph (gpu_model_runner.py _preprocess)
    vl = kvbudget.load_model("Qwen/Qwen2.5-VL-7B-Instruct")
    assert vl.vision is not None
    assert cold_compile_bytes(vl, 1, "bf16", first_stage=True, compiled=True, cache="cold") == 0


def test_the_plan_charges_the_copy_where_it_is_larger_than_the_profiling_run() -> None:
    # Llama-3.1-8B on an A100 80GB with vLLM 0.31.0 (2,048 tokens, 256 requests): the forward's widest point,
    # (2 x 4096 + 3 x 14336) x 2,048 x 2 B = 0.195 GiB, against the table's 0.98 GiB
    cold = _plan(LLAMA8, "A100-80GB", version="0.31.0", max_model_len=8192)
    warm = _plan(LLAMA8, "A100-80GB", version="0.31.0", max_model_len=8192, compile_cache="warm")
    assert cold.activation_bytes == 128256 * 4096 * 2
    assert warm.activation_bytes == (2 * 4096 + 3 * 14336) * 2048 * 2
    assert warm.available_kv_cache_bytes - cold.available_kv_cache_bytes == cold.activation_bytes - warm.activation_bytes
    assert "a random copy of the embedding table" in dict(cold.provenance)["activation_bytes"].band
    assert f"{(128256 * 4096 * 2 - (2 * 4096 + 3 * 14336) * 2048 * 2) / GiB:.2f}" == "0.78"
    (note,) = [n for n in cold.notes if n.startswith("torch.compile:")]
    assert "a first start compiles afresh" in note and "0.78 GiB more KV cache (--vllm-compile-cache warm)" in note
    (note,) = [n for n in warm.notes if n.startswith("torch.compile:")]
    assert "0.78 GiB less KV cache (--vllm-compile-cache cold)" in note
    # --enforce-eager: no torch.compile, so nothing to benchmark and nothing to say
    eager = _plan(LLAMA8, "A100-80GB", version="0.31.0", max_model_len=8192, enforce_eager=True)
    assert eager.activation_bytes == warm.activation_bytes
    assert not [n for n in eager.notes if n.startswith("torch.compile:")]
    # 0.33.0 on an H100 (8,192 tokens, 1,024 requests): the V1 runner's generator pass over 1,024 dummy requests
    # holds more than the table, so the cache changes nothing there
    h100 = _plan(LLAMA8, "H100", version="0.33.0", max_model_len=8192)
    assert h100.activation_bytes == _plan(LLAMA8, "H100", version="0.33.0", max_model_len=8192,
                                          compile_cache="warm").activation_bytes > 128256 * 4096 * 2
    assert not [n for n in h100.notes if n.startswith("torch.compile:")]
    # the releases before 0.21 are their own line (a profiling run fitted on their logs): the setting changes nothing
    old = _plan(LLAMA8, "A100-80GB", version="0.10.2", max_model_len=8192)
    assert old.activation_bytes == _plan(LLAMA8, "A100-80GB", version="0.10.2", max_model_len=8192,
                                         compile_cache="warm").activation_bytes
    with pytest.raises(InputError, match="compile cache 'tepid'"):
        _plan(LLAMA8, "A100-80GB", version="0.31.0", compile_cache="tepid")


def test_only_the_first_pipeline_stage_holds_the_embedding() -> None:
    # TP 1 x PP 2 of Llama-3.1-8B on two A100 80GB: the first stage's run benchmarks the embedding lookup
    cold = _plan(LLAMA8, "A100-80GB", version="0.31.0", max_model_len=8192, pipeline_parallel_size=2)
    warm = _plan(LLAMA8, "A100-80GB", version="0.31.0", max_model_len=8192, pipeline_parallel_size=2,
                 compile_cache="warm")
    stages = [(c[2], w[2]) for c, w in zip(cold.stage_memory, warm.stage_memory, strict=True)]  # activation peaks
    assert len(stages) == 2
    assert stages[0][0] == 128256 * 4096 * 2 > stages[0][1]
    assert stages[1][0] == stages[1][1]  # the last stage runs the sampler, not the embedding


def test_the_log_says_whether_the_start_compiled_afresh() -> None:
    def cache(name: str) -> str | None:
        found = dict(parse_vllm_log((LOGS / f"{name}.log").read_text()).settings)
        return found.get("compile_cache")

    # "Directly load the compiled graph(s) for compile range (1, 2048) from the cache" (compilation/backends.py)
    assert cache("v0.26.1dev_a100-80gb_qwen3-coder-30b-a3b_len131072_mns16") == "warm"
    # "Compiling a graph for compile range (1, 2048) takes 7.83 s"
    assert cache("v0.31.0_a100-40gb_qwen2.5-coder-1.5b_fp16_len16384") == "cold"
    # only the total: "torch.compile took 1.14 s in total" is a load (Dynamo alone traces for seconds), 7.45 s is not
    assert cache("v0.23.0_48gb_llama3.2-1b_len4096_flashinfer-jit-fail") == "warm"
    assert cache("v0.29.0_rtx5090_qwen2.5-0.5b_bf16_len8192_gmu0.9") == "cold"
    # an --enforce-eager run compiles nothing and says nothing of it
    assert cache("v0.29.0_rtx4090-48gb_qwen3-8b-awq_len4096_gmu0.75_eager") is None
    line = "(EngineCore pid=1) INFO 01-01 00:00:00 [monitor.py:53] torch.compile took {} s in total\n"
    kv = "(EngineCore pid=1) INFO 01-01 00:00:01 [gpu_worker.py:625] Available KV cache memory: 11.17 GiB\n"
    assert dict(parse_vllm_log(line.format("1.99") + kv).settings)["compile_cache"] == "warm"
    assert dict(parse_vllm_log(line.format("2.00") + kv).settings)["compile_cache"] == "cold"


def test_check_plans_a_logged_cache_hit_warm() -> None:
    # the 0.26.1dev run loaded its graph: its plan has no benchmark copy of Qwen3-Coder-30B-A3B's table
    # (151,936 x 2,048 x 2 B = 0.58 GiB), which the same run planned cold would charge
    name = "v0.26.1dev_a100-80gb_qwen3-coder-30b-a3b_len131072_mns16"
    import json

    rec = json.loads((LOGS / f"{name}.json").read_text())["kvbudget"]
    text = (LOGS / f"{name}.log").read_text()
    r = check_log(text, model=rec["model"], gpu=rec.get("gpu"), version=rec.get("version"), flags=rec.get("flags"))
    assert r.settings.compile_cache == "warm"
    spec = kvbudget.load_model(rec["model"])
    table = embedding_table_bytes(spec, 1, "bf16")
    assert table == 151936 * 2048 * 2 and r.plan.activation_bytes < table
    cold = plan(spec, kvbudget.find_gpu(rec["gpu"]), replace(r.settings, compile_cache="cold"))
    assert cold.activation_bytes == table


def test_the_cli_option(capsys: pytest.CaptureFixture[str]) -> None:
    def run(*args: str) -> tuple[int, str, str]:
        try:
            code = main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        out = capsys.readouterr()
        return code, out.out, out.err

    base = ("fit", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "RTX-5090", "--context", "8192", "--vllm-version", "0.29.0")
    code, cold, _ = run(*base)
    assert code == 0 and "activation peak of the profiling run    1.02 GiB  modelled" in cold  # 152,064 x 3,584 x 2 B
    code, warm, _ = run(*base, "--vllm-compile-cache", "warm")
    assert code == 0 and "activation peak of the profiling run    0.24 GiB  modelled" in warm
    code, out, _ = run("explain", "vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 8192", "--gpu", "RTX-5090",
                       "--vllm-compile-cache", "warm")
    assert code == 0 and "the compiled graph assumed loaded from vLLM's cache" in " ".join(out.split())
    code, out, err = run(*base, "--vllm-compile-cache", "lukewarm")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "--vllm-compile-cache" in err


def test_the_v2_runner_keeps_the_freed_copy_pinned_before_the_split_limit() -> None:
    # compile_cache.pinned_copy_bytes: the table counted again as consumed on the V2 model runner, where the profiling
    # run has no allocator split limit (before 0.31 on CUDA; never scoped on ROCm, gpu_worker.py is_cuda())
    table = 152064 * 3584 * 2  # Qwen2.5-7B: vocabulary 152,064 (a multiple of 64), hidden 3,584, bf16
    assert pinned_copy_bytes(table, "v2", 29, "nvidia") == table
    assert pinned_copy_bytes(table, "v2", 30, "nvidia") == table
    assert pinned_copy_bytes(table, "v2", 31, "nvidia") == 0
    assert pinned_copy_bytes(table, "v2", 33, "amd") == table
    assert pinned_copy_bytes(table, "v1", 29, "nvidia") == 0
    assert pinned_copy_bytes(0, "v2", 29, "nvidia") == 0
    # 0.22-0.26 counted memory outside torch's reserved pool (mem_utils.py non_torch_increase), where a segment pinned
    # inside the pool does not show; 0.27 counts consumption by free memory (total_consumed)
    assert pinned_copy_bytes(table, "v2", 26, "nvidia") == 0
    assert pinned_copy_bytes(table, "v2", 24, "amd") == 0
    assert pinned_copy_bytes(table, "v2", 27, "nvidia") == table
    qwen7 = "Qwen/Qwen2.5-7B-Instruct"
    cold = _plan(qwen7, "RTX-5090-32GB", version="0.29.0", max_model_len=8192, gpu_memory_utilization=0.9)
    warm = _plan(qwen7, "RTX-5090-32GB", version="0.29.0", max_model_len=8192, gpu_memory_utilization=0.9,
                 compile_cache="warm")
    fixed = _plan(qwen7, "RTX-5090-32GB", version="0.31.0", max_model_len=8192, gpu_memory_utilization=0.9)
    assert cold.non_torch_bytes - warm.non_torch_bytes == table
    assert fixed.non_torch_bytes == warm.non_torch_bytes + (fixed.non_torch_bytes - warm.non_torch_bytes)
    assert cold.non_torch_bytes - fixed.non_torch_bytes == table + (warm.non_torch_bytes - fixed.non_torch_bytes)
    (note,) = [n for n in cold.notes if n.startswith("torch.compile:")]
    assert "pinned past the run" in note
    assert not [n for n in fixed.notes if "pinned past the run" in n]
    # two pipeline stages: only the first one (which holds the embedding) loses it
    pp = _plan(qwen7, "RTX-5090-32GB", version="0.29.0", max_model_len=8192, gpu_memory_utilization=0.9,
               pipeline_parallel_size=2)
    pp_warm = _plan(qwen7, "RTX-5090-32GB", version="0.29.0", max_model_len=8192, gpu_memory_utilization=0.9,
                    pipeline_parallel_size=2, compile_cache="warm")
    assert pp.non_torch_bytes == pp_warm.non_torch_bytes  # the figure every stage holds does not carry it
    assert pp.available_kv_cache_bytes <= pp_warm.available_kv_cache_bytes - table  # the first stage pays it


@pytest.mark.parametrize("name", ["v0.29.0_rtx5090_qwen2.5-7b_bf16_len8192_gmu0.9",
                                  "v0.29.0_rtx5090_qwen2.5-7b_fp8-online_len8192_gmu0.9",
                                  "v0.29.0_rtx5090_qwen2.5-0.5b_bf16_len8192_gmu0.9",
                                  "v0.29.0_rtx5060ti-wsl_qwen3-4b-2507-ft_len8192_gmu0.7"])
def test_the_logged_consumed_memory_holds_the_table_twice(name: str) -> None:
    # each 0.29.0 V2-runner log prints 'Actual usage is C GiB for consumed memory (weights + non-torch), P GiB for
    # peak activation': C less 'Model loading took W GiB' is the CUDA context and the like (0.2-0.45 GiB on these
    # cards) plus the random embedding table a second time
    import json
    import re

    text = (LOGS / f"{name}.log").read_text()
    meta = json.loads((LOGS / f"{name}.json").read_text())
    consumed = float(re.search(r"Actual usage is ([\d.]+) GiB for consumed", text).group(1))  # type: ignore[union-attr]
    loading = float(re.search(r"Model loading took ([\d.]+) GiB", text).group(1))  # type: ignore[union-attr]
    spec = kvbudget.load_model(meta["kvbudget"]["model"])
    table = embedding_table_bytes(spec, 1, "bf16") / GiB
    assert 0.2 <= consumed - loading - table <= 0.45
    rec = meta["kvbudget"]
    r = check_log(text, model=rec["model"], gpu=rec["gpu"], gpu_memory=round(rec["gpu_memory_gib"] * GiB) if "gpu_memory_gib" in rec else None,
                  version=rec["version"], flags=rec["flags"])
    gpu = kvbudget.find_gpu(rec["gpu"])
    if "gpu_memory_gib" in rec:
        gpu = replace(gpu, memory_bytes=round(rec["gpu_memory_gib"] * GiB))
    warm = plan(spec, gpu,
                replace(r.settings, compile_cache="warm"))
    assert r.settings.compile_cache == "cold"
    assert r.plan.non_torch_bytes - warm.non_torch_bytes == embedding_table_bytes(spec, 1, "bf16")
    logged = meta["reported"]["available_kv_cache_gib"]
    assert abs(r.plan.available_kv_cache_bytes / GiB - logged) / logged < 0.015
