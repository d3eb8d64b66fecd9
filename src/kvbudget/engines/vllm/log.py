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

import itertools
import re

from ..._record import record
from ...units import InputError
from ..logscan import NUM, LogText, count, figure, json_records, open_log, unwrap_terminal


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
    # a stop after the KV cache was sized, for a reason that is not memory (its cause as the log gives it)
    other_failure: str | None = None
    non_torch_gib: float | None = None
    activation_gib: float | None = None
    # 0.27 on: "Actual usage is X GiB for consumed memory (weights + non-torch), Y GiB for peak activation, ...", whose
    # peak activation is measured otherwise than before (utils/mem_utils.py memory_profiling: the transient peak above
    # what stays allocated, plus the CUDA-graph estimate): X, and a sign that Y is of that form
    consumed_gib: float | None = None
    cuda_graph_gib: float | None = None
    # >= 0.21, vLLM's CUDA-graph estimate (gpu_worker.py determine_available_memory): the utilization as given and its
    # equivalent without the estimate ("The current --gpu-memory-utilization=X is equivalent to
    # --gpu-memory-utilization=Y without CUDA graph memory profiling", four decimals), and the estimate in GiB as the
    # V1 runner ("Estimated CUDA graph memory: E GiB total") or the capture's check ("..., E GiB (estimated)") prints it
    graph_util: tuple[float, float] | None = None
    graph_estimate_gib: float | None = None
    # "Profiling CUDA graph memory: PIECEWISE=51 (largest=512), FULL=35 (largest=256)": (mode, graphs, largest) each
    graph_modes: tuple[tuple[str, int, int], ...] = ()
    # how many ranks printed "Available KV cache memory" (a Ray "[repeated Nx across cluster]" line counts N)
    # and the workers' labels as printed ("rank=0", "TP1", "pid=345, ip=10.0.0.1"); likewise "GPU KV cache size"
    available_printed: int = 0
    available_ranks: tuple[str, ...] = ()
    # the workers' layout their prefixes show, (TP, PP): "(Worker_PP1_TP3 pid=..)" is TP 4 x PP 2, "(VllmWorker
    # rank=3 pid=..)" 4 ranks (TP x PP, read as TP); None where no worker prefix carries a rank
    worker_layout: tuple[int, int, bool] | None = None
    kv_size_printed: int = 0
    starts: int = 1  # the start-ups the log holds (the API server's version line, or the engine's start after a run's
    # figures: engine_starts); the figures are the last one's
    engine_starts: bool = False
    # what the log's own lines say of the device's compute capability: (the words, lowest, highest), both inclusive
    # (``capability_said``); None where no line says
    capability: tuple[str, float, float] | None = None

    def graph_estimate(self, total_gib: float | None) -> float | None:
        """vLLM's CUDA-graph estimate in GiB: (X - Y) x the GPU's total from the equivalent-utilization line (to
        +-0.00005 of the total), else the GiB line; None when the log shows neither (or no total is known)."""
        total = self.total_gib or total_gib
        if self.graph_util is not None and total:
            return round((self.graph_util[0] - self.graph_util[1]) * total, 4)
        return self.graph_estimate_gib

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


_ARG_KEYS = (
    "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "max_model_len", "max_seq_len",
    "gpu_memory_utilization", "kv_cache_dtype", "enforce_eager", "quantization", "block_size", "max_num_seqs",
    "max_num_batched_tokens", "dtype", "enable_prefix_caching", "enable_chunked_prefill", "num_gpu_blocks_override",
    "kv_cache_memory_bytes", "cpu_offload_gb", "skip_mm_profiling", "mm_encoder_tp_mode", "language_model_only",
)
# Engine arguments whose value is a mapping ('limit_mm_per_prompt': {'image': 0, 'video': {'count': 1}}), read whole
# (one level of nesting) from the non-default args line.
_DICT_KEYS = ("limit_mm_per_prompt", "mm_processor_kwargs", "rope_scaling", "hf_overrides", "speculative_config")
_DICT_SETTING = {key: re.compile("['\"]" + key + r"['\"]:[ \t]{0,8}(\{(?:[^{}\n]|\{[^{}\n]{0,400}\}){0,400}\})")
                 for key in _DICT_KEYS}
# 'key': value (non-default args dicts) or key=value (engine config lines), each key searched for as a
# literal (a key is whole: not the tail of mamba_block_size).
# V0's memory profile says "total_gpu_memory (8.00GiB) x gpu_memory_utilization (0.70)" (worker/worker.py, 0.6-0.7)
_SETTING = {key: re.compile(key + r"['\"]?[ \t]{0,8}(?:[:=]|\((?=[0-9.]{1,16}\)))[ \t]{0,8}['\"]?([A-Za-z0-9_.\-]{1,64})")
            for key in _ARG_KEYS}
