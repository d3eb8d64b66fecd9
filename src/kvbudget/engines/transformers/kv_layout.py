"""Hugging Face transformers, plain ``generate``: the bytes of the cache tensors, per layer kind.

Pure arithmetic over a ``ModelSpec``. The rules were read from the source of transformers 5.24.0
(``RULES_FROM``) and checked against real cache tensors of tiny random models on the CPU
(``tests/test_transformers_cache.py``). File and class names below are in that release.

How ``generate`` picks the cache (``generation/utils.py``, ``GenerationMixin``):

- ``_prepare_cache_for_generation``: ``cache_implementation`` None / ``"dynamic"`` builds a
  ``DynamicCache(config=...)``; ``"static"`` builds a ``StaticCache`` through
  ``_prepare_static_cache``. A Hub generation config's old default ``"hybrid"`` is unset, so models
  such as Gemma 2/3 and Llama 4 get the dynamic cache by default (``_prepare_generation_config``).
- A static cache is sized ``max_cache_len = max_length - 1`` (``generate``, step 7), i.e. prompt +
  ``max_new_tokens`` - 1, raised to ``generation_config.max_cache_len`` when that is larger, and to
  the largest size an earlier call on the same model used (``_previous_max_cache_length``).
- After ``generate(prompt of P tokens, max_new_tokens=k)`` the cache has seen ``P + k - 1`` tokens:
  the last token generated is never fed back. Pass that as ``seq_len``.

Which cache layer each decoder layer gets (``cache_utils.py``): ``get_layer_types_and_kwargs``
reads ``config.layer_types`` (or infers sliding / chunked / full from the config) and
``DYNAMIC_LAYER_TYPE_MAPPING`` / ``STATIC_LAYER_TYPE_MAPPING`` map each type to a class:

==================  =============================  ==========================================
kvbudget layer      DynamicCache                   StaticCache
==================  =============================  ==========================================
FullAttention       ``DynamicLayer``               ``StaticLayer``
SlidingWindow       ``DynamicSlidingWindowLayer``  ``StaticSlidingWindowLayer``
ChunkedLocal        ``DynamicSlidingWindowLayer``  ``StaticSlidingWindowLayer`` (window = chunk)
MLA                 ``DynamicLayer``               ``StaticLayer``
RecurrentState      ``LinearAttentionLayer``       ``LinearAttentionLayer``
attention + state   ``LinearAttentionAndFull...``  ``LinearAttentionAndStaticFull...`` (Falcon-H1)
NoCache             ``DummyLayer``                 ``DummyLayer``
==================  =============================  ==========================================

What each holds, for a batch of ``B`` (K and V are ``[B, kv_heads, tokens, head_dim]``):

- ``DynamicLayer.update`` concatenates: ``tokens = seq_len``.
- ``DynamicSlidingWindowLayer.update`` keeps ``full[:, :, -sliding_window + 1:]``: the last
  ``window - 1`` tokens, not ``window``. The kept tensors are *views* of the concatenation of the
  previous keys and the new step, so the storage they hold is ``min(seq_len - step, window - 1) +
  step`` tokens (``step``: tokens of the latest forward; 1 while decoding, the prompt right after
  prefill, when a long prompt stays held until the next step). With ``window == 1`` the slice is
  ``[0:]`` and every token is kept. The layer also holds ``_sliding_window_tensor``, an int64 scalar.
- ``StaticLayer.lazy_initialization`` allocates ``max_cache_len`` tokens (zeros) plus the int64
  scalar ``cumulative_length``; ``StaticSlidingWindowLayer.__init__`` uses ``min(sliding_window,
  max_cache_len)``. ``StaticLayer.update`` writes with ``index_copy_``: a full layer cannot take
  more than ``max_cache_len`` tokens.
- MLA (``models/deepseek_v3/modeling_deepseek_v3.py`` ``DeepseekV3Attention.forward``, and
  ``deepseek_v2`` alike) calls ``cache.update`` with the *compressed* latent viewed as one head:
  keys ``[B, 1, tokens, kv_lora_rank]``, values ``[B, 1, tokens, qk_rope_head_dim]``. The cache is
  the same latent vLLM keeps, not the decompressed per-head K/V of transformers 4.x.
- ``LinearAttentionLayer.lazy_initialization``: the conv state is ``[B, conv_dim, conv_kernel]``
  (the whole kernel width, where vLLM keeps ``kernel - 1``) in the model's dtype, and the recurrent
  state is ``zeros_like`` what the mixer returns: float32 for all three mixers kvbudget reads —
  ``torch_chunk_gated_delta_rule`` casts to fp32 (``qwen3_next``), ``mamba_selective_scan``
  promotes through its fp32 discretisation (``jamba``), ``mamba2_chunk_scan`` calls ``.float()``
  (``falcon_h1``). Shapes: GatedDeltaNet ``[B, v_heads, k_dim, v_dim]``, Mamba
  ``[B, d_inner, d_state]``, Mamba-2 ``[B, heads, head_dim, d_state]``. Neither depends on length.

Out of scope: tensor parallelism (``tp_plan``), ``"offloaded"`` / ``"offloaded_static"`` (layers
moved to the host), ``QuantizedCache``, beam search (the batch is ``num_beams x batch``) and
assisted decoding (``activate_past_recording``), and the PyTorch caching allocator's rounding.
"""

