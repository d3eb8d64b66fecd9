"""``kvbudget calibrate`` as a table and as JSON."""

from __future__ import annotations

import os

from ..units import fmt_bytes

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    from ..questions.calibrate import Calibration


def _signed(n: int, units: str) -> str:
    return ("-" if n < 0 else "+") + fmt_bytes(abs(n), units)


def calibrate_text(c: Calibration, units: str, out: str | None) -> str:
    from .text import table

    figure = c.points[0].figure if c.points else "available KV cache memory"
    out_lines = [f"{figure[:1].upper()}{figure[1:]}, logged vs kvbudget's model (the difference is memory the site "
                 "spends outside the model):",
                 table(["log", "GPU", "release", "GPUs", "logged", "kvbudget", "outside the model"],
                       [[os.path.basename(p.log), p.gpu, p.release, str(p.gpus), fmt_bytes(p.logged, units), fmt_bytes(p.predicted, units),
                         _signed(p.residual, units)] for p in c.points],
                       right=[False, False, False, True, True, True, True]),
                 "", "Profile (median per GPU, release line and GPUs; spread: the farthest log from it):",
                 table(["GPU", "release", "GPUs", "logs", "outside the model", "spread"],
                       [[t.gpu, t.release, str(t.gpus), str(t.logs), _signed(t.bytes, units), fmt_bytes(t.spread, units)]
                        for t in c.terms], right=[False, False, True, True, True, True])]
    out_lines += [f"skipped {log}: {why}" for log, why in c.skipped]
    lines = sorted({t.release for t in c.terms})
    vllm = not c.points or c.points[0].engine == "vllm"
    if lines == ["current"] and c.points and c.points[0].engine == "llama.cpp":  # one line: every build's free memory
        out_lines.append("a term applies to runs of its GPU and GPU count, whatever the llama.cpp build")
    else:
        out_lines.append(f"a term applies to runs of its GPU and release line ({', '.join(lines)}): give fit the same "
                         f"{c.release_flag}" + (" (vLLM reads a pasted command's release itself)" if vllm else ""))
    out_lines.append(f"wrote {out}: use it with --profile {out} on fit, explain and levers" if out
                     else "give --out FILE to save the profile, then --profile FILE on fit, explain and levers")
    return "\n".join(out_lines)


def calibrate_doc(c: Calibration, out: str | None) -> dict[str, Any]:
    from ..questions.calibrate import profile_doc

    return {"profile": profile_doc(c), "written_to": out,
            "logs": [{"log": p.log, "engine": p.engine, "gpu": p.gpu, "release": p.release, "gpus": p.gpus,
                      "logged_bytes": p.logged, "predicted_bytes": p.predicted, "residual_bytes": p.residual}
                     for p in c.points],
            "skipped": [{"log": log, "reason": why} for log, why in c.skipped]}