_GPU_BLOCKS = ("GPU blocks: ", "gpu blocks: ", "cuda blocks: ", "CUDA blocks: ")  # V0's "# GPU blocks: N, # CPU blocks: M"
_GIB = 1e6  # a figure in GiB beyond this (a million GiB) is not a GPU's
_RUN_START = "vLLM API server version "  # printed once per start of the API server (entrypoints/openai/api_server.py)


def _settings(log: LogText) -> list[tuple[str, str]]:
    """The last value the log shows for each engine argument (None: the default, skipped)."""
    text = log.text
    out: dict[str, str] = {}
    for key, rx in _SETTING.items():
        fallback = found = None
        for start, stop, _ in log.lines(key, reverse=True):
            if key == "num_gpu_blocks_override" and "Overriding num_gpu_blocks" in text[start:stop]:
                # vLLM 0.19's CUDA-graph memory profiling prints "Overriding num_gpu_blocks=0 with
                # num_gpu_blocks_override=512" for its own dummy cache: a user's override shows in the arguments
                continue
            found = None
            if "device_name=" in text[start:stop] or "Prefetching checkpoint" in text[start:stop]:
                # a fused-MoE tuning file's name (E=128,N=768,device_name=...,dtype=fp8_w8a8.json) or the weight
                # prefetcher's read size (block_size=16777216 bytes): not engine arguments
                continue
            for m in rx.finditer(text, start, stop):
                before = text[m.start() - 1] if m.start() else " "
                if before.isalnum() or before == "_":
                    continue
                if key == "kv_cache_dtype" and m.group(1).startswith("torch."):
                    # a backend's report of the tensor dtype it resolved ("FlashInfer resolved query dtypes: ...,
                    # kv_cache_dtype=torch.float8_e4m3fn", 0.29): not the engine argument, which another line holds
                    continue
                if text[m.start(1) - 1] == "(":
                    # the profile's rounded "(0.70)": the arguments' own value wins where the log has it
                    fallback = fallback or m
                    continue
                found = m
            if found is not None:
                break
        else:
            found = fallback
        if found is not None:
            # vLLM 0.10+ ends a sentence on a value: "Chunked prefill is enabled with max_num_batched_tokens=2048."
            value = found.group(1).rstrip(".")
            if value != "None":
                out["max_model_len" if key == "max_seq_len" else key] = value
    for key, rx in _DICT_SETTING.items():
        for start, stop, _ in log.lines(key, reverse=True):
            found = rx.search(text, start, stop)
            if found is not None:
                out[key] = found.group(1)
                break
    if "speculative_config" not in out:
        spec = log.last("speculative_config=SpeculativeConfig(", _SPEC_CONFIG)
        if spec:  # the engine config line's form, where no non-default args line shows the mapping
            out["speculative_config"] = "{" + ", ".join(
                f"'{k}': {v if v.isdigit() else repr(v.strip(chr(39) + chr(34)))}"
                for k, v in (("method", spec.group(1)), ("model", spec.group(2)), ("num_speculative_tokens", spec.group(3)))
                if v is not None and v != "None") + "}"
    return list(out.items())


# The engine config line's speculative_config (config/speculative.py SpeculativeConfig.__repr__, 0.8 to 0.33.0):
# "SpeculativeConfig(method='eagle3', model='yuhuili/EAGLE3-LLaMA3.1-Instruct-8B', num_spec_tokens=5)"
_SPEC_CONFIG = (r"speculative_config=SpeculativeConfig\(method=('[A-Za-z0-9_]{1,40}'|None), model=('[^'\n]{1,256}'|None), "
                r"num_spec_tokens=([0-9]{1,4})\)")


# What the V1 sampler says of its top-k/top-p path (v1/sample/ops/topk_topp_sampler.py, 0.8 to 0.33.0).
_SAMPLER_LINES = (
    ("Using FlashInfer for top-p & top-k sampling", "flashinfer"),
    ("FlashInfer is not available", "native"),
    ("FlashInfer is available, but it is not enabled", "native"),
    ("FlashInfer version >= 0.2.3 required", "native"),
    ("FlashInfer top-p & top-k sampling sampler is disabled", "native"),
    ("FlashInfer top-p/top-k sampling unavailable", "native"),
    ("FlashInfer top-p/top-k sampling disabled", "native"),
)


# Where vLLM's own Docker image (vllm/vllm-openai, Ubuntu's Python 3.12) has vllm installed, as tracebacks and
# warnings print it; the image ships flashinfer, which 0.8-0.11 sample with when it is installed (0.12-0.20 only
# with VLLM_USE_FLASHINFER_SAMPLER=1).
_DOCKER_IMAGE_PATH = "/usr/local/lib/python3.12/dist-packages/vllm/"
# FlashInfer's attention backend in use (platforms/cuda.py 0.8-0.11 "Using FlashInfer backend on V1 engine." / "... with
# HND KV cache layout"): its module imports flashinfer, so the package is there and the 0.8-0.11 sampler takes it too
_FLASHINFER_ATTENTION = "Using FlashInfer backend"


