"""Optional conformance check of kvbudget's arithmetic against vLLM's own classes (not run in CI).

kvbudget never depends on vLLM. This script imports vLLM's pure-Python KV planner pieces and checks
that kvbudget gives the same numbers for the things both compute:

- per-token KV bytes of full attention and MLA layers (vLLM v1/kv_cache_interface.py
  FullAttentionSpec / MLAAttentionSpec page sizes, divided by the block size);
- Mamba, Mamba-2 and GatedDeltaNet state bytes per sequence under TP (vLLM
  model_executor/layers/mamba/mamba_utils.py MambaStateShapeCalculator);
- Gemma 4's per-layer head shapes as transformers' Gemma4TextConfig (per_layer_config) gives them to vLLM's
  models/gemma4.py, its KV-shared layers and their spec pages;
- the pipeline-parallel layer split (vLLM distributed/utils.py get_pp_indices);
- DeepSeek sparse attention (DeepSeek-V3.2, GLM-5): the latent's MLAAttentionSpec (bf16, fp8, fp8_ds_mla) and the
  indexer's (uint8, cache_role INDEXER) as models/deepseek_v32/attention.py and MLAAttention.get_kv_cache_spec
  build them, and one block of all of them (v1/core/kv_cache_planning.py puts them in one UniformTypeKVCacheSpecs group)
  against kvbudget's vLLM layout.

Set up (CPU only, no CUDA download), as the developers' brief describes:
    python3 -m venv /tmp/vllmenv && /tmp/vllmenv/bin/pip install torch==2.13.0
    /tmp/vllmenv/bin/pip install --no-deps vllm==0.33.0   # then the few packages its imports ask for
Run from the repository root:
    VLLM_TARGET_DEVICE=cpu PYTHONPATH=src /tmp/vllmenv/bin/python tools/vllm_conformance.py
Exits 1 on any mismatch.
"""

from __future__ import annotations

import math
import sys

import torch
from vllm.distributed.utils import get_pp_indices
from vllm.model_executor.layers.mamba.mamba_utils import MambaStateDtypeCalculator as Dtypes
from vllm.model_executor.layers.mamba.mamba_utils import MambaStateShapeCalculator as Shapes
from vllm.v1.kv_cache_interface import (
    FullAttentionSpec,
    MLAAttentionSpec,
    SparseCacheRole,
)

import kvbudget
from kvbudget.engines.vllm.kv_layout import kv_cache_dtype, kv_layout, layer_pages
from kvbudget.model.layers import MLA, FullAttention, RecurrentState, SparseIndexer
from kvbudget.parallel import pp_partition
from kvbudget.units import element_type

BLOCK = 16
TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp8_e4m3": torch.float8_e4m3fn}
failures: list[str] = []


def check(what: str, ours: int, theirs: int) -> None:
    status = "ok " if ours == theirs else "BAD"
    print(f"{status} {what}: kvbudget {ours:,}  vLLM {theirs:,}")
    if ours != theirs:
        failures.append(what)


