"""Weight bytes per format, against hand computations of the checkpoint layouts vLLM loads
(model_executor/layers/quantization: fp8.py, awq.py, gptq.py, bitsandbytes.py, mxfp4.py) and
against published checkpoint sizes."""

from __future__ import annotations

import pytest

import kvbudget
from kvbudget.model.params import Tensor
from kvbudget.model.weights import WeightFormat, dense_format, from_quantization_config, parse_weight_format
from kvbudget.parallel import stages
from kvbudget.units import GiB, InputError


def textbook_fit(*args: object, **kwargs: object) -> kvbudget.FitAnswer:
    """kvbudget.fit with the textbook partition (weights + KV + activations + overhead)."""
    return kvbudget.fit(*args, engine="textbook", **kwargs)  # type: ignore[arg-type]


def test_16_bit_is_two_bytes_per_parameter() -> None:
    # Llama-3.1-8B: 8,030,261,248 parameters (HF "8.03B"). vLLM logs "Model loading took 14.99 GiB"
    # for this model (a published vLLM start-up log): 16,060,522,496 B = 14.96 GiB of weights
    # plus buffers.
    spec = kvbudget.load_model("meta-llama/Llama-3.1-8B-Instruct")
    assert stages(spec, spec.weight_format)[0].weights_bytes == 2 * 8_030_261_248
    assert round(2 * 8_030_261_248 / GiB, 2) == 14.96


def test_awq_matrix() -> None:
    # AWQ 4-bit, group 128, a 4096 x 4096 matrix: qweight int32 (in x out/8) = 4096*4096/2 bytes,
    # qzeros int32 (in/128 x out/8) = 32 * 512 * 4, scales fp16 (in/128 x out) = 32 * 4096 * 2.
    fmt = WeightFormat("awq", bits=4, group_size=128)
    assert fmt.matrix_bytes(4096, 4096) == 4096 * 4096 // 2 + 32 * 512 * 4 + 32 * 4096 * 2 == 8_716_288


def test_gptq_matrix_adds_act_order_index() -> None:
    # GPTQ adds g_idx, int32 per input channel.
    fmt = WeightFormat("gptq", bits=4, group_size=128)
    assert fmt.matrix_bytes(4096, 4096) == 8_716_288 + 4096 * 4
    # 8-bit GPTQ packs 4 values per int32
    fmt8 = WeightFormat("gptq", bits=8, group_size=128)
    assert fmt8.matrix_bytes(4096, 4096) == 4096 * 4096 + 32 * 4096 + 32 * 4096 * 2 + 4096 * 4


def test_fp8_block_scales() -> None:
    # DeepSeek-V3 quantization_config: fp8, weight_block_size [128, 128]: one fp32 weight_scale_inv per
    # 128 x 128 block. A 7168 x 2048 expert down_proj: 7168*2048 bytes + 56 * 16 * 4.
    fmt = WeightFormat("fp8", bits=8, block=(128, 128), fp8_scales="block")
    assert fmt.matrix_bytes(7168, 2048) == 7168 * 2048 + 56 * 16 * 4
    assert WeightFormat("fp8", bits=8).matrix_bytes(4096, 4096) == 4096 * 4096 + 4
    assert WeightFormat("fp8", bits=8, fp8_scales="per_channel").matrix_bytes(4096, 1024) == 4096 * 1024 + 4096 * 4


def test_nf4_absmax_blocks() -> None:
    # bitsandbytes nf4: 4-bit codes + fp32 absmax per 64 values; with double quantization the absmax is
    # uint8 with an fp32 scale per 256 blocks.
    n = 4096 * 4096
    assert WeightFormat("nf4", bits=4).matrix_bytes(4096, 4096) == n // 2 + n // 64 * 4
    assert WeightFormat("nf4", bits=4, double_quant=True).matrix_bytes(4096, 4096) == n // 2 + n // 64 + n // 64 // 256 * 4


def test_mxfp4_and_nvfp4() -> None:
    # MXFP4: 32 fp4 values share an e8m0 byte; NVFP4: 16 share an fp8 byte, plus two fp32 scales.
    assert WeightFormat("mxfp4", bits=4).matrix_bytes(2880, 2880) == 2880 * 2880 // 2 + 2880 * 90
    assert WeightFormat("nvfp4", bits=4).matrix_bytes(4096, 4096) == 4096 * 4096 // 2 + 4096 * 256 + 8


