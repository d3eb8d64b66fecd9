"""Hostile inputs, round 16: option values, traces, launch commands, logs, configs and metrics. Each case failed on
the code before it: a traceback, a refusal for the wrong reason, or a plausible answer with exit 0. The required
outcome is the engine's own answer, or one error line naming the problem and the fix, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvbudget.cli import main
from test_hostile_round15 import _refused, _runs

DATA = Path(__file__).parent / "data"


def _plan(capsys: pytest.CaptureFixture[str], *words: str) -> dict[str, object]:
    assert main(["explain", "--gpu", "H100", "--json", "--", *words]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


# --- round 15's leftovers ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "said"), [
    # was: "write it like 51539607552GiB" (48 EiB)
    ("51539607552", "looks like a count of bytes (48 GiB): write it like 48GiB or 51539607552B"),
    ("81559", "looks like a count of MiB, as nvidia-smi prints (79.65 GiB): write it like 81559MiB"),
    ("1e30", "even as a count of bytes it is more than 1 PiB"),
    ("48", "write it like 48GiB, 48GB or 48MiB"),
])
def test_a_bare_gpu_memory_is_read_for_what_it_likely_means(capsys: pytest.CaptureFixture[str], value: str,
                                                             said: str) -> None:
    _refused(capsys, ["fit", "llama-3.1-8b", "--gpu-memory", value], "has no unit", said)


@pytest.mark.parametrize(("arrival", "said"), [
    ("1e308", "'arrival' (seconds from the start) is 1e+308 seconds, beyond 1e9"),  # was "missing or not a number"
    ("-1", "'arrival' (seconds from the start) is negative (-1)"),
    ('"soon"', "is 'soon', not a number"),
    ("null", "'arrival' (seconds from the start) is missing"),
])
def test_a_trace_arrival_out_of_range_is_named_for_what_it_is(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                              arrival: str, said: str) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text(f'{{"arrival": {arrival}, "prompt_tokens": 10, "output_tokens": 5}}\n', encoding="utf-8")
    _refused(capsys, ["simulate", "llama-3.1-8b", "--gpu", "H100", "--trace", str(trace)], said)
    trace.write_text(f'{{"arrival": 0, "prompt_tokens": 10, "output_tokens": 5, "delay": {arrival}}}\n', encoding="utf-8")
    if arrival != "null":
        _refused(capsys, ["simulate", "llama-3.1-8b", "--gpu", "H100", "--trace", str(trace)], "'delay'")


_LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def test_kubectl_run_reads_the_args_after_dashes(capsys: pytest.CaptureFixture[str]) -> None:
    """kubectl run NAME --image=IMAGE -- ARGS: was refused ('unrecognized arguments: --'); ARGS are the container's
    args (the image's entrypoint runs them), with --command its command; --env is its environment."""
    same = _plan(capsys, "docker", "run", "--gpus", "all", "vllm/vllm-openai:v0.10.1", "--model", _LLAMA,
                 "--max-model-len", "8192")
    for command in (f"kubectl run x --image=vllm/vllm-openai:v0.10.1 -- --model {_LLAMA} --max-model-len 8192",
                    f"kubectl run x --rm -it --image vllm/vllm-openai:v0.10.1 --restart=Never --command -- vllm serve "
                    f"{_LLAMA} --max-model-len 8192"):
        doc = _plan(capsys, command)
        assert doc["kv_cache_tokens"] == same["kv_cache_tokens"]
        assert doc["engine"]["version_line"] == "v1"  # type: ignore[index]
    doc = _plan(capsys, f"kubectl run x --env=VLLM_USE_V1=0 --image=vllm/vllm-openai:v0.9.2 -- --model {_LLAMA} "
                        "--max-model-len 8192")
    assert doc["engine"]["version_line"] == "v0"  # type: ignore[index]


def test_kubectl_run_without_an_image_or_with_too_few_gpus_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    _refused(capsys, ["explain", "--gpu", "H100", "--", f"kubectl run x -- --model {_LLAMA}"],
             "kubectl run without --image=IMAGE")
    limits = '{"spec":{"containers":[{"name":"x","resources":{"limits":{"nvidia.com/gpu":1}}}]}}'
    _refused(capsys, ["explain", "--gpu", "H100", "--", "kubectl", "run", "x", "--image=vllm/vllm-openai:v0.10.1",
                      f"--overrides={limits}", "--", "--model", _LLAMA, "-tp", "2"],
             "needs 2 GPUs (TP x PP x DP) but kubectl run --overrides gives it 1")


@pytest.mark.parametrize("version", ["0.13.0", "0.12.0", "0.10.1", "0.6.3"])
def test_max_model_len_minus_one_before_auto_fit_is_refused(capsys: pytest.CaptureFixture[str], version: str) -> None:
    """-1 means 'fit to memory' from vLLM 0.14 (engine/arg_utils.py human_readable_int_or_auto); before, int('-1') is
    a length of -1 tokens (0.12-0.13: max_num_batched_tokens = max_num_seqs x -1 fails SchedulerConfig's ge=1). It
    was planned as an auto-fit, exit 0."""
    _refused(capsys, ["explain", "--gpu", "L4", "--vllm-version", version, "--", "vllm", "serve", "llama-3.1-8b",
                      "--max-model-len", "-1"], f"vLLM {version} takes it as a length of -1 tokens", "from 0.14")
    _runs(capsys, ["explain", "--gpu", "L4", "--vllm-version", "0.14.0", "--", "vllm", "serve", "llama-3.1-8b",
                   "--max-model-len", "-1"])


# --- a vLLM command its SchedulerConfig or quantization method refuses ---------------------------------------------------

@pytest.mark.parametrize(("words", "said"), [
    # 0.33.0 config/scheduler.py verify_max_model_len: both were planned, 'fits', exit 0
    (["--max-model-len", "8192", "--max-num-batched-tokens", "4096", "--no-enable-chunked-prefill"],
     "max_num_batched_tokens (4096) is smaller than max_model_len (8192)"),
    (["--max-model-len", "8192", "--max-num-batched-tokens", "100", "--max-num-seqs", "256"],
     "max_num_batched_tokens (100) must be greater than or equal to max_num_seqs (256)"),
])
def test_a_token_budget_the_scheduler_refuses_is_refused(capsys: pytest.CaptureFixture[str], words: list[str],
                                                         said: str) -> None:
    _refused(capsys, ["explain", "--gpu", "H100", "--", "vllm", "serve", "llama-3.1-8b", *words], "vLLM stops at start-up",
             said)


def test_a_token_budget_the_scheduler_takes_is_planned(capsys: pytest.CaptureFixture[str]) -> None:
    """With no --max-num-seqs vLLM lowers its default to the tokens; chunked prefill takes any budget; V0 of 0.8
    chunks no prefill below 32K, so a short budget stops it there."""
    out, _ = _runs(capsys, ["explain", "--gpu", "H100", "--", "vllm", "serve", "llama-3.1-8b", "--max-model-len", "8192",
                            "--max-num-batched-tokens", "100"])
    assert "max_num_seqs 100," in out
    _runs(capsys, ["explain", "--gpu", "H100", "--", "vllm", "serve", "llama-3.1-8b", "--max-model-len", "8192",
                   "--max-num-batched-tokens", "4096", "--max-num-seqs", "64"])
    _refused(capsys, ["explain", "--gpu", "H100", "--vllm-version", "0.8.5", "--", "VLLM_USE_V1=0", "vllm", "serve",
                      "llama-3.1-8b", "--max-model-len", "8192", "--max-num-batched-tokens", "4096"], "(chunked prefill is off)")


@pytest.mark.parametrize(("version", "gpu", "words", "said"), [
    # config/vllm.py _get_quantization_config: the method's get_supported_act_dtypes (fp8.py, mxfp4.py, awq.py)
    (None, "H100", ["llama-3.1-8b", "--quantization", "fp8", "--dtype", "float32"],
     "torch.float32 is not supported for quantization method fp8. Supported dtypes: [torch.bfloat16, torch.float16]"),
    (None, "H100", ["gpt-oss-20b", "--dtype", "half"],
     "torch.float16 is not supported for quantization method mxfp4. Supported dtypes: [torch.bfloat16]"),
    ("0.20.0", "H100", ["llama-3.1-8b-awq", "--quantization", "awq", "--dtype", "bfloat16"],
     "torch.bfloat16 is not supported for quantization method awq. Supported dtypes: [torch.float16]"),
    # a T4 under 0.10.0 runs V0 (the fallback), whose AWQ kernel is the plain one (Marlin needs 8.0 up to 0.13)
    ("0.10.0", "T4", ["llama-3.1-8b-awq", "--dtype", "float32"], "quantization method awq. Supported dtypes: [torch.float16]"),
])
def test_a_dtype_the_quantization_method_does_not_run_is_refused(capsys: pytest.CaptureFixture[str], version: str | None,
                                                                 gpu: str, words: list[str], said: str) -> None:
    release = ["--vllm-version", version] if version else []
    _refused(capsys, ["explain", "--gpu", gpu, *release, "--", "vllm", "serve", *words, "--max-model-len", "4096"],
             "vLLM stops at start-up", said)


def test_the_v0_fallback_keeps_its_releases_kernel_rules(capsys: pytest.CaptureFixture[str]) -> None:
    """The V0 line (T4 under 0.10.0) was read as the newest release: Marlin from compute capability 7.5."""
    out, _ = _runs(capsys, ["explain", "--gpu", "T4", "--vllm-version", "0.10.0", "--", "vllm", "serve", "llama-3.1-8b-awq",
                            "--max-model-len", "4096"])
    assert "vLLM's plain AWQ kernel (T4-16GB cannot run Marlin" in out
    for words in (["llama-3.1-8b", "--quantization", "fp8", "--dtype", "half"], ["gpt-oss-20b"],
                  ["llama-3.1-8b-awq", "--quantization", "awq_marlin", "--dtype", "bfloat16"]):
        _runs(capsys, ["explain", "--gpu", "H100", "--", "vllm", "serve", *words, "--max-model-len", "4096"])


# --- start-up logs -------------------------------------------------------------------------------------------------------

L4_LOG = DATA / "vllm_logs" / "v0.11.0_l4_llama3.1-8b_len32000_gmu0.92_mns128.log"


@pytest.mark.parametrize(("logged", "edited", "said"), [
    # read with the comma dropped: 149,889 GiB of model loading (-99.99%), 475 GiB of KV cache, exit 0
    ("Model loading took 14.9889 GiB", "Model loading took 14,9889 GiB", "model loading (GiB) '14,9889' has a comma"),
    ("Available KV cache memory: 4.75 GiB", "Available KV cache memory: 4,75 GiB", "'4,75' has a comma"),
    # digits grouped in twos (en-IN): read as 38,944 by chance of the digits, as 3,894 here
    ("GPU KV cache size: 38,944 tokens", "GPU KV cache size: 3,89,4 tokens", "GPU KV cache size (tokens) '3,89,4'"),
])
def test_a_number_with_a_comma_no_engine_prints_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                           logged: str, edited: str, said: str) -> None:
    log = tmp_path / "run.log"
    text = L4_LOG.read_text(encoding="utf-8")
    assert logged in text
    log.write_text(text.replace(logged, edited), encoding="utf-8")
    _refused(capsys, ["check", str(log), "--gpu", "L4"], said, "no thousands separator")


