"""Launch commands of SGLang (``python -m sglang.launch_server``) and TensorRT-LLM (``trtllm-serve``)."""

from __future__ import annotations

import shlex

from .._record import record, replace
from ..units import InputError
from .sglang import SGLangSettings
from .trtllm import TrtllmSettings

_SGLANG = {  # flag -> (field, kind)
    "--model-path": ("model", "str"), "--model": ("model", "str"), "--tp": ("tp", "int"), "--tp-size": ("tp", "int"),
    "--pp": ("pp", "int"), "--pp-size": ("pp", "int"), "--dp": ("dp", "int"), "--dp-size": ("dp", "int"),
    "--mem-fraction-static": ("mem_fraction_static", "float"), "--context-length": ("context_length", "int"),
    "--kv-cache-dtype": ("kv_cache_dtype", "str"), "--page-size": ("page_size", "int"),
    "--max-running-requests": ("max_running_requests", "int"), "--chunked-prefill-size": ("chunked_prefill_size", "int"),
    "--cuda-graph-max-bs": ("cuda_graph_max_bs", "int"), "--max-total-tokens": ("max_total_tokens", "int"),
    "--quantization": ("quantization", "str"), "--swa-full-tokens-ratio": ("swa_full_tokens_ratio", "float"),
}
_SGLANG_SWITCHES = {"--disable-cuda-graph": "disable_cuda_graph", "--enable-dp-attention": "enable_dp_attention"}
_TRTLLM = {
    "--tp_size": ("tp", "int"), "--tp-size": ("tp", "int"), "--pp_size": ("pp", "int"), "--pp-size": ("pp", "int"),
    "--kv_cache_free_gpu_memory_fraction": ("free_gpu_memory_fraction", "float"),
    "--kv-cache-free-gpu-memory-fraction": ("free_gpu_memory_fraction", "float"),
    "--max_batch_size": ("max_batch_size", "int"), "--max-batch-size": ("max_batch_size", "int"),
    "--max_num_tokens": ("max_num_tokens", "int"), "--max-num-tokens": ("max_num_tokens", "int"),
    "--max_seq_len": ("max_seq_len", "int"), "--max-seq-len": ("max_seq_len", "int"),
    "--backend": ("backend", "str"),
}


@record
class OtherCommand:
    engine: str
    model: str
    sglang: SGLangSettings | None
    trtllm: TrtllmSettings | None
    warnings: tuple[str, ...] = ()


def _value(kind: str, text: str, flag: str) -> object:
    try:
        return int(text) if kind == "int" else float(text) if kind == "float" else text
    except ValueError:
        raise InputError(f"{flag} {text!r} is not a number") from None


def parse_other_command(argv: list[str] | str) -> OtherCommand:
    """Read an SGLang or TensorRT-LLM launch command."""
    tokens = shlex.split(argv) if isinstance(argv, str) else list(argv)
    if "sglang.launch_server" in tokens:
        engine, args, table = "sglang", tokens[tokens.index("sglang.launch_server") + 1:], _SGLANG
    elif tokens and tokens[0].endswith("trtllm-serve"):
        engine, args, table = "trtllm", tokens[1:], _TRTLLM
    else:
        raise InputError("not an SGLang or TensorRT-LLM launch command")
    fields: dict[str, object] = {}
    model = ""
    warnings: list[str] = []
    i = 0
    while i < len(args):
        flag, eq, inline = args[i].partition("=")
        i += 1
        if flag in table:
            if not eq:
                if i >= len(args):
                    raise InputError(f"{flag} needs a value")
                inline, i = args[i], i + 1
            field, kind = table[flag]
            if field == "model":
                model = inline
            elif field == "backend":
                fields["backend"] = "engine" if inline in ("trt", "tensorrt") else "pytorch"
            else:
                fields[field] = _value(kind, inline, flag)
        elif engine == "sglang" and flag in _SGLANG_SWITCHES:
            fields[_SGLANG_SWITCHES[flag]] = True
        elif not flag.startswith("-") and engine == "trtllm" and not model:
            model = flag
        elif flag.startswith("-"):
            if not eq and i < len(args) and not args[i].startswith("-"):
                i += 1
            warnings.append(f"{engine} flag {flag} does not change memory in kvbudget's model: ignored")
    if not model:
        raise InputError("the command names no model")
    if engine == "sglang":
        return OtherCommand(engine, model, replace(SGLangSettings(), **fields), None, tuple(warnings))
    return OtherCommand(engine, model, None, replace(TrtllmSettings(), **fields), tuple(warnings))
