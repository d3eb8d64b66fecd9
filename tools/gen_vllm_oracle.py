"""Generate tests/data/vllm_oracle/vllm-<version>.json: vLLM's own KV-cache planner run over a grid (not run in CI).

What is vLLM's and what is kvbudget's here:

- The PER-LAYER SPECS are built by this script from kvbudget's reading of each model (``kvbudget.load_model``):
  one vLLM spec object per cache layer (``FullAttentionSpec``, ``SlidingWindowSpec``,
  ``ChunkedLocalAttentionSpec``, ``MLAAttentionSpec``, ``MambaSpec`` of vllm/v1/kv_cache_interface.py) with the
  KV heads per rank, head sizes, window / chunk sizes and Mamba state bytes kvbudget derives. The hybrid
  attention/Mamba block-size alignment (vllm/platforms/interface.py ``Platform._align_hybrid_block_size``, with
  FlashAttention's kernel block ``MultipleOf(16)``) and the Mamba page padding are copied here, because vLLM does
  them while it builds the model, before the planner. So the oracle does NOT check kvbudget's reading of a
  config (``tools/vllm_conformance.py`` checks the per-token and Mamba state bytes against vLLM's classes).
- The PLANNING is vLLM's own code, run unchanged on those specs, in the order the engine core runs it
  (vllm/v1/engine/core.py ``_initialize_kv_caches``): ``resolve_kv_cache_layout`` (the default preference,
  what a worker whose backends declare no layout reports: LBNHC), ``get_global_kv_cache_groups`` (grouping,
  hybrid-manager unification, page-size unification, padding layers), ``get_kv_cache_configs`` (bytes per
  block, the null block reserved, the 'not enough memory' check and its estimated maximum length,
  ``num_blocks``), ``generate_scheduler_kv_cache_config`` and ``update_kv_cache_capacity`` (the
  "GPU KV cache size: N tokens" and "Maximum concurrency" figures).

Grid: 31 catalog models (dense GQA, MHA, MQA, MoE, sliding window, chunked local, MLA, hybrid Mamba / GDN,
Gemma 4's sliding and full layers of different head shapes)
x TP (1, 2, 4, 8 where the heads allow) x KV dtype (auto, fp8) x block size (16, 32; 16, 64 for MLA)
x max_model_len (2 of 3, in turn) x available KV memory (2 or 3 per case: an edge case around the null block
or one request, a large pool, and every third case a quarter of one request). At block size 16, models mixing
windowed and full attention run with the hybrid KV cache manager on and off, and hybrid Mamba models in
mamba_cache_mode none and align (align only at the other block size). The in-flight tokens a sliding or
chunked reservation adds (``VllmConfig.max_in_flight_tokens``) are set through max_num_batched_tokens (one
concurrent batch), 2048 or 8192 in turn.

Set up (CPU only, no CUDA download; see tools/vllm_conformance.py):
    python3 -m venv /tmp/vllmenv && /tmp/vllmenv/bin/pip install torch==2.13.0
    VLLM_TARGET_DEVICE=cpu /tmp/vllmenv/bin/pip install --no-deps vllm==0.33.0   # then the packages its imports ask for
Run from the repository root:
    VLLM_TARGET_DEVICE=cpu PYTHONPATH=src /tmp/vllmenv/bin/python tools/gen_vllm_oracle.py
"""

from __future__ import annotations

import json
import logging
import math
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import torch
import vllm
from vllm.config import CacheConfig, VllmConfig
from vllm.utils.torch_utils import STR_DTYPE_TO_TORCH_DTYPE
from vllm.v1.attention.backends.utils import _DEFAULT_LAYOUT_PREFERENCE, resolve_kv_cache_layout
from vllm.v1.core.kv_cache_config_builder import get_kv_cache_config_builder
from vllm.v1.core.kv_cache_planning import (
    _max_memory_usage_bytes_from_groups,
    _pool_bytes_per_block_from_builder,
    get_global_kv_cache_groups,
    get_kv_cache_configs,
)
from vllm.v1.core.kv_cache_utils import generate_scheduler_kv_cache_config, update_kv_cache_capacity
from vllm.v1.kv_cache_interface import (
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    KVCacheSpec,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowSpec,
    UniformTypeKVCacheSpecs,
)

import kvbudget
from kvbudget.kvcache import check_tp, serving_dtype
from kvbudget.model.layers import MLA, ChunkedLocal, FullAttention, NoCache, RecurrentState, SlidingWindow
from kvbudget.units import InputError