# --- simulate: a workload or trace over the token cap is refused before its token ids are made --------------------------

def test_a_synthetic_workload_over_the_cap_is_refused_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    """2,000 requests of 200,000 tokens: 45 s and 1.6 GB of token ids were made before the refusal."""
    import time

    began = time.perf_counter()
    _refused(capsys, ["simulate", "llama-3.1-8b", "--gpu", "H100", "--synthetic",
                      "requests=2000,prompt=100000,output=100000"], "more than 200,000,000 tokens in all")
    assert time.perf_counter() - began < 5


def test_a_trace_over_the_cap_is_refused_at_once(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """30 lines of 'prompt_tokens': 9,000,000: 50 s and 1.6 GB before the refusal."""
    import time

    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(f'{{"arrival": {i}, "prompt_tokens": 9000000, "output_tokens": 1000000}}\n'
                             for i in range(30)), encoding="utf-8")
    began = time.perf_counter()
    _refused(capsys, ["simulate", "llama-3.1-8b", "--gpu", "H100", "--trace", str(trace)], "200,000,000 tokens")
    assert time.perf_counter() - began < 5


def test_a_multi_turn_workload_is_drawn_as_before(capsys: pytest.CaptureFixture[str]) -> None:
    """The lengths are drawn first, then the ids made: the same seeded requests as one pass made them."""
    from kvbudget.sim.workload import generate, parse_workload

    reqs = generate(parse_workload("requests=7,prefixes=2x16@1,turns=3,seed=5,prompt=10,output=4"))
    assert [r.id for r in reqs] == ["c0t0", "c0t1", "c0t2", "c1t0", "c1t1", "c1t2", "c2t0"]
    assert [r.after for r in reqs[:3]] == [None, "c0t0", "c0t1"]
    assert [r.prompt_len for r in reqs[:3]] == [26, 40, 54] and reqs[3].prompt_len == 26
    assert list(reqs[1].prompt[:30]) == list(reqs[0].prompt) + list(reqs[0].output)


