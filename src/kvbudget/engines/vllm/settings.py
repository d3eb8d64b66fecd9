"""vLLM's release lines and the memory-relevant engine arguments (``VllmSettings``).

Read from vLLM 0.33.0's Python sources (paths relative to the ``vllm`` package); ``policy.py`` plans with them.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ..._record import record, replace
from ...units import InputError, digits, excerpt

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from ..site import SiteTerm
    from .speculative import Draft

# --- release lines -----------------------------------------------------------------------------


@record
class Release:
    """How one line of vLLM releases accounts for memory."""

    key: str
    label: str
    default_utilization: float
    cudagraph_subtracted: bool  # CUDA-graph memory estimated and taken from the KV budget (>= 0.21)
    in_flight_batches: int  # batches a sliding-window reservation covers (2: async scheduling)
    v0_blocks: bool  # V0 engine: one block holds every layer, "# GPU blocks" report
    combined_log_line: bool  # "GPU KV cache size: N tokens, Maximum concurrency ..." on one line
    blocks_log_line: bool = False  # V1 alpha (0.7): "# GPU blocks: N" with no available-memory line


RELEASES: dict[str, Release] = {
    # config/cache.py CacheConfig.gpu_memory_utilization default 0.92; gpu_worker.py subtracts
    # profile_cudagraph_memory(); config/vllm.py max_concurrent_batches = 2 with async scheduling;
    # v1/core/kv_cache_utils.py update_kv_cache_capacity logs one combined line.
    "current": Release("current", "vLLM >= 0.21 (V1, CUDA-graph memory profiled)", 0.92, True, 2, False, True),
    # Before 0.21: utilization 0.90, graphs not subtracted (users left headroom), sliding windows
    # reserve one batch of in-flight tokens (utils/memory_profiling of the 0.6-0.20 sources; sliding-window
    # max_memory_usage_bytes of that time: min(W - 1 + max_num_batched_tokens, L)).
    "v1": Release("v1", "vLLM 0.8-0.20 (V1 engine)", 0.90, False, 1, False, False),
    # V0 engine (<= 0.7, and 0.8-0.10 with VLLM_USE_V1=0): num_gpu_blocks = available //
    # (block_size x layers x 2 x heads x head_dim x bytes); logs "# GPU blocks: N".
    "v0": Release("v0", "vLLM V0 engine (<= 0.7)", 0.90, False, 1, True, False),
}


@lru_cache(maxsize=1024)
def version_minor(version: str | None) -> int | None:
    """The minor number of a 0.x release (``0.13.0`` -> 13, ``v0.8.5.post1`` -> 8); None for ``current``, a
    release-line name (``v1``, ``v0``) or anything else that names no release."""
    parts = (version or "").strip().lower().lstrip("v").split(".")
    if len(parts) < 2 or parts[0] != "0" or not digits(parts[1]):  # '0.²1' (a superscript) names no release
        return None
    return int(parts[1])


NEWEST_MINOR = 33  # the newest release read (0.33.0): what a plan without a release number follows


OLDEST_READ = (0, 6)  # the oldest release read (0.6.0, release_lines.py): V0's rules before it are not kvbudget's


def unread_release(version: str | None) -> str | None:
    """A note for a release number past the newest kvbudget has read (0.34, 1.0, or a typo such as 0.111 for
    0.11.1), which it plans with the newest rules, or before the oldest it read (0.0.1, 0.5.4), which it plans with
    the V0 engine's rules of 0.6-0.7; None otherwise."""
    m = re.match(r"v?([0-9]{1,4})\.([0-9]{1,4})(?![0-9])", (version or "").strip().lower())
    if m is None:
        return None
    given = (int(m.group(1)), int(m.group(2)))
    if given < OLDEST_READ:  # was planned as V0 with no word (0.0.1 is on PyPI, a placeholder before 0.1.0)
        return (f"vLLM {excerpt(version, 40)} is older than the oldest release kvbudget has read (0.6.0): planned with "
                "the V0 engine's rules of 0.6-0.7, which it may not follow (check the release number)")
    if given <= (0, NEWEST_MINOR):
        return None
    return (f"vLLM {excerpt(version, 40)} is newer than the newest release kvbudget has read (0.{NEWEST_MINOR}.0): "
            f"planned with 0.{NEWEST_MINOR}'s rules (check the release number)")


