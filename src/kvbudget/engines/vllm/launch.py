"""The ``vllm serve`` command that realises a plan's settings (``plan/launch.py`` writes the shared parts: the
model path served, the Kubernetes manifests, the checkpoint note)."""

from __future__ import annotations

import json

from ...units import InputError
from ..served import served

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from .settings import VllmSettings

# kvbudget's weight formats as vLLM's --quantization methods (vLLM 0.33.0,
# model_executor/layers/quantization/__init__.py QUANTIZATION_METHODS); 16-bit formats are --dtype. AWQ and GPTQ
# as awq_marlin / gptq_marlin: vLLM accepts them for such checkpoints in every release from 0.5.3, where a bare
# awq or gptq would force the plain kernel before 0.24 / 0.22 (quant.py).
VLLM_QUANTIZATION = {"fp8": "fp8", "nf4": "bitsandbytes", "awq": "awq_marlin", "gptq": "gptq_marlin", "mxfp4": "mxfp4",
                     "nvfp4": "modelopt_fp4", "int8": "compressed-tensors"}


def vllm_quantization(quantization: str | None) -> str | None:
    """The --quantization value that loads ``quantization`` (a kvbudget weight format or vLLM's own word)."""
    from ...model.weights import parse_weight_format
    from .quant import VLLM_METHODS, format_name

    name = format_name(quantization)
    if name in (None, "awq", "gptq"):
        return VLLM_QUANTIZATION.get(name or "")
    word = (quantization or "").strip().lower()
    if word in VLLM_METHODS:
        return word  # vLLM's own method name, passed through as given
    try:
        name = parse_weight_format(word).name
    except InputError:
        return quantization
    return VLLM_QUANTIZATION.get(name)


def vllm_argv(model: str, s: VllmSettings) -> list[str]:
    """``vllm serve MODEL`` with every memory-relevant setting that differs from vLLM's default."""
    argv = ["vllm", "serve", served(model)]
    flags: list[tuple[str, object]] = [
        ("--tensor-parallel-size", s.tensor_parallel_size if s.tensor_parallel_size > 1 else None),
        ("--pipeline-parallel-size", s.pipeline_parallel_size if s.pipeline_parallel_size > 1 else None),
        ("--max-model-len", s.max_model_len),
        ("--gpu-memory-utilization", s.gpu_memory_utilization),
        # the weight format the plan was made with, always: fp8 (and bitsandbytes) vLLM applies to a 16-bit
        # checkpoint when loading; AWQ, GPTQ, NVFP4 ... need a checkpoint in that format (checkpoint_note)
        ("--quantization", vllm_quantization(s.quantization)),
        ("--kv-cache-dtype", None if s.kv_cache_dtype == "auto" else s.kv_cache_dtype),
        ("--dtype", None if s.dtype == "auto" else s.dtype),
        ("--max-num-seqs", s.max_num_seqs),
        ("--max-num-batched-tokens", s.max_num_batched_tokens),
        ("--block-size", s.block_size),
    ]
    for flag, value in flags:
        if value is not None:
            argv += [flag, str(value)]
    if s.speculative_method and s.num_speculative_tokens:  # the form parse_speculative_config reads back
        draft = {"model": s.speculative_draft.name} if s.speculative_draft is not None else {}
        argv += ["--speculative-config", json.dumps({"method": s.speculative_method, **draft,
                                                     "num_speculative_tokens": s.num_speculative_tokens})]
    if s.enable_lora:  # the form command.py reads back (lora.py models the slots)
        argv += ["--enable-lora", "--max-loras", str(s.max_loras), "--max-lora-rank", str(s.max_lora_rank)]
        if s.max_cpu_loras is not None:
            argv += ["--max-cpu-loras", str(s.max_cpu_loras)]
        if s.lora_dtype != "auto":
            argv += ["--lora-dtype", s.lora_dtype]
        if s.fully_sharded_loras:
            argv.append("--fully-sharded-loras")
    if s.enforce_eager:
        argv.append("--enforce-eager")
    if s.data_parallel_size > 1:
        # one command starts every DP engine: an MoE model's experts are shared over all of them (dp x tp GPUs, with
        # or without expert parallelism), as the plan sizes them; a dense model's engines each hold the whole model
        argv += ["--data-parallel-size", str(s.data_parallel_size)]
    if s.enable_expert_parallel:
        argv.append("--enable-expert-parallel")
    return argv

