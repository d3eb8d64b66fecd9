"""``--decode-context-parallel-size`` (DCP): the KV cache's tokens sharded over ranks of each TP group.

What vLLM does (paths relative to the ``vllm`` package; 0.33.0 unless a release is named):

* DCP reuses the TP ranks (config/parallel.py: ``tp_size`` must be divisible by ``dcp_size``): the DCP ranks of a
  group hold the same KV heads (an MLA latent is whole on every TP rank; GQA needs more TP ranks than KV heads, each
  rank keeping one head) and each stores every ``dcp``-th run of tokens, so a rank's page size is unchanged and a
  request of L tokens takes ``ceil(ceil(L / dcp) / block_size)`` blocks of a full-attention or MLA group
  (v1/kv_cache_interface.py ``FullAttentionSpec.max_memory_usage_bytes``: ``max_model_len = cdiv(max_model_len,
  dcp_world_size)``; the same in 0.10.2's). The scheduler's block spans ``block_size x dcp`` tokens
  (v1/core/kv_cache_utils.py ``resolve_dcp_kv_block_size``).
* What vLLM prints. From 0.21: "GPU KV cache size" = int(max concurrency x max_model_len), the concurrency being
  blocks / the blocks of one request above (kv_cache_utils.py ``get_kv_cache_capacity``), so the tokens are the whole
  group's, ``dcp`` times one rank's. 0.10.2-0.20: ``num_blocks x block_size`` multiplied by ``dcp`` ("Multiplying the
  GPU KV cache size by the dcp_world_size", kv_cache_utils.py of 0.10.2 and 0.20.0).
* Other layer kinds (sliding window, chunked local, Mamba states) are not sharded the same way (0.20-0.21 assert DCP
  1 for them): kvbudget keeps their blocks per request as without DCP and says so.
* Refusals: from 0.14 (config/model.py ``verify_with_parallel_config``) a model without MLA needs TP above its KV
  heads, DCP at most ``TP // KV heads``, and its query heads per KV head divisible by DCP. The flag exists from
  0.10.2 (engine/arg_utils.py).
"""

from __future__ import annotations

from ...model.layers import MLA, FullAttention
from ...model.spec import ModelSpec
from ...units import InputError
from .kv_layout import KVGroup
from .settings import VllmSettings, minor_patch, release_minor

SHARDED = ("full_attention", "mla")  # the KVSpec kinds whose tokens DCP spreads over its ranks


def check(spec: ModelSpec, settings: VllmSettings) -> None:
    """vLLM's refusals of a DCP size for the model and TP (one error line each)."""
    dcp, tp = settings.decode_context_parallel_size, settings.tensor_parallel_size
    if dcp == 1:
        return
    number = minor_patch(settings.version)
    if number is not None and number < (10, 2):
        raise InputError(f"--decode-context-parallel-size: vLLM {settings.version} has no decode context parallelism "
                         "(from 0.10.2)")
    if dcp < 1 or tp % dcp:
        raise InputError(f"--decode-context-parallel-size {dcp}: vLLM needs --tensor-parallel-size ({tp}) divisible by "
                         "it (DCP reuses the TP ranks)")
    if any(isinstance(layer, MLA) for layer in spec.layers) or release_minor(settings.version) < 14:
        return
    heads = spec.dims.num_attention_heads
    kv = next((layer.num_kv_heads for layer in spec.layers if isinstance(layer, FullAttention)), 0)
    if not kv:
        return
    if tp <= kv:
        raise InputError(f"--decode-context-parallel-size {dcp}: vLLM needs --tensor-parallel-size ({tp}) above "
                         f"{spec.name}'s {kv} KV heads for GQA/MQA; raise TP or use DCP 1")
    if dcp > tp // kv:
        raise InputError(f"--decode-context-parallel-size {dcp} exceeds vLLM's maximum {tp // kv} for TP {tp} and "
                         f"{kv} KV heads")
    if (heads // kv) % dcp:
        raise InputError(f"--decode-context-parallel-size {dcp}: vLLM needs {spec.name}'s {heads // kv} query heads per "
                         "KV head divisible by it")


def request_blocks(groups: tuple[KVGroup, ...], block_size: int, in_flight: int, mamba_blocks: int, length: int,
                   dcp: int) -> int:
    """Blocks one request of ``length`` tokens takes from one rank's pool, over every group: a full-attention or MLA
    group holds ``ceil(length / dcp)`` of its tokens on the rank."""
    total = 0
    for g in groups:
        held = -(-length // dcp) if dcp > 1 and g.spec.kind in SHARDED else length
        total += g.spec.blocks(held, block_size, in_flight, mamba_blocks)
    return total


def unsharded(groups: tuple[KVGroup, ...]) -> tuple[str, ...]:
    """The kinds of KV group DCP leaves whole on each rank (their blocks per request as without DCP)."""
    return tuple(dict.fromkeys(g.spec.kind for g in groups if g.spec.kind not in SHARDED))


def note(dcp: int, block_size: int, max_len: int, per_rank_blocks: int) -> str:
    """What the plan says of DCP."""
    return (f"decode context parallelism {dcp}: each rank of a TP group stores 1/{dcp} of every request's tokens (vLLM "
            f"FullAttentionSpec.max_memory_usage_bytes: cdiv(max_model_len, {dcp})); a {max_len:,}-token request takes "
            f"{per_rank_blocks:,} blocks of {block_size} on a rank, and the KV cache tokens vLLM prints are the group's "
            f"({dcp} x one rank's)")
