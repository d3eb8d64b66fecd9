"""The engine interface (engines/base.py): a question written once asks every engine the same way, and an
engine kvbudget does not ship is one object added to a registry — here a toy engine with a rule simple enough
to check by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

import kvbudget
from kvbudget._record import record
from kvbudget.engines.base import (
    Ask,
    Command,
    Container,
    EnginePlan,
    Fraction,
    Launch,
    Layout,
    Option,
    Part,
    Registry,
    Replica,
    Setup,
    Unsupported,
    Verdict,
    default_registry,
    engine_plan,
)
from kvbudget.hardware import GPU, find_gpu
from kvbudget.model.spec import ModelSpec
from kvbudget.questions.compare import compare
from kvbudget.questions.fit import FitAnswer
from kvbudget.report.text import compare_text
from kvbudget.units import GiB, InputError


@record
class ToySettings:
    context: int
    tp: int = 1
    share: float = 0.5
    kv: str = "auto"


@record
class ToyPlan:
    model: str
    gpu: str
    pool_bytes: int
    tokens: int
    context: int
    starts: bool
    log_lines: tuple[str, ...]


class Toy:
    """A share of the GPU (half by default) for the KV cache, whatever the model weighs; bf16 only; no pipeline.
    It implements the whole interface (``Engine`` in engines/base.py), and nothing else in kvbudget knows it."""

    name, label = "toy", "Toy"
    serving, multi_node, pipeline, tensor_parallel, pooled, lever_load, launch_hint = True, False, False, True, True, 1, ""
    kv_levers: tuple[str, ...] = ()
    fraction = Fraction("toy_share", 0.1)
    container = Container("toy", "example.org/toy:1", 9000, ("toy-serve",), listen=True)
    options = (Option("toy_share", "fraction", "the toy's share of the GPU for its KV cache", default=0.5,
                      commands=("fit", "levers")),)
    fit_flags = frozenset({"batch", "tp", "num_gpus", "toy_share"})
    fit_instead: tuple[tuple[str, str], ...] = ()
    plan_weights, plan_kv = ("auto",), ("auto",)

    def check_weights(self, name: str) -> None:
        if name != "auto":
            raise InputError("the toy runs the checkpoint's weights")

    def check_kv(self, name: str) -> None:
        if name != "auto":
            raise InputError("the toy caches bf16 only")

    def plan(self, spec: ModelSpec, gpu: GPU, setup: Setup) -> EnginePlan:
        if setup.kv_dtype != "auto":
            raise Unsupported("the toy caches bf16 only")
        return self.row(self.run(spec, gpu, ToySettings(setup.context, setup.tp)))

    def settings(self, spec: ModelSpec, ask: Ask) -> ToySettings:
        return ToySettings(ask.context or spec.max_context, ask.tp, ask.option("toy_share", 0.5), ask.kv_dtype)

    def run(self, spec: ModelSpec, gpu: GPU, s: ToySettings) -> ToyPlan:
        per_token = kvbudget.kv(spec, context=1, tp=s.tp).bytes_per_token
        pool = int(gpu.memory_bytes * s.share)
        tokens = pool // per_token
        return ToyPlan(spec.name, gpu.name, pool, tokens, s.context, tokens >= s.context, (f"[toy] tokens: {tokens}",))

    def row(self, p: ToyPlan) -> EnginePlan:
        return engine_plan("toy", 0, p.pool_bytes, p.tokens, p.tokens / p.context, p.context, p.starts, "half the GPU",
                           "tokens", None if p.starts else "the pool holds no request", p.log_lines, blocks=p.tokens,
                           block_tokens=1, parts=(Part("KV pool", p.pool_bytes, "modelled"),))

    def verdict(self, spec: ModelSpec, gpu: GPU, s: ToySettings, p: ToyPlan, batch: int) -> Verdict:
        held = p.tokens // p.context
        return Verdict(held=held, asked=batch, fits=held >= batch, pool_held=held)

    def layout(self, s: ToySettings) -> Layout:
        return Layout(s.tp, 1, "auto", s.kv, s.share)

    def replica(self, spec: ModelSpec, gpu: GPU, tp: int, pp: int, weights: str, kv: str, concurrency: int,
                context: int, version: str, fraction: float | None = None) -> Replica:
        s = ToySettings(context, tp, fraction or 0.5, kv)
        self.check_kv(kv)
        p = self.run(spec, gpu, s)
        per = p.tokens // context
        return Replica(per, "" if per else "the pool holds no request", per > 0, 0, p.pool_bytes, p.tokens, per, s,
                       s.share)  # type: ignore[arg-type]

    def launch(self, model: str, s: ToySettings) -> Launch:
        return Launch(("toy-serve", model, "--context", str(s.context), "--tp", str(s.tp), "--share", f"{s.share:g}"))

    def gpus(self, s: ToySettings) -> int:
        return s.tp

    def reads_command(self, words: list[str]) -> bool:
        return words[0] == "toy-serve"

    def read_command(self, words: list[str], given: dict[str, object]) -> Command:
        flags = dict(zip(words[2::2], words[3::2], strict=False))
        return Command(words[1], ToySettings(int(flags["--context"]), int(flags.get("--tp", 1)),
                                             float(flags.get("--share", 0.5))))

    def reads_log(self, text: str) -> bool:
        return text.startswith("[toy]")

    def check(self, text: str, given: dict[str, object]) -> list[tuple[str, int, int]]:
        reported = int(text.split("tokens: ")[1].split()[0])
        p = self.run(kvbudget.load_model(str(given["model"])), find_gpu(str(given["gpu"])), ToySettings(1))
        return [("tokens", reported, p.tokens)]

    def text(self, answer: FitAnswer, units: str) -> str:
        return f"toy: {answer.plan.tokens:,} tokens in {answer.plan.pool_bytes:,} B"

    def doc(self, answer: FitAnswer, units: str) -> dict[str, object]:
        return {"engine": {"name": "toy"}, "kv_cache_tokens": answer.plan.tokens}

    def check_text(self, rows: list[tuple[str, int, int]], units: str) -> str:
        return "\n".join(f"{f}: log {r:,}, kvbudget {c:,}" for f, r, c in rows)

    def check_doc(self, rows: list[tuple[str, int, int]], units: str) -> dict[str, object]:
        return {"comparison": [{"figure": f, "reported": r, "recomputed": c} for f, r, c in rows]}


# by hand: Llama-3.1-8B keeps 2 x 32 layers x 8 KV heads x 128 x 2 bytes = 131,072 B per token; an H100 reports
# 79.18 GiB = 85,017,755,648 B, half of it 42,508,877,824 B = 324,317 tokens = 39 requests of 8,192 tokens
TOY_TOKENS, TOY_HELD = 324_317, 39


def test_a_toy_engine_works_with_every_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The steps of docs/adding-an-engine.md are true: one object in a registry, and every command asks it."""
    import json

    from kvbudget.cli import main

    registry = default_registry().with_engine(Toy())

    def run(*argv: str) -> str:
        assert main(list(argv), registry=registry) == 0, capsys.readouterr().err
        return capsys.readouterr().out

    def doc(*argv: str) -> dict[str, object]:
        return json.loads(run(*argv, "--json"))  # type: ignore[no-any-return]

    out = run("fit", "llama-3.1-8b", "--gpu", "H100", "--engine", "toy", "--context", "8192", "--batch", "40")
    assert f"toy: {TOY_TOKENS:,} tokens" in out and f"Requests of 8,192 tokens held at once: {TOY_HELD}" in out
    assert "Verdict: does not fit: 40 x 8,192-token requests need more than the pool" in out
    assert "Fewest H100-SXM-80GB for 40 x 8,192-token requests: 2 (TP2)" in out  # the toy's own replica, searched
    assert "toy-serve meta-llama/Llama-3.1-8B-Instruct --context 8192 --tp 2 --share 0.5" in out
    assert "toy_share 0.6" in out  # the lever of its own fraction
    fit = doc("fit", "llama-3.1-8b", "--gpu", "H100", "--engine", "toy", "--context", "8192", "--toy-share", "0.25")
    assert (fit["kv_cache_tokens"], fit["max_batch"], fit["fits"]) == (TOY_TOKENS // 2, TOY_HELD // 2, True)
    assert kvbudget.fit("llama-3.1-8b", gpu="H100", engine="toy", context=8192, registry=registry,
                        options={"toy_share": 0.25}).capacity.held == TOY_HELD // 2  # the API: the same answer
    assert main(["fit", "llama-3.1-8b", "--gpu", "H100", "--engine", "vllm", "--toy-share", "0.3"], registry=registry) == 2
    assert "--toy-share is not read under --engine vllm" in capsys.readouterr().err
    rows = doc("compare", "llama-3.1-8b", "--gpu", "H100")["engines"]
    assert rows[-1] == {"engine": "toy", "weights_bytes": 0, "kv_budget_bytes": 85_017_755_648 // 2,  # type: ignore[index]
                        "kv_cache_tokens": TOY_TOKENS, "max_concurrency": round(TOY_TOKENS / 8192, 3), "context": 8192,
                        "starts": True, "budget_rule": "half the GPU", "unit": "tokens", "max_running": None,
                        "blocks": TOY_TOKENS, "block_tokens": 1,
                        "parts": [{"name": "KV pool", "bytes": 85_017_755_648 // 2, "provenance": "modelled"}]}
    plan = doc("plan", "llama-3.1-8b", "--engine", "toy", "--gpus", "H100", "--concurrency", "100", "--context", "8192")
    best = plan["plans"][0]  # type: ignore[index]
    assert (best["num_gpus"], best["tp"], best["replicas"], best["per_replica"]) == (3, 1, 3, TOY_HELD)  # 117 >= 100
    assert best["launch"]["command"].startswith("toy-serve")
    assert '"example.org/toy:1"' in best["launch"]["kubernetes"] and "replicas: 3" in best["launch"]["kubernetes"]
    levers = doc("levers", "llama-3.1-8b", "--gpu", "H100", "--engine", "toy", "--context", "8192")
    assert levers["baseline"]["max_concurrency"] == TOY_HELD  # type: ignore[index]
    assert {r["lever"] for r in levers["levers"]} >= {"half the context", "one more TP step", "toy_share 0.6"}  # type: ignore[union-attr]
    out = run("explain", "--gpu", "H100", "--", "toy-serve", "llama-3.1-8b", "--context", "8192")
    assert f"toy: {TOY_TOKENS:,} tokens" in out and f"held at once: {TOY_HELD}" in out
    log = tmp_path / "toy.log"
    log.write_text(f"[toy] tokens: {TOY_TOKENS}\n")
    assert run("check", str(log), "--model", "llama-3.1-8b", "--gpu", "H100") == f"tokens: log {TOY_TOKENS:,}, kvbudget {TOY_TOKENS:,}\n"


def test_a_toy_engine_answers_compare_beside_the_real_ones() -> None:
    spec, h100 = kvbudget.load_model("llama-3.1-8b"), find_gpu("H100")
    registry = default_registry().with_engine(Toy())
    rows, omitted = compare(spec, h100, 8192, registry=registry)
    assert [r.engine for r in rows] == ["vllm", "sglang", "trtllm", "llama.cpp", "transformers", "toy"] and not omitted
    toy = rows[-1]
    # by hand: 79.18 GiB / 2 = 42,508,877,824 B; / 131,072 B per token (2 x 32 x 8 x 128 x 2) = 324,317 tokens
    assert toy.kv_budget_bytes == 85_017_755_648 // 2 and toy.kv_tokens == 324_317
    assert round(toy.max_concurrency, 2) == round(324_317 / 8192, 2)
    text = compare_text(rows, spec.name, 8192, "GiB", omitted)
    assert "toy" in text and "half the GPU" in text
    rows, omitted = compare(spec, h100, 8192, kv_dtype="fp8", registry=registry)
    assert ("toy", "the toy caches bf16 only") in omitted and "toy" not in [r.engine for r in rows]


def test_registry() -> None:
    registry = default_registry()
    assert registry.names() == ("vllm", "sglang", "trtllm", "llama.cpp", "transformers", "textbook")
    assert registry.get("sglang").label == "SGLang"
    with pytest.raises(InputError, match="unknown engine 'tgi'"):
        registry.get("tgi")
    with pytest.raises(ValueError, match="two engines are named 'toy'"):
        Registry([Toy(), Toy()])
    assert default_registry().names() == registry.names()  # with_engine made a new registry


def test_an_engine_that_does_not_start_holds_nothing() -> None:
    # Llama-3.1-70B in bf16 (131 GiB) on one 80 GB H100: every engine's plan holds no pool, token or request
    rows, _ = compare(kvbudget.load_model("llama-3.1-70b"), find_gpu("H100"), 8192)
    assert rows and all(not r.starts and r.kv_budget_bytes == 0 and r.kv_tokens == 0 and r.max_concurrency == 0
                        for r in rows)
    vllm = rows[0]
    assert vllm.error and vllm.error.startswith("CUDA out of memory while loading")
    assert vllm.printed == (f"torch.OutOfMemoryError: {vllm.error}",)
    assert 131 * GiB < vllm.weights_bytes


def test_the_api_asks_any_engine_and_gets_the_row_compare_shows() -> None:
    spec, h100 = kvbudget.load_model("llama-3.1-8b"), find_gpu("H100")
    rows, _ = compare(spec, h100, 8192)
    for row in rows:
        assert kvbudget.engine_plan(spec, gpu="H100", engine=row.engine, context=8192) == row
    with pytest.raises(InputError, match="unknown engine 'tgi'"):
        kvbudget.engine_plan(spec, gpu="H100", engine="tgi")
    with pytest.raises(InputError, match="--context"):
        kvbudget.engine_plan(spec, gpu="H100", context=float("nan"))  # type: ignore[arg-type]
    with pytest.raises(Unsupported, match="no fp8 cache"):
        kvbudget.engine_plan(spec, gpu="H100", engine="transformers", kv_dtype="fp8")


def test_every_engine_is_asked_a_kv_dtype_it_has_and_keeps_its_own_error() -> None:
    spec = kvbudget.load_model("llama-3.1-8b")
    for engine, kv in (("llama.cpp", "q4_0"), ("sglang", "bogus"), ("vllm", "nvfp4")):
        with pytest.raises(InputError, match="is not one every engine has: use auto or fp8"):
            kvbudget.engine_plan(spec, gpu="H100", engine=engine, kv_dtype=kv)
    assert kvbudget.engine_plan(spec, gpu="H100", engine="sglang", kv_dtype="FP8").starts
    # TensorRT-LLM's own reason, not a generic one: 70B in bf16 on one H100
    trt = kvbudget.engine_plan("llama-3.1-70b", gpu="H100", engine="trtllm", context=8192)
    assert not trt.starts and trt.error == "no GPU memory left for the KV cache after the weights and the profiled peak"


def test_an_fp8_flavour_one_engine_lacks_leaves_it_out_of_compare() -> None:
    rows, omitted = compare(kvbudget.load_model("llama-3.1-8b"), find_gpu("H100"), 8192, kv_dtype="fp8_e5m2")
    assert [r.engine for r in rows] == ["vllm", "sglang", "llama.cpp"]
    assert dict(omitted)["trtllm"].startswith("its FP8 KV cache is e4m3")


def test_every_engine_gives_its_partition_pool_units_and_cap() -> None:
    """The common figures of an EnginePlan: the binding rank's memory part by part (with provenance), the pool in
    its allocation units, the scheduler's cap; each traced to the engine's own plan."""
    from kvbudget.engines import sglang, vllm

    spec, h100 = kvbudget.load_model("llama-3.1-8b"), find_gpu("H100")
    rows = {r.engine: r for r in compare(spec, h100, 8192)[0]}
    v = vllm.plan(spec, h100, vllm.VllmSettings(max_model_len=8192))
    r = rows["vllm"]
    assert (r.cap, r.blocks, r.block_tokens) == (v.max_num_seqs, v.num_gpu_blocks, 16)
    assert r.blocks * r.block_tokens == r.kv_tokens  # vLLM's "GPU KV cache size" is its blocks x block size
    parts = {x.name: x for x in r.parts}
    assert parts["model loading"].bytes == v.model_loading_bytes and parts["model loading"].provenance == "modelled"
    # vLLM >= 0.21's profiling run (and a fresh compile's benchmark before it) is read from the source: no fit
    assert parts["activation peak"].provenance == "modelled"
    assert sum(x.bytes for x in r.parts) == v.requested_bytes  # the budget, split: total x gpu_memory_utilization
    s = sglang.plan(spec, h100, sglang.SGLangSettings(context_length=8192))
    r = rows["sglang"]
    assert (r.cap, r.blocks * r.block_tokens) == (s.max_running_requests, s.max_total_num_tokens)
    assert sum(x.bytes for x in r.parts) == s.pre_load_bytes  # what SGLang saw free before loading, split
    for row in rows.values():
        assert row.parts and all(x.bytes >= 0 and x.provenance in ("modelled", "calibrated", "estimate")
                                 for x in row.parts)


def test_compare_takes_the_weights_each_engine_plans_with(capsys: pytest.CaptureFixture[str]) -> None:
    """compare --weights-dtype fp8: every engine that takes FP8 weights plans with them (fit does), the others are
    left out with why; a format none takes is one error line. compare had no --weights-dtype."""
    from kvbudget.cli import main
    from kvbudget.engines import sglang, vllm

    spec, l4 = kvbudget.load_model("llama-3.1-8b"), find_gpu("L4")
    rows, omitted = compare(spec, l4, 8192, weights="fp8")
    got = {r.engine: r for r in rows}
    assert list(got) == ["vllm", "sglang", "trtllm"]
    assert got["vllm"] == vllm.summary(vllm.plan(spec, l4, vllm.VllmSettings(max_model_len=8192, quantization="fp8")))
    fp8 = sglang.plan(spec, l4, sglang.SGLangSettings(context_length=8192, quantization="fp8"))
    assert got["sglang"].weights_bytes == fp8.weights_bytes < compare(spec, l4, 8192)[0][1].weights_bytes
    assert dict(omitted)["llama.cpp"].startswith("--weights-dtype fp8: unknown llama.cpp file type")
    assert "transformers" in dict(omitted)
    for row in rows:
        assert kvbudget.engine_plan(spec, gpu="L4", engine=row.engine, context=8192, weights_dtype="fp8") == row
    q4 = compare(spec, l4, 8192, weights="q4_k_m")[0]
    assert [r.engine for r in q4] == ["llama.cpp"]
    assert main(["compare", "llama-3.1-8b", "--gpu", "L4", "--weights-dtype", "fp8", "--json"]) == 0
    doc = __import__("json").loads(capsys.readouterr().out)
    assert doc["weights_dtype"] == "fp8" and [e["engine"] for e in doc["engines"]] == ["vllm", "sglang", "trtllm"]
    assert main(["compare", "llama-3.1-8b", "--gpu", "L4", "--weights-dtype", "bogus"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