def _sampler(log: LogText) -> list[tuple[str, str]]:
    """The sampler path the log shows (the last such line wins: every rank prints the same); without one, whether
    the flashinfer package is installed (vLLM's Docker image, or attention running on FlashInfer), which the
    0.8-0.11 sampler takes."""
    found = [(at, path) for phrase, path in _SAMPLER_LINES for _, _, at in log.lines(phrase, reverse=True)]
    if found:
        return [("sampler", max(found)[1])]
    if _DOCKER_IMAGE_PATH in log.text or log.has(_FLASHINFER_ATTENTION):
        return [("flashinfer_installed", "true")]  # the release planned decides what the sampler makes of it
    return []


# Whether the start compiled its model afresh or loaded the compiled graph from vLLM's cache (compile_cache.py):
# compilation/backends.py logs "Directly load the compiled graph(s) for ... from the cache" on a hit and "Compiling a
# graph for ... takes" after a fresh Inductor compile; compilation/decorators.py "Directly load AOT compilation from
# path" when it loads the whole Dynamo artifact (0.2x). Without those lines, the total that compilation/monitor.py
# prints ("torch.compile took X s in total", core.py's "(compilation: X s)"): a fresh compile traces the model with
# Dynamo before Inductor runs, seconds on its own (7-17 s in the corpus's logs that print it), so a total under 2 s
# is a load from the cache (the corpus's: 0.54 and 1.14 s; its fresh compiles: 7.45-46.50 s).
_CACHE_HIT_LINES = ("Directly load the compiled graph", "Directly load AOT compilation")
_FRESH_COMPILE_LINES = ("Compiling a graph for",)
_LOADED_BELOW_S = 2.0


def _compile_cache(log: LogText) -> list[tuple[str, str]]:
    """The compile cache the start found ("warm" / "cold"), as its log shows it; nothing when it does not say."""
    if any(log.has(phrase) for phrase in _CACHE_HIT_LINES):
        return [("compile_cache", "warm")]
    if any(log.has(phrase) for phrase in _FRESH_COMPILE_LINES):
        return [("compile_cache", "cold")]
    m = (log.last("torch.compile took ", r"torch\.compile took ([0-9]{1,6}(?:\.[0-9]{1,6})?) s in total")
         or log.last("(compilation: ", r"\(compilation: ([0-9]{1,6}(?:\.[0-9]{1,6})?) s\)"))
    if m:
        return [("compile_cache", "warm" if float(m.group(1)) < _LOADED_BELOW_S else "cold")]
    return []


_ERRORS = (
    ("To serve at least one request", r"(To serve at least one request with the model\S{0,200} max seq len[^\n]{0,400})"),
    ("No available memory for the cache blocks", r"(No available memory for the cache blocks[^\n]{0,400})"),
    ("is larger than the maximum number of tokens",
     r"(The model's max seq len \([0-9]{1,20}\) is larger than the maximum number of tokens[^\n]{0,400})"),
    ("Cannot auto-fit max_model_len", r"(Cannot auto-fit max_model_len[^\n]{0,400})"),
    ("EngineCore failed to start", r"(EngineCore failed to start[^\n]{0,400})"),
    ("OutOfMemoryError", r"((?:torch\.)?(?:cuda\.)?OutOfMemoryError[^\n]{0,400})"),
)


_MEMORY_WORDS = ("out of memory", "OutOfMemory", "memory", "cache blocks")


def _cause(text: str) -> str | None:
    """The exception that follows vLLM's "EngineCore failed to start" (the first ``SomethingError: ...`` line after it),
    when it names no memory; None when it is about memory or the log does not show it."""
    at = text.rfind("EngineCore failed to start")  # the text as given: its lines not joined
    m = re.compile(r"(?m)^[^\n]{0,200}?\b((?:[A-Za-z_]{1,40}\.){0,4}[A-Z]\w{0,60}(?:Error|Exception): [^\n]{1,300})").search(
        text, at, at + 20000)
    if m is None or any(w.lower() in m.group(1).lower() for w in _MEMORY_WORDS):
        return None
    return m.group(1).strip()


# The lines vLLM 0.10's workers print once per rank at the end of profiling: a run of them, in any order.
_PER_RANK = ("Available KV cache memory: ", "KV cache size: ", "Maximum concurrency for ")