def test_a_synthetic_rate_that_puts_arrivals_beyond_float_precision_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """rate=1e-300: arrivals near 1e300 s, where each step's milliseconds vanish in the sum: every TTFT, TPOT and
    end-to-end latency printed 0 ms, exit 0."""
    _refused(capsys, ["simulate", "llama-3.1-8b", "--gpu", "H100", "--synthetic", "rate=1e-300,requests=10"],
             "bad value for rate: '1e-300' (expected requests per second, 1e-6 to 1e6)")
    out, _ = _runs(capsys, ["simulate", "llama-3.1-8b", "--gpu", "H100", "--no-progress", "--synthetic",
                            "rate=1e-6,requests=10"])
    assert "0 / 0 / 0 ms      0 / 0 / 0 ms" not in out  # TTFT and TPOT


# --- fit's own engine options, held to what the engine's command line takes ----------------------------------------------

def test_fit_ngl_below_minus_one_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """fit --ngl -5 was planned as every layer on the GPU (any negative clamped to -1); older llama.cpp builds put
    none there for it (llama-model.cpp: i_gpu_start = max(n_layer + 1 - ngl, 0), act_gpu_layers = min(ngl,
    n_layer + 1)), and explain's reader of the same -ngl refused it."""
    import kvbudget
    from kvbudget.units import InputError

    _refused(capsys, ["fit", "llama-3.1-8b", "--gpu", "H100", "--engine", "llama.cpp", "--ngl", "-5"],
             "--ngl -5: llama.cpp builds differ on a layer count below -1", "give -1 for every layer, or 0 for none")
    with pytest.raises(InputError, match="--ngl -5"):
        kvbudget.fit("llama-3.1-8b", gpu="H100", engine="llama.cpp", options={"ngl": -5})
    _runs(capsys, ["fit", "llama-3.1-8b", "--gpu", "H100", "--engine", "llama.cpp", "--ngl", "-1"])


