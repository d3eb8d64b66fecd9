"""The textbook fit: partition, largest batch, longest context, verdict, TP and PP."""

from __future__ import annotations

import pytest

import kvbudget
from kvbudget.engines.textbook import CUDA_CONTEXT_BYTES, NON_TORCH_TP1_BYTES, NON_TORCH_TP_BYTES, activation_bytes
from kvbudget.parallel import pp_partition, stages
from kvbudget.report.verdict import verdict_text
from kvbudget.units import GiB, InputError


def textbook_fit(*args: object, **kwargs: object) -> kvbudget.FitAnswer:
    """kvbudget.fit with the textbook partition (weights + KV + activations + overhead)."""
    return kvbudget.fit(*args, engine="textbook", **kwargs)  # type: ignore[arg-type]

LLAMA8 = "meta-llama/Llama-3.1-8B-Instruct"


def test_partition_adds_up_to_the_device() -> None:
    plan = textbook_fit(LLAMA8, gpu="H100", context=8192, batch=32)
    parts = plan.weights_bytes + plan.activation_bytes + plan.overhead_bytes + plan.kv_cache_bytes
    assert parts == plan.total_bytes == kvbudget.find_gpu("H100").memory_bytes


@pytest.mark.parametrize(
    ("model", "gpu", "context", "batch"),
    [(LLAMA8, "L4", 8192, 4), (LLAMA8, "H100", 512, 1), ("Qwen/Qwen2.5-0.5B-Instruct", "H100", 512, 1),
     ("openai/gpt-oss-20b", "RTX 4090", 4096, 2), ("meta-llama/Llama-3.1-70B-Instruct", "H100", 32768, 8)],
)
def test_max_batch_and_max_context_are_the_largest_that_fit(model: str, gpu: str, context: int, batch: int) -> None:
    # Round trip: asking for the reported largest batch (or context) fits; one more does not. The
    # activations grow with the batch (logits) and the prefill step, so this is not KV / per-sequence.
    plan = textbook_fit(model, gpu=gpu, context=context, batch=batch, tp=1 if "70B" not in model else 4)
    tp = plan.tp
    assert plan.max_batch is not None and plan.max_batch > 0
    assert textbook_fit(model, gpu=gpu, context=context, batch=plan.max_batch, tp=tp).fits
    assert not textbook_fit(model, gpu=gpu, context=context, batch=plan.max_batch + 1, tp=tp).fits
    if not plan.max_context_capped:
        assert textbook_fit(model, gpu=gpu, context=plan.max_context, batch=batch, tp=tp).fits
        assert not textbook_fit(model, gpu=gpu, context=plan.max_context + 1, batch=batch, tp=tp).fits


def test_fits_and_does_not_fit() -> None:
    ok = textbook_fit(LLAMA8, gpu="H100", context=8192, batch=32)
    assert ok.fits and ok.verdict == "fits" and verdict_text(ok).startswith("fits: 32 x 8,192-token")
    too_many = textbook_fit(LLAMA8, gpu="H100", context=8192, batch=500)
    assert not too_many.fits and f"at most {too_many.max_batch:,} sequences" in verdict_text(too_many)
    too_big = textbook_fit("meta-llama/Llama-3.1-70B-Instruct", gpu="L4", context=8192)
    assert not too_big.fits and too_big.kv_cache_bytes < 0 and too_big.verdict == "weights_exceed"
    assert "GB per GPU" in verdict_text(too_big, "GB")


def test_longest_context_stops_at_the_model_limit() -> None:
    plan = textbook_fit("Qwen/Qwen2.5-0.5B-Instruct", gpu="H200", context=1024)
    assert plan.max_context == 32768 and plan.max_context_capped


def test_sliding_window_model_gets_more_context_than_its_full_layers_alone_allow() -> None:
    # gpt-oss-20b: half its layers hold at most 128 tokens, so max context at batch 1 is bounded by the
    # 12 full layers only; the model limit is 131072.
    plan = textbook_fit("openai/gpt-oss-20b", gpu="RTX 4090", context=8192)
    assert plan.max_context == 131072


def test_overhead_is_cuda_context_plus_non_torch() -> None:
    assert textbook_fit(LLAMA8, gpu="H100", context=8192).overhead_bytes == CUDA_CONTEXT_BYTES + NON_TORCH_TP1_BYTES
    assert textbook_fit(LLAMA8, gpu="H100", tp=2, context=8192).overhead_bytes == CUDA_CONTEXT_BYTES + NON_TORCH_TP_BYTES


def test_activation_model_by_hand() -> None:
    # 8192-token step: 8192 x (3 x 4096 + 2 x 14336) x 2 B for Llama-3.1-8B, plus 1 x 128256 fp32 logits.
    spec = kvbudget.load_model(LLAMA8)
    assert activation_bytes(spec, 8192, 1, tp=1, last_stage=True) == 8192 * (3 * 4096 + 2 * 14336) * 2 + 128256 * 4
    assert activation_bytes(spec, 8192, 1, tp=2, last_stage=False) == 8192 * (3 * 4096 + 2 * 7168) * 2
    plan = textbook_fit(LLAMA8, gpu="H100", context=8192, batch=1)
    assert plan.activation_bytes == activation_bytes(spec, 8192, 1, tp=1, last_stage=True)


def test_assumptions_are_all_printed() -> None:
    names = [a.name for a in textbook_fit(LLAMA8, gpu="H100", context=8192).assumptions]
    assert names == ["GPU memory", "weights", "KV cache dtype", "activation workspace", "CUDA context", "non-torch memory"]


