"""SGLang expert parallelism (--ep-size) and attention data parallelism (--enable-dp-attention --dp N), checked
against hand computations from the models' configs and sglang 0.5.23's rules:

- ``runtime_context.py: derive_parallel_widths``: attn_tp_size = tp / attn_dp_size, moe_tp_size = tp / ep_size;
- ``layers/moe/fused_moe_triton/layer.py: FusedMoE.__init__``: num_experts / ep_size whole experts per rank, each
  split moe_tp_size ways;
- ``model_executor/pool_configurator.py: _compute_cell_size``: KV heads per rank of the attention-TP group (an MLA
  latent whole on every rank);
- ``arg_groups/memory_hook.py: reserve_for_graph_mb``: max_bs x attn_dp_size x 3 (+ 1.5 over bs 300) more MiB;
- ``arg_groups/parallel_hook.py: _handle_data_parallelism``: chunked_prefill_size / attn_dp_size;
- ``mem_cache/kv_cache_configurator.py: KVCacheConfigurator.resolve_max_num_reqs``: max_running_requests / attn_dp_size.
"""

from __future__ import annotations

import json

import pytest

import kvbudget
from kvbudget._record import replace
from kvbudget.cli import main
from kvbudget.engines import sglang
from kvbudget.engines.cmdscan import parse_other_command
from kvbudget.engines.sglang.launch import sglang_argv
from kvbudget.engines.sglang.policy import rank_stages
from kvbudget.units import InputError

QWEN = "Qwen/Qwen3-30B-A3B"  # 48 layers, hidden 2048, 32 heads / 4 KV heads x 128, 128 experts x 768, vocab 151936
V3 = "deepseek-ai/DeepSeek-V3"  # 61 layers (58 MoE), MLA, 256 experts x 2048 + 1 shared, FP8 blocks of 128, vocab 129280
S = sglang.SGLangSettings


def _experts(spec: kvbudget.ModelSpec, s: sglang.SGLangSettings) -> int:
    fmt = spec.weight_format
    assert fmt is not None
    return max(dict(st.weights_by_role).get("experts", 0) for st in rank_stages(spec, fmt, s))


def test_expert_parallel_whole_experts_per_rank() -> None:
    # Qwen3-30B-A3B, bf16, TP 8 EP 8: moe_tp_size 1, 128 / 8 = 16 whole experts of gate, up (768 x 2048) and
    # down (2048 x 768): 48 x 16 x 3 x 768 x 2048 x 2 bytes
    spec = kvbudget.load_model(QWEN)
    assert _experts(spec, S(tp=8, ep_size=8)) == 48 * 16 * 3 * 768 * 2048 * 2 == 7_247_757_312
    # EP 2: 64 experts split 4 ways; plain TP 8: all 128 split 8 ways. SGLang's EP moves no expert bytes here.
    assert _experts(spec, S(tp=8, ep_size=2)) == _experts(spec, S(tp=8)) == 7_247_757_312
    h200 = kvbudget.find_gpu("H200")
    ep, tp = sglang.plan(spec, h200, S(tp=8, ep_size=8)), sglang.plan(spec, h200, S(tp=8))
    # the same shard bytes; plain TP's also carry the caching allocator's segments (allocations.py), which are not
    # modelled under expert parallelism (allocator_bytes 0 there)
    assert (ep.weights_bytes, ep.ep_size, ep.allocator_bytes) == (tp.weights_bytes - tp.allocator_bytes, 8, 0)
    assert tp.allocator_bytes > 0 and ep.max_total_num_tokens >= tp.max_total_num_tokens
    assert any("16 of 128 routed experts per GPU" in n for n in ep.notes)
    # DeepSeek-V3 FP8: 58 MoE layers x 32 experts of 3 x 2048 x 7168 FP8 bytes, each with 16 x 56 float32
    # block scales per matrix; the shared expert stays tensor-parallel (its fusion is off under EP on NVIDIA:
    # DeepseekV2ForCausalLM.shared_experts_fusion_disable_reason)
    v3 = kvbudget.load_model(V3)
    assert _experts(v3, S(tp=8, ep_size=8)) == 58 * 32 * 3 * (2048 * 7168 + 16 * 56 * 4) == 81_758_552_064
    assert _experts(v3, S(tp=8, ep_size=8)) == _experts(v3, S(tp=8))


