"""DeepSeek sparse attention (DSA): DeepSeek-V3.2 (deepseek_v32) and GLM-5 (glm_moe_dsa).

Each layer caches its MLA latent (kv_lora_rank 512 + qk_rope_head_dim 64) and, where it has a lightning indexer, the
indexer's key: index_head_dim 128 FP8 values plus one fp32 scale per 128 = 132 bytes, whatever the latent's dtype
(vLLM 0.33.0 models/deepseek_v32/attention.py: head_dim + head_dim // 128 * 4 uint8; SGLang 0.5.23
model_executor/pool_configurator.py _compute_dsa_indexer_cell_size). The figures below are written out by hand from
the vendored configs (ai-dynamo/aiconfigurator copies of deepseek-ai/DeepSeek-V3.2, zai-org/GLM-5, zai-org/GLM-5-FP8).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

import kvbudget
from kvbudget.cli import main
from kvbudget.engines.sglang.policy import plan as sglang_plan
from kvbudget.engines.sglang.settings import SGLangSettings
from kvbudget.engines.vllm.policy import plan as vllm_plan
from kvbudget.engines.vllm.settings import VllmSettings
from kvbudget.hardware import find_gpu
from kvbudget.model import catalog
from kvbudget.model.hf_config import ConfigError, spec_from_config
from kvbudget.model.layers import MLA, SparseIndexer
from kvbudget.units import InputError, element_type

CATALOG = Path(catalog.CATALOG_DIR)
V32_LAYERS, GLM_LAYERS = 61, 78
BF16_LAYER = (512 + 64) * 2 + 132  # 1,284: bf16 latent + the indexer's key
FP8_RAW_LAYER = (512 + 64) + 132  # 708: FP8 latent as stored by FlashInfer / trtllm / ROCm kernels
FP8_DS_MLA_LAYER = 512 + 512 // 128 * 4 + 64 * 2 + 132  # 788: vLLM fp8_ds_mla / SGLang's scaled layout


def _config(fname: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((CATALOG / fname).read_text(encoding="utf-8"))["config"]
    return data


@pytest.mark.parametrize(("ref", "layers"), [("deepseek-ai/DeepSeek-V3.2", V32_LAYERS), ("zai-org/GLM-5", GLM_LAYERS),
                                             ("zai-org/GLM-5-FP8", GLM_LAYERS)])
def test_every_layer_caches_a_latent_and_an_indexer_key(ref: str, layers: int) -> None:
    spec = kvbudget.load_model(ref)
    assert spec.layer_kinds() == {"mla": layers, "dsa_indexer": layers}
    assert spec.layer_of == tuple(i for i in range(layers) for _ in range(2))
    bf16 = element_type("bf16")
    assert sum(x.bytes_per_token(bf16) for x in spec.layers) == layers * BF16_LAYER
    # the indexer's key is FP8 with scales in every cache dtype
    assert {x.bytes_per_token(element_type(d)) for x in spec.layers if isinstance(x, SparseIndexer)
            for d in ("bf16", "fp8_e4m3", "fp32")} == {132}
    assert spec.mtp_layers == 1  # num_nextn_predict_layers: the DeepseekV32MTPModel draft (config/speculative.py)


def test_shared_topk_layers_keep_no_indexer() -> None:
    """vLLM 0.33.0 attention.py: skip_topk when max(i - index_skip_topk_offset + 1, 0) % index_topk_freq != 0;
    GLM-5.2's config sets freq 4, offset 3 and lists the same layers in indexer_types (read by SGLang)."""
    cfg = copy.deepcopy(_config("glm-5.json"))
    cfg.update(index_topk_freq=4, index_skip_topk_offset=3)
    full = [0, 1, 2, *range(6, GLM_LAYERS, 4)]
    cfg["indexer_types"] = ["full" if i in full else "shared" for i in range(GLM_LAYERS)]
    spec = spec_from_config(cfg, name="glm-5.2-like")
    assert [spec.layer_of[i] for i, x in enumerate(spec.layers) if isinstance(x, SparseIndexer)] == full
    assert len(full) == 21 and sum(isinstance(x, MLA) for x in spec.layers) == GLM_LAYERS
    whole = kvbudget.load_model("zai-org/GLM-5")
    # 57 indexers fewer: 57 x (wq_b 2,048 x 32 x 128 + (wk + weights_proj) 6,144 x (128 + 32) + k_norm 256)
    assert whole.params - spec.params == 57 * (2048 * 32 * 128 + 6144 * 160 + 256)
    cfg["indexer_types"] = ["full"] * GLM_LAYERS
    with pytest.raises(ConfigError, match="indexer_types"):
        spec_from_config(cfg, name="glm-5.2-like")


def _vllm(ref: str, gpu: str, **kw: object) -> object:
    """vLLM 0.33.0 (the default release) at TP 8."""
    return vllm_plan(kvbudget.load_model(ref), find_gpu(gpu), VllmSettings(tensor_parallel_size=8, **kw))  # type: ignore[arg-type]


