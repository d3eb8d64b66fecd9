"""Granite 4.0-H (granitemoehybrid) and Nemotron-H (nemotron_h): Mamba-2 hybrids whose layers each hold ONE mixer.

Every figure below is computed by hand from the catalog entry's config.json, following vLLM 0.33.0
models/granitemoehybrid.py and models/nemotron_h.py (which layers are Mamba-2, attention, MLP or MoE, and their
tensors), layers/mamba/mamba_mixer2.py (MambaMixer2's in_proj, conv1d, dt_bias / A / D, gated RMSNorm, out_proj) and
layers/mamba/mamba_utils.py MambaStateShapeCalculator.mamba2_state_shape (conv state (d_conv - 1) x (inner + 2 x
groups x d_state), SSM state heads x head_dim x d_state, groups padded to the TP degree when it does not divide them).
"""

from __future__ import annotations

import pytest

import kvbudget
from kvbudget.api import engine_plan
from kvbudget.model import catalog
from kvbudget.model.hf_config import ConfigError, spec_from_config
from kvbudget.model.layers import FullAttention, RecurrentState
from kvbudget.units import element_type

BF16 = element_type("bf16")
NANO30 = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"
H8B = "nvidia/Nemotron-H-8B-Base-8K"
NANO9 = "nvidia/NVIDIA-Nemotron-Nano-9B-v2"
TINY = "ibm-granite/granite-4.0-h-tiny"


def _config(entry_id: str) -> dict:
    entry = catalog.find(entry_id)
    assert entry is not None and entry.id == entry_id
    return dict(entry.config)