@pytest.mark.parametrize(
    ("model", "published_gib"),
    [
        # OpenAI gpt-oss model card, Table 1 "Checkpoint size": 12.8 GiB (20b) and 60.8 GiB (120b):
        # MXFP4 experts, everything else bf16.
        ("openai/gpt-oss-20b", 12.8),
        ("openai/gpt-oss-120b", 60.8),
    ],
)
def test_gpt_oss_checkpoint_size(model: str, published_gib: float) -> None:
    spec = kvbudget.load_model(model)
    assert spec.weight_format.name == "mxfp4"
    assert spec.weight_format.skip_roles >= {"attention", "router", "embeddings", "lm_head"}
    weights = stages(spec, spec.weight_format)[0].weights_bytes
    assert round(weights / GiB, 1) == published_gib


def test_quantization_config_readers() -> None:
    awq = from_quantization_config({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}, "bf16")
    assert (awq.name, awq.bits, awq.group_size, awq.dense_dtype) == ("awq", 4, 128, "fp16")
    gptq = from_quantization_config({"quant_method": "gptq", "bits": 8, "group_size": 32, "desc_act": False}, "bf16")
    assert (gptq.name, gptq.bits, gptq.group_size) == ("gptq", 8, 32)
    fp8 = from_quantization_config({"quant_method": "fp8", "weight_block_size": [128, 128]}, "bf16")
    assert fp8.block == (128, 128)
    bnb = from_quantization_config({"quant_method": "bitsandbytes", "load_in_4bit": True,
                                    "bnb_4bit_use_double_quant": True}, "bf16")
    assert (bnb.name, bnb.double_quant) == ("nf4", True)
    ct = from_quantization_config({"quant_method": "compressed-tensors", "config_groups": {
        "group_0": {"targets": ["Linear"], "weights": {"type": "float", "num_bits": 8, "strategy": "channel"}}}}, "bf16")
    assert (ct.name, ct.fp8_scales) == ("fp8", "per_channel")
    with pytest.raises(InputError, match="unsupported quantization_config quant_method 'hqq'"):
        from_quantization_config({"quant_method": "hqq"}, "bf16")


def test_only_linear_weights_are_packed() -> None:
    fmt = parse_weight_format("awq")
    emb = Tensor("embeddings", 32000, 4096, split="vocab")
    assert fmt.tensor_bytes(emb) == 32000 * 4096 * 2  # embeddings stay 16-bit
    lin = Tensor("mlp", 4096, 4096, linear=True)
    assert fmt.tensor_bytes(lin) == 8_716_288


def test_tp_splits_weights_except_replicated_parts() -> None:
    # Column-parallel rows and row-parallel columns split; K/V projections keep one head per rank
    # beyond the KV-head count; norms are replicated.
    fmt = WeightFormat("bf16")
    assert fmt.tensor_bytes(Tensor("mlp", 14336, 4096, split="col", linear=True), tp=4) == 3584 * 4096 * 2
    assert fmt.tensor_bytes(Tensor("mlp", 4096, 14336, split="row", linear=True), tp=4) == 4096 * 3584 * 2
    kv = Tensor("attention", 8 * 128, 4096, split="kv", heads=8, linear=True)
    assert fmt.tensor_bytes(kv, tp=16) == 1 * 128 * 4096 * 2
    assert fmt.tensor_bytes(Tensor("norms", 4096), tp=8) == 4096 * 2


def test_fit_reports_kept_16_bit_parts() -> None:
    plan = textbook_fit("meta-llama/Llama-3.1-8B-Instruct", gpu="H100", weights_dtype="fp8", context=8192)
    assert {"embeddings", "lm_head", "norms"} <= set(plan.kept_16bit)
    assert plan.weights_format.startswith("fp8")


def test_unknown_weight_format() -> None:
    with pytest.raises(InputError, match="unknown weights dtype 'int3'"):
        parse_weight_format("int3")