def release_minor(version: str | None) -> int:
    """The 0.x minor whose rules a plan follows: the version's, or the newest read when none is named."""
    minor = version_minor(version)
    return NEWEST_MINOR if minor is None else minor


@lru_cache(maxsize=1024)
def minor_patch(version: str | None) -> tuple[int, int] | None:
    """(minor, patch) of a 0.x release string (``0.10.1.1`` -> (10, 1), ``0.8.5.post1`` -> (8, 5)); None for a
    release-line name or anything else."""
    parts = (version or "").strip().lower().lstrip("v").split(".")
    if len(parts) < 2 or parts[0] != "0" or not digits(parts[1]):
        return None
    patch = parts[2] if len(parts) > 2 else "0"
    number = "".join(ch for ch in patch[:3] if digits(ch)) if digits(patch[:1]) else "0"
    return int(parts[1]), int(number or 0)


AUTO_FIT = (14, 0)  # --max-model-len auto / -1 (utils/argparse_utils.py human_readable_int_or_auto): 0.14.0 on, not 0.13.0


def auto_fit_read(version: str | None) -> bool:
    """Whether the release (None, a line name: the newest) reads --max-model-len auto."""
    release = minor_patch(version)
    return release is None or release >= AUTO_FIT


def release(version: str | None) -> Release:
    """The release line of a version string (``0.33.0``, ``v0.6.3.post1``, ``current``, ``v1``, ``v0``)."""
    if version is None or version in ("current", "latest"):
        return RELEASES["current"]
    key = version.strip().lower()
    if key in RELEASES:
        return RELEASES[key]
    # MAJOR.MINOR in ASCII digits, then anything a release adds (.3, rc1, .post1, .dev26+g1234abc): int() alone took
    # '' (the newest rules, unasked), '-1' and '0.-5' (V0), '1_0.5' and full-width digits
    m = re.match(r"v?([0-9]{1,4})\.([0-9]{1,4})(?![0-9])(?:[.+\-_a-z0-9]*)$", key)
    if m is None:
        raise InputError(f"unknown vLLM version {excerpt(version)}: give e.g. 0.33.0, 0.10.1, 0.6.3, or current/v1/v0")
    major, minor = int(m.group(1)), int(m.group(2))
    if major > 0 or minor >= 21:
        return RELEASES["current"]
    if minor >= 8:
        return RELEASES["v1"]
    return RELEASES["v0"]


def is_v1_alpha(settings: VllmSettings) -> bool:
    """VLLM_USE_V1=1 on a 0.7 release: the V1 engine's alpha (0.7.0-0.7.3 ship it beside the default V0 engine,
    envs.py VLLM_USE_V1 default 0). It sizes the cache with the V1 worker (v1/worker/gpu_worker.py), so it plans as
    the V1 line with the 0.7 profiling run (calibration.v1_alpha_activation)."""
    return settings.use_v1 is True and version_minor(settings.version) == 7


# v1/core/kv_cache_utils.py of 0.7.1-0.7.3 logs "# GPU blocks: N" and "Maximum concurrency for L tokens per request"
V1_ALPHA = replace(RELEASES["v1"], label="vLLM 0.7 V1 engine (alpha, VLLM_USE_V1=1)", blocks_log_line=True)


def settings_release(settings: VllmSettings) -> Release:
    """The release line the settings run: their version's, or V1 for the 0.7 alpha (``is_v1_alpha``)."""
    return V1_ALPHA if is_v1_alpha(settings) else release(settings.version)


# --- settings ----------------------------------------------------------------------------------


