"""GGUF quantization presets: the ggml type ``llama-quantize`` gives each tensor of a model.

A llama.cpp file type such as Q4_K_M is not one bit width: it is a default tensor type (q4_K)
plus rules that give some tensors more bits (the output matrix, attn_v and ffn_down in some
layers) and fall back to another type where a row is not a whole number of blocks. This module
follows those rules as llama.cpp (as vendored in llama-cpp-python 0.3.36, llama.cpp commit
0c1e57098bba43ac29e6e3b677cdceebdd22334f) writes them in src/llama-quant.cpp:
``llama_ftype_get_default_type`` (file type -> default type), ``tensor_allows_quantization``
(which tensors are quantized at all), ``llama_tensor_get_type_impl`` (the per-tensor rules),
``tensor_type_fallback`` (rows not divisible by the block) and the counters of
``init_quantize_state_counters`` (tensors are visited by layer, then by name:
``llama_model_loader::weight_name_comparer``). Block sizes and bytes per block are ggml's
(ggml/src/ggml.c ``type_traits``, ggml/src/ggml-common.h block structs). Tensors left
unquantized keep the type the converter gave them: float32 for vectors, norms, routers,
position tables and conv kernels (convert_hf_to_gguf: ``n_dims <= 1`` and the "always in
float32" list), 16-bit for anything else.

The GGUF tensor list is derived from kvbudget's inventory of the model (``params.py``): the
attention projections as attn_q / attn_k / attn_v / attn_output (one fused attn_qkv for the
architectures whose converter fuses them), the MLP as ffn_gate / ffn_up / ffn_down, experts as
one 3-D tensor per layer (``ffn_*_exps``), shared experts as ``ffn_*_shexp``, MLA's kv_b as
attn_k_b and attn_v_b, the embedding as token_embd and the LM head as output.
"""

from __future__ import annotations

from collections import Counter

from .._record import record
from ..units import GiB, InputError, MiB, excerpt
from .layers import MLA, FullAttention
from .params import Tensor

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Sequence

    from .spec import ModelSpec
    from .weights import WeightFormat


