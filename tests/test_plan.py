"""`kvbudget plan`: the search over deployments, its ranking and exclusions, and the launch files it
emits (a command and a Kubernetes manifest that `explain` reads back to the same plan)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import kvbudget
from kvbudget._record import replace
from kvbudget.cli import main
from kvbudget.engines import vllm
from kvbudget.engines.vllm.command import parse_vllm_command
from kvbudget.engines.vllm.launch import vllm_argv
from kvbudget.hardware import find_gpu, gpus
from kvbudget.plan import launch
from kvbudget.plan.prices import read_prices
from kvbudget.plan.search import layouts, search
from kvbudget.units import GiB, InputError

LLAMA70 = "meta-llama/Llama-3.1-70B-Instruct"


def test_layouts_keep_tp_in_a_node_and_pp_across_nodes() -> None:
    spec = kvbudget.load_model(LLAMA70)
    assert layouts(spec, 64, 8) == [(1, 1), (2, 1), (4, 1), (8, 1), (8, 2), (8, 4), (8, 8)]
    assert layouts(spec, 6, 8) == [(1, 1), (2, 1), (4, 1)]


def test_capacity_is_exact_at_block_granularity() -> None:
    spec = kvbudget.load_model(LLAMA70)
    h100 = find_gpu("H100")
    rows = search(spec, 64, 8192, [h100])
    best = rows[0]
    assert best.serves and best.gpu == "H100-SXM-80GB"
    # the same replica planned directly: one full-attention group, ceil(8192 / 16) = 512 blocks a request
    p = vllm.plan(spec, h100, best.settings)
    assert p.blocks_per_request == 512
    assert best.per_replica == min(p.num_gpu_blocks // 512, p.max_num_seqs)
    assert best.per_replica * 512 <= p.num_gpu_blocks < (best.per_replica + 1) * 512
    assert best.max_concurrency == best.per_replica * best.replicas >= 64
    assert best.price_per_hour == pytest.approx(3.78 * best.num_gpus)  # the catalog's H100 list price
    # every serving row is ranked by price, then headroom
    serving = [d for d in rows if d.serves]
    assert [d.price_per_hour for d in serving] == sorted(d.price_per_hour or 0 for d in serving)


def test_exclusions_say_why() -> None:
    spec = kvbudget.load_model(LLAMA70)
    rows = {(d.tp, d.pp, d.weights_dtype, d.kv_dtype): d for d in search(spec, 64, 8192, [find_gpu("L4")], max_gpus=8)}
    one = rows[(1, 1, "auto", "auto")]
    assert not one.serves and one.reason.startswith("weights (131.42 GiB per GPU) leave no room")
    # the L4's 22 GiB x 8 cannot hold 64 bf16 sequences of 8K: more replicas than --max-gpus allows
    eight = rows[(8, 1, "auto", "auto")]
    assert not eight.serves and "more than --max-gpus 8" in eight.reason
    # 24 attention heads do not split 16 ways
    small = kvbudget.load_model("meta-llama/Llama-3.2-3B-Instruct")
    tp16 = [d for d in search(small, 8, 4096, [find_gpu("L4")], max_gpus=16, gpus_per_node=16) if d.tp == 16]
    assert tp16 and all(not d.serves and "does not divide the 24 attention heads" in d.reason for d in tp16)


def test_launch_files_round_trip_through_explain() -> None:
    spec = kvbudget.load_model(LLAMA70)
    for d in [d for d in search(spec, 200, 8192, [find_gpu("H100"), find_gpu("L40S")]) if d.serves][:6]:
        argv = vllm_argv(spec.name, d.settings)
        docs = list(yaml.safe_load_all(launch.kubernetes(spec.name, argv, d.tp * d.pp, d.replicas)))
        deployment, service = docs
        assert (deployment["kind"], service["kind"]) == ("Deployment", "Service")
        assert deployment["spec"]["replicas"] == d.replicas
        pod = deployment["spec"]["template"]["spec"]
        container = pod["containers"][0]
        assert container["resources"]["limits"]["nvidia.com/gpu"] == d.tp * d.pp
        assert pod["volumes"][0]["emptyDir"]["medium"] == "Memory"  # /dev/shm for the TP workers
        assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
        # the manifest's command, read back by explain's parser, gives the same vLLM plan
        back = parse_vllm_command(container["command"] + container["args"])
        assert back.model == spec.name
        gpu = find_gpu(d.gpu)
        assert vllm.plan(spec, gpu, back.settings) == vllm.plan(spec, gpu, d.settings)


def test_prices_file_overrides_the_catalog(tmp_path: Path) -> None:
    spec = kvbudget.load_model(LLAMA70)
    choice = [find_gpu("H100"), find_gpu("H200")]
    base = next(d for d in search(spec, 64, 8192, choice) if d.serves)
    cheap = tmp_path / "p.csv"
    cheap.write_text("gpu,price\nH100,0.50\n")
    assert read_prices(str(cheap)) == {"H100-SXM-80GB": 0.5}
    first = next(d for d in search(spec, 64, 8192, choice, prices=read_prices(str(cheap))) if d.serves)
    # list prices: 2 H200 at $5.58 beat 4 H100 at $3.78; at $0.50 an H100 the H100s win
    assert (base.gpu, base.price_per_hour, first.gpu) == ("H200-SXM-141GB", 11.16, "H100-SXM-80GB")
    (tmp_path / "bad.json").write_text('{"H100": "cheap"}')
    with pytest.raises(InputError, match="not a number"):
        read_prices(str(tmp_path / "bad.json"))
    (tmp_path / "neg.json").write_text('{"H100": -1}')
    with pytest.raises(InputError, match="between 0 and 1000"):
        read_prices(str(tmp_path / "neg.json"))


def test_prices_file_that_prices_a_gpu_twice_or_none(tmp_path: Path) -> None:
    """A JSON key written twice was read as its last value (orjson, like Python's json, keeps the last: $0.10 for
    an H100 also priced $2.50, exit 0); the CSV form already refused it. A file that prices no GPU planned with
    the catalog's list prices, as if --prices were not given."""
    (tmp_path / "twice.json").write_text('{"H100": 2.5, "L4": 0.7, "H100": 0.1}')
    with pytest.raises(InputError, match="'H100' is priced twice"):
        read_prices(str(tmp_path / "twice.json"))
    for name, text in (("empty.json", "{ }"), ("empty.csv", "gpu,price\n\n# later\n")):
        (tmp_path / name).write_text(text)
        with pytest.raises(InputError, match="prices no GPU"):
            read_prices(str(tmp_path / name))
    (tmp_path / "two.json").write_text('{"H100": 2.5, "L4": 0.7}')
    assert read_prices(str(tmp_path / "two.json")) == {"H100-SXM-80GB": 2.5, "L4-24GB": 0.7}


