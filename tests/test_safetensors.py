"""Exact weights from safetensors headers (issue #4 §5): single files, sharded folders, packed formats, the Hub.

The files are written here with ``struct`` and ``json`` as the safetensors format defines them
(huggingface/safetensors ``safetensors/src/tensor.rs``): an 8-byte little-endian header length, the
JSON header padded with spaces to 8 bytes, then the data. The data is never written: the file is
extended with ``truncate`` (a sparse file of zeros), which is also how a "13 GB" gpt-oss-20b costs
nothing on disk here. Every expected byte count is worked out by hand in the comments.

The tiny model: Llama with hidden 64, 2 layers, 4 heads of 16, 2 KV heads, MLP 128, vocabulary 256.
Its linear weights, as (rows = outputs, cols = inputs):
    q_proj 64x64, k_proj 32x64, v_proj 32x64, o_proj 64x64       attention: 12,288 params per layer
    gate_proj 128x64, up_proj 128x64, down_proj 64x128          mlp:       24,576 params per layer
plus two 64-wide norms per layer, embed_tokens 256x64, the final norm 64 and lm_head 256x64 (untied):
    params = 2 x (12,288 + 24,576 + 128) + 16,384 + 64 + 16,384 = 106,816
"""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from huggingface_hub.utils import SafetensorsFileMetadata, SafetensorsRepoMetadata, TensorInfo

from kvbudget.cli import main
from kvbudget.model import catalog
from kvbudget.model.hf_config import spec_from_config
from kvbudget.model.resolve import load_model
from kvbudget.model.safetensors_reader import (
    SafetensorsError,
    read_header,
    read_hub_safetensors,
    read_safetensors,
    summary_from_hub,
    tensor_role,
    with_safetensors,
)
from kvbudget.model.weights import WeightFormat
from kvbudget.parallel import stages
from kvbudget.units import InputError

BITS = {"BF16": 16, "F16": 16, "F32": 32, "I32": 32, "I64": 64, "U8": 8, "I8": 8, "F8_E4M3": 8, "F4": 4}
Tensors = dict[str, tuple[str, list[int]]]

CONFIG: dict[str, Any] = {
    "model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16", "tie_word_embeddings": False,
}
PARAMS = 106_816
LINEARS = {
    "self_attn.q_proj": (64, 64), "self_attn.k_proj": (32, 64), "self_attn.v_proj": (32, 64), "self_attn.o_proj": (64, 64),
    "mlp.gate_proj": (128, 64), "mlp.up_proj": (128, 64), "mlp.down_proj": (64, 128),
}


def nbytes(dtype: str, shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n * BITS[dtype] // 8


def write_safetensors(path: Path, tensors: Tensors, metadata: dict[str, str] | None = None) -> int:
    """Write a safetensors file (data as sparse zeros); return its data bytes."""
    header: dict[str, Any] = {"__metadata__": metadata} if metadata is not None else {}
    at = 0
    for name, (dtype, shape) in tensors.items():
        n = nbytes(dtype, shape)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + n]}
        at += n
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        f.truncate(8 + len(raw) + at)
    return at


def write_raw(path: Path, header: object, data: int = 0, length: int | None = None) -> Path:
    """A file whose header is whatever JSON (or bytes) we give it."""
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw) if length is None else length))
        f.write(raw)
        f.truncate(8 + len(raw) + data)
    return path


# --- the tiny Llama in four formats -----------------------------------------------------------------


def bf16_linear(name: str, out: int, inp: int) -> Tensors:
    return {f"{name}.weight": ("BF16", [out, inp])}