from __future__ import annotations

from ..._record import record
from ...kvcache import check_indexer_priced
from ...model.layers import (
    MLA,
    ChunkedLocal,
    FullAttention,
    Layer,
    NoCache,
    RecurrentState,
    SlidingWindow,
    SparseIndexer,
)
from ...model.spec import ModelSpec
from ...units import ElementType, InputError, element_type

RULES_FROM = "transformers 5.24.0"
CACHE_KINDS = ("dynamic", "static")
# transformers keeps K/V and conv states in the model's compute dtype: only these are modelled.
MODEL_DTYPES = ("fp32", "fp16", "bf16")
STATE_DTYPE = "fp32"  # recurrent (SSM / delta-rule) state, whatever the model dtype
SCALAR_BYTES = 8  # one 0-dim int64 tensor: cumulative_length (static), _sliding_window_tensor (dynamic sliding)

_HOLDERS = {
    ("full", "dynamic"): "DynamicLayer",
    ("full", "static"): "StaticLayer",
    ("sliding", "dynamic"): "DynamicSlidingWindowLayer",
    ("sliding", "static"): "StaticSlidingWindowLayer",
    ("state", "dynamic"): "LinearAttentionLayer",
    ("state", "static"): "LinearAttentionLayer",
    ("full+state", "dynamic"): "LinearAttentionAndFullAttentionLayer",
    ("full+state", "static"): "LinearAttentionAndStaticFullAttentionLayer",
    ("none", "dynamic"): "DummyLayer",
    ("none", "static"): "DummyLayer",
}


@record
class LayerCache:
    """The cache tensors of one entry of ``ModelSpec.layers`` (decoder layer ``layer``).

    ``*_bytes`` are ``numel x element size`` of the tensors; ``storage_bytes`` is what the storages
    behind them hold (more than the tensors only for a dynamic sliding window, whose tensors are
    views); ``scalar_bytes`` counts the int64 counters the cache layer keeps beside them.
    Falcon-H1 layers appear as two entries (attention, then state) of one ``holder``; the holder's
    counter is on the attention entry.
    """

    layer: int
    kind: str  # the kvbudget layer kind
    holder: str  # the transformers cache-layer class
    tokens: int  # token slots of K and V (0 for a state)
    key_bytes: int = 0
    value_bytes: int = 0
    conv_bytes: int = 0
    recurrent_bytes: int = 0
    scalar_bytes: int = 0
    storage_bytes: int = 0

    @property
    def tensor_bytes(self) -> int:
        return self.key_bytes + self.value_bytes + self.conv_bytes + self.recurrent_bytes

    @property
    def total(self) -> int:
        """Memory held: the storages plus the counters."""
        return self.storage_bytes + self.scalar_bytes


@record
class TransformersCachePlan:
    """What ``generate`` with a ``kind`` cache holds after ``seq_len`` tokens of ``batch`` sequences."""

    model: str
    kind: str  # "dynamic" | "static"
    batch: int
    seq_len: int
    max_cache_len: int  # static: the preallocated length; dynamic: 0
    dtype: str
    layers: tuple[LayerCache, ...]
    notes: tuple[str, ...] = ()
    rules_from: str = RULES_FROM

    @property
    def tensor_bytes(self) -> int:
        """Sum of ``numel x element size`` over keys, values, conv and recurrent states."""
        return sum(entry.tensor_bytes for entry in self.layers)

    @property
    def scalar_bytes(self) -> int:
        return sum(entry.scalar_bytes for entry in self.layers)

    @property
    def storage_bytes(self) -> int:
        return sum(entry.storage_bytes for entry in self.layers)

    @property
    def total(self) -> int:
        """Memory the cache holds: tensor storages plus int64 counters."""
        return self.storage_bytes + self.scalar_bytes

    def by_layer(self) -> dict[int, int]:
        """Held bytes per decoder layer (Falcon-H1's two entries summed)."""
        out: dict[int, int] = {}
        for entry in self.layers:
            out[entry.layer] = out.get(entry.layer, 0) + entry.total
        return out


