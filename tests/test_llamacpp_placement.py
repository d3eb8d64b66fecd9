"""llama.cpp's tensor placement (engines/llamacpp/placement.py): -ot PATTERN=BUFFER, --cpu-moe, --n-cpu-moe N and
auto-fit's step 3, each moving named GGUF tensors (common/arg.cpp, src/llama-model-loader.cpp, common/fit.cpp).

Byte figures are worked by hand from Qwen3-30B-A3B's config.json (hidden_size 2048, moe_intermediate_size 768,
num_experts 128, 48 layers, vocab_size 151936, bf16): one layer's expert tensors (ffn_gate_exps, ffn_up_exps,
ffn_down_exps) hold 3 x 128 x 768 x 2048 elements = 1,207,959,552 bytes in bf16; the token embedding
151936 x 2048 x 2 = 622,329,856 bytes."""

from __future__ import annotations

import time
from typing import Any

import pytest

import kvbudget
from kvbudget._record import replace
from kvbudget.cli import main
from kvbudget.engines.llamacpp import LlamaCppSettings, plan
from kvbudget.engines.llamacpp.command import parse_llamacpp_command
from kvbudget.engines.llamacpp.fit import backend_context_bytes
from kvbudget.hardware import find_gpu
from kvbudget.units import GiB, InputError, MiB

EXPERTS = 3 * 128 * 768 * 2048 * 2  # one layer's expert tensors, bf16
EMBD = 151936 * 2048 * 2  # token_embd.weight, bf16 (the input layer: always in host memory)
QWEN = "Qwen/Qwen3-30B-A3B"


def _plan(command: str | list[str], gpu: str = "RTX-4090") -> Any:
    cmd = parse_llamacpp_command(command)
    return plan(kvbudget.load_model(cmd.model), find_gpu(gpu), cmd.settings)


def test_exps_to_cpu_moves_every_layers_experts_by_hand() -> None:
    """-ot exps=CPU with -ngl 99: host memory holds the embedding and 48 layers' experts; the GPU everything else.
    The old plan kept the experts on the GPU (56.29 GiB) and printed a cudaMalloc failure."""
    p = _plan(f"llama-server -m {QWEN} -c 8192 -ngl 99 -ot exps=CPU")
    assert p.weights_cpu_bytes == EMBD + 48 * EXPERTS
    whole = plan(kvbudget.load_model(QWEN), find_gpu("RTX-4090"), LlamaCppSettings(n_ctx=8192, fit=False))
    assert p.weights_gpu_bytes == whole.weights_gpu_bytes - 48 * EXPERTS
    assert p.fits and (p.experts_on_cpu, p.expert_layers) == (48, 48)
    assert f"load_tensors:        CUDA0 model buffer size = {p.weights_gpu_bytes / MiB:8.2f} MiB" in p.log_lines
    assert not any("cudaMalloc" in line for line in p.log_lines)


def test_n_cpu_moe_moves_the_first_n_layers_experts(capsys: pytest.CaptureFixture[str]) -> None:
    """--n-cpu-moe 30 (and -ncmoe, LLAMA_ARG_N_CPU_MOE): blk.0 .. blk.29's experts in host memory, 18 layers' on the
    GPU. It was an unknown flag, ignored, and the plan said llama.cpp would not start."""
    p = _plan(f"llama-server -m {QWEN} -c 8192 -ngl 99 --n-cpu-moe 30")
    assert p.weights_cpu_bytes == EMBD + 30 * EXPERTS and p.experts_on_cpu == 30
    for spelled in (f"llama-server -m {QWEN} -c 8192 -ngl 99 -ncmoe 30",
                    f"LLAMA_ARG_N_CPU_MOE=30 llama-server -m {QWEN} -c 8192 -ngl 99"):
        assert _plan(spelled).weights_cpu_bytes == p.weights_cpu_bytes
    assert main(["explain", "--gpu", "RTX-4090", "--", "llama-server", "-m", QWEN, "-c", "8192", "-ngl", "99",
                 "--n-cpu-moe", "30"]) == 0
    out = capsys.readouterr().out
    assert "will not start" not in out and "not one kvbudget knows" not in out
    assert "with 30 of 48 layers' experts in host memory" in out