# A worker's prefix as vLLM's multiprocessing or Ray executor prints it: "(VllmWorker rank=0 pid=1)" (0.8-0.10.0),
# "(VllmWorker TP1 pid=1)", "(Worker_TP0 pid=1)", "(Worker_PP1_TP0 pid=1)" (0.10.1 on), "(RayWorkerWrapper pid=1, ip=...)"
_RANK_LABEL = re.compile(r"\((?:VllmWorker|Worker|RayWorkerWrapper)[ _]?(rank=[0-9]{1,5}|(?:DP[0-9]{1,5}_)?(?:PP[0-9]{1,5}_)?"
                         r"TP[0-9]{1,5}(?:_EP[0-9]{1,5})?|pid=[0-9]{1,9}(?:, ip=[0-9a-fA-F.:]{1,64})?)")
_RAY_REPEATED = re.compile(r"\[repeated ([0-9]{1,6})x across cluster\]")


def _printed(log: LogText, literal: str) -> tuple[int, tuple[str, ...]]:
    """How many ranks printed a line holding ``literal`` (Ray's "[repeated Nx across cluster]" line counts N: Ray
    prints the first of a message, then one such line for the N it held back), and the
    rank labels of those lines, in order (one pass over the lines that hold it)."""
    n, labels = 0, []
    for start, stop, _ in log.lines(literal):
        line = log.text[start:stop]
        repeated = _RAY_REPEATED.search(line)
        n += int(repeated.group(1)) if repeated else 1  # Ray's line stands for the N it held back
        label = _RANK_LABEL.search(line, 0, 200)
        if label is not None:
            labels.append(label.group(1))
    return n, tuple(labels)


_WORKER_RANK = re.compile(r"\((?:VllmWorker|Worker)[ _]?(?:rank=([0-9]{1,5})|(?:DP[0-9]{1,5}_)?(?:PP([0-9]{1,5}))?_?"
                          r"(?:PCP[0-9]{1,5}_)?(?:TP([0-9]{1,5}))?)(?![0-9])")


# V0's worker processes (engine/multiprocessing of 0.4-0.10, executor/multiproc_worker_utils.py): "(VllmWorkerProcess
# pid=N)", rank 0 being the engine's own process
_V0_WORKER = re.compile(r"\(VllmWorkerProcess pid=([0-9]{1,10})\)")


def _worker_layout(log: LogText) -> tuple[int, int, bool] | None:
    """(TP, PP, seen) as the workers' prefixes show them (one pass over the text): the highest rank tags, and at least
    2 where a tag names the group at all; ``seen`` is False where a size is only that least (rank 0 alone printed).
    vLLM's multiprocessing executor adds ``_PPm`` to a worker's name only when PP > 1 and ``_TPn`` only when TP > 1
    (``v1/executor/multiproc_executor.py`` setup_proc_title_and_log_prefix, 0.14.0), so a log whose only tag is
    "Worker_TP0" (0.12 on print the figures once per node) ran TP >= 2. A V0 log's "VllmWorkerProcess" pids are the
    ranks after the first: TP x PP of at least their count + 1 (read as TP)."""
    tp = pp = 0
    named_tp = named_pp = False
    for m in _WORKER_RANK.finditer(log.text):
        rank, stage, tp_rank = m.groups()
        if rank is None and stage is None and tp_rank is None:
            continue  # "(Worker pid=..)": one worker, no group named
        named_tp, named_pp = named_tp or tp_rank is not None, named_pp or stage is not None
        tp = max(tp, int(rank if rank is not None else tp_rank or 0) + 1)
        pp = max(pp, int(stage) + 1 if stage is not None else 1)
    if not tp:  # V0's multiprocessing executor: rank 0 in the engine's process, one "VllmWorkerProcess" per other rank
        pids = set(itertools.islice((m.group(1) for m in _V0_WORKER.finditer(log.text)), 1 << 12))
        return (len(pids) + 1, 1, False) if pids else None
    seen = not ((named_tp and tp < 2) or (named_pp and pp < 2))
    tp, pp = max(tp, 2 if named_tp else 1), max(pp, 2 if named_pp else 1)
    return min(tp, 1 << 16), min(pp, 1 << 16), seen


def _per_rank_min(log: LogText, literal: str, pattern: str, group: int = 1) -> re.Match[str] | None:
    """The last match, or - when a multi-GPU run printed the figure once per rank (vLLM 0.10 with TP/PP: one
    "Available KV cache memory" per worker, one "GPU KV cache size" per worker's config before they are unified
    to the smallest) - the smallest in the final run of such lines, which is what every rank allocates."""
    text = log.text
    best: re.Match[str] | None = None
    prev_start = None
    for start, stop, _ in log.lines(literal, reverse=True):
        if prev_start is not None:
            between = text[stop:prev_start].split("\n")
            if any(line.strip() and not any(k in line for k in _PER_RANK) for line in between):
                break  # another kind of line: an earlier run, not another rank of this one
        m = re.search(pattern, text[start:stop])
        if m is None:
            break
        if best is None or float(m.group(group).replace(",", "")) < float(best.group(group).replace(",", "")):
            best = m
        prev_start = start
    return best



