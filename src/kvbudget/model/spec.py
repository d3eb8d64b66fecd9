"""ModelSpec: what kvbudget knows about a model, and where each number came from."""

from __future__ import annotations

from collections import Counter

from .._record import record
from .layers import Layer
from .params import Inventory
from .weights import WeightFormat


@record
class Dims:
    """Shapes the activation model needs."""

    hidden_size: int
    intermediate_size: int  # dense MLP width (or per-expert width times experts per token)
    vocab_size: int
    num_attention_heads: int
    head_dim: int


UNREAD_WEIGHTS = "quantization_config not understood"  # how a note about an unread quantization_config starts
# what to do about it, with the engines whose weight format a flag names
WEIGHTS_FIX = "fix the config.json, or name the format with --weights-dtype (in a launch command: --quantization)"


@record
class VisionTower:
    """The shapes of a vision encoder that vLLM's multimodal profiling pass runs (engines/vllm/encoder_profile.py),
    from the checkpoint's ``vision_config``. ``kind`` is the tower's model type (qwen2_5_vl, qwen3_vl,
    siglip_vision_model, llama4_vision_model ...); the sizes are 0 where kvbudget does not read them."""

    kind: str
    hidden_size: int = 0
    intermediate_size: int = 0
    depth: int = 0
    num_heads: int = 0
    patch_size: int = 0
    merge_size: int = 1  # spatial_merge_size: patches merged (per side) into one output token
    temporal_patch_size: int = 1
    in_channels: int = 3
    out_hidden_size: int = 0  # the width of one output token (the language model's hidden size)
    deepstack_layers: int = 0  # Qwen3-VL: blocks whose merged features are output too (deepstack_visual_indexes)


# how the reader's note on a cli_factor it does not place by starts (an engine that places by it drops the note)
INDEXERS_NOTE = "DSA indexers placed by index_topk_freq / index_skip_topk_offset / index_topk_pattern"


@record
class IndexerKeys:
    """The config.json keys that say which layers of a DeepSeek sparse attention (DSA) model build a lightning indexer
    and cache its keys. ``ModelSpec.layers`` places the indexers by the rule the reader follows (model/hf_config.py
    ``_dsa_indexed``: index_topk_pattern, else index_topk_freq and index_skip_topk_offset); an engine that reads the
    keys in another order places its own from these (engines/*/dsa.py)."""

    head_dim: int  # index_head_dim: each indexer's key width
    freq: int = 1  # index_topk_freq (1 when absent)
    offset: int | None = None  # index_skip_topk_offset as written (None: absent)
    pattern: tuple[bool, ...] | None = None  # index_topk_pattern: True where it names a layer "S" (None: absent)
    cli_factor: int | None = None  # LongCat's cli_factor: a fresh top-k every cli_factor layers (None: absent)
    types: tuple[bool, ...] | None = None  # indexer_types: True where "full" (None: absent)


@record
class ModelSpec:
    """A decoder as kvbudget sees it.

    ``layers`` holds the cache-holding mixers in order, one per decoder layer (two where a
    layer runs attention and Mamba side by side, as Falcon-H1); ``layer_of`` says which decoder
    layer each belongs to. ``inventory`` holds every weight tensor; ``sources`` maps each derived field to the config keys or document it came from.
    """

    name: str
    model_type: str
    layers: tuple[Layer, ...]
    layer_of: tuple[int, ...]  # decoder-layer index of each entry of ``layers``
    inventory: Inventory
    dims: Dims
    native_dtype: str
    max_context: int  # the longest context the model takes, as vLLM derives it from the config
    weight_format: WeightFormat | None  # None: the checkpoint's quantization_config is not one kvbudget reads
    sources: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()
    num_experts: int = 0
    experts_per_token: int = 0
    expert_intermediate_size: int = 0  # one routed expert's MLP width (moe_intermediate_size); 0: dense or unknown
    # Which pipeline stages hold the token embedding: "first"; "first_and_last" when the lm_head is
    # tied to it (vLLM llama.py/qwen2.py build embed_tokens on the last rank too); "every" (gemma*.py).
    pp_embedding: str = "first"
    default_context: int = 0  # what vLLM serves when --max-model-len is not given (0: max_context)
    # Multi-token-prediction layers the checkpoint carries past ``num_layers`` (num_nextn_predict_layers), for the
    # model types vLLM serves them as an MTP draft of (config/speculative.py); 0: none. Not in ``inventory``:
    # vLLM loads them only with --speculative-config '{"method": "mtp", ...}' (engines/vllm/speculative.py).
    mtp_layers: int = 0
    vision: VisionTower | None = None  # the vision encoder vLLM loads with the decoder (None: text-only)
    architecture: str = ""  # config.json's architectures[0], the class engines look up ("": none named)
    indexer: IndexerKeys | None = None  # a DSA model's indexer placement keys (None: no DSA indexer)

    @property
    def params(self) -> int:
        return self.inventory.total

    def params_by_role(self) -> dict[str, int]:
        return self.inventory.by_role()

    @property
    def num_layers(self) -> int:
        """Decoder layers (not cache entries)."""
        return len(self.inventory.layers)

    def layer_kinds(self) -> dict[str, int]:
        """How many layers of each kind, in order of first appearance."""
        return dict(Counter(layer.kind for layer in self.layers))

    def source(self, field: str) -> str:
        return dict(self.sources).get(field, "")


def checkpoint_format(spec: ModelSpec, fix: str) -> WeightFormat:
    """The checkpoint's own weight format, or one InputError naming why its quantization_config was not read (the
    note the config reader left) and ``fix``: how to name the format instead."""
    if spec.weight_format is not None:
        return spec.weight_format
    why = next((n.split("; weights need")[0] for n in spec.notes if n.startswith(UNREAD_WEIGHTS)),
               "the checkpoint's weight format is unknown")
    from .hf_config import ConfigError  # a fault of the config.json, as the reader's own errors

    raise ConfigError(f"{spec.name}: {why}: {fix}")
