"""What an engine is given to serve, as every engine's launch command writes it: a local model's folder (not its
config.json), and the note when a weight format needs a checkpoint already quantized in it."""

from __future__ import annotations

from ..units import InputError


def served(model: str) -> str:
    """What the engine is given: a local model's folder, not its config.json."""
    return model[: -len("config.json")].rstrip("/") or "." if model.endswith("config.json") else model


# Weight formats an engine applies to a 16-bit checkpoint while loading; every other one is read from a
# checkpoint already quantized in that format (vLLM: model_executor/layers/quantization, get_quant_config).
ON_THE_FLY = frozenset({"fp8", "bitsandbytes", "bf16", "fp16", "float16", "bfloat16", "fp32", "float32"})


def checkpoint_note(model: str, quantization: str | None) -> str | None:
    """Where the plan's weight format needs a checkpoint already quantized in that format: what to serve
    (None when the engine quantizes a 16-bit checkpoint itself while loading)."""
    if quantization in (None, "", "auto", "none"):
        return None
    from ..model.weights import parse_weight_format

    try:
        name = parse_weight_format(quantization).name
    except InputError:
        return None
    if name in ON_THE_FLY or name == "nf4":
        return None
    fmt = name.upper()
    article = "an" if fmt[0] in "AEFHILMNORSX" else "a"
    return f"{fmt} weights need {article} {fmt} checkpoint of the model: serve one in place of {served(model)} unless it is one"
