"""The ``python -m sglang.launch_server`` command that realises a plan's settings (``plan/launch.py`` writes the
shared parts: the model path served, the Kubernetes manifests, the checkpoint note)."""

from __future__ import annotations

from ..served import served

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from .settings import SGLangSettings


def sglang_argv(model: str, s: SGLangSettings) -> list[str]:
    """``python -m sglang.launch_server`` with every memory-relevant setting that differs from SGLang's default."""
    argv = ["python", "-m", "sglang.launch_server", "--model-path", served(model)]
    flags: list[tuple[str, object]] = [
        ("--tp-size", s.tp if s.tp > 1 else None), ("--pp-size", s.pp if s.pp > 1 else None),
        # --dp-size N (with --enable-dp-attention below: attention DP, which 0.5.23 reads as --attn-dp-size N
        # with a deprecation warning; the spelling every release line takes)
        ("--dp-size", s.dp if s.dp > 1 else None), ("--ep-size", s.ep_size if s.ep_size > 1 else None),
        ("--context-length", s.context_length), ("--mem-fraction-static", s.mem_fraction_static),
        ("--quantization", s.quantization), ("--kv-cache-dtype", None if s.kv_cache_dtype == "auto" else s.kv_cache_dtype),
        ("--max-running-requests", s.max_running_requests), ("--page-size", s.page_size),
    ]
    for flag, value in flags:
        if value is not None:
            argv += [flag, str(value)]
    if s.enable_dp_attention and s.dp > 1:
        argv.append("--enable-dp-attention")
    if s.disable_custom_all_reduce:
        argv.append("--disable-custom-all-reduce")
    return argv