def test_cpu_moe_and_its_environment_variable() -> None:
    expect = EMBD + 48 * EXPERTS
    assert _plan(f"llama-server -m {QWEN} -c 4096 -ngl 99 --cpu-moe").weights_cpu_bytes == expect
    assert _plan(f"llama-server -m {QWEN} -c 4096 -ngl 99 -cmoe").weights_cpu_bytes == expect
    assert _plan(f"LLAMA_ARG_CPU_MOE=1 llama-server -m {QWEN} -c 4096 -ngl 99").weights_cpu_bytes == expect
    assert _plan(f"LLAMA_ARG_OVERRIDE_TENSOR=exps=CPU llama-server -m {QWEN} -c 4096 -ngl 99").weights_cpu_bytes == expect


def test_the_first_matching_override_wins() -> None:
    """llama-model-loader.cpp tries the overrides in order: blk.0's experts stay on CUDA0 when their rule comes first."""
    p = _plan(["llama-server", "-m", QWEN, "-c", "4096", "-ngl", "99", "-ot", r"blk\.0\.=CUDA0,exps=CPU"])
    assert p.weights_cpu_bytes == EMBD + 47 * EXPERTS


def test_ot_to_a_second_gpu() -> None:
    """-ts 1,1 splits the layers over CUDA0 (0-23) and CUDA1 (24-47, with the output layer); -ot moves blk.1's and
    blk.2's experts from CUDA0 to CUDA1."""
    base = _plan(f"llama-server -m {QWEN} -c 4096 -ngl 99 -ts 1,1", "H100-SXM-80GB")
    moved = _plan(["llama-server", "-m", QWEN, "-c", "4096", "-ngl", "99", "-ts", "1,1", "-ot",
                   r"blk\.(1|2)\.ffn_.*_exps=CUDA1"], "H100-SXM-80GB")
    (b0, b1), (m0, m1) = base.device_bytes, moved.device_bytes
    assert (b0 - m0, m1 - b1) == (2 * EXPERTS, 2 * EXPERTS)
    assert any(line.endswith(f"CUDA1 model buffer size = {(moved.device_bytes[1] - moved.kv_device_bytes[1] - moved.compute_bytes) / MiB:8.2f} MiB")
               for line in moved.log_lines)


def test_unknown_buffer_and_bad_values_are_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "--gpu", "RTX-4090", "--", "llama-server", "-m", QWEN, "-ot", "exps=CUDA9"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "CUDA9" in err and "CPU, CUDA0" in err
    for bad in ("-ot exps", "-ot [x=CPU", "--n-cpu-moe -1", "--n-cpu-moe x"):
        with pytest.raises(InputError):
            _plan(f"llama-server -m {QWEN} {bad}")


@pytest.mark.parametrize("pattern", ["(a+)+$", "(.*)*x", "(a|a)*b", "(x+y?)+z", "((ab)*c)+d", "(a{9})*"])
def test_a_catastrophic_pattern_is_refused_at_once(pattern: str) -> None:
    start = time.monotonic()
    with pytest.raises(InputError, match="exponential"):
        parse_llamacpp_command(["llama-server", "-m", "m.gguf", "-ot", f"{pattern}=CPU"])
    assert time.monotonic() - start < 1


def test_heavy_patterns_stay_bounded() -> None:
    """Sequential wildcards on names under 40 characters, many rules, the largest --n-cpu-moe llama.cpp takes: all
    answered in bounded time (--n-cpu-moe past LLAMA_MAX_LAYERS adds no rule that could match)."""
    start = time.monotonic()
    rules = ",".join(rf"blk\.{i}\..*.*.*.*z=CPU" for i in range(300))
    p = _plan(["llama-server", "-m", QWEN, "-c", "4096", "-ngl", "99", "-ot", rules, "--n-cpu-moe", "3795"])
    assert p.weights_cpu_bytes == EMBD + 48 * EXPERTS
    assert time.monotonic() - start < 10
    with pytest.raises(InputError, match="characters long"):
        parse_llamacpp_command("llama-server -m m.gguf -ot " + "a" * 5000 + "=CPU")