def test_fit_block_size_the_release_does_not_offer_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """explain held --block-size to the release's choices (round 15); fit --block-size 7 --vllm-version 0.6.3 was
    planned with blocks of 7 tokens, exit 0."""
    _refused(capsys, ["fit", "llama-3.1-8b", "--gpu", "H100", "--vllm-version", "0.6.3", "--block-size", "7"],
             "invalid choice: 7", "takes 8, 16, 32")
    out, _ = _runs(capsys, ["fit", "llama-3.1-8b", "--gpu", "H100", "--vllm-version", "0.6.3", "--block-size", "32"])
    assert "block size 32," in out


# --- --profile files ------------------------------------------------------------------------------------------------------

def _profile(tmp_path: Path, **fields: object) -> str:
    doc = {"kvbudget_profile": 1, "engine": "vllm", "terms": [{"gpu": "H100-SXM-80GB", "release": "current", "gpus": 1,
                                                                "bytes": 1 << 28, "logs": 1, "spread": 0}], "logs": []}
    path = tmp_path / "profile.json"
    path.write_text(json.dumps({**doc, **fields}), encoding="utf-8")
    return str(path)


def test_a_profile_with_no_terms_or_a_newer_format_is_named(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """"terms": [] was read as given and nothing said (calibrate never writes one: it refuses logs it cannot read);
    format 2 was 'not a kvbudget profile', its own key saying it is one."""
    _refused(capsys, ["fit", "llama-3.1-8b", "--gpu", "H100", "--profile", _profile(tmp_path, terms=[])],
             "the profile holds no terms, so it calibrates no run")
    _refused(capsys, ["fit", "llama-3.1-8b", "--gpu", "H100", "--profile", _profile(tmp_path, kvbudget_profile=2)],
             "a kvbudget profile of format 2, newer than the format 1 this kvbudget reads")
    _runs(capsys, ["fit", "llama-3.1-8b", "--gpu", "H100", "--profile", _profile(tmp_path)])


def test_calibrate_out_dash_is_no_file_named_dash(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """calibrate LOG --out - wrote a file named '-' in the working folder and said 'use it with --profile -' (where
    '-' beside a log means standard input)."""
    monkeypatch.chdir(tmp_path)
    log = str(DATA / "vllm_logs" / "v0.29.0_rtx5090_qwen2.5-7b_bf16_len8192_gmu0.9.log")
    _refused(capsys, ["calibrate", log, "--out", "-"], "--out '-': the answer already goes to standard output")
    assert not (tmp_path / "-").exists()


# --- a container's GPUs given as devices ------------------------------------------------------------------------------

@pytest.mark.parametrize("command", [
    f"podman run --device nvidia.com/gpu=0 vllm/vllm-openai:v0.10.1 --model {_LLAMA} -tp 2",
    f"docker run --device=/dev/nvidia0 --device /dev/nvidiactl vllm/vllm-openai:v0.10.1 --model {_LLAMA} -tp 2",
])
def test_a_container_given_fewer_gpu_devices_than_the_layout_is_refused(capsys: pytest.CaptureFixture[str],
                                                                        command: str) -> None:
    """podman's CDI device (and a device node) shows the container one GPU: a TP 2 server stops at start-up; it was
    planned on 2 GPUs, exit 0 (docker run --gpus 1 was already held to it)."""
    _refused(capsys, ["explain", "--gpu", "H100", "--", command], "its --device shows 1", "stops at start-up")


def test_a_container_given_enough_gpu_devices_is_planned(capsys: pytest.CaptureFixture[str]) -> None:
    for devices in ("--device nvidia.com/gpu=0 --device nvidia.com/gpu=1", "--device nvidia.com/gpu=all",
                    "--device /dev/fuse"):
        _plan(capsys, f"podman run {devices} vllm/vllm-openai:v0.10.1 --model {_LLAMA} -tp 2 --max-model-len 8192")


# --- the values file of vLLM's production-stack Helm chart ---------------------------------------------------------------

_VALUES = """servingEngineSpec:
  modelSpec:
  - name: "llama3"
    repository: "vllm/vllm-openai"
    tag: "v0.10.1"
    modelURL: "meta-llama/Llama-3.1-8B-Instruct"
    replicaCount: 1
    requestCPU: 10
    requestMemory: "16Gi"
    requestGPU: GPUS
    vllmConfig:
      enablePrefixCaching: true
      maxModelLen: 8192
      tensorParallelSize: 2
      gpuMemoryUtilization: 0.85
      extraArgs: ["--max-num-seqs", "64"]
routerSpec:
  repository: "lmcache/lmstack-router"
"""


def test_helm_values_are_read_as_the_container_the_chart_makes(capsys: pytest.CaptureFixture[str]) -> None:
    """A production-stack values file was refused ('the words look like a YAML or JSON list'); the chart's
    deployment-vllm-multi.yaml runs `vllm serve MODELURL` with the vllmConfig flags in REPOSITORY:TAG."""
    doc = _plan(capsys, _VALUES.replace("GPUS", "2"))
    same = _plan(capsys, "docker", "run", "--gpus", "2", "--entrypoint", "vllm", "vllm/vllm-openai:v0.10.1", "serve",
                 _LLAMA, "--enable-prefix-caching", "--max-model-len", "8192", "--tensor-parallel-size", "2",
                 "--gpu_memory_utilization", "0.85", "--max-num-seqs", "64")
    assert doc["kv_cache_tokens"] == same["kv_cache_tokens"] and doc["tp"] == 2 and doc["max_num_seqs"] == 64
    assert doc["engine"]["version_line"] == "v1"  # type: ignore[index]
    _refused(capsys, ["explain", "--gpu", "H100", "--", _VALUES.replace("GPUS", "1")],
             "needs 2 GPUs (TP x PP x DP) but the Helm values' requestGPU gives it 1")


def test_helm_values_without_a_model_or_a_helm_command_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    _refused(capsys, ["explain", "--gpu", "H100", "--", _VALUES.replace('    modelURL: "meta-llama/Llama-3.1-8B-Instruct"\n',
                                                                        "").replace("GPUS", "2")],
             "modelSpec has no modelURL")
    _refused(capsys, ["explain", "--gpu", "H100", "--", "servingEngineSpec:\n  enableEngine: true\n"],
             "no servingEngineSpec.modelSpec list")
    _refused(capsys, ["explain", "--gpu", "H100", "--", "helm", "install", "vllm", "vllm/vllm-stack", "-f", "values.yaml"],
             "a helm command", "paste the values file")


# --- commands pasted from Windows shells or a word processor -------------------------------------------------------------

@pytest.mark.parametrize("mark", ["^", "`"])
def test_a_command_continued_as_cmd_or_powershell_continue_it_is_read(capsys: pytest.CaptureFixture[str],
                                                                      mark: str) -> None:
    """docker run ... ^ (cmd.exe) or ` (PowerShell) at each line's end: refused as 'unrecognized arguments: ^'
    with a wrong diagnosis (a flag's -- missing)."""
    lines = ["docker run --gpus all", "vllm/vllm-openai:v0.10.1", f"--model {_LLAMA} --max-model-len 8192",
             "--tensor-parallel-size 2"]
    doc = _plan(capsys, f" {mark}\n  ".join(lines))
    same = _plan(capsys, " \\\n  ".join(lines))
    assert doc["kv_cache_tokens"] == same["kv_cache_tokens"] and doc["tp"] == 2


def test_a_word_in_typographic_quotes_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    """vllm serve “meta-llama/...”: 'unknown model' (the shell passes the quotes on as letters)."""
    for words in ([f"vllm serve “{_LLAMA}” --max-model-len 8192"], ["vllm", "serve", f"‘{_LLAMA}’"]):
        _refused(capsys, ["explain", "--gpu", "H100", "--", *words], "a typographic quote", "type ' or \"")
    _plan(capsys, f"vllm serve {_LLAMA} --max-model-len 8192 --served-model-name 'Meta’s llama'")


# --- layer counts no model has: minutes of planning -----------------------------------------------------------------------

def _llama_config(**fields: object) -> str:
    return json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
                       "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
                       "num_hidden_layers": 32, "vocab_size": 128256, "max_position_embeddings": 8192,
                       "torch_dtype": "bfloat16", **fields})