def _model_dtype(name: str) -> ElementType:
    dtype = element_type(name)
    if dtype.name not in MODEL_DTYPES:
        raise InputError(
            f"transformers caches K/V in the model's dtype: use one of {', '.join(MODEL_DTYPES)}, not {name!r} "
            "(quantized caches are not modelled)"
        )
    return dtype


def _check(batch: int, seq_len: int, kind: str, max_cache_len: int | None, step: int) -> None:
    for label, value in (("batch", batch), ("seq_len", seq_len), ("step", step)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"{label} must be a positive integer, got {value!r}")
    if kind not in CACHE_KINDS:
        raise InputError(f"unknown transformers cache kind {kind!r}: use one of {', '.join(CACHE_KINDS)}")
    if step > seq_len:
        raise InputError(f"step ({step}) cannot exceed seq_len ({seq_len}): it is the tokens of the latest forward")
    if max_cache_len is not None:
        if kind != "static":
            raise InputError("max_cache_len applies to the static cache only: drop it, or use kind 'static'")
        if isinstance(max_cache_len, bool) or not isinstance(max_cache_len, int) or max_cache_len < 1:
            raise InputError(f"max_cache_len must be a positive integer, got {max_cache_len!r}")


def _window(layer: Layer) -> int:
    """The sliding_window transformers gives the cache layer (0: not a sliding layer)."""
    if isinstance(layer, SlidingWindow):
        return layer.window
    if isinstance(layer, ChunkedLocal):
        return layer.chunk  # get_layer_types_and_kwargs: chunked_attention -> sliding_window = attention_chunk_size
    return 0


def _kv_widths(layer: FullAttention | MLA) -> tuple[int, int, int]:
    """(heads, key width, value width) of the tensors handed to ``cache.update``."""
    if isinstance(layer, MLA):
        return 1, layer.kv_lora_rank, layer.qk_rope_head_dim
    return layer.num_kv_heads, layer.head_dim, layer.v_dim


def _attention(
    layer: FullAttention | MLA, batch: int, seq_len: int, kind: str, cache_len: int, step: int, dtype: ElementType
) -> tuple[int, int, int, int, int]:
    """(tokens, key bytes, value bytes, storage bytes, scalar bytes) of one attention entry."""
    heads, k_dim, v_dim = _kv_widths(layer)
    window = _window(layer)
    if kind == "static":
        tokens = min(window, cache_len) if window else cache_len
        stored, scalars = tokens, SCALAR_BYTES
    elif window:
        tokens = seq_len if window == 1 else min(seq_len, window - 1)
        stored = seq_len if window == 1 else min(seq_len - step, window - 1) + step
        scalars = SCALAR_BYTES
    else:
        tokens = stored = seq_len
        scalars = 0
    k_row = dtype.nbytes(k_dim)
    v_row = dtype.nbytes(v_dim)
    per_token = batch * heads
    storage = per_token * stored * (k_row + v_row)
    return tokens, per_token * tokens * k_row, per_token * tokens * v_row, storage, scalars


def _state(layer: RecurrentState, batch: int, dtype: ElementType) -> tuple[int, int]:
    """(conv bytes, recurrent bytes) of one state entry."""
    conv = batch * dtype.nbytes(layer.conv_kernel * layer.conv_dim)
    recurrent = batch * element_type(STATE_DTYPE).nbytes(layer.state_heads * layer.state_elems_per_head)
    return conv, recurrent


def _shape_of(spec: ModelSpec) -> dict[int, str]:
    """Per decoder layer: full / sliding / state / full+state / none, as transformers' layer_types."""
    out: dict[int, str] = {}
    for layer, index in zip(spec.layers, spec.layer_of, strict=True):
        if isinstance(layer, RecurrentState):
            part = "state"
        elif isinstance(layer, NoCache):
            part = "none"
        elif _window(layer):
            part = "sliding"
        else:
            part = "full"
        before = out.get(index)
        if before is None or before == "none":
            out[index] = part
        elif part != "none":
            pair = {before, part}
            if pair != {"full", "state"}:
                raise InputError(
                    f"{spec.name}: decoder layer {index} mixes {before} and {part} caches, which transformers has no "
                    "cache layer for"
                )
            out[index] = "full+state"
    return out


