"""Read a vLLM start-up log of any release line: the settings it shows and the figures it reports.

Formats (vLLM 0.33.0 ``vllm/v1/worker/gpu_worker.py`` and ``vllm/v1/core/kv_cache_utils.py``; older
lines from the published logs in tests/data/vllm_logs/): V0 ``# GPU blocks: N`` (later ``# cuda blocks``); 0.6-0.8 ``Memory
profiling takes ... model weights take W GiB; non_torch_memory takes N GiB; PyTorch activation peak
memory takes A GiB; the rest of the memory reserved for KV Cache is K GiB`` and
``Memory profiling results: ... kv_cache_size=K GiB``; V1 ``Available KV cache memory: X GiB`` with
``GPU KV cache size: N tokens`` and ``Maximum concurrency for L tokens per request: Cx`` on two lines
or (current) one; the ``To serve at least one request ... estimated maximum model length is N``
and ``No available memory for the cache blocks`` failures.
"""

from __future__ import annotations

import re

from .._record import record
from ..units import InputError

_NUM = r"(-?[0-9][0-9,]*(?:\.[0-9]+)?)"


@record
class VllmLog:
    """What a log shows. ``None``: the log does not say."""

    version: str | None = None
    model: str | None = None
    gpu_name: str | None = None
    total_gib: float | None = None
    settings: tuple[tuple[str, str], ...] = ()  # engine arguments as the log prints them
    command: str | None = None  # the launch command, when the log shows it
    model_loading_gib: float | None = None
    available_kv_gib: float | None = None
    kv_cache_tokens: int | None = None
    num_gpu_blocks: int | None = None
    max_concurrency: float | None = None
    concurrency_len: int | None = None
    estimated_max_model_len: int | None = None
    needed_kv_gib: float | None = None
    error: str | None = None
    non_torch_gib: float | None = None
    activation_gib: float | None = None
    cuda_graph_gib: float | None = None

    @property
    def started(self) -> bool:
        """Whether the logged run got past KV-cache allocation."""
        if self.error is not None:
            return False
        return not ((self.available_kv_gib is not None and self.available_kv_gib <= 0) or self.num_gpu_blocks == 0)

    @property
    def has_figures(self) -> bool:
        return any(x is not None for x in (self.available_kv_gib, self.kv_cache_tokens, self.num_gpu_blocks,
                                           self.max_concurrency, self.error))


def _n(text: str) -> float:
    return float(text.replace(",", ""))


def _first(pattern: str, text: str, flags: int = 0) -> re.Match[str] | None:
    return re.search(pattern, text, flags)


def _last(pattern: str, text: str) -> re.Match[str] | None:
    matches = list(re.finditer(pattern, text))
    return matches[-1] if matches else None


_ARG_KEYS = (
    "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "max_model_len", "max_seq_len",
    "gpu_memory_utilization", "kv_cache_dtype", "enforce_eager", "quantization", "block_size", "max_num_seqs",
    "max_num_batched_tokens", "dtype", "enable_prefix_caching", "enable_chunked_prefill", "num_gpu_blocks_override",
    "kv_cache_memory_bytes", "cpu_offload_gb",
)


def _settings(text: str) -> list[tuple[str, str]]:
    out: dict[str, str] = {}
    for key in _ARG_KEYS:
        # 'key': value (non-default args dicts) or key=value (engine config lines)
        m = _last(rf"['\"]?{key}['\"]?\s*[:=]\s*['\"]?([A-Za-z0-9_.\-]+)", text)
        if m and m.group(1) != "None":
            out["max_model_len" if key == "max_seq_len" else key] = m.group(1)
    return list(out.items())