def test_tp_splits_weights_and_kv() -> None:
    one = textbook_fit("meta-llama/Llama-3.1-70B-Instruct", gpu="H100", tp=4, context=8192)
    two = textbook_fit("meta-llama/Llama-3.1-70B-Instruct", gpu="H100", tp=8, context=8192)
    assert one.kv_per_sequence_bytes == 80 * 8192 * 2 * 2 * 128 * 2  # 8 KV heads / 4 = 2 per rank
    assert two.kv_per_sequence_bytes == 80 * 8192 * 2 * 1 * 128 * 2
    assert two.weights_bytes < one.weights_bytes
    assert one.num_gpus == 4


def test_pp_reports_the_fullest_stage() -> None:
    # Llama-3.1-70B, 80 layers over 3 stages: vLLM get_pp_indices gives 27, 27, 26.
    assert pp_partition(80, 3) == (27, 27, 26)
    spec = kvbudget.load_model("meta-llama/Llama-3.1-70B-Instruct")
    plan = textbook_fit(spec, gpu="H100", pp=3, context=8192)
    all_stages = stages(spec, spec.weight_format, 1, 3)
    assert sum(s.weights_bytes for s in all_stages) == stages(spec, spec.weight_format)[0].weights_bytes
    assert plan.stage in (0, 1)  # a 27-layer stage holds the most KV per sequence
    assert plan.kv_per_sequence_bytes == 27 * 8192 * 2 * 8 * 128 * 2


def test_pp_partition_matches_vllm_rule() -> None:
    # vllm/distributed/utils.py get_pp_indices: remainder to the partitions before the last, from the
    # second-to-last backwards.
    assert pp_partition(61, 4) == (15, 15, 16, 15)
    assert pp_partition(32, 4) == (8, 8, 8, 8)
    assert pp_partition(10, 4) == (2, 3, 3, 2)
    assert sum(pp_partition(126, 7)) == 126


def test_fp8_kv_doubles_max_batch_roughly() -> None:
    bf16 = textbook_fit(LLAMA8, gpu="A100-80GB", context=8192)
    fp8 = textbook_fit(LLAMA8, gpu="A100-80GB", context=8192, kv_dtype="fp8")
    assert fp8.kv_per_sequence_bytes * 2 == bf16.kv_per_sequence_bytes
    assert fp8.max_batch is not None and bf16.max_batch is not None
    # twice the sequences, less the few whose logits (1 x 128256 fp32 each) the extra batch needs
    assert 2 * bf16.max_batch - 2 <= fp8.max_batch <= 2 * bf16.max_batch + 1


def test_pp_places_tied_embeddings_as_vllm() -> None:
    # vLLM qwen2.py builds embed_tokens on the last PP rank too when the lm_head is tied to it;
    # gemma*.py builds it on every rank. Qwen2.5-0.5B: vocab 151936 x hidden 896, tied.
    qwen = kvbudget.load_model("Qwen/Qwen2.5-0.5B-Instruct")
    _first, last = stages(qwen, qwen.weight_format, 1, 2)  # type: ignore[arg-type]
    assert dict(last.weights_by_role)["embeddings"] == 151936 * 896 * 2
    gemma = kvbudget.load_model("google/gemma-2-9b-it")
    assert all(dict(s.weights_by_role)["embeddings"] == 256000 * 3584 * 2
               for s in stages(gemma, gemma.weight_format, 1, 4)[1:])  # type: ignore[arg-type]
    llama = kvbudget.load_model(LLAMA8)  # untied: the last stage has its own lm_head instead
    assert "embeddings" not in dict(stages(llama, llama.weight_format, 1, 2)[1].weights_by_role)  # type: ignore[arg-type]


def test_custom_gpu_memory() -> None:
    plan = textbook_fit(LLAMA8, gpu_memory=48 * GiB, context=4096)
    assert plan.total_bytes == 48 * GiB and plan.gpu.startswith("custom")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"gpu": "H100", "pp": 100}, "--pp 100"),
        ({"gpu": "H100", "context": 0}, "--context"),
        ({"gpu": "H100", "batch": -1}, "--batch"),
        ({"gpu": "H100", "prefill_chunk": 0}, "--prefill-chunk"),
        ({"gpu_memory": -5}, "gpu_memory \\(bytes\\) is -5: it must be at least 1"),
        ({}, "give a GPU"),
        ({"gpu": "H100", "overhead_bytes": -1}, "--overhead"),
    ],
)
def test_bad_fit_inputs(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message):
        textbook_fit(LLAMA8, **kwargs)  # type: ignore[arg-type]


def test_replicated_parts_under_tp() -> None:
    # Qwen/Qwen3-235B-A22B config: 94 layers, hidden 4096, 4 KV heads of 128, 128 experts. At TP=8 each
    # rank keeps one whole K and V head (4 heads < 8 ranks) and the full router (vLLM ReplicatedLinear).
    plan = textbook_fit("Qwen/Qwen3-235B-A22B", gpu="H200", tp=8, context=32768)
    repl = dict(plan.replicated_by_role)
    assert repl["attention"] == 94 * 2 * 1 * 128 * 4096 * 2
    assert repl["router"] == 94 * 128 * 4096 * 2
    assert "experts" not in repl
    assert textbook_fit("Qwen/Qwen3-235B-A22B", gpu="H200", tp=1, context=32768).replicated_by_role == ()
