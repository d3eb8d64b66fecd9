"""DeepSeek sparse attention (DSA: DeepSeek-V3.2, GLM-5) in vLLM 0.33.0: the KV-cache dtype its sparse MLA backends
store the latent in, and the block size they and the indexer run with.

From vLLM 0.33.0 (the wheel on PyPI, paths under ``vllm/``):

* ``platforms/cuda.py _get_backend_priorities``: an MLA model with ``index_topk`` runs a sparse backend. Hopper
  (9.x): FLASH_ATTN_MLA_SPARSE (auto, float16, bfloat16), then FLASHMLA_SPARSE (auto, bfloat16, fp8, fp8_ds_mla),
  then FLASHINFER_MLA_SPARSE_SM90 (auto, bfloat16, fp8, fp8_e4m3). Blackwell (10.x): FlashInfer's sparse MLA
  (auto, float16, bfloat16, fp8, fp8_e4m3) first for a quantized cache, FlashMLA sparse or FlashAttention-4 for bf16.
  12.x: FLASHINFER_MLA_SPARSE_SM120, which takes only the packed fp8_ds_mla layout.
* ``model_executor/layers/attention/mla_attention.py _canonicalize_sparse_mla_kv_cache_dtype``: FLASHMLA_SPARSE
  stores any quantized dtype as ``fp8_ds_mla``, and the SM120 backend stores auto / fp8 / fp8_e4m3 that way:
  656 bytes per token (512 FP8 NoPE values, 4 fp32 scales, 64 bf16 RoPE values; ``MLAAttention.get_kv_cache_spec``
  ``state_content_bytes``). FlashInfer's sparse backends keep a plain FP8 latent of 576 bytes.
* ``model_executor/models/config.py``: DeepseekV32ForCausalLM reads ``bfloat16`` as ``auto``;
  GlmMoeDsaForCausalLM turns ``auto`` into ``fp8_e4m3`` on compute capability 10.x ("Using fp8 kv-cache for
  GlmMoeDsaForCausalLM on SM10x").
* Block size: every sparse backend takes multiples of 64 (FlashInfer's SM100 one multiples of 32) and the
  indexer's DEEPSEEK_V32_INDEXER backend exactly 64 on CUDA (``v1/attention/backends/mla/indexer.py``), so
  ``Platform._preferred_block_size_for_backends`` settles on 64.
"""

from __future__ import annotations

from ...hardware import GPU, capability
from ...model.layers import SparseIndexer
from ...model.spec import ModelSpec
from ...units import InputError

BLOCK_SIZE = 64  # the indexer backend's one kernel block size on CUDA (v1/attention/backends/mla/indexer.py)


def is_dsa(spec: ModelSpec) -> bool:
    """Whether the model caches DSA indexer keys next to its MLA latent."""
    return any(isinstance(x, SparseIndexer) for x in spec.layers)


def dsa_kv_dtype(spec: ModelSpec, value: str, gpu: GPU, current: bool, notes: list[str]) -> str:
    """The --kv-cache-dtype vLLM 0.33.0 stores a DSA model's latent in on ``gpu`` (``value`` as given); an
    InputError where kvbudget does not price the pairing. ``current``: the release is 0.21 or later."""
    if not current:
        raise InputError(f"{spec.name} uses DeepSeek sparse attention (an indexer key cache beside the MLA latent): "
                         "kvbudget prices it as vLLM 0.21 to 0.33 lay it out; give --vllm-version 0.33.0")
    cap = capability(gpu)
    if gpu.vendor != "nvidia" or cap is None:
        raise InputError(f"{spec.name} (DeepSeek sparse attention) on {gpu.name}: kvbudget prices vLLM's DSA cache on "
                         "NVIDIA GPUs only (ROCm's sparse MLA and indexer layouts are not modelled); give an NVIDIA GPU "
                         "or --engine sglang")
    major = int(cap)
    if spec.model_type == "deepseek_v32" and value == "bfloat16":
        value = "auto"  # models/config.py DeepseekV32ForCausalLM: "Using bfloat16 kv-cache for DeepSeekV3.2"
    if major == 10 and value == "auto" and spec.model_type == "glm_moe_dsa":
        notes.append("GLM-5 (GlmMoeDsaForCausalLM) on compute capability 10.x: vLLM turns --kv-cache-dtype auto into "
                     "fp8_e4m3 (models/config.py)")
        value = "fp8_e4m3"
    sm120 = {"auto": "fp8_ds_mla", "fp8": "fp8_ds_mla", "fp8_e4m3": "fp8_ds_mla", "fp8_ds_mla": "fp8_ds_mla"}
    takes = {
        9: {"auto": "auto", "bfloat16": "bfloat16", "float16": "float16", "fp8": "fp8_ds_mla",
            "fp8_ds_mla": "fp8_ds_mla", "fp8_e4m3": "fp8_e4m3"},
        10: {"auto": "auto", "bfloat16": "bfloat16", "float16": "float16", "fp8": "fp8", "fp8_e4m3": "fp8_e4m3",
             "fp8_ds_mla": "fp8_ds_mla"},
        12: sm120,
    }.get(major)
    if takes is None:
        raise InputError(f"{spec.name} (DeepSeek sparse attention) on {gpu.name} (compute capability {cap}): vLLM 0.33.0 "
                         "has no sparse MLA backend below compute capability 9.0; give a Hopper or Blackwell GPU")
    stored = takes.get(value)
    if stored is None:
        raise InputError(f"--kv-cache-dtype {value} for {spec.name} (DeepSeek sparse attention) on {gpu.name}: vLLM "
                         f"0.33.0's sparse MLA backends there take {', '.join(takes)}")
    if stored == "fp8_ds_mla" and value != "fp8_ds_mla":
        notes.append(f"--kv-cache-dtype {value}: vLLM's {'FLASHINFER_MLA_SPARSE_SM120' if major == 12 else 'FLASHMLA_SPARSE'}"
                     " backend stores the MLA latent as fp8_ds_mla, 656 B per token and layer")
    return stored
