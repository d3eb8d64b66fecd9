"""``--speculative-config`` read, and the one draft kvbudget models: multi-token prediction (MTP) from the
model's own checkpoint (DeepSeek-V3/R1, Qwen3-Next), as vLLM 0.33.0 builds it.

What vLLM does (paths relative to the ``vllm`` package of 0.33.0):

* config/speculative.py ``SpeculativeConfig.__post_init__``: every MTP alias (``deepseek_mtp``,
  ``qwen3_next_mtp`` ...) becomes ``method = "mtp"``; with no ``model`` the draft is the target's own checkpoint;
  ``hf_config_override`` maps deepseek_v3 to ``deepseek_mtp`` and qwen3_next to ``qwen3_next_mtp`` with
  ``n_predict = num_nextn_predict_layers``; ``_verify_and_get_draft_tp``: the draft runs at the target's TP.
  A model type with no MTP draft stops with "Unsupported speculative method: 'mtp'". ngram / suffix proposers
  load no model.
* models/deepseek_mtp.py ``DeepSeekMultiTokenPredictorLayer``: per MTP layer one ``DeepseekV2DecoderLayer`` (layer
  index num_hidden_layers and up: MoE, MLA attention), ``enorm`` and ``hnorm``, ``eh_proj`` (an ``nn.Linear``
  2h -> h: neither split over TP nor quantized) and ``shared_head`` (a norm, and a head that is shared).
  models/qwen3_next_mtp.py: one ``Qwen3NextDecoderLayer(layer_type="full_attention")`` per MTP layer, ``fc``
  (ColumnParallelLinear 2h -> h, quantized with the model), three norms.
* v1/spec_decode/llm_base_proposer.py ``_maybe_share_embeddings`` / ``_maybe_share_lm_head``: an MTP draft always
  takes the target's embedding and lm_head (and ``shared_head.head``); the draft's own copies are deleted inside
  gpu_model_runner.py ``load_model``'s DeviceMemoryProfiler, whose end reading is the allocated memory after a
  gc and cache flush (platforms/cuda.py ``get_current_memory_usage``): they are not in "Model loading took".
* The draft's attention layers register in the same static forward context as the target's, so
  ``get_kv_cache_spec`` gives them KV pages of their own in the one pool (one more MLA / full-attention layer).
* v1/kv_cache_interface.py: ``FullAttentionSpec.max_memory_usage_bytes`` is ``cdiv(max_model_len, block_size)``
  pages, with no lookahead: the ``num_lookahead_tokens`` (config/vllm.py: num_speculative_tokens for MTP) are
  reserved per step by the scheduler's ``allocate_slots``, not at start-up. A Mamba state
  (``MambaSpec``, model_executor/layers/mamba/abstract.py) holds ``num_speculative_blocks =
  num_speculative_tokens`` extra state pages per request: 1 + N pages (2 + N in prefix caching's align mode).
"""

from __future__ import annotations

import json
from functools import lru_cache

from ..._record import record, replace
from ...inputs import excerpt, whole
from ...model.layers import MLA, ChunkedLocal, FullAttention, SlidingWindow
from ...model.params import Inventory, Tensor
from ...model.spec import ModelSpec
from ...units import InputError

# config/speculative.py MTPModelTypes (0.33.0): every one is an alias of "mtp"
MTP_ALIASES = frozenset({
    "mtp", "deepseek_mtp", "qwen3_next_mtp", "mimo_mtp", "mimo_v2_mtp", "glm4_moe_mtp", "glm4_moe_lite_mtp",
    "glm_ocr_mtp", "ernie_mtp", "nemotron_h_mtp", "exaone_moe_mtp", "exaone4_5_mtp", "qwen4_exp_mtp", "qwen3_5_mtp",
    "longcat_flash_mtp", "bailing_hybrid_v3_mtp", "minimax_m3_mtp", "bailing_hybrid_mtp", "kimi_k3_mtp",
    "pangu_ultra_moe_mtp", "step3p5_mtp", "step5_mtp", "hy_v3_mtp", "hy_v4_mtp", "gemma4_mtp", "inkling_mtp",
    "glm5_next_mtp", "dots3_note_mtp",
})
# Proposers that load no model and keep no KV of their own (v1/spec_decode/ngram_proposer.py, suffix_decoding.py)
NO_DRAFT = frozenset({"ngram", "suffix"})


@record
class Speculative:
    """What ``--speculative-config`` asks for: the method as vLLM resolves it, the draft tokens per step, and
    whether a separate draft ``model`` was named."""

    method: str
    tokens: int
    model: str | None = None

    @property
    def modelled(self) -> bool:
        """kvbudget models its memory: MTP from the target's own checkpoint, or a proposer with no model."""
        return (self.method == "mtp" and self.model is None) or self.method in NO_DRAFT


