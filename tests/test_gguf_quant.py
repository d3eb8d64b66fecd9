"""GGUF file types as weight formats: the type llama-quantize gives each tensor, checked against
llama.cpp's own per-tensor snapshots, real load logs and hand computations."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kvbudget.cli import main
from kvbudget.model.gguf_quant import (
    GGML_TYPES,
    QTensor,
    QuantModel,
    choose_types,
    gguf_weights,
    parse_ftype,
    weight_format,
)
from kvbudget.model.resolve import load_model
from kvbudget.model.weights import parse_weight_format
from kvbudget.units import GiB, InputError, MiB

DATA = Path(__file__).parent / "data" / "gguf_quant"
LOGS = Path(__file__).parent / "data" / "llamacpp_logs"


def _mib(text: str, what: str) -> float:
    m = re.search(rf"{what}\s*=\s*([\d.]+) MiB", text)
    assert m, what
    return float(m.group(1))


# --- (a) real bits per weight: whole models against real llama.cpp logs --------------------------


def test_llama_3_1_8b_q4_k_m_by_hand_and_as_a_real_file_loads() -> None:
    w = gguf_weights(load_model("llama-3.1-8b"), "q4_k_m")
    # by hand: q4_K is 144 bytes per 256 weights, q6_K 210; norms are float32
    q4, q6 = 144 / 256, 210 / 256
    embd = 128256 * 4096 * q4  # token_embd stays q4_K (untied)
    base = (4096 * 4096 * 2 + 1024 * 4096) * q4 + 2 * 14336 * 4096 * q4 + 2 * 4096 * 4  # q, o, k, gate, up, 2 norms
    v, down = 1024 * 4096, 4096 * 14336
    # use_more_bits(i, 32): i < 4, i >= 28, or (i - 4) % 3 == 2 -> 16 layers with attn_v and ffn_down in q6_K
    more = [i for i in range(32) if i < 4 or i >= 28 or (i - 4) % 3 == 2]
    assert len(more) == 16
    layers = 16 * (base + (v + down) * q4) + 16 * (base + (v + down) * q6)
    output = 128256 * 4096 * q6 + 4096 * 4  # output.weight q6_K, output_norm
    assert w.head_bytes == embd == 295_501_824
    assert sum(w.layer_bytes) + w.tail_bytes == layers + output == 4_617_396_224
    assert [w.layer_bytes[i] > min(w.layer_bytes) for i in range(32)] == [i in more for i in range(32)]
    # the real load (Ollama's llama.cpp runner, Meta Llama 3.1 8B Instruct Q4_K_M): type counts, size, buffers
    log = (DATA / "ollama_llama3.1-8b-instruct_q4_k_m.log").read_text()
    assert w.type_counts()["q4_K"] == int(re.search(r"type q4_K:\s+(\d+)", log).group(1)) == 193  # type: ignore[union-attr]
    assert w.type_counts()["q6_K"] == int(re.search(r"type q6_K:\s+(\d+)", log).group(1)) == 33  # type: ignore[union-attr]
    assert f"{w.total / GiB:.2f} GiB ({w.total * 8 / w.elements:.2f} BPW)" in log  # "model size = 4.58 GiB (4.89 BPW)"
    assert round(w.head_bytes / MiB, 2) == _mib(log, "CPU model buffer size") == 281.81
    assert round((sum(w.layer_bytes) + w.tail_bytes) / MiB, 2) == _mib(log, "CUDA0 model buffer size") == 4403.49
    # the file on disk (4,920,734,016 bytes as published for this Q4_K_M) also holds the GGUF header and metadata:
    # 128,256 token strings, their types and 280,147 merges, about 7.5 MiB; the tensors are the rest
    assert 0 < 4_920_734_016 - w.total < 8 * MiB


@pytest.mark.parametrize(("log", "model", "ftype"), [
    (LOGS / "b5935_arm-rpc-2x-c8g_llama3.1-405b_q4_0.log", "llama-3.1-405b", "Q4_0"),
    (LOGS / "b4908_ggml-ci_m4-metal_pythia-1.4b_q4_0_init-format.log", str(DATA / "pythia-1.4b"), "Q4_0"),
    (LOGS / "ollama_2025-03_2gpu_r1-distill-qwen-32b_ctx2048.log", "qwen2.5-32b", "Q4_K_M"),  # R1-Distill-Qwen-32B
])
def test_file_size_and_type_counts_match_real_logs(log: Path, model: str, ftype: str) -> None:
    text = log.read_text()
    w = gguf_weights(load_model(model), ftype)
    size = re.search(r"(?:file|model) size\s*=\s*([\d.]+) (GiB|MiB) \(([\d.]+) BPW\)", text)
    assert size, log
    unit = GiB if size.group(2) == "GiB" else MiB
    assert (f"{w.total / unit:.2f}", f"{w.total * 8 / w.elements:.2f}") == (size.group(1), size.group(3))
    for ty, n in re.findall(r"type\s+(q\w+):\s+(\d+) tensors", text):
        assert w.type_counts()[ty] == int(n), ty
    assert "Q4_K - Medium" in text if ftype == "Q4_K_M" else f"file type   = {ftype}" in text


def test_pythia_q4_0_token_embedding_is_the_cpu_buffer() -> None:
    text = (LOGS / "b4908_ggml-ci_m4-metal_pythia-1.4b_q4_0_init-format.log").read_text()
    w = gguf_weights(load_model(str(DATA / "pythia-1.4b")), "Q4_0")
    assert w.head_bytes == 50304 * 2048 // 32 * 18
    assert round(w.head_bytes / MiB, 2) == _mib(text, "CPU_Mapped model buffer size") == 55.27


def test_pythia_q3_k_m_differs_from_a_2025_build_by_the_attn_qkv_rule_only() -> None:
    """Build 4801 gave a fused attn_qkv Q3_K_M's attn_output rule (q4_K); since attn_qkv counts as attn_v
    (category_is_attn_v), its first two get q5_K: 2 x 6144 x 2048 weights x 32/256 bytes more, 3.00 MiB."""
    text = (LOGS / "b4801_ggml-ci_m4-metal_pythia-1.4b_q3k.log").read_text()
    w = gguf_weights(load_model(str(DATA / "pythia-1.4b")), "Q3_K_M")
    then = w.total - 2 * 6144 * 2048 * (176 - 144) // 256
    assert f"{then / MiB:.2f} MiB" in text  # file size = 724.27 MiB
    assert w.type_counts()["q5_K"] == 3 and w.type_counts()["q4_K"] == 69  # the log: 1 and 71
    assert round(w.head_bytes / MiB, 2) == _mib(text, "CPU_Mapped model buffer size") == 42.22  # token_embd q3_K


# --- the per-tensor types against llama.cpp's own snapshots ---------------------------------------


def _sections(path: Path) -> dict[str, tuple[str, dict[str, str]]]:
    out: dict[str, tuple[str, dict[str, str]]] = {}
    listed: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            name, default = line[1:].split("] ")
            listed = {}
            out[name] = (default, listed)
        else:
            tensor, ty = line.rsplit(" ", 1)
            listed[tensor] = ty
    return out


@pytest.mark.parametrize("model", ["llama-3.1-70b", "deepseek-v3", "gpt-oss-120b", "gemma-3-4b", "qwen3-14b"])
def test_every_tensor_type_matches_llama_cpp_snapshot(model: str) -> None:
    """llama.cpp's tests/snapshots: the type of every quantized tensor for each file type. Tensors kvbudget names
    only by role (q_a, kv_a, ssm) are checked through the count of each type."""
    spec = load_model(model)
    sections = _sections(DATA / f"{model}.schema")
    assert len(sections) >= 4
    for ftype, (default, listed) in sections.items():
        w = gguf_weights(spec, ftype, imatrix=False)
        mine = {q.name: ty for q, ty in zip(w.tensors, w.types, strict=True) if not q.keep}
        wrong = {n: (mine[n], t) for n, t in listed.items() if n in mine and mine[n] != t}
        assert not wrong, (ftype, list(wrong.items())[:3])
        changed = [ty for q, ty in zip(w.tensors, w.types, strict=True) if not q.keep and ty != default]
        assert sorted(changed) == sorted(listed.values()), ftype


# --- (b) the rules on a hand-worked small model ----------------------------------------------------


def _small(n_layer: int = 8, ne0: int = 512, experts: int = 0, tied: bool = False) -> list[QTensor]:
    out = [QTensor("token_embd.weight", "token_embd", -1, ne0, 1000)]
    if not tied:
        out.append(QTensor("output.weight", "output", -1, ne0, 1000))
    for il in range(n_layer):
        p = f"blk.{il}."
        out += [QTensor(p + "attn_q.weight", "attn_q", il, ne0, ne0), QTensor(p + "attn_k.weight", "attn_k", il, ne0, 128),
                QTensor(p + "attn_v.weight", "attn_v", il, ne0, 128), QTensor(p + "attn_output.weight", "attn_output", il, ne0, ne0),
                QTensor(p + "ffn_down.weight", "ffn_down", il, 1024, ne0), QTensor(p + "ffn_up.weight", "ffn_up", il, ne0, 1024),
                QTensor(p + "attn_norm.weight", "other", il, ne0, 1, keep="f32")]
    return out


def _by_name(tensors: list[QTensor], types: tuple[str, ...], part: str) -> list[str]:
    return [ty for q, ty in zip(tensors, types, strict=True) if q.name.split(".")[-2] == part]


def test_q4_k_m_gives_attn_v_and_ffn_down_more_bits_in_the_use_more_bits_layers() -> None:
    t = _small()
    types = choose_types(t, "Q4_K_M", QuantModel("llama", n_layer=8, n_gqa=4, n_expert=0))
    # use_more_bits(i, 8): i < 1, i >= 7 or (i - 1) % 3 == 2 -> layers 0, 3, 6, 7
    expect = ["q6_K" if i in (0, 3, 6, 7) else "q4_K" for i in range(8)]
    assert _by_name(t, types, "attn_v") == expect and _by_name(t, types, "ffn_down") == expect
    assert set(_by_name(t, types, "attn_q") + _by_name(t, types, "ffn_up") + _by_name(t, types, "attn_output")) == {"q4_K"}
    assert _by_name(t, types, "output") == ["q6_K"] and _by_name(t, types, "token_embd") == ["q4_K"]
    assert set(_by_name(t, types, "attn_norm")) == {"f32"}


def test_other_file_types_rules() -> None:
    t, m = _small(), QuantModel("llama", n_layer=8, n_gqa=4, n_expert=0)
    s = choose_types(t, "Q4_K_S", m)  # attn_v of the first 4 and ffn_down of the first 8/8 = 1 layer: q5_K
    assert _by_name(t, s, "attn_v") == ["q5_K"] * 4 + ["q4_K"] * 4
    assert _by_name(t, s, "ffn_down") == ["q5_K"] + ["q4_K"] * 7
    q3 = choose_types(t, "Q3_K_M", m)  # attn_v: first two q5_K then q4_K; ffn_down q4_K; attn_output q4_K
    assert _by_name(t, q3, "attn_v") == ["q5_K"] * 2 + ["q4_K"] * 6
    assert set(_by_name(t, q3, "ffn_down")) == {"q4_K"} and set(_by_name(t, q3, "attn_output")) == {"q4_K"}
    q2 = choose_types(t, "Q2_K", m)  # n_gqa >= 4: attn_v q4_K; ffn_down and attn_output q3_K
    assert set(_by_name(t, q2, "attn_v")) == {"q4_K"} and set(_by_name(t, q2, "ffn_down")) == {"q3_K"}
    assert set(choose_types(t, "Q8_0", m)) == {"q8_0", "f32"}  # output stays q8_0: no rule raises q8_0
    assert _by_name(t, choose_types(t, "Q4_0", m), "output") == ["q6_K"]
    # 70B: attn_v that would be q4_K becomes q5_K; 8 experts (Mixtral): attn_v and attn_k q8_0
    big = choose_types(t, "Q4_K_M", QuantModel("llama", 8, 8, 0, is_70b=True))
    assert _by_name(t, big, "attn_v") == ["q6_K" if i in (0, 3, 6, 7) else "q5_K" for i in range(8)]
    moe = choose_types(t, "Q4_K_M", QuantModel("llama", 8, 4, 8))
    assert set(_by_name(t, moe, "attn_v") + _by_name(t, moe, "attn_k")) == {"q8_0"}
    assert set(_by_name(t, moe, "attn_output")) == {"q5_K"}


def test_rows_not_whole_blocks_fall_back_and_tied_embeddings_take_the_output_rule() -> None:
    m = QuantModel("llama", n_layer=8, n_gqa=4, n_expert=0)
    t = _small(ne0=96)  # 96 is not a multiple of 256: q4_K -> q5_0, q6_K -> q8_0; output -> q8_0
    types = choose_types(t, "Q4_K_M", m)
    assert _by_name(t, types, "attn_q") == ["q5_0"] * 8
    assert set(_by_name(t, types, "attn_v")) == {"q5_0", "q8_0"}
    assert _by_name(t, types, "output") == ["q8_0"]
    odd = choose_types([QTensor("blk.0.attn_q.weight", "attn_q", 0, 100, 10)], "Q4_K_M", m)
    assert odd == ("f16",)  # 100 is not a multiple of 32 either: F16
    tied = _small(tied=True)
    assert _by_name(tied, choose_types(tied, "Q4_K_M", m), "token_embd") == ["q6_K"]
    assert _by_name(tied, choose_types(tied, "IQ2_XXS", m, imatrix=True), "token_embd") == ["q5_K"]


def test_type_sizes_are_ggml_blocks() -> None:
    # ggml-common.h: q4_K = 2 fp16 + 12 scale bytes + 128 nibble bytes per 256; q6_K = 128 + 64 + 16 + 2
    assert (GGML_TYPES["q4_K"].size, GGML_TYPES["q6_K"].size, GGML_TYPES["q8_0"].size) == (144, 210, 34)
    assert (GGML_TYPES["iq4_xs"].size, GGML_TYPES["q2_K"].size, GGML_TYPES["q3_K"].size) == (136, 84, 110)
    assert GGML_TYPES["q4_K"].nbytes(4096, 4096) == 4096 * 16 * 144


# --- (c) the CLI -----------------------------------------------------------------------------------


def test_fit_llamacpp_q4_k_m_prints_the_real_buffers(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fit", "llama-3.1-8b", "--gpu", "RTX4090", "--engine", "llama.cpp", "--weights-dtype", "q4_k_m"]) == 0
    out = capsys.readouterr().out
    log = (DATA / "ollama_llama3.1-8b-instruct_q4_k_m.log").read_text()
    assert "weights GGUF Q4_K_M" in out
    assert f"CUDA0 model buffer size = {_mib(log, 'CUDA0 model buffer size'):8.2f} MiB" in out
    assert f"CPU_Mapped model buffer size = {_mib(log, 'CPU model buffer size'):8.2f} MiB" in out
    assert "type q4_K:  193 tensors" in out and "type q6_K:   33 tensors" in out
    assert "file type   = Q4_K - Medium" in out and "file size   = 4.58 GiB (4.89 BPW)" in out
    assert "llama-quantize Llama-3.1-8B-Instruct-BF16.gguf Llama-3.1-8B-Instruct-Q4_K_M.gguf Q4_K_M" in out
    # the weights on the GPU are the CUDA0 buffer: 4,617,396,224 bytes = 4.30 GiB
    assert re.search(r"weights on the GPU\s+4\.30 GiB", out)
    assert main(["fit", "llama-3.1-8b", "--gpu", "RTX4090", "--engine", "llama.cpp", "--weights-dtype", "q4_k_m", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["memory"]["weights_bytes"] == 4_617_396_224 and doc["memory"]["weights_cpu_bytes"] == 295_501_824
    assert doc["weights_format"] == "GGUF Q4_K_M"
    assert doc["launch"]["command"] == "llama-server -m Llama-3.1-8B-Instruct-Q4_K_M.gguf"
    assert "llama-quantize" in doc["launch"]["note"]


def test_q8_0_and_bf16_files(capsys: pytest.CaptureFixture[str]) -> None:
    # Q8_0: every matrix 34 bytes per 32 weights, output included; norms float32
    w = gguf_weights(load_model("llama-3.1-8b"), "Q8_0")
    matrices = 128256 * 4096 * 2 + 32 * (4096 * 4096 * 2 + 1024 * 4096 * 2 + 3 * 14336 * 4096)
    assert w.total == matrices // 32 * 34 + (65 * 4096) * 4
    bf16 = gguf_weights(load_model("llama-3.1-8b"), "bf16")
    assert bf16.total == matrices * 2 + 65 * 4096 * 4
    assert main(["fit", "llama-3.1-8b", "--gpu", "H100", "--engine", "llama.cpp", "--weights-dtype", "bf16"]) == 0
    assert "weights GGUF BF16" in capsys.readouterr().out


# --- (d) refusals -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("extra", "message"), [
    (["--engine", "llama.cpp", "--weights-dtype", "q4_k_x"], "unknown llama.cpp file type 'q4_k_x': use one of Q4_0"),
    (["--engine", "llama.cpp", "--weights-dtype", "awq"], "unknown llama.cpp file type 'awq'"),
    (["--weights-dtype", "q4_k_m"], "q4_k_m is a llama.cpp GGUF type: use --engine llama.cpp, or give the .gguf file"),
    (["--engine", "sglang", "--weights-dtype", "Q5_K_M"], "Q5_K_M is a llama.cpp GGUF type"),
    (["--engine", "trtllm", "--weights-dtype", "iq4_xs"], "iq4_xs is a llama.cpp GGUF type"),
    (["--engine", "transformers", "--weights-dtype", "q8_0"], "q8_0 is a llama.cpp GGUF type"),
    (["--engine", "textbook", "--weights-dtype", "q4_k_m"], "q4_k_m is a llama.cpp GGUF type"),
])
def test_refusals_are_one_line(extra: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fit", "llama-3.1-8b", "--gpu", "H100", *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_api_refusals() -> None:
    with pytest.raises(InputError, match=r"is a llama\.cpp GGUF type"):
        parse_weight_format("q4_k_m")
    with pytest.raises(InputError, match=r"plan it with --engine llama\.cpp"):
        weight_format("Q4_K_M").matrix_bytes(4096, 4096)
    assert parse_ftype("q4_k") == "Q4_K_M" and parse_ftype("iq4-xs") == "IQ4_XS"


def test_tied_output_is_a_second_copy_on_the_gpu_and_the_vision_tower_is_not_in_the_file(
        capsys: pytest.CaptureFixture[str]) -> None:
    """gemma-3-27b-it (tied embeddings, a vision tower) as a Q4_K_M GGUF on an L40S: the real llama.cpp b5452 log
    (tests/data/llamacpp_logs/b5452_l40s_gemma3-27b_np16_iswa.log) prints CUDA0 15773.70 MiB and CPU_Mapped
    1102.50 MiB. The CPU buffer is the Q6_K token embedding alone (the vision tower is the separate mmproj file);
    the GPU buffer holds the layers plus that embedding again, as the tied output layer."""
    log = (Path(__file__).parent / "data" / "llamacpp_logs" / "b5452_l40s_gemma3-27b_np16_iswa.log").read_text()
    assert main(["explain", "--gpu", "L40S", "--llamacpp-build", "5452", "--", "llama-server", "-m",
                 "gemma-3-27b-it-Q4_K_M.gguf", "-c", "49152", "--parallel", "16", "-fa"]) == 0
    out = capsys.readouterr().out
    for buffer in ("CUDA0 model buffer size", "CPU_Mapped model buffer size"):
        real = float(re.search(rf"{buffer} = +([\d.]+) MiB", log).group(1))  # type: ignore[union-attr]
        predicted = float(re.search(rf"{buffer} = +([\d.]+) MiB", out).group(1))  # type: ignore[union-attr]
        # within 0.3 MiB: the checkpoint's vocabulary rows beyond the config's 262,144 (a few KiB each)
        assert abs(predicted - real) < 0.3, (buffer, predicted, real)