def test_a_vision_encoder_of_a_million_layers_is_refused_at_once(capsys: pytest.CaptureFixture[str],
                                                                  tmp_path: Path) -> None:
    """vision_config.depth had no limit: 1,000,000 took 140 s to plan one `vllm serve`, exit 0."""
    import time

    from kvbudget.model.catalog import find

    entry = find("qwen2.5-vl-7b")
    assert entry is not None
    config = json.loads(json.dumps(entry.config))
    config["vision_config"]["depth"] = 10**6
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    began = time.perf_counter()
    _refused(capsys, ["explain", "--gpu", "H100", "--", "vllm", "serve", str(tmp_path), "--max-model-len", "8192"],
             "integer field 'depth' is 1000000: it must be at most 2,048")
    assert time.perf_counter() - began < 5


def test_a_text_model_of_ten_thousand_layers_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """10,000 layers was the cap: `plan` on such a config took 14 s."""
    (tmp_path / "config.json").write_text(_llama_config(num_hidden_layers=10_000), encoding="utf-8")
    _refused(capsys, ["plan", str(tmp_path), "--concurrency", "4", "--context", "8192"],
             "integer field 'num_hidden_layers' is 10000: it must be at most 2,048")
    (tmp_path / "config.json").write_text(_llama_config(num_hidden_layers=126), encoding="utf-8")
    _runs(capsys, ["fit", str(tmp_path), "--gpu", "H100", "--context", "8192"])