OUT = Path("tests/data/vllm_oracle") / f"vllm-{vllm.__version__}.json"
COMMAND = "VLLM_TARGET_DEVICE=cpu PYTHONPATH=src /tmp/vllmenv/bin/python tools/gen_vllm_oracle.py"
GiB = 1 << 30

MODELS = (
    # dense GQA / MHA / MQA
    "llama-3.1-8b", "llama-3.1-70b", "qwen3-8b", "Qwen/Qwen2.5-0.5B-Instruct", "mistral-nemo-12b", "llama-2-7b",
    "opt-125m", "phi-2", "falcon-7b", "command-r", "gpt2",
    # MoE
    "mixtral-8x7b", "Qwen/Qwen3-30B-A3B", "Qwen/Qwen1.5-MoE-A2.7B", "ibm-granite/granite-3.0-3b-a800m-instruct",
    # sliding window (all layers, or mixed with full attention)
    "mistralai/Mistral-7B-v0.1", "microsoft/Phi-3-mini-4k-instruct", "gemma-2-9b", "gemma-2-27b", "gemma-3-4b",
    "gemma-3-27b", "gpt-oss-20b", "gpt-oss-120b",
    # chunked local attention
    "llama-4-scout",
    # MLA
    "deepseek-ai/DeepSeek-V2-Lite", "deepseek-v3",
    # hybrid Mamba / GatedDeltaNet
    "ai21labs/Jamba-v0.1", "tiiuae/Falcon-H1-0.5B-Instruct", "Qwen/Qwen3-Next-80B-A3B-Instruct",
    # sliding and full layers of different head shapes (Gemma 4: pages of two sizes)
    "google/gemma-4-26B-A4B", "nvidia/Gemma-4-31B-IT-NVFP4",
)
KV_DTYPES = ("auto", "fp8")
TPS = (1, 2, 4, 8)
KIND = {FullAttentionSpec: "full_attention", MLAAttentionSpec: "mla", SlidingWindowSpec: "sliding_window",
        ChunkedLocalAttentionSpec: "chunked_local", MambaSpec: "recurrent_state"}
TORCH = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
FA_KERNEL_BLOCK = 16  # FlashAttention's get_supported_kernel_block_sizes: [MultipleOf(16)]


def layer_specs(spec, tp: int, kv_dtype: str, block_size: int, mamba_mode: str,
                max_len: int) -> tuple[dict[str, KVCacheSpec], int]:
    """vLLM's per-layer specs for ``spec`` on one TP rank (what each layer's get_kv_cache_spec returns), from
    kvbudget's layers; and the attention block size after the hybrid alignment."""
    model_dtype = serving_dtype(spec)
    dtype = TORCH[model_dtype] if kv_dtype == "auto" else STR_DTYPE_TO_TORCH_DTYPE[kv_dtype]
    attn = [(i, x) for i, x in enumerate(spec.layers) if isinstance(x, (FullAttention, MLA))]
    states = [(i, x) for i, x in enumerate(spec.layers) if isinstance(x, RecurrentState)]
    state_bytes = {i: (x.conv_bytes(tp), x.ssm_bytes(tp)) for i, x in states}
    mamba_page = max((sum(b) for b in state_bytes.values()), default=0)
    padded = None
    if states and attn:
        # platforms/interface.py Platform._align_hybrid_block_size (FlashAttention kernels: MultipleOf(16);
        # MLA: a multiple of 128). The state pages are padded to the attention page.
        a0 = attn[0][1]
        one = one_token_page(a0, tp, dtype)
        align = max(FA_KERNEL_BLOCK, block_size)
        if isinstance(a0, MLA):
            align = max(align, 128)
        need = align * math.ceil(mamba_page / (align * one))
        need = FA_KERNEL_BLOCK * math.ceil(need / FA_KERNEL_BLOCK)
        block_size = max(block_size, need)
        if block_size * one > mamba_page:
            padded = block_size * one
    out: dict[str, KVCacheSpec] = {}
    for i, x in enumerate(spec.layers):
        name = f"model.layers.{i}"
        if isinstance(x, NoCache):
            continue
        if isinstance(x, RecurrentState):
            conv, ssm = state_bytes[i]
            out[name] = MambaSpec(block_size=block_size if mamba_mode == "align" else max_len,
                                  shapes=((conv,), (ssm,)), dtypes=(torch.uint8, torch.uint8),
                                  page_size_padded=padded, mamba_cache_mode=mamba_mode)
        elif isinstance(x, MLA):
            out[name] = MLAAttentionSpec(block_size=block_size, num_kv_heads=1,
                                         head_size=x.kv_lora_rank + x.qk_rope_head_dim, dtype=dtype,
                                         cache_dtype_str=kv_dtype)
        else:
            common = dict(block_size=block_size, num_kv_heads=x.kv_heads_per_rank(tp), head_size=x.head_dim,
                          head_size_v=x.v_dim, dtype=dtype)
            if isinstance(x, SlidingWindow):
                out[name] = SlidingWindowSpec(**common, sliding_window=x.window)
            elif isinstance(x, ChunkedLocal):
                out[name] = ChunkedLocalAttentionSpec(**common, attention_chunk_size=x.chunk)
            else:
                out[name] = FullAttentionSpec(**common)
    return out, block_size