def test_gguf_file_type_tensor_bytes_add_up() -> None:
    """A llama-quantize Q4_K_M file: the expert tensors moved are those of the file's types, and each layer's tensors
    add up to its bytes."""
    from kvbudget.engines.llamacpp.policy import _weights
    from kvbudget.model import gguf_quant

    spec = kvbudget.load_model(QWEN)
    q4 = replace(spec, weight_format=gguf_quant.weight_format("Q4_K_M"))
    wb = _weights(q4)
    for il in (0, 47):
        assert sum(b for _, b, at in wb.tensors if at == il) == wb.per_layer[il]
    exps = sum(b for name, b, _ in wb.tensors if "_exps." in name)
    s = LlamaCppSettings(n_ctx=4096, overrides=((r"exps", "CPU"),), n_gpu_layers=99, ngl_given=True)
    p = plan(q4, find_gpu("RTX-4090"), s)
    assert p.weights_cpu_bytes == exps + wb.head


def test_auto_fit_moves_experts_for_an_moe_model(capsys: pytest.CaptureFixture[str]) -> None:
    """No -ngl, no -ot: fit's step 3 puts the experts in host memory and fills full layers from the front while the
    projection stays within free memory less the 1 GiB target; one more full layer would not. The old plan kept every
    layer on the GPU and said llama.cpp would not start."""
    gpu = find_gpu("RTX-4090")
    p = _plan(f"llama-server -m {QWEN}")
    budget = gpu.memory_bytes - backend_context_bytes(gpu.memory_bytes) - GiB
    assert p.fits and p.fit_moved and p.total_gpu_bytes <= budget
    assert 0 < p.experts_on_cpu < 48 and p.offloaded == 49
    assert any("with only dense weights in device memory there is a total surplus" in line for line in p.log_lines)
    partial = len(p.overrides)
    assert any(f"49 layers ({partial:2d} overflowing)" in line for line in p.log_lines)
    from kvbudget.engines.llamacpp.fit import overflow

    fuller = LlamaCppSettings(n_ctx=p.n_ctx, n_gpu_layers=49, overrides=overflow(48, 49, partial - 1), fit=False)
    assert plan(kvbudget.load_model(QWEN), gpu, fuller).total_gpu_bytes > budget
    assert main(["explain", "--gpu", "RTX-4090", "--", "llama-server", "-m", QWEN]) == 0
    out = capsys.readouterr().out
    assert "the model does not fit the GPU alone" in out and "will not start" not in out


def test_plan_searches_keep_the_gpu_alone() -> None:
    """compare's row (engine.plan) asks what fits the GPU alone: auto-fit moves no weights there."""
    from kvbudget.engines.base import Setup
    from kvbudget.engines.llamacpp.engine import ENGINE

    row = ENGINE.plan(kvbudget.load_model(QWEN), find_gpu("RTX-4090"), Setup(context=4096))
    assert not row.starts


def test_the_output_layer_goes_first_from_b7467() -> None:
    """#18148 (b7467): -ngl 10 is the output layer and 9 repeating layers; before, 10 repeating layers and the output
    layer in host memory."""
    spec = kvbudget.load_model("qwen2.5-32b")
    new = plan(spec, find_gpu("RTX-4090"), LlamaCppSettings(n_ctx=4096, n_gpu_layers=10, fit=False))
    old = plan(spec, find_gpu("RTX-4090"), LlamaCppSettings(n_ctx=4096, n_gpu_layers=10, fit=False, build=7000))
    out = 152064 * 5120 * 2  # output.weight, bf16
    layer = old.weights_gpu_bytes - (new.weights_gpu_bytes - out)
    assert new.weights_gpu_bytes - out + layer == old.weights_gpu_bytes and layer > 0
    assert old.kv_gpu_bytes * 9 == new.kv_gpu_bytes * 10


