"""llama.cpp: GGUF headers read with the real `gguf` package's writer, KV caches to the byte,
commands and logs. Rules: llama.cpp's sources (github.com/ggml-org/llama.cpp), file and function in src/kvbudget/engines/llamacpp/."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFWriter

import kvbudget
from kvbudget.cli import main
from kvbudget.engines.llamacpp import LlamaCppSettings, plan, row_bytes
from kvbudget.engines.llamacpp.check import check_caches
from kvbudget.engines.llamacpp.command import parse_llamacpp_command
from kvbudget.engines.llamacpp.log import parse_llamacpp_log
from kvbudget.model.gguf_reader import GGUFError, read_gguf_header
from kvbudget.model.layers import FullAttention, SlidingWindow
from kvbudget.units import InputError, MiB

LLAMA8 = "meta-llama/Llama-3.1-8B-Instruct"


def _tiny_gguf(path: Path, arch: str = "llama", layers: int = 4, kv_heads: object = 2, window: int = 0,
               quant: bool = False, extra: dict[str, int] | None = None) -> Path:
    """A small but real GGUF file: llama.cpp's metadata keys and a tensor per weight."""
    w = GGUFWriter(str(path), arch)
    hidden, heads, ff, vocab = 64, 4, 128, 256
    w.add_block_count(layers)
    w.add_context_length(4096)
    w.add_embedding_length(hidden)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    if isinstance(kv_heads, list):
        w.add_head_count_kv(kv_heads)  # type: ignore[arg-type]
    else:
        w.add_head_count_kv(int(kv_heads))  # type: ignore[call-overload]
    w.add_key_length(16)
    w.add_value_length(16)
    if window:
        w.add_sliding_window(window)
    for key, value in (extra or {}).items():
        w.add_uint32(f"{arch}.{key}", value)
    w.add_token_list([f"t{i}" for i in range(vocab)])
    rng = np.random.default_rng(0)
    w.add_tensor("token_embd.weight", rng.standard_normal((vocab, hidden)).astype(np.float16))
    for il in range(layers):
        for name, shape in (("attn_q", (hidden, hidden)), ("attn_k", (32, hidden)), ("attn_v", (32, hidden)),
                            ("attn_output", (hidden, hidden)), ("ffn_up", (ff, hidden)), ("ffn_down", (hidden, ff))):
            data = rng.standard_normal(shape).astype(np.float32 if not quant else np.float16)
            if quant and name == "ffn_up":
                # a Q8_0 tensor: 34 bytes per 32 values, as raw bytes
                raw = np.zeros((ff, hidden // 32 * 34), dtype=np.uint8)
                w.add_tensor(f"blk.{il}.{name}.weight", raw, raw_dtype=GGMLQuantizationType.Q8_0)
            else:
                w.add_tensor(f"blk.{il}.{name}.weight", data)
        w.add_tensor(f"blk.{il}.attn_norm.weight", np.ones(hidden, dtype=np.float32))
    w.add_tensor("output_norm.weight", np.ones(hidden, dtype=np.float32))
    w.add_tensor("output.weight", rng.standard_normal((vocab, hidden)).astype(np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_gguf_header_is_read_without_the_tensors(tmp_path: Path) -> None:
    path = _tiny_gguf(tmp_path / "m.gguf", quant=True)
    h = read_gguf_header(str(path))
    assert h.metadata["general.architecture"] == "llama" and h.metadata["llama.block_count"] == 4
    assert h.metadata["tokenizer.ggml.tokens"] == [f"t{i}" for i in range(256)]
    assert h.header_bytes < os.path.getsize(path)
    by_name = {t.name: t for t in h.tensors}
    assert by_name["blk.0.attn_q.weight"].nbytes == 64 * 64 * 2  # f16
    assert by_name["blk.0.attn_norm.weight"].nbytes == 64 * 4  # f32
    assert by_name["blk.0.ffn_up.weight"].nbytes == 128 * (64 // 32) * 34  # q8_0: 34 bytes per 32 values
    assert by_name["token_embd.weight"].shape == (64, 256)  # ne0 first, as ggml writes it


def test_gguf_spec_and_exact_weights(tmp_path: Path) -> None:
    spec = kvbudget.load_model(str(_tiny_gguf(tmp_path / "m.gguf", quant=True)))
    assert spec.model_type == "gguf:llama" and spec.num_layers == 4
    assert {(layer.num_kv_heads, layer.head_dim) for layer in spec.layers} == {(2, 16)}  # type: ignore[union-attr]
    h = read_gguf_header(str(tmp_path / "m.gguf"))
    assert sum(spec.weight_format.tensor_bytes(t) for t in spec.inventory.tensors()) == sum(t.nbytes for t in h.tensors)  # type: ignore[union-attr]
    assert spec.params == sum(int(np.prod(t.shape)) for t in h.tensors)


def test_gguf_per_layer_kv_heads_and_sliding_window(tmp_path: Path) -> None:
    # head_count_kv as an array (LFM2, Granite-hybrid style): every layer's own KV width; 0 = no KV
    spec = kvbudget.load_model(str(_tiny_gguf(tmp_path / "a.gguf", kv_heads=[2, 1, 2, 1])))
    assert [layer.num_kv_heads for layer in spec.layers] == [2, 1, 2, 1]  # type: ignore[union-attr]
    # gemma2 with a window: llama.cpp's pattern of period 2, even layers slide
    g = kvbudget.load_model(str(_tiny_gguf(tmp_path / "g.gguf", arch="gemma2", window=32)))
    assert [type(x) for x in g.layers] == [SlidingWindow, FullAttention, SlidingWindow, FullAttention]


def test_layers_that_reuse_kv_and_nextn_layers(tmp_path: Path) -> None:
    # Gemma 3n / Gemma 4: the last shared_kv_layers layers read earlier layers' KV and hold none
    # (llama.cpp n_layer_kv_from_start = n_layer - shared_kv_layers)
    g = kvbudget.load_model(str(_tiny_gguf(tmp_path / "g3n.gguf", arch="gemma3n", layers=10,
                                            extra={"attention.shared_kv_layers": 4})))
    assert g.layer_of == (0, 1, 2, 3, 4, 5)
    p = plan(g, None, LlamaCppSettings(n_ctx=1024, n_parallel=1))
    assert p.k_bytes + p.swa_k_bytes == 6 * 1024 * 32 * 2  # 6 layers x 1024 cells x (2 heads x 16) x f16
    # a nextn (MTP) block counts in llama (its cache loops over every block) but not in qwen3next
    plain = kvbudget.load_model(str(_tiny_gguf(tmp_path / "n.gguf", layers=4, extra={"nextn_predict_layers": 1})))
    assert len(plain.layers) == 4
    q = kvbudget.load_model(str(_tiny_gguf(tmp_path / "q.gguf", arch="qwen3next", layers=4,
                                            extra={"nextn_predict_layers": 1})))
    assert q.layer_of == (0, 1, 2)


def test_truncated_and_hostile_gguf(tmp_path: Path) -> None:
    path = _tiny_gguf(tmp_path / "m.gguf")
    data = path.read_bytes()
    (tmp_path / "cut.gguf").write_bytes(data[:200])
    with pytest.raises(GGUFError, match="truncated or damaged GGUF: 31 tensors and 10 keys cannot fit in a 200-byte file"):
        read_gguf_header(str(tmp_path / "cut.gguf"))
    (tmp_path / "not.gguf").write_bytes(b"PK\x03\x04" + data[4:64])
    with pytest.raises(GGUFError, match="not a GGUF file"):
        read_gguf_header(str(tmp_path / "not.gguf"))
    hostile = b"GGUF" + (3).to_bytes(4, "little") + (1 << 40).to_bytes(8, "little") + (1).to_bytes(8, "little")
    (tmp_path / "big.gguf").write_bytes(hostile)
    with pytest.raises(GGUFError, match="1,099,511,627,776 tensors and 1 keys cannot fit in a 24-byte file"):
        read_gguf_header(str(tmp_path / "big.gguf"))
    long_key = b"GGUF" + (3).to_bytes(4, "little") + (0).to_bytes(8, "little") + (1).to_bytes(8, "little") + (1 << 40).to_bytes(8, "little") + bytes(32)
    (tmp_path / "key.gguf").write_bytes(long_key)
    with pytest.raises(GGUFError, match="truncated or damaged GGUF: a key of 1,099,511,627,776 bytes"):
        read_gguf_header(str(tmp_path / "key.gguf"))


def test_worked_example_llama31_8b() -> None:
    # worked by hand from src/llama-kv-cache.cpp: Llama-3.1-8B, -c 32768 -np 1: K = 32 x 1024 x 2 x 32768 = 2048 MiB, V the same;
    # with -ctk q8_0 -ctv q8_0 a 1024-wide row is 1088 bytes, so K = V = 1088 MiB.
    spec = kvbudget.load_model(LLAMA8)
    p = plan(spec, kvbudget.find_gpu("H100"), LlamaCppSettings(n_ctx=32768, n_parallel=1))
    assert (p.k_bytes, p.v_bytes) == (2048 * MiB, 2048 * MiB)
    assert "llama_kv_cache: size = 4096.00 MiB ( 32768 cells,  32 layers,  1/1 seqs), K (f16): 2048.00 MiB, V (f16): 2048.00 MiB" in p.log_lines
    q = plan(spec, kvbudget.find_gpu("H100"), LlamaCppSettings(n_ctx=32768, n_parallel=1, type_k="q8_0", type_v="q8_0"))
    assert q.k_bytes == q.v_bytes == 1088 * MiB and row_bytes("q8_0", 1024) == 1088


def test_context_padding_streams_and_slots() -> None:
    spec = kvbudget.load_model(LLAMA8)
    # n_ctx padded up to a multiple of 256 (llama-context.cpp)
    assert plan(spec, None, LlamaCppSettings(n_ctx=1000, n_parallel=1)).n_ctx == 1024
    # -np 4 without --kv-unified: 4 streams of pad256(n_ctx / 4)
    p = plan(spec, None, LlamaCppSettings(n_ctx=10000, n_parallel=4, kv_unified=False))
    assert (p.n_stream, p.n_ctx_seq, p.n_ctx) == (4, 2560, 10240)
    # llama-server's default: 4 unified slots sharing n_ctx cells
    u = plan(spec, None, LlamaCppSettings(n_ctx=32768))
    assert (u.n_seq_max, u.unified, u.n_stream, u.cells) == (4, True, 1, 32768)
    # the output buffer holds one row of logits per sequence: 4 x 128256 floats
    assert u.output_bytes == 4 * 128256 * 4


def test_sliding_window_cache_size() -> None:
    # gemma-3-27b: 52 SWA layers with n_swa 1024, 10 full; SWA cells = pad256(min(n_ctx_seq, 1024 + n_ubatch))
    spec = kvbudget.load_model("google/gemma-3-27b-it")
    p = plan(spec, None, LlamaCppSettings(n_ctx=32768, n_parallel=1))
    assert (p.swa_cells, p.swa_layers, p.kv_layers) == (1536, 52, 10)
    assert p.swa_k_bytes == 52 * 1536 * 16 * 128 * 2
    # --swa-full: the SWA cache is still a separate cache, but as large as the other (llama-kv-cache-iswa.cpp)
    full = plan(spec, None, LlamaCppSettings(n_ctx=32768, n_parallel=1, swa_full=True))
    assert (full.swa_cells, full.swa_layers, full.kv_layers) == (32768, 52, 10)
    # b5429 (#13194) to b5553: min(n_ctx, pad(n_swa x n_seq_max + n_batch)), pad 32 without flash attention
    mid = plan(spec, None, LlamaCppSettings(n_ctx=32768, n_parallel=4, kv_unified=True, flash_attn="off", build=5500))
    assert mid.swa_cells == 4 * 1024 + 2048
    # before b5429 there was no sliding-window cache: every layer held n_ctx cells
    old = plan(spec, None, LlamaCppSettings(n_ctx=32768, n_parallel=1, build=5000))
    assert (old.swa_cells, old.k_bytes + old.swa_k_bytes) == (32768, 62 * 32768 * 16 * 128 * 2)


def test_mla_is_k_only_and_recurrent_state() -> None:
    v2 = plan(kvbudget.load_model("deepseek-ai/DeepSeek-V2-Lite-Chat"), None, LlamaCppSettings(n_ctx=4096, n_parallel=1))
    assert v2.v_bytes == 0 and v2.k_bytes == 27 * 4096 * 576 * 2  # 576-wide K, "V (f16): 0.00 MiB"
    jamba = plan(kvbudget.load_model("ai21labs/Jamba-v0.1"), None, LlamaCppSettings(n_ctx=4096, n_parallel=2, kv_unified=True))
    # f32 states, one per sequence: (d_conv - 1) x d_inner + d_inner x d_state per Mamba layer
    assert jamba.recurrent_bytes == 28 * 2 * 4 * (3 * 8192 + 8192 * 16)


def test_partial_offload_places_layers() -> None:
    spec = kvbudget.load_model(LLAMA8)
    all_gpu = plan(spec, kvbudget.find_gpu("RTX 4090"), LlamaCppSettings(n_ctx=8192, n_parallel=1))
    half = plan(spec, kvbudget.find_gpu("RTX 4090"), LlamaCppSettings(n_ctx=8192, n_parallel=1, n_gpu_layers=16))
    # -ngl 16 of 33 (the output layer counts): layers 17..31 and the output go to the GPU
    # (llama-model.cpp: i_gpu_start = n_layer + 1 - n_gpu_layers)
    assert half.offloaded == 16 and half.kv_gpu_bytes == all_gpu.kv_gpu_bytes * 15 // 32
    assert half.weights_gpu_bytes < all_gpu.weights_gpu_bytes


def test_quantized_v_needs_flash_attention() -> None:
    with pytest.raises(InputError, match="needs flash attention"):
        plan(kvbudget.load_model(LLAMA8), None, LlamaCppSettings(type_v="q4_0", flash_attn="off"))
    with pytest.raises(InputError, match=r"not one llama.cpp allows"):
        plan(kvbudget.load_model(LLAMA8), None, LlamaCppSettings(type_k="q3_k"))


def test_commands() -> None:
    cmd = parse_llamacpp_command("llama-server -m /models/x.gguf -c 32768 -np 4 -ctk q8_0 -ctv q8_0 -fa on -ngl 99 --port 8080")
    s = cmd.settings
    assert (cmd.model, s.n_ctx, s.n_parallel, s.type_k, s.flash_attn, s.n_gpu_layers) == ("/models/x.gguf", 32768, 4, "q8_0", "on", 99)
    assert cmd.warnings == ()
    old = parse_llamacpp_command("./llama-cli -m x.gguf -c 4096 -fa --temp 0.7", 6324)  # -fa a switch before b6325
    assert old.settings.program == "cli" and old.settings.flash_attn == "on"
    with pytest.raises(InputError, match=r"not a llama.cpp command"):
        parse_llamacpp_command("python serve.py")


def test_log_formats_are_recomputed_exactly() -> None:
    current = parse_llamacpp_log(
        "print_info: n_embd_k_gqa     = 1024\nprint_info: n_embd_v_gqa     = 1024\n"
        "llama_kv_cache:      CUDA0 KV buffer size =  4096.00 MiB\n"
        "llama_kv_cache: size = 4096.00 MiB ( 32768 cells,  32 layers,  1/1 seqs), K (f16): 2048.00 MiB, V (f16): 2048.00 MiB\n")
    assert all(c.exact for c in check_caches(current)) and current.buffers_mib == (("CUDA0", 4096.0),)
    old = parse_llamacpp_log(
        "llm_load_print_meta: n_embd_k_gqa     = 1024\nllm_load_print_meta: n_embd_v_gqa     = 1024\n"
        "llama_kv_cache_init: kv_size = 8192, offload = 1, type_k = 'q8_0', type_v = 'q8_0', n_layer = 32, can_shift = 1\n"
        "llama_new_context_with_model: KV self size  =  544.00 MiB, K (q8_0):  272.00 MiB, V (q8_0):  272.00 MiB\n")
    (c,) = check_caches(old)
    assert c.exact and c.cache.cells == 8192 and c.predicted_k_mib == 272.0
    with pytest.raises(InputError, match=r"no llama.cpp KV-cache figures"):
        parse_llamacpp_log("nothing here\n")


def test_cli_explain_and_fit(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "--gpu", "RTX 4090", "--", "llama-server", "-m", LLAMA8, "-c", "32768", "-np", "1"]) == 0
    assert "K (f16): 2048.00 MiB" in capsys.readouterr().out
    assert main(["fit", LLAMA8, "--gpu", "L4", "--engine", "llama.cpp", "--context", "8192", "--np", "1", "--json"]) == 0
    assert '"kv_cache_tokens": 8192' in capsys.readouterr().out


def test_command_values_in_llamacpps_own_ranges() -> None:
    """common/arg.cpp: -c/-b/-ub 0 mean the default, llama-server's -np -1 is auto and 0 an error."""
    from kvbudget.engines.llamacpp.command import parse_llamacpp_command
    from kvbudget.units import InputError

    s = parse_llamacpp_command("llama-server -m x.gguf -c 0 -b 0 -ub 0 -np -1").settings
    assert (s.n_ctx, s.n_batch, s.n_ubatch, s.n_parallel) == (0, 2048, 2048, None)
    for flags, message in [("-np 0", "at least 1 slot"), ("-c -5", "at least 0"), ("-ub -1", "at least 0"),
                           ("-ts nan", "finite"), ("-ts -1,2", "at least 0"), ("-ts 0,0", "add up to 0"),
                           ("-c 1e30", "not a whole number")]:
        with pytest.raises(InputError, match=message):
            parse_llamacpp_command("llama-server -m x.gguf " + flags)


def test_fit_longest_context_keeps_the_commands_own_settings(capsys: pytest.CaptureFixture[str]) -> None:
    """llama.cpp's longest context for its slots is searched with the command's own -ngl and cache types: at the
    answer the command still fits, one token more per slot it does not."""
    import json

    from kvbudget.cli import main
    from kvbudget.engines.llamacpp import LlamaCppSettings, plan

    argv = ["fit", "llama-3.1-8b", "--gpu", "L4", "--engine", "llama.cpp", "--weights-dtype", "Q4_K_M", "--ngl", "40",
            "--context", "16384", "--json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    longest, slots = doc["max_context"], doc["n_seq_max"]
    assert doc["fits"] and longest > 0 and "levers" not in doc  # no pool to move: no levers in fit
    spec = kvbudget.fit("llama-3.1-8b", gpu="L4", engine="llama.cpp", weights_dtype="Q4_K_M", context=16384,
                        options={"ngl": 40}).settings
    from kvbudget._record import replace
    from kvbudget.engines.llamacpp.engine import _quantized

    model = _quantized(kvbudget.load_model("llama-3.1-8b"), spec)
    l4 = kvbudget.find_gpu("L4")
    assert plan(model, l4, replace(spec, n_ctx=longest * slots, fit=False)).fits
    assert not plan(model, l4, replace(spec, n_ctx=(longest + 1) * slots, fit=False)).fits
    assert isinstance(spec, LlamaCppSettings) and spec.n_gpu_layers == 40


def test_cache_types_are_matched_as_written() -> None:
    """common/arg.cpp kv_cache_type_from_str compares -ctk / -ctv with ggml_type_name(type) ('q8_0') as written:
    '-ctk Q8_0' stops llama-server ("Unsupported cache type: Q8_0"). It was lowered and planned (exit 0)."""
    cmd = "llama-server -m Llama-3.1-8B-Instruct-Q4_K_M.gguf -c 8192 -ctk Q8_0"
    with pytest.raises(InputError, match=r"names are matched as written: q8_0"):
        kvbudget.explain(cmd, gpu="RTX4090")
    with pytest.raises(InputError, match=r"names are matched as written: q4_0"):
        plan(kvbudget.load_model("llama-3.1-8b"), kvbudget.find_gpu("RTX4090"), LlamaCppSettings(type_v="Q4_0"))
    assert kvbudget.explain(cmd.replace("Q8_0", "q8_0"), gpu="RTX4090") is not None


@pytest.mark.parametrize(("command", "build", "said"), [
    # from b6325 -fa takes a value, matched as written by common/arg.cpp (is_truthy / is_falsey / is_autoy)
    ("-fa ON", None, "-fa 'ON' is not a value llama.cpp takes (values are matched as written: on)"),
    ("--flash-attn On", None, "--flash-attn 'On' is not a value llama.cpp takes"),
    ("-fa yes", None, "-fa 'yes' is not a value llama.cpp takes: write -fa on, off or auto"),
    ("-fa -c 4096", None, "-fa is followed by -c: from b6325 llama.cpp's -fa takes a value"),
    ("-c 4096 -fa", None, "-fa needs a value from b6325"),
    # before b6325 -fa was a bare switch: a value after it is a stray word llama.cpp refuses
    ("-fa on -c 4096", 5452, "llama.cpp build 5452 takes -fa as a bare switch"),
    ("--flash-attn auto", 6324, "build 6324 takes --flash-attn as a bare switch"),
    ("--fit ON", None, "--fit 'ON' is not a value llama.cpp takes (values are matched as written: on): write --fit on or off"),
    ("--fit yes", None, "--fit 'yes' is not a value llama.cpp takes"),
])
def test_flash_attention_values_as_the_build_parses_them(command: str, build: int | None, said: str) -> None:
    """-fa ON (or On, yes) was lowered and planned as on (exit 0), a bare -fa planned as on under today's rules and
    -fa on under a b5452 plan: llama-server stops on each ('unknown value for --flash-attn', 'invalid argument')."""
    with pytest.raises(InputError, match=re.escape(said)):
        parse_llamacpp_command(f"llama-server -m x.gguf {command}", build)


@pytest.mark.parametrize(("value", "flash"), [("on", "on"), ("enabled", "on"), ("true", "on"), ("1", "on"),
                                              ("off", "off"), ("disabled", "off"), ("false", "off"), ("0", "off"),
                                              ("auto", "auto"), ("-1", "auto")])
def test_flash_attention_values_llama_cpp_takes(value: str, flash: str) -> None:
    assert parse_llamacpp_command(f"llama-server -m x.gguf -fa {value} -c 4096").settings.flash_attn == flash
    old = parse_llamacpp_command("llama-server -m x.gguf --flash-attn -c 4096", 6324).settings
    assert (old.flash_attn, old.n_ctx, old.build) == ("on", 4096, 6324)


def test_flags_as_llama_cpp_looks_them_up() -> None:
    """common/arg.cpp turns '_' into '-' in a '--' flag (--ctx_size 32768 was ignored and the model's whole 131,072
    context planned, exit 0) and looks each word up whole (--ctx-size=32768 stops llama-server: 'invalid argument';
    it was read as -c 32768)."""
    s = parse_llamacpp_command("llama-server -m x.gguf --ctx_size 32768 --cache_type_k q8_0 --n_gpu_layers 20").settings
    assert (s.n_ctx, s.type_k, s.n_gpu_layers) == (32768, "q8_0", 20)
    with pytest.raises(InputError, match=r"--ctx-size=32768: llama.cpp takes no FLAG=VALUE word .*write --ctx-size 32768"):
        parse_llamacpp_command("llama-server -m x.gguf --ctx-size=32768")
    with pytest.raises(InputError, match=r"-fa=on: llama.cpp takes no FLAG=VALUE word"):
        parse_llamacpp_command("llama-server -m x.gguf -fa=on")


def test_llama_arg_environment_variables_set_their_flags() -> None:
    """LLAMA_ARG_CTX_SIZE=32768 llama-server ... (common/arg.cpp set_env) was dropped with every assignment before the
    program: the model's whole context planned (exit 0). The command line's own flag wins over the variable."""
    env = "LLAMA_ARG_CTX_SIZE=32768 LLAMA_ARG_N_PARALLEL=2 LLAMA_ARG_CACHE_TYPE_K=q8_0 LLAMA_ARG_FLASH_ATTN=on"
    s = parse_llamacpp_command(f"{env} CUDA_VISIBLE_DEVICES=0 llama-server -m x.gguf -np 3").settings
    assert (s.n_ctx, s.n_parallel, s.type_k, s.flash_attn) == (32768, 3, "q8_0", "on")
    s = parse_llamacpp_command("LLAMA_ARG_NO_KV_UNIFIED=1 LLAMA_ARG_SWA_FULL=true llama-server -m x.gguf").settings
    assert (s.kv_unified, s.swa_full) == (False, True)
    assert parse_llamacpp_command("LLAMA_ARG_MODEL=/m/y.gguf llama-server -c 4096").model == "/m/y.gguf"
    with pytest.raises(InputError, match=r"LLAMA_ARG_CTX_SIZE=abc \(llama.cpp reads it as -c\): -c 'abc' is not a whole"):
        parse_llamacpp_command("LLAMA_ARG_CTX_SIZE=abc llama-server -m x.gguf")
    with pytest.raises(InputError, match=r"LLAMA_ARG_FLASH_ATTN=ON .*values are matched as written"):
        parse_llamacpp_command("LLAMA_ARG_FLASH_ATTN=ON llama-server -m x.gguf")


@pytest.mark.parametrize("build", [5452, 6324, 6325, None])
def test_the_launch_command_writes_flash_attention_as_the_build_reads_it(build: int | None) -> None:
    """A plan of a build before b6325 wrote '-fa on', which that build stops on ('invalid argument: on')."""
    from kvbudget._record import replace
    from kvbudget.engines.llamacpp.launch import llamacpp_argv

    s = parse_llamacpp_command("llama-server -m x.gguf -c 4096", build).settings
    argv = llamacpp_argv("x.gguf", replace(s, flash_attn="on"))
    assert ("-fa" in argv and "on" not in argv) if build and build < 6325 else argv[argv.index("-fa") + 1] == "on"
    assert parse_llamacpp_command(argv, build).settings.flash_attn == "on"


def test_llama_server_flags_as_its_build_parses_them() -> None:
    """llama-server stops on a word its parser (common/arg.cpp common_params_parse_ex) does not list: 'error: invalid
    argument: X'. kvbudget warned and planned the command (exit 0). With the build given, a flag neither of
    kvbudget's lists has (b11312, and a build of 2025-08 before b6325) is refused from b6325 to b11312; from b11312 on
    so are a flag b11312 dropped (--no-mmap: --load-mode took its place) and one it keeps only to refuse (--draft).
    Without a build (today's) or past the list, these stay warnings: the flag may be newer than kvbudget's list."""
    base = "llama-server -m x.gguf -c 4096 "
    with pytest.raises(InputError, match=r"--ctx-sise is not a flag of llama-server b7000 .*did you mean --ctx-size\?"):
        parse_llamacpp_command(base + "--ctx-sise 8192", 7000)
    with pytest.raises(InputError, match=r"-p is not a flag of llama-server b11312 .*'error: invalid argument: -p'"):
        parse_llamacpp_command(base + "-p hello", 11312)  # a llama-cli flag
    with pytest.raises(InputError, match=r"x\.gguf: llama-server b8000 takes no bare word"):
        parse_llamacpp_command("llama-server -c 4096 x.gguf", 8000)
    with pytest.raises(InputError, match=r"--no-mmap is a flag of llama.cpp builds of 2025-08 that b11312 no longer has"):
        parse_llamacpp_command(base + "--no-mmap", 11312)
    with pytest.raises(InputError, match=r"--draft: llama-server b11312 stops on it .*use --spec-draft-n-max"):
        parse_llamacpp_command(base + "--draft 16", 11400)
    # accepted where the build may have them: --no-mmap before b11312, every flag before b6325 and past the list
    assert parse_llamacpp_command(base + "--no-mmap", 8000).warnings == ()
    assert parse_llamacpp_command(base + "--ctx-sise 8192", 6000).settings.n_ctx == 4096
    unknown = parse_llamacpp_command(base + "--ctx-sise 8192", 20000).warnings
    assert unknown == ("flag --ctx-sise is not one kvbudget knows: ignored", "ignored extra word '8192'")
    assert parse_llamacpp_command(base + "--ctx-sise 8192").settings.n_ctx == 4096
    assert any("'the argument has been removed'" in w for w in parse_llamacpp_command(base + "--draft 16").warnings)


def test_llama_server_flag_values_are_skipped_with_their_flag() -> None:
    """A llama-server flag kvbudget does not model takes its value(s) with it (arg.cpp: --cache-ram N, and before
    b11312 --lora-scaled FNAME SCALE; at b11312 one word FNAME:SCALE): the value was read as an extra word."""
    warned = parse_llamacpp_command("llama-server -m x.gguf --cache-ram 8192 -c 4096", 8000).warnings
    assert warned == ("flag --cache-ram is not one kvbudget knows: ignored",)
    old = parse_llamacpp_command("llama-server -m x.gguf --lora-scaled a.gguf 0.5 -c 4096", 5000)
    assert (old.settings.n_ctx, old.warnings) == (4096, ("flag --lora-scaled is not one kvbudget knows: ignored",))
    new = parse_llamacpp_command("llama-server -m x.gguf --lora-scaled a.gguf:0.5 -c 4096", 11312)
    assert (new.settings.n_ctx, new.warnings) == (4096, ("flag --lora-scaled is not one kvbudget knows: ignored",))


@pytest.mark.parametrize("batch", ["1", "4"])
def test_batch_is_refused_under_llamacpp_even_at_its_default(batch: str, capsys: pytest.CaptureFixture[str]) -> None:
    # --batch 1 was indistinguishable from no --batch (argparse default 1) and passed silently; llama.cpp's slots
    # are --np, so any --batch is a setting it does not read
    assert main(["fit", LLAMA8, "--gpu", "L4", "--engine", "llama.cpp", "--batch", batch]) == 2
    assert "--batch is not read under --engine llama.cpp: use --np" in capsys.readouterr().err


@pytest.mark.parametrize(("log", "argv"), [
    ("b5452_l40s_gemma3-27b_np16_iswa", ["--gpu", "L40S", "--llamacpp-build", "5452", "--", "llama-server", "-m",
                                         "gemma-3-27b-it-Q4_K_M.gguf", "-c", "49152", "--parallel", "16", "-fa"]),
    ("b4905_cpu-amx_deepseek-r1-q8_0_pre-mla_perplexity-np4", ["--gpu", "H100", "--llamacpp-build", "4905", "--",
                                                               "llama-server", "-m", "Llama-3.1-8B-Instruct-Q4_K_M.gguf",
                                                               "-c", "2048", "-np", "4"]),
])
def test_an_older_build_prints_its_own_context_per_sequence(log: str, argv: list[str],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    # Before b5913 the one shared cache gave each sequence n_ctx / n_seq_max, printed as n_ctx_per_seq, and no
    # kv_unified line: the b5452 log says 3072 of -c 49152 -np 16, the b4905 log 512 of -c 2048 -np 4. kvbudget's
    # "llama.cpp will log" printed today's 'n_ctx_seq = 49152' and 'kv_unified = true' for those builds.
    path = Path(__file__).parent / "data" / "llamacpp_logs" / f"{log}.log"
    logged = next(line for line in path.read_text().splitlines() if line.startswith("llama_context: n_ctx_per_seq ="))
    assert main(["explain", *argv]) == 0
    out = capsys.readouterr().out
    printed = [line.strip() for line in out.splitlines() if line.strip().startswith("llama_context: n_ctx")]
    assert printed[-1] == logged, printed
    assert "kv_unified" not in out
    per_seq = int(logged.split("=")[1])
    assert f"Requests of {per_seq:,} tokens held at once" in out and f"n_ctx_seq {per_seq:,}," in out
