"""TensorRT-LLM's launch command (``trtllm-serve MODEL ...``) and its LLM API options file read into
``TrtllmSettings``; the flag loop is ``engines/cmdscan.py``'s, shared with SGLang's reader."""

from __future__ import annotations

from ..._record import replace
from ...inputs import excerpt, excerpt_path, load_options, parse_real, parse_whole, real, whole
from ...units import InputError
from ..cmdscan import PARALLEL, WHOLE, OtherCommand, Parser, flag_value, fraction, scan_flags
from .settings import TrtllmSettings

_TRTLLM = {  # flag -> (field, kind)
    "--tp_size": ("tp", "int"), "--pp_size": ("pp", "int"),
    "--kv_cache_free_gpu_memory_fraction": ("free_gpu_memory_fraction", "float"),
    "--free_gpu_memory_fraction": ("free_gpu_memory_fraction", "float"),
    "--tensor_parallel_size": ("tp", "int"), "--pipeline_parallel_size": ("pp", "int"),
    # trtllm-serve's MoE expert parallelism (tensorrt_llm/commands/serve.py: --moe_expert_parallel_size / --ep_size,
    # default None); moe_tensor_parallel_size and enable_attention_dp have no flag: the options file sets them
    "--moe_expert_parallel_size": ("moe_ep", "int"), "--ep_size": ("moe_ep", "int"),
    "--max_batch_size": ("max_batch_size", "int"), "--max_num_tokens": ("max_num_tokens", "int"),
    "--max_seq_len": ("max_seq_len", "int"), "--backend": ("backend", "raw"),
    "--kv_cache_dtype": ("kv_cache_dtype", "str"),  # kvbudget's own launch line writes it
    "--config": ("options", "raw"), "--extra_llm_api_options": ("options", "raw"),
}
# trtllm-serve's other options (tensorrt_llm/commands/serve.py, the click command ``serve``: each takes one value
# but the three switches). Click reads no prefixes and no dashed spellings of these names: --tp-size is
# 'No such option'.
_PARSER = Parser("TensorRT-LLM", {
    **{f: 1 for f in ("--tokenizer", "--custom_tokenizer", "--host", "--port", "--custom_module_dirs", "--log_level",
                      "--max_beam_width", "--context_parallel_size", "--cp_size", "--moe_cluster_parallel_size",
                      "--cluster_size", "--gpus_per_node", "--num_postprocess_workers", "--revision", "--reasoning_parser",
                      "--tool_parser", "--metadata_server_config_file", "--server_role", "--otlp_traces_endpoint",
                      "--disagg_cluster_uri", "--media_io_kwargs", "--chat_template")},
    **{f: 0 for f in ("--trust_remote_code", "--fail_fast_on_attention_window_too_large", "--enable_chunked_prefill")},
    **{f: 1 for f in ("--tp_size", "--pp_size", "--tensor_parallel_size", "--pipeline_parallel_size", "--ep_size",
                      "--moe_expert_parallel_size", "--free_gpu_memory_fraction", "--kv_cache_free_gpu_memory_fraction",
                      "--max_batch_size", "--max_num_tokens", "--max_seq_len", "--backend", "--config",
                      "--extra_llm_api_options", "--kv_cache_dtype")}},
    "trtllm-serve: Error: No such option: {flag}", "trtllm-serve: Error: Got unexpected extra argument ({word})")

# Ranges of the numeric flags, as TensorRT-LLM takes them (tensorrt_llm/llmapi/llm_args.py: counts of at
# least 1, free_gpu_memory_fraction in (0, 1)).
_INT_RANGES = {"tp": PARALLEL, "pp": PARALLEL, "moe_ep": PARALLEL, "moe_tp": PARALLEL}


def _value(kind: str, text: str, flag: str, field: str) -> object:
    """A flag's value, checked against TensorRT-LLM's range for it."""
    return flag_value(kind, text, flag, _INT_RANGES.get(field, WHOLE))


def trtllm_fields(args: list[str]) -> tuple[str, dict[str, object], list[str]]:
    """The model, the ``TrtllmSettings`` fields and the warnings of the arguments after ``trtllm-serve`` (what
    ``trtllm_command`` builds its settings from, and ``check`` lays over the settings a log shows)."""
    model, fields, warnings = scan_flags("trtllm", args, _TRTLLM, _value, {}, positional_model=True, parser=_PARSER)
    options = fields.pop("options", "")
    if "backend" in fields:
        fields["backend"] = "engine" if fields["backend"] in ("trt", "tensorrt") else "pytorch"
    if options:  # the LLM API options file overrides the flags, as trtllm-serve merges it
        # named in the messages as the user spelt it (--config is the newer name of --extra_llm_api_options)
        flag = next((a.partition("=")[0] for a in reversed(args) if a.partition("=")[0] in _OPTION_FLAGS),
                    "--extra_llm_api_options")
        more, ignored = _llm_api_options(str(options), flag)
        fields.update(more)
        warnings += [f"trtllm options {key} does not change memory in kvbudget's model: ignored" for key in ignored]
    return model, fields, warnings


