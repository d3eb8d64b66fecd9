"""SGLang's memory-relevant server arguments (``SGLangSettings``) and the KV cache dtypes it takes
(sglang 0.5.23, ``srt/server_args.py``); ``policy.py`` plans with them."""

from __future__ import annotations

from ..._record import record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from ..site import SiteTerm

# The release lines whose rules kvbudget applies (policy.py): the current one (0.5.3 on), 0.4.8 - 0.5.2, and 0.4 up to 0.4.7
LINES = ("current", "0.4.8", "0.4")


@record
class SGLangSettings:
    version: str = "current"  # current (0.5) | 0.4
    mem_fraction_static: float | None = None
    tp: int = 1
    pp: int = 1
    dp: int = 1
    enable_dp_attention: bool = False  # with dp > 1: attention data parallelism inside the TP group (attn_dp_size = dp)
    ep_size: int = 1  # --ep-size: the expert-parallel group inside the TP group (moe_tp_size = tp // ep_size)
    context_length: int | None = None
    kv_cache_dtype: str = "auto"
    page_size: int | None = None
    max_running_requests: int | None = None
    chunked_prefill_size: int | None = None
    cuda_graph_max_bs: int | None = None
    disable_cuda_graph: bool = False
    max_total_tokens: int | None = None
    swa_full_tokens_ratio: float = 0.8
    mamba_full_memory_ratio: float = 0.9
    # --mamba-ssm-dtype (server_args.py, 0.5.2 on; default float32; 0.5.23 takes the config's mamba_ssm_dtype when
    # the flag is not given, then float32: configs/mamba_utils.py mamba2_state_dtype): the dtype of the recurrent
    # (SSM / GatedDeltaNet) state of every Mamba-pool slot; the convolution state stays bfloat16
    mamba_ssm_dtype: str = "float32"
    quantization: str | None = None
    disable_custom_all_reduce: bool = False  # --disable-custom-all-reduce (comms.py)
    site: tuple[SiteTerm, ...] = ()  # a site's own calibration (kvbudget calibrate --out PROFILE; --profile PROFILE)


# server_args.py: the --kv-cache-dtype choices (matched as given), each with what it stores ("": the model's dtype)
KV_DTYPES = {"auto": "", "fp8_e5m2": "fp8_e5m2", "fp8_e4m3": "fp8_e4m3", "bf16": "bf16", "bfloat16": "bf16"}


def attn_dp(s: SGLangSettings) -> int:
    """Attention data-parallel groups inside the TP group. sglang 0.5.23 reads the old spelling ``--dp-size N
    --enable-dp-attention`` as ``attn_dp_size = N, dp_size = 1`` (``arg_groups/parallel_hook.py:
    handle_deprecated_dp_attention``); without ``--enable-dp-attention``, ``--dp`` counts whole replicas."""
    return s.dp if s.enable_dp_attention else 1


def replicas(s: SGLangSettings) -> int:
    """Whole data-parallel copies of the model (``--dp`` without attention DP), each on tp x pp GPUs."""
    return 1 if s.enable_dp_attention else s.dp
