"""SGLang's default mem_fraction_static per release line (srt/server_args.py of each wheel on PyPI): by TP size up to
0.4.7, by the GPU's memory tier from 0.4.8 to 0.5.2 (read in the 0.4.8, 0.4.9.post2, 0.4.10.post2 and 0.5.2 wheels),
from the chunked-prefill and CUDA-graph reserve from 0.5.3 (srt/arg_groups/memory_hook.py of 0.5.23)."""

from __future__ import annotations

import pytest

from kvbudget.engines.sglang.policy import _tiered_fraction
from kvbudget.engines.sglang.settings import SGLangSettings


@pytest.mark.parametrize(("mib", "tp", "dp_attention", "want"), [
    (24_564, 1, False, round((24_564 - 2.9 * 1024) / 24_564, 3)),  # a 24 GB card: 0.879, not 0.4's 0.88
    (81_559, 8, False, round((81_559 - 13.5 * 1024) / 81_559, 3)),  # H100 x 8: 9.5 + 8 / 2 GiB
    (143_771, 8, True, round((143_771 - 20 * 1024) / 143_771, 3)),  # H200 x 8 under DP attention: + 4 GiB
    (183_359, 8, False, round((183_359 - 32 * 1024) / 183_359, 3)),  # B200: 32 GiB whatever the TP
    (None, 4, False, 0.88),
])
def test_the_0_4_8_line_reserves_by_memory_tier(mib: int | None, tp: int, dp_attention: bool, want: float) -> None:
    s = SGLangSettings(version="0.4.8", tp=tp, dp=tp if dp_attention else 1, enable_dp_attention=dp_attention)
    assert _tiered_fraction(mib, s) == want
    assert want != 0.88 or mib is None


def test_each_line_plans_with_its_own_fraction() -> None:
    from kvbudget.engines.sglang.policy import plan
    from kvbudget.hardware import find_gpu
    from kvbudget.model.resolve import load_model

    spec, gpu = load_model("meta-llama/Llama-3.1-8B-Instruct"), find_gpu("H100-SXM-80GB")
    fractions = {line: plan(spec, gpu, SGLangSettings(version=line, tp=1, context_length=8192)).mem_fraction_static
                 for line in ("0.4", "0.4.8", "current")}
    mib = gpu.memory_bytes / 2**20
    assert fractions["0.4"] == 0.88  # TP 1
    assert fractions["0.4.8"] == pytest.approx((mib - 10 * 1024) / mib, abs=0.001)  # 9.5 + 1 / 2 GiB
    assert fractions["current"] != fractions["0.4.8"]


def test_sglang_reads_pp_as_its_parser_does(capsys: pytest.CaptureFixture[str]) -> None:
    """'--pp' is a prefix of three options of SGLang 0.5.23's parser (--pp-size, --pp-max-micro-batch-size,
    --pp-async-batch-depth): argparse stops on it as ambiguous, and so does kvbudget (it read it as --pp-size)."""
    from kvbudget.cli import main

    code = main(["explain", "--gpu", "H100", "--", "python", "-m", "sglang.launch_server", "--model-path",
                 "meta-llama/Llama-3.1-8B-Instruct", "--pp", "2"])
    assert code == 2 and "ambiguous option: --pp" in capsys.readouterr().err
    assert main(["explain", "--gpu", "H100", "--", "python", "-m", "sglang.launch_server", "--model-path",
                 "meta-llama/Llama-3.1-8B-Instruct", "--pp-size", "2"]) == 0