@record
class CompileFlags:
    """What a launch command says of vLLM's compilation and CUDA graphs (``compile_flags.py`` reads and resolves it;
    ``None``: not given, the release's default). The compilation config's keys and the separate flags are kept apart:
    vLLM refuses a key given both ways (engine/arg_utils.py create_engine_config, 0.12-0.33)."""

    optimization_level: int | None = None  # -O N / --optimization-level N (0.12 on; before, -O N is a compilation level)
    compile_mode: int | None = None  # compilation config "mode" (0.12 on) or "level" (0.6.5-0.17; -O N up to 0.11)
    cudagraph_mode: str | None = None  # NONE, PIECEWISE, FULL, FULL_DECODE_ONLY or FULL_AND_PIECEWISE (0.10.1 on)
    config_sizes: tuple[int, ...] | None = None  # compilation config "cudagraph_capture_sizes"
    config_max: int | None = None  # compilation config "max_cudagraph_capture_size" (0.12 on)
    flag_sizes: tuple[int, ...] | None = None  # --cudagraph-capture-sizes (0.12 on)
    flag_max: int | None = None  # --max-cudagraph-capture-size (0.12 on)
    full_cuda_graph: bool | None = None  # compilation config "full_cuda_graph" (0.9-0.11)
    use_cudagraph: bool | None = None  # compilation config "use_cudagraph" (0.6.5-0.11)
    sequence_parallel: bool = False  # pass_config enable_sp / enable_sequence_parallelism / fuse_gemm_comms on
    encoder_graphs: bool = False  # cudagraph_mm_encoder on (0.19 on): the vision encoder's graphs

    @property
    def given(self) -> bool:
        return self != NO_COMPILE_FLAGS


NO_COMPILE_FLAGS = CompileFlags()  # nothing given: every settings record without flags shares this one