def _graph_fields(log: LogText) -> dict[str, object]:
    """The CUDA-graph estimate's lines of vLLM >= 0.21 (v1/worker/gpu_worker.py, gpu_model_runner.py
    profile_cudagraph_memory, 0.21.0-0.33.0); the last of each (every rank prints the same)."""
    out: dict[str, object] = {}
    m = log.last(" is equivalent to --gpu-memory-utilization=", r"--gpu-memory-utilization=" + NUM
                 + r" is equivalent to --gpu-memory-utilization=" + NUM + r" without CUDA graph memory profiling")
    if m:
        given = figure(m.group(1), "--gpu-memory-utilization (CUDA-graph line)", 0, 1)
        out["graph_util"] = (given, figure(m.group(2), "equivalent --gpu-memory-utilization (CUDA-graph line)", 0, given))
    m = (log.last("Estimated CUDA graph memory: ", r"Estimated CUDA graph memory: " + NUM + r" GiB total")
         or log.last(" GiB (estimated)", r"CUDA graph pool memory: [^\n]{0,60}?" + NUM + r" GiB \(estimated\)"))
    if m:
        out["graph_estimate_gib"] = figure(m.group(1), "estimated CUDA graph memory (GiB)", 0, _GIB)
    m = log.last("Profiling CUDA graph memory: ", r"Profiling CUDA graph memory: ((?:[A-Z]{1,20}=[0-9]{1,9} "
                 r"\(largest=[0-9]{1,9}\)(?:, )?){1,4})")
    if m:
        out["graph_modes"] = tuple((mode, count(n, f"{mode} CUDA graphs"), count(big, f"largest {mode} CUDA graph"))
                                   for mode, n, big in re.findall(r"([A-Z]{1,20})=([0-9]{1,9}) \(largest=([0-9]{1,9})\)",
                                                                  m.group(1)))
    return out


# The engine's own start (v1/engine/core.py, engine/llm_engine.py: "Initializing a V1 LLM engine (v0.11.0) with config:
# ...", V0's "Initializing an LLM engine (v0.6.4)" / "Initializing a V0 LLM engine (v0.8.5)"): an offline LLM(...) run or
# a benchmark prints no API server line, and each data-parallel engine prints one as it starts, before any figure. One
# after a KV-cache figure is another run. (A crash's "Dumping input data for V1 LLM engine (v0.24.0) with config"
# (dump_input.py) is no start.)
_ENGINE_STARTS = ("Initializing a V1 LLM engine (v", "Initializing an LLM engine (v", "Initializing a V0 LLM engine (v")
_RUN_FIGURES = ("Available KV cache memory: ", "KV cache size: ", "GPU blocks: ", "gpu blocks: ", "cuda blocks: ",
                "CUDA blocks: ", "Maximum concurrency for ")
_MAX_RUNS = 1000  # runs counted (a log of more is a flood, not a site's restarts)


def _first(text: str, literals: dict[str, int], at: int) -> int:
    """The first place at or after ``at`` of any of ``literals`` (each one's next place, kept in the dict and searched
    forward only when ``at`` passes it: linear over a run of calls with ``at`` rising); -1 where none is."""
    for lit, i in literals.items():
        if 0 <= i < at:
            literals[lit] = text.find(lit, at)
    return min((i for i in literals.values() if i >= at), default=-1)


def _last_engine_run(text: str) -> tuple[int, str]:
    """How many engine runs ``text`` holds (an engine start after a KV-cache figure begins one; counted up to
    ``_MAX_RUNS``), and the last one's text: from the line after the previous run's last figure (the lines before its
    engine start, such as the API server's non-default args, are the new run's). Each step jumps from a start to the
    next figure and from there to the next start, so the work grows with the runs, not with the lines."""
    starts = {s: text.find(s) for s in _ENGINE_STARTS}  # each literal's next place, moved forward by _first
    figures = {f: text.find(f) for f in _RUN_FIGURES}
    runs, at = 1, _first(text, starts, 0)
    while at >= 0 and runs <= _MAX_RUNS:
        figure = _first(text, figures, at)
        at = _first(text, starts, figure) if figure >= 0 else -1
        runs += at >= 0
    last = max(text.rfind(s) for s in _ENGINE_STARTS)
    figure = max(text.rfind(f, 0, last) for f in _RUN_FIGURES) if last > 0 else -1
    if runs == 1 or figure < 0:
        return 1, text
    end = text.find("\n", figure, last)
    begins = min(i for i in (text.find(s, figure) for s in _ENGINE_STARTS) if i >= 0)
    return runs, text[(text.rfind("\n", 0, begins) if end < 0 else end) + 1:]