def test_expert_parallel_sizes_sglang_refuses() -> None:
    spec = kvbudget.load_model(QWEN)
    with pytest.raises(InputError, match="must divide --tp 8"):  # moe_tp_size = tp // ep would not be whole
        sglang.plan(spec, kvbudget.find_gpu("H200"), S(tp=8, ep_size=3))
    with pytest.raises(InputError, match="128 routed experts"):  # FusedMoE: the same number of experts per rank
        sglang.plan(spec, kvbudget.find_gpu("H200"), S(tp=6, ep_size=6))
    with pytest.raises(InputError, match="must divide --tp 8"):  # tp_size % attn_dp_size == 0
        sglang.plan(spec, kvbudget.find_gpu("H200"), S(tp=8, dp=3, enable_dp_attention=True))
    # a dense model: --ep-size changes nothing and says so
    dense = sglang.plan(kvbudget.load_model("meta-llama/Llama-3.1-8B-Instruct"), kvbudget.find_gpu("H100"), S(tp=2, ep_size=2))
    assert dense.ep_size == 1 and any("ignored" in n for n in dense.notes)


def test_dp_attention_qwen3_moe() -> None:
    # TP 8, --enable-dp-attention --dp 8: attention TP 1. Per rank the attention is whole: q 4096 x 2048,
    # k and v 512 x 2048 (at TP 8: 512 rows of q, one replicated 128-row KV head each, o 2048 x 512), and so is
    # the input embedding (Qwen2MoeModel: use_attn_tp_group); the lm_head and experts stay split 8 ways.
    spec = kvbudget.load_model(QWEN)
    h200 = kvbudget.find_gpu("H200")
    tp = sglang.plan(spec, h200, S(tp=8))
    dpa = sglang.plan(spec, h200, S(tp=8, dp=8, enable_dp_attention=True, ep_size=8))
    attn_whole = (4096 + 512 + 512) * 2048 + 2048 * 4096
    attn_tp8 = (512 + 128 + 128) * 2048 + 2048 * 512
    embed = 151936 * 2048
    # shard bytes only: plain TP's weights also hold the allocator's segments (allocations.py; not modelled under
    # DP attention)
    assert dpa.weights_bytes - (tp.weights_bytes - tp.allocator_bytes) == 2 * (48 * (attn_whole - attn_tp8) + embed - embed // 8) == 2_104_819_712
    # cell: all 4 KV heads per rank (48 layers x K and V x 4 x 128 x 2 bytes) against one at TP 8
    assert (dpa.cell_bytes, tp.cell_bytes) == (48 * 2 * 4 * 128 * 2, 48 * 2 * 1 * 128 * 2) == (98_304, 24_576)
    assert (dpa.attn_tp, dpa.attn_dp) == (1, 8)
    # reserve on the H200 (143,771 MiB, chunk 8192, decode max_bs 512): 512 + 8192 x 1.5 + 8 / 8 x 1024 + 2 x 512
    # + 8 x 200 (prefill graphs) = 15,312 MiB, and DP attention adds 512 x 8 x 3 + 512 x 8 x 1.5 = 18,432
    assert (tp.reserved_mib, dpa.reserved_mib) == (15_312, 15_312 + 18_432)
    assert dpa.mem_fraction_static == round((143_771 - 33_744) / 143_771, 3) == 0.765
    assert dpa.max_total_num_tokens == dpa.rest_bytes // 98_304
    assert "chunked_prefill_size=1024," in dpa.log_lines[-1]  # 8192 / 8, after the reserve was sized
    # max_running_requests is each worker's share
    capped = sglang.plan(spec, h200, S(tp=8, dp=8, enable_dp_attention=True, max_running_requests=1024))
    assert capped.max_running_requests == 128


def test_dp_attention_deepseek_v3_mla() -> None:
    # DeepSeek-V3 FP8 (block 128, float32 scales), TP 8 DP-attention 8: q_b_proj (24576 x 1536), kv_b_proj
    # (32768 x 512) and o_proj (7168 x 16384) are whole instead of split 8 ways; the embedding (bf16) too.
    v3 = kvbudget.load_model(V3)
    h200 = kvbudget.find_gpu("H200")

    def fp8(rows: int, cols: int) -> int:
        return rows * cols + -(-rows // 128) * -(-cols // 128) * 4

    whole = fp8(24576, 1536) + fp8(32768, 512) + fp8(7168, 16384)
    split = fp8(3072, 1536) + fp8(4096, 512) + fp8(7168, 2048)
    embed = 129280 * 7168 * 2
    tp = sglang.plan(v3, h200, S(tp=8, ep_size=8))
    dpa = sglang.plan(v3, h200, S(tp=8, ep_size=8, dp=8, enable_dp_attention=True))
    assert dpa.weights_bytes - tp.weights_bytes == 61 * (whole - split) + embed - embed // 8 == 10_802_639_232
    # the MLA latent (512 + 64) is whole on every rank either way: 61 x 576 x 2 bytes per token
    assert dpa.cell_bytes == tp.cell_bytes == 61 * 576 * 2
    # reserve: 512 + 12,288 + 1,024 + 2 x 512 + 1,536 (MLA prefill graphs) = 16,384; + 18,432 with DP attention
    assert (tp.reserved_mib, dpa.reserved_mib) == (16_384, 34_816)
    assert dpa.max_total_num_tokens == dpa.rest_bytes // (61 * 576 * 2)
    assert dpa.max_total_num_tokens < tp.max_total_num_tokens


def test_command_reads_and_launch_writes_the_flags() -> None:
    s = parse_other_command(f"python -m sglang.launch_server --model-path {V3} --tp 8 --dp 8 --enable-dp-attention "
                            "--ep-size 8 --trust-remote-code")
    assert s.sglang is not None and (s.sglang.tp, s.sglang.dp, s.sglang.enable_dp_attention, s.sglang.ep_size) == (8, 8, True, 8)
    assert not any("ep-size" in w or "dp-attention" in w for w in s.warnings)
    for flag in ("--ep", "--expert-parallel-size"):
        cmd = parse_other_command(f"python -m sglang.launch_server --model-path {QWEN} --tp 4 {flag} 4")
        assert cmd.sglang is not None and cmd.sglang.ep_size == 4
    # 0.5.23's own spelling: --attn-dp-size N is --dp-size N --enable-dp-attention
    new = parse_other_command(f"python -m sglang.launch_server --model-path {QWEN} --tp 8 --attn-dp-size 4")
    assert new.sglang is not None and (new.sglang.dp, new.sglang.enable_dp_attention) == (4, True)
    with pytest.raises(InputError, match="does not combine"):
        parse_other_command(f"python -m sglang.launch_server --model-path {QWEN} --tp 8 --attn-dp-size 4 --dp-size 2")
    argv = sglang_argv(V3, s.sglang)
    assert " ".join(argv).endswith("--tp-size 8 --dp-size 8 --ep-size 8 --enable-dp-attention")
    assert "--enable-dp-attention" not in sglang_argv(V3, replace(s.sglang, enable_dp_attention=False))


def test_command_is_read_as_sglangs_own_parser_reads_it() -> None:
    """flags.json lists SGLang 0.5.23's option strings (server_args.py): each flag kvbudget reads is one of them (or
    a prefix argparse reads as one), a prefix of one flag reads as that flag, its values are passed over by count
    (--cuda-graph-bs-decode takes several), and a flag it does not know stops SGLang, so it is refused."""
    from kvbudget.engines.sglang.command import _SGLANG, _SGLANG_SWITCHES, _parser
    from kvbudget.engines.sglang.flags import window

    known = _parser(window(None)).flags
    assert len(known) > 500 and known["--mem-fraction-static"] == 1 and known["--trust-remote-code"] == 0
    for flag in [*_SGLANG, *_SGLANG_SWITCHES]:
        assert flag in known or sum(k.startswith(flag) for k in known) >= 1, flag
    cmd = parse_other_command(f"python -m sglang.launch_server --model-path {QWEN} --context-len 8192 "
                              "--cuda-graph-bs-decode 1 2 4 --mem-frac 0.7")
    assert cmd.sglang is not None and (cmd.sglang.context_length, cmd.sglang.mem_fraction_static) == (8192, 0.7)
    with pytest.raises(InputError, match=r"unrecognized arguments: --mem-fraction-statc` \(did you mean --mem-fraction-static\?\)"):
        parse_other_command(f"python -m sglang.launch_server --model-path {QWEN} --mem-fraction-statc 0.7")
    with pytest.raises(InputError, match="No such option: --max_batch_sze` \\(did you mean --max_batch_size\\?\\)"):
        parse_other_command(f"trtllm-serve {QWEN} --max_batch_sze 8")


def test_fit_options(capsys: pytest.CaptureFixture[str]) -> None:
    """fit --engine sglang --dp/--enable-dp-attention/--ep-size: one server of tp GPUs under DP attention, holding every
    worker's requests; --dp alone: replicas of tp GPUs each, one launch_server (one pod) starting them all."""
    args = ["fit", QWEN, "--gpu", "H200", "--engine", "sglang", "--context", "32768", "--batch", "64", "--json"]
    assert main([*args, "--tp", "8", "--dp", "8", "--enable-dp-attention", "--ep-size", "8"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["launch"]["command"].endswith("--tp-size 8 --dp-size 8 --ep-size 8 --context-length 32768 --enable-dp-attention")
    assert "replicas: 1\n" in doc["launch"]["kubernetes"] and "nvidia.com/gpu: 8}" in doc["launch"]["kubernetes"]
    p = sglang.plan(kvbudget.load_model(QWEN), kvbudget.find_gpu("H200"),
                    S(tp=8, dp=8, enable_dp_attention=True, ep_size=8, context_length=32768))
    assert doc["max_batch"] == 8 * min(p.max_total_num_tokens // 32768, p.max_running_requests)
    assert main([*args, "--tp", "2", "--dp", "4"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert "--tp-size 2 --dp-size 4" in rep["launch"]["command"] and "--enable-dp-attention" not in rep["launch"]["command"]
    assert "replicas: 1\n" in rep["launch"]["kubernetes"] and "nvidia.com/gpu: 8}" in rep["launch"]["kubernetes"]


def test_dp_attention_figures_say_per_rank_and_in_all(capsys: pytest.CaptureFixture[str]) -> None:
    """Under --enable-dp-attention the pool's tokens and its x figure are one DP rank's, the requests held the
    server's: the text said 'the pool holds 1 request' then 'held at once: 8', and the JSON's max_concurrency did not
    say whose it was."""
    words = ["explain", "--gpu", "H200", "--num-gpus", "8", "--", "python", "-m", "sglang.launch_server",
             "--model-path", V3, "--tp", "8", "--enable-dp-attention", "--dp", "8"]
    assert main(words) == 0
    out = capsys.readouterr().out
    p = sglang.plan(kvbudget.load_model(V3), kvbudget.find_gpu("H200"),
                    S(tp=8, dp=8, enable_dp_attention=True))
    one = min(p.max_total_num_tokens // p.context_len, p.max_running_requests)
    assert f"KV tokens per DP rank: {p.max_total_num_tokens:,}; each DP rank's pool holds {one} request" in out
    assert f"({8 * one} in all over 8 DP ranks)" in out
    assert f"held at once: {8 * one} in all ({one} per DP rank x 8 DP ranks)" in out
    assert f"fits in the 8 DP ranks' pools ({p.max_concurrency:.2f}x per DP rank)" in out
    assert "the pool holds" not in out
    assert main([*words[:5], "--json", *words[5:]]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["max_concurrency"] == round(p.max_concurrency, 4) and doc["max_batch"] == 8 * one
    assert doc["dp_attention"] == {"ranks": 8, "per_rank": ["kv_cache_tokens", "max_concurrency"],
                                   "kv_cache_tokens_in_all": 8 * p.max_total_num_tokens,
                                   "max_concurrency_in_all": round(8 * p.max_concurrency, 4)}
    assert doc["max_batch_per_dp_rank"] == one
    assert main(["explain", "--gpu", "H200", "--", "python", "-m", "sglang.launch_server", "--model-path", QWEN]) == 0
    plain = capsys.readouterr().out
    assert "the pool holds" in plain and "DP rank" not in plain  # one pool: said as before
