"""What a vLLM log shows of its own run beyond its figures: worker tags as evidence of its layout, an excerpt that
prints no settings, and weights far from the planned model's.

vLLM's multiprocessing executor names a worker ``Worker`` plus ``_PPm`` only when PP > 1 and ``_TPn`` only when
TP > 1 (``v1/executor/multiproc_executor.py`` setup_proc_title_and_log_prefix, 0.14.0); from 0.12 the KV figures
are printed once per node, so an excerpt often shows rank 0 alone.
"""

from __future__ import annotations

from pathlib import Path

from kvbudget.engines.vllm.check import check_log
from kvbudget.engines.vllm.log import parse_vllm_log

DATA = Path(__file__).parent / "data" / "vllm_logs"
# club-3090 PR #594: vLLM 0.24.0 at TP 2 on two RTX 3090, an excerpt whose only worker tag is Worker_TP0
TP2_EXCERPT = DATA / "v0.24.0_rtx3090x2_qwen3.6-27b-fp8_tp2_kvfp8_mtp3_len262144_mns2.log"


def _line(tag: str) -> str:
    return f"({tag} pid=89) INFO 07-06 10:54:37 [gpu_worker.py:508] Available KV cache memory: 5.33 GiB\n"


def test_a_tp_tag_of_rank_0_alone_is_a_tensor_parallel_run() -> None:
    assert parse_vllm_log(_line("Worker_TP0")).worker_layout == (2, 1, False)
    assert parse_vllm_log(_line("Worker_PP0_TP0")).worker_layout == (2, 2, False)
    assert parse_vllm_log(_line("Worker_PP1")).worker_layout == (1, 2, True)
    assert parse_vllm_log(_line("Worker_TP0") + _line("Worker_TP3")).worker_layout == (4, 1, True)


def test_tags_with_an_expert_or_context_parallel_suffix_are_read() -> None:
    # "TP1_EP1": the rank is followed by another group's name (enable_expert_parallel), not a word boundary
    assert parse_vllm_log(_line("Worker_TP0_EP0") + _line("Worker_TP1_EP1")).worker_layout == (2, 1, True)
    assert parse_vllm_log(_line("Worker_DP1_TP1_EP3")).worker_layout == (2, 1, True)
    assert parse_vllm_log(_line("Worker")).worker_layout is None  # one worker, no group named
    assert parse_vllm_log(_line("VllmWorker rank=3")).worker_layout == (4, 1, True)


def test_the_tp2_excerpt_is_planned_at_tp2_and_says_it_is_the_least() -> None:
    r = check_log(TP2_EXCERPT.read_text(), gpu="RTX-3090")
    assert r.settings.tensor_parallel_size == 2
    said = " ".join(r.warnings)
    assert "smallest layout its workers' tags allow" in said
    # the available KV cache is per rank: planned at TP 1 it was -8.69 GiB against the log's 5.33
    available = next(row for row in r.rows if row.figure.startswith("available KV cache"))
    assert available.predicted is not None and abs(available.predicted - 5.33) < 0.5


def test_an_excerpt_without_settings_says_its_settings_were_defaults() -> None:
    bare = check_log(TP2_EXCERPT.read_text(), gpu="RTX-3090")
    assert any("none of the run's engine arguments" in w for w in bare.warnings)
    flagged = check_log(TP2_EXCERPT.read_text(), gpu="RTX-3090", flags=["--kv-cache-dtype", "fp8"])
    assert not any("none of the run's engine arguments" in w for w in flagged.warnings)


# the V1 alpha run of neuralmagic's w8a8 70B (67.72 GiB loaded) checked as the bf16 catalog model (131.45 GiB)
W8A8 = DATA / "v1-alpha-0.7_80gb_llama3.1-70b-w8a8_len2048_gmu0.98.log"


def test_weights_far_from_the_logs_say_another_checkpoint_was_served() -> None:
    r = check_log(W8A8.read_text(), model="llama-3.1-70b", gpu="H100")
    said = [w for w in r.warnings if w.startswith("model loading:")]
    assert len(said) == 1 and "67.72 GiB" in said[0] and "Meta-Llama-3.1-70B-Instruct-quantized.w8a8" in said[0]
    # the record's own stand-in (--quantization fp8) loads within a fifth of the log: no such warning
    close = check_log(W8A8.read_text(), model="llama-3.1-70b", gpu="H100", version="0.7.1",
                      flags=["--quantization", "fp8", "--gpu-memory-utilization", "0.98", "--max-model-len", "2048"])
    assert not any(w.startswith("model loading:") for w in close.warnings)


