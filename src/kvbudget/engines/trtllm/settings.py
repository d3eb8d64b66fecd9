"""TensorRT-LLM's memory-relevant settings (``TrtllmSettings``: ``trtllm-serve`` flags and LLM API options) and the
KV cache dtypes kvbudget models for it; ``policy.py`` plans with them."""

from __future__ import annotations

from ..._record import record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from ..site import SiteTerm


@record
class TrtllmSettings:
    backend: str = "pytorch"  # pytorch (trtllm-serve / LLM API) | engine (trtllm-build engines)
    free_gpu_memory_fraction: float = 0.9
    tokens_per_block: int | None = None  # 32 (PyTorch) / 64 (engine builder default)
    max_tokens: int | None = None  # max_tokens_in_paged_kv_cache
    max_num_tokens: int = 8192
    max_batch_size: int = 2048
    tp: int = 1
    pp: int = 1
    # MoE parallelism (LLM API moe_expert_parallel_size / moe_tensor_parallel_size; None: Mapping's default, every
    # expert split over the TP ranks) and attention data parallelism (enable_attention_dp: each rank runs its own
    # requests with whole attention, and caches every KV head of them)
    moe_ep: int | None = None
    moe_tp: int | None = None
    enable_attention_dp: bool = False
    kv_cache_dtype: str = "auto"
    quantization: str | None = None
    max_seq_len: int | None = None  # default: the model's max_position_embeddings
    max_beam_width: int = 1
    # the largest batch PyTorch-backend CUDA graphs are captured for (cuda_graph_config.max_batch_size); None:
    # TensorRT-LLM's default, 128 (llmapi/llm_args.py CudaGraphConfig), capped by max_batch_size; 0: graphs off
    cuda_graph_max_batch_size: int | None = None
    # the release line the run used ('0.13', '0.20', '1.1.0rc3'): where TensorRT-LLM's arithmetic changed between
    # releases (policy.release_rules); None: the current source (main in 2026)
    release: str | None = None
    site: tuple[SiteTerm, ...] = ()  # a site's own calibration (kvbudget calibrate --out PROFILE; --profile PROFILE)


# The KV cache dtypes kvbudget models for TensorRT-LLM and what each stores: FP8 (e4m3, kv_cache_config.dtype
# "fp8"), else the model's dtype ("").
_KV_DTYPES = {"auto": "", "fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3", "bf16": "", "bfloat16": "", "fp16": "",
              "float16": ""}