def test_no_mmap_prints_the_cpu_buffer_it_allocates() -> None:
    p = _plan(f"llama-server -m {QWEN} -c 4096 -ngl 99 --n-cpu-moe 40 --no-mmap")
    assert f"load_tensors:          CPU model buffer size = {(EMBD + 40 * EXPERTS) / MiB:8.2f} MiB" in p.log_lines


def test_fit_and_levers_take_the_placement_flags(capsys: pytest.CaptureFixture[str]) -> None:
    """kvbudget fit --engine llama.cpp --n-cpu-moe N / --cpu-moe / --override-tensor plans what llama-server does with
    the same flags (explain reads them off the command): fit had no such options ('unrecognized arguments')."""
    common = ["--gpu", "RTX-4090", "--engine", "llama.cpp", "--context", "8192", "--ngl", "99"]
    for flags, command in ((["--n-cpu-moe", "30"], "--n-cpu-moe 30"), (["--cpu-moe"], "--cpu-moe"),
                           (["--override-tensor", "exps=CPU"], "-ot exps=CPU")):
        assert main(["fit", QWEN, *common, *flags, "--json"]) == 0
        doc = __import__("json").loads(capsys.readouterr().out)
        expected = _plan(f"llama-server -m {QWEN} -c 8192 -ngl 99 {command}")
        assert doc["memory"]["weights_cpu_bytes"] == expected.weights_cpu_bytes > EMBD
        assert doc["launch"]["command"].endswith(command)  # the command to run keeps the placement
    answer = kvbudget.fit(QWEN, gpu="RTX-4090", engine="llama.cpp", context=8192, options={"n_cpu_moe": 30})
    assert answer.plan.experts_on_cpu == 30 and answer.plan.weights_cpu_bytes == EMBD + 30 * EXPERTS
    assert main(["levers", QWEN, "--gpu", "RTX-4090", "--engine", "llama.cpp", "--context", "8192", "--cpu-moe"]) == 0
    capsys.readouterr()
    assert main(["fit", QWEN, "--gpu", "RTX-4090", "--engine", "vllm", "--cpu-moe"]) == 2
    assert "--cpu-moe is not read under --engine vllm" in capsys.readouterr().err
    assert main(["fit", QWEN, *common, "--override-tensor", "exps"]) == 2
    assert "give PATTERN=BUFFER" in capsys.readouterr().err


def test_the_launch_command_keeps_the_placement() -> None:
    """The llama-server command kvbudget writes for a plan with tensor overrides carries them (it dropped them, so
    the command it printed did not run as planned), and reads back to the same overrides."""
    from kvbudget.engines.llamacpp.launch import llamacpp_argv

    for command in (["--n-cpu-moe", "30"], ["--cpu-moe"], ["-ot", "blk\\.1\\.ffn=CPU,exps=CPU"]):
        s = parse_llamacpp_command(["llama-server", "-m", QWEN, "-c", "8192", *command]).settings
        argv = llamacpp_argv(QWEN, s)
        assert argv[-len(command):] == command
        assert parse_llamacpp_command(argv).settings.overrides == s.overrides


def test_a_rule_that_places_no_tensor_is_said() -> None:
    """A pattern no tensor name holds ("attn_qq"), or one whose tensors an earlier rule took (first match wins), is
    loaded by llama.cpp as if absent: a typo it does not point out. The plan names such rules and no others; the
    rules --cpu-moe and --n-cpu-moe make (past the model's layers they match nothing by design) are never named."""
    p = _plan(f"llama-server -m {QWEN} -c 8192 -ngl 99 -ot exps=CPU,attn_qq=CPU,ffn_up_exps=CUDA0")
    said = [n for n in p.notes if n.startswith("tensor override")]
    assert len(said) == 1 and "attn_qq=CPU, ffn_up_exps=CUDA0" in said[0]
    assert p.weights_cpu_bytes == EMBD + 48 * EXPERTS  # the idle rules change nothing
    for flags in ("-ot exps=CPU", "--n-cpu-moe 60", "--cpu-moe"):
        assert not any(n.startswith("tensor override") for n in _plan(f"llama-server -m {QWEN} -c 8192 -ngl 99 {flags}").notes)