def test_cli_plan(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["plan", LLAMA70, "--concurrency", "64", "--context", "8192", "--gpus", "H100,A100-80GB,L40S"]) == 0
    out = capsys.readouterr().out
    assert "Best:" in out and "vllm serve meta-llama/Llama-3.1-70B-Instruct" in out and "Excluded, by reason:" in out
    assert main(["plan", LLAMA70, "--concurrency", "64", "--context", "8192", "--gpus", "H100", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    row = doc["plans"][0]
    keys = {"gpu", "num_gpus", "tp", "pp", "replicas", "weights_dtype", "kv_dtype", "max_concurrency", "price_per_hour",
            "starts", "reason", "launch"}
    assert keys <= row.keys() and row["launch"]["command"].startswith("vllm serve")
    assert doc["searched"] == len(doc["plans"]) == 7 * 2 * 2  # TP 1, 2, 4, 8 and TP8 x PP 2, 4, 8 x weights x KV
    (tmp_path / "p.txt").write_text("H100 3\n")
    assert main(["plan", LLAMA70, "--concurrency", "8", "--context", "8192", "--prices", str(tmp_path / "p.txt")]) == 2
    assert "expected 'gpu,price'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:  # argparse's one line and exit 2
        main(["plan", LLAMA70, "--concurrency", "0", "--context", "8192"])
    assert exc.value.code == 2
    assert len(gpus()) >= 30


def test_levers_and_the_fp8_back_of_envelope(capsys: pytest.CaptureFixture[str]) -> None:
    from kvbudget.engines.vllm.levers import levers

    # a common back-of-envelope: Llama-2-70B at --tensor-parallel-size 2, 8K requests: "Quantizing the weights to
    # FP8 frees 35GB of VRAM for a 70B model. That 35GB can support an additional 14 concurrent 8K sequences."
    spec = kvbudget.load_model("meta-llama/Llama-2-70b-hf")
    h100 = find_gpu("H100")
    base = vllm.VllmSettings(max_model_len=8192, tensor_parallel_size=2, allow_long_max_model_len=True)
    baseline, rows = levers(spec, h100, base)
    by = {r.name: r for r in rows}
    fp8 = by["FP8 weights"]
    # vLLM's KV budget moves one for one with the weights: every linear weight to 1 byte plus one fp32 scale per
    # tensor, per GPU at TP=2 (test_seeds.py's hand count): 34.2 GB, the estimate's "35GB" (70e9 x 1 byte / 2 GPUs)
    # (and the 0.5 MiB of allocator segments the bf16 rotary cache's float32 temporaries leave beside the weights,
    # which this release counts: engines/vllm/allocations.py, not modelled for a quantized format)
    assert fp8.freed_bytes - 507_904 == 68_451_041_280 // 2 - 80 * 7 * 4 == baseline.weights_bytes - fp8.weights_bytes
    assert round(fp8.freed_bytes / 1e9, 1) == 34.2
    # the estimate's 14 is 35 GiB over a whole 8K sequence's 2.5 GiB; at TP=2 each GPU holds half of every sequence,
    # so vLLM's block arithmetic fits 25 more (5 -> 30): 2 x 34.2 GB / 2.68 GB per sequence, less block rounding
    # (26, 5 -> 31, before the profiling run's floor from vLLM 0.33's source: the V2 runner's warm-up sampler pass
    # over 1,024 dummy requests holds 1.71 GiB of fp32 and bf16 logits, where the fit charged less)
    per_sequence = kvbudget.kv(spec, context=8192).bytes_per_sequence
    assert (35 * GiB) // per_sequence == 14
    assert (baseline.concurrency, fp8.concurrency, fp8.added) == (5, 30, 25)
    p0, p1 = vllm.plan(spec, h100, base), vllm.plan(spec, h100, vllm.VllmSettings(
        max_model_len=8192, tensor_parallel_size=2, allow_long_max_model_len=True, quantization="fp8"))
    assert (baseline.concurrency, fp8.concurrency) == (p0.num_gpu_blocks // 512, p1.num_gpu_blocks // 512)
    # an FP8 KV cache halves the bytes of a block: twice the requests in the same memory (5 -> 11 at block rounding)
    assert by["FP8 KV cache"].freed_bytes == 0 and by["FP8 KV cache"].concurrency == p0.num_gpu_blocks * 2 // 512
    assert by["one more replica"].concurrency == 2 * baseline.concurrency and by["one more replica"].gpus == 4
    # the output gives the back-of-envelope arithmetic -- the 70B of the name x 1 byte saved / 2 GPUs = 35.0 GB per GPU,
    # divided by the 2.5 (GiB) of one whole 8K sequence = +14 -- and beside it the real figures: 31.88 GiB freed per
    # GPU // 2.5 GiB = 12 whole sequences, and vLLM's pool (each GPU holds half of every sequence) +26
    assert main(["levers", "meta-llama/Llama-2-70b-hf", "--gpu", "H100", "--tp", "2", "--context", "8192", "--wide"]) == 0
    text = capsys.readouterr().out
    assert ("back-of-envelope (nominal weight bytes saved / KV per sequence): 70B params x 1 byte saved / 2 GPUs = "
            "35.0 GB per GPU; 35.0 / 2.5 GiB per 8,192-token sequence = +14 requests (GB over GiB, as such estimates "
            "mix them: +13 in one unit)") in text
    # (31.88 GiB with the bf16 run's 0.5 MiB of allocator segments: 31.87 before)
    assert ("real: FP8 weights free 31.88 GiB (34.2 GB) on each GPU; counted against a whole sequence that is +12, "
            "but each GPU holds 1/2 of every sequence: vLLM fits +25") in text  # +26 before the 0.33 source floor
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in text  # Llama-2's 4,096-token limit, as vLLM enforces it
    assert main(["levers", "meta-llama/Llama-2-70b-hf", "--gpu", "H100", "--tp", "2", "--context", "8192", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["levers"][0] == {"lever": "FP8 weights", "flag": "--quantization fp8", "gpus": 2,
                                "kv_cache_bytes": fp8.kv_cache_bytes, "freed_bytes": fp8.freed_bytes,
                                "weights_bytes": fp8.weights_bytes, "max_concurrency": 30, "added_concurrency": 25,
                                "context": 8192, "starts": True, "note": None}
    assert doc["rule_of_thumb"] == {"lever": "FP8 weights", "nominal_params": 70_000_000_000, "bytes_saved_per_param": 1,
                                    "gpus": 2, "freed_bytes": 35_000_000_000, "sequence_bytes": 80 * 8192 * 4096,
                                    "added_concurrency": 14, "added_concurrency_one_unit": 13}


def test_fit_json_carries_launch_files(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fit", LLAMA70, "--gpu", "H100", "--num-gpus", "4", "--context", "16384", "--kv-dtype", "fp8",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    cmd = doc["launch"]["command"]
    assert cmd == ("vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 4 --max-model-len 16384 "
                   "--kv-cache-dtype fp8")
    manifest = next(iter(yaml.safe_load_all(doc["launch"]["kubernetes"])))
    assert manifest["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 4
    back = parse_vllm_command(cmd)
    assert vllm.plan(kvbudget.load_model(LLAMA70), find_gpu("H100"), back.settings).num_gpu_blocks == doc["num_gpu_blocks"]


def test_inverse_questions_are_exact_at_block_granularity() -> None:
    spec = kvbudget.load_model("meta-llama/Llama-3.1-8B-Instruct")
    p = vllm.plan(spec, find_gpu("H100"), vllm.VllmSettings(max_model_len=8192))
    # one full-attention group of 16-token blocks: a request of 8192 tokens takes 512 of them
    assert kvbudget.max_concurrency(spec, context=8192, gpu="H100") == min(p.num_gpu_blocks // 512, p.max_num_seqs)
    # the longest context for 64 requests: 64 x ceil(L / 16) blocks must fit, so L = (blocks // 64) x 16
    longest = kvbudget.max_context(spec, concurrency=64, gpu="H100")
    assert longest == p.num_gpu_blocks // 64 * 16
    assert 64 * -(-longest // 16) <= p.num_gpu_blocks < 64 * -(-(longest + 16) // 16)
    # one request: the model's own limit caps it
    assert kvbudget.max_context(spec, concurrency=1, gpu="H100") == spec.max_context
    with pytest.raises(InputError):
        kvbudget.max_context(spec, concurrency=0, gpu="H100")
    # fewest H100s for 64 x 8K of Llama-3.1-70B in bf16: what the full search finds, fewest GPUs first
    d = kvbudget.fewest_gpus(LLAMA70, concurrency=64, context=8192, gpu="H100")
    assert d is not None and d.serves and d.max_concurrency >= 64
    every = [r for r in search(kvbudget.load_model(LLAMA70), 64, 8192, [find_gpu("H100")], weights=("auto",),
                               kv=("auto",)) if r.serves]
    assert d.num_gpus == min(r.num_gpus for r in every)
    assert kvbudget.fewest_gpus(LLAMA70, concurrency=10_000, context=131072, gpu="L4", max_gpus=8) is None


def test_sglang_plans_round_trip() -> None:
    from kvbudget.engines import sglang
    from kvbudget.engines.cmdscan import parse_other_command

    spec = kvbudget.load_model(LLAMA70)
    a100 = find_gpu("A100-80GB")
    rows = [d for d in search(spec, 64, 8192, [a100], engine="sglang") if d.serves]
    best = rows[0]
    assert best.engine == "sglang"
    p = sglang.plan(spec, a100, best.settings)  # type: ignore[arg-type]
    # SGLang admits requests while their tokens fit in the pool: whole requests of 8192 tokens
    assert best.per_replica == min(p.max_total_num_tokens // 8192, p.max_running_requests)
    argv = launch.argv_for(spec.name, best.settings)
    assert argv[:5] == ["python", "-m", "sglang.launch_server", "--model-path", spec.name]
    deployment = next(iter(yaml.safe_load_all(launch.kubernetes(spec.name, argv, best.tp, best.replicas))))
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"].startswith("lmsysorg/sglang") and container["ports"][0]["containerPort"] == 30000
    back = parse_other_command(container["command"] + container["args"])
    assert back.sglang is not None and sglang.plan(spec, a100, back.sglang) == p


def test_fit_shows_what_each_lever_buys(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fit", "llama-3.1-8b", "--gpu", "H100", "--context", "8192", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    by = {r["lever"]: r for r in doc["levers"]}
    # an FP8 KV cache halves every block: the same memory holds twice the 8K requests
    assert by["FP8 KV cache"]["max_concurrency"] == 2 * doc["num_gpu_blocks"] // 512
    assert by["FP8 weights"]["freed_bytes"] > 6 * GiB and by["FP8 weights"]["added_concurrency"] > 0
    assert main(["fit", "llama-3.1-8b", "--gpu", "H100", "--context", "8192"]) == 0
    assert "What each lever buys:" in capsys.readouterr().out


def test_a_layout_wider_than_a_node_gets_a_leader_worker_set() -> None:
    spec = kvbudget.load_model("deepseek-ai/DeepSeek-V3")
    h100 = find_gpu("H100")
    s = vllm.VllmSettings(max_model_len=8192, tensor_parallel_size=8, pipeline_parallel_size=2)
    argv = vllm_argv(spec.name, s)
    lws, service = yaml.safe_load_all(launch.manifest(spec.name, argv, 8, 2, 3, gpus_per_node=8))
    assert (lws["kind"], lws["spec"]["replicas"], lws["spec"]["leaderWorkerTemplate"]["size"]) == ("LeaderWorkerSet", 3, 2)
    template = lws["spec"]["leaderWorkerTemplate"]
    for key in ("leaderTemplate", "workerTemplate"):
        assert template[key]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 8
    assert service["spec"]["selector"]["role"] == "leader"
    # the leader's vllm serve, read back, is the same plan (the Ray executor flag changes no memory)
    shell = template["leaderTemplate"]["spec"]["containers"][0]["args"][0]
    ray, wait, serve = shell.split(" && ")
    assert ray.startswith("ray start --head") and "--distributed-executor-backend ray" in serve
    assert wait.startswith("until ") and "$LWS_GROUP_SIZE" in wait  # the leader waits for every worker
    back = parse_vllm_command(serve)
    assert vllm.plan(spec, h100, back.settings) == vllm.plan(spec, h100, s)
    # within a node it stays a Deployment
    assert next(iter(yaml.safe_load_all(launch.manifest(spec.name, argv, 8, 1, 1))))["kind"] == "Deployment"
    # nodes of 6 GPUs: TP4 x PP2 is two pods of 4 GPUs (a TP group never spans nodes), not 2 x 6
    lws6 = next(iter(yaml.safe_load_all(launch.manifest(spec.name, argv, 4, 2, 1, gpus_per_node=6))))
    size = lws6["spec"]["leaderWorkerTemplate"]["size"]
    gpus = lws6["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["resources"]["limits"]
    assert (size, gpus["nvidia.com/gpu"]) == (2, 4)


@pytest.mark.parametrize(("extra", "message"), [
    (["--weights-dtype", "bogus"], "unknown weights dtype 'bogus'"),
    (["--kv-dtype", "fp9"], "--kv-dtype fp9: not a KV-cache dtype"),
    (["--gpus", "H1000"], "unknown GPU 'H1000'"),
])
def test_plan_bad_input_is_one_line(extra: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "llama-3.1-8b", "--concurrency", "4", "--context", "4096", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_plan_context_beyond_the_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "llama-3.1-8b", "--concurrency", "4", "--context", "200000", "--gpus", "H100"]) == 2
    assert "exceeds meta-llama/Llama-3.1-8B-Instruct's maximum context of 131,072 tokens" in capsys.readouterr().err


def test_trtllm_plans_round_trip() -> None:
    from kvbudget.engines import trtllm
    from kvbudget.engines.cmdscan import parse_other_command

    spec = kvbudget.load_model(LLAMA70)
    a100 = find_gpu("A100-80GB")
    rows = search(spec, 64, 8192, [a100], weights=("auto", "fp8"), engine="trtllm")
    quantized = [d for d in rows if d.weights_dtype != "auto"]
    assert quantized and all("pre-quantized checkpoint" in d.reason for d in quantized)
    # the default search tries the checkpoint's KV dtype and FP8 (trtllm-serve --kv_cache_dtype fp8, TensorRT-LLM
    # PR #11487, March 2026): an FP8 pool of the same bytes holds twice the tokens
    fp8_rows = [d for d in rows if d.kv_dtype == "fp8" and d.serves]
    assert fp8_rows
    for best in (next(d for d in rows if d.serves and d.kv_dtype == "auto"), fp8_rows[0]):
        p = trtllm.plan(spec, a100, best.settings)  # type: ignore[arg-type]
        # the paged pool holds max_tokens tokens: whole requests of 8192 of them
        assert best.per_replica == min(p.max_tokens // 8192, best.settings.max_batch_size)  # type: ignore[union-attr]
        argv = launch.argv_for(spec.name, best.settings)
        assert ("--kv_cache_dtype" in argv) == (best.kv_dtype == "fp8")
        container = next(iter(yaml.safe_load_all(launch.kubernetes(spec.name, argv, best.tp, 1))))["spec"]["template"][
            "spec"]["containers"][0]
        assert container["command"] == ["trtllm-serve"] and container["image"].startswith("nvcr.io/nvidia/tensorrt-llm")
        back = parse_other_command(container["command"] + container["args"])
        assert back.trtllm is not None and trtllm.plan(spec, a100, back.trtllm) == p
    # 80 layers x 8 KV heads x 128 x 2 (K, V) / TP: 2 bytes each in bf16, 1 in fp8
    tp4 = trtllm.TrtllmSettings(tp=4, max_seq_len=8192)
    assert trtllm.plan(spec, a100, tp4).per_token_bytes == 80 * 2 * 128 * 2 * 2
    assert trtllm.plan(spec, a100, replace(tp4, kv_cache_dtype="fp8")).per_token_bytes == 80 * 2 * 128 * 2
    with pytest.raises(InputError, match="auto or fp8"):
        trtllm.plan(spec, a100, replace(tp4, kv_cache_dtype="int4"))


def test_trtllm_options_file_is_read_like_trtllm_serve(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kvbudget.engines.cmdscan import parse_other_command

    # trtllm-serve --extra_llm_api_options (renamed --config) YAML: the LLM API's fields, kv_cache_config nested
    options = tmp_path / "extra.yaml"
    options.write_text("max_batch_size: 64\nenable_chunked_prefill: true\nkv_cache_config:\n  dtype: fp8\n"
                       "  free_gpu_memory_fraction: 0.85\n  enable_block_reuse: false\n")
    cmd = parse_other_command(["trtllm-serve", LLAMA70, "--tp_size", "4", "--kv_cache_free_gpu_memory_fraction", "0.9",
                               "--extra_llm_api_options", str(options)])
    s = cmd.trtllm
    assert s is not None and (s.tp, s.max_batch_size, s.kv_cache_dtype, s.free_gpu_memory_fraction) == (4, 64, "fp8", 0.85)
    assert cmd.warnings == ("trtllm options enable_chunked_prefill does not change memory in kvbudget's model: ignored",
                            "trtllm options kv_cache_config.enable_block_reuse does not change memory in kvbudget's "
                            "model: ignored")
    same = parse_other_command(["trtllm-serve", LLAMA70, "--tp_size", "4", "--config", str(options)])
    assert same.trtllm == s
    # explain reads it end to end; a garbled file is one line and exit 2
    assert main(["explain", "--gpu", "A100-80GB", "--", "trtllm-serve", LLAMA70, "--tp_size", "4",
                 "--extra_llm_api_options", str(options)]) == 0
    capsys.readouterr()
    bad = tmp_path / "bad.yaml"
    bad.write_text("kv_cache_config:\n  dtype: [fp8\n")
    assert main(["explain", "--gpu", "A100-80GB", "--", "trtllm-serve", LLAMA70, "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not valid YAML" in err
    for text, message in (
        ("kv_cache_config:\n  free_gpu_memory_fraction: lots\n", "free_gpu_memory_fraction 'lots' is not a number"),
        ("kv_cache_config:\n  free_gpu_memory_fraction: 1.5\n", "free_gpu_memory_fraction is 1.5: it must be at most 1"),
        ("kv_cache_config:\n  free_gpu_memory_fraction: 1\n", "free_gpu_memory_fraction is 1: it must be below 1"),
        ("- max_batch_size: 8\n", "must hold a mapping of LLM API options"),
        ("kv_cache_config: [fp8]\n", "kv_cache_config must be a mapping"),
        ("kv_cache_config:\n", "kv_cache_config must be a mapping"),
        ("max_batch_size: .inf\n", "max_batch_size must be a whole number, not inf"),
        ("max_batch_size: 1.7\n", "max_batch_size must be a whole number, not 1.7"),
        ("max_batch_size: 0\n", "max_batch_size is 0: it must be at least 1"),
        ("max_seq_len: -1\n", "max_seq_len is -1: it must be at least 1"),
        ("kv_cache_config:\n  max_tokens: -100\n", "kv_cache_config.max_tokens is -100: it must be at least 1"),
        ("kv_cache_config:\n  dtype: 8\n", "dtype 8 is not a dtype name"),
        ("kv_cache_config:\n  dtype: int4\n", "auto or fp8"),
        ("kv_cache_config:\n  tokens_per_block: 48\n", "tokens_per_block must be a power of two"),
        ("max_batch_size: true\n", "max_batch_size must be a whole number, not True"),
    ):
        bad.write_text(text)
        assert main(["explain", "--gpu", "A100-80GB", "--", "trtllm-serve", LLAMA70, "--tp_size", "4",
                     "--config", str(bad)]) == 2, text
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, (text, err)
    bad.write_bytes(b"\xff\xfe\x00m\x00a\x00x")
    assert main(["explain", "--gpu", "A100-80GB", "--", "trtllm-serve", LLAMA70, "--config", str(bad)]) == 2
    assert "not UTF-8 text" in capsys.readouterr().err
    # quoted numbers are numbers (YAML "64"), null is the engine's default
    bad.write_text('max_batch_size: "64"\nkv_cache_config:\n  max_tokens: null\n')
    assert parse_other_command(["trtllm-serve", LLAMA70, "--config", str(bad)]).trtllm.max_batch_size == 64  # type: ignore[union-attr]
    # the engine's own limits hold for its flags too
    assert main(["explain", "--gpu", "A100-80GB", "--", "trtllm-serve", LLAMA70, "--tp_size", "4",
                 "--max_batch_size", "-5"]) == 2
    assert "--max_batch_size is -5: it must be at least 1" in capsys.readouterr().err
    assert main(["explain", "--gpu", "A100-80GB", "--", "trtllm-serve", LLAMA70, "--config", str(tmp_path / "no")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_plan_text_shows_the_levers_of_the_best_row(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", LLAMA70, "--concurrency", "64", "--context", "8192", "--gpus", "H100"]) == 0
    out = capsys.readouterr().out
    assert "For the best deployment (one replica) -- What each lever buys:" in out
    assert "--tensor-parallel-size 8" in out
    # --json: the best row carries the same levers, each re-planned by vLLM from that row's settings
    from kvbudget.engines.vllm.levers import levers

    assert main(["plan", LLAMA70, "--concurrency", "64", "--context", "8192", "--gpus", "H100", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    best = next(d for d in search(kvbudget.load_model(LLAMA70), 64, 8192, [find_gpu("H100")]) if d.serves)
    _, rows = levers(kvbudget.load_model(LLAMA70), find_gpu("H100"), best.settings)  # type: ignore[arg-type]
    assert [(r["lever"], r["max_concurrency"]) for r in doc["plans"][0]["levers"]] == [(r.name, r.concurrency) for r in rows]
    assert all("levers" not in r for r in doc["plans"][1:])


def test_review_fixes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # phi-4 has 10 KV heads: the "one more TP step" lever (TP 4) is one vLLM refuses, so it is left out
    # instead of failing the whole command
    assert main(["fit", "microsoft/phi-4", "--gpu", "L4", "--tp", "2", "--context", "4096"]) == 0
    out = capsys.readouterr().out
    assert "What each lever buys:" in out and "--tensor-parallel-size 4" not in out
    # V100 (compute capability 7.0): vLLM's fp8 (8.0) and AWQ (7.5) kernels do not run there
    rows = search(kvbudget.load_model("meta-llama/Llama-3.1-8B-Instruct"), 4, 4096, [find_gpu("V100-SXM2-16GB")],
                  weights=("fp8", "awq"), kv=("auto",))
    assert rows and all(not d.serves and "need compute capability" in d.reason for d in rows)
    # SGLang and TRT-LLM plans stay within a node, and SGLang is given --tp-size / --pp-size
    spec = kvbudget.load_model(LLAMA70)
    sgl = search(spec, 200, 8192, [find_gpu("L40S")], engine="sglang", kv=("auto", "fp8_e5m2"))
    assert sgl and all(d.tp * d.pp <= 8 for d in sgl)
    e5m2 = next(d for d in sgl if d.kv_dtype == "fp8_e5m2")
    assert e5m2.settings.kv_cache_dtype == "fp8_e5m2"  # type: ignore[union-attr]
    best = next(d for d in sgl if d.serves)
    argv = launch.argv_for(spec.name, best.settings)
    assert "--tp-size" in argv and "--tp" not in argv
    # a local model's command names its folder
    assert vllm_argv("/models/my-llama/config.json", vllm.VllmSettings())[2] == "/models/my-llama"
    # the scheduler never runs more than max_num_seqs at once
    assert kvbudget.max_context("meta-llama/Llama-3.1-8B-Instruct", concurrency=5000, gpu="H100") == 0
    # a prices file naming an unknown GPU names the file; a free GPU still plots (linear price axis)
    (tmp_path / "p.json").write_text('{"H1000": 1}')
    with pytest.raises(InputError, match=r"p\.json: unknown GPU 'H1000'"):
        read_prices(str(tmp_path / "p.json"))
    (tmp_path / "free.json").write_text('{"L4": 0}')
    assert main(["plan", LLAMA70, "--concurrency", "64", "--context", "8192", "--gpus", "L4,L40S",
                 "--prices", str(tmp_path / "free.json"), "--plot", str(tmp_path / "free.svg")]) == 0
    assert "chosen: 8 x L4-24GB" in (tmp_path / "free.svg").read_text()
    capsys.readouterr()
    # --plot draws every engine's partition: SGLang's parts of the GPU as its plan splits them
    assert main(["fit", LLAMA70, "--gpu", "H100", "--engine", "sglang", "--context", "8192", "--num-gpus", "2",
                 "--plot", str(tmp_path / "s.svg")]) == 0
    svg = (tmp_path / "s.svg").read_text()
    assert all(part in svg for part in ("weights", "KV pool", "reserved (1 - mem_fraction_static)", "free"))


def test_every_engine_fit_carries_a_launch_that_round_trips(capsys: pytest.CaptureFixture[str]) -> None:
    from kvbudget.engines import llamacpp, sglang, trtllm
    from kvbudget.engines.cmdscan import parse_other_command
    from kvbudget.engines.llamacpp.command import parse_llamacpp_command

    model = "meta-llama/Llama-3.1-8B-Instruct"
    spec, h100 = kvbudget.load_model(model), find_gpu("H100")
    cases = [
        (["--engine", "sglang", "--context", "8192", "--kv-dtype", "fp8"], "python -m sglang.launch_server"),
        (["--engine", "trtllm", "--context", "8192"], "trtllm-serve"),
        (["--engine", "llama.cpp", "--context", "32768", "--np", "8", "--ctk", "q8_0", "--ctv", "q8_0"], "llama-server"),
    ]
    for extra, program in cases:
        assert main(["fit", model, "--gpu", "H100", "--json", *extra]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["launch"]["command"].startswith(program)
        container = next(iter(yaml.safe_load_all(doc["launch"]["kubernetes"])))["spec"]["template"]["spec"]["containers"][0]
        words = container["command"] + container["args"]
        if program == "llama-server":
            back = parse_llamacpp_command(words)
            p = llamacpp.plan(spec, h100, back.settings)
            assert (p.n_ctx, p.n_seq_max, p.type_k, p.kv_bytes) == (doc["n_ctx"], 8, "q8_0", doc["memory"]["kv_cache_bytes"])
        else:
            other = parse_other_command(words)
            if other.sglang is not None:
                assert sglang.plan(spec, h100, other.sglang).max_total_num_tokens == doc["kv_cache_tokens"]
            else:
                assert other.trtllm is not None and trtllm.plan(spec, h100, other.trtllm).max_tokens == doc["kv_cache_tokens"]


def test_llamacpp_plans() -> None:
    from kvbudget.engines import llamacpp
    from kvbudget.engines.llamacpp.command import parse_llamacpp_command

    spec = kvbudget.load_model("meta-llama/Llama-3.1-8B-Instruct")
    l4 = find_gpu("L4")
    rows = search(spec, 16, 8192, [l4], engine="llama.cpp", weights=("auto",), kv=("auto", "q8_0"), max_gpus=8)
    assert all(d.pp == 1 for d in rows)  # llama.cpp splits layers within one server: no pipeline stages
    one = next(d for d in rows if d.tp == 1 and d.kv_dtype == "q8_0")
    # 16 slots of 8192 tokens need -c 131072; the largest N whose cache fits is what one server holds
    n = one.per_replica
    fits = llamacpp.plan(spec, l4, llamacpp.LlamaCppSettings(n_ctx=n * 8192, n_parallel=n, kv_unified=True,
                                                             type_k="q8_0", type_v="q8_0", flash_attn="on", fit=False))
    more = llamacpp.plan(spec, l4, llamacpp.LlamaCppSettings(n_ctx=(n + 1) * 8192, n_parallel=n + 1, kv_unified=True,
                                                             type_k="q8_0", type_v="q8_0", flash_attn="on", fit=False))
    assert fits.fits and not more.fits
    two = next(d for d in rows if d.tp == 2 and d.kv_dtype == "q8_0")
    assert two.per_replica > n  # two GPUs share the layers, and their caches
    argv = launch.argv_for(spec.name, two.settings)
    assert argv[:3] == ["llama-server", "-m", spec.name] and "-ts" in argv and argv[argv.index("-ts") + 1] == "1,1"
    container = next(iter(yaml.safe_load_all(launch.kubernetes(spec.name, argv, 2))))["spec"]["template"]["spec"][
        "containers"][0]
    assert container["command"] == ["/app/llama-server"] and container["resources"]["limits"]["nvidia.com/gpu"] == 2
    back = parse_llamacpp_command(container["command"] + container["args"])
    assert llamacpp.plan(spec, l4, back.settings).kv_device_bytes == llamacpp.plan(spec, l4, two.settings).kv_device_bytes


def test_rule_of_thumb_reads_the_size_from_the_name() -> None:
    from kvbudget.plan.levers import nominal_params, rule_of_thumb

    # the size people quote is the one in the name ("a 70B model"), not the checkpoint's 68.98B
    assert nominal_params("meta-llama/Llama-2-70b-chat-hf", 68_976_648_192) == 70_000_000_000
    assert nominal_params("Qwen/Qwen3-0.6B", 1) == 600_000_000
    assert nominal_params("Qwen/Qwen3-30B-A3B", 1) == 30_000_000_000
    assert nominal_params("llama2:70b", 1) == 70_000_000_000
    assert nominal_params("deepseek-ai/DeepSeek-V3", 671_026_419_200) == 671_026_419_200  # no size in the name
    spec = kvbudget.load_model("meta-llama/Llama-3.1-8B-Instruct")
    # 8e9 x (2 - 1) B on one GPU = 8.0 GB; one 8K sequence = 32 x 8192 x 4096 B = 1 GiB: 8 as printed, 7 in one unit
    thumb = rule_of_thumb(spec, 1, kvbudget.kv(spec, context=8192).bytes_per_sequence)
    assert thumb is not None and (thumb.freed_bytes, thumb.count, thumb.count_one_unit) == (8 * 10**9, 8, 7)
    assert rule_of_thumb(spec, 1, 0) is None


def test_fit_that_does_not_hold_the_load_names_the_fewest_gpus(capsys: pytest.CaptureFixture[str]) -> None:
    # 16 requests of 32K on 4 x H100 at TP4: the pool holds 15.15x (496,320 tokens // 32,768), one short; the
    # next layout vLLM can run within a node, TP8, holds 42 (43 before the profiling run's floor from vLLM 0.33's
    # source: 1.78 GiB for the V2 runner's warm-up sampler pass on the last rank) -- the fewest H100s, as
    # api.fewest_gpus finds them
    argv = ["fit", LLAMA70, "--gpu", "H100", "--tp", "4", "--context", "32768", "--batch", "16"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "Verdict: does not fit" in text
    best = kvbudget.fewest_gpus(LLAMA70, concurrency=16, context=32768, gpu="H100")
    assert best is not None and (best.num_gpus, best.tp, best.replicas) == (8, 8, 1)
    tp8 = vllm.plan(kvbudget.load_model(LLAMA70), find_gpu("H100"),
                    vllm.VllmSettings(tensor_parallel_size=8, max_model_len=32768))
    assert best.max_concurrency == tp8.num_gpu_blocks // 2048 == 42
    assert f"Fewest H100-SXM-80GB for 16 x 32,768-token requests: 8 (TP8), holding {best.max_concurrency} at once" in text
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["fewest_gpus"]["num_gpus"] == 8 and doc["fewest_gpus"]["launch"]["command"] == (
        f"vllm serve {LLAMA70} --tensor-parallel-size 8 --max-model-len 32768")
    # one that does not start at all (70B bf16 on one H100) gets the same line; one that fits does not
    assert main(["fit", LLAMA70, "--gpu", "H100", "--context", "8192"]) == 0
    assert "Fewest H100-SXM-80GB for 1 x 8,192-token request: 2 (TP2)" in capsys.readouterr().out
    assert main(["fit", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100", "--context", "8192", "--json"]) == 0
    assert "fewest_gpus" not in json.loads(capsys.readouterr().out)


def test_llm_api_options_read_numbers_written_as_text(tmp_path: Path) -> None:
    """A number quoted in the options file is read as the number it spells, and checked the same way."""
    from kvbudget.engines.cmdscan import parse_other_command

    options = tmp_path / "o.yaml"
    options.write_text("max_batch_size: '8'\nkv_cache_config:\n  free_gpu_memory_fraction: '0.5'\n")
    s = parse_other_command(["trtllm-serve", "m", "--config", str(options)]).trtllm
    assert s is not None and (s.max_batch_size, s.free_gpu_memory_fraction) == (8, 0.5)
    options.write_text("max_batch_size: '-8'\n")
    with pytest.raises(InputError, match=r"o\.yaml': max_batch_size is -8: it must be at least 1"):
        parse_other_command(["trtllm-serve", "m", "--config", str(options)])


# --- plan --slo -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "words"), [
    ("ttft=2", "needs its unit"), ("tpot=abcms", "not a duration"), ("ttft=-1s", "above 0"), ("ttft=nans", "not a duration"),
    ("prompt=100", "needs ttft"), ("ttft=1s,ttft=2s", "given twice"), ("latency=1s", "is not ttft"),
    ("ttft=1s,prompt=0", "at least 1"), ("ttft=1s,prompt=x", "whole number"), ("tpot=2h", "unit 'h' is not one"),
    # each used to be read as a number Python's float() takes: 1_000 ms, full-width and Arabic-Indic digits
    ("ttft=1_000ms", "not a duration"), ("ttft=\uff12s", "not a duration"), ("ttft=1s,prompt=\u0663", "whole number"),
    ("ttft=2min", "unit 'min'"), ("ttft=2m", "ambiguous"), ("ttft=2sec", "unit 'sec'"), ("ttft=0s", "above 0"),
    ("ttft=infs", "not a duration"), ("ttft=1e400ms", "at most 3,600 s"), ("ttft=2s;tpot=5ms", "not a duration"),
    ("ttft=" + "1" * 100_000 + "s", "not a duration"), ("ttft=1s,prompt=" + "9" * 30, "at most"),
])
def test_a_bad_slo_is_one_clear_error(text: str, words: str) -> None:
    from kvbudget.plan.slo import parse_slo

    with pytest.raises(InputError, match=words) as err:
        parse_slo(text)
    assert "\n" not in str(err.value) and len(str(err.value)) < 200
    if "prompt" not in text and "=" in text:  # a duration's error names the forms taken
        assert any(w in str(err.value) for w in ("ms or s", "given twice", "DURATION"))


@pytest.mark.parametrize(("text", "seconds"), [("ttft=2 s", 2.0), ("TTFT=500MS", 0.5), ("ttft=1e-3s", 1e-3),
                                               ("ttft=.5s", 0.5), ("ttft=2e3ms", 2.0)])
def test_slo_durations_as_written(text: str, seconds: float) -> None:
    from kvbudget.plan.slo import parse_slo

    assert parse_slo(text).ttft_s == pytest.approx(seconds)


def test_slo_prompt_longer_than_the_context_is_refused() -> None:
    """prompt=N past --context was timed as a --context-token prompt (exit 0)."""
    with pytest.raises(InputError, match=r"prompt=9,000 is longer than --context 8,192"):
        kvbudget.plan_deployments("llama-3.1-8b", concurrency=8, context=8192, gpus="H100", slo="ttft=2s,prompt=9000")


def test_slo_latency_is_the_roofline_at_the_largest_batch_that_meets_it(capsys: pytest.CaptureFixture[str]) -> None:
    """Each serving row's TPOT is one decode step of its batch: max((weights + batch x context x KV bytes per token)
    / bandwidth, batch x 2 x active parameters / throughput), recomputed here from the row's own figures and the GPU
    catalog; its batch is the largest that meets the target (one more misses it, or the KV cache is full)."""
    from kvbudget.sim.timing import flops_per_token

    assert main(["plan", "meta-llama/Llama-3.1-8B-Instruct", "--concurrency", "64", "--context", "8192", "--gpus",
                 "H100,A100-80GB", "--slo", "tpot=25ms", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["slo"]["tpot_s"] == pytest.approx(0.025) and doc["slo"]["ttft_s"] is None
    flops = flops_per_token(kvbudget.load_model("meta-llama/Llama-3.1-8B-Instruct"))
    serving = [p for p in doc["plans"] if p["serves"]]
    assert serving
    for p in serving:
        gpu = find_gpu(p["gpu"])
        per_token = p["kv_cache_bytes"] * p["pp"] / p["kv_cache_tokens"]

        def tpot(b: int, p: dict = p, gpu: object = gpu, per_token: float = per_token) -> float:
            memory = (p["weights_bytes"] * p["pp"] + b * 8192 * per_token) / gpu.bandwidth_bytes_per_s  # type: ignore[attr-defined]
            return max(memory, b * flops / p["tp"] / (gpu.bf16_tflops * 1e12))  # type: ignore[attr-defined]

        b = p["slo"]["batch_per_replica"]
        assert p["slo"]["tpot_s"] == pytest.approx(tpot(b)) and tpot(b) <= 0.025
        assert b == p["per_replica"] or tpot(b + 1) > 0.025
        assert p["replicas"] == -(-64 // b) and p["num_gpus"] == p["replicas"] * p["tp"] * p["pp"]
    # the A100 (2.0 TB/s) runs a smaller batch within 25 ms than the H100 (3.35 TB/s) at the same layout
    one = {(p["gpu"], p["weights_dtype"], p["kv_dtype"]): p for p in serving if p["tp"] == 1 and p["pp"] == 1}
    assert one[("A100-SXM4-80GB", "fp8", "fp8")]["slo"]["batch_per_replica"] < one[("H100-SXM-80GB", "fp8", "fp8")]["slo"]["batch_per_replica"]


def test_a_tighter_slo_never_costs_less() -> None:
    costs = []
    for tpot in ("60ms", "25ms", "15ms"):
        a = kvbudget.plan_deployments("meta-llama/Llama-3.1-8B-Instruct", concurrency=64, context=8192,
                                      gpus="H100,A100-80GB", slo=f"tpot={tpot},ttft=2s")
        assert a.best is not None
        costs.append(a.best.price_per_hour)
    assert costs == sorted(costs) and costs[0] < costs[-1]


def test_an_fp8_checkpoint_is_not_planned_twice() -> None:
    """DeepSeek-V3's config.json carries quantization_config {"quant_method": "fp8", "weight_block_size": [128, 128]}:
    its own format is FP8, and vLLM 0.33.0's loaded_format keeps it under --quantization fp8 (the same family), so
    an "fp8 weights" row would repeat the "ckpt" row with a redundant flag. One row per GPU x layout x KV cache."""
    spec = kvbudget.load_model("deepseek-v3")
    assert spec.weight_format is not None and spec.weight_format.name == "fp8"
    catalog = [find_gpu("H200"), find_gpu("B200")]
    rows = search(spec, 1, 131072, catalog)
    assert {d.weights_dtype for d in rows} == {"auto"}
    keys = [(d.gpu, d.tp, d.pp, d.kv_dtype) for d in rows]
    assert len(keys) == len(set(keys))
    assert not any("--quantization" in d.launch.argv for d in rows if d.launch is not None)
    # asked for FP8 weights alone, the FP8 checkpoint is still planned (as its own format)
    only = search(spec, 1, 131072, catalog, weights=("fp8",))
    assert len(only) == len(rows) and {d.weights_dtype for d in only} == {"fp8"}
    # a 16-bit checkpoint keeps both: its own bf16 and FP8 while loading
    llama = search(kvbudget.load_model("llama-3.1-8b"), 1, 8192, catalog)
    assert {d.weights_dtype for d in llama} == {"auto", "fp8"}


@pytest.mark.parametrize(("engine", "weights", "kv"), [("vllm", ("auto", "fp8"), ("auto", "fp8")),
                                                       ("sglang", ("auto",), ("auto", "fp8")),
                                                       ("llama.cpp", ("auto",), ("auto", "q8_0"))])
def test_each_serving_row_has_the_launch_of_its_own_replica(engine: str, weights: tuple[str, ...],
                                                             kv: tuple[str, ...]) -> None:
    # the search builds one launch per distinct replica (settings, layout, replicas, node) and GPU types share it: each
    # row's launch is the one its own deployment gives
    from kvbudget.engines.base import default_registry
    from kvbudget.plan.search import _launch

    spec = kvbudget.load_model("meta-llama/Llama-3.1-8B-Instruct")
    server = default_registry().get(engine)
    rows = [d for d in search(spec, 64, 8192, [find_gpu(g) for g in ("H100", "H200", "A100-80GB", "L40S", "L4")],
                              engine=engine, weights=weights, kv=kv) if d.serves]
    assert len({d.gpu for d in rows}) > 1
    shared = 0
    for d in rows:
        assert d.launch == _launch(server, spec.name, d, d.gpus_per_node)
        shared += sum(e.launch is d.launch for e in rows if e.gpu != d.gpu)
    assert shared  # some replicas are alike across GPU types


def test_a_search_shares_one_settings_record_per_layout_and_precision_across_gpu_types() -> None:
    # the vLLM replica's settings depend on the layout and precision, not on the GPU type: one record (and one hash)
    # for every GPU type of a search (engines/vllm/policy.py replica_settings), equal to the one built afresh
    rows = search(kvbudget.load_model("meta-llama/Llama-3.1-8B-Instruct"), 8, 8192, [find_gpu("H100"), find_gpu("L40S")],
                  max_gpus=8)
    first = {}
    for d in rows:
        if d.settings is None or d.settings.max_num_seqs is not None:
            continue
        key = (d.tp, d.pp, d.weights_dtype, d.kv_dtype)
        assert d.settings is first.setdefault(key, d.settings), key
    assert len(first) > 4 and {d.gpu for d in rows} == {"H100-SXM-80GB", "L40S-48GB"}


def test_plan_takes_back_the_ckpt_its_table_prints(capsys: pytest.CaptureFixture[str]) -> None:
    # the weights and KV columns print "ckpt" for the checkpoint's own format (README: --kv-cache-dtype auto); a user
    # who narrows the search to the rows they saw passes it back. Before: "unknown weights dtype 'ckpt'" (exit 2)
    args = ["plan", "llama-3.1-8b", "--concurrency", "8", "--context", "8192", "--gpus", "L4", "--json"]
    assert main([*args, "--weights-dtype", "ckpt", "--kv-dtype", "CKPT,fp8"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert main([*args, "--weights-dtype", "auto", "--kv-dtype", "auto,fp8"]) == 0
    assert said == json.loads(capsys.readouterr().out)
    assert main([*args, "--engine", "llama.cpp", "--weights-dtype", "Q4_K_M,ckpt"]) == 0
    rows = json.loads(capsys.readouterr().out)["plans"]
    assert {r["weights_dtype"] for r in rows} == {"Q4_K_M", "auto"}