def parse_speculative_config(value: object, label: str = "--speculative-config") -> Speculative:
    """A ``--speculative-config`` value (a JSON object as text, or the mapping of a --config file) as vLLM's
    SpeculativeConfig.__post_init__ resolves its method."""
    doc = value
    if isinstance(value, str):
        text = value.strip()
        if len(text) > 10_000:
            raise InputError(f"{label}: {len(text):,} characters: give a JSON object such as "
                             '{"method": "mtp", "num_speculative_tokens": 1}')
        try:
            doc = json.loads(text)
        except ValueError:
            raise InputError(f"{label} {excerpt(text)}: not a JSON object (vLLM reads it with json.loads); give e.g. "
                             '\'{"method": "mtp", "num_speculative_tokens": 1}\'') from None
    if not isinstance(doc, dict):
        raise InputError(f"{label}: must be a JSON object such as {{\"method\": \"mtp\", \"num_speculative_tokens\": 1}}")
    model = doc.get("model")
    model = str(model)[:300] if model not in (None, "") else None
    method = doc.get("method")
    method = str(method).strip().lower()[:64] if method not in (None, "") else None
    if method is None:  # __post_init__: inferred from the model ("ngram" names the n-gram proposer)
        method = "ngram" if model in ("ngram", "[ngram]") else "draft_model"
    if method in MTP_ALIASES:
        method = "mtp"
    if method == "[ngram]":
        method = "ngram"
    n = doc.get("num_speculative_tokens")
    tokens = 0 if n is None else whole(n, "num_speculative_tokens", 1, 1 << 16, label)
    missing = [key for key, absent in (("model", method not in _OWN_DRAFT), ("num_speculative_tokens", tokens == 0))
               if absent] if model is None else []
    if missing:
        # __post_init__: an EAGLE head or draft model has nothing to load without "model"; _verify_args: only a named
        # draft whose config has n_predict supplies the count
        said = ("num_speculative_tokens must be provided with speculative model unless the draft model config contains "
                "an n_predict parameter") if tokens == 0 else "num_speculative_tokens was provided but without speculative model"
        raise InputError(f"{label}: method {excerpt(method, 40)[1:-1]} needs {' and '.join(map(repr, missing))} "
                         f"(vLLM stops: \"{said}\"); add {'them' if len(missing) > 1 else 'it'}")
    return Speculative(method, tokens, model)


# Methods config/speculative.py SpeculativeConfig.__post_init__ (0.33.0) gives a draft of their own when "model" is
# absent: the target's checkpoint (mtp, dspark), a proposer with no weights (ngram, ngram_gpu, suffix), or the
# target's hidden states (extract_hidden_states). Any other method (eagle, eagle3, draft_model, a custom class ...)
# without a model stops the engine.
_OWN_DRAFT = frozenset({"mtp", "dspark", "ngram", "ngram_gpu", "suffix", "extract_hidden_states"})


def _full(layer: object) -> bool:
    """MLA or full attention (not its sliding-window or chunked kinds)."""
    return isinstance(layer, MLA) or (isinstance(layer, FullAttention)
                                      and not isinstance(layer, (SlidingWindow, ChunkedLocal)))


def _attention_layer(spec: ModelSpec) -> int:
    """The last decoder layer holding MLA or full attention: the kind of layer an MTP block repeats (DeepSeek: a
    MoE MLA layer past first_k_dense_replace; Qwen3-Next: a full-attention MoE layer)."""
    for i in range(spec.num_layers - 1, -1, -1):
        if any(_full(x) for x, at in zip(spec.layers, spec.layer_of, strict=True) if at == i):
            return i
    raise InputError(f"{spec.name}: no attention layer for an MTP block to repeat")


@lru_cache(maxsize=16, typed=True)
def with_mtp(spec: ModelSpec) -> ModelSpec:
    """``spec`` with its MTP draft: ``spec.mtp_layers`` blocks of its own attention-layer kind plus the fusion
    projection and three norms each, on the last pipeline stage (``inventory.tail``), and their attention layers'
    KV pages (counted with the last decoder layer's stage). Memoized."""
    if spec.mtp_layers < 1:
        raise InputError(f"{spec.name}: model_type {spec.model_type!r} has no MTP layers vLLM serves as a draft "
                         "(vLLM stops: \"Unsupported speculative method: 'mtp'\"); MTP is read for deepseek_v3 "
                         "and glm4_moe (num_nextn_predict_layers) and qwen3_next")
    at = _attention_layer(spec)
    block = spec.inventory.layers[at]
    hidden = spec.dims.hidden_size
    if spec.model_type == "qwen3_next":  # fc: ColumnParallelLinear(2h, h), quantized with the model
        fuse = Tensor("mlp", hidden, 2 * hidden, split="col", linear=True)
    else:  # eh_proj: nn.Linear(2h, h), whole on every rank and in the model's dtype
        fuse = Tensor("mlp", hidden, 2 * hidden)
    extra = (fuse, Tensor("norms", hidden, count=3))
    cache = tuple(x for x, i in zip(spec.layers, spec.layer_of, strict=True)
                  if i == at and _full(x))
    inv = spec.inventory
    tail = inv.tail + (block + extra) * spec.mtp_layers
    last = spec.num_layers - 1
    return replace(
        spec, inventory=Inventory(inv.head, inv.layers, tail),
        layers=spec.layers + cache * spec.mtp_layers, layer_of=spec.layer_of + (last,) * (len(cache) * spec.mtp_layers),
        notes=(*spec.notes, f"MTP draft: {spec.mtp_layers} layer(s) like decoder layer {at} plus a 2h x h projection "
                            "and 3 norms, sharing the target's embedding and lm_head (vLLM llm_base_proposer.py)"))
