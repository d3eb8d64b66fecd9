"""Launch commands of SGLang (``python -m sglang.launch_server``) and TensorRT-LLM (``trtllm-serve``)."""

from __future__ import annotations

from .._record import record, replace
from ..inputs import excerpt, excerpt_path, load_options, parse_real, parse_whole, real, split_command, whole
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
    "--kv_cache_dtype": ("kv_cache_dtype", "str"), "--kv-cache-dtype": ("kv_cache_dtype", "str"),
    "--config": ("options", "str"), "--extra_llm_api_options": ("options", "str"),
    "--extra-llm-api-options": ("options", "str"),
}


@record
class OtherCommand:
    engine: str
    model: str
    sglang: SGLangSettings | None
    trtllm: TrtllmSettings | None
    warnings: tuple[str, ...] = ()


# Ranges of the numeric flags, as the engines take them (SGLang python/sglang/srt/server_args.py: sizes
# of at least 1, chunked_prefill_size -1 to disable it, fractions in (0, 1); TensorRT-LLM
# tensorrt_llm/llmapi/llm_args.py: counts of at least 1, free_gpu_memory_fraction in (0, 1)).
_INT_RANGES = {"tp": (1, 1 << 16), "pp": (1, 1 << 16), "dp": (1, 1 << 16), "page_size": (1, 1 << 20),
               "chunked_prefill_size": (-1, 1 << 40)}
_FRACTIONS = ("mem_fraction_static", "free_gpu_memory_fraction", "swa_full_tokens_ratio")


def _value(kind: str, text: str, flag: str, field: str = "") -> object:
    """A flag's value, checked against the engine's range for it."""
    if kind == "int":
        lo, hi = _INT_RANGES.get(field, (1, 1 << 40))
        n = parse_whole(text, flag, lo, hi)
        if field == "chunked_prefill_size" and n == 0:
            raise InputError(f"{flag} is 0: give a size of at least 1 token, or -1 to turn chunked prefill off")
        return n
    if kind == "float":
        return _fraction(parse_real(text, flag, 0, 1, lo_open=True), flag, field != "swa_full_tokens_ratio")
    t = text.strip()
    if not t or len(t) > 4096:
        raise InputError(f"{flag} {excerpt(text)}: give a value")
    return t


def _fraction(value: float, label: str, below_one: bool = True) -> float:
    """A fraction of the GPU's memory in (0, 1): 1 leaves nothing for activations."""
    if below_one and value >= 1:
        raise InputError(f"{label} is {value:g}: it must be below 1 (a fraction of the GPU's memory)")
    return value


def parse_other_command(argv: list[str] | str) -> OtherCommand:
    """Read an SGLang or TensorRT-LLM launch command."""
    tokens = split_command(argv) if isinstance(argv, str) else list(argv)
    if "sglang.launch_server" in tokens:
        engine, args, table = "sglang", tokens[tokens.index("sglang.launch_server") + 1:], _SGLANG
    elif tokens and tokens[0].endswith("trtllm-serve"):
        engine, args, table = "trtllm", tokens[1:], _TRTLLM
    else:
        raise InputError("not an SGLang or TensorRT-LLM launch command")
    fields: dict[str, object] = {}
    model = options = ""
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
            elif field == "options":
                options = inline
            elif field == "backend":
                fields["backend"] = "engine" if inline in ("trt", "tensorrt") else "pytorch"
            else:
                fields[field] = _value(kind, inline, flag, field)
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
    if options:  # the LLM API options file overrides the flags, as trtllm-serve merges it
        more, ignored = _llm_api_options(options)
        fields.update(more)
        warnings += [f"trtllm options {key} does not change memory in kvbudget's model: ignored" for key in ignored]
    return OtherCommand(engine, model, None, replace(TrtllmSettings(), **fields), tuple(warnings))


_OPTIONS = {"max_batch_size": "max_batch_size", "max_num_tokens": "max_num_tokens", "max_seq_len": "max_seq_len",
            "tensor_parallel_size": "tp", "pipeline_parallel_size": "pp", "max_beam_width": "max_beam_width"}
_KV_OPTIONS = {"free_gpu_memory_fraction": "free_gpu_memory_fraction", "max_tokens": "max_tokens",
               "tokens_per_block": "tokens_per_block", "dtype": "kv_cache_dtype"}


def _llm_api_options(path: str) -> tuple[dict[str, object], list[str]]:
    """TensorRT-LLM's LLM API options file (``--config`` / ``--extra_llm_api_options`` YAML): the settings it
    sets, and the keys kvbudget does not model."""
    where = f"--extra_llm_api_options {excerpt_path(path)}"
    data = load_options(path, "--extra_llm_api_options")
    if not isinstance(data, dict):
        raise InputError(f"{where}: must hold a mapping of LLM API options")
    out: dict[str, object] = {}
    ignored: list[str] = []

    def take(field: str, key: str, value: object) -> None:
        if value is None and field in ("max_tokens", "max_seq_len", "tokens_per_block"):
            return  # null: the engine's default
        if field == "kv_cache_dtype":
            if not isinstance(value, str):
                raise InputError(f"{where}: {key} {excerpt(value)} is not a dtype name")
            out[field] = value
        elif field == "free_gpu_memory_fraction":
            fraction = (parse_real(value, key, 0, 1, lo_open=True, where=where) if isinstance(value, str)
                        else real(value, key, 0, 1, where=where, lo_open=True))
            out[field] = _fraction(fraction, f"{where}: {key}")
        else:
            out[field] = (parse_whole(value, key, 1, 1 << 40, where=where) if isinstance(value, str)
                          else whole(value, key, 1, 1 << 40, where=where))

    for key, value in data.items():
        if key == "kv_cache_config":
            if not isinstance(value, dict):
                raise InputError(f"{where}: kv_cache_config must be a mapping (dtype: ..., free_gpu_memory_fraction: ...)")
            for sub, item in value.items():
                if sub in _KV_OPTIONS:
                    take(_KV_OPTIONS[sub], f"kv_cache_config.{sub}", item)
                else:
                    ignored.append(f"kv_cache_config.{sub}")
        elif key in _OPTIONS:
            take(_OPTIONS[key], str(key), value)
        else:
            ignored.append(str(key))
    return out, ignored