def _kinds_by_hand(c: dict) -> list[str]:
    """One of mamba / attention / mlp / moe per layer, read off the config as vLLM's make_layers does."""
    if c["model_type"] == "nemotron_h":
        return [{"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}[ch] for ch in c["hybrid_override_pattern"]]
    return list(c["layer_types"])


# --- the layer pattern ------------------------------------------------------------------------------------------

PATTERNS = {  # entry: (layers, Mamba-2 layers, attention layer indices, MLP-only layers, MoE-only layers)
    NANO30: (52, 23, (5, 12, 19, 26, 33, 42), 0, 23),
    H8B: (52, 24, (7, 18, 29, 40), 24, 0),
    NANO9: (56, 27, (14, 21, 30, 39), 25, 0),
    TINY: (40, 36, (5, 15, 25, 35), 0, 0),
}


@pytest.mark.parametrize("entry_id", PATTERNS)
def test_the_layer_pattern_is_read_right(entry_id: str) -> None:
    layers, n_mamba, attention_at, n_mlp, n_moe = PATTERNS[entry_id]
    kinds = _kinds_by_hand(_config(entry_id))
    assert len(kinds) == layers
    assert tuple(i for i, k in enumerate(kinds) if k == "attention") == attention_at
    assert (kinds.count("mamba"), kinds.count("mlp"), kinds.count("moe")) == (n_mamba, n_mlp, n_moe)

    spec = kvbudget.load_model(entry_id)
    assert spec.num_layers == layers  # MLP- and MoE-only layers are decoder layers too (weights, pipeline stages)
    attn = [i for x, i in zip(spec.layers, spec.layer_of, strict=True) if isinstance(x, FullAttention)]
    mamba = [i for x, i in zip(spec.layers, spec.layer_of, strict=True) if isinstance(x, RecurrentState)]
    assert tuple(attn) == attention_at
    assert mamba == [i for i, k in enumerate(kinds) if k == "mamba"]
    # a layer without attention or Mamba holds no cache: vLLM builds no KV spec for it
    assert len(spec.layers) == n_mamba + len(attention_at)
    assert {x.variant for x in spec.layers if isinstance(x, RecurrentState)} == {"mamba2"}


# --- KV per token and Mamba state per sequence --------------------------------------------------------------------


@pytest.mark.parametrize("entry_id", PATTERNS)
def test_kv_bytes_per_token_count_only_the_attention_layers(entry_id: str) -> None:
    c = _config(entry_id)
    n_attn = _kinds_by_hand(c).count("attention")
    kv = c["num_key_value_heads"]
    # Nemotron-H: head_dim (NemotronHConfig default 128 when the file omits it); Granite: hidden / heads always
    head_dim = c.get("head_dim", 128) if c["model_type"] == "nemotron_h" else c["hidden_size"] // c["num_attention_heads"]
    expected = {NANO30: 2 * 6 * 2 * 128 * 2, H8B: 2 * 4 * 8 * 128 * 2, NANO9: 2 * 4 * 8 * 128 * 2, TINY: 2 * 4 * 4 * 128 * 2}
    assert 2 * n_attn * kv * head_dim * 2 == expected[entry_id]
    spec = kvbudget.load_model(entry_id)
    assert sum(x.bytes_per_token(BF16) for x in spec.layers) == expected[entry_id]


def _mamba_by_hand(c: dict, tp: int = 1) -> tuple[int, int]:
    """(conv, SSM) state bytes of one Mamba-2 layer for one sequence on one of ``tp`` ranks."""
    if c["model_type"] == "nemotron_h":
        heads, head_dim, groups = c["mamba_num_heads"], c["mamba_head_dim"], c["n_groups"]
        d_state, d_conv = c["ssm_state_size"], c["conv_kernel"]
        inner = heads * head_dim
        ssm_bytes = {"float32": 4, "bfloat16": 2}[c.get("mamba_ssm_cache_dtype", "float32")]  # vLLM default: float32
    else:
        heads, head_dim, groups = c["mamba_n_heads"], c["mamba_d_head"], c["mamba_n_groups"]
        d_state, d_conv = c["mamba_d_state"], c["mamba_d_conv"]
        inner = c["mamba_expand"] * c["hidden_size"]
        ssm_bytes = 2  # the served dtype (bf16)
    groups += 0 if groups % tp == 0 else tp - groups  # extra_groups_for_head_shards
    conv = (d_conv - 1) * (inner + 2 * groups * d_state) // tp * 2
    ssm = heads // tp * head_dim * d_state * ssm_bytes
    return conv, ssm


def test_mamba_state_per_sequence_by_hand() -> None:
    # Nemotron 3 Nano: inner 64 x 64 = 4096, conv 3 x (4096 + 2 x 8 x 128) x 2 B, SSM 64 x 64 x 128 x 4 B (fp32)
    assert _mamba_by_hand(_config(NANO30)) == (3 * 6144 * 2, 64 * 64 * 128 * 4) == (36_864, 2_097_152)
    # Nano 9B v2: inner 128 x 80 = 10240, conv 3 x 12288 x 2 B, SSM 128 x 80 x 128 x 4 B
    assert _mamba_by_hand(_config(NANO9)) == (3 * 12288 * 2, 128 * 80 * 128 * 4)
    # Granite 4.0-H-Tiny: inner 2 x 1536 = 3072 = 48 x 64, conv 3 x (3072 + 2 x 128) x 2 B, SSM 48 x 64 x 128 x 2 B
    assert _mamba_by_hand(_config(TINY)) == (3 * 3328 * 2, 48 * 64 * 128 * 2) == (19_968, 786_432)
    for entry_id in PATTERNS:
        c = _config(entry_id)
        n_mamba = _kinds_by_hand(c).count("mamba")
        spec = kvbudget.load_model(entry_id)
        states = [x for x in spec.layers if isinstance(x, RecurrentState)]
        for tp in (1, 2, 4):
            conv, ssm = _mamba_by_hand(c, tp)
            assert sum(x.conv_bytes(tp) for x in states) == n_mamba * conv, (entry_id, tp)
            assert sum(x.ssm_bytes(tp) for x in states) == n_mamba * ssm, (entry_id, tp)
    assert sum(x.bytes_per_sequence(0, BF16) for x in kvbudget.load_model(NANO30).layers) == 23 * 2_134_016
    # one Mamba group on 2 ranks: each holds the group (1 extra), (3072 + 2 x 2 x 128) / 2 channels
    assert _mamba_by_hand(_config(TINY), tp=2) == (3 * 1792 * 2, 24 * 64 * 128 * 2)


# --- parameters -------------------------------------------------------------------------------------------------


def _mamba2_params(h: int, heads: int, inner: int, groups: int, d_state: int, d_conv: int) -> int:
    conv_dim = inner + 2 * groups * d_state
    return ((inner + conv_dim + heads) * h  # in_proj -> z, x, B, C, dt
            + conv_dim * d_conv + conv_dim  # depthwise conv1d weight and bias
            + 3 * heads  # dt_bias, A_log, D
            + inner  # gated RMSNorm
            + h * inner)  # out_proj


def test_nemotron_3_nano_params_by_hand() -> None:
    c = _config(NANO30)
    h, vocab = c["hidden_size"], c["vocab_size"]  # 2688, 131072
    assert c["tie_word_embeddings"] is False and c["use_bias"] is False and c["mlp_bias"] is False
    assert c["use_conv_bias"] is True and c.get("moe_latent_size") is None
    mamba = _mamba2_params(h, 64, 64 * 64, 8, 128, 4)
    attention = 32 * 128 * h + 2 * 2 * 128 * h + h * 32 * 128  # q, k, v, o; no biases
    experts, width = c["n_routed_experts"], c["moe_intermediate_size"]  # 128, 1856 (top-6: c["num_experts_per_tok"])
    moe = (experts * h + experts  # router and its e_score_correction_bias
           + experts * 2 * width * h  # up and down per expert (squared ReLU, no gate)
           + 2 * c["n_shared_experts"] * c["moe_shared_expert_intermediate_size"] * h)  # shared expert, 3712 wide
    total = 2 * vocab * h + 23 * mamba + 6 * attention + 23 * moe + 52 * h + h  # one norm per layer, the final norm
    assert total == 31_577_940_288
    spec = kvbudget.load_model(NANO30)
    assert spec.params == total
    assert (spec.num_experts, spec.experts_per_token, spec.expert_intermediate_size) == (128, 6, 1856)
    by_role = spec.params_by_role()
    assert by_role["mamba"] + 23 * 4096 == 23 * mamba  # the gated norm is counted with the norms
    assert by_role["attention"] == 6 * attention
    assert by_role["experts"] == 23 * 128 * 2 * 1856 * h
    assert "mlp" not in by_role
    # NVIDIA's card: 31.6B total
    assert abs(spec.params - 31.6e9) / 31.6e9 < 0.001


def test_nemotron_h_8b_and_nano_9b_v2_params_by_hand() -> None:
    """Both publish only a size-class name ("8B", "9B"): their counts are checked against the config instead, and
    how far they are from the name is pinned (8.10B is 1.3% above 8B, 8.89B 1.2% below 9B)."""
    for entry_id, heads, head_dim, expected in ((H8B, 128, 64, 8_100_852_736), (NANO9, 128, 80, 8_888_227_328)):
        c = _config(entry_id)
        h, vocab, inter = c["hidden_size"], c["vocab_size"], c["intermediate_size"]
        kinds = _kinds_by_hand(c)
        mamba = _mamba2_params(h, heads, heads * head_dim, c["n_groups"], c["ssm_state_size"], c["conv_kernel"])
        q_heads, kv = c["num_attention_heads"], c["num_key_value_heads"]
        attention = 2 * q_heads * 128 * h + 2 * kv * 128 * h
        mlp = 2 * inter * h  # up and down, squared ReLU
        total = (2 * vocab * h + kinds.count("mamba") * mamba + kinds.count("attention") * attention
                 + kinds.count("mlp") * mlp + len(kinds) * h + h)
        assert total == expected
        spec = kvbudget.load_model(entry_id)
        assert spec.params == total and spec.num_experts == 0
    assert round(8_100_852_736 / 1e9) == 8 and round(8_888_227_328 / 1e9) == 9


def test_granite_4_h_tiny_params_by_hand() -> None:
    c = _config(TINY)
    h, vocab = c["hidden_size"], c["vocab_size"]  # 1536, 100352
    assert c["tie_word_embeddings"] is True and c.get("attention_bias", False) is False
    mamba = _mamba2_params(h, 48, 2 * h, 1, 128, 4)
    attention = 2 * 12 * 128 * h + 2 * 4 * 128 * h  # head size 1536 / 12 = 128
    ffn = (64 * h  # router
           + 64 * 3 * c["intermediate_size"] * h  # 64 SwiGLU experts of 512
           + 3 * c["shared_intermediate_size"] * h)  # the shared SwiGLU MLP of 1024
    total = vocab * h + 36 * mamba + 4 * attention + 40 * ffn + 40 * 2 * h + h  # tied: no lm_head
    assert total == 6_939_037_248
    spec = kvbudget.load_model(TINY)
    assert spec.params == total
    assert (spec.num_experts, spec.experts_per_token) == (64, 6)
    assert abs(spec.params - 7e9) / 7e9 < 0.01  # IBM: "a 7B parameter ... model"


# --- config variants the catalog does not hold --------------------------------------------------------------------


def test_granite_without_experts_runs_its_shared_mlp_as_the_dense_mlp() -> None:
    """granite-4.0-h-micro's shape (num_local_experts 0): vLLM builds no block_sparse_moe, only the shared SwiGLU MLP
    of shared_intermediate_size; intermediate_size is not read."""
    c = {**_config(TINY), "num_local_experts": 0, "num_experts_per_tok": 0, "shared_intermediate_size": 4096,
         "intermediate_size": 999}
    spec = spec_from_config(c)
    h = 1536
    by_role = spec.params_by_role()
    assert by_role["mlp"] == 40 * 3 * 4096 * h
    assert "experts" not in by_role and "router" not in by_role and spec.num_experts == 0
    assert spec.dims.intermediate_size == 4096


def test_granite_layer_types_in_transformers_5_spelling_and_the_all_mamba_default() -> None:
    c = _config(TINY)
    renamed = [{"mamba": "linear_attention", "attention": "full_attention"}[t] for t in c["layer_types"]]
    assert spec_from_config({**c, "layer_types": renamed}).layers == kvbudget.load_model(TINY).layers
    no_types = {k: v for k, v in c.items() if k != "layer_types"}
    assert {x.kind for x in spec_from_config(no_types).layers} == {"recurrent_state"}  # GraniteMoeHybridConfig default


def test_nemotron_mlp_widths_per_layer_and_the_block_type_list() -> None:
    c = _config(H8B)
    n_mlp = c["hybrid_override_pattern"].count("-")  # 24
    widths = [1000 + 10 * i for i in range(n_mlp)]
    spec = spec_from_config({**c, "intermediate_size": widths})
    assert spec.params_by_role()["mlp"] == sum(2 * w * 4096 for w in widths)
    names = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
    listed = {k: v for k, v in c.items() if k != "hybrid_override_pattern"}
    listed["layers_block_type"] = [names[ch] for ch in c["hybrid_override_pattern"]]
    assert spec_from_config(listed).inventory == kvbudget.load_model(H8B).inventory


def test_nemotron_bf16_ssm_state_when_the_config_asks() -> None:
    spec = spec_from_config({**_config(NANO30), "mamba_ssm_cache_dtype": "bfloat16"})
    state = next(x for x in spec.layers if isinstance(x, RecurrentState))
    assert state.ssm_bytes() == 64 * 64 * 128 * 2


@pytest.mark.parametrize(("change", "words"), [
    ({"hybrid_override_pattern": "M*X-"}, "not a layer letter"),
    ({"hybrid_override_pattern": 7}, "one letter per layer"),
    ({"hybrid_override_pattern": None}, "hybrid_override_pattern"),
    ({"mamba_ssm_cache_dtype": "int8"}, "mamba_ssm_cache_dtype"),
    ({"n_groups": 7}, "do not divide"),
])
def test_bad_nemotron_configs_are_one_clear_error(change: dict, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        spec_from_config({**_config(NANO30), **change})


@pytest.mark.parametrize(("change", "words"), [
    ({"layer_types": ["mamba"] * 39}, "one entry per layer"),
    ({"layer_types": ["mamba"] * 39 + ["conv"]}, "unknown entry"),
    ({"mamba_d_head": 60}, "must equal"),
])
def test_bad_granite_configs_are_one_clear_error(change: dict, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        spec_from_config({**_config(TINY), **change})


# --- engines ----------------------------------------------------------------------------------------------------


def test_vllm_raises_the_attention_block_to_hold_a_mamba_state() -> None:
    """vLLM's hybrid allocator: one page per layer of every group; the attention block grows (in steps of 16
    tokens) until one attention page (block x 2 KV heads x 128 x 2 B x K and V) holds a Mamba state page."""
    conv, ssm = _mamba_by_hand(_config(NANO30))
    per_token_layer = 2 * 2 * 128 * 2  # 1,024 B
    block = -(-(conv + ssm) // per_token_layer)
    block = -(-block // 16) * 16
    assert block == 2096
    plan = engine_plan(NANO30, gpu="H100", engine="vllm", context=32768)
    assert plan.starts and plan.block_tokens == block
    assert ("recurrent_state", 0) in plan.kv_groups and ("full_attention", 0) in plan.kv_groups
    # weights: 31.58B bf16 parameters, about 58.8 GiB, and a pool of more than one 32K request on an 80 GB H100
    assert 31_577_940_288 * 2 <= plan.weights_bytes < 31_577_940_288 * 2 * 1.01
    assert plan.max_concurrency > 1 and plan.kv_tokens >= 32768


@pytest.mark.parametrize("entry_id", [NANO30, H8B, NANO9, TINY])
def test_vllm_explain_and_sglang_plan_run(entry_id: str) -> None:
    context = 8192  # Nemotron-H-8B-Base-8K's whole context; a short one for the others
    answer = kvbudget.explain(f"vllm serve {entry_id} --max-model-len {context}", gpu="H100")
    assert answer is not None
    spec = kvbudget.load_model(entry_id)
    for engine in ("vllm", "sglang", "transformers"):
        plan = engine_plan(entry_id, gpu="H100", engine=engine, context=context)
        assert plan.starts, (engine, plan.error)
        assert spec.params * 2 <= plan.weights_bytes < spec.params * 2 * 1.02, engine
        assert plan.kv_tokens >= context and plan.max_concurrency >= 1, engine


MICRO = "ibm-granite/granite-4.0-h-micro"


def test_granite_4_h_micro_shape_against_sglangs_own_log() -> None:
    """SGLang's log of granite-4.0-h-micro (https://github.com/sgl-project/sglang/pull/18040, kept in
    tests/data/sglang_logs/v0.5.8dev_16gb_granite-4.0-h-micro_bench-one-batch.log): 'Mamba Cache is allocated.
    max_mamba_cache_size: 38, conv_state size: 0.03GB, ssm_state size: 2.74GB', 'KV Cache is allocated. #tokens:
    399740, K size: 1.52 GB' and 'mem usage=5.98 GB' after the weights. SGLang's MambaPool holds max_mamba_cache_size
    + 1 slots, its SSM state in float32 (srt/configs/mamba_utils.py default) and its conv state in bf16; its GB is GiB."""
    c = _config(MICRO)
    spec = kvbudget.load_model(MICRO)
    gib = 1 << 30
    states = [x for x in spec.layers if isinstance(x, RecurrentState)]
    attn = [x for x in spec.layers if isinstance(x, FullAttention)]
    assert (len(states), len(attn)) == (36, 4) == (_kinds_by_hand(c).count("mamba"), _kinds_by_hand(c).count("attention"))
    slots = 38 + 1
    ssm_fp32 = 64 * 64 * 128 * 4  # heads x head_dim x d_state, float32
    assert sum(x.ssm_bytes() for x in states) * 2 == 36 * ssm_fp32  # kvbudget keeps vLLM's bf16 (the served dtype)
    assert round(slots * 36 * ssm_fp32 / gib, 2) == 2.74
    conv = 3 * (4096 + 2 * 1 * 128) * 2  # (d_conv - 1) x (inner + 2 x groups x d_state), bf16
    assert sum(x.conv_bytes() for x in states) == 36 * conv and round(slots * 36 * conv / gib, 2) == 0.03
    k_per_token = 4 * 8 * 64 * 2  # 4 attention layers x 8 KV heads x head size 2048 / 32, bf16: K only
    assert sum(x.bytes_per_token(BF16) for x in attn) == 2 * k_per_token and round(399740 * k_per_token / gib, 2) == 1.52
    # the weights SGLang loaded: 3.19B bf16 parameters, 5.94 GiB of the 5.98 GB it reports
    h, vocab = 2048, c["vocab_size"]
    mamba = _mamba2_params(h, 64, 4096, 1, 128, 4)
    attention = 2 * 32 * 64 * h + 2 * 8 * 64 * h
    mlp = 3 * c["shared_intermediate_size"] * h  # the shared SwiGLU MLP is the dense MLP (no experts)
    total = vocab * h + 36 * mamba + 4 * attention + 40 * mlp + 40 * 2 * h + h  # tied embeddings
    assert spec.params == total == 3_191_396_096
    assert 0.98 < spec.params * 2 / gib / 5.98 < 1.0


def test_sglang_prices_the_ssm_state_in_float32() -> None:
    """SGLang keeps each Mamba-pool slot's SSM state in float32 unless --mamba-ssm-dtype says otherwise (server_args.py
    0.5.2 on, default "float32"; 0.5.23 configs/mamba_utils.py mamba2_state_dtype), and the conv state in bf16: the
    granite-4.0-h-micro log above shows 2.74 GB for 39 slots, which is float32. Before, the SSM state was priced in
    the model's bf16 (half of it), so the KV pool came out too large."""
    from kvbudget.engines import sglang

    spec = kvbudget.load_model(MICRO)
    slot_fp32 = 36 * (64 * 64 * 128 * 4 + 3 * (4096 + 2 * 128) * 2)  # 36 layers x (SSM float32 + conv bf16)
    slot_bf16 = 36 * (64 * 64 * 128 * 2 + 3 * (4096 + 2 * 128) * 2)
    gpu = kvbudget.find_gpu("L4")
    plans = {d: sglang.plan(spec, gpu, sglang.SGLangSettings(mem_fraction_static=0.8, mamba_ssm_dtype=d))
             for d in ("float32", "bfloat16")}
    assert any(f"({slot_fp32:,} B each)" in n for n in plans["float32"].notes)
    assert any(f"({slot_bf16:,} B each)" in n for n in plans["bfloat16"].notes)
    assert plans["float32"] == sglang.plan(spec, gpu, sglang.SGLangSettings(mem_fraction_static=0.8))  # the default
    # the Mamba pool's share of the budget is the same (mamba_full_memory_ratio): fewer slots of float32 state fit in it
    assert plans["float32"].mamba_cache_size < plans["bfloat16"].mamba_cache_size
    cmd = kvbudget.explain(f"python -m sglang.launch_server --model-path {MICRO} --mamba-ssm-dtype bfloat16 "
                           "--mem-fraction-static 0.8", gpu="L4")
    assert cmd.settings.mamba_ssm_dtype == "bfloat16"
    with pytest.raises(kvbudget.InputError, match="--mamba-ssm-dtype"):
        sglang.plan(spec, gpu, sglang.SGLangSettings(mamba_ssm_dtype="fp8"))