@record
class VllmSettings:
    """The memory-relevant engine arguments (``None``: vLLM's default for the release and GPU)."""

    version: str = "current"
    use_v1: bool | None = None  # VLLM_USE_V1 as the launch environment sets it (None: unset)
    gpu_memory_utilization: float | None = None
    max_model_len: int | None = None  # -1: auto-fit ("--max-model-len auto")
    block_size: int | None = None
    kv_cache_dtype: str = "auto"
    dtype: str = "auto"
    quantization: str | None = None  # None: the checkpoint's own format
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    enable_expert_parallel: bool = False  # --enable-expert-parallel: whole experts over the DP x TP ranks
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enable_chunked_prefill: bool | None = None
    enable_prefix_caching: bool | None = None
    enforce_eager: bool = False
    kv_cache_memory_bytes: int | None = None
    num_gpu_blocks_override: int | None = None
    disable_hybrid_kv_cache_manager: bool = False
    entrypoint: str = "serve"  # serve (OpenAI server) | llm (the LLM class)
    performance_mode: str | None = None
    cpu_offload_bytes: int = 0  # --cpu-offload-gb: weights kept in host memory, per GPU
    allow_long_max_model_len: bool = False  # VLLM_ALLOW_LONG_MAX_MODEL_LEN=1
    estimate_cudagraphs: bool = True  # VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS (default 1)
    chunked_local_hybrid: bool = False  # VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1
    site: tuple[SiteTerm, ...] = ()  # a site's own calibration (kvbudget calibrate --out PROFILE; --profile PROFILE)
    # --speculative-config: vLLM's method ("mtp", "ngram", "eagle" ...; None: no speculative decoding) and
    # num_speculative_tokens; kvbudget models "mtp" from the target's own checkpoint (speculative.py)
    speculative_method: str | None = None
    num_speculative_tokens: int = 0
    # the draft of method eagle / eagle3 / draft_model, read from its config.json (speculative.py read_draft);
    # None: no such draft, or its config could not be found (then the command's warning and a wider band)
    speculative_draft: Draft | None = None
    unmodelled: tuple[str, ...] = ()  # flags of the command whose memory kvbudget does not model (a wider band)
    async_scheduling: bool | None = None  # --[no-]async-scheduling; None: the release's default
    # The top-k/top-p sampler the profiling run goes through: "flashinfer" or "native" (PyTorch sort); None: what the
    # release does by default (calibration.sampler_path). A log's "FlashInfer is not available" line sets it.
    sampler: str | None = None
    # vLLM's torch.compile cache at start-up (compile_cache.py): "cold" compiles afresh (a first start, the default),
    # "warm" loads the compiled graph ("Directly load the compiled graph(s) ... from the cache" in the log)
    compile_cache: str = "cold"
    # NCCL_CUMEM_ENABLE and NCCL_NVLS_ENABLE from the launch command's environment (None / True: unset)
    nccl_cumem: bool | None = None
    nccl_nvls: bool = True
    # a RoPE scaling from --rope-scaling or --hf-overrides (rope.py parse_rope's JSON); None: the config's own
    rope_scaling: str | None = None
    # The multimodal profiling pass (encoder_profile.py): --limit-mm-per-prompt's items per modality (a modality not
    # named keeps vLLM's default, 999), --mm-processor-kwargs' pixel bounds (None: the checkpoint's processor),
    # --skip-mm-profiling, --mm-encoder-tp-mode ("weights": the tower sharded like the decoder; "data": whole on every
    # rank, the items split over the ranks) and --language-model-only (every modality's limit 0).
    mm_limits: tuple[tuple[str, int], ...] = ()
    mm_max_pixels: int | None = None
    mm_min_pixels: int | None = None
    # the bounds of --mm-processor-kwargs' images_kwargs / videos_kwargs: (modality, max, min), over the flat ones
    mm_scoped_pixels: tuple[tuple[str, int | None, int | None], ...] = ()
    skip_mm_profiling: bool = False
    mm_encoder_tp_mode: str = "weights"
    language_model_only: bool = False
    # --enable-lora and its sizes (lora.py): adapter slots per wrapped layer, the largest rank, the CPU cache of
    # adapters (None: max_loras), the slots' dtype (auto: the model's), fully sharded slots, and the extra vocabulary
    # rows of the releases up to 0.11 (--lora-extra-vocab-size)
    enable_lora: bool = False
    max_loras: int = 1
    max_lora_rank: int = 16
    max_cpu_loras: int | None = None
    lora_dtype: str = "auto"
    fully_sharded_loras: bool = False
    lora_extra_vocab_size: int = 256
    # -O, --optimization-level, --compilation-config / -cc, --cudagraph-capture-sizes, --max-cudagraph-capture-size
    compile: CompileFlags = NO_COMPILE_FLAGS
    # --enable-eplb with --eplb-config (0.12 on) or --num-redundant-experts / --eplb-window-size (0.9.2-0.11) (eplb.py):
    # redundant experts, the load-recording window, and the weight-transfer backend ("communicator", 0.20 on; None:
    # vLLM's default, which from 0.22 depends on whether NIXL is installed)
    enable_eplb: bool = False
    num_redundant_experts: int = 0
    eplb_window_size: int = 1000
    eplb_communicator: str | None = None
    # --decode-context-parallel-size / -dcp (0.10.2 on; context_parallel.py): the KV cache's tokens sharded over that
    # many ranks of each TP group
    decode_context_parallel_size: int = 1
    # --kv-transfer-config's kv_connector, or the one --kv-offloading-size selects (kv_connector.py); None: none
    kv_connector: str | None = None
    kv_offload_bytes: int = 0  # --kv-offloading-size / cpu_bytes_to_use: pinned host memory (GiB x 2^30)
    # --mm-ipc-gpu-memory-gb (0.25 on; mm_memory.py): GPU memory carved out of the KV cache for the API server's
    # multimodal decoding (GiB x 2^30, as vLLM's int(gb x GiB_bytes))
    mm_ipc_bytes: int = 0
