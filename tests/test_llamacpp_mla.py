"""llama.cpp's MLA cache by build (``calibration.mla_latent``): every head's decompressed K and V before b5137, the
latent from it (ggml-org/llama.cpp PR #12801, commit daa42288, 2025-04-15; b5137 is that commit's
``git rev-list --count``, as b5120 = e8a62631 and b5140 = 54a72720 of the release tags). A config.json model has no
GGUF: the build alone decides. The real logs: tests/data/llamacpp_logs/b4905_* and b4963_* (DeepSeek-R1, per head),
b5331_* (DeepSeek-V3-0324, latent + its V)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import kvbudget
from kvbudget.engines.llamacpp import LlamaCppSettings, plan
from kvbudget.engines.llamacpp.kv_layout import cache_layer
from kvbudget.model.layers import MLA
from kvbudget.units import InputError, MiB

LOGS = Path(__file__).parent / "data" / "llamacpp_logs"


@pytest.mark.parametrize(("build", "per_token"), [
    (5136, 27 * 16 * (192 + 128) * 2),  # every head's K (qk_nope 128 + rope 64) and V (128): 276,480 B
    (5137, 27 * (576 + 512) * 2),  # the latent (512 + rope 64) and, until b7832, a V row of the 512-wide latent
    (7832, 27 * 576 * 2),  # the latent alone (PR #19067)
])
def test_the_build_decides_what_a_config_json_model_caches(build: int, per_token: int) -> None:
    spec = kvbudget.load_model("deepseek-ai/DeepSeek-V2-Lite")
    p = plan(spec, None, LlamaCppSettings(build=build, n_ctx=4096, n_parallel=1))
    assert (p.k_bytes + p.v_bytes) == per_token * 4096
    said = any("predates llama.cpp's MLA cache" in note and "16 x 192 and 16 x 128" in note for note in p.notes)
    assert said is (build < 5137)


@pytest.mark.parametrize(("name", "model", "figures"), [
    # per head: 61 x 4096 x 24576 x 2 B = 11712 MiB of K, x 16384 = 7808 MiB of V
    ("b4963_graviton4_deepseek-r1-q4_0_pre-mla_ctx4096", "deepseek-ai/DeepSeek-R1",
     ("11712.00 / 7808.00  11712.00 / 7808.00  exact", "CPU 19520.00 = 61 layers")),
    # the latent and its V (b5137-b7831): 61 x 16384 x 576 x 2 B = 1098 MiB, x 512 = 976 MiB
    ("b5331_5090+2x4090+a6000_deepseek-v3-0324_mla-gguf_ctx16384", "deepseek-ai/DeepSeek-V3",
     ("1098.00 / 976.00  1098.00 / 976.00  exact", "CUDA0 510.00 = 15 layers")),
])
def test_check_of_an_excerpt_without_widths_takes_the_logs_build(name: str, model: str,
                                                                 figures: tuple[str, str]) -> None:
    """A log cut to its build line and context block: no print_info widths and no GGUF dump, so `check`
    recomputes the cache from --model. It used today's rule, the 576-wide latent without V, and printed
    "274.50 / 0.00 DIFFERS" with "= 4338 layers (NOT whole layers)" for the b4963 log and "1098.00 / 0.00 DIFFERS"
    for the b5331 one, both exact; it now takes the rules of the log's build."""
    lines = (LOGS / f"{name}.log").read_text().splitlines()
    build = next(line for line in lines if line.startswith("build: "))
    excerpt = "\n".join([build, *lines[lines.index("llama_context: constructing llama_context"):]]) + "\n"
    assert "n_embd_k_gqa" not in excerpt and "key_length" not in excerpt
    run = subprocess.run([sys.executable, "-m", "kvbudget", "check", "-", "--model", model],
                         input=excerpt, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert all(figure in run.stdout for figure in figures), run.stdout
    assert 61 * 4096 * 24576 * 2 / MiB == 11712 and 61 * 16384 * 512 * 2 / MiB == 976


def test_an_mla_layer_without_its_head_sizes_is_refused_for_a_per_head_build() -> None:
    with pytest.raises(InputError, match="before b5137 cache MLA as every head's K and V"):
        cache_layer(MLA(512, 64), 0, True, False)
    assert cache_layer(MLA(512, 64), 0, True, True) is not None


@pytest.mark.parametrize("excerpt", [
    # https://github.com/ikawrakow/ik_llama.cpp/pull/259 (ubergarm's DeepSeek-R1 run, -mla 2): the latent alone
    "llama_kv_cache_init:      CUDA0 KV buffer size =  1166.65 MiB\n"
    "llama_new_context_with_model: KV self size  = 1166.62 MiB, c^KV (q8_0): 1166.62 MiB, kv^T: not used\n",
    # https://github.com/ikawrakow/ik_llama.cpp/issues/285 (the fork's own DeepSeek-R1 run, -mla 0): per head
    "llama_new_context_with_model: n_ctx      = 512\n"
    "llama_new_context_with_model: mla_attn   = 0\n"
    "llama_kv_cache_init:        CPU KV buffer size =  2440.00 MiB\n"
    "llama_new_context_with_model: KV self size  = 2440.00 MiB, K (f16): 1464.00 MiB, V (f16):  976.00 MiB\n",
])
def test_an_ik_llama_cpp_log_is_not_read_as_llama_cpps(excerpt: str) -> None:
    """ik_llama.cpp, a fork, caches DeepSeek's MLA by its own -mla modes (the latent with mla_attn >= 1 since
    early 2025, before llama.cpp's b5137) and numbers its builds apart from llama.cpp's. `check` printed an empty
    table (the c^KV line is no cache line it reads) or took the fork's figures for llama.cpp's, exit 0; it now
    names the fork in one line, exit 2."""
    run = subprocess.run([sys.executable, "-m", "kvbudget", "check", "-", "--model", "deepseek-ai/DeepSeek-R1"],
                         input=excerpt, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and run.stdout == "" and run.stderr.count("\n") == 1
    assert "ik_llama.cpp log" in run.stderr and "ggml-org/llama.cpp" in run.stderr