def test_v0_worker_processes_are_the_ranks_after_the_first() -> None:
    """V0's multiprocessing executor runs rank 0 in the engine's process and one "VllmWorkerProcess" per other rank:
    the 0.6.3.post1 TP 4 log (three such pids) and the 0.7.2 TP 2 log (one), their parallel sizes cut out, plan the
    layout the record gives (they were planned at TP 1)."""
    for name, tp, gpu, model in (("v0.6.3.post1_rtx-a5000-x4_qwen2.5-32b_tp4_no-custom-ar", 4, "RTX-A5000", "Qwen/Qwen2.5-32B-Instruct"),
                                 ("v0.7.2_a100-40gb-x2_qwen2.5-14b_tp2_fp16", 2, "A100-40GB", "Qwen/Qwen2.5-14B-Instruct")):
        text = (DATA / f"{name}.log").read_text()
        cut = "".join(line for line in text.splitlines(keepends=True) if "tensor_parallel_size" not in line)
        assert parse_vllm_log(cut).worker_layout == (tp, 1, False)
        whole, excerpt = check_log(text, model=model, gpu=gpu), check_log(cut, model=model, gpu=gpu)
        assert excerpt.settings.tensor_parallel_size == whole.settings.tensor_parallel_size == tp
        assert excerpt.plan.num_gpu_blocks == whole.plan.num_gpu_blocks
    blocks = "INFO 01-01 00:00:00 executor_base.py:92] # GPU blocks: 100, # CPU blocks: 10\n"
    assert parse_vllm_log("(VllmWorkerProcess pid=7) INFO x\n" * 3 + blocks).worker_layout == (2, 1, False)


def _without_device(path: Path) -> str:
    """A corpus log less the lines that name its device or print its total: what is left says the capability."""
    drop = ("NVIDIA ", "device_name=", "total_gpu_memory", "Free memory on device", "VRAM")
    return "\n".join(line for line in path.read_text().splitlines() if not any(d in line for d in drop))


def test_a_gpu_the_logs_own_lines_rule_out_is_refused() -> None:
    """--gpu of another chip than the log's: its device name (an H100 log checked as an A100 80GB, same memory),
    or, with no name or total left, a line bounding the compute capability (FlashAttention 3 runs on 9.x alone; vLLM
    0.8 cannot use FlashAttention 2 below 8.0; a quantization's 'Current capability: 75'). Each was checked as the
    given card's run, exit 0."""
    import pytest

    from kvbudget.units import InputError

    h100 = DATA / "v0.22.1_h100_qwen3-30b-a3b-2507_fp8-online_len8192_gmu0.92_mns64.log"
    with pytest.raises(InputError, match=r"--gpu 'A100-80GB' \(A100-SXM4-80GB\) is not the run's device: the log "
                                         r"names 'NVIDIA H100 80GB HBM3'"):
        check_log(h100.read_text(), gpu="A100-80GB")
    excerpt = _without_device(h100)
    assert parse_vllm_log(excerpt).gpu_name is None and parse_vllm_log(excerpt).total_gib is None
    with pytest.raises(InputError, match=r"\(A100-SXM4-80GB, compute capability 8\.0\) is not the run's device: the log "
                                         r"says 'Using FlashAttention version 3' \(compute capability 9\.0 to 9\.9\)"):
        check_log(excerpt, gpu="A100-80GB")
    assert check_log(excerpt, gpu="H100").rows  # the card it ran on: checked
    t4 = _without_device(DATA / "v0.8.2_t4_llama3.2-3b_len2048_gmu0.89.log")
    with pytest.raises(InputError, match=r"\(L4-24GB, compute capability 8\.9\) is not the run's device: the log says "
                                         r"'Cannot use FlashAttention-2 backend for Volta and Turing GPUs' "
                                         r"\(compute capability below 8\.0\)"):
        check_log(t4, gpu="L4")
    quant = "ValueError: The quantization method fp8 is not supported for the current GPU. Minimum capability: 80. " \
            "Current capability: 75.\n"
    from kvbudget.engines.logscan import open_log
    from kvbudget.engines.vllm.log import capability_said

    assert capability_said(open_log(quant, "vLLM")) == ("Current capability: 75", 7.5, 7.5)
    with pytest.raises(InputError, match=r"says 'Current capability: 75' \(compute capability 7\.5\)"):
        check_log(excerpt + "\n" + quant, gpu="H100")
