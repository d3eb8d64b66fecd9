"""DeepSeek sparse attention (DSA: DeepSeek-V3.2, GLM-5) in SGLang 0.5.23: the KV-cache dtype and page size it
defaults to, and the bytes one token takes in its DSATokenToKVPool.

From sglang 0.5.23 (the wheel on PyPI, paths under ``sglang/srt/``):

* ``arg_groups/overrides.py _dsa_kv_cache_dtype_default``: ``--kv-cache-dtype auto`` becomes fp8_e4m3 on compute
  capability 10 and above, bfloat16 below (ROCm's MI300 / MI355 report 9.x); only bfloat16 and fp8_e4m3 are taken.
  ``_dsa_split_backend_resolution``: an FP8 cache runs the trtllm DSA backends on 10.x and up, flashmla_kv on
  Hopper, triton on ROCm.
* ``arg_groups/model_overrides/deepseek_v2.py``: page size 64 on CUDA and ROCm (64 x index_kpool; ROCm without
  aiter's preshuffled paged-MQA kernel falls back to 1).
* ``mem_cache/kv_cache_configurator.py calculate_mla_kv_cache_dim``: the latent is kv_lora_rank + qk_rope_head_dim
  elements, except an FP8 cache on a backend with the scaled layout (not trtllm, not ROCm's triton / tilelang /
  aiter): kv_lora_rank + kv_lora_rank / 128 x 4 + qk_rope_head_dim x 2 bytes (656 for DeepSeek).
* ``model_executor/pool_configurator.py _compute_cell_size``: plus the indexer's 132 bytes for each layer that has
  one (``SparseIndexer.bytes_per_token``; shared-top-k layers keep none).
* ``configs/model_config.py dsa_layer_skips_topk``: which layers are shared-top-k, read in its own order
  (``indexed_layers``), and two asserts that stop SGLang at start-up.
"""

from __future__ import annotations

from ..._record import replace
from ...hardware import GPU, capability
from ...model.layers import MLA, Layer, SparseIndexer
from ...model.spec import INDEXERS_NOTE, IndexerKeys, ModelSpec
from ...units import ElementType, InputError

PAGE_SIZE = 64


def is_dsa(spec: ModelSpec) -> bool:
    return spec.indexer is not None or any(isinstance(x, SparseIndexer) for x in spec.layers)


def indexed_layers(keys: IndexerKeys, n: int, name: str) -> list[bool]:
    """Which of ``n`` decoder layers SGLang 0.5.23 builds an indexer on and caches its keys for (not shared-top-k:
    configs/model_config.py ``dsa_layer_skips_topk``, read per layer by models/deepseek_v2.py and
    mem_cache/kv_cache_configurator.py). In order: ``indexer_types`` (0.5.20 on) where "full"; LongCat's
    ``cli_factor`` (0.5.18 on; asserted positive) above 1, every cli_factor-th layer from 0; ``index_topk_pattern``
    where not "S"; then ``max(i - index_skip_topk_offset + 1, 0) % index_topk_freq == 0`` with the offset asserted
    positive (0.5.13 on: "offset <= 0 marks layer 0 as skip_topk with no prior topk to reuse"), or without an offset
    ``max(i - 1, 0) % index_topk_freq == 0``. A failed assert stops SGLang: an InputError."""
    if keys.types is not None:
        return list(keys.types)
    cli = 1 if keys.cli_factor is None else keys.cli_factor
    if cli <= 0:
        raise InputError(f"{name}: cli_factor {cli} is not positive, and SGLang (0.5.18 on) stops at start-up on it "
                         "(configs/model_config.py dsa_layer_skips_topk asserts cli_factor > 0): fix the config.json, "
                         "or use --engine vllm (which does not read cli_factor)")
    if cli > 1:
        return [i % cli == 0 for i in range(n)]
    if keys.pattern is not None:
        return [not (i < len(keys.pattern) and keys.pattern[i]) for i in range(n)]
    if keys.offset is not None and keys.offset <= 0:
        raise InputError(f"{name}: index_skip_topk_offset {keys.offset} is not positive, and SGLang (0.5.13 on) stops "
                         "at start-up on it (configs/model_config.py dsa_layer_skips_topk asserts offset > 0: an offset "
                         "<= 0 makes layer 0 reuse a top-k no layer computed): fix the config.json, or use --engine vllm")
    offset = 2 if keys.offset is None else keys.offset  # without one: max(i - 1, 0), the same as an offset of 2
    return [max(i - offset + 1, 0) % keys.freq == 0 for i in range(n)]