def parse_vllm_log(text: str) -> VllmLog:
    """Read a vLLM start-up log (or an excerpt of one)."""
    if "\x00" in text:
        raise InputError("the log is binary, not text")
    # Rejoin records a terminal or a paste wrapped: a line break followed by a continuation.
    text = re.sub(r"\n(?=[a-z0-9.,;:%)\]x ])", "", text.replace("\r", ""))
    fields: dict[str, object] = {}
    m = (_first(r"vLLM API server version ([0-9][\w.+\-]*)", text) or _first(r"LLM engine \(v([0-9][\w.+\-]*)\)", text)
         or _first(r"vLLM version:? v?([0-9][\w.+\-]*)", text) or _first(r"\bversion ([0-9]+\.[0-9]+\.[0-9][\w.+\-]*)", text))
    if m:
        fields["version"] = m.group(1)
    m = (_first(r"model=['\"]([^'\"]+)['\"]", text) or _first(r"['\"]model['\"]\s*:\s*['\"]([^'\"]+)['\"]", text)
         or _first(r"Starting to load model ([^\s.]+(?:\.[^\s.]+)*)\.{0,3}", text))
    if m:
        fields["model"] = m.group(1)
    m = _first(r"(NVIDIA [A-Z0-9][\w\- ]*?(?:GB|HBM3e?|PCIe|SXM\d?|Ti|Laptop GPU)?)(?=[,'\")\n]| with| \()", text)
    if m:
        fields["gpu_name"] = m.group(1).strip()
    m = (_first(r"total_gpu_memory\s*\(?=?\s*" + _NUM + r"\s*GiB", text)
         or _first(r"Free memory on device[^(]*\(" + _NUM + r"/" + _NUM + r" GiB\)", text))
    if m:
        fields["total_gib"] = _n(m.group(m.lastindex or 1))
    m = _last(r"(?:Model loading took|Loading model weights took|model weights take)\s+" + _NUM + r" ?G", text)
    if m:
        fields["model_loading_gib"] = _n(m.group(1))
    m = (_last(r"Available KV cache memory: " + _NUM + r" GiB", text)
         or _last(r"reserved for KV Cache is " + _NUM + r" ?GiB", text) or _last(r"kv_cache_size=" + _NUM + r" ?GiB", text)
         or _last(r"available_kv_cache_memory\s+" + _NUM + r" ?GiB", text)
         or _last(r"larger than the available KV cache memory \(" + _NUM + r" GiB\)", text))
    if m:
        fields["available_kv_gib"] = _n(m.group(1))
    m = _last(r"KV cache size: " + _NUM + r" tokens", text)
    if m:
        fields["kv_cache_tokens"] = int(_n(m.group(1)))
    m = _last(r"#? ?(?:GPU|gpu|cuda|CUDA) blocks: " + _NUM, text)
    if m:
        fields["num_gpu_blocks"] = int(_n(m.group(1)))
    m = _last(r"Maximum concurrency for " + _NUM + r" tokens per request: " + _NUM + r" ?x", text)
    if m:
        fields["concurrency_len"] = int(_n(m.group(1)))
        fields["max_concurrency"] = _n(m.group(2))
    m = _last(r"estimated maximum model length is " + _NUM, text)
    if m:
        fields["estimated_max_model_len"] = int(_n(m.group(1)))
    m = _last(r"\(" + _NUM + r" ?GiB KV cache is needed", text)
    if m:
        fields["needed_kv_gib"] = _n(m.group(1))
    m = (_last(r"(To serve at least one request with the model\S* max seq len[^\n]*)", text)
         or _last(r"(No available memory for the cache blocks[^\n]*)", text)
         or _last(r"(The model's max seq len \([0-9]+\) is larger than the maximum number of tokens[^\n]*)", text)
         or _last(r"(Cannot auto-fit max_model_len[^\n]*)", text)
         or _last(r"(EngineCore failed to start[^\n]*)", text)
         or _last(r"((?:torch\.)?(?:cuda\.)?OutOfMemoryError[^\n]*)", text))
    if m:
        fields["error"] = m.group(1).strip()[:400]
    m = _last(r"maximum number of tokens that can be stored in KV cache \(" + _NUM + r"\)", text)
    if m and "kv_cache_tokens" not in fields:
        fields["kv_cache_tokens"] = int(_n(m.group(1)))
    m = _last(r"non_torch_memory(?: takes |=|\s+)" + _NUM, text) or _last(_NUM + r" GiB for non-torch memory", text)
    if m:
        fields["non_torch_gib"] = _n(m.group(1))
    m = _last(r"activation peak memory(?: takes|\s)\s*" + _NUM, text) or _last(_NUM + r" GiB for peak activation", text)
    if m:
        fields["activation_gib"] = _n(m.group(1))
    m = _last(r"Graph capturing finished in [0-9.]+ secs?, took " + _NUM + r" GiB", text) or _last(
        _NUM + r" GiB for CUDAGraph memory", text)
    if m:
        fields["cuda_graph_gib"] = _n(m.group(1))
    settings = _settings(text)
    m = _first(r"^[#$>\s]*((?:[A-Z_]+=\S+ )*(?:vllm serve|python3? -m vllm\.entrypoints)[^\n]*)", text, re.M)
    if m:
        fields["command"] = m.group(1).strip()
    log = VllmLog(settings=tuple(settings), **fields)  # type: ignore[arg-type]
    if not log.has_figures and log.model_loading_gib is None:
        raise InputError("no vLLM start-up figures found in the log (looked for 'Available KV cache memory', "
                         "'GPU KV cache size', '# GPU blocks', 'Maximum concurrency' and vLLM's start-up errors)")
    return log
