"""llama.cpp's auto-fit (common/fit.cpp; engines/llamacpp/fit.py): the context it reduces to, from the free memory
of a bare card, and what it does after (an abort when the user set -ngl, layers moved to system memory otherwise)."""

from __future__ import annotations

from pathlib import Path

import kvbudget
from kvbudget.engines.llamacpp import LlamaCppSettings, plan
from kvbudget.engines.llamacpp.command import parse_llamacpp_command
from kvbudget.engines.llamacpp.fit import backend_context_bytes, fit_context, user_placement
from kvbudget.hardware import find_gpu
from kvbudget.units import GiB, MiB


def test_the_projection_and_the_reduced_context_of_llama_cpps_own_example() -> None:
    """tools/fit-params/README.md (b6895, https://github.com/ggml-org/llama.cpp/blob/master/tools/fit-params/README.md):
    Qwen3-30B-A3B F16 on an RTX 4090, 4 unified slots: "projected to use 61807 MiB of device memory vs. 24077 MiB of
    free device memory", "context size reduced from 40960 to 4096 -> need 3456 MiB less memory in total". A unified
    cache is one stream: the context fit starts from is n_ctx_train, not 4 x n_ctx_train."""
    p = plan(kvbudget.load_model("qwen3-30b-a3b"), find_gpu("RTX-4090"), LlamaCppSettings())
    first, _, reduced = p.log_lines[:3]
    projected = int(first.split("projected to use ")[1].split(" MiB")[0])
    free = int(first.split(" vs. ")[1].split(" MiB")[0])
    assert abs(projected - 61807) < 61807 * 0.001  # kvbudget's compute buffer is an estimate
    assert abs(free - 24077) < 24077 * 0.01  # a bare card's free memory: the total less the backend context
    assert reduced == "common_params_fit_impl: context size reduced from 40960 to 4096 -> need 3456 MiB less memory in total"
    assert p.n_ctx == 4096 and "moved to system memory" in p.fit_note  # an MoE: experts go to the CPU next


def test_ngl_set_by_the_user_aborts_fit_after_it_reduced_the_context() -> None:
    """RamaLama passes -ngl 999: fit reduces the context, then aborts ("n_gpu_layers already set by user to 999,
    abort"); common_fit_params catches it and common_init_result loads with the reduced context."""
    cmd = parse_llamacpp_command("llama-server -m qwen2.5-32b -ngl 999")
    p = plan(kvbudget.load_model("qwen2.5-32b"), find_gpu("RTX-4090"), cmd.settings)
    assert p.n_ctx == 4096 and p.offloaded == 65
    assert "fit aborted: n_gpu_layers already set by user to 999" in p.fit_note
    assert p.log_lines[3] == ("common_params_fit_impl: failed to fit params to free device memory: n_gpu_layers already "
                              "set by user to 999, abort")


def test_a_dense_model_that_does_not_fit_keeps_the_layers_that_do() -> None:
    """Without -ngl, step 3 fills layers back to front while the projection leaves the target free, and llama.cpp loads
    with them: the plan is that load (it was a note beside a plan of every layer on the GPU, which did not start)."""
    gpu = find_gpu("RTX-4090")
    p = plan(kvbudget.load_model("qwen2.5-32b"), gpu, LlamaCppSettings())
    layers = p.offloaded
    budget = gpu.memory_bytes - backend_context_bytes(gpu.memory_bytes) - GiB
    kept = plan(kvbudget.load_model("qwen2.5-32b"), gpu, LlamaCppSettings(n_ctx=4096, n_gpu_layers=layers, fit=False))
    more = plan(kvbudget.load_model("qwen2.5-32b"), gpu, LlamaCppSettings(n_ctx=4096, n_gpu_layers=layers + 1, fit=False))
    assert 0 < layers < 65 and kept.total_gpu_bytes <= budget < more.total_gpu_bytes
    assert p.n_ctx == 4096 and p.fits and p.fit_moved and p.total_gpu_bytes == kept.total_gpu_bytes
    assert p.placement.startswith(f"with {65 - layers} of 65 layers in host memory")
    assert f"load_tensors: offloaded {layers}/65 layers to GPU" in p.log_lines
    assert "common_fit_params: successfully fit params to free device memory" in p.log_lines


def test_the_context_is_interpolated_between_two_measurements() -> None:
    """Step 2: n_ctx = min + (max - min) x (target - use(min)) / (use(max) - use(min)), rounded down to 256 x streams;
    a projection that is not linear (here convex) gives a context below the largest that fits, as llama.cpp's does."""
    def measure(n: int) -> tuple[int, ...]:
        return (10 * GiB + n * n * 4,)

    f = fit_context(measure, (20 * GiB,), GiB, 65536, True, 65536, 4096, 1, 10 * GiB, 33, False, "")
    lo, hi = sum(measure(4096)), sum(measure(65536))
    expect = 4096 + (65536 - 4096) * (19 * GiB - lo) // (hi - lo)
    assert f.n_ctx == expect - expect % 256 and f.verdict == "context reduced"
    assert measure(f.n_ctx + 4096)[0] <= 19 * GiB  # more would have fit: not a search for the largest


