"""A re-published checkpoint named after a catalog model: its architecture by name, its quantization by suffix.

Most checkpoints that people serve are not the original repo: a quantization (``Qwen/Qwen3-8B-AWQ``,
``hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4``, ``neuralmagic/...-quantized.w8a8``,
``unsloth/...-bnb-4bit``) or a copy under another owner (``unsloth/Llama-3.2-3B-Instruct``). Quantizing or
re-uploading keeps the architecture, so when such a name's config.json cannot be read (no Hub, a sealed web
server, ``HF_HUB_OFFLINE``), the catalog model of the same name less its format suffix gives the layers, and the
suffix gives the weight format, written as the ``quantization_config`` those tools put in the checkpoint
(AutoAWQ, AutoGPTQ, llm-compressor, bitsandbytes, ModelOpt). Only exact names match after the suffix is taken off:
a fine-tune's own name (``-Thinking-2507``, ``-Coder``) is a different config and stays unknown. The plan says
which model it stands on; the checkpoint's own config.json is the exact answer.
"""

from __future__ import annotations

import functools
import re

from . import catalog
from .catalog import CatalogEntry

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

# Words that quantizers and re-uploaders append to a model's name, as the last '-', '_' or '.' separated parts
# (case-insensitive). "4-bit" is two parts and is read as "4bit".
_SUFFIX = re.compile(
    r"[-_.](awq|gptq|int4|int8|w4a16|w8a8|w4a8|w8a16|fp8|nvfp4|fp4|mxfp4|bnb|nf4|4bit|8bit|4-bit|8-bit|dynamic|static"
    r"|block|quantized|quant|marlin|sym|asym|g128|128g|gs128|g32|32g|hf|fp16|bf16|float16|bfloat16|autoround"
    r"|gguf|exl2|mlx|hqq)$",
    re.IGNORECASE,
)
_LONGEST = 200  # no model name is longer; the suffix loop and the index are bounded by it


def strip_suffixes(name: str) -> tuple[str, tuple[str, ...]]:
    """``name`` less its trailing format words, and those words (lowercase, last first)."""
    base, words = name[:_LONGEST], list[str]()
    while True:
        m = _SUFFIX.search(base)
        if m is None or m.start() == 0:
            return base, tuple(words)
        words.append(m.group(1).lower().replace("-", ""))
        base = base[: m.start()]


@functools.lru_cache(maxsize=1)
def _index() -> dict[str, CatalogEntry]:
    """Unquantized catalog models by short name less its format words ("codellama-13b-instruct" for
    ``CodeLlama-13b-Instruct-hf``). A key two models share is left out: it would be a guess."""
    index: dict[str, CatalogEntry] = {}
    clash: set[str] = set()
    for entry in catalog.entries():
        if "quantization_config" in entry.config:
            continue
        for name in entry.names:
            key = strip_suffixes(name.rsplit("/", 1)[-1].lower())[0]
            if index.get(key, entry).id != entry.id:
                clash.add(key)
            index.setdefault(key, entry)
    return {k: v for k, v in index.items() if k not in clash}


def quantization_config(words: tuple[str, ...]) -> dict[str, Any] | None:
    """The ``quantization_config`` the tools named by ``words`` write (AutoAWQ's, AutoGPTQ's, llm-compressor's,
    bitsandbytes', ModelOpt's), or None for an unquantized copy (``-hf``, ``-fp16``)."""
    w = set(words)
    eight = bool(w & {"int8", "8bit", "w8a8", "w8a16"})
    if w & {"awq"}:
        return {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}
    if w & {"gptq"}:
        return {"quant_method": "gptq", "bits": 8 if eight else 4, "group_size": 128, "desc_act": False, "sym": True}
    if w & {"bnb", "nf4"}:
        if eight:
            return {"quant_method": "bitsandbytes", "load_in_8bit": True}
        return {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}
    if w & {"mxfp4"}:
        return {"quant_method": "mxfp4"}
    if w & {"nvfp4", "fp4"}:
        return {"quant_method": "modelopt", "quant_algo": "NVFP4"}
    if w & {"fp8"}:
        return {"quant_method": "fp8", "activation_scheme": "dynamic"}
    if w & {"int4", "w4a16", "4bit"}:  # llm-compressor's W4A16 (GPTQ-style packing, groups of 128)
        return _compressed("int", 4, {"group_size": 128, "strategy": "group"})
    if eight:  # llm-compressor's W8A8 / W8A16: 8-bit integers, a scale per output channel
        return _compressed("int", 8, {"strategy": "channel"})
    return None


def _compressed(kind: str, bits: int, extra: dict[str, Any]) -> dict[str, Any]:
    weights = {"num_bits": bits, "type": kind, "symmetric": True, **extra}
    return {"quant_method": "compressed-tensors", "ignore": ["lm_head"],
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights}}}


def derive(ref: str) -> tuple[CatalogEntry, dict[str, Any], str] | None:
    """(the catalog model ``ref`` re-publishes, the config to plan with, a note saying so), or None when the
    name is not a catalog model's name plus format words (or names a GGUF, EXL2, MLX or HQQ file set, which
    vLLM does not load as a checkpoint config)."""
    short = ref.strip().rsplit("/", 1)[-1]
    if not short or len(short) > _LONGEST:
        return None
    entry = catalog.find(short)  # the same name under another owner
    words: tuple[str, ...] = ()
    suffix = ""
    if entry is None:
        base, words = strip_suffixes(short)
        if not words or set(words) & {"gguf", "exl2", "mlx", "hqq"}:
            return None
        entry = _index().get(base.lower())
        if entry is None:
            return None
        suffix = short[len(base):]
    config = dict(entry.config)
    qc = quantization_config(words)
    what = f"the name less '{suffix}'" if suffix else "the same name"
    dense = {"fp16": "float16", "float16": "float16", "bf16": "bfloat16", "bfloat16": "bfloat16"}
    for word in words:
        if word in dense:
            config["torch_dtype"] = dense[word]
    if qc is not None and "quantization_config" not in config:
        config["quantization_config"] = qc
        if qc["quant_method"] in ("awq", "gptq"):
            config["torch_dtype"] = "float16"  # AutoAWQ / AutoGPTQ save float16 checkpoints
    fmt = f", with {_describe(qc)} weights as its name says" if qc is not None else ""
    note = (f"{ref} is not in the catalog and its config.json could not be read: planned as {entry.id} ({what}){fmt}. "
            f"Give the checkpoint's config.json (or its folder) for its exact figures")
    return entry, config, note


def _describe(qc: dict[str, Any]) -> str:
    method = qc["quant_method"]
    if method in ("awq", "gptq"):
        return f"{method.upper()} {qc['bits']}-bit (groups of {qc['group_size']})"
    if method == "bitsandbytes":
        return "bitsandbytes 8-bit" if qc.get("load_in_8bit") else "bitsandbytes NF4"
    if method == "compressed-tensors":
        w = qc["config_groups"]["group_0"]["weights"]
        return f"llm-compressor INT{w['num_bits']}" + (" (groups of 128)" if w["num_bits"] == 4 else "")
    return {"mxfp4": "MXFP4", "modelopt": "NVFP4", "fp8": "FP8"}[method]
