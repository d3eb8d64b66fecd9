"""GGUF metadata and tensor list -> ModelSpec, with the exact bytes of every tensor as stored.

Keys are llama.cpp's (``{arch}.block_count``, ``{arch}.attention.head_count_kv`` — a number or
one per layer —, ``key_length``, ``value_length``, ``sliding_window``, ``kv_lora_rank``,
``ssm.*``). Which layers slide follows llama.cpp's per-architecture pattern
(``src/llama-model.cpp``: ``hparams.set_swa_pattern``) unless the file lists them
(``sliding_window_pattern`` as an array).
"""

from __future__ import annotations

from collections import Counter

from ..inputs import excerpt, whole
from .gguf_reader import GGUFHeader, GGUFTensor, read_gguf_header
from .hf_config import MAX_LAYERS, ConfigError
from .layers import MLA, ChunkedLocal, FullAttention, Layer, RecurrentState, SlidingWindow
from .params import Tensor
from .params import inventory as make_inventory
from .spec import Dims, ModelSpec
from .weights import WeightFormat

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from .params import Split

# llama.cpp's sliding-window period per architecture: in each period of n layers the last is global
# (set_swa_pattern(n); chunked attention for llama4, every 4th layer global).
_SWA_PERIOD = {"gemma2": 2, "gemma3": 6, "cohere2": 4, "gpt-oss": 2, "llama4": 4, "gemma3n": 5}
_LINEAR_ROLES = {"attention", "mlp", "experts", "shared_experts", "mamba"}
# Ranges of metadata values (generous: kvbudget refuses only what no model has): widths, head counts, tokens.
_DIM = 1 << 24
_HEADS = 1 << 16
_TOKENS = 1 << 31


def _role(name: str) -> str:
    part = name.split(".")[2] if name.startswith("blk.") and name.count(".") >= 2 else name.split(".")[0]
    if part in ("token_embd", "pos_embd", "token_types"):
        return "embeddings"
    if part == "output":
        return "lm_head"
    if "norm" in part:
        return "norms"
    if part == "ffn_gate_inp" or part.startswith("exp_probs"):
        return "router"
    if part.endswith("_exps"):
        return "experts"
    if part.endswith("_shexp") or "shexp" in part:
        return "shared_experts"
    if part.startswith("ssm_"):
        return "mamba"
    if part.startswith("attn_"):
        return "attention"
    return "mlp"


def _tensor(t: GGUFTensor) -> Tensor:
    cols = t.shape[0] if t.shape else 1
    rows = 1
    for d in t.shape[1:]:
        rows *= d
    role = _role(t.name)
    matrix = len(t.shape) >= 2
    split: Split = "vocab" if role in ("embeddings", "lm_head") and matrix else "col" if matrix else "none"
    return Tensor(role, rows, cols, split=split, linear=matrix and role in _LINEAR_ROLES, stored=t.nbytes)


def spec_from_gguf(path: str) -> ModelSpec:
    """Read a GGUF file's header into a ModelSpec (weights exact as stored)."""
    return spec_from_header(read_gguf_header(path), path)