# what a terminal prints before a command copied with it: a virtual environment's name, then a POSIX shell's
# user@host:dir$ or [user@host dir]# or PowerShell's PS dir>, or only $, # or > (the myoceane.fr Gemma 4 post pastes
# "(.venv) root@run-cvvmqstioi240l5-0:~# vllm serve ...")
_PROMPT = (r"(?:\([^()\n]{1,64}\) ?)?(?:\[?[\w.-]{1,64}@[\w.-]{1,64}[: ][^\n#$>]{0,256}[#$] ?|PS [^\n>]{1,256}> ?)?"
           r"[#$>\s]{0,8}")
_CONTINUED_LINES = 200  # lines a command pasted one flag a line may run on (vLLM has about 300 flags)
# a line break a backslash escaped, once the log's reader has joined the next line on (``_WRAPPED`` joins a line
# that starts with a blank): the backslash and the next line's indentation, or a backslash before a flag; a
# backslash and one blank before a word is a path's escaped blank (``My\\ Models``), which the shell keeps
_BREAK = re.compile(r"\\(?:[ \t]{2,}|[ \t]+(?=-)|[ \t]*$)")


def _continued(text: str, end: int, first: str) -> str:
    """The launch command whose first line is ``first`` (ending at ``end`` in ``text``) as the shell reads it:
    the lines a trailing backslash continues it onto joined, the escaped breaks dropped (the rtx6kpro MiniMax-M2.5
    page pastes ``vllm serve \\`` with the model and each flag indented on a line of its own, which the shell's
    split read as a blank word and the model as a second one). At most ``_CONTINUED_LINES`` lines."""
    pieces = [first]
    while len(pieces) <= _CONTINUED_LINES and pieces[-1].endswith("\\") and end < len(text):
        pieces[-1] = pieces[-1][:-1]
        stop = text.find("\n", end + 1)
        stop = len(text) if stop < 0 else stop
        pieces.append(text[end + 1:stop].strip())
        end = stop
    return " ".join(_BREAK.sub(" ", " ".join(pieces)).split())


# Lines that bound the run's compute capability, each (literal, pattern, lowest, highest); None: the number the
# line prints, in tenths:
# - vllm/config/vllm.py (0.33.0; config.py before): a quantization whose minimum capability is above the device's
#   raises "... Minimum capability: 80. Current capability: 75." (capability as major x 10 + minor)
# - vllm/platforms/cuda.py (0.8): "Cannot use FlashAttention-2 backend for Volta and Turing GPUs." below 8.0
# - vllm/engine/arg_utils.py (0.8): "Compute Capability < 8.0 is not supported by the V1 Engine"
# - vllm/v1/attention/backends/flash_attn.py "Using FlashAttention version N", the version fa_utils.py chose and
#   vllm_flash_attn/flash_attn_interface.py allows (0.33.0): FA3 on compute capability 9.x only, FA2 on 8.0 and up
_CAPABILITY: tuple[tuple[str, str, float | None, float | None], ...] = (
    ("Current capability: ", r"Current capability: (\d{2,3})\b", None, None),
    ("Cannot use FlashAttention-2 backend for Volta and Turing", r"Cannot use FlashAttention-2 backend for Volta and "
     r"Turing GPUs", 0.0, 7.9),
    ("Compute Capability < 8.0 is not supported", r"Compute Capability < 8\.0 is not supported", 0.0, 7.9),
    ("Using FlashAttention version 3", r"Using FlashAttention version 3\b", 9.0, 9.9),
    ("Using FlashAttention version 2", r"Using FlashAttention version 2\b", 8.0, 99.0),
)


def capability_said(log: LogText) -> tuple[str, float, float] | None:
    """The first line of ``_CAPABILITY`` the log holds: its words and the compute capabilities it allows."""
    for literal, pattern, lo, hi in _CAPABILITY:
        m = log.first(literal, pattern)
        if m is None:
            continue
        if lo is None or hi is None:
            cc = int(m.group(1)) / 10
            return m.group(0), cc, cc
        return m.group(0), lo, hi
    return None