@pytest.mark.parametrize(("version", "words", "first"), [
    # 0.10's parser has no --kv-cache-memory-bytes: it was planned with a 4 GiB KV cache, exit 0
    ("0.10.0", ["--kv-cache-memory-bytes", "4G"], "0.11.0"),
    ("0.7.3", ["--enable-expert-parallel"], "0.8.0"),
    ("0.8.2", ["-dp", "2"], "0.8.3"),
    ("0.9.2", ["--async-scheduling"], "0.10.0"),
])
def test_a_memory_flag_before_its_release_is_refused(capsys: pytest.CaptureFixture[str], version: str, words: list[str],
                                                     first: str) -> None:
    _refused(capsys, ["explain", "--gpu", "H100", "--vllm-version", version, "--", "vllm", "serve", "llama-3.1-8b",
                      "--max-model-len", "4096", *words], "unrecognized arguments", f"it came with {first}")
    _runs(capsys, ["explain", "--gpu", "H100", "--vllm-version", first, "--", "vllm", "serve", "llama-3.1-8b",
                   "--max-model-len", "4096", *words])


@pytest.mark.parametrize(("window", "said"), [("0s", "is zero"), ("0m0s", "is zero"), ("99999999y", "over ten years")])
def test_a_rate_window_of_no_length_is_refused_before_asking(capsys: pytest.CaptureFixture[str], window: str,
                                                            said: str) -> None:
    """--window 0s was sent to Prometheus (a zero-length range it refuses, or a connection error named instead)."""
    _refused(capsys, ["diagnose", "--prometheus", "http://127.0.0.1:1", "--window", window], f"rate window {window!r}",
             said)