def one_token_page(layer, tp: int, dtype: torch.dtype) -> int:
    if isinstance(layer, MLA):
        return MLAAttentionSpec(block_size=1, num_kv_heads=1, head_size=layer.kv_lora_rank + layer.qk_rope_head_dim,
                                dtype=dtype).page_size_bytes
    return FullAttentionSpec(block_size=1, num_kv_heads=layer.kv_heads_per_rank(tp), head_size=layer.head_dim,
                             head_size_v=layer.v_dim, dtype=dtype).page_size_bytes


def vllm_config(block_size: int, max_len: int, in_flight: int, hma: bool, mamba_mode: str) -> VllmConfig:
    """A VllmConfig with what the planner reads; the model config is a stand-in holding max_model_len."""
    cfg = VllmConfig(cache_config=CacheConfig(block_size=block_size))
    cfg.model_config = SimpleNamespace(max_model_len=max_len, original_max_model_len=max_len,
                                       supports_kv_cache_grouping=False)
    cfg.scheduler_config.max_num_batched_tokens = in_flight
    cfg.scheduler_config.async_scheduling = False
    cfg.scheduler_config.disable_hybrid_kv_cache_manager = not hma
    cfg.cache_config.mamba_cache_mode = mamba_mode
    cfg.cache_config.enable_prefix_caching = mamba_mode == "align"
    assert cfg.max_in_flight_tokens == in_flight
    return cfg


def layer_index(name: str) -> int:
    return int(name.rsplit(".", 1)[1])


def describe_groups(groups) -> list:
    """[kind, [layer indices], per-layer page bytes (one int, or one per layer), block size] per group."""
    out = []
    for g in groups:
        spec = g.kv_cache_spec
        per_layer = list(spec.kv_cache_specs.values()) if isinstance(spec, UniformTypeKVCacheSpecs) else [spec] * len(g.layer_names)
        kinds = {KIND[type(s)] for s in per_layer}
        assert len(kinds) == 1, kinds
        pages = [s.page_size_bytes for s in per_layer]
        blocks = {s.block_size for s in per_layer}
        assert len(blocks) == 1
        out.append([kinds.pop(), [layer_index(n) for n in g.layer_names],
                    pages[0] if len(set(pages)) == 1 else pages, blocks.pop()])
    return out


def run_case(specs: dict[str, KVCacheSpec], block_size: int, max_len: int, in_flight: int, hma: bool,
             mamba_mode: str, memory: int) -> dict:
    cfg = vllm_config(block_size, max_len, in_flight, hma, mamba_mode)
    names = [layout.name for layout in _DEFAULT_LAYOUT_PREFERENCE]
    resolve_kv_cache_layout(cfg, [names], list(specs.values()))
    groups = get_global_kv_cache_groups(cfg, [dict(specs)])
    builder = get_kv_cache_config_builder(cfg)
    bpb = _pool_bytes_per_block_from_builder(builder, cfg, groups)
    row: dict = {"layout": cfg.cache_config.kv_cache_layout, "groups": describe_groups(groups), "bpb": bpb,
                 "need": _max_memory_usage_bytes_from_groups(builder, cfg, groups)}
    try:
        configs = get_kv_cache_configs(cfg, [dict(specs)], [memory], groups)
    except ValueError as e:
        msg = str(e)
        kind = "no_memory" if msg.startswith("No available memory") else "too_small" if msg.startswith(
            "To serve at least one request") else msg
        m = re.search(r"estimated maximum model length is (\d+)", msg)
        row.update(error=kind, estimated=int(m.group(1)) if m else 0)
        return row
    sched = generate_scheduler_kv_cache_config(configs)
    update_kv_cache_capacity(cfg, sched)
    row.update(num_blocks=configs[0].num_blocks, tokens=cfg.cache_config.kv_cache_size_tokens,
               concurrency=cfg.cache_config.kv_cache_max_concurrency)
    return row