def awq_linear(name: str, out: int, inp: int) -> Tensors:
    # AutoAWQ GEMM, 4-bit, group 32: qweight int32 [in, out/8], qzeros int32 [in/32, out/8], scales fp16 [in/32, out].
    return {f"{name}.qweight": ("I32", [inp, out // 8]), f"{name}.qzeros": ("I32", [inp // 32, out // 8]),
            f"{name}.scales": ("F16", [inp // 32, out])}


def fp8_linear(name: str, out: int, inp: int) -> Tensors:
    # fp8 e4m3 with static per-tensor scales: weight [out, in], weight_scale and input_scale fp32 scalars.
    return {f"{name}.weight": ("F8_E4M3", [out, inp]), f"{name}.weight_scale": ("F32", []), f"{name}.input_scale": ("F32", [])}


def nvfp4_linear(name: str, out: int, inp: int) -> Tensors:
    # ModelOpt NVFP4: two fp4 codes per byte [out, in/2], an fp8 scale per 16 inputs [out, in/16],
    # an fp32 global scale and an fp32 input scale.
    return {f"{name}.weight": ("U8", [out, inp // 2]), f"{name}.weight_scale": ("F8_E4M3", [out, inp // 16]),
            f"{name}.weight_scale_2": ("F32", []), f"{name}.input_scale": ("F32", [])}


def llama_tensors(linear: Callable[[str, int, int], Tensors], dense: str = "BF16", layers: int = 2) -> Tensors:
    t: Tensors = {"model.embed_tokens.weight": (dense, [256, 64])}
    for i in range(layers):
        for module, (out, inp) in LINEARS.items():
            t.update(linear(f"model.layers.{i}.{module}", out, inp))
        t[f"model.layers.{i}.input_layernorm.weight"] = (dense, [64])
        t[f"model.layers.{i}.post_attention_layernorm.weight"] = (dense, [64])
    t["model.norm.weight"] = (dense, [64])
    t["lm_head.weight"] = (dense, [256, 64])
    return t


def model_folder(root: Path, tensors: Tensors, config: dict[str, Any] | None = None, shards: int = 1) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps(config or CONFIG), encoding="utf-8")
    if shards == 1:
        write_safetensors(root / "model.safetensors", tensors)
        return root
    names = list(tensors)
    per = -(-len(names) // shards)
    weight_map = {}
    for s in range(shards):
        file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[s * per:(s + 1) * per]}
        write_safetensors(root / file, part)
        weight_map.update(dict.fromkeys(part, file))
    (root / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}), encoding="utf-8")
    return root


def weights(spec: Any, tp: int = 1, pp: int = 1) -> list[int]:
    return [s.weights_bytes for s in stages(spec, spec.weight_format, tp, pp)]


# --- bf16: sums, the spec, sharding ----------------------------------------------------------------

# bf16, 2 bytes a parameter:
#   attention 2 layers x 12,288 x 2 = 49,152     mlp 2 x 24,576 x 2 = 98,304
#   norms (2 x 2 x 64 + 64) x 2 = 640            embeddings 16,384 x 2 = 32,768    lm_head 32,768
BF16_BY_ROLE = {"embeddings": 32_768, "attention": 49_152, "mlp": 98_304, "norms": 640, "lm_head": 32_768}
BF16_TOTAL = 213_632  # = 2 x 106,816


def test_bf16_file_sums_by_dtype_and_role(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    data = write_safetensors(path, llama_tensors(bf16_linear), metadata={"format": "pt"})
    s = read_safetensors(str(path))
    assert data == s.total_bytes == sum(BF16_BY_ROLE.values()) == BF16_TOTAL
    assert s.dtype_bytes() == {"BF16": BF16_TOTAL}
    assert s.role_bytes() == BF16_BY_ROLE
    assert s.tensor_count == 1 + 2 * 9 + 2  # embed, 7 linears + 2 norms per layer, final norm, lm_head
    assert s.quant_bytes == 0
    assert s.files == ("model.safetensors",)
    # only the header was read: 8 bytes of length, then the JSON
    assert s.header_bytes == 8 + struct.unpack("<Q", path.read_bytes()[:8])[0] < 4096


def test_bf16_folder_spec_uses_the_header_bytes(tmp_path: Path) -> None:
    folder = model_folder(tmp_path / "m", llama_tensors(bf16_linear))
    spec = load_model(str(folder))
    config_only = load_model(str(folder / "config.json"))  # the config file alone: derived from the config
    assert spec.weight_format is not None and spec.weight_format.name == "stored"
    assert "safetensors headers" in spec.source("weights") and config_only.source("weights") == ""
    assert spec.params == config_only.params == PARAMS
    assert weights(spec) == [BF16_TOTAL]
    # the header-derived inventory splits as the config-derived one: TP shares and PP stages agree
    for tp, pp in ((1, 1), (2, 1), (1, 2), (2, 2)):
        assert weights(spec, tp, pp) == weights(config_only, tp, pp), (tp, pp)
    # by hand: PP=2 puts embed + layer 0 on stage 0 (32,768 + 73,984) and layer 1 + norm + lm_head on stage 1
    # (73,984 + 128 + 32,768); a layer is (12,288 + 24,576 + 128) x 2 = 73,984 bytes.
    assert weights(spec, 1, 2) == [106_752, 106_880]
    # TP=2: everything halves except the 640 bytes of norms every rank holds: (213,632 - 640) / 2 + 640
    assert weights(spec, 2, 1) == [107_136]


def test_sharded_folder_with_index(tmp_path: Path) -> None:
    one = read_safetensors(str(model_folder(tmp_path / "one", llama_tensors(bf16_linear))))
    folder = model_folder(tmp_path / "three", llama_tensors(bf16_linear), shards=3)
    s = read_safetensors(str(folder))
    assert s.files == ("model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors")
    assert (s.total_bytes, s.by_dtype, s.by_role, s.tensor_count) == (one.total_bytes, one.by_dtype, one.by_role, one.tensor_count)
    assert weights(load_model(str(folder)), 1, 2) == [106_752, 106_880]


def test_folder_without_index_reads_every_safetensors_file(tmp_path: Path) -> None:
    folder = model_folder(tmp_path / "m", llama_tensors(bf16_linear), shards=2)
    (folder / "model.safetensors.index.json").unlink()
    assert read_safetensors(str(folder)).total_bytes == BF16_TOTAL


def test_folder_without_weights_keeps_the_config_count(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(CONFIG), encoding="utf-8")
    assert load_model(str(folder)) == spec_from_config(CONFIG, name=str(folder))
    # an index whose shards are not downloaded yet: plan from the config
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "model-1.safetensors"}}), encoding="utf-8")
    assert load_model(str(folder)) == spec_from_config(CONFIG, name=str(folder))


# --- packed and scaled formats -----------------------------------------------------------------------

# Sum of in x out over the 7 linears of a layer: 4,096 + 2,048 + 2,048 + 4,096 + 8,192 x 3 = 36,864; x 2 layers = 73,728.
# The 16-bit rest (embed, lm_head, norms): 32,768 + 32,768 + 640 = 66,176.
LINEAR_ELEMS = 73_728
DENSE_REST = 66_176


def test_awq_int32_packed(tmp_path: Path) -> None:
    config = {**CONFIG, "torch_dtype": "float16",
              "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 32, "zero_point": True, "version": "gemm"}}
    folder = model_folder(tmp_path / "awq", llama_tensors(awq_linear, dense="F16"), config)
    s = read_safetensors(str(folder))
    # per matrix: qweight in*out/8 words x 4 B = in*out/2; qzeros (in/32)(out/8) x 4 = in*out/64; scales (in/32) x out x 2 = in*out/16
    #   I32 = 73,728/2 + 73,728/64 = 36,864 + 1,152 = 38,016;  F16 = 73,728/16 + 66,176 = 4,608 + 66,176 = 70,784
    assert s.dtype_bytes() == {"I32": 38_016, "F16": 70_784}
    assert s.total_bytes == 108_800
    assert s.quant_bytes == 1_152 + 4_608  # qzeros and scales
    # q_proj 64x64: 2,048 + 64 + 256 = 2,368 bytes, as WeightFormat's own AWQ formula says
    assert WeightFormat("awq", bits=4, group_size=32).matrix_bytes(64, 64) == 2_368
    # each matrix is in*out x (1/2 + 1/64 + 1/16) = in*out x 37/64: attention per layer 12,288 x 37/64 = 7,104, mlp 24,576 x 37/64 = 14,208
    assert s.role_bytes() == {"embeddings": 32_768, "attention": 2 * 7_104, "mlp": 2 * 14_208, "norms": 640, "lm_head": 32_768}
    spec = load_model(str(folder))
    assert spec.weight_format is not None and spec.weight_format.exact and spec.weight_format.name == "awq"
    assert spec.params == PARAMS  # 8 codes per int32 word: the logical shapes come back
    assert weights(spec) == [108_800]
    # TP=2 splits the stored bytes as vLLM splits AWQ matrices (rows or columns, scales with them)
    config_only = load_model(str(folder / "config.json"))
    assert weights(spec, 2) == weights(config_only, 2) == [(108_800 - 640) // 2 + 640]


def test_fp8_with_scales_is_exact_where_the_formula_is_not(tmp_path: Path) -> None:
    config = {**CONFIG, "quantization_config": {"quant_method": "fp8", "activation_scheme": "static"}}
    folder = model_folder(tmp_path / "fp8", llama_tensors(fp8_linear), config)
    s = read_safetensors(str(folder))
    # F8_E4M3 = 73,728 bytes; F32 = 14 matrices x (weight_scale + input_scale) x 4 = 112; BF16 = 66,176
    assert s.dtype_bytes() == {"F8_E4M3": 73_728, "BF16": 66_176, "F32": 112}
    assert s.total_bytes == 140_016
    assert s.quant_bytes == 112
    spec = load_model(str(folder))
    assert spec.params == PARAMS
    assert weights(spec) == [140_016]
    # The config alone prices fp8 per-tensor as n + one 4-byte scale per matrix: 73,728 + 14 x 4 + 66,176 = 139,960;
    # the files also hold a static input_scale per matrix, 56 bytes more.
    assert weights(load_model(str(folder / "config.json"))) == [139_960]


def test_nvfp4_u8_with_fp8_scales(tmp_path: Path) -> None:
    config = {**CONFIG, "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"}}
    folder = model_folder(tmp_path / "nvfp4", llama_tensors(nvfp4_linear), config)
    s = read_safetensors(str(folder))
    # U8 = 73,728 / 2 = 36,864; F8_E4M3 = 73,728 / 16 = 4,608; F32 = 14 x 2 x 4 = 112; BF16 = 66,176
    assert s.dtype_bytes() == {"BF16": 66_176, "U8": 36_864, "F8_E4M3": 4_608, "F32": 112}
    assert s.total_bytes == 107_760
    spec = load_model(str(folder))
    assert spec.weight_format is not None and spec.weight_format.name == "nvfp4" and spec.weight_format.exact
    assert spec.params == PARAMS  # two fp4 codes a byte
    assert weights(spec) == [107_760]
    # NVFP4's formula (n/2 + n/16 + 8 per matrix) agrees with the headers here
    assert WeightFormat("nvfp4", bits=4).matrix_bytes(64, 64) == 2_048 + 256 + 8


def gpt_oss_20b_tensors() -> tuple[Tensors, int]:
    """openai/gpt-oss-20b's tensor list: 24 layers, 32 experts in MXFP4 (two fp4 codes a byte in
    ``*_blocks`` [experts, rows, cols/32, 16], one e8m0 byte per 32 in ``*_scales``), the rest bf16."""
    h, q, kv, vocab, e, inter = 2880, 64 * 64, 8 * 64, 201_088, 32, 2880
    t: Tensors = {"model.embed_tokens.weight": ("BF16", [vocab, h])}
    for i in range(24):
        p = f"model.layers.{i}"
        t.update({
            f"{p}.input_layernorm.weight": ("BF16", [h]), f"{p}.post_attention_layernorm.weight": ("BF16", [h]),
            f"{p}.self_attn.q_proj.weight": ("BF16", [q, h]), f"{p}.self_attn.q_proj.bias": ("BF16", [q]),
            f"{p}.self_attn.k_proj.weight": ("BF16", [kv, h]), f"{p}.self_attn.k_proj.bias": ("BF16", [kv]),
            f"{p}.self_attn.v_proj.weight": ("BF16", [kv, h]), f"{p}.self_attn.v_proj.bias": ("BF16", [kv]),
            f"{p}.self_attn.o_proj.weight": ("BF16", [h, q]), f"{p}.self_attn.o_proj.bias": ("BF16", [h]),
            f"{p}.self_attn.sinks": ("BF16", [64]),
            f"{p}.mlp.router.weight": ("BF16", [e, h]), f"{p}.mlp.router.bias": ("BF16", [e]),
            f"{p}.mlp.experts.gate_up_proj_blocks": ("U8", [e, 2 * inter, h // 32, 16]),
            f"{p}.mlp.experts.gate_up_proj_scales": ("U8", [e, 2 * inter, h // 32]),
            f"{p}.mlp.experts.gate_up_proj_bias": ("BF16", [e, 2 * inter]),
            f"{p}.mlp.experts.down_proj_blocks": ("U8", [e, h, inter // 32, 16]),
            f"{p}.mlp.experts.down_proj_scales": ("U8", [e, h, inter // 32]),
            f"{p}.mlp.experts.down_proj_bias": ("BF16", [e, h]),
        })
    t["model.norm.weight"] = ("BF16", [h])
    t["lm_head.weight"] = ("BF16", [vocab, h])
    # By hand: embed + lm_head = 2 x 201,088 x 2,880 x 2 = 2,316,533,760; final norm 5,760.
    # Per layer: attention weights (4,096 + 512 + 512) x 2,880 + 2,880 x 4,096 = 26,542,080 x 2 = 53,084,160, biases
    # 8,000 x 2 = 16,000, sinks 128, norms 11,520, router (92,160 + 32) x 2 = 184,384; experts: gate_up blocks
    # 32 x 5,760 x 1,440 = 265,420,800, scales 16,588,800, bias 368,640; down blocks 132,710,400, scales 8,294,400,
    # bias 184,320 -> 423,567,360. Layer = 476,863,552; x 24 = 11,444,725,248. Total 13,761,264,768.
    return t, 13_761_264_768


def test_gpt_oss_20b_mxfp4_headers(tmp_path: Path) -> None:
    entry = catalog.find("gpt-oss-20b")
    assert entry is not None
    tensors, total = gpt_oss_20b_tensors()
    folder = model_folder(tmp_path / "gpt-oss-20b", tensors, entry.config, shards=3)
    s = read_safetensors(str(folder))
    assert s.total_bytes == total
    # U8 = 24 x (265,420,800 + 16,588,800 + 132,710,400 + 8,294,400) = 24 x 423,014,400
    assert s.dtype_bytes() == {"U8": 10_152_345_600, "BF16": total - 10_152_345_600}
    assert s.quant_bytes == 24 * (16_588_800 + 8_294_400)  # the e8m0 scales
    spec = load_model(str(folder))
    catalog_spec = load_model("gpt-oss-20b")
    # the logical parameters come back from the packed blocks: the model card's 20,914,757,184
    assert spec.params == catalog_spec.params == 20_914_757_184
    assert weights(spec) == [total]
    # vLLM pads MXFP4 experts when it loads them: the header-derived experts pad as the config-derived ones do
    from kvbudget._record import replace

    assert spec.weight_format is not None and catalog_spec.weight_format is not None
    pad = (256, 128)
    mine = stages(spec, replace(spec.weight_format, expert_padding=pad), 2)
    theirs = stages(catalog_spec, replace(catalog_spec.weight_format, expert_padding=pad), 2)
    assert mine[0].weights_bytes == theirs[0].weights_bytes > weights(spec, 2)[0]


def test_cli_vllm_on_a_gpt_oss_folder_matches_the_catalog(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    entry = catalog.find("gpt-oss-20b")
    assert entry is not None
    folder = model_folder(tmp_path / "gpt-oss-20b", gpt_oss_20b_tensors()[0], entry.config, shards=3)
    found = []
    for model in (folder, "gpt-oss-20b"):
        code, out, err = run_cli(capsys, "fit", model, "--gpu", "H100", "--context", 8192, "--json")
        assert code == 0, err
        found.append(json.loads(out)["memory"]["weights_bytes"])
    # vLLM pads the MXFP4 experts either way; the bf16 rest is the same bytes from the files as from the config
    assert found[0] == found[1] > 13_761_264_768


def fp8_block_linear(name: str, out: int, inp: int) -> Tensors:
    # DeepSeek-V3: fp8 e4m3 weight [out, in] and one fp32 weight_scale_inv per 128 x 128 block.
    return {f"{name}.weight": ("F8_E4M3", [out, inp]), f"{name}.weight_scale_inv": ("F32", [-(-out // 128), -(-inp // 128)])}


def deepseek_v3_tensors() -> Tensors:
    """deepseek-ai/DeepSeek-V3's tensor list: MLA attention, 3 dense layers then 58 MoE layers of 256
    routed experts + 1 shared, fp8 with block scales, and layer 61, the multi-token-prediction head."""
    h, heads, experts = 7168, 128, 256
    t: Tensors = {"model.embed_tokens.weight": ("BF16", [129_280, h])}
    for i in range(62):
        p = f"model.layers.{i}"
        t[f"{p}.input_layernorm.weight"] = ("BF16", [h])
        t[f"{p}.post_attention_layernorm.weight"] = ("BF16", [h])
        t.update(fp8_block_linear(f"{p}.self_attn.q_a_proj", 1536, h))
        t[f"{p}.self_attn.q_a_layernorm.weight"] = ("BF16", [1536])
        t.update(fp8_block_linear(f"{p}.self_attn.q_b_proj", heads * (128 + 64), 1536))
        t.update(fp8_block_linear(f"{p}.self_attn.kv_a_proj_with_mqa", 512 + 64, h))
        t[f"{p}.self_attn.kv_a_layernorm.weight"] = ("BF16", [512])
        t.update(fp8_block_linear(f"{p}.self_attn.kv_b_proj", heads * (128 + 128), 512))
        t.update(fp8_block_linear(f"{p}.self_attn.o_proj", h, heads * 128))
        mlp = {"gate_proj": (2048, h), "up_proj": (2048, h), "down_proj": (h, 2048)}
        if i < 3:
            for m, (out, inp) in {"gate_proj": (18_432, h), "up_proj": (18_432, h), "down_proj": (h, 18_432)}.items():
                t.update(fp8_block_linear(f"{p}.mlp.{m}", out, inp))
        else:
            t[f"{p}.mlp.gate.weight"] = ("BF16", [experts, h])
            t[f"{p}.mlp.gate.e_score_correction_bias"] = ("F32", [experts])
            for e in range(experts):
                for m, (out, inp) in mlp.items():
                    t.update(fp8_block_linear(f"{p}.mlp.experts.{e}.{m}", out, inp))
            for m, (out, inp) in mlp.items():
                t.update(fp8_block_linear(f"{p}.mlp.shared_experts.{m}", out, inp))
        if i == 61:
            t.update({f"{p}.enorm.weight": ("BF16", [h]), f"{p}.hnorm.weight": ("BF16", [h]),
                      f"{p}.eh_proj.weight": ("BF16", [h, 2 * h]), f"{p}.embed_tokens.weight": ("BF16", [129_280, h]),
                      f"{p}.shared_head.norm.weight": ("BF16", [h]), f"{p}.shared_head.head.weight": ("BF16", [129_280, h])})
    t["model.norm.weight"] = ("BF16", [h])
    t["lm_head.weight"] = ("BF16", [129_280, h])
    return t


def test_deepseek_v3_fp8_block_scales_in_163_shards(tmp_path: Path) -> None:
    entry = catalog.find("deepseek-v3")
    assert entry is not None
    tensors = deepseek_v3_tensors()
    folder = model_folder(tmp_path / "DeepSeek-V3", tensors, entry.config, shards=163)
    s = read_safetensors(str(folder))
    assert s.tensor_count == len(tensors) == 91_991 and len(s.files) == 163
    spec = load_model(str(folder))
    catalog_spec = load_model("deepseek-v3")
    assert spec.params == catalog_spec.params == 671_026_419_200  # logical params: fp8 weights are unpacked
    mtp = sum(nbytes(*v) for k, v in tensors.items() if k.startswith("model.layers.61."))
    assert weights(spec) == [s.total_bytes - mtp]  # layer 61 (multi-token prediction) is left out, with a note
    assert any(f"layer 61 past num_hidden_layers ({mtp:,} bytes" in n for n in spec.notes)
    # The config-derived fp8 block format prices every tensor but one as the files hold it: the 58 MoE layers'
    # e_score_correction_bias is float32 in the files (256 x 4 bytes), bf16 in the estimate (256 x 2).
    extra = 58 * 256 * (4 - 2)
    assert weights(spec)[0] - weights(catalog_spec)[0] == extra == 29_696
    # That router bias is replicated: every TP rank carries all of it. PP=2 puts layers 0-30 on stage 0
    # (3 dense + 28 MoE) and 31-60 on stage 1 (30 MoE), 512 bytes more per MoE layer.
    assert [a - b for a, b in zip(weights(spec, 8, 2), weights(catalog_spec, 8, 2), strict=True)] == [28 * 512, 30 * 512]


def test_multi_token_prediction_layers_are_left_out(tmp_path: Path) -> None:
    tensors = llama_tensors(bf16_linear)
    tensors["model.layers.2.mlp.down_proj.weight"] = ("BF16", [64, 128])  # a layer past num_hidden_layers = 2
    spec = load_model(str(model_folder(tmp_path / "m", tensors)))
    assert weights(spec) == [BF16_TOTAL]
    assert any("layer 2 past num_hidden_layers (16,384 bytes" in n for n in spec.notes), spec.notes


def test_buffers_and_a_tied_lm_head_are_left_out(tmp_path: Path) -> None:
    # An older conversion: a rotary inv_freq buffer (fp32, head_dim/2 = 8) in every layer, and lm_head saved
    # although tie_word_embeddings is true. Engines load neither (vLLM llama.py skips both).
    tensors = llama_tensors(bf16_linear)
    for i in range(2):
        tensors[f"model.layers.{i}.self_attn.rotary_emb.inv_freq"] = ("F32", [8])
    folder = model_folder(tmp_path / "m", tensors, {**CONFIG, "tie_word_embeddings": True})
    s = read_safetensors(str(folder))
    assert s.total_bytes == BF16_TOTAL + 2 * 8 * 4  # the summary counts what the files hold
    spec = load_model(str(folder))
    # 213,632 - 32,768 (lm_head) = 180,864, as the config alone says for a tied model
    assert weights(spec) == weights(load_model(str(folder / "config.json"))) == [180_864]
    assert any(n.startswith("3 safetensors tensors (32,832 bytes: ") for n in spec.notes), spec.notes


def test_config_and_weights_that_do_not_belong_together(tmp_path: Path) -> None:
    folder = model_folder(tmp_path / "m", llama_tensors(bf16_linear), {**CONFIG, "num_hidden_layers": 3})
    with pytest.raises(SafetensorsError, match=r"config\.json has 3 layers but the safetensors files hold no weights for layer 2"):
        load_model(str(folder))


@pytest.mark.parametrize(("name", "role"), [
    ("model.embed_tokens.weight", "embeddings"), ("transformer.wte.weight", "embeddings"), ("lm_head.weight", "lm_head"),
    ("output.weight", "lm_head"), ("model.layers.3.self_attn.k_proj.qweight", "attention"),
    ("transformer.h.0.attn.c_attn.weight", "attention"), ("model.layers.0.mlp.down_proj.weight_scale_inv", "mlp"),
    ("model.layers.1.block_sparse_moe.experts.7.w2.weight", "experts"), ("model.layers.1.block_sparse_moe.gate.weight", "router"),
    ("model.layers.1.mlp.shared_experts.up_proj.weight", "shared_experts"), ("model.layers.1.mlp.shared_expert_gate.weight", "shared_experts"),
    ("model.layers.0.mamba.A_log", "mamba"), ("model.layers.0.post_attention_layernorm.weight", "norms"),
    ("vision_tower.vision_model.encoder.layers.0.self_attn.q_proj.weight", "vision"), ("model.visual.blocks.0.attn.qkv.weight", "vision"),
    ("model.layers.0.mlp.experts.gate_up_proj_blocks", "experts"), ("mystery.tensor", "other"),
])
def test_roles_by_name(name: str, role: str) -> None:
    assert tensor_role(name) == role


# --- the Hub's metadata objects ------------------------------------------------------------------------


def hub_metadata(tensors: Tensors, shards: int) -> SafetensorsRepoMetadata:
    """What huggingface_hub.get_safetensors_metadata returns for these tensors, built with its own classes."""
    names = list(tensors)
    per = -(-len(names) // shards)
    files: dict[str, SafetensorsFileMetadata] = {}
    for s in range(shards):
        at = 0
        infos = {}
        for n in names[s * per:(s + 1) * per]:
            dtype, shape = tensors[n]
            size = nbytes(dtype, shape)
            infos[n] = TensorInfo(dtype=dtype, shape=shape, data_offsets=(at, at + size))
            at += size
        files[f"model-{s + 1:05d}-of-{shards:05d}.safetensors"] = SafetensorsFileMetadata(metadata={"format": "pt"}, tensors=infos)
    weight_map = {n: f for f, m in files.items() for n in m.tensors}
    return SafetensorsRepoMetadata(metadata={"total_size": sum(nbytes(*v) for v in tensors.values())}, sharded=True,
                                   weight_map=weight_map, files_metadata=files)


def test_hub_metadata_gives_the_same_summary_and_spec(tmp_path: Path) -> None:
    tensors = llama_tensors(fp8_linear)
    config = {**CONFIG, "quantization_config": {"quant_method": "fp8", "activation_scheme": "static"}}
    local = read_safetensors(str(model_folder(tmp_path / "m", tensors, config, shards=2)))
    hub = summary_from_hub(hub_metadata(tensors, 2), "org/tiny-fp8")
    assert (hub.total_bytes, hub.by_dtype, hub.by_role, hub.quant_bytes, hub.files) == (
        local.total_bytes, local.by_dtype, local.by_role, local.quant_bytes, local.files)
    assert hub.total_bytes == 140_016 and hub.header_bytes == 0
    spec = with_safetensors(spec_from_config(config, name="org/tiny-fp8"), hub)
    assert spec.inventory == load_model(str(tmp_path / "m")).inventory
    assert weights(spec) == [140_016]


def test_hub_metadata_is_checked_like_a_file() -> None:
    meta = SafetensorsRepoMetadata(metadata=None, sharded=False, weight_map={"w": "model.safetensors"}, files_metadata={
        "model.safetensors": SafetensorsFileMetadata(metadata={}, tensors={"w": TensorInfo(dtype="BF16", shape=[4, 4], data_offsets=(0, 30))}),
    })
    with pytest.raises(SafetensorsError, match=r"org/bad: model.safetensors: tensor 'w' data_offsets \[0, 30\] hold 30 bytes, but BF16 of shape \[4, 4\] takes 32"):
        summary_from_hub(meta, "org/bad")


def test_hub_read_honours_offline_mode() -> None:
    # conftest sets HF_HUB_OFFLINE=1 for every test
    with pytest.raises(SafetensorsError, match="org/model: HF_HUB_OFFLINE is set"):
        read_hub_safetensors("org/model")


# --- hostile files -----------------------------------------------------------------------------------

GOOD = {"w": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]}}


@pytest.mark.parametrize(("make", "message"), [
    (lambda p: p.write_bytes(b"\x01\x02\x03"), "3 bytes long: too short for a safetensors file"),
    (lambda p: write_raw(p, GOOD, 8, length=1 << 40), "over safetensors' 100 MB limit"),
    (lambda p: write_raw(p, GOOD, 0, length=5000), "runs past the end of the"),
    (lambda p: write_raw(p, b"{not json", 0), "the header: not valid JSON"),
    (lambda p: write_raw(p, b"\xff\xfe{}", 0), "not UTF-8"),
    (lambda p: write_raw(p, [1, 2], 0), "must be a JSON object, got list"),
    (lambda p: write_raw(p, {"w": {"shape": [2], "data_offsets": [0, 4]}}, 4), "tensor 'w' has no dtype"),
    (lambda p: write_raw(p, {"w": {"dtype": "Q4_K", "shape": [2], "data_offsets": [0, 4]}}, 4), "unknown dtype 'Q4_K'"),
    (lambda p: write_raw(p, {"w": {"dtype": "BF16", "shape": [2], "data_offsets": [-4, 0]}}, 4), "data_offsets must be two whole numbers"),
    (lambda p: write_raw(p, {"w": {"dtype": "BF16", "shape": [2], "data_offsets": [8, 4]}}, 8), "end before they begin"),
    (lambda p: write_raw(p, {"w": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 4]}}, 4), "hold 4 bytes, but BF16 of shape [2, 2] takes 8"),
    (lambda p: write_raw(p, {"w": {"dtype": "F4", "shape": [3], "data_offsets": [0, 1]}}, 1), "not a whole number of bytes"),
    (lambda p: write_raw(p, {"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                             "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}}, 6), "overlaps the tensor before it"),
    (lambda p: write_raw(p, {"a": {"dtype": "U8", "shape": [4], "data_offsets": [4, 8]}}, 8), "leaves a gap of 4 bytes"),
    (lambda p: write_raw(p, GOOD, 4), "truncated: its tensors end at data byte 8 but the file holds 4"),
    (lambda p: write_raw(p, GOOD, 12), "4 bytes after the last tensor"),
    (lambda p: write_raw(p, {"w": {"dtype": "U8", "shape": [True], "data_offsets": [0, 1]}}, 1), "shape must be a list of whole numbers"),
    (lambda p: write_raw(p, {"w": "nope"}, 0), "must be an object with dtype, shape and data_offsets"),
])
def test_hostile_files_give_one_clear_line(tmp_path: Path, make: Callable[[Path], object], message: str) -> None:
    path = tmp_path / "bad.safetensors"
    make(path)
    with pytest.raises(SafetensorsError) as err:
        read_header(str(path))
    text = str(err.value)
    assert isinstance(err.value, InputError)
    assert text.startswith(str(path)) and message in text and "\n" not in text, text


def test_hostile_index_files(tmp_path: Path) -> None:
    folder = model_folder(tmp_path / "m", llama_tensors(bf16_linear), shards=2)
    index = folder / "model.safetensors.index.json"
    doc = json.loads(index.read_text())
    index.write_text(json.dumps({"weight_map": {**doc["weight_map"], "x": "../../etc/passwd"}}))
    with pytest.raises(SafetensorsError, match=r"shard '\.\./\.\./etc/passwd' is not a file name in the model folder"):
        read_safetensors(str(folder))
    index.write_text(json.dumps({"weight_map": {**doc["weight_map"], "x": "model-00009-of-00009.safetensors"}}))
    with pytest.raises(SafetensorsError, match="1 of its 3 shards are not in the folder"):
        load_model(str(folder))
    index.write_text("{")
    with pytest.raises(SafetensorsError, match=r"model\.safetensors\.index\.json: not valid JSON"):
        load_model(str(folder))
    index.write_text(json.dumps({"weight_map": ["a"]}))
    with pytest.raises(SafetensorsError, match="has no weight_map object"):
        load_model(str(folder))


def test_a_tensor_in_two_shards(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    write_safetensors(folder / "a.safetensors", {"w": ("BF16", [2])})
    write_safetensors(folder / "b.safetensors", {"w": ("BF16", [2])})
    with pytest.raises(SafetensorsError, match=r"tensor 'w' is in both a\.safetensors and b\.safetensors"):
        read_safetensors(str(folder))


def test_a_terabyte_file_costs_its_header_only(tmp_path: Path) -> None:
    # 64 tensors of 16 GiB each: a 1 TiB (sparse) file. Reading any of its data would take minutes.
    tensors: Tensors = {f"model.layers.{i}.mlp.down_proj.weight": ("BF16", [65_536, 131_072]) for i in range(64)}
    path = tmp_path / "huge.safetensors"
    data = write_safetensors(path, tensors)
    t0 = time.perf_counter()
    s = read_safetensors(str(path))
    elapsed = time.perf_counter() - t0
    assert s.total_bytes == data == 64 * 65_536 * 131_072 * 2 == 1 << 40
    assert elapsed < 2.0, elapsed


# --- the command line --------------------------------------------------------------------------------


def run_cli(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    try:
        code = main([str(a) for a in args])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_kv_and_fit_on_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = model_folder(tmp_path / "tiny", llama_tensors(fp8_linear),
                          {**CONFIG, "quantization_config": {"quant_method": "fp8", "activation_scheme": "static"}})
    code, out, err = run_cli(capsys, "kv", folder, "--context", 1024, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["params"] == PARAMS
    assert doc["kv_bytes_per_token"] == 2 * 2 * 2 * 16 * 2  # K and V x 2 layers x 2 KV heads x 16 x bf16
    for engine in ("textbook", "vllm", "sglang", "trtllm"):
        found = {}
        for model in (folder, folder / "config.json"):
            code, out, err = run_cli(capsys, "fit", model, "--gpu", "H100", "--context", 1024, "--engine", engine, "--json")
            assert code == 0, (engine, err)
            found[model] = json.loads(out)["memory"]["weights_bytes"]
        # every engine sees the 14 static input scales (56 bytes) that only the files hold (140,016 vs 139,960);
        # SGLang adds its rotary cache to both
        assert found[folder] - found[folder / "config.json"] == 56, (engine, found)
        if engine != "sglang":
            assert found[folder] == 140_016, engine


def test_cli_fit_on_garbage_weights_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(CONFIG), encoding="utf-8")
    (folder / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00this is not json and no weights")
    code, out, err = run_cli(capsys, "fit", folder, "--gpu", "H100")
    assert code == 2 and out == "", (code, out)
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvbudget: error: "), err
    assert "model.safetensors" in lines[0] and "not valid JSON" in lines[0]