@pytest.mark.parametrize(("ref", "gpu", "kv", "layers", "per_layer", "stored"), [
    ("deepseek-ai/DeepSeek-V3.2", "H200", "auto", V32_LAYERS, BF16_LAYER, "bf16"),
    ("deepseek-ai/DeepSeek-V3.2", "H200", "fp8", V32_LAYERS, FP8_DS_MLA_LAYER, "fp8_ds_mla"),  # FLASHMLA_SPARSE
    ("deepseek-ai/DeepSeek-V3.2", "B200", "fp8", V32_LAYERS, FP8_RAW_LAYER, "fp8"),  # FlashInfer sparse MLA
    ("deepseek-ai/DeepSeek-V3.2", "B200", "bfloat16", V32_LAYERS, BF16_LAYER, "bf16"),
    ("zai-org/GLM-5-FP8", "H200", "auto", GLM_LAYERS, BF16_LAYER, "bf16"),
    ("zai-org/GLM-5-FP8", "B200", "auto", GLM_LAYERS, FP8_RAW_LAYER, "fp8_e4m3"),  # models/config.py on SM10x
])
def test_vllm_block_holds_the_latent_and_the_indexer(ref: str, gpu: str, kv: str, layers: int, per_layer: int,
                                                     stored: str) -> None:
    p = _vllm(ref, gpu, kv_cache_dtype=kv)
    assert p.block_size == 64  # type: ignore[attr-defined]
    assert p.bytes_per_block == 64 * layers * per_layer  # type: ignore[attr-defined]
    assert stored in p.kv_cache_dtype  # type: ignore[attr-defined]
    assert p.starts and p.kv_cache_tokens == p.num_gpu_blocks * 64  # type: ignore[attr-defined]


@pytest.mark.parametrize(("ref", "gpu", "kw", "words"), [
    ("deepseek-ai/DeepSeek-V3.2", "A100-80GB", {}, "no sparse MLA backend"),
    ("deepseek-ai/DeepSeek-V3.2", "MI300X", {}, "NVIDIA GPUs only"),
    ("deepseek-ai/DeepSeek-V3.2", "H200", {"version": "0.15.0"}, "--vllm-version 0.33.0"),
    # before 0.11.0 vLLM's registry has no DeepseekV32ForCausalLM at all (engines/vllm/archs.py)
    ("deepseek-ai/DeepSeek-V3.2", "H200", {"version": "0.10.1"}, "has no DeepseekV32ForCausalLM"),
    ("deepseek-ai/DeepSeek-V3.2", "H200", {"kv_cache_dtype": "fp8_e5m2"}, "No valid attention backend"),
    # SM120's FLASHINFER_MLA_SPARSE_SM120 stores only fp8_ds_mla (V3.2 reads bfloat16 as auto; GLM-5 does not)
    ("zai-org/GLM-5", "RTX 5090", {"kv_cache_dtype": "bfloat16"}, "take auto, fp8, fp8_e4m3, fp8_ds_mla"),
])
def test_vllm_refuses_what_it_does_not_price(ref: str, gpu: str, kw: dict[str, object], words: str) -> None:
    with pytest.raises(InputError, match=words):
        _vllm(ref, gpu, **kw)


@pytest.mark.parametrize(("ref", "gpu", "kv", "layers", "per_layer", "dtype"), [
    ("zai-org/GLM-5-FP8", "H200", "auto", GLM_LAYERS, BF16_LAYER, "bfloat16"),  # auto -> bfloat16 below SM100
    ("zai-org/GLM-5-FP8", "B200", "auto", GLM_LAYERS, FP8_RAW_LAYER, "float8_e4m3fn"),  # trtllm: raw layout
    ("zai-org/GLM-5-FP8", "H200", "fp8_e4m3", GLM_LAYERS, FP8_DS_MLA_LAYER, "float8_e4m3fn"),  # flashmla_kv
    ("zai-org/GLM-5-FP8", "MI300X", "fp8_e4m3", GLM_LAYERS, FP8_RAW_LAYER, "float8_e4m3fn"),  # triton: raw
    ("deepseek-ai/DeepSeek-V3.2", "B200", "bf16", V32_LAYERS, BF16_LAYER, "bfloat16"),
])
def test_sglang_cell_holds_the_latent_and_the_indexer(ref: str, gpu: str, kv: str, layers: int, per_layer: int,
                                                      dtype: str) -> None:
    p = sglang_plan(kvbudget.load_model(ref), find_gpu(gpu), SGLangSettings(tp=8, kv_cache_dtype=kv))
    assert p.cell_bytes == layers * per_layer
    assert p.page_size == 64 and p.max_total_num_tokens % 64 == 0 and p.starts
    assert any(f"dtype: torch.{dtype}," in line for line in p.log_lines)


def test_sglang_takes_only_bf16_or_fp8_e4m3_for_dsa() -> None:
    with pytest.raises(InputError, match="bfloat16 or fp8_e4m3"):
        sglang_plan(kvbudget.load_model("zai-org/GLM-5"), find_gpu("H200"), SGLangSettings(tp=8, kv_cache_dtype="fp8_e5m2"))