def grid():
    """(model, tp, kv dtype, block size, hma, mamba mode) cases, and per case its max_model_len values."""
    for ref in MODELS:
        spec = kvbudget.load_model(ref)
        kinds = {type(x) for x in spec.layers}
        windowed = bool(kinds & {SlidingWindow, ChunkedLocal}) and len(kinds & {FullAttention, MLA}) > 0
        hybrid = RecurrentState in kinds
        mla = MLA in kinds
        for tp in TPS:
            try:
                check_tp(spec, tp)
            except InputError:
                continue
            for kv in KV_DTYPES:
                for bs in ((16, 64) if mla else (16, 32)):
                    for hma in ((True, False) if windowed and bs == 16 else (True,)):
                        for mode in (("none", "align") if hybrid and bs == 16 else ("align",) if hybrid else ("none",)):
                            yield ref, spec, tp, kv, bs, hma, mode


def max_lens(spec) -> list[int]:
    top = spec.max_context
    return sorted({min(top, 1000), min(top, 8193), min(top, 131072)})


def main() -> int:
    logging.disable(logging.WARNING)
    rows: list[list] = []
    layouts: dict[str, int] = {}
    layout_list: list[dict] = []
    n = 0
    for c, (ref, spec, tp, kv, bs, hma, mode) in enumerate(grid()):
        lens = max_lens(spec)
        for j, max_len in enumerate(lens if len(lens) < 3 else [x for k, x in enumerate(lens) if k != c % 3]):
            in_flight = (2048, 8192)[(n + j) % 2]
            specs, block = layer_specs(spec, tp, kv, bs, mode, max_len)
            probe = run_case(specs, block, max_len, in_flight, hma, mode, 1 << 50)
            bpb, need = probe["bpb"], probe["need"]
            edge = (bpb, bpb + 1, need + bpb - 1, need + bpb, need // 3 + 12345)[n % 5]
            memories = sorted({edge, 61 * GiB + 4097 * (n % 7)} | ({max(need // 4, 1)} if n % 3 == 0 else set()))
            key = json.dumps([probe["layout"], block, probe["groups"], bpb], separators=(",", ":"))
            if key not in layouts:
                layouts[key] = len(layout_list)
                layout_list.append({"layout": probe["layout"], "block_size": block, "groups": probe["groups"],
                                    "bytes_per_block": bpb})
            for memory in memories:
                r = run_case(specs, block, max_len, in_flight, hma, mode, memory)
                assert r["bpb"] == bpb
                result = [r["num_blocks"], r["tokens"], r["concurrency"]] if "error" not in r else [
                    r["error"], r["estimated"]]
                rows.append([ref, tp, kv, bs, hma, mode, max_len, in_flight, memory, layouts[key], *result])
            n += 1
    data = {
        "vllm_version": vllm.__version__,
        "torch_version": torch.__version__,
        "command": COMMAND,
        "generator": "tools/gen_vllm_oracle.py",
        "note": ("per-layer specs built from kvbudget's layer reading (and vLLM's hybrid block-size alignment, "
                 "copied); grouping, page-size unification, bytes per block, block count, the null block, the "
                 "not-enough-memory check, its estimated max length and the capacity are vLLM's own code"),
        "row_fields": ["model", "tp", "kv_cache_dtype", "block_size", "hybrid_kv_cache_manager", "mamba_cache_mode",
                       "max_model_len", "max_in_flight_tokens", "available_kv_bytes", "layout",
                       "num_blocks | error", "kv_cache_size_tokens | estimated_max_model_len", "max_concurrency"],
        "layout_fields": "groups: [kind, layer indices, per-layer page bytes, block size]",
        "layouts": layout_list,
        "rows": rows,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, separators=(",", ":"))
    text = text.replace(',"layouts":[', ',\n"layouts":[\n').replace('},{"layout"', '},\n{"layout"')
    text = text.replace(',"rows":[', ',\n"rows":[\n').replace('],["', '],\n["')
    OUT.write_text(text + "\n")
    errors = sum(1 for r in rows if isinstance(r[10], str))
    print(f"{len(rows)} rows ({errors} errors), {len(layout_list)} layouts, {len(text):,} bytes -> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