def parse_vllm_log(text: str) -> VllmLog:
    """Read a vLLM start-up log (or an excerpt of one), in time linear in its length (``logscan``). A log that
    holds several start-ups (a restarted server, logs pasted one after another: the API server prints its version
    line once per start) is read from the last one on: the model and settings of one run, and its figures."""
    start = text.rfind(_RUN_START)
    starts = 1
    if start > 0 and text.find(_RUN_START) < start:
        starts = text.count(_RUN_START)
        text = text[text.rfind("\n", 0, start) + 1:]
    engines, text = _last_engine_run(text)
    log = open_log(text, "vLLM", join_wrapped=True)
    fields: dict[str, object] = {"starts": starts + engines - 1, "engine_starts": engines > 1}
    m = (log.first("vLLM API server version ", r"vLLM API server version ([0-9][\w.+\-]{0,40})")
         or log.first("LLM engine (v", r"LLM engine \(v([0-9][\w.+\-]{0,40})\)")
         or log.first("vLLM version", r"vLLM version:? v?([0-9][\w.+\-]{0,40})")
         or log.first("version ", r"\bversion ([0-9]{1,4}\.[0-9]{1,4}\.[0-9][\w.+\-]{0,40})"))
    if m:
        fields["version"] = m.group(1)
    elif log.first("initial_memory_usage=", r"Memory profiling results: total_gpu_memory=[^\n]{0,80}initial_memory_usage="):
        # worker.py of 0.6.4 alone prints this one-line form (0.6.3 prints none, 0.6.5 on a multi-line one), and
        # that release counts the CUDA context as non-torch memory (calibration.NON_TORCH_0_6_4_BYTES)
        fields["version"] = "0.6.4"
    m = (log.first("model=", r"model=['\"]([^'\"\n]{1,400})['\"]")
         or log.first(("'model'", '"model"'), r"['\"]model['\"][ \t]{0,8}:[ \t]{0,8}['\"]([^'\"\n]{1,400})['\"]")
         or log.first("Starting to load model ", r"Starting to load model ([^\s.]{1,200}(?:\.[^\s.]{1,200}){0,8})")
         # the start-up banner's model line (log_version_and_model: entrypoints/utils.py in the corpus's 0.16/0.17
         # logs, entrypoints/serve/utils/api_utils.py in 0.24.0): "█▄█▀ █     █     █     █  model   Qwen/Qwen3-8B",
         # the one line naming the model in an excerpt without its args line
         or log.first("\u2588  model ", r"\u2588[ \t]{1,8}model[ \t]{1,8}([^\s'\"]{1,400})[ \t]*$"))
    if m:
        fields["model"] = m.group(1)
    m = log.first("NVIDIA ", r"(NVIDIA [A-Z0-9][\w\- ]{0,60}?(?:GB|HBM3e?|PCIe|SXM\d?|Ti|Laptop GPU)?)(?=[,'\")]| with| \(|$)")
    if m:
        fields["gpu_name"] = m.group(1).strip()
    elif m := log.first("device_name=", r"device_name=((?:NVIDIA|AMD)_[A-Za-z0-9_\-]{1,80})(?:,|\.json)"):
        # the fused-MoE config file it looks up names the device with spaces and slashes as underscores
        # (utils/platform_utils.py get_device_name_as_file_name, vLLM 0.33.0): "device_name=NVIDIA_GeForce_RTX_4060_Ti.json"
        fields["gpu_name"] = m.group(1).replace("_", " ")
    fields["capability"] = capability_said(log)
    m = (log.first("total_gpu_memory", r"total_gpu_memory[ \t]{0,8}\(?=?[ \t]{0,8}" + NUM + r"[ \t]{0,8}GiB")
         or log.first("Free memory on device", r"Free memory on device[^(\n]{0,200}\(" + NUM + r"/" + NUM + r" GiB\)"))
    if m:
        fields["total_gib"] = figure(m.group(m.lastindex or 1), "total GPU memory (GiB)", 0, _GIB)
        if fields["total_gib"] == 0:
            raise InputError("the log: total GPU memory is 0 GiB: is it a real vLLM log? (give --gpu or --gpu-memory)")
    loading = ("Model loading took", "Loading model weights took", "model weights take")
    m = log.last(loading, r"(?:Model loading took|Loading model weights took|model weights take)[ \t]{1,8}" + NUM + r" ?G")
    if m:
        fields["model_loading_gib"] = figure(m.group(1), "model loading (GiB)", 0, _GIB)
    per_rank = _per_rank_min(log, "Available KV cache memory: ", r"Available KV cache memory: " + NUM + r" GiB")
    if per_rank:
        fields["available_printed"], fields["available_ranks"] = _printed(log, "Available KV cache memory: ")
    m = (per_rank
         or log.last("reserved for KV Cache is ", r"reserved for KV Cache is " + NUM + r" ?GiB")
         or log.last("kv_cache_size=", r"kv_cache_size=" + NUM + r" ?GiB")
         or log.last("available_kv_cache_memory", r"available_kv_cache_memory[ \t]{1,8}" + NUM + r" ?GiB")
         or log.last("larger than the available KV cache memory (", r"larger than the available KV cache memory \(" + NUM + r" GiB\)"))
    if m:  # negative when the weights and activations left nothing (vLLM prints it so)
        fields["available_kv_gib"] = figure(m.group(1), "available KV cache memory (GiB)", -_GIB, _GIB)
    m = _per_rank_min(log, "KV cache size: ", r"KV cache size: " + NUM + r" tokens")
    if m:
        fields["kv_cache_tokens"] = count(m.group(1), "GPU KV cache size (tokens)")
        fields["kv_size_printed"] = _printed(log, "KV cache size: ")[0]
    # each spelling a literal of its own: a search for " blocks: " lands on the "# CPU blocks" of the same
    # line and misses a GPU figure that starts more than BACK characters before it
    m = log.last(_GPU_BLOCKS, r"(?:GPU|gpu|cuda|CUDA) blocks: " + NUM)
    if m:
        fields["num_gpu_blocks"] = count(m.group(1), "# GPU blocks")
    m = _per_rank_min(log, "Maximum concurrency for ", r"Maximum concurrency for " + NUM + r" tokens per request: " + NUM
                      + r" ?x", group=2)
    if m:
        fields["concurrency_len"] = count(m.group(1), "maximum concurrency's tokens per request", 1)
        fields["max_concurrency"] = figure(m.group(2), "maximum concurrency", 0, 1e12)
    m = log.last("estimated maximum model length is ", r"estimated maximum model length is " + NUM)
    if m:
        fields["estimated_max_model_len"] = count(m.group(1), "estimated maximum model length")
    m = log.last("GiB KV cache is needed", r"\(" + NUM + r" ?GiB KV cache is needed")
    if m:
        fields["needed_kv_gib"] = figure(m.group(1), "KV cache needed (GiB)", 0, _GIB)
    for literal, pattern in _ERRORS:
        m = log.last(literal, pattern)
        if m:
            fields["error"] = m.group(1).strip()[:400]
            break
    if str(fields.get("error", "")).startswith("EngineCore failed to start") and (
            "kv_cache_tokens" in fields or fields.get("num_gpu_blocks") or (isinstance(avail := fields.get("available_kv_gib"), float)
            and avail > 0)):
        cause = _cause(unwrap_terminal(json_records(text.replace("\r", ""))))  # as printed, records not joined
        if cause is not None:  # sized its KV cache, then stopped for something else: not a memory outcome
            fields["other_failure"] = cause
            del fields["error"]
    m = log.last("maximum number of tokens that can be stored in KV cache (",
                 r"maximum number of tokens that can be stored in KV cache \(" + NUM + r"\)")
    if m and "kv_cache_tokens" not in fields:
        fields["kv_cache_tokens"] = count(m.group(1), "tokens that can be stored in KV cache")
    m = (log.last("non_torch_memory", r"non_torch_memory(?: takes |=|[ \t]{1,8})" + NUM)
         or log.last(" GiB for non-torch memory", NUM + r" GiB for non-torch memory"))
    if m:
        fields["non_torch_gib"] = figure(m.group(1), "non-torch memory (GiB)", -_GIB, _GIB)
    m = log.last(" GiB for consumed memory", NUM + r" GiB for consumed memory")
    if m:
        fields["consumed_gib"] = figure(m.group(1), "consumed memory (GiB)", -_GIB, _GIB)
    m = (log.last("activation peak memory", r"activation peak memory(?: takes|[ \t])[ \t]{0,8}" + NUM)
         or log.last(" GiB for peak activation", NUM + r" GiB for peak activation"))
    if m:
        fields["activation_gib"] = figure(m.group(1), "activation peak memory (GiB)", -_GIB, _GIB)
    m = (log.last("Graph capturing finished in ", r"Graph capturing finished in [0-9.]{1,20} secs?, took " + NUM + r" GiB")
         or log.last(" GiB for CUDAGraph memory", NUM + r" GiB for CUDAGraph memory"))
    if m:
        fields["cuda_graph_gib"] = figure(m.group(1), "CUDA graph memory (GiB)", -_GIB, _GIB)
    fields.update(_graph_fields(log))
    settings = _settings(log) + _sampler(log) + _compile_cache(log)
    m = log.line_match(("vllm serve", "-m vllm.entrypoints"),
                       _PROMPT + r"((?:[A-Z_][A-Z0-9_]{0,63}=\S{0,256} ){0,16}(?:vllm serve|python3? -m vllm\.entrypoints)[^\n]*)")
    if m:
        fields["command"] = _continued(log.text, m.end(), m.group(1).strip())
    fields["worker_layout"] = _worker_layout(log)
    parsed = VllmLog(settings=tuple(settings), **fields)  # type: ignore[arg-type]
    if not parsed.has_figures and parsed.model_loading_gib is None:
        raise InputError("no vLLM start-up figures found in the log (looked for 'Available KV cache memory', "
                         "'GPU KV cache size', '# GPU blocks', 'Maximum concurrency' and vLLM's start-up errors)")
    return parsed