@pytest.mark.parametrize("engine", ["trtllm", "llama.cpp", "transformers"])
def test_engines_without_an_indexer_layout_refuse_in_one_line(engine: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["fit", "zai-org/GLM-5", "--gpu", "B200", "--engine", engine]
    if engine != "transformers":
        args += ["--tp", "8"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "DeepSeek sparse attention" in err[0] and "--engine vllm" in err[0]


def _glm5_folder(tmp_path: Path, **keys: object) -> str:
    """A GLM-5-FP8 model folder whose config.json carries ``keys`` on top of the published ones."""
    cfg = {**copy.deepcopy(_config("glm-5-fp8.json")), **keys}
    (tmp_path / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    return str(tmp_path)


@pytest.mark.parametrize(("keys", "words"), [
    # configs/model_config.py dsa_layer_skips_topk: "index_skip_topk_offset must be positive; offset <= 0 marks layer 0
    # as skip_topk with no prior topk to reuse" (an assert: SGLang stops at start-up); was planned, exit 0
    ({"index_skip_topk_offset": 0}, "index_skip_topk_offset 0 is not positive"),
    ({"index_skip_topk_offset": 0, "index_topk_freq": 4}, "index_skip_topk_offset 0 is not positive"),
    ({"cli_factor": 0}, "cli_factor 0 is not positive"),  # assert cli_factor > 0
    ({"cli_factor": -2}, "cli_factor -2 is not positive"),
])
def test_sglang_stops_where_it_asserts_on_the_indexer_keys(keys: dict[str, object], words: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    folder = _glm5_folder(tmp_path, **keys)
    assert main(["fit", folder, "--gpu", "H200", "--tp", "8", "--engine", "sglang"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert captured.out == "" and len(err) == 1 and words in err[0] and "SGLang" in err[0], err
    # vLLM asserts neither (models/deepseek_v2.py reads the offset as it is and never reads cli_factor)
    assert main(["fit", folder, "--gpu", "H200", "--tp", "8", "--engine", "vllm"]) == 0


def test_sglang_stops_on_offset_0_only_where_it_reads_the_offset(tmp_path: Path) -> None:
    """A pattern, a cli_factor above 1 or indexer_types come first in dsa_layer_skips_topk: the offset is not read."""
    spec = kvbudget.load_model(_glm5_folder(tmp_path, index_skip_topk_offset=0, index_topk_pattern="F" * GLM_LAYERS))
    assert sglang_plan(spec, find_gpu("H200"), SGLangSettings(tp=8)).starts


def test_sglang_places_indexers_by_cli_factor(tmp_path: Path) -> None:
    """SGLang 0.5.23 reads LongCat's cli_factor before index_topk_freq: a fresh top-k (an indexer and its cached keys)
    on layers 0, 2, 4, ... only. vLLM 0.33.0 never reads it. Both were planned with an indexer on all 78 layers."""
    spec = kvbudget.load_model(_glm5_folder(tmp_path, cli_factor=2))
    assert spec.layer_kinds() == {"mla": GLM_LAYERS, "dsa_indexer": GLM_LAYERS}  # vLLM's placement (freq 1)
    assert any("SGLang reads cli_factor 2 first" in n for n in spec.notes)
    p = sglang_plan(spec, find_gpu("H200"), SGLangSettings(tp=8))
    # 78 bf16 latents of (512 + 64) x 2 bytes, 39 indexer keys of 132 bytes
    assert p.cell_bytes == GLM_LAYERS * (512 + 64) * 2 + 39 * 132
    assert any("on 39 of 78 layers (cli_factor 2), vLLM on 78" in n for n in p.notes)
    assert not any("SGLang reads cli_factor" in n for n in p.notes)  # the reader's note is about vLLM's placement
    whole = sglang_plan(kvbudget.load_model("zai-org/GLM-5-FP8"), find_gpu("H200"), SGLangSettings(tp=8))
    assert whole.cell_bytes == GLM_LAYERS * BF16_LAYER and whole.weights_bytes == p.weights_bytes
    v = vllm_plan(spec, find_gpu("H200"), VllmSettings(tensor_parallel_size=8))
    assert v.bytes_per_block == 64 * GLM_LAYERS * BF16_LAYER  # type: ignore[attr-defined]
    # indexer_types come before cli_factor in SGLang 0.5.20 on (and must agree with vLLM's placement here)
    typed = kvbudget.load_model(_glm5_folder(tmp_path, cli_factor=2, indexer_types=["full"] * GLM_LAYERS))
    assert not any("cli_factor" in n for n in typed.notes)
    assert sglang_plan(typed, find_gpu("H200"), SGLangSettings(tp=8)).cell_bytes == GLM_LAYERS * BF16_LAYER


def test_a_cli_factor_that_is_not_a_whole_number_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kv", _glm5_folder(tmp_path, cli_factor="2")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'cli_factor'" in err[0] and "whole number" in err[0]