def sglang_layers(spec: ModelSpec, notes: list[str]) -> ModelSpec:
    """``spec`` with its DSA indexers where SGLang builds them (``indexed_layers``), when that differs from where the
    reader put them (vLLM's rule: it ignores cli_factor and indexer_types), with a note; any other model as it is.
    The weights stay the checkpoint's (SGLang's loader skips the indexer weights of a layer it built none for,
    models/deepseek_common/deepseek_weight_loader.py; kvbudget counts them all)."""
    keys = spec.indexer
    if keys is None:
        return spec
    n = spec.num_layers
    want = indexed_layers(keys, n, spec.name)
    have = [False] * n
    for layer, i in zip(spec.layers, spec.layer_of, strict=True):
        have[i] = have[i] or isinstance(layer, SparseIndexer)
    if want == have:
        return spec
    layers: list[Layer] = []
    of: list[int] = []
    for layer, i in zip(spec.layers, spec.layer_of, strict=True):
        if isinstance(layer, SparseIndexer):
            continue
        layers.append(layer)
        of.append(i)
        if isinstance(layer, MLA) and want[i]:
            layers.append(SparseIndexer(keys.head_dim))
            of.append(i)
    why = f"cli_factor {keys.cli_factor}" if keys.types is None and (keys.cli_factor or 1) > 1 else "indexer_types"
    notes.append(f"DeepSeek sparse attention: SGLang builds an indexer and caches its keys on {sum(want)} of {n} "
                 f"layers ({why}), vLLM on {sum(have)}; the weights still count vLLM's {sum(have)} indexers")
    return replace(spec, layers=tuple(layers), layer_of=tuple(of),
                   notes=tuple(x for x in spec.notes if not x.startswith(INDEXERS_NOTE)))


def dsa_kv_dtype(spec: ModelSpec, gpu: GPU, value: str, old: bool, notes: list[str]) -> str:
    """The --kv-cache-dtype SGLang 0.5.23 runs a DSA model with on ``gpu`` (``value`` as given)."""
    if old:
        raise InputError(f"{spec.name} uses DeepSeek sparse attention, which SGLang serves from the 0.5 line; "
                         "give --sglang-version current")
    cap = capability(gpu)
    major = int(cap) if cap is not None else 9  # ROCm: torch reports gfx942 / gfx950 as 9.x
    if value in ("auto", ""):
        value = "fp8_e4m3" if major >= 10 and gpu.vendor == "nvidia" else "bfloat16"
        notes.append(f"DeepSeek sparse attention: SGLang sets --kv-cache-dtype {value} on {gpu.name} "
                     "(arg_groups/overrides.py)")
    if value == "bf16":
        value = "bfloat16"
    if value not in ("bfloat16", "fp8_e4m3"):
        raise InputError(f"--kv-cache-dtype {value}: SGLang serves DeepSeek sparse attention ({spec.name}) only with "
                         "bfloat16 or fp8_e4m3")
    if gpu.vendor != "nvidia":
        notes.append(f"DeepSeek sparse attention on {gpu.name}: page size 64 assumes aiter's preshuffled paged-MQA "
                     "kernel (without it SGLang uses page size 1)")
    return value


def scaled_latent_bytes(layer: MLA) -> int:
    """The FP8 latent with per-128 fp32 scales and a bf16 RoPE part (the scaled layout of flashmla_kv)."""
    return layer.kv_lora_rank + layer.kv_lora_rank // 128 * 4 + layer.qk_rope_head_dim * 2


def latent_bytes(layer: MLA, kv: ElementType, gpu: GPU) -> int:
    """Bytes of one token's MLA latent in one DSA layer (calculate_mla_kv_cache_dim x the element size)."""
    if kv.name.startswith("fp8") and gpu.vendor == "nvidia" and (capability(gpu) or 0) < 10:
        return scaled_latent_bytes(layer)  # Hopper's flashmla_kv
    return layer.bytes_per_token(kv)


def cell_bytes(layers: list[Layer], kv: ElementType, gpu: GPU) -> int:
    """Bytes one token takes over ``layers`` (one rank's share of a DSA model): latents plus indexer keys."""
    return sum(latent_bytes(x, kv, gpu) if isinstance(x, MLA) else x.bytes_per_token(kv) for x in layers)
