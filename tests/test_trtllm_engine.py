"""TensorRT-LLM's C++ engine path: what a built engine holds, worked by hand from TensorRT-LLM's checkpoint
converters (tensorrt_llm/models/llama/convert.py, models/qwen/convert.py) and its runtime (kvCacheManager.cpp)."""

from __future__ import annotations

import kvbudget
from kvbudget.engines import trtllm

QWEN05 = "Qwen/Qwen2.5-0.5B-Instruct"  # tie_word_embeddings: true; vocab 151,936, hidden 896
LLAMA8 = "meta-llama/Llama-3.1-8B-Instruct"  # tie_word_embeddings: false


def _weights(model: str, **settings: object) -> int:
    spec = kvbudget.load_model(model)
    return trtllm.plan(spec, kvbudget.find_gpu("A100-80GB"), trtllm.TrtllmSettings(**settings)).weights_bytes


def test_a_tied_lm_head_is_a_second_16_bit_copy_in_an_engine() -> None:
    vocab, hidden = 151_936, 896
    # the converter writes lm_head.weight = a copy of the embedding, 16-bit, not weight-only quantized
    for quant in ("int8", None):
        engine = _weights(QWEN05, backend="engine", quantization=quant)
        torch = _weights(QWEN05, backend="pytorch", quantization=quant)  # the PyTorch backend shares the tensor
        assert engine - torch == vocab * hidden * 2 == 272_269_312
    # at TP 2 the copy is split along the vocabulary like any lm_head (151,936 / 2 = 75,968 rows a rank)
    assert _weights(QWEN05, backend="engine", tp=2) - _weights(QWEN05, backend="pytorch", tp=2) == 75_968 * hidden * 2


def test_an_untied_model_is_held_the_same_by_both_backends() -> None:
    assert _weights(LLAMA8, backend="engine") == _weights(LLAMA8, backend="pytorch")


def test_a_tied_engine_notes_the_copy() -> None:
    spec = kvbudget.load_model(QWEN05)
    p = trtllm.plan(spec, kvbudget.find_gpu("A100-80GB"), trtllm.TrtllmSettings(backend="engine"))
    assert any("tie_word_embeddings" in n for n in p.notes)


def test_an_engine_above_one_rank_holds_nccls_buffers() -> None:
    from kvbudget.engines.textbook import NON_TORCH_TP_BYTES

    spec = kvbudget.load_model(LLAMA8)
    gpu = kvbudget.find_gpu("H100")
    for tp in (1, 2):
        p = trtllm.plan(spec, gpu, trtllm.TrtllmSettings(backend="engine", tp=tp))
        named = p.weights_bytes + p.execution_context_bytes + p.runtime_buffers_bytes + p.decoder_bytes
        assert p.peak_bytes - named == trtllm.NON_TORCH_BYTES + (NON_TORCH_TP_BYTES if tp > 1 else 0)
