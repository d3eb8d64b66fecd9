"""Properties of the KV arithmetic that must hold for any layer, dtype, context and batch."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kvbudget.kvcache import bytes_per_sequence
from kvbudget.kvreport import kv_report
from kvbudget.model.hf_config import spec_from_config
from kvbudget.model.layers import MLA, ChunkedLocal, FullAttention, Layer, NoCache, RecurrentState, SlidingWindow
from kvbudget.units import ELEMENT_TYPES

dtypes = st.sampled_from(sorted(ELEMENT_TYPES.values(), key=lambda t: t.name))
heads = st.sampled_from([1, 2, 4, 8, 16, 32, 64])
head_dims = st.sampled_from([64, 80, 96, 128, 192, 256])
contexts = st.integers(min_value=1, max_value=1 << 20)
tps = st.sampled_from([1, 2, 4, 8, 16])

full = st.builds(FullAttention, heads, head_dims)
sliding = st.builds(SlidingWindow, heads, head_dims, window=st.integers(1, 1 << 16))
chunked = st.builds(ChunkedLocal, heads, head_dims, chunk=st.integers(1, 1 << 16))
mla = st.builds(MLA, st.sampled_from([128, 256, 512]), st.sampled_from([32, 64]))
state = st.builds(
    RecurrentState, st.sampled_from(["mamba", "mamba2", "gated_delta_net"]), st.integers(2, 8),
    st.integers(1, 1 << 14), st.integers(1, 128), st.integers(1, 1 << 14),
)
layers = st.one_of(full, sliding, chunked, mla, state, st.just(NoCache()))
models = st.lists(layers, min_size=1, max_size=12)


configs = st.fixed_dictionaries({
    "model_type": st.sampled_from(["llama", "qwen2", "gemma2", "mistral"]),
    "num_hidden_layers": st.integers(1, 64),
    "num_attention_heads": st.just(32),
    "num_key_value_heads": st.sampled_from([1, 2, 4, 8, 16, 32]),
    "head_dim": head_dims,
    "hidden_size": st.just(4096),
    "intermediate_size": st.just(11008),
    "vocab_size": st.just(32000),
    "sliding_window": st.integers(16, 8192),
    "max_position_embeddings": st.just(1 << 20),
    "torch_dtype": st.sampled_from(["bfloat16", "float16", "float32"]),
})


@given(configs, contexts, st.integers(1, 512), tps)
def test_kv_total_is_linear_in_batch(cfg: dict[str, object], s: int, b: int, tp: int) -> None:
    spec = spec_from_config(cfg)
    one = kv_report(spec, context=s, batch=1, tp=tp)
    many = kv_report(spec, context=s, batch=b, tp=tp)
    assert many.total_bytes == b * one.total_bytes == b * many.bytes_per_sequence
    row_one = one.table[one.batches.index(1)]
    for batch, row in zip(many.batches, many.table, strict=True):
        assert list(row) == [batch * x for x in row_one]


@given(models, contexts, contexts, dtypes, tps)
def test_kv_never_decreases_with_context(model: list[Layer], s1: int, s2: int, dtype: object, tp: int) -> None:
    lo, hi = sorted((s1, s2))
    assert bytes_per_sequence(model, lo, dtype, tp) <= bytes_per_sequence(model, hi, dtype, tp)  # type: ignore[arg-type]


@given(sliding, contexts, dtypes, tps)
def test_sliding_window_is_capped_by_the_window(layer: SlidingWindow, s: int, dtype: object, tp: int) -> None:
    cap = layer.bytes_per_sequence(layer.window, dtype, tp)  # type: ignore[arg-type]
    assert layer.bytes_per_sequence(s, dtype, tp) <= cap  # type: ignore[arg-type]
    if s >= layer.window:
        assert layer.bytes_per_sequence(s, dtype, tp) == cap  # type: ignore[arg-type]
    else:
        assert layer.bytes_per_sequence(s, dtype, tp) == s * layer.bytes_per_token(dtype, tp)  # type: ignore[arg-type]


@given(chunked, contexts, dtypes)
def test_chunked_attention_is_capped_by_the_chunk(layer: ChunkedLocal, s: int, dtype: object) -> None:
    assert layer.tokens_held(s) == min(s, layer.chunk)


@given(state, contexts, contexts, dtypes, tps)
def test_recurrent_state_is_constant_in_context(layer: RecurrentState, s1: int, s2: int, dtype: object, tp: int) -> None:
    assert layer.bytes_per_sequence(s1, dtype, tp) == layer.bytes_per_sequence(s2, dtype, tp) > 0  # type: ignore[arg-type]


@given(full, contexts, dtypes, tps)
def test_tp_never_drops_below_one_kv_head(layer: FullAttention, s: int, dtype: object, tp: int) -> None:
    per_rank = layer.bytes_per_sequence(s, dtype, tp)  # type: ignore[arg-type]
    one_head = FullAttention(1, layer.head_dim).bytes_per_sequence(s, dtype)  # type: ignore[arg-type]
    assert per_rank == max(1, layer.num_kv_heads // tp) * one_head or dtype.block_elems > 1  # type: ignore[attr-defined]
    assert per_rank >= one_head


@given(mla, contexts, dtypes, tps)
def test_mla_is_not_split_by_tp(layer: MLA, s: int, dtype: object, tp: int) -> None:
    assert layer.bytes_per_sequence(s, dtype, tp) == layer.bytes_per_sequence(s, dtype, 1)  # type: ignore[arg-type]
