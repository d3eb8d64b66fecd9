"""Layer kinds: the one place where a layer's cache bytes are defined.

Every kind answers the same three questions for a cache element type and a tensor-parallel
degree ``tp``: how many bytes one token adds (``bytes_per_token``), how many tokens a sequence
of length ``S`` keeps (``tokens_held``), and the bytes one sequence of length ``S`` holds
(``bytes_per_sequence``). Engines, the planner and reports ask these classes and never
re-derive the arithmetic.
"""

from __future__ import annotations

from .._record import record
from ..units import ElementType, element_type


@record
class FullAttention:
    """Full causal attention (MHA, GQA, MQA): every token's K and V are kept.

    K and V head sizes may differ (``v_head_dim``). Under tensor parallelism each rank keeps
    ``max(1, num_kv_heads // tp)`` heads: when ``tp > num_kv_heads`` heads are replicated and
    a rank still stores one head (vLLM ``ModelConfig.get_num_kv_heads``).
    """

    num_kv_heads: int
    head_dim: int
    v_head_dim: int = 0  # 0: same as head_dim
    kind = "full_attention"

    @property
    def v_dim(self) -> int:
        return self.v_head_dim or self.head_dim

    def kv_heads_per_rank(self, tp: int = 1) -> int:
        return max(1, self.num_kv_heads // tp)

    def bytes_per_token(self, dtype: ElementType, tp: int = 1) -> int:
        heads = self.kv_heads_per_rank(tp)
        return dtype.nbytes(heads * self.head_dim) + dtype.nbytes(heads * self.v_dim)

    def tokens_held(self, seq_len: int) -> int:
        return seq_len

    def bytes_per_sequence(self, seq_len: int, dtype: ElementType, tp: int = 1) -> int:
        return self.tokens_held(seq_len) * self.bytes_per_token(dtype, tp)

    def describe(self) -> str:
        v = f", v_head_dim {self.v_dim}" if self.v_head_dim and self.v_head_dim != self.head_dim else ""
        return f"{self.num_kv_heads} KV heads x head_dim {self.head_dim}{v}"


@record
class SlidingWindow(FullAttention):
    """Sliding-window attention: a sequence keeps at most the last ``window`` tokens."""

    window: int = 0
    kind = "sliding_window"

    def tokens_held(self, seq_len: int) -> int:
        return min(seq_len, self.window)

    def describe(self) -> str:
        return f"{super().describe()}, window {self.window}"


@record
class ChunkedLocal(FullAttention):
    """Chunked local attention (Llama 4 ``attention_chunk_size``): a token attends only within
    its chunk, so a sequence keeps at most one chunk of tokens."""

    chunk: int = 0
    kind = "chunked_local"

    def tokens_held(self, seq_len: int) -> int:
        return min(seq_len, self.chunk)

    def describe(self) -> str:
        return f"{super().describe()}, chunk {self.chunk}"


@record
class MLA:
    """Multi-head latent attention (DeepSeek V2/V3/R1, Kimi): one compressed latent of
    ``kv_lora_rank`` elements plus the decoupled RoPE key of ``qk_rope_head_dim`` elements per
    token. One "head", K only (no separate V), and never divided by TP: every rank keeps the
    whole latent (vLLM ``MLAAttentionSpec``; SGLang ``MLATokenToKVPool``).

    ``heads``, ``qk_nope_head_dim`` and ``v_head_dim`` are the attention the latent decompresses to (each head's
    K of ``qk_nope_head_dim + qk_rope_head_dim`` and V of ``v_head_dim`` elements); 0 where the source does
    not give them."""

    kv_lora_rank: int
    qk_rope_head_dim: int
    heads: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    kind = "mla"

    def decompressed(self) -> FullAttention | None:
        """Every head's decompressed K and V as multi-head attention, the cache of an engine that does not keep
        the latent (llama.cpp before b5137); None where the per-head sizes are not known."""
        k = self.qk_nope_head_dim + self.qk_rope_head_dim
        if not (self.heads and self.qk_nope_head_dim and self.v_head_dim):
            return None
        return FullAttention(self.heads, k, self.v_head_dim)

    def kv_heads_per_rank(self, tp: int = 1) -> int:
        return 1

    def bytes_per_token(self, dtype: ElementType, tp: int = 1) -> int:
        return dtype.nbytes(self.kv_lora_rank + self.qk_rope_head_dim)

    def tokens_held(self, seq_len: int) -> int:
        return seq_len

    def bytes_per_sequence(self, seq_len: int, dtype: ElementType, tp: int = 1) -> int:
        return seq_len * self.bytes_per_token(dtype, tp)

    def describe(self) -> str:
        return f"latent {self.kv_lora_rank} + rope {self.qk_rope_head_dim}"


@record
class SparseIndexer:
    """The key cache of a DeepSeek sparse attention (DSA) "lightning indexer" (DeepSeek-V3.2, GLM-5): per token one
    key of ``head_dim`` (``index_head_dim``) elements stored as FP8 with one fp32 scale per ``quant_block`` of them,
    whatever the KV-cache dtype of the MLA latent next to it. One "head", never divided by TP. vLLM 0.33.0
    models/deepseek_v32/attention.py builds it as an MLAAttentionSpec of head_size ``head_dim + head_dim // 128 * 4``
    uint8 (132 bytes at index_head_dim 128); SGLang 0.5.23 model_executor/pool_configurator.py
    (_compute_dsa_indexer_cell_size) prices the same bytes (DSATokenToKVPool.quant_block_size 128, uint8 buffer).
    It is a second cache entry of its decoder layer, after the layer's MLA latent."""

    head_dim: int
    quant_block: int = 128
    kind = "dsa_indexer"

    def kv_heads_per_rank(self, tp: int = 1) -> int:
        return 1

    def bytes_per_token(self, dtype: ElementType, tp: int = 1) -> int:
        return self.head_dim + self.head_dim // self.quant_block * 4  # fp8 values + one fp32 scale per block

    def tokens_held(self, seq_len: int) -> int:
        return seq_len

    def bytes_per_sequence(self, seq_len: int, dtype: ElementType, tp: int = 1) -> int:
        return seq_len * self.bytes_per_token(dtype, tp)

    def describe(self) -> str:
        return f"indexer key {self.head_dim} fp8 + fp32 scale per {self.quant_block}"


@record
class RecurrentState:
    """Fixed-size state of a Mamba / Mamba2 / GatedDeltaNet (linear attention) layer.

    A sequence holds a convolution state of ``(conv_kernel - 1) x conv_dim`` elements and a
    recurrent state of ``state_heads x state_elems_per_head`` elements, whatever its length.
    Both are split across TP ranks by channels and heads, as vLLM's
    ``MambaStateShapeCalculator`` does. The state is stored in ``state_dtype`` (the model's
    dtype unless the config says otherwise), not in the KV-cache dtype.
    """

    variant: str  # "mamba", "mamba2", "gated_delta_net"
    conv_kernel: int
    conv_dim: int
    state_heads: int
    state_elems_per_head: int
    state_dtype: str = "bf16"
    conv_dtype: str = "bf16"
    groups: int = 0  # Mamba-2 B/C groups (conv channels 2 x groups x group_state of conv_dim)
    group_state: int = 0
    kind = "recurrent_state"

    def kv_heads_per_rank(self, tp: int = 1) -> int:
        return 0

    def bytes_per_token(self, dtype: ElementType, tp: int = 1) -> int:
        return 0

    def tokens_held(self, seq_len: int) -> int:
        return 0

    def conv_bytes(self, tp: int = 1) -> int:
        # Mamba-2 replicates B/C groups so that every rank holds whole groups: with groups % tp != 0
        # there are tp - groups extra (vLLM MambaStateShapeCalculator.extra_groups_for_head_shards).
        extra = 0 if not self.groups or self.groups % tp == 0 else tp - self.groups
        channels = (self.conv_dim + 2 * extra * self.group_state) // tp
        return element_type(self.conv_dtype).nbytes((self.conv_kernel - 1) * channels)

    def ssm_bytes(self, tp: int = 1) -> int:
        heads = max(1, self.state_heads // tp)
        return element_type(self.state_dtype).nbytes(heads * self.state_elems_per_head)

    def bytes_per_sequence(self, seq_len: int, dtype: ElementType, tp: int = 1) -> int:
        return self.conv_bytes(tp) + self.ssm_bytes(tp)

    def describe(self) -> str:
        return (
            f"{self.variant}: conv {self.conv_kernel - 1}x{self.conv_dim}, "
            f"state {self.state_heads}x{self.state_elems_per_head} ({self.state_dtype})"
        )


@record
class NoCache:
    """A layer that keeps nothing per token: encoder-only, or one that reuses another
    layer's KV (cross-layer sharing). ``shared``: for such a reader, the attention shape of the
    layer it reads (an engine that still gives the reader a buffer of its own sizes it by this)."""

    reason: str = "no attention"
    shared: FullAttention | None = None
    kind = "no_cache"

    def kv_heads_per_rank(self, tp: int = 1) -> int:
        return 0

    def bytes_per_token(self, dtype: ElementType, tp: int = 1) -> int:
        return 0

    def tokens_held(self, seq_len: int) -> int:
        return 0

    def bytes_per_sequence(self, seq_len: int, dtype: ElementType, tp: int = 1) -> int:
        return 0

    def describe(self) -> str:
        return self.reason


Layer = FullAttention | SlidingWindow | ChunkedLocal | MLA | SparseIndexer | RecurrentState | NoCache
LAYER_KINDS: tuple[str, ...] = (
    FullAttention.kind, SlidingWindow.kind, ChunkedLocal.kind, MLA.kind, SparseIndexer.kind, RecurrentState.kind,
    NoCache.kind,
)