def attention_layers() -> None:
    for model in ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-235B-A22B", "google/gemma-3-27b-it",
                  "openai/gpt-oss-20b", "deepseek-ai/DeepSeek-V3"):
        spec = kvbudget.load_model(model)
        layer = spec.layers[-1]
        for tp in (1, 2, 8):
            for dtype in ("bf16", "fp8_e4m3"):
                ours = layer.bytes_per_token(element_type(dtype), tp)
                if isinstance(layer, MLA):
                    vspec = MLAAttentionSpec(block_size=BLOCK, num_kv_heads=1,
                                             head_size=layer.kv_lora_rank + layer.qk_rope_head_dim,
                                             dtype=TORCH_DTYPES[dtype])
                else:
                    assert isinstance(layer, FullAttention)
                    heads = max(1, layer.num_kv_heads // tp)  # vLLM ModelConfig.get_num_kv_heads
                    vspec = FullAttentionSpec(block_size=BLOCK, num_kv_heads=heads, head_size=layer.head_dim,
                                              dtype=TORCH_DTYPES[dtype])
                check(f"{model} {layer.kind} tp={tp} {dtype} bytes/token", ours, vspec.page_size_bytes // BLOCK)


def state_bytes(shapes: tuple[tuple[int, ...], ...], dtype: str) -> int:
    size = element_type(dtype).nbytes(1)
    return sum(math.prod(shape) * size for shape in shapes)


def state_layers() -> None:
    jamba = kvbudget.load_model("ai21labs/Jamba-v0.1")
    h1 = kvbudget.load_model("tiiuae/Falcon-H1-0.5B-Instruct")
    nxt = kvbudget.load_model("Qwen/Qwen3-Next-80B-A3B-Instruct")
    for tp in (1, 2, 4):
        m1 = next(x for x in jamba.layers if isinstance(x, RecurrentState))
        check(f"Jamba mamba tp={tp}", m1.bytes_per_sequence(1, element_type("bf16"), tp),
              state_bytes(Shapes.mamba1_state_shape(tp, m1.conv_dim, m1.state_elems_per_head, m1.conv_kernel), "bf16"))
        m2 = next(x for x in h1.layers if isinstance(x, RecurrentState))
        d_state = m2.group_state
        check(f"Falcon-H1 mamba2 tp={tp}", m2.bytes_per_sequence(1, element_type("bf16"), tp),
              state_bytes(Shapes.mamba2_state_shape(tp, m2.conv_dim - 2 * m2.groups * d_state, m2.groups,
                                                    m2.state_heads, m2.state_elems_per_head // d_state, d_state,
                                                    m2.conv_kernel), "bf16"))
        g = next(x for x in nxt.layers if isinstance(x, RecurrentState))
        cfg = kvbudget.model.catalog.find("Qwen/Qwen3-Next-80B-A3B-Instruct").config  # type: ignore[union-attr]
        check(f"Qwen3-Next gated_delta_net tp={tp}", g.bytes_per_sequence(1, element_type("bf16"), tp),
              state_bytes(Shapes.gated_delta_net_state_shape(
                  tp, cfg["linear_num_key_heads"], cfg["linear_num_value_heads"], cfg["linear_key_head_dim"],
                  cfg["linear_value_head_dim"], cfg["linear_conv_kernel_dim"], 0), "bf16"))


def hybrid_mamba2_layers() -> None:
    """Granite 4.0-H and Nemotron-H: vLLM's shapes from the config's own keys, as granitemoehybrid.py and
    nemotron_h.py get_mamba_state_shape_from_config pass them, and the dtypes of mamba2_state_dtype (model dtype
    bf16, mamba_cache_dtype auto; Nemotron-H's mamba_ssm_cache_dtype as models/config.py
    NemotronHForCausalLMConfig sets it: the config's, else float32)."""
    names = {torch.bfloat16: "bf16", torch.float32: "fp32", torch.float16: "fp16"}
    for model in ("ibm-granite/granite-4.0-h-tiny", "ibm-granite/granite-4.0-h-micro",
                  "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "nvidia/NVIDIA-Nemotron-Nano-9B-v2",
                  "nvidia/Nemotron-H-8B-Base-8K"):
        cfg = kvbudget.model.catalog.find(model).config  # type: ignore[union-attr]
        spec = kvbudget.load_model(model)
        layer = next(x for x in spec.layers if isinstance(x, RecurrentState))
        if cfg["model_type"] == "nemotron_h":
            heads, head_dim = cfg.get("mamba_num_heads", 128), cfg.get("mamba_head_dim", 64)
            args = (heads * head_dim, cfg.get("n_groups", 8), heads, head_dim, cfg.get("ssm_state_size", 128),
                    cfg.get("conv_kernel", 4))
            ssm_cache = cfg.get("mamba_ssm_cache_dtype", "float32")
        else:
            heads = cfg["mamba_n_heads"]
            inner = cfg["mamba_expand"] * cfg["hidden_size"]
            args = (inner, cfg["mamba_n_groups"], heads, cfg.get("mamba_d_head", inner // heads), cfg["mamba_d_state"],
                    cfg["mamba_d_conv"])
            ssm_cache = "auto"
        conv_dtype, ssm_dtype = Dtypes.mamba2_state_dtype(torch.bfloat16, "auto", ssm_cache)
        for tp in (1, 2, 4):
            conv_shape, ssm_shape = Shapes.mamba2_state_shape(tp, *args)
            theirs = state_bytes((conv_shape,), names[conv_dtype]) + state_bytes((ssm_shape,), names[ssm_dtype])
            check(f"{model} mamba2 tp={tp}", layer.bytes_per_sequence(1, element_type("bf16"), tp), theirs)


def gemma4_layers() -> None:
    """Gemma 4: each layer's head shape as transformers' Gemma4TextConfig gives it to vLLM 0.33.0 models/gemma4.py
    (per_layer_config[i].head_dim / num_key_value_heads, which Gemma4DecoderLayer reads), the layer type, and the
    page of the spec vLLM builds for it (SlidingWindowSpec or FullAttentionSpec) against kvbudget's bytes per token.
    A synthetic E2B-shaped config (per-layer embeddings, KV sharing, no attention_k_eq_v) checks the same and that
    the shared layers (the last num_kv_shared_layers) are the ones kvbudget gives no cache."""
    from transformers.models.gemma4.configuration_gemma4 import Gemma4TextConfig
    from vllm.v1.kv_cache_interface import SlidingWindowSpec

    from kvbudget.model.hf_config import spec_from_config
    from kvbudget.model.layers import NoCache, SlidingWindow

    cases = [(m, kvbudget.model.catalog.find(m).config["text_config"])  # type: ignore[union-attr]
             for m in ("google/gemma-4-26B-A4B", "nvidia/Gemma-4-31B-IT-NVFP4")]
    small = {"model_type": "gemma4_text", "hidden_size": 512, "intermediate_size": 1024, "num_hidden_layers": 10,
             "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 64, "global_head_dim": 128,
             "num_kv_shared_layers": 4, "hidden_size_per_layer_input": 32, "sliding_window": 128,
             "layer_types": ["sliding_attention"] * 4 + ["full_attention"] + ["sliding_attention"] * 4
             + ["full_attention"], "dtype": "bfloat16", "max_position_embeddings": 4096}
    cases.append(("synthetic gemma4_text (KV sharing, no k_eq_v)", small))
    for name, raw in cases:
        hf = Gemma4TextConfig(**{k: v for k, v in raw.items() if k != "model_type"})
        spec = spec_from_config(raw, name)
        first_shared = hf.num_hidden_layers - hf.num_kv_shared_layers
        for i, layer in enumerate(spec.layers):
            want = hf.per_layer_config[i]
            if i >= first_shared:
                check(f"{name} layer {i} shares its KV (no cache)", int(isinstance(layer, NoCache)), 1)
                continue
            assert isinstance(layer, FullAttention)
            sliding = hf.layer_types[i] == "sliding_attention"
            check(f"{name} layer {i} sliding", int(isinstance(layer, SlidingWindow)), int(sliding))
            check(f"{name} layer {i} head_dim", layer.head_dim, want.head_dim)
            check(f"{name} layer {i} KV heads", layer.num_kv_heads, want.num_key_value_heads)
            for tp in (1, 2, 4):
                heads = max(1, want.num_key_value_heads // tp)
                common = dict(block_size=BLOCK, num_kv_heads=heads, head_size=want.head_dim, dtype=torch.bfloat16)
                vspec = (SlidingWindowSpec(**common, sliding_window=hf.sliding_window) if sliding
                         else FullAttentionSpec(**common))
                check(f"{name} layer {i} tp={tp} bytes/token", layer.bytes_per_token(element_type("bf16"), tp),
                      vspec.page_size_bytes // BLOCK)


def pipeline_split() -> None:
    for layers in (16, 22, 28, 32, 36, 48, 61, 80, 94, 126):
        for pp in (2, 3, 4, 5, 7, 8):
            if pp > layers:
                continue
            theirs = [end - start for start, end in (get_pp_indices(layers, r, pp) for r in range(pp))]
            ours = list(pp_partition(layers, pp))
            if ours != theirs:
                failures.append(f"pp split {layers}/{pp}")
                print(f"BAD pp split {layers} layers / {pp}: kvbudget {ours} vLLM {theirs}")
    print("ok  pipeline split: checked" if not any(f.startswith("pp") for f in failures) else "BAD pipeline split")


def dsa_layers() -> None:
    """Each DSA layer's two specs at block size 64 (the indexer backend's), per dtype as vLLM stores the latent."""
    block = 64
    torch_dtypes = {"bfloat16": torch.bfloat16, "fp8": torch.float8_e4m3fn, "fp8_ds_mla": torch.uint8}
    for model in ("deepseek-ai/DeepSeek-V3.2", "zai-org/GLM-5"):
        spec = kvbudget.load_model(model)
        for kv in ("bfloat16", "fp8", "fp8_ds_mla"):
            specs = {}
            for i, layer in enumerate(spec.layers):
                if isinstance(layer, MLA):
                    specs[f"{i}.attn"] = MLAAttentionSpec(
                        block_size=block, num_kv_heads=1, max_tp_shards=1,
                        head_size=layer.kv_lora_rank + layer.qk_rope_head_dim, dtype=torch_dtypes[kv],
                        cache_dtype_str=kv, state_content_bytes=656 if kv == "fp8_ds_mla" else None)
                else:
                    assert isinstance(layer, SparseIndexer)
                    specs[f"{i}.k_cache"] = MLAAttentionSpec(
                        block_size=block, num_kv_heads=1, max_tp_shards=1,
                        head_size=layer.head_dim + layer.head_dim // 128 * 4, dtype=torch.uint8,
                        cache_role=SparseCacheRole.INDEXER)
            kv_dtype = kv_cache_dtype(kv, "bf16")
            layout = kv_layout(spec, kv_dtype, "bf16", 8, block, True, False)
            pages = layer_pages(spec, layout, kv_dtype, 8)
            theirs = list(specs.values())
            for i in (0, 1):  # one latent, one indexer
                check(f"{model} {kv} {spec.layers[i].kind} page", pages[i], theirs[i].page_size_bytes)
            # all are full-attention MLA specs of one block size: one UniformTypeKVCacheSpecs group, whose
            # page_size_bytes is the sum of its layers' (from_specs needs vLLM's whole engine importable)
            assert len(layout.groups) == 1
            check(f"{model} {kv} bytes per block (one group)", sum(pages.values()),
                  sum(x.page_size_bytes for x in specs.values()))


if __name__ == "__main__":
    attention_layers()
    state_layers()
    hybrid_mamba2_layers()
    gemma4_layers()
    pipeline_split()
    dsa_layers()
    print(f"{len(failures)} mismatches")
    sys.exit(1 if failures else 0)