def option_takes(flag: str) -> int | str:
    """How many values trtllm-serve's option ``flag`` takes (1 for one it does not have: click stops on it)."""
    return _PARSER.flags.get(flag, 1)


def trtllm_command(args: list[str]) -> OtherCommand:
    """The arguments after ``trtllm-serve``: the model, the flags, then the LLM API options file (it overrides
    the flags, as trtllm-serve merges it)."""
    model, fields, warnings = trtllm_fields(args)
    return OtherCommand("trtllm", model, None, replace(TrtllmSettings(), **fields), tuple(warnings))


_OPTIONS = {"max_batch_size": "max_batch_size", "max_num_tokens": "max_num_tokens", "max_seq_len": "max_seq_len",
            "tensor_parallel_size": "tp", "pipeline_parallel_size": "pp", "max_beam_width": "max_beam_width",
            "moe_expert_parallel_size": "moe_ep", "moe_tensor_parallel_size": "moe_tp",
            "enable_attention_dp": "enable_attention_dp"}
_KV_OPTIONS = {"free_gpu_memory_fraction": "free_gpu_memory_fraction", "max_tokens": "max_tokens",
               "tokens_per_block": "tokens_per_block", "dtype": "kv_cache_dtype"}


_OPTION_FLAGS = ("--config", "--extra_llm_api_options")


def _llm_api_options(path: str, flag: str = "--extra_llm_api_options") -> tuple[dict[str, object], list[str]]:
    """TensorRT-LLM's LLM API options file (``--config`` / ``--extra_llm_api_options`` YAML, given by ``flag``): the
    settings it sets, and the keys kvbudget does not model."""
    where = f"{flag} {excerpt_path(path)}"
    data = load_options(path, flag)
    if not isinstance(data, dict):
        raise InputError(f"{where}: must hold a mapping of LLM API options")
    out: dict[str, object] = {}
    ignored: list[str] = []

    def take(field: str, key: str, value: object) -> None:
        if value is None and field in ("max_tokens", "max_seq_len", "tokens_per_block", "moe_ep", "moe_tp"):
            return  # null: the engine's default
        if field == "enable_attention_dp":
            if not isinstance(value, bool):
                raise InputError(f"{where}: {key} {excerpt(value)} is not true or false")
            out[field] = value
        elif field == "kv_cache_dtype":
            if not isinstance(value, str):
                raise InputError(f"{where}: {key} {excerpt(value)} is not a dtype name")
            out[field] = value
        elif field == "free_gpu_memory_fraction":
            share = (parse_real(value, key, 0, 1, lo_open=True, where=where) if isinstance(value, str)
                     else real(value, key, 0, 1, where=where, lo_open=True))
            out[field] = fraction(share, f"{where}: {key}")
        else:
            hi = PARALLEL[1] if field in _INT_RANGES else 1 << 40
            out[field] = (parse_whole(value, key, 1, hi, where=where) if isinstance(value, str)
                          else whole(value, key, 1, hi, where=where))

    for key, value in data.items():
        if key == "kv_cache_config":
            if not isinstance(value, dict):
                raise InputError(f"{where}: kv_cache_config must be a mapping (dtype: ..., free_gpu_memory_fraction: ...)")
            for sub, item in value.items():
                if sub in _KV_OPTIONS:
                    take(_KV_OPTIONS[sub], f"kv_cache_config.{sub}", item)
                else:
                    ignored.append(f"kv_cache_config.{sub}")
        elif key == "cuda_graph_config":
            out["cuda_graph_max_batch_size"] = _cuda_graph_batch(value, where, ignored)
        elif key in _OPTIONS:
            take(_OPTIONS[key], str(key), value)
        else:
            ignored.append(str(key))
    return out, ignored


def _cuda_graph_batch(value: object, where: str, ignored: list[str]) -> int | None:
    """The largest batch ``cuda_graph_config`` captures a graph for: null turns CUDA graphs off (0); max_batch_size,
    else the largest of batch_sizes (llmapi/llm_args.py CudaGraphConfig); an empty mapping: the default (None)."""
    if value is None:
        return 0
    if not isinstance(value, dict):
        raise InputError(f"{where}: cuda_graph_config must be a mapping (max_batch_size: ..., batch_sizes: [...]) or null")
    ignored += [f"cuda_graph_config.{sub}" for sub in value if sub not in ("max_batch_size", "batch_sizes")]
    sizes = value.get("batch_sizes")
    if sizes:
        if not isinstance(sizes, list):
            raise InputError(f"{where}: cuda_graph_config.batch_sizes must be a list of batch sizes")
        return max(whole(b, "cuda_graph_config.batch_sizes", 1, 1 << 20, where=where) for b in sizes)
    if value.get("max_batch_size") is not None:
        return whole(value["max_batch_size"], "cuda_graph_config.max_batch_size", 0, 1 << 20, where=where)
    return None