def test_modelopt_reads_quant_algo() -> None:
    # vLLM quantization/modelopt.py chooses FP8 or NVFP4 by quant_algo.
    fp8 = from_quantization_config({"quant_method": "modelopt", "quant_algo": "FP8"}, "bf16")
    nvfp4 = from_quantization_config({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "bf16")
    assert (fp8.name, nvfp4.name) == ("fp8", "nvfp4")
    assert from_quantization_config({"quant_method": "fbgemm_fp8"}, "bf16").fp8_scales == "per_channel"
    ct4 = from_quantization_config({"quant_method": "compressed-tensors", "config_groups": {
        "group_0": {"targets": ["Linear"], "weights": {"type": "float", "num_bits": 4}}}}, "bf16")
    assert ct4.name == "nvfp4"


def test_skip_lists_name_roles_not_layers() -> None:
    qc = {"quant_method": "awq", "bits": 4, "group_size": 128,
          "modules_to_not_convert": ["vision_tower", "multi_modal_projector", "model.layers.0.self_attn", "lm_head"]}
    fmt = from_quantization_config(qc, "bf16")
    assert fmt.skip_roles == {"vision", "lm_head"}  # a single layer's exemption is not a role's
    ct = from_quantization_config({"quant_method": "compressed-tensors", "ignore": ["lm_head", "re:.*mlp.gate$"],
                                   "config_groups": {"g": {"targets": ["Linear"], "weights": {"type": "float", "num_bits": 8}}}}, "bf16")
    assert ct.skip_roles == {"lm_head", "router"}


def test_per_layer_exclude_lists_exempt_a_role_they_cover() -> None:
    """ModelOpt's NVFP4 checkpoints list their exemptions layer by layer (exclude_modules: model.layers.0.self_attn*,
    model.layers.1.self_attn* ...). Before, every layer-numbered name was dropped, so attention was priced at 4 bits
    where the checkpoint keeps it in bf16. Now a role listed for at least 9 in 10 decoder layers is exempt; one listed
    for a few layers still is not."""
    every = [f"model.layers.{i}.self_attn*" for i in range(61)]
    shared = [f"model.layers.{i}.mlp.shared_experts*" for i in range(3, 61)]  # DeepSeek: MoE from layer 3
    qc = {"quant_method": "modelopt", "quant_algo": "NVFP4", "exclude_modules": [*every, *shared, "lm_head"]}
    assert from_quantization_config(qc, "bf16", 61).skip_roles == {"attention", "shared_experts", "lm_head"}
    assert from_quantization_config(qc, "bf16").skip_roles == {"lm_head"}  # no layer count: left out, as before
    few = {**qc, "exclude_modules": ["model.layers.0.self_attn", "model.layers.1.self_attn", "lm_head"]}
    assert from_quantization_config(few, "bf16", 61).skip_roles == {"lm_head"}
    # read from a config: Llama-3.1-8B's 32 layers, attention exempt in each -> its q/k/v/o weights stay 2 bytes
    from kvbudget.model import catalog
    from kvbudget.model.hf_config import spec_from_config

    entry = catalog.find("meta-llama/Llama-3.1-8B-Instruct")
    assert entry is not None
    cfg = dict(entry.config)
    cfg["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "NVFP4",
                                  "exclude_modules": [f"model.layers.{i}.self_attn*" for i in range(32)] + ["lm_head"]}
    fmt = spec_from_config(cfg, name="t").weight_format
    assert fmt is not None and fmt.name == "nvfp4" and "attention" in fmt.skip_roles


# --- checkpoint readers: compressed-tensors symmetric int, ModelOpt's hf_quant_config.json, regular-expression ignores


def _int4(**weights: object) -> dict[str, object]:
    w = {"num_bits": 4, "type": "int", "group_size": 32, "strategy": "group", **weights}
    return {"quant_method": "compressed-tensors", "config_groups": {"group_0": {"targets": ["Linear"], "weights": w}}}


def test_symmetric_compressed_tensors_int4_stores_no_zero_points_and_no_g_idx() -> None:
    """vLLM 0.33.0 schemes/compressed_tensors_wNa16.py: weight_packed (int32, 8 values a word) and weight_scale (one
    per group), weight_zero_point only when not symmetric; no g_idx (group/dynamic act-order is refused)."""
    rows, cols = 2048, 7168
    sym = from_quantization_config(_int4(symmetric=True), "bf16")
    assert (sym.zero_points, sym.act_order_index) == (False, False)
    assert sym.matrix_bytes(rows, cols) == rows * cols // 2 + rows * (cols // 32) * 2
    assert sym.describe() == "gptq 4-bit, group 32, symmetric"
    asym = from_quantization_config(_int4(symmetric=False), "bf16")
    assert asym.matrix_bytes(rows, cols) - sym.matrix_bytes(rows, cols) == rows * (cols // 32) // 2  # packed int4 zeros
    # QuantizationArgs' default is symmetric
    assert from_quantization_config(_int4(), "bf16").zero_points is False
    # AutoGPTQ checkpoints keep their qzeros and g_idx
    gptq = from_quantization_config({"quant_method": "gptq", "bits": 4, "group_size": 32}, "bf16")
    assert gptq.matrix_bytes(rows, cols) - sym.matrix_bytes(rows, cols) == rows * (cols // 32) // 2 + cols * 4


def test_regular_expression_ignores_name_the_roles_they_cover() -> None:
    """Kimi K2 Thinking's list: attention, shared experts (plural) and the dense MLP's projections stay 16-bit."""
    ignore = ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"]
    fmt = from_quantization_config({**_int4(), "ignore": ignore}, "bf16")
    assert fmt.skip_roles == frozenset({"lm_head", "attention", "shared_experts", "mlp"})
    # the dense MLP is exempt only when every one of its matrices is
    only_down = from_quantization_config({**_int4(), "ignore": ["re:.*mlp\\.down_proj.*"]}, "bf16")
    assert "mlp" not in only_down.skip_roles
    split = from_quantization_config({**_int4(), "ignore": ["mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]}, "bf16")
    assert "mlp" in split.skip_roles
    # a layer-numbered name exempts one layer and is left out, as before
    assert from_quantization_config({**_int4(), "ignore": ["model.layers.0.mlp.down_proj"]}, "bf16").skip_roles == frozenset()


def test_modelopt_hf_quant_config_file_form_reads_as_modelopt() -> None:
    """ModelOpt 0.29 and before: {"producer": ..., "quantization": {...}} in hf_quant_config.json, which vLLM takes as
    the quantization_config (transformers_utils/config.py) and reads in quantization/modelopt.py."""
    qc = {"producer": {"name": "modelopt", "version": "0.23.0"},
          "quantization": {"exclude_modules": ["lm_head"], "kv_cache_quant_algo": "FP8", "quant_algo": "FP8"}}
    fmt = from_quantization_config(qc, "bf16")
    assert (fmt.name, fmt.fp8_scales, fmt.skip_roles, fmt.kv_cache) == ("fp8", "per_tensor", frozenset({"lm_head"}), "fp8")
    nvfp4 = from_quantization_config({"quantization": {"quant_algo": "NVFP4", "group_size": 16}}, "bf16")
    assert (nvfp4.name, nvfp4.kv_cache) == ("nvfp4", "")
    with pytest.raises(InputError, match="ModelOpt quant_algo 'W4A8_AWQ' is not one vLLM loads"):
        from_quantization_config({"quantization": {"quant_algo": "W4A8_AWQ"}}, "bf16")


@pytest.mark.parametrize("dense", ["bf16", "fp16", "fp32", "fp8"])
def test_a_word_names_the_format_it_always_named(dense: str) -> None:
    # the formats a word names are built once and shared (a plan search asks for them thousands of times): each is the
    # record the word always gave, a 16-bit word in its own dtype, a quantized one at its bits with ``dense`` beside
    for word, bits in (("bf16", 16), ("fp16", 16), ("fp32", 16), ("fp8", 8), ("int8", 8), ("gptq", 4), ("awq", 4),
                       ("nf4", 4), ("mxfp4", 4), ("nvfp4", 4), ("bfloat16", 16), ("FP8-E4M3", 8), ("awq_marlin", 4)):
        fmt = parse_weight_format(word, dense_dtype=dense)
        name = fmt.name
        want = WeightFormat(name, dense_dtype=name) if bits == 16 else WeightFormat(name, bits=bits, dense_dtype=dense)
        assert fmt == want and hash(fmt) == hash(want), (word, dense)
    assert dense_format(dense) == WeightFormat(dense, dense_dtype=dense)
    assert dense_format(dense) is dense_format(dense) or dense not in ("bf16", "fp16", "fp32")
