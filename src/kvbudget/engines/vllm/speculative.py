"""``--speculative-config`` read, and the drafts kvbudget models as vLLM 0.33.0 builds them: multi-token prediction
(MTP) from the model's own checkpoint (DeepSeek-V3/R1, Qwen3-Next), and drafts with weights of their own (EAGLE and
EAGLE-3 heads, a separate draft model; below ``DRAFT_METHODS``).

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
  (ColumnParallelLinear 2h -> h, quantized with the model), three norms. models/qwen3_5_mtp.py (qwen3_5 and
  qwen3_5_moe -> ``qwen3_5_mtp``, ``n_predict = mtp_num_hidden_layers``): the same, with ``fc`` left unquantized
  under ModelOpt NVFP4.
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
from ...model.layers import MLA, ChunkedLocal, FullAttention, Layer, SlidingWindow
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
    draft_tp: int | None = None  # draft_tensor_parallel_size (None: the target's)

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
    tp = doc.get("draft_tensor_parallel_size")
    draft_tp = None if tp is None else whole(tp, "draft_tensor_parallel_size", 1, 1 << 12, label)
    return Speculative(method, tokens, model, draft_tp)


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
                         "and glm4_moe (num_nextn_predict_layers), qwen3_next and qwen3_5 (mtp_num_hidden_layers)")
    at = _attention_layer(spec)
    block = spec.inventory.layers[at]
    hidden = spec.dims.hidden_size
    fmt = spec.weight_format.name if spec.weight_format else ""
    if spec.model_type in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"):
        # fc: ColumnParallelLinear(2h, h), quantized with the model; qwen3_5_mtp.py keeps it unquantized under NVFP4
        fuse = Tensor("mlp", hidden, 2 * hidden, split="col",
                      linear=not (spec.model_type != "qwen3_next" and fmt == "nvfp4"))
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


# --- drafts with weights of their own: EAGLE, EAGLE-3, a separate draft model ------------------------------------
#
# What vLLM does (paths relative to the ``vllm`` package; 0.33.0 unless a release is named):
#
# * config/speculative.py ``SpeculativeConfig.__post_init__``: with a ``model``, the draft's ModelConfig is built
#   from that repo's config.json at the target's dtype. A method left out is "draft_model"; then the draft's name
#   decides: "eagle-" in it gives eagle, "eagle3" eagle3 (0.10.2 on; 0.10.1 took "eagle-" or "eagle3-" for eagle).
#   An EAGLE config is wrapped in EAGLEConfig (transformers_utils/configs/eagle.py: a nested "model" is the
#   config; the architecture is renamed Eagle{arch} / Eagle3{arch}); a speculators config (its
#   ``transformer_layer_config``) is flattened by SpeculatorsConfig. With no num_speculative_tokens the config's
#   ``n_predict`` is used, else vLLM stops. ``_verify_and_get_draft_tp``: draft_tensor_parallel_size is the
#   target's TP unless given, and must be 1 or the target's TP.
# * 0.10.2 - 0.14 stop on a draft_model ("Speculative decoding with draft model is not supported yet"); 0.15.0
#   added v1/spec_decode/draft_model.py, which requires the draft's TP to equal the target's and the same
#   vocabulary size (verify_equal_vocab_size_if_draft_model).
# * models/llama_eagle.py (EAGLE-1): ``fc`` (ReplicatedLinear 2h -> h, no bias, in the target's dtype, the draft's
#   own quantization: get_draft_quant_config), num_hidden_layers Llama decoder layers (the first without its
#   input_layernorm), no final norm, no lm_head. models/llama_eagle3.py (EAGLE-3): the first layer's qkv_proj
#   reads 2h (embedding and hidden state), every layer has a third norm (hidden_norm); ``fc`` reads
#   target_hidden_size x 3 auxiliary hidden states (num_aux_hidden_states, eagle_aux_hidden_state_layer_ids);
#   optional input_norm (norm_before_fc) and fc_norm; a final norm; its own ``lm_head`` of draft_vocab_size rows
#   (ParallelLMHead) and ``draft_id_to_target_id`` (int64, draft_vocab_size) when that differs from the target's.
# * v1/spec_decode/llm_base_proposer.py ``load_model``: the EAGLE draft runs at the target's TP (its VllmConfig is
#   the target's); ``_maybe_share_embeddings``: at PP 1 the draft takes the target's embedding when its checkpoint
#   has none or an identical one (EAGLE trains with the target's frozen embedding), ``_maybe_share_lm_head``: the
#   same for the lm_head (EAGLE-1 has none; EAGLE-3's is trained and kept). The copies given up are freed inside
#   load_model's DeviceMemoryProfiler: not in "Model loading took". draft_model.py shares neither: a whole second
#   model. Every one is loaded inside gpu_model_runner.py ``load_model`` ("Loading drafter model..."), so its
#   weights are in "Model loading took".
# * Its attention layers (prefix layers.{target layers + i}) register in the same forward context: get_kv_cache_spec
#   gives them pages of their own in the one pool, with their own KV heads and head size (kv_cache_utils.py unifies
#   page sizes or keeps each layer's page); no lookahead at start-up (as for MTP above).
# * The proposer's buffers, made in the runner's __init__ (before the profiler's baseline is read): hidden_states
#   (max_num_batched_tokens x draft hidden size, model dtype), input_ids (int32) and positions (int64) of
#   max_num_batched_tokens; gpu_model_runner.py ``_dummy_run`` runs ``drafter.dummy_run`` in the profiling run
#   and in each CUDA-graph capture (PIECEWISE graphs of the draft).

DRAFT_METHODS = frozenset({"eagle", "eagle3", "draft_model"})


@record
class Draft:
    """A draft with weights of its own as vLLM builds it from the draft repo's config.json: an EAGLE (``eagle``)
    or EAGLE-3 (``eagle3``) head, or a separate small model (``draft_model``, ``model`` its whole spec)."""

    method: str
    name: str
    source: str  # where its config.json came from (a URL, a catalog entry's source, a local path)
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    draft_vocab: int  # EAGLE-3: lm_head rows (draft_vocab_size; vocab_size when absent)
    fc_in: int  # EAGLE: 2h; EAGLE-3: target_hidden_size x auxiliary hidden states
    fc_norms: int  # EAGLE-3: elements of input_norm (norm_before_fc) and fc_norm
    qkv_bias: bool = False
    qk_norm: bool = False
    n_predict: int = 0
    model: ModelSpec | None = None


def draft_method(method: str, model: str, version: str | None) -> str:
    """The method vLLM settles on for a named draft (config/speculative.py __post_init__): eagle / eagle3 kept,
    a draft_model renamed after an EAGLE repo's name ("eagle-", "eagle3"; 0.10.1 and before: "eagle-" or "eagle3-"
    both give eagle)."""
    if method != "draft_model":
        return method
    from .settings import minor_patch

    name = model.lower()
    rel = minor_patch(version)
    if rel is not None and rel <= (10, 1):
        return "eagle" if "eagle-" in name or "eagle3-" in name else method
    if "eagle-" in name:
        return "eagle"
    return "eagle3" if "eagle3" in name else method


def _flat(raw: dict[str, object]) -> dict[str, object]:
    """An EAGLE config's model config: EAGLEConfig's nested "model", or a speculators config's
    transformer_layer_config (with its draft_vocab_size and architectures)."""
    inner = raw.get("model")
    if isinstance(inner, dict):
        return {**inner, **{k: v for k, v in raw.items() if k in ("draft_vocab_size", "n_predict")}}
    layer = raw.get("transformer_layer_config")
    if isinstance(layer, dict):
        return {**layer, **{k: v for k, v in raw.items() if k in ("draft_vocab_size", "architectures", "n_predict")}}
    return raw


def _whole(cfg: dict[str, object], key: str, name: str, default: int | None = None, hi: int = 1 << 22) -> int:
    value = cfg.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= hi:
        raise InputError(f"draft {excerpt(name, 60)}: config.json field {key!r} is {excerpt(str(value), 30)}: "
                         f"vLLM needs a whole number from 1 to {hi:,}; fix the draft's config.json")
    return value


def read_draft(method: str, name: str, raw: dict[str, object], source: str) -> Draft:
    """The draft vLLM builds for ``method`` from the config.json ``raw`` of the repo ``name`` (pure; the caller
    reads the file). A draft_model is the whole model its config describes (model/hf_config.py)."""
    n_predict = raw.get("n_predict")
    n = n_predict if isinstance(n_predict, int) and not isinstance(n_predict, bool) and 0 < n_predict < 1 << 16 else 0
    if method == "draft_model":
        from ...model.hf_config import spec_from_config

        spec = spec_from_config(raw, name=name)
        return Draft(method, name, source, spec.dims.hidden_size, spec.num_layers, 0, 0, 0, 0, spec.dims.vocab_size,
                     spec.dims.vocab_size, 0, 0, n_predict=n, model=spec)
    cfg = _flat(raw)
    archs = cfg.get("architectures")
    arch = " ".join(a for a in archs if isinstance(a, str)).lower() if isinstance(archs, list) else ""
    eagle3 = method == "eagle3" or "eagle3" in arch  # the head's build follows its architecture
    h = _whole(cfg, "hidden_size", name)
    heads = _whole(cfg, "num_attention_heads", name, hi=1 << 12)
    kv = _whole(cfg, "num_key_value_heads", name, heads, hi=heads)
    head_dim = _whole(cfg, "head_dim", name, h // heads, hi=1 << 12) if cfg.get("head_dim") is not None else h // heads
    vocab = _whole(cfg, "vocab_size", name)
    draft_vocab = _whole(cfg, "draft_vocab_size", name, vocab) if cfg.get("draft_vocab_size") is not None else vocab
    target_h = _whole(cfg, "target_hidden_size", name, h) if cfg.get("target_hidden_size") is not None else h
    eagle_cfg = cfg.get("eagle_config") if isinstance(cfg.get("eagle_config"), dict) else {}
    assert isinstance(eagle_cfg, dict)
    ids = eagle_cfg.get("eagle_aux_hidden_state_layer_ids")
    aux = cfg.get("num_aux_hidden_states") or (len(ids) if isinstance(ids, list) and ids else 3)
    aux = aux if isinstance(aux, int) and 0 < aux < 64 else 3
    fc_in = target_h * aux if eagle3 else 2 * h
    norm_before_fc = bool(eagle_cfg.get("norm_before_fc", cfg.get("norm_before_fc", False)))
    fc_norms = (fc_in if eagle3 and norm_before_fc else 0) + (target_h * aux if eagle3 and cfg.get("fc_norm") else 0)
    return Draft("eagle3" if eagle3 else "eagle", name, source, h, _whole(cfg, "num_hidden_layers", name, hi=64),
                 heads, kv, head_dim, _whole(cfg, "intermediate_size", name), vocab, draft_vocab, fc_in, fc_norms,
                 qkv_bias=bool(cfg.get("attention_bias", False)), qk_norm=cfg.get("model_type") == "qwen3",
                 n_predict=n)


def _eagle_tensors(d: Draft, target_vocab: int) -> tuple[Tensor, ...]:
    """The tensors an EAGLE / EAGLE-3 head keeps after load_model: the target's embedding and (EAGLE-1) lm_head
    shared. All in the model's dtype: the public heads carry no quantization of their own."""
    from ...model.params import attention, gated_mlp

    h = d.hidden
    out: list[Tensor] = [Tensor("mlp", h, d.fc_in)]  # fc: ReplicatedLinear, whole on every rank
    for i in range(d.layers):
        out += attention(h, d.heads, d.kv_heads, d.head_dim, qkv_bias=d.qkv_bias, qk_norm=d.qk_norm)
        if d.method == "eagle3" and i == 0:  # qkv_proj reads 2h: the embedding next to the hidden state
            out += [Tensor("attention", d.heads * d.head_dim, h, split="col"),
                    Tensor("attention", 2 * d.kv_heads * d.head_dim, h, split="kv", heads=d.kv_heads)]
        out += gated_mlp(h, d.intermediate)
        norms = 3 if d.method == "eagle3" else (1 if i == 0 else 2)  # EAGLE-1's first layer: no input_layernorm
        out.append(Tensor("norms", h, count=norms))
    if d.method == "eagle3":
        out.append(Tensor("norms", h))  # the final norm
        if d.fc_norms:
            out.append(Tensor("norms", d.fc_norms))
        out.append(Tensor("lm_head", d.draft_vocab, h, split="vocab"))
        if d.draft_vocab != target_vocab:  # draft_id_to_target_id: int64, four 16-bit elements each
            out.append(Tensor("lm_head", d.draft_vocab, count=4))
    return tuple(replace(t, linear=False) for t in out)