def test_a_split_mode_llama_server_does_not_take_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """-sm banana was passed over with the flags that do not change memory; common/arg.cpp throws 'invalid value'
    for any word but none, layer, row (and, in newer builds, tensor)."""
    base = ["explain", "--gpu", "H100", "--", "llama-server", "-hf", "bartowski/Llama-3.2-1B-Instruct-GGUF", "-c", "4096"]
    _refused(capsys, [*base, "-sm", "banana"], "-sm banana: llama-server stops on it", "give none, layer or row")
    _refused(capsys, [*base, "--split-mode", "ROW"], "--split-mode ROW")
    _runs(capsys, [*base, "-sm", "row"])


# --- simulate --tokenizer ------------------------------------------------------------------------------------------------

def test_a_tokenizer_beside_a_synthetic_workload_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """--synthetic ... --tokenizer FILE read the tokenizer and passed it over (the workload's prompts are counts)."""
    tok = tmp_path / "tokenizer.json"
    tok.write_text('{"version": "1.0", "model": {"type": "WordLevel", "vocab": {"hi": 0, "[UNK]": 1}, '
                   '"unk_token": "[UNK]"}}', encoding="utf-8")
    for command in ("simulate", "size"):
        _refused(capsys, [command, "llama-3.1-8b", "--gpu", "H100", "--no-progress", "--synthetic", "requests=10",
                          "--tokenizer", str(tok)], "a synthetic workload has none: drop it, or give --trace FILE")


def test_a_tokenizer_that_gives_no_token_for_a_text_is_named(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A tokenizer.json with an empty vocabulary: 'the prompt is empty', of a line whose text is there."""
    pytest.importorskip("tokenizers")
    tok = tmp_path / "tokenizer.json"
    tok.write_text('{"version": "1.0", "model": {"type": "BPE", "vocab": {}, "merges": []}}', encoding="utf-8")
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"arrival": 0, "text": "hello world", "output_tokens": 5}\n', encoding="utf-8")
    _refused(capsys, ["simulate", "llama-3.1-8b", "--gpu", "H100", "--trace", str(trace), "--tokenizer", str(tok)],
             "--tokenizer gives no token for its 'text' (11 characters)")


def test_check_reads_a_kubectl_run_after_dashes(capsys: pytest.CaptureFixture[str]) -> None:
    """check LOG -- kubectl run ... -- ARGS: 'unrecognized arguments: --' (a wrong reason); now its container's
    command, held to the log's own settings as any command after -- is."""
    log = str(DATA / "vllm_logs" / "v0.11.0_l4_llama3.1-8b_len32000_gmu0.92_mns128.log")
    run = ["kubectl", "run", "x", "--image=vllm/vllm-openai:v0.11.0", "--", "--model",
           "meta-llama/Meta-Llama-3.1-8B-Instruct"]
    out, _ = _runs(capsys, ["check", log, "--gpu", "L4", "--", *run, "--max-model-len", "32000",
                            "--gpu-memory-utilization", "0.92", "--max-num-seqs", "128"])
    assert "max_model_len 32,000" in out
    _refused(capsys, ["check", log, "--gpu", "L4", "--", *run, "--max-model-len", "8192"],
             "set max_model_len to 8192, but the log prints max_model_len 32000")