@record
class GGMLType:
    """A ggml tensor type: ``block`` elements of a row take ``size`` bytes."""

    name: str
    block: int
    size: int

    def nbytes(self, ne0: int, rows: int) -> int:
        return rows * (ne0 // self.block) * self.size


# ggml.c type_traits (blck_size, type_size); sizes from the block structs of ggml-common.h
GGML_TYPES: dict[str, GGMLType] = {
    t.name: t
    for t in (
        GGMLType("f32", 1, 4), GGMLType("f16", 1, 2), GGMLType("bf16", 1, 2),
        GGMLType("q4_0", 32, 18), GGMLType("q4_1", 32, 20), GGMLType("q5_0", 32, 22), GGMLType("q5_1", 32, 24),
        GGMLType("q8_0", 32, 34), GGMLType("iq4_nl", 32, 18), GGMLType("mxfp4", 32, 17),
        GGMLType("q2_K", 256, 84), GGMLType("q3_K", 256, 110), GGMLType("q4_K", 256, 144),
        GGMLType("q5_K", 256, 176), GGMLType("q6_K", 256, 210),
        GGMLType("iq2_xxs", 256, 66), GGMLType("iq2_xs", 256, 74), GGMLType("iq2_s", 256, 82),
        GGMLType("iq3_xxs", 256, 98), GGMLType("iq3_s", 256, 110), GGMLType("iq1_s", 256, 50),
        GGMLType("iq1_m", 256, 56), GGMLType("iq4_xs", 256, 136),
    )
}

# llama-quantize's file types (tools/quantize/quantize.cpp QUANT_OPTIONS): the default tensor
# type of each (llama_ftype_get_default_type) and the name llama.cpp prints for it
# (llama-model-loader.cpp llama_ftype_name, "file type = ...").
FTYPES: dict[str, tuple[str, str]] = {
    "Q4_0": ("q4_0", "Q4_0"), "Q4_1": ("q4_1", "Q4_1"), "Q5_0": ("q5_0", "Q5_0"), "Q5_1": ("q5_1", "Q5_1"),
    "Q8_0": ("q8_0", "Q8_0"),
    "Q2_K": ("q2_K", "Q2_K - Medium"), "Q2_K_S": ("q2_K", "Q2_K - Small"),
    "Q3_K_S": ("q3_K", "Q3_K - Small"), "Q3_K_M": ("q3_K", "Q3_K - Medium"), "Q3_K_L": ("q3_K", "Q3_K - Large"),
    "Q4_K_S": ("q4_K", "Q4_K - Small"), "Q4_K_M": ("q4_K", "Q4_K - Medium"),
    "Q5_K_S": ("q5_K", "Q5_K - Small"), "Q5_K_M": ("q5_K", "Q5_K - Medium"), "Q6_K": ("q6_K", "Q6_K"),
    "IQ4_NL": ("iq4_nl", "IQ4_NL - 4.5 bpw"), "IQ4_XS": ("iq4_xs", "IQ4_XS - 4.25 bpw"),
    "IQ3_S": ("iq3_s", "IQ3_S - 3.4375 bpw"), "IQ3_M": ("iq3_s", "IQ3_S mix - 3.66 bpw"),
    "IQ3_XS": ("iq3_s", "IQ3_XS - 3.3 bpw"), "IQ3_XXS": ("iq3_xxs", "IQ3_XXS - 3.0625 bpw"),
    "IQ2_M": ("iq2_s", "IQ2_M - 2.7 bpw"), "IQ2_S": ("iq2_xs", "IQ2_S - 2.5 bpw"),
    "IQ2_XS": ("iq2_xs", "IQ2_XS - 2.3125 bpw"), "IQ2_XXS": ("iq2_xxs", "IQ2_XXS - 2.0625 bpw"),
    "IQ1_M": ("iq1_m", "IQ1_M - 1.75 bpw"), "IQ1_S": ("iq1_s", "IQ1_S - 1.5625 bpw"),
    "MXFP4_MOE": ("mxfp4", "MXFP4 MoE"),
    "F16": ("f16", "F16"), "BF16": ("bf16", "BF16"), "F32": ("f32", "all F32"),
}
_ALIASES = {"Q3_K": "Q3_K_M", "Q4_K": "Q4_K_M", "Q5_K": "Q5_K_M", "FP16": "F16", "FP32": "F32", "FLOAT16": "F16",
            "BFLOAT16": "BF16", "FLOAT32": "F32"}
# file types whose quantization needs an importance matrix (llama-quantize refuses them without
# one: tensor_requires_imatrix), so they are planned as made with --imatrix
_NEED_IMATRIX = frozenset({"IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ3_XXS", "IQ3_XS", "Q2_K_S"})
_IQ_LOW = frozenset({"IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ2_S", "IQ2_M", "IQ1_M"})
_FALLBACK = {  # tensor_type_fallback: a 256-block type whose row is not whole blocks
    "iq1_s": "iq4_nl", "iq1_m": "iq4_nl", "iq2_xxs": "iq4_nl", "iq2_xs": "iq4_nl", "iq2_s": "iq4_nl",
    "iq3_xxs": "iq4_nl", "iq3_s": "iq4_nl", "iq4_xs": "iq4_nl",
    "q2_K": "q4_0", "q3_K": "q4_0", "q4_K": "q5_0", "q5_K": "q5_1", "q6_K": "q8_0",
}


def other_engine(text: str) -> InputError:
    """The error for a GGUF file type given to an engine that does not read GGUF."""
    return InputError(f"{text.strip()[:40]} is a llama.cpp GGUF type: use --engine llama.cpp, or give the .gguf file")


def is_preset(text: str) -> bool:
    """Whether ``text`` names a llama.cpp quantized file type (Q4_K_M, iq4_xs, q8_0, ...)."""
    key = text.strip().upper().replace("-", "_")
    key = _ALIASES.get(key, key)
    return key in FTYPES and key not in ("F16", "BF16", "F32")


def parse_ftype(text: str) -> str:
    """The canonical llama.cpp file type name for ``text`` (``q4_k_m`` -> ``Q4_K_M``)."""
    key = text.strip().upper().replace("-", "_")
    key = _ALIASES.get(key, key)
    if key not in FTYPES:
        raise InputError(f"unknown llama.cpp file type {excerpt(text, 42)}: use one of {', '.join(FTYPES)}")
    return key


@record
class QTensor:
    """One tensor of the GGUF file as llama-quantize visits it.

    ``ne0`` is the row length (ggml's first dimension), ``rows`` the rows of all experts
    together, ``experts`` ggml's third dimension. ``category`` is llama-quant.cpp's
    (``tensor_get_category``): output, token_embd, attn_qkv, attn_kv_b, attn_v, attn_k, attn_q,
    attn_output, ffn_up, ffn_gate, ffn_down or other. ``keep`` is the type of a tensor that is
    not quantized (``""``: it is quantized).
    """

    name: str
    category: str
    layer: int  # -1: outside the repeating blocks
    ne0: int
    rows: int
    experts: int = 1
    keep: str = ""


@record
class QuantModel:
    """What llama_tensor_get_type_impl reads from the model besides the tensor."""

    arch: str  # llama.cpp's architecture name where a rule names one (llama, qwen2, falcon, ...)
    n_layer: int
    n_gqa: int
    n_expert: int
    is_70b: bool = False


def _more_bits(i: int, n: int) -> bool:
    """use_more_bits: the first and last eighth of the layers, and every third one between."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def _fallback(ne0: int, target: str) -> str:
    t = GGML_TYPES[target]
    if ne0 % t.block == 0:
        return target
    to = _FALLBACK.get(target, target)
    return to if ne0 % GGML_TYPES[to].block == 0 else "f16"


def choose_types(tensors: Sequence[QTensor], ftype: str, model: QuantModel, imatrix: bool | None = None) -> tuple[str, ...]:
    """The ggml type of each tensor (in the order given) in a ``ftype`` file of ``model``.

    ``imatrix``: whether llama-quantize is given an importance matrix (None: only for the file
    types that need one)."""
    ftype = parse_ftype(ftype)
    default = FTYPES[ftype][0]
    has_imatrix = ftype in _NEED_IMATRIX if imatrix is None else imatrix
    quantized = GGML_TYPES[default].block > 1
    tied = not any(t.category == "output" for t in tensors)
    n_wv = sum(t.category in ("attn_v", "attn_qkv", "attn_kv_b") and not t.keep for t in tensors)
    counters = {"wv": 0, "ffn_down": 0, "ffn_gate": 0, "ffn_up": 0}
    order = sorted(range(len(tensors)), key=lambda i: (tensors[i].layer, tensors[i].name))
    out = [""] * len(tensors)
    for i in order:
        t = tensors[i]
        if t.keep:
            out[i] = t.keep
        elif not quantized:
            out[i] = default
        else:
            out[i] = _fallback(t.ne0, _rule(t, ftype, default, model, tied, has_imatrix, n_wv, counters))
    return tuple(out)


def _rule(t: QTensor, ftype: str, new: str, m: QuantModel, tied: bool, has_imatrix: bool, n_wv: int,
          counters: dict[str, int]) -> str:
    """llama_tensor_get_type_impl for one tensor (before the row fallback)."""
    cat, n_exp, gqa = t.category, m.n_expert, m.n_gqa
    falcon = m.arch == "falcon"

    def layer(counter: str) -> tuple[int, int]:
        # experts are not stored in layer order in every file: with experts the layer is the name's
        i = t.layer if max(1, n_exp) > 1 else counters[counter]
        return i, m.n_layer

    if cat == "output" or (tied and cat == "token_embd"):
        if ftype == "MXFP4_MOE" or falcon or t.ne0 % GGML_TYPES[new].block:
            return "q8_0"
        if ftype in ("IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ2_S", "IQ2_M", "IQ1_M"):
            return "q5_K"
        return new if new == "q8_0" else "q6_K"
    if ftype == "MXFP4_MOE":
        return "mxfp4" if t.experts > 1 else "q8_0"
    if cat == "token_embd":
        if ftype in ("IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ1_M"):
            return "q2_K"
        if ftype in ("IQ2_S", "IQ2_M", "IQ3_XXS"):
            return "iq3_s"
        return new
    wv_like = cat in ("attn_v", "attn_qkv", "attn_kv_b")
    if ftype in _IQ_LOW:
        if wv_like:
            counters["wv"] += 1
            if gqa >= 4 or n_exp >= 4:
                return "q4_K"
            return "iq3_s" if ftype in ("IQ2_S", "IQ2_M") else "q2_K"
        if n_exp == 8 and cat == "attn_k":
            return "q4_K"
        if cat == "ffn_down":
            first = counters["ffn_down"] < m.n_layer // 8
            counters["ffn_down"] += 1
            if first:
                return "iq3_s" if ftype in ("IQ2_S", "IQ2_M") else "q2_K"
            return new
        if cat == "attn_output":
            if n_exp == 8:
                return "q5_K"
            if ftype in ("IQ1_S", "IQ1_M"):
                return "iq2_xxs"
            if ftype in ("IQ2_S", "IQ2_M"):
                return "iq3_s"
        return new
    if wv_like:
        i_wv = counters["wv"]
        counters["wv"] += 1
        if ftype == "Q2_K":
            new = "q4_K" if gqa >= 4 else "q3_K"
        elif ftype == "Q2_K_S" and gqa >= 4:
            new = "q4_K"
        elif ftype == "IQ3_XXS":
            new = "q4_K" if gqa >= 4 else "iq3_s" if not has_imatrix else "iq3_xxs"
        elif (ftype in ("IQ3_XS", "IQ3_S") and gqa >= 4) or ftype == "IQ3_M":
            new = "q4_K"
        elif ftype == "Q3_K_M":
            new = "q5_K" if i_wv < 2 else "q4_K"
        elif ftype == "Q3_K_L" or (ftype in ("IQ4_NL", "IQ4_XS") and gqa >= 4):
            new = "q5_K"
        elif ftype in ("Q4_K_M", "Q5_K_M") and _more_bits(i_wv, n_wv):
            new = "q6_K"
        elif ftype == "Q4_K_S" and i_wv < 4:
            new = "q5_K"
        if m.is_70b and new in ("q3_K", "q4_K"):
            new = "q5_K"  # 70B: attn_v is 8x smaller than attn_q, so more bits cost little
        if n_exp == 8:
            new = "q8_0"
        return new
    if cat in ("attn_k", "attn_q"):
        if cat == "attn_k" and n_exp == 8:
            return "q8_0"  # as attn_v: the 8-expert model spends ~128 MB on it
        return {"IQ3_XS": "iq3_xxs", "IQ3_XXS": "iq2_s"}.get(ftype, new)
    if cat == "ffn_down":
        i, n = layer("ffn_down")
        counters["ffn_down"] += 1
        return _ffn_down(ftype, new, i, n, falcon, n_exp, has_imatrix)
    if cat == "attn_output":
        if falcon:
            return "q4_K" if ftype == "Q3_K_L" else new
        if n_exp == 8:
            bump = ("Q2_K", "IQ3_XS", "IQ3_XXS", "Q3_K_S", "Q3_K_M", "IQ4_NL", "Q4_K_S", "Q4_K_M", "IQ3_S", "IQ3_M", "IQ4_XS")
            return "q5_K" if ftype in bump else new
        return {"Q2_K": "q3_K", "IQ3_XXS": "iq3_s", "Q3_K_M": "q4_K", "Q3_K_L": "q5_K", "IQ3_M": "q4_K"}.get(ftype, new)
    if cat in ("ffn_gate", "ffn_up"):
        i, n = layer(cat)
        counters[cat] += 1
        if ftype == "IQ3_XS" and n // 8 <= i < 7 * n // 8:
            return "iq3_xxs"
    return new


def _ffn_down(ftype: str, new: str, i: int, n: int, falcon: bool, n_exp: int, has_imatrix: bool) -> str:
    if ftype == "Q2_K":
        return "q3_K"
    if ftype == "Q2_K_S":
        return "q4_K" if i < n // 8 else new
    if ftype == "IQ3_XXS" and not has_imatrix:
        return "q4_K" if i < n // 8 else "q3_K"
    if ftype == "Q3_K_M":
        if i < n // 16:
            return "q5_K"
        return "q4_K" if not falcon or _more_bits(i, n) else "q3_K"
    if ftype == "IQ3_M" and (i < n // 8 or (n_exp == 8 and _more_bits(i, n))):
        return "q4_K"
    if ftype == "IQ3_M":
        return new
    if ftype == "Q3_K_L":
        return "q4_K" if falcon else "q5_K"
    if ftype == "Q4_K_M":
        if falcon:
            return "q6_K" if i < n // 16 else "q5_K" if _more_bits(i, n) else "q4_K"
        return "q6_K" if _more_bits(i, n) else new
    if ftype in ("IQ4_NL", "IQ4_XS") and i < n // 8 and not has_imatrix:
        return "q5_K"
    if ftype == "Q5_K_M" and _more_bits(i, n):
        return "q6_K"
    if ftype == "Q4_K_S" and not falcon and i < n // 8:
        return "q5_K"
    if ftype in ("Q4_0", "Q5_0") and has_imatrix and i < n // 8:
        return "q4_1" if ftype == "Q4_0" else "q5_1"
    return new


# --- the GGUF tensor list of a model, from its inventory -------------------------------------

# architectures whose GGUF holds one fused attn_qkv (convert_hf_to_gguf keeps the checkpoint's
# fused projection): GPT-NeoX, GPT-2, StarCoder, Falcon, BLOOM, MPT, Phi-3/Phi-4, DBRX
_FUSED_QKV = frozenset({"gpt_neox", "gpt2", "gpt_bigcode", "falcon", "bloom", "mpt", "phi3", "dbrx"})
_FUSED_GATE_UP = frozenset({"phi3"})  # gate_up_proj stays one ffn_up of twice the rows
# llama.cpp architecture names where a rule depends on it (HF model_type -> llama.cpp arch)
_ARCH = {"mistral": "llama", "llama": "llama", "qwen2": "qwen2", "olmo": "olmo", "falcon": "falcon"}


def quant_model(spec: ModelSpec) -> QuantModel:
    arch = _ARCH.get(spec.model_type, spec.model_type)
    heads = spec.dims.num_attention_heads
    first = next((x for x, il in zip(spec.layers, spec.layer_of, strict=True) if il == 0), None)
    kv = first.num_kv_heads if isinstance(first, FullAttention) else 1 if isinstance(first, MLA) else 0
    gqa = heads // kv if kv else 0
    n = spec.num_layers
    # LLM_TYPE_70B (src/models/llama.cpp, qwen2.cpp, olmo.cpp): 80 layers, GQA for llama
    is_70b = n == 80 and (arch in ("qwen2", "olmo") or (arch == "llama" and gqa > 1))
    return QuantModel(arch=arch, n_layer=n, n_gqa=gqa, n_expert=spec.num_experts, is_70b=is_70b)


def _f32(name: str, layer: int, t: Tensor) -> list[tuple[QTensor, int]]:
    return [(QTensor(name, "other", layer, t.cols, t.rows, keep="f32"), t.count)]


def _block(il: int, block: tuple[Tensor, ...], arch: str, mla_heads: int, dense: str) -> list[tuple[QTensor, int]]:
    """The GGUF tensors of one layer block, each with how many of it there are. ``mla_heads``:
    the attention heads of an MLA layer (0: not MLA)."""
    out: list[tuple[QTensor, int]] = []
    p = f"blk.{il}."
    kv = [t for t in block if t.role == "attention" and t.linear and t.split == "kv"]
    attn_cols = [t for t in block if t.role == "attention" and t.linear and t.split == "col"]
    q_lora = sum(t.role == "attention" and t.linear and t.split == "none" for t in block) == 2
    qkv_rows = 0
    seen_kv = 0
    for t in block:
        if t.cols == 1 or t.rows == 1 or t.role in ("norms", "router"):
            # biases, norms, routers (ffn_gate_inp): float32, never quantized
            out += _f32(f"{p}ffn_gate_inp.weight" if t.role == "router" else f"{p}{t.role}_norm.weight", il, t)
            continue
        if t.role == "vision":  # the vision tower goes to the separate mmproj file
            continue
        if not t.linear:  # conv kernels, A_log, position tables: float32 as converted
            out.append((QTensor(f"{p}{t.role}_table.weight", "other", il, t.cols, t.rows, keep="f32"), t.count))
            continue
        name, cat = f"{p}{t.role}.weight", "other"
        if t.role == "attention" and kv and t.split in ("col", "kv") and arch in _FUSED_QKV:
            qkv_rows += t.rows * t.count
            if t is kv[-1]:
                out.append((QTensor(f"{p}attn_qkv.weight", "attn_qkv", il, t.cols, qkv_rows), 1))
            continue
        if t.role == "attention" and kv and t.split == "kv":
            name, cat = (f"{p}attn_k.weight", "attn_k") if seen_kv == 0 else (f"{p}attn_v.weight", "attn_v")
            seen_kv += 1
        elif t.role == "attention" and kv and t.split == "col" and t is attn_cols[0]:
            name, cat = f"{p}attn_q.weight", "attn_q"
        elif t.role == "attention" and (kv or mla_heads) and t.split == "row":
            name, cat = f"{p}attn_output.weight", "attn_output"
        elif t.role == "attention" and mla_heads and t.split == "col" and t is attn_cols[-1]:
            # kv_b is written as attn_k_b (a row of qk_nope per latent element and head) and
            # attn_v_b (a row of the latent per v element and head): 3-D, one slice per head
            o = next(x for x in block if x.role == "attention" and x.split == "row")
            v = o.cols // mla_heads
            nope = t.rows // mla_heads - v
            out.append((QTensor(f"{p}attn_k_b.weight", "other", il, nope, t.cols * mla_heads, mla_heads), 1))
            out.append((QTensor(f"{p}attn_v_b.weight", "other", il, t.cols, v * mla_heads, mla_heads), 1))
            continue
        elif t.role == "attention" and mla_heads and t.split == "col" and not q_lora:
            name, cat = f"{p}attn_q.weight", "attn_q"  # without q_lora, q is attn_q (else attn_q_b: other)
        elif t.role in ("mlp", "shared_experts") and t.split == "col":
            suffix = "_shexp" if t.role == "shared_experts" else ""
            if t.count == 2 and arch not in _FUSED_GATE_UP:
                out.append((QTensor(f"{p}ffn_gate{suffix}.weight", "ffn_gate", il, t.cols, t.rows), 1))
                out.append((QTensor(f"{p}ffn_up{suffix}.weight", "ffn_up", il, t.cols, t.rows), 1))
                continue
            out.append((QTensor(f"{p}ffn_up{suffix}.weight", "ffn_up", il, t.cols, t.rows * t.count), 1))
            continue
        elif t.role in ("mlp", "shared_experts") and t.split == "row":
            name, cat = f"{p}ffn_down{'_shexp' if t.role == 'shared_experts' else ''}.weight", "ffn_down"
        elif t.role == "experts" and t.split == "col":
            n = t.count // 2
            out.append((QTensor(f"{p}ffn_gate_exps.weight", "ffn_gate", il, t.cols, t.rows * n, n), 1))
            out.append((QTensor(f"{p}ffn_up_exps.weight", "ffn_up", il, t.cols, t.rows * n, n), 1))
            continue
        elif t.role == "experts" and t.split == "row":
            out.append((QTensor(f"{p}ffn_down_exps.weight", "ffn_down", il, t.cols, t.rows * t.count, t.count), 1))
            continue
        out.append((QTensor(name, cat, il, t.cols, t.rows), t.count))
    return out


@record
class GGUFWeights:
    """A model's weights as a ``ftype`` GGUF: every tensor with its type, and the bytes where
    llama.cpp puts them."""

    ftype: str
    tensors: tuple[QTensor, ...]
    types: tuple[str, ...]
    head_bytes: int  # token_embd (and position tables): llama.cpp keeps them on the CPU
    layer_bytes: tuple[int, ...]
    tail_bytes: int  # output norm and output
    elements: int
    token_embd_bytes: int = 0  # the token embedding alone: a tied output layer is a second copy of it
    sections: tuple[int, ...] = ()  # each tensor's place: -1 before the layers, a layer, or len(layer_bytes) after

    @property
    def total(self) -> int:
        return self.head_bytes + sum(self.layer_bytes) + self.tail_bytes

    def type_counts(self) -> dict[str, int]:
        return dict(Counter(self.types))

    def log_lines(self) -> tuple[str, ...]:
        """What llama.cpp prints when it loads the file (llama-model-loader.cpp): the tensors of
        each quantized type, the file type and the tensors' bytes ("file size") with bits per weight."""
        counts = sorted(self.type_counts().items(), key=lambda kv: _TYPE_ORDER.get(kv[0], 99))
        lines = [f"llama_model_loader: - type {ty:>4}: {n:4d} tensors" for ty, n in counts if GGML_TYPES[ty].block > 1]
        lines.append(f"print_info: file type   = {FTYPES[self.ftype][1]}")
        size = f"{self.total / MiB:.2f} MiB" if self.total < GiB else f"{self.total / GiB:.2f} GiB"
        lines.append(f"print_info: file size   = {size} ({self.total * 8 / self.elements:.2f} BPW)")
        return tuple(lines)


# the order llama.cpp lists types in (ggml_type enum order)
_TYPE_ORDER = {name: i for i, name in enumerate((
    "f32", "f16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K",
    "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s", "iq4_nl", "iq3_s", "iq2_s", "iq4_xs", "iq1_m", "bf16", "mxfp4"))}


def _entries(spec: ModelSpec) -> list[tuple[QTensor, int, int]]:
    """The GGUF tensors of ``spec`` in file order (the token embedding, the layers, the output), each with how many of
    it there are and where it is (-1 before the layers, its layer, or the layer count after them)."""
    inv = spec.inventory
    dense = "bf16" if spec.native_dtype in ("bf16", "bfloat16") else "f16"
    heads = spec.dims.num_attention_heads
    mla_layers = {il for x, il in zip(spec.layers, spec.layer_of, strict=True) if isinstance(x, MLA)}
    n = len(inv.layers)
    entries: list[tuple[QTensor, int, int]] = []  # tensor, how many, where (-1 head, n tail, else its layer)
    vocab_seen = False
    for t in inv.head:
        if t.role == "vision":  # the vision tower goes to the separate mmproj file (convert_hf_to_gguf.py --mmproj)
            continue
        if t.role == "embeddings" and t.split == "vocab" and t.cols > 1 and not vocab_seen:
            vocab_seen = True
            entries.append((QTensor("token_embd.weight", "token_embd", -1, t.cols, t.rows), t.count, -1))
        elif t.cols == 1 or t.rows == 1 or not t.linear:
            entries.append((QTensor("position_embd.weight", "other", -1, t.cols, t.rows, keep="f32"), t.count, -1))
        else:
            entries.append((QTensor("token_embd_proj.weight", "other", -1, t.cols, t.rows), t.count, -1))
    for il, block in enumerate(inv.layers):
        for q, count in _block(il, block, spec.model_type, heads if il in mla_layers else 0, dense):
            entries.append((q, count, il))
    for t in inv.tail:
        if t.role == "vision":
            continue
        if t.role == "lm_head" and t.cols > 1 and t.rows > 1:
            entries.append((QTensor("output.weight", "output", -1, t.cols, t.rows), t.count, n))
        elif t.cols == 1 or t.rows == 1 or t.role == "norms":
            entries.append((QTensor("output_norm.weight", "other", -1, t.cols, t.rows, keep="f32"), t.count, n))
        else:
            entries.append((QTensor("output_proj.weight", "other", -1, t.cols, t.rows), t.count, n))
    return entries


EXPERT_NAMES = ("_exps.", "_chexps.")  # the routed experts' tensors (ffn_up_exps.weight ...)


def tensor_names(spec: ModelSpec) -> tuple[tuple[str, int, int], ...]:
    """Every GGUF tensor of ``spec`` in file order: its name, its elements and where it is (as ``_entries``)."""
    return tuple((q.name, q.ne0 * q.rows, section) for q, count, section in _entries(spec) for _ in range(count))


def gguf_weights(spec: ModelSpec, ftype: str, imatrix: bool | None = None) -> GGUFWeights:
    """``spec``'s weights as llama-quantize writes them in a ``ftype`` file, tensor by tensor."""
    ftype = parse_ftype(ftype)
    n = len(spec.inventory.layers)
    entries = _entries(spec)
    tensors: list[QTensor] = []  # one per GGUF tensor: the counters visit identical tensors one by one
    where: list[int] = []
    for q, count, section in entries:
        tensors += [q] * count
        where += [section] * count
    types = choose_types(tensors, ftype, quant_model(spec), imatrix)
    layers = [0] * n
    head = tail = elements = embd = 0
    for q, ty, section in zip(tensors, types, where, strict=True):
        nb = GGML_TYPES[ty].nbytes(q.ne0, q.rows)
        elements += q.ne0 * q.rows
        if q.category == "token_embd":
            embd += nb
        if section < 0:
            head += nb
        elif section >= n:
            tail += nb
        else:
            layers[section] += nb
    return GGUFWeights(ftype=ftype, tensors=tuple(tensors), types=types, head_bytes=head, layer_bytes=tuple(layers),
                       tail_bytes=tail, elements=elements, token_embd_bytes=embd, sections=tuple(where))


def weight_format(text: str) -> WeightFormat:
    """The weight format of a llama.cpp file type (``q4_k_m``, ``Q8_0``, ``bf16`` ...)."""
    from .weights import WeightFormat

    ftype = parse_ftype(text)
    return WeightFormat("gguf", label=f"GGUF {ftype}", ftype=ftype, dense_dtype="bf16")


def file_name(model: str, ftype: str) -> str:
    """The file llama-quantize is asked to write: ``Llama-3.1-8B-Instruct-Q4_K_M.gguf``."""
    base = model.rstrip("/").rsplit("/", 1)[-1].removesuffix(".gguf")
    return f"{base}-{parse_ftype(ftype)}.gguf"