@lru_cache(maxsize=16, typed=True)
def with_draft(spec: ModelSpec, d: Draft) -> ModelSpec:
    """``spec`` with the draft vLLM loads beside it: its tensors on the last pipeline stage (``inventory.tail``)
    and its attention layers' KV pages in the one pool (counted with the last decoder layer's stage). Memoized."""
    if d.model is not None:
        if d.vocab != spec.dims.vocab_size:
            raise InputError(f"draft {excerpt(d.name, 60)}: vocabulary {d.vocab:,} vs the target's "
                             f"{spec.dims.vocab_size:,}: vLLM stops (\"Target and draft model should have the same "
                             "vocabulary size\", config/speculative.py); use a draft of the target's tokenizer")
        tensors = tuple(replace(t, linear=False) for t in d.model.inventory.tensors())
        cache: tuple[Layer, ...] = tuple(d.model.layers)
        what = (f"draft model {d.name}: {d.model.params / 1e9:.2f}B parameters at the target's TP, embedding and "
                "lm_head its own (vLLM v1/spec_decode/draft_model.py)")
    else:
        tensors = _eagle_tensors(d, spec.dims.vocab_size)
        cache = (FullAttention(d.kv_heads, d.head_dim),) * d.layers
        head = (f"its own lm_head of {d.draft_vocab:,} rows" if d.method == "eagle3" else "the target's lm_head")
        what = (f"{'EAGLE-3' if d.method == 'eagle3' else 'EAGLE'} head {d.name}: {d.layers} decoder layer(s) "
                f"({d.kv_heads} KV heads x {d.head_dim}), fc {d.fc_in} -> {d.hidden}, the target's embedding and "
                f"{head} (vLLM llm_base_proposer.py; assumes the checkpoint's embedding is absent or the target's)")
    inv = spec.inventory
    last = spec.num_layers - 1
    return replace(
        spec, inventory=Inventory(inv.head, inv.layers, inv.tail + tensors),
        layers=spec.layers + cache, layer_of=spec.layer_of + (last,) * len(cache),
        notes=(*spec.notes, what))


def drafter_buffers(d: Draft | None, tokens: int, dtype_bytes: int) -> int:
    """Bytes of the proposer's buffers held through the profiling run (llm_base_proposer.py __init__):
    hidden_states (tokens x hidden, model dtype), input_ids (int32) and positions (int64) of
    max_num_batched_tokens."""
    return 0 if d is None else tokens * (d.hidden * dtype_bytes + 4 + 8)
