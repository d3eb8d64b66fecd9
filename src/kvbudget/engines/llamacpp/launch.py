"""The ``llama-server`` command that realises a plan's settings (``plan/launch.py`` writes the shared parts: the
Kubernetes manifest, the checkpoint note)."""

from __future__ import annotations

from . import placement
from .command import FA_VALUES_FROM
from .settings import LlamaCppSettings


def llamacpp_argv(model: str, s: LlamaCppSettings) -> list[str]:
    """``llama-server -m MODEL`` with the context settings that differ from its defaults."""
    d = LlamaCppSettings()
    argv = ["llama-server", "-m", s.model_file or model]
    flags: list[tuple[str, object]] = [
        ("-c", s.n_ctx or None), ("-np", s.n_parallel), ("-ctk", s.type_k if s.type_k != d.type_k else None),
        ("-ctv", s.type_v if s.type_v != d.type_v else None),
        ("-ngl", s.n_gpu_layers if s.n_gpu_layers >= 0 else None),
        ("-fa", s.flash_attn if s.flash_attn != d.flash_attn and s.build >= FA_VALUES_FROM else None),
        ("-b", s.n_batch if s.n_batch != d.n_batch else None), ("-ub", s.n_ubatch if s.n_ubatch != d.n_ubatch else None),
    ]
    for flag, value in flags:
        if value is not None:
            argv += [flag, str(value)]
    if s.tensor_split:
        argv += ["-ts", ",".join(f"{x:g}" for x in s.tensor_split)]
    elif s.devices > 1:
        argv += ["-ts", ",".join(["1"] * s.devices)]
    if s.flash_attn == "on" and s.build < FA_VALUES_FROM:  # a bare switch before b6325 (command.py)
        argv.append("-fa")
    if s.swa_full:
        argv.append("--swa-full")
    if s.kv_unified is not None:
        argv.append("--kv-unified" if s.kv_unified else "--no-kv-unified")
    return argv + _placement(s.overrides)


def _placement(overrides: tuple[placement.Override, ...]) -> list[str]:
    """The flags that place the weight tensors: ``--cpu-moe`` or ``--n-cpu-moe N`` when the overrides are exactly
    theirs, else ``-ot PATTERN=BUFFER,...`` (llama-server reads the same rules back from either)."""
    if not overrides:
        return []
    if overrides == (placement.cpu_moe(),):
        return ["--cpu-moe"]
    if overrides == placement.n_cpu_moe(len(overrides)):
        return ["--n-cpu-moe", str(len(overrides))]
    return ["-ot", ",".join(f"{p}={b}" for p, b in overrides)]