def spec_from_header(h: GGUFHeader, name: str) -> ModelSpec:
    md = h.metadata
    arch = md.get("general.architecture")
    again = "convert the model again with llama.cpp's convert_hf_to_gguf.py"
    if arch is None:
        raise ConfigError(f"{name}: GGUF has no general.architecture: {again}")
    if not isinstance(arch, str) or not 0 < len(arch) <= 64:
        raise ConfigError(f"{name}: GGUF general.architecture {excerpt(arch)} is not an architecture name "
                          f"(a string of 1 to 64 characters such as 'llama'): {again}")

    def get(key: str, default: object = None) -> object:
        return md.get(f"{arch}.{key}", default)

    where = f"{name} (GGUF metadata)"

    def whole_of(v: object, key: str, lo: int, hi: int) -> int:
        return whole(v, f"{arch}.{key}", lo, hi, where=where)

    def num(key: str, default: int | None = None, lo: int = 0, hi: int = _DIM) -> int:
        """A whole number in [lo, hi]; of an array (one per layer), the largest."""
        v = get(key, default)
        if v is None:
            raise ConfigError(f"{where}: no {arch}.{key}: {again}")
        if isinstance(v, list):
            return max((whole_of(x, key, lo, hi) for x in v), default=lo)
        return whole_of(v, key, lo, hi)

    n = num("block_count", lo=1, hi=MAX_LAYERS)
    hidden = num("embedding_length", lo=1)
    heads = num("attention.head_count", 0, hi=_HEADS)
    kv_raw = get("attention.head_count_kv", heads)
    if isinstance(kv_raw, list):
        kv_per_layer = [whole_of(x, "attention.head_count_kv", 0, _HEADS) for x in kv_raw]
    else:
        kv_per_layer = [whole_of(kv_raw, "attention.head_count_kv", 0, _HEADS)] * n
    if len(kv_per_layer) < n:
        raise ConfigError(f"{where}: {arch}.attention.head_count_kv has {len(kv_per_layer)} entries for {n} layers")
    q_raw = get("attention.head_count", heads)
    q_per_layer = [whole_of(x, "attention.head_count", 0, _HEADS) for x in q_raw] if isinstance(q_raw, list) else [heads] * n
    # ggml_mul_mat broadcasts the KV heads over the query heads only where they divide them (ggml.c
    # ggml_can_mul_mat: GGML_ASSERT at the first graph); was a plan of a model llama.cpp aborts on, exit 0
    pairs = enumerate(zip(q_per_layer[:n], kv_per_layer[:n], strict=False))
    odd = next(((i, q, kv) for i, (q, kv) in pairs if q and kv and q % kv), None)
    if odd is not None:
        i, q, kv = odd
        raise ConfigError(f"{where}: layer {i} has {kv} KV heads ({arch}.attention.head_count_kv), which do not divide "
                          f"its {q} attention heads: llama.cpp stops on it; give the heads the model has")
    # llama.cpp's defaults (llama-model.cpp load_hparams): each of key_length and value_length is n_embd / n_head
    # when absent, so a V head is not the K head's size (MiniCPM3 writes key_length 96 alone: V heads of 64)
    head_k = num("attention.key_length", hidden // heads if heads else 0)
    head_v = num("attention.value_length", hidden // heads if heads else 0)
    if any(kv_per_layer) and not (head_k and head_v):
        key = f"{arch}.attention.{'value_length' if head_k else 'key_length'}"
        given = f"{key} is 0" if key in md else f"no {key}, and embedding_length / head_count gives 0"
        raise ConfigError(f"{where}: {given}, but the layers have KV heads: give their head size")
    window = num("attention.sliding_window", 0, hi=_TOKENS)
    ctx_train = num("context_length", 2048, lo=1, hi=_TOKENS)
    tokens = md.get("tokenizer.ggml.tokens")
    listed = md.get("tokenizer.ggml.tokens.length")
    vocab = int(listed) if isinstance(listed, int) else len(tokens) if isinstance(tokens, list) else num("vocab_size", 0, hi=_TOKENS)
    pattern = get("attention.sliding_window_pattern")
    ssm_inner = num("ssm.inner_size", 0)
    # Layers that reuse an earlier layer's KV (Gemma 3n, Gemma 4: attention.shared_kv_layers) hold none:
    # llama.cpp's n_layer_kv_from_start = n_layer - shared_kv_layers (src/llama-model.cpp)
    kv_from_start = n - num("attention.shared_kv_layers", 0, hi=n)
    # MTP / nextn blocks get KV like any layer (the main cache loops over every block), except in the
    # architectures whose memory filter drops them (llama-model.cpp create_memory; hybrid filter)
    nextn = num("nextn_predict_layers", 0, hi=n) if arch in _NEXTN_FILTERED else 0
    layers: list[Layer] = []
    layer_of: list[int] = []
    notes: list[str] = []
    # llama.cpp caches the MLA latent only for a GGUF converted for it (llama_hparams::is_mla(): key_length_mla and
    # value_length_mla both set, written by convert_hf_to_gguf.py since llama.cpp PR #12801, b5137). An older
    # DeepSeek-V2/V3 conversion keeps the decompressed per-head K (key_length) and V (value_length) of every head,
    # and every build caches those in full. MiniCPM3 and PLM carry a kv_lora_rank too but no loader of theirs reads
    # key_length_mla: llama.cpp always caches their heads in full (nothing to re-convert).
    mla = bool(num("attention.key_length_mla", 0) and num("attention.value_length_mla", 0))
    if num("attention.kv_lora_rank", 0) and not mla and arch in _MLA_ARCHS:
        notes.append(f"{arch}: converted before llama.cpp's MLA cache (no attention.key_length_mla): llama.cpp caches "
                     f"full per-head K ({head_k}) and V ({head_v}) for every head, not the {num('attention.kv_lora_rank')}"
                     "-wide latent; re-convert with a current convert_hf_to_gguf.py for the latent cache")
    if kv_from_start < n:
        notes.append(f"layers {kv_from_start}-{n - 1} reuse earlier layers' KV: no cache of their own")
    for il in range(n):
        kv = kv_per_layer[il] if il < kv_from_start and il < n - nextn else 0
        if ssm_inner and (kv == 0 or arch in ("mamba", "mamba2", "falcon-h1")):
            conv = num("ssm.conv_kernel", 4, lo=1, hi=1024)
            d_state = num("ssm.state_size", 16, lo=1)
            groups = num("ssm.group_count", 0, hi=_HEADS)
            ssm_heads = num("ssm.time_step_rank", 0, hi=_HEADS)
            if groups:  # Mamba-2: conv over x, B, C; state heads x head_dim x d_state
                head_dim = ssm_inner // max(ssm_heads, 1)
                layers.append(RecurrentState("mamba2", conv, ssm_inner + 2 * groups * d_state, ssm_heads,
                                             head_dim * d_state, "fp32", "fp32", groups, d_state))
            else:
                layers.append(RecurrentState("mamba", conv, ssm_inner, ssm_inner, d_state, "fp32", "fp32"))
            layer_of.append(il)
            if arch != "falcon-h1" or kv == 0:
                continue
        if kv == 0:
            continue
        if num("attention.kv_lora_rank", 0) and mla:
            lora = num("attention.kv_lora_rank")
            rope = num("rope.dimension_count", max(head_k - lora, 0))
            # each head's decompressed K (key_length_mla = qk_nope + qk_rope) and V (value_length_mla)
            nope = max(num("attention.key_length_mla") - rope, 0)
            layers.append(MLA(lora, rope, heads, nope, num("attention.value_length_mla")))
        elif window and _is_swa(arch, il, pattern):
            cls = ChunkedLocal if arch == "llama4" else SlidingWindow
            layers.append(cls(kv, head_k, head_v, window) if cls is SlidingWindow else ChunkedLocal(kv, head_k, head_v, window))
        else:
            layers.append(FullAttention(kv, head_k, head_v))
        layer_of.append(il)
    blocks: list[list[Tensor]] = [[] for _ in range(n)]
    head: list[Tensor] = []
    tail: list[Tensor] = []
    for t in h.tensors:
        if t.name.startswith("blk."):
            try:
                il = int(t.name.split(".")[1])
            except ValueError:
                raise ConfigError(f"{name}: tensor {t.name!r} has no layer number") from None
            if 0 <= il < n:
                blocks[il].append(_tensor(t))
                continue
            tail.append(_tensor(t))  # nextn / MTP layers past block_count
        elif t.name.startswith(("token_embd", "pos_embd", "token_types")):
            head.append(_tensor(t))
        else:
            tail.append(_tensor(t))
    types = Counter(t.type_name for t in h.tensors if len(t.shape) >= 2)
    main = types.most_common(1)[0][0] if types else "F16"
    ftype = md.get("general.file_type")
    if ftype is not None:
        ftype = whole(ftype, "general.file_type", 0, 1 << 16, where=where)
    label = f"GGUF {main}" + (f" (file_type {ftype})" if ftype is not None else "")
    n_experts = num("expert_count", 0, hi=_HEADS)
    used = num("expert_used_count", 0, hi=max(n_experts, 1))
    ffn = num("expert_feed_forward_length", 0) * max(used, 1) if n_experts else num("feed_forward_length", 4 * hidden)
    title = md.get("general.name")
    return ModelSpec(
        name=title if isinstance(title, str) and 0 < len(title) <= 200 else name, model_type=f"gguf:{arch}", layers=tuple(layers),
        layer_of=tuple(layer_of), inventory=make_inventory(tuple(head), [tuple(b) for b in blocks], tuple(tail)),
        dims=Dims(hidden, ffn, vocab, heads, head_k), native_dtype="fp16", max_context=ctx_train,
        weight_format=WeightFormat("stored", dense_dtype="fp16", label=label),
        sources=(("all", f"GGUF header of {name}"),), notes=tuple(notes),
        num_experts=n_experts, experts_per_token=used,
    )


# The architectures whose llama.cpp loader reads attention.key_length_mla (src/models/deepseek2.cpp, deepseek32.cpp,
# glm-dsa.cpp, kimi-linear.cpp, ggml-org/llama.cpp 2026-08): the ones a conversion can give the latent cache.
_MLA_ARCHS = frozenset({"deepseek2", "deepseek32", "glm-dsa", "kimi-linear"})
_NEXTN_FILTERED = frozenset({"qwen3next", "qwen35", "qwen35moe", "minimax-m2", "step35", "glm-dsa", "mimo2", "deepseek32"})


def _is_swa(arch: str, il: int, pattern: object) -> bool:
    if isinstance(pattern, list) and il < len(pattern):
        return bool(pattern[il])
    period = _SWA_PERIOD.get(arch, 0)
    if not period:
        return True  # a window with no pattern: every layer slides (e.g. mistral v0.1)
    return il % period < period - 1