def _notes(spec: ModelSpec, kind: str, cache_len: int, dtype_note: str) -> list[str]:
    notes = [
        f"rules from the {RULES_FROM} source (cache_utils.py); seq_len counts the tokens fed to the model: "
        "prompt + max_new_tokens - 1 after generate",
    ]
    if dtype_note:
        notes.append(dtype_note)
    windows = sorted({_window(layer) for layer in spec.layers if _window(layer)})
    if windows and kind == "dynamic":
        notes.append(
            "DynamicSlidingWindowLayer keeps the last window - 1 tokens, as views of the latest step's concatenation: "
            "the storage holds that step too (the whole prompt right after prefill)"
        )
    if kind == "static":
        sliding = f"; sliding layers min(window, max_cache_len) (window {', '.join(map(str, windows))})" if windows else ""
        notes.append(
            f"StaticCache preallocates {cache_len:,} tokens per full layer, zero-filled, whatever length is reached{sliding}; "
            "generate sizes it max_length - 1 and never shrinks it on a later call with the same model"
        )
    if any(isinstance(layer, MLA) for layer in spec.layers):
        notes.append("MLA layers cache the compressed latent (kv_lora_rank) and the rope key as one head, as vLLM does")
    if any(isinstance(layer, RecurrentState) for layer in spec.layers):
        notes.append(
            "recurrent states are float32 and conv states keep the whole kernel width (vLLM keeps kernel - 1), "
            "whatever the length"
        )
    return notes


def plan(
    spec: ModelSpec,
    batch: int,
    seq_len: int,
    dtype_name: str,
    kind: str = "dynamic",
    max_cache_len: int | None = None,
    *,
    step: int = 1,
) -> TransformersCachePlan:
    """The cache transformers holds for ``batch`` sequences that have fed ``seq_len`` tokens each.

    ``dtype_name``: the model's dtype (fp32, fp16 or bf16), which is the K/V and conv-state dtype;
    "auto" takes the checkpoint's (``spec.native_dtype``), as ``from_pretrained`` does by default.
    ``kind``: "dynamic" (``DynamicCache``, the default of ``generate``) or "static" (``StaticCache``,
    ``cache_implementation="static"``). ``max_cache_len``: the static cache's length; ``None`` takes
    ``seq_len``, which is what ``generate`` allocates for a call that ends at ``seq_len``.
    ``step``: tokens of the latest forward (1 while decoding; the prompt length right after prefill);
    only the storage behind dynamic sliding-window layers depends on it.
    """
    _check(batch, seq_len, kind, max_cache_len, step)
    dtype_note = ""
    if dtype_name.strip().lower() == "auto":
        # PreTrainedModel.from_pretrained: no dtype means "auto", and _get_dtype takes config.dtype.
        dtype_name = spec.native_dtype
        dtype_note = f"dtype auto: the checkpoint's {spec.native_dtype}, as from_pretrained loads it by default"
    dtype = _model_dtype(dtype_name)
    cache_len = 0
    if kind == "static":
        cache_len = seq_len if max_cache_len is None else max_cache_len
        if seq_len > cache_len and any(
            isinstance(layer, (FullAttention, MLA)) and not _window(layer) for layer in spec.layers
        ):
            raise InputError(
                f"seq_len {seq_len:,} exceeds max_cache_len {cache_len:,}: a StaticCache full-attention layer cannot "
                "hold more; raise max_cache_len"
            )
    shapes = _shape_of(spec)
    entries: list[LayerCache] = []
    for layer, index in zip(spec.layers, spec.layer_of, strict=True):
        holder = _HOLDERS[(shapes[index], kind)]
        if isinstance(layer, RecurrentState):
            conv, recurrent = _state(layer, batch, dtype)
            entries.append(LayerCache(index, layer.kind, holder, 0, conv_bytes=conv, recurrent_bytes=recurrent,
                                      storage_bytes=conv + recurrent))
        elif isinstance(layer, NoCache):
            entries.append(LayerCache(index, layer.kind, holder, 0))
        elif isinstance(layer, SparseIndexer):  # DSA: refused where a plan is made (kvcache.check_indexer_priced)
            check_indexer_priced(spec, "transformers")
        else:
            tokens, keys, values, storage, scalars = _attention(layer, batch, seq_len, kind, cache_len, step, dtype)
            entries.append(LayerCache(index, layer.kind, holder, tokens, key_bytes=keys, value_bytes=values,
                                      scalar_bytes=scalars, storage_bytes=storage))
    return TransformersCachePlan(
        model=spec.name,
        kind=kind,
        batch=batch,
        seq_len=seq_len,
        max_cache_len=cache_len,
        dtype=dtype.name,
        layers=tuple(entries),
        notes=tuple(_notes(spec, kind, cache_len, dtype_note)),
    )
