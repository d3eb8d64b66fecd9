"""The memory profile's own terms in `kvbudget check` (non-torch memory, activation peak), the note naming NCCL's
link-dependent buffers at TP >= 2 under an eager NCCL release (engines/vllm/nccl.py link_note), and the note for a
--quantization word that stands for a pre-quantized checkpoint (engines/vllm/quant.py stand_in_note)."""

from __future__ import annotations

from pathlib import Path

import kvbudget
from kvbudget.engines.vllm import VllmSettings, plan
from kvbudget.engines.vllm.calibration import NON_TORCH_TP_BYTES
from kvbudget.engines.vllm.check import check_log
from kvbudget.engines.vllm.nccl import EAGER_INIT_UNATTRIBUTED, link_note, nvlink_pair_bytes
from kvbudget.engines.vllm.policy import weight_format
from kvbudget.engines.vllm.quant import stand_in_note
from kvbudget.units import GiB, MiB

LOGS = Path(__file__).parent / "data" / "vllm_logs"
A100_TP2 = LOGS / "v0.7.2_a100-40gb-x2_qwen2.5-14b_tp2_fp16.log"  # V0, prints non-torch 1.54 and peak 2.84 GiB
QWEN14 = "Qwen/Qwen2.5-14B-Instruct"


def _rows(result: object) -> dict[str, object]:
    return {r.figure: r for r in result.rows}  # type: ignore[attr-defined]


def test_check_compares_the_v0_profile_terms_the_log_prints() -> None:
    r = check_log(A100_TP2.read_text(encoding="utf-8"), model=QWEN14, gpu="A100-SXM4-40GB")
    rows = _rows(r)
    non_torch, peak = rows["non-torch memory (GiB)"], rows["activation peak (GiB)"]
    assert non_torch.reported == 1.54 and peak.reported == 2.84  # type: ignore[attr-defined]
    assert non_torch.predicted == round(r.plan.non_torch_bytes / GiB, 2)  # type: ignore[attr-defined]
    assert peak.predicted == round(r.plan.activation_bytes / GiB, 2)  # type: ignore[attr-defined]
    # profile rows are not KV arithmetic: not repeated in the rows fed with the log's available memory
    assert not {"non-torch memory (GiB)", "activation peak (GiB)"} & {x.figure for x in r.arithmetic_rows}


def test_a_v0_log_of_0_7_is_planned_by_its_release() -> None:
    # "Initializing a V0 LLM engine (v0.7.2)": V0 is 0.7's own engine, so the release's rules (NCCL 2.21) apply
    r = check_log(A100_TP2.read_text(encoding="utf-8"), model=QWEN14, gpu="A100-SXM4-40GB")
    assert r.settings.version == "0.7.2"


def test_check_names_nccl_where_the_logged_non_torch_memory_is_far_off() -> None:
    r = check_log(A100_TP2.read_text(encoding="utf-8"), model=QWEN14, gpu="A100-SXM4-40GB")
    said = [w for w in r.warnings if w.startswith("the log's non-torch memory is 1.54 GiB")]
    assert len(said) == 1 and "NCCL 2.21" in said[0] and "joined by NVLink" in said[0]


def test_consumed_form_prints_no_profile_rows() -> None:
    # 0.27 on measures consumed memory and the transient peak otherwise: no row against the plan's terms
    log = LOGS / "v0.29.0_rtx5090_qwen2.5-7b_bf16_len8192_gmu0.9.log"
    r = check_log(log.read_text(encoding="utf-8"), model="Qwen/Qwen2.5-7B-Instruct", gpu="RTX-5090")
    assert r.log.consumed_gib is not None and r.log.activation_gib is not None
    assert "activation peak (GiB)" not in _rows(r)


def test_nvlink_pair_by_hand() -> None:
    # NCCL 2.21.5 on two NVLink A100s: 2 communicators x 24 channels x (6 + 6 MiB), V0's gather 32 x 6 MiB,
    # custom all-reduce 18 MiB, and the per-process figure
    assert nvlink_pair_bytes("2.21", True) == 2 * 24 * 12 * MiB + 32 * 6 * MiB + 18 * MiB + EAGER_INIT_UNATTRIBUTED
    assert nvlink_pair_bytes("2.21", False) == 2 * 24 * 12 * MiB + 18 * MiB + EAGER_INIT_UNATTRIBUTED
    assert nvlink_pair_bytes("2.26", True) is None  # its channel search not read


def test_link_note_only_where_nccl_connects_eagerly() -> None:
    assert link_note("0.10.2", 2, NON_TORCH_TP_BYTES, 8.0, False) is None  # cuMem on: NCCL connects lazily
    assert link_note("0.7.2", 1, NON_TORCH_TP_BYTES, 8.0, True) is None
    pair = link_note("0.7.2", 2, NON_TORCH_TP_BYTES, 8.0, True)
    assert pair is not None and f"{nvlink_pair_bytes('2.21', True) / GiB:.2f} GiB" in pair  # type: ignore[operator]
    four = link_note("0.6.3", 4, NON_TORCH_TP_BYTES, 8.6, True)
    assert four is not None and "NCCL 2.20" in four and "joined by NVLink" not in four


def test_plan_notes_nccl_at_tp2_under_eager_nccl() -> None:
    spec, gpu = kvbudget.load_model(QWEN14), kvbudget.find_gpu("A100-SXM4-40GB")
    at = {tp: plan(spec, gpu, VllmSettings(version="0.7.2", tensor_parallel_size=tp)) for tp in (1, 2)}
    assert any(n.startswith("NCCL at 2 ranks") for n in at[2].notes)
    assert not any(n.startswith("NCCL at") for n in at[1].notes)
    assert at[2].non_torch_bytes == NON_TORCH_TP_BYTES  # named, not charged: the link is not known


def test_stand_in_note_names_the_roles_a_checkpoint_may_keep_16_bit() -> None:
    spec = kvbudget.load_model("Qwen/Qwen3.6-35B-A3B")
    s = VllmSettings(version="0.24.0", quantization="modelopt_fp4")
    fmt = weight_format(spec, s)
    note = stand_in_note(spec, fmt, "modelopt_fp4", 1)
    assert note is not None and "vision +" in note and "attention +" in note
    vision = sum((t.shape_per_rank(1)[0] * t.shape_per_rank(1)[1] * 2 - fmt.matrix_bytes(*t.shape_per_rank(1))) * t.count
                 for t in spec.inventory.tensors() if t.role == "vision" and fmt.packs(t))
    assert f"vision +{vision / GiB:.2f} GiB" in note
    assert any(n == note for n in plan(spec, kvbudget.find_gpu("RTX-5090"), s).notes)
    # a word vLLM quantizes a 16-bit checkpoint with while loading, or none: no stand-in
    assert stand_in_note(spec, weight_format(spec, VllmSettings(quantization="fp8")), "fp8", 1) is None
    assert stand_in_note(spec, weight_format(spec, VllmSettings()), None, 1) is None
