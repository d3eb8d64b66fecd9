"""The ``trtllm-serve`` command that realises a plan's settings (``plan/launch.py`` writes the shared parts: the
model path served, the Kubernetes manifests, the checkpoint note)."""

from __future__ import annotations

from ..served import served
from .settings import TrtllmSettings


def trtllm_argv(model: str, s: TrtllmSettings) -> list[str]:
    """``trtllm-serve MODEL`` (PyTorch backend) with the settings that differ from its defaults."""
    argv = ["trtllm-serve", served(model)]
    defaults = TrtllmSettings()
    flags: list[tuple[str, object]] = [
        ("--tp_size", s.tp if s.tp > 1 else None), ("--pp_size", s.pp if s.pp > 1 else None),
        ("--ep_size", s.moe_ep),  # trtllm-serve's --moe_expert_parallel_size (commands/serve.py)
        ("--max_seq_len", s.max_seq_len),
        # a trtllm-serve option since TensorRT-LLM PR #11487 (March 2026): auto | fp8 | nvfp4
        ("--kv_cache_dtype", s.kv_cache_dtype if s.kv_cache_dtype != defaults.kv_cache_dtype else None),
        ("--max_batch_size", s.max_batch_size if s.max_batch_size != defaults.max_batch_size else None),
        ("--max_num_tokens", s.max_num_tokens if s.max_num_tokens != defaults.max_num_tokens else None),
        ("--kv_cache_free_gpu_memory_fraction",
         s.free_gpu_memory_fraction if s.free_gpu_memory_fraction != defaults.free_gpu_memory_fraction else None),
    ]
    for flag, value in flags:
        if value is not None:
            argv += [flag, str(value)]
    options = yaml_options(s)
    if options:  # no trtllm-serve flag for these: the LLM API options file (--config) sets them
        argv += ["--config", "llm_api_options.yaml"]
    return argv


def yaml_options(s: TrtllmSettings) -> dict[str, object]:
    """The settings only TensorRT-LLM's LLM API options file (``--config`` / ``--extra_llm_api_options``) sets:
    moe_tensor_parallel_size and enable_attention_dp have no trtllm-serve flag (commands/serve.py)."""
    out: dict[str, object] = {}
    if s.moe_tp is not None:
        out["moe_tensor_parallel_size"] = s.moe_tp
    if s.enable_attention_dp:
        out["enable_attention_dp"] = True
    if s.cuda_graph_max_batch_size is not None:  # null turns CUDA graphs off
        out["cuda_graph_config"] = {"max_batch_size": s.cuda_graph_max_batch_size} if s.cuda_graph_max_batch_size else None
    return out


def options_note(s: TrtllmSettings) -> str:
    """What llm_api_options.yaml must hold for the command to realise the plan, or nothing."""
    options = yaml_options(s)
    if not options:
        return ""
    def show(v: object) -> str:
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k}: {x}" for k, x in v.items()) + "}"
        return "null" if v is None else str(v).lower() if isinstance(v, bool) else str(v)

    body = "".join(f"{k}: {show(v)}\n" for k, v in options.items())
    return f"llm_api_options.yaml (trtllm-serve has no flag for these): {body.strip().replace(chr(10), '; ')}"
