"""SGLang's launch command (``python -m sglang.launch_server``) read into ``SGLangSettings``; the flag loop is
``engines/cmdscan.py``'s, shared with TensorRT-LLM's reader."""

from __future__ import annotations

import functools
import json
import os

from ..._record import replace
from ...units import InputError
from ..cmdscan import PARALLEL, WHOLE, OtherCommand, Parser, flag_value, scan_flags
from .settings import SGLangSettings

_SGLANG = {  # flag -> (field, kind)
    "--model-path": ("model", "str"), "--model": ("model", "str"), "--tp": ("tp", "int"), "--tp-size": ("tp", "int"),
    "--tensor-parallel-size": ("tp", "int"), "--pp-size": ("pp", "int"),
    "--pipeline-parallel-size": ("pp", "int"), "--dp": ("dp", "int"), "--dp-size": ("dp", "int"),
    "--data-parallel-size": ("dp", "int"),
    # sglang 0.5.23 arg_groups/fields/parallel.py: ep_size (aliases --expert-parallel-size, --ep) and attn_dp_size
    # (alias --attention-data-parallel-size), the new spelling of --dp-size N --enable-dp-attention
    "--ep-size": ("ep_size", "int"), "--expert-parallel-size": ("ep_size", "int"), "--ep": ("ep_size", "int"),
    "--attn-dp-size": ("attn_dp_size", "int"), "--attention-data-parallel-size": ("attn_dp_size", "int"),
    "--mem-fraction-static": ("mem_fraction_static", "float"), "--context-length": ("context_length", "int"),
    "--kv-cache-dtype": ("kv_cache_dtype", "str"), "--page-size": ("page_size", "int"),
    "--max-running-requests": ("max_running_requests", "int"), "--chunked-prefill-size": ("chunked_prefill_size", "int"),
    "--cuda-graph-max-bs": ("cuda_graph_max_bs", "int"), "--max-total-tokens": ("max_total_tokens", "int"),
    "--quantization": ("quantization", "str"), "--swa-full-tokens-ratio": ("swa_full_tokens_ratio", "float"),
}
_SGLANG_SWITCHES = {"--disable-cuda-graph": "disable_cuda_graph", "--enable-dp-attention": "enable_dp_attention",
                    "--disable-custom-all-reduce": "disable_custom_all_reduce"}

# Ranges of the numeric flags, as SGLang takes them (python/sglang/srt/server_args.py: sizes of at least 1,
# chunked_prefill_size -1 to disable it, fractions in (0, 1)).
_INT_RANGES = {"tp": PARALLEL, "pp": PARALLEL, "dp": PARALLEL, "ep_size": PARALLEL, "attn_dp_size": PARALLEL, "page_size": (1, 1 << 20), "chunked_prefill_size": (-1, 1 << 40)}


def _value(kind: str, text: str, flag: str, field: str) -> object:
    """A flag's value, checked against SGLang's range for it (swa_full_tokens_ratio may be 1; the memory
    fraction must stay below it)."""
    value = flag_value(kind, text, flag, _INT_RANGES.get(field, WHOLE), field != "swa_full_tokens_ratio")
    if field == "chunked_prefill_size" and value == 0:
        raise InputError(f"{flag} is 0: give a size of at least 1 token, or -1 to turn chunked prefill off")
    return value


_FLAGS_FILE = os.path.join(os.path.dirname(__file__), "flags.json")


@functools.cache
def _parser() -> Parser:
    """SGLang 0.5.23's own parser (``flags.json``): ``prepare_server_args`` builds it as ``sglang serve``, argparse's
    defaults (prefixes read, unknown arguments an error) in place."""
    with open(_FLAGS_FILE, encoding="utf-8") as f:
        flags = json.load(f)["flags"]
    return Parser("SGLang", flags, "sglang serve: error: unrecognized arguments: {flag}",
                  "sglang serve: error: unrecognized arguments: {word}",
                  "sglang serve: error: ambiguous option: {flag} could match {matches}")


def sglang_fields(args: list[str]) -> tuple[str, dict[str, object], list[str]]:
    """The model, the ``SGLangSettings`` fields and the warnings of the arguments after ``sglang.launch_server``
    (what ``sglang_command`` builds its settings from, and ``check`` lays over the settings a log shows)."""
    model, fields, warnings = scan_flags("sglang", args, _SGLANG, _value, _SGLANG_SWITCHES, positional_model=False,
                                         parser=_parser())
    attn = fields.pop("attn_dp_size", 1)
    if attn != 1:  # --attn-dp-size N is --dp N --enable-dp-attention (arg_groups/parallel_hook.py)
        if fields.get("dp", 1) != 1:
            # parallel_hook.py (_handle_data_parallelism) refuses replicas combined with attention DP
            raise InputError(f"--dp-size {fields['dp']} with --attn-dp-size {attn}: SGLang does not combine "
                             "data-parallel replicas with attention data parallelism")
        fields.update(dp=attn, enable_dp_attention=True)
    return model, fields, warnings


def known_flags() -> frozenset[str]:
    """Every option string SGLang 0.5.23's parser takes (``flags.json``)."""
    return frozenset(_parser().flags)


def sglang_command(args: list[str]) -> OtherCommand:
    """The arguments after ``sglang.launch_server``."""
    model, fields, warnings = sglang_fields(args)
    return OtherCommand("sglang", model, replace(SGLangSettings(), **fields), None, tuple(warnings))