def test_several_devices_budget_the_sum_less_a_share_of_a_layer_each() -> None:
    """Over nd devices the target is the summed free memory less the summed margins less (nd + 1) x the model's bytes
    per layer / 2 (dense) or / 6 (MoE); and fit goes on to step 3 (here: aborted by -ts)."""
    def measure(n: int) -> tuple[int, ...]:
        return (8 * GiB + n * 64 * 1024, 8 * GiB + n * 64 * 1024)

    free = (16 * GiB, 16 * GiB)
    dense = fit_context(measure, free, GiB, 131072, True, 131072, 4096, 1, 16 * GiB, 32, False, "ts")
    moe = fit_context(measure, free, GiB, 131072, True, 131072, 4096, 1, 16 * GiB, 32, True, "ts")
    assert dense.n_ctx < moe.n_ctx and dense.verdict == "aborted" and dense.abort == "ts"
    goal = 32 * GiB - 2 * GiB - 3 * (16 * GiB // 32) // 2
    lo, hi = sum(measure(4096)), sum(measure(131072))
    n = 4096 + (131072 - 4096) * (goal - lo) // (hi - lo)
    assert dense.n_ctx == n - n % 256


def test_what_the_user_set_stops_step_3() -> None:
    assert user_placement(-1, False, (), 1, "layer", False) == ""
    assert user_placement(99, True, (), 1, "layer", False) == "n_gpu_layers already set by user to 99"
    assert user_placement(-1, False, (3.0, 1.0), 2, "layer", False) == "model_params::tensor_split already set by user"
    assert "SPLIT_MODE_ROW" in user_placement(-1, False, (), 2, "row", False)
    assert "tensor_buft_overrides" in user_placement(-1, False, (), 1, "layer", True)


def test_the_command_reads_the_fit_flags() -> None:
    s = parse_llamacpp_command("llama-server -m m.gguf -fitt 512 -fitc 8192 -ot exps=CPU -sm row -ngl auto").settings
    assert (s.fit_target_mib, s.fit_ctx, s.overrides, s.split_mode, s.ngl_given) == (512, 8192, (("exps", "CPU"),), "row", False)
    assert parse_llamacpp_command("llama-server -m m.gguf -ngl 99").settings.ngl_given


def test_the_target_and_minimum_context_are_the_users() -> None:
    model, gpu = kvbudget.load_model("llama-3.1-8b"), find_gpu("RTX-4090")
    wide = plan(model, gpu, LlamaCppSettings(fit_target_mib=4096))
    narrow = plan(model, gpu, LlamaCppSettings())
    assert wide.n_ctx < narrow.n_ctx and wide.n_ctx % 256 == 0
    assert "4096 MiB target" in wide.fit_note and wide.total_gpu_bytes <= gpu.memory_bytes - 4096 * MiB


FIT_LOG = Path(__file__).parent / "data" / "llamacpp_fit" / "b6895_rtx4090_qwen3-30b-a3b-f16_fit-params-readme.log"


def test_the_fit_lines_are_read_and_set_beside_a_bare_cards_free_memory() -> None:
    from kvbudget.engines.llamacpp.fitlog import fit_rows, held_warning, read_fit
    from kvbudget.engines.logscan import open_log

    f = read_fit(open_log(FIT_LOG.read_text(encoding="utf-8"), "llama.cpp"))
    assert f is not None and (f.free_mib, f.projected_mib, f.reduced_from, f.reduced_to) == (24077, 61807, 40960, 4096)
    gpu = find_gpu("RTX-4090")
    free_row = fit_rows(f, gpu)[0]
    assert free_row[1] == 24077 and abs(free_row[2] - 24077) < 24077 // 100
    assert held_warning(f, gpu) is None  # a bare card
    shared = read_fit(open_log(FIT_LOG.read_text(encoding="utf-8").replace("vs. 24077 MiB", "vs. 21077 MiB"), "llama.cpp"))
    assert shared is not None and "less than kvbudget plans for a bare RTX-4090" in str(held_warning(shared, gpu))


def test_calibrate_takes_the_free_memory_fit_sized_from_and_profile_applies_it(tmp_path: Path) -> None:
    """calibrate's llama.cpp point is the fit line's free memory against a bare card's; --profile takes the term off
    the free memory fit sizes the context from."""
    import json

    from kvbudget.cli import main

    shared = tmp_path / "shared.log"  # the same run with 3000 MiB held by another process
    shared.write_text(FIT_LOG.read_text(encoding="utf-8").replace("vs. 24077 MiB", "vs. 21077 MiB"), encoding="utf-8")
    out = tmp_path / "site.json"
    assert main(["calibrate", str(shared), "--gpu", "RTX-4090", "--out", str(out)]) == 0
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["engine"] == "llama.cpp" and abs(doc["terms"][0]["bytes"] - 2988 * MiB) < 20 * MiB
    model, gpu = kvbudget.load_model("llama-3.1-8b"), find_gpu("RTX-4090")
    from kvbudget.engines.llamacpp.engine import ENGINE

    bare = plan(model, gpu, LlamaCppSettings())
    held = plan(model, gpu, LlamaCppSettings(site=ENGINE.site_terms(doc)))
    assert held.n_ctx < bare.n_ctx and any("site profile" in n for n in held.notes)
