"""The transformers cache arithmetic, proved on real tensors.

Each case is a real config.json from the catalog, shrunk (widths, layers, experts, vocabulary,
window) with its structure kept. transformers builds a tiny random model from it on the CPU, runs a
short ``generate`` on a batch of 2, and every tensor the returned cache holds is weighed and compared,
per decoder layer and per kind of tensor, with ``transformers_cache.plan`` on the ``ModelSpec`` that
kvbudget reads from the same config: exactly, in bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvbudget.engines.transformers.kv_layout import LayerCache, TransformersCachePlan, plan
from kvbudget.model.hf_config import spec_from_config
from kvbudget.units import InputError

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

CATALOG = Path(__file__).resolve().parents[1] / "src" / "kvbudget" / "model" / "catalog"
TORCH_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
# Token ids and weight formats of the real checkpoints do not fit a random tiny model.
DROPPED = ("quantization_config", "bos_token_id", "eos_token_id", "pad_token_id")
SMALL = {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 128}

# name -> (catalog file, overrides, model dtype, kvbudget layer kinds expected)
CASES: dict[str, tuple[str, dict[str, Any], str, dict[str, int]]] = {
    "gqa-llama-3.1-8b": ("llama-3.1-8b", {**SMALL, "num_hidden_layers": 2}, "fp32", {"full_attention": 2}),
    "sliding-mistral-7b": ("mistral-7b-v0.1", {**SMALL, "num_hidden_layers": 2, "sliding_window": 4}, "fp16",
                           {"sliding_window": 2}),
    "alternating-gemma-2-9b": ("gemma-2-9b", {**SMALL, "num_hidden_layers": 4, "head_dim": 16, "sliding_window": 4},
                               "bf16", {"sliding_window": 2, "full_attention": 2}),
    "chunked-llama-4-scout": ("llama-4-scout", {
        **SMALL, "intermediate_size": 32, "intermediate_size_mlp": 128, "num_hidden_layers": 4, "head_dim": 16,
        "num_local_experts": 4, "attention_chunk_size": 4, "no_rope_layers": None, "moe_layers": None,
        "attn_temperature_tuning": True,  # the checkpoint's 4 fails transformers' strict bool field; same meaning
    }, "fp32", {"chunked_local": 3, "full_attention": 1}),
    "mla-deepseek-v3": ("deepseek-v3", {
        **SMALL, "num_key_value_heads": 4, "num_hidden_layers": 3, "first_k_dense_replace": 1, "moe_intermediate_size": 32,
        "n_routed_experts": 4, "num_experts_per_tok": 2, "n_group": 2, "topk_group": 1, "q_lora_rank": 32,
        "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 16, "v_head_dim": 12,
    }, "bf16", {"mla": 3}),
    "mla-deepseek-v2-lite": ("deepseek-v2-lite", {
        **SMALL, "num_key_value_heads": 4, "num_hidden_layers": 2, "first_k_dense_replace": 1, "moe_intermediate_size": 32,
        "n_routed_experts": 4, "num_experts_per_tok": 2, "kv_lora_rank": 24, "qk_rope_head_dim": 8,
        "qk_nope_head_dim": 16, "v_head_dim": 16,
    }, "fp32", {"mla": 2}),
    "gdn-qwen3-next-80b": ("qwen3-next-80b-a3b", {
        **SMALL, "num_hidden_layers": 4, "head_dim": 16, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32,
        "num_experts": 4, "num_experts_per_tok": 2, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
        "linear_key_head_dim": 8, "linear_value_head_dim": 12,
    }, "bf16", {"recurrent_state": 3, "full_attention": 1}),
    "mamba-jamba-v0.1": ("jamba-v0.1", {
        **SMALL, "num_hidden_layers": 4, "attn_layer_period": 2, "attn_layer_offset": 1, "expert_layer_period": 2,
        "expert_layer_offset": 1, "num_experts": 4, "num_experts_per_tok": 2, "mamba_d_state": 8, "mamba_dt_rank": 8,
    }, "fp16", {"recurrent_state": 2, "full_attention": 2}),
    "mamba2-falcon-h1-0.5b": ("falcon-h1-0.5b", {
        **SMALL, "num_hidden_layers": 2, "head_dim": 16, "mamba_d_ssm": 64, "mamba_n_heads": 4, "mamba_d_head": 16,
        "mamba_n_groups": 2, "mamba_d_state": 8,
    }, "bf16", {"full_attention": 2, "recurrent_state": 2}),
}

PROMPT = 5
NEW = 4  # the cache sees PROMPT + NEW - 1 = 8 tokens: past the window of 4 and its window - 1
BATCH = 2


def shrunk(catalog: str, overrides: dict[str, Any]) -> dict[str, Any]:
    raw = json.loads((CATALOG / f"{catalog}.json").read_text(encoding="utf-8"))["config"]
    config = dict(raw.get("text_config", raw))  # Llama 4: the text model of the multimodal checkpoint
    for key in DROPPED:
        config.pop(key, None)
    config.update(overrides)
    return {k: v for k, v in config.items() if v is not None}


def build(config: dict[str, Any], dtype: str) -> Any:
    torch.manual_seed(0)
    hf_config = transformers.AutoConfig.for_model(**config)
    model = transformers.AutoModelForCausalLM.from_config(hf_config, dtype=getattr(torch, TORCH_DTYPES[dtype]))
    return model.eval()


def _bytes(t: Any) -> int:
    return int(t.numel() * t.element_size())


_SLOTS = {"keys": "key_bytes", "values": "value_bytes", "conv_states": "conv_bytes", "recurrent_states": "recurrent_bytes"}


def measure(cache: Any) -> list[dict[str, Any]]:
    """Every tensor each cache layer holds, by kind; anything unexpected fails the test."""
    assert not [k for k, v in vars(cache).items() if isinstance(v, torch.Tensor)], "tensors outside the layers"
    out = []
    for layer in cache.layers:
        row: dict[str, Any] = dict.fromkeys((*_SLOTS.values(), "scalar_bytes", "storage_bytes"), 0)
        row["holder"] = type(layer).__name__
        for name, value in vars(layer).items():
            tensors = [value] if isinstance(value, torch.Tensor) else []
            if isinstance(value, dict):
                tensors = [t for t in value.values() if isinstance(t, torch.Tensor)]
            for t in tensors:
                if t.dim() == 0:
                    assert t.dtype == torch.int64, f"{row['holder']}.{name}: {t.dtype} scalar"
                    row["scalar_bytes"] += _bytes(t)
                    continue
                assert name in _SLOTS, f"unexpected tensor {row['holder']}.{name} {tuple(t.shape)}"
                row[_SLOTS[name]] += _bytes(t)
                row["storage_bytes"] += t.untyped_storage().nbytes()
        out.append(row)
    return out


def predicted(p: TransformersCachePlan, layers: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [
        {**dict.fromkeys((*_SLOTS.values(), "scalar_bytes", "storage_bytes"), 0), "holder": "DummyLayer"} for _ in range(layers)
    ]
    for entry in p.layers:
        row = rows[entry.layer]
        row["holder"] = entry.holder
        for slot in (*_SLOTS.values(), "scalar_bytes", "storage_bytes"):
            row[slot] += getattr(entry, slot)
    return rows


def generate(model: Any, kind: str, **kwargs: Any) -> Any:
    ids = torch.randint(3, 128, (BATCH, PROMPT), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW, do_sample=False, use_cache=True,
                             return_dict_in_generate=True, cache_implementation=kind, pad_token_id=0, **kwargs)
    assert out.sequences.shape == (BATCH, PROMPT + NEW)
    cache = getattr(out, "cache", None)  # transformers 5 names it cache; 4.x past_key_values
    return cache if cache is not None else out.past_key_values


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request: pytest.FixtureRequest) -> tuple[str, Any, Any, str]:
    catalog, overrides, dtype, kinds = CASES[request.param]
    config = shrunk(catalog, overrides)
    spec = spec_from_config(config, name=request.param)
    assert spec.layer_kinds() == kinds  # kvbudget read the structure the case is about
    return request.param, spec, build(config, dtype), dtype


@pytest.mark.parametrize("kind", ["dynamic", "static"])
def test_generate_cache_bytes_match_exactly(case: tuple[str, Any, Any, str], kind: str) -> None:
    name, spec, model, dtype = case
    cache = generate(model, kind)
    seen = PROMPT + NEW - 1
    p = plan(spec, BATCH, seen, dtype, kind)
    real = measure(cache)
    assert real == predicted(p, spec.num_layers), name
    assert sum(r["key_bytes"] + r["value_bytes"] + r["conv_bytes"] + r["recurrent_bytes"] for r in real) == p.tensor_bytes
    assert sum(r["storage_bytes"] + r["scalar_bytes"] for r in real) == p.total
    assert p.total > 0


def test_static_cache_longer_than_the_generation() -> None:
    catalog, overrides, dtype, _ = CASES["alternating-gemma-2-9b"]
    config = shrunk(catalog, overrides)
    model = build(config, dtype)
    spec = spec_from_config(config)
    cache = generate(model, "static", max_cache_len=13)  # generation_config.max_cache_len raises the size
    p = plan(spec, BATCH, PROMPT + NEW - 1, dtype, "static", max_cache_len=13)
    assert measure(cache) == predicted(p, spec.num_layers)
    assert {e.tokens for e in p.layers} == {4, 13}


@pytest.mark.parametrize(("window", "steps"), [
    (4, (5,)), (4, (5, 1, 1)), (4, (2, 1)), (4, (3, 1)), (4, (2, 3)), (6, (9, 4)), (1, (3, 1)), (2, (1, 1, 1)), (8, (3,)),
])
def test_dynamic_sliding_window_layer_sweep(window: int, steps: tuple[int, ...]) -> None:
    """The real DynamicCache fed chunks of the given sizes: tensors keep window - 1 tokens, storage one step more."""
    config = shrunk("mistral-7b-v0.1", {**SMALL, "num_hidden_layers": 1, "sliding_window": window})
    spec = spec_from_config(config)
    cache = transformers.DynamicCache(config=transformers.AutoConfig.for_model(**config))
    for n in steps:
        k = torch.randn(BATCH, 2, n, 16)
        cache.update(k, k.clone(), 0)
    p = plan(spec, BATCH, sum(steps), "fp32", "dynamic", step=steps[-1])
    assert measure(cache) == predicted(p, 1)


def test_plan_fields_and_rules() -> None:
    spec = spec_from_config(shrunk("gemma-2-9b", {**SMALL, "num_hidden_layers": 2, "head_dim": 16, "sliding_window": 4096}))
    p = plan(spec, 3, 10_000, "bfloat16", "dynamic")
    sliding, full = p.layers
    assert isinstance(sliding, LayerCache)
    assert (sliding.holder, sliding.tokens, full.holder, full.tokens) == ("DynamicSlidingWindowLayer", 4095, "DynamicLayer", 10_000)
    assert sliding.key_bytes == 3 * 2 * 4095 * 16 * 2
    assert sliding.storage_bytes == 2 * 3 * 2 * 4096 * 16 * 2
    assert p.total == p.storage_bytes + 8 and p.by_layer() == {0: sliding.total, 1: full.total}
    static = plan(spec, 3, 10_000, "bf16", "static", max_cache_len=16_384)
    assert [e.tokens for e in static.layers] == [4096, 16_384] and static.scalar_bytes == 16
    assert static.notes and static.rules_from.startswith("transformers")
    auto = plan(spec, 1, 8, "auto", "dynamic")  # from_pretrained's default: the checkpoint's dtype
    assert auto.dtype == spec.native_dtype and any("auto" in note for note in auto.notes)


@pytest.mark.parametrize(("args", "kwargs", "message"), [
    ((1, 8, "fp8"), {}, "model's dtype"),
    ((1, 8, "bf16", "offloaded"), {}, "cache kind"),
    ((0, 8, "bf16"), {}, "batch"),
    ((1, 0, "bf16"), {}, "seq_len"),
    ((1, 8, "bf16", "dynamic", 16), {}, "static cache only"),
    ((1, 8, "bf16", "static", 4), {}, "exceeds max_cache_len"),
    ((1, 8, "bf16"), {"step": 9}, "step"),
])
def test_bad_input_is_one_clear_line(args: tuple[Any, ...], kwargs: dict[str, Any], message: str) -> None:
    spec = spec_from_config(shrunk("llama-3.1-8b", {**SMALL, "num_hidden_layers": 1}))
    with pytest.raises(InputError, match=message) as err:
        plan(spec, *args, **kwargs)
    assert "\n" not in str(err.value)
