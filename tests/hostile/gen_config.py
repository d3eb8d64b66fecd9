"""config.json files with values never meant: each field kvbudget reads x bad values (negative, zero,
2^63, 1e30, a string "false", a list, an object, a fraction, null; a 5000-digit integer once), through
``kvbudget kv ./config.json`` and ``kvbudget fit ./folder --gpu H100``; and files that are not a config
at all (deep, binary, huge, a FIFO, a device)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from corpus import add, write

from kvbudget.model import catalog

_BIG = "9" * 5000
# The value, and its JSON text ("__BIG__" stands for an integer past Python's 4,300-digit limit).
BAD: dict[str, Any] = {
    "neg": -1, "zero": 0, "2p63": 2**63, "1e30": 1e30, "strfalse": "false", "list": [], "obj": {}, "big": "__BIG__",
    "half": 1.5, "null": None,
}
PER_FIELD = [tag for tag in BAD if tag != "big"]  # a 5000-digit integer stops at the JSON parser, whatever the field


def _text(config: dict[str, Any]) -> str:
    return json.dumps(config).replace('"__BIG__"', _BIG)


def _config(model: str) -> dict[str, Any]:
    entry = catalog.find(model)
    assert entry is not None, model
    return dict(entry.config)


def _set(config: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    out = dict(config)
    if isinstance(out.get("text_config"), dict):
        out["text_config"] = {**out["text_config"], key: value}
    else:
        out[key] = value
    return out


def config_case(case_id: str, config: dict[str, Any] | str, expect_in: str, command: str = "kv", expect: int = 2) -> None:
    """``kv FILE`` or ``fit FOLDER --gpu H100`` over one config.json; the error names ``expect_in``."""
    text = config if isinstance(config, str) else _text(config)

    def build(root: Path) -> list[str]:
        if command == "kv":
            return ["kv", write(root, "config.json", text)]
        write(root, "model/config.json", text)
        return ["fit", str(root / "model"), "--gpu", "H100"]

    add(case_id, build, expect, expect_in=expect_in)


# Fields that must be whole numbers > 0 (null or absent: the field is missing, or a default applies).
# (model, fields, bad values whose null means "use the default", exit 0)
COUNTS: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    ("llama-3.1-8b", ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "vocab_size",
                      "intermediate_size", "max_position_embeddings"),
     ("num_key_value_heads", "intermediate_size", "max_position_embeddings")),  # MHA, 4 x hidden, 2048 as vLLM
    ("mixtral-8x7b", ("num_local_experts", "num_experts_per_tok"), ("num_experts_per_tok",)),
    ("deepseek-v2-lite", ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "moe_intermediate_size"),
     ("moe_intermediate_size",)),
    ("qwen3-next-80b-a3b", ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                            "full_attention_interval"), ("full_attention_interval",)),
    ("falcon-h1-0.5b", ("mamba_n_heads", "mamba_d_head", "mamba_d_state"), ("mamba_d_state",)),
    ("jamba-v0.1", ("attn_layer_period", "mamba_d_conv", "expert_layer_period"),
     ("attn_layer_period", "mamba_d_conv", "expert_layer_period")),
    ("gemma-3-4b", ("sliding_window_pattern", "head_dim"), ("sliding_window_pattern", "head_dim")),
    ("mistral-7b-v0.1", ("sliding_window",), ("sliding_window",)),
]
# A 0 in these means "none" to the engines (no window, no dense layers first, no LoRA on q).
ZERO_OK = {"sliding_window": ("mistral-7b-v0.1",), "head_dim": ("gemma-3-4b",)}  # head_dim 0: hidden / heads
for model, fields, null_ok in COUNTS:
    base = _config(model)
    for field in fields:
        for tag in PER_FIELD:
            expect = 0 if (tag == "null" and field in null_ok) or (tag == "zero" and model in ZERO_OK.get(field, ())) else 2
            config_case(f"config-{model}-{field}-{tag}", _set(base, field, BAD[tag]), field, expect=expect)
# One integer past Python's 4,300-digit limit: refused while parsing, naming the field it stands for.
config_case("config-big-int", _set(_config("llama-3.1-8b"), "num_attention_heads", BAD["big"]), "num_attention_heads")
config_case("config-fit-big-int", _set(_config("llama-3.1-8b"), "hidden_size", BAD["big"]), "hidden_size", command="fit")

# Whole numbers written as JSON floats (32.0, 1e3): transformers 5's config classes refuse them ("expected int,
# got float") and vLLM's range(num_hidden_layers) stops on them; kvbudget read them as the integer (exit 0).
_WHOLE = _config("llama-3.1-8b")
for field in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "vocab_size",
              "intermediate_size", "max_position_embeddings", "head_dim"):
    config_case(f"config-whole-float-{field}", _set(_WHOLE, field, float(_WHOLE.get(field) or 128)), "a JSON float")
config_case("config-exp-form", _text(_config("llama-3.1-8b")).replace('"num_hidden_layers": 32', '"num_hidden_layers": 3.2e1'),
            "write it as 32")
config_case("config-fit-whole-float", _set(_config("mixtral-8x7b"), "num_local_experts", 8.0), "num_local_experts",
            command="fit")

# Booleans: transformers keeps a string as a string, and a non-empty string is true in Python.
BOOLS = [("llama-3.1-8b", "tie_word_embeddings"), ("llama-3.1-8b", "attention_bias"), ("llama-3.1-8b", "mlp_bias"),
         ("qwen2.5-7b", "use_sliding_window"), ("falcon-7b", "multi_query"), ("falcon-7b", "new_decoder_architecture"),
         ("falcon-7b", "parallel_attn"), ("falcon-h1-0.5b", "mamba_conv_bias"), ("jamba-v0.1", "mamba_proj_bias"),
         ("command-r", "use_qk_norm"), ("qwen3-next-80b-a3b", "attn_output_gate")]
for model, field in BOOLS:
    base = _config(model)
    for tag, value in (("strfalse", "false"), ("strtrue", "true"), ("zero", 0), ("one", 1), ("two", 2), ("list", []),
                       ("obj", {})):
        # 0 and 1 are what Python's ``if config.x`` reads as false and true: accepted
        config_case(f"config-bool-{model}-{field}-{tag}", _set(base, field, value), field,
                    expect=0 if tag in ("zero", "one") else 2)

# The same, through a model folder and fit (every part of the plan, not only the KV cache).
LLAMA = _config("llama-3.1-8b")
for field in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "vocab_size",
              "intermediate_size", "max_position_embeddings", "tie_word_embeddings"):
    for tag in ("neg", "2p63", "1e30", "strfalse", "half"):
        config_case(f"config-fit-{field}-{tag}", _set(LLAMA, field, BAD[tag]), field, command="fit")

# Shapes that do not agree with each other. The error names the first field changed, unless ABOUT says
# which field the shape is about.
SHAPES: dict[str, dict[str, Any]] = {
    "heads-not-dividing-hidden": {"num_attention_heads": 33, "head_dim": None},
    "kv-heads-above-heads": {"num_key_value_heads": 64},
    "kv-heads-not-dividing": {"num_key_value_heads": 7},
    "head-dim-negative": {"head_dim": -128},
    "head-dim-huge": {"head_dim": 2**40},
    "layers-million": {"num_hidden_layers": 1_000_000},
    "heads-2p63": {"num_attention_heads": 2**63, "num_key_value_heads": 2**63},
    "layer-types-short": {"layer_types": ["full_attention"] * 3},
    "layer-types-long": {"layer_types": ["full_attention"] * 40},
    "layer-types-string": {"layer_types": "full_attention"},
    "layer-types-unknown": {"layer_types": ["full_attention"] * 31 + ["cross_attention"]},
    "layer-types-sliding-no-window": {"layer_types": ["sliding_attention"] * 32},
    "sliding-window-negative": {"sliding_window": -4096},
    "sliding-window-string": {"sliding_window": "4096"},
    "rope-factor-huge": {"rope_scaling": {"rope_type": "linear", "factor": 1e30}},
    "rope-factor-negative": {"rope_scaling": {"rope_type": "dynamic", "factor": -2}},
    "rope-factor-string": {"rope_scaling": {"rope_type": "linear", "factor": "2"}},
    "rope-scaling-list": {"rope_scaling": [1, 2]},
    "torch-dtype-int": {"torch_dtype": 5},
    "torch-dtype-unknown": {"torch_dtype": "int4"},
    "torch-dtype-list": {"torch_dtype": ["bfloat16"]},
    "quant-string": {"quantization_config": "awq"},
    "quant-list": {"quantization_config": ["awq"]},
    "model-type-int": {"model_type": 7},
    "model-type-list": {"model_type": ["llama"]},
    "model-type-empty": {"model_type": ""},
    "model-type-huge": {"model_type": "x" * 100_000},
    "max-len-2p40": {"max_position_embeddings": 2**40},
    "model-max-length-huge": {"model_max_length": 10**30},
    "text-config-list": {"text_config": [1]},
}
ABOUT = {"layer-types-sliding-no-window": "sliding_window"}  # sliding layers, and no window for them
for tag, changes in SHAPES.items():
    config = {**LLAMA, **changes}
    about = ABOUT.get(tag, next(iter(changes)))
    config_case(f"config-shape-{tag}", {k: v for k, v in config.items() if v is not None}, about)
    config_case(f"config-shape-fit-{tag}", {k: v for k, v in config.items() if v is not None}, about, command="fit")

# Files that are not a config.json: (the file, what the error says about it).
NOT_OBJECT, NOT_JSON, NOT_UTF8 = "must hold a JSON object", "not valid JSON", "not UTF-8"
RAW: dict[str, tuple[str | bytes, str]] = {
    "empty": ("", "empty document"), "list": ("[1, 2]", NOT_OBJECT), "string": ('"llama"', NOT_OBJECT),
    "number": ("7", NOT_OBJECT), "null": ("null", NOT_OBJECT),
    "nan": (_text(LLAMA).replace('"rms_norm_eps": 1e-05', '"rms_norm_eps": NaN'), "'rms_norm_eps' is NaN"),
    "infinity": (_text(LLAMA).replace('"rope_theta": 500000.0', '"rope_theta": Infinity'), "'rope_theta' is Infinity"),
    "deep": ("[" * 100_000 + "]" * 100_000, "nested"), "deep-object": ('{"a":' * 50_000 + "1" + "}" * 50_000, "nested"),
    "binary": (bytes(range(256)) * 64, NOT_UTF8), "latin1": ('{"model_type": "caf\xe9"}'.encode("latin-1"), NOT_UTF8),
    "truncated": (_text(LLAMA)[:200], "unexpected end"), "bom": (b"\xef\xbb\xbf" + _text(LLAMA).encode(), "starts with a byte-order mark (BOM)"),
    "utf16": ("{}".encode("utf-16"), NOT_UTF8), "big-top-int": (_BIG, "5,000 digits"),
    "trailing": (_text(LLAMA) + " ]", "after document"), "no-model-type": (json.dumps({"hidden_size": 4096}), "model_type"),
}
for tag, (data, about) in RAW.items():

    def build(root: Path, data: str | bytes = data) -> list[str]:
        return ["kv", write(root, "config.json", data)]

    add(f"config-file-{tag}", build, expect_in=about)


def _huge(root: Path) -> list[str]:
    path = write(root, "config.json", "")
    os.truncate(path, 64 * 2**20)  # sparse: no disk, more than kvbudget reads
    return ["kv", path]


def _fifo(root: Path) -> list[str]:
    path = root / "model" / "config.json"
    path.parent.mkdir()
    os.mkfifo(path)  # nobody writes: opening it would block for ever
    return ["fit", str(path.parent), "--gpu", "H100"]


def _folder_without_config(root: Path) -> list[str]:
    (root / "model").mkdir()
    return ["kv", str(root / "model")]


def _config_is_a_folder(root: Path) -> list[str]:
    (root / "model" / "config.json").mkdir(parents=True)
    return ["kv", str(root / "model")]


add("config-file-huge", _huge, expect_in="more than the 16,777,216")
add("config-file-fifo", _fifo, expect_in="not a regular file")
add("config-file-missing-in-folder", _folder_without_config, expect_in="must hold a config.json")
add("config-file-is-a-folder", _config_is_a_folder, expect_in="is a folder")
add("config-file-dev-zero", lambda _root: ["kv", "/dev/zero"], expect_in="not a regular file")
add("config-file-dev-null", lambda _root: ["kv", "/dev/null"], expect_in="not a regular file")

# quantization_config fields no kernel loads: each was a plan with exit 0 (a group of 7 or 2^62, AWQ at 3 bits,
# compressed-tensors' group_size 0 read as 128) or a line that did not say which field ("not one kvbudget reads").
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}
GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}
CT_INT4 = {"quant_method": "compressed-tensors", "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
    "num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 0}}}}
QUANT: dict[str, tuple[dict[str, Any], str]] = {
    "awq-group-7": ({**AWQ, "group_size": 7}, "group_size 7 does not divide hidden_size 4,096"),
    "awq-group-2p62": ({**AWQ, "group_size": 2**62}, "does not divide hidden_size 4,096"),
    "gptq-group-7": ({**GPTQ, "group_size": 7}, "group_size 7 does not divide hidden_size 4,096"),
    "gptq-group-0": ({**GPTQ, "group_size": 0}, "group_size must be a positive whole number, got 0"),
    "gptq-group-neg3": ({**GPTQ, "group_size": -3}, "group_size must be a positive whole number, got -3"),
    "awq-bits-3": ({**AWQ, "bits": 3}, "awq bits must be 4 or 8, got 3"),
    "ct-group-0": (CT_INT4, "group_size must be a positive whole number, got 0"),
}
for tag, (qc, about) in QUANT.items():
    config_case(f"config-quant-fit-{tag}", {**LLAMA, "quantization_config": qc}, about, command="fit")
    for engine in ("sglang", "trtllm", "transformers"):

        def build(root: Path, qc: dict[str, Any] = qc, engine: str = engine) -> list[str]:
            write(root, "model/config.json", _text({**LLAMA, "quantization_config": qc}))
            return ["fit", str(root / "model"), "--gpu", "H100", "--engine", engine]

        # transformers sized an unread checkpoint as 16-bit weights, exit 0
        add(f"config-quant-fit-{engine}-{tag}", build, expect_in=about)

# bitsandbytes flags transformers' BitsAndBytesConfig refuses (a string read as true: nf4; both: int8), and a router
# picking more experts than there are: each was exit 0.
BNB = {"quant_method": "bitsandbytes", "load_in_4bit": True, "load_in_8bit": False}
config_case("config-quant-fit-bnb-string", {**LLAMA, "quantization_config": {**BNB, "load_in_4bit": "yes"}},
            "load_in_4bit must be true or false", command="fit")
config_case("config-quant-fit-bnb-both", {**LLAMA, "quantization_config": {**BNB, "load_in_8bit": True}},
            "load_in_4bit and load_in_8bit are both true", command="fit")
for command in ("kv", "fit"):
    config_case(f"config-moe-top-k-above-experts-{command}", {**_config("mixtral-8x7b"), "num_experts_per_tok": 9},
                "routed to 9 experts (num_experts_per_tok) of only 8", command=command)

# Comments (JSON has none: the line is named; a byte-order mark is config-file-bom above)
_LLAMA = json.dumps(_config("llama-3.1-8b"), indent=1)
config_case("config-comment-first-line", "// exported config\n" + _LLAMA, "a comment at line 1")
config_case("config-comment-inside", _LLAMA.replace("{\n", "{\n /* dims */\n", 1), "a comment at line 2")
config_case("config-hash-comment", _LLAMA.replace("{\n", "{\n# dims\n", 1), "a comment at line 2")

# A multimodal sub-config that is not an object: transformers 5 refuses it ("Field 'vision_config' expected dict, got
# str"); kvbudget read the model as text-only (no vision tower in the weights), exit 0.
_VL = _config("qwen2.5-vl-3b")
for tag, value in (("string", "qwen2_5_vl"), ("list", [1]), ("number", 7), ("true", True)):
    for command in ("kv", "fit"):
        config_case(f"config-vision-config-{tag}-{command}", {**_VL, "vision_config": value},
                    "'vision_config' must be an object", command=command)
config_case("config-audio-config-string", {**_config("gemma-4-26b-a4b"), "audio_config": "gemma4_audio"},
            "'audio_config' must be an object")
