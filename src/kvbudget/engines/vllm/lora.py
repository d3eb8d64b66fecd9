"""``--enable-lora``: the adapter slots vLLM preallocates on every LoRA-wrapped layer, per release line.

What vLLM does (paths relative to the ``vllm`` package; 0.33.0 unless a release is named):

* lora/model_manager.py ``_create_lora_modules`` wraps every module whose name ends in one of the model's supported
  LoRA modules (lora/utils.py ``get_supported_lora_modules``: every ``LinearBase`` and fused-MoE runner, plus the
  class's ``embedding_modules``), each through lora/utils.py ``from_layer`` -> ``create_lora_weights(max_loras, ...)``.
  The same rule holds in 0.8.5 and 0.10.1 (lora/models.py). The vision tower is not wrapped unless
  ``--enable-tower-connector-lora``.
* lora/layers/base_linear.py, column_parallel_linear.py, row_parallel_linear.py: per output slice (q, k, v of a QKV
  projection; gate, up of a merged gate/up) ``lora_a_stacked (max_loras, 1, rank, input_size)`` and
  ``lora_b_stacked (max_loras, 1, output_size, rank)`` in ``lora_dtype`` (``auto``: the model's dtype, config/lora.py
  ``verify_with_model_config``). Column-parallel layers keep the whole input and their share of the output (a KV
  slice at least one head, as the base layer); row-parallel layers their share of the input and the whole output.
  ``--fully-sharded-loras`` divides the rank of a column-parallel A, and the output of a row-parallel B, by TP.
  A replicated linear (an MoE router ``gate``, MLA's ``q_a_proj``) keeps everything.
* lora/layers/vocab_parallel_embedding.py: ``lora_a (max_loras, vocab, rank)`` and ``lora_b (max_loras, 1, hidden,
  rank)``, whole on every rank; logits_processor.py (the ``lm_head``): ``lora_a (max_loras, 1, rank, hidden)``,
  ``lora_b (max_loras, 1, vocab, rank)``; refused when the vocabulary is over 258,048 (over 257,024 up to 0.16).
  Only models whose class names ``embed_tokens`` / ``lm_head`` in ``embedding_modules`` (Llama, Mixtral, Granite;
  Qwen3 from 0.16; Mistral until its own class in 0.32).
* Up to 0.11 (``lora_extra_vocab_size``, default 256 of 256 or 512): the embedding's A has ``vocab + extra`` rows
  and an ``embeddings_tensors (max_loras, extra, hidden)``; the logits' B has ``vocab + extra`` rows padded to 256
  and the same ``embeddings_tensors``; the base embedding and lm_head grow by ``extra`` rows (models/llama.py).
* lora/layers/fused_moe.py (from 0.12): per local expert, ``w13`` A (rank x hidden) and B (intermediate share x rank)
  for gate and up, ``w2`` A (rank x intermediate share) and B (hidden x rank); with expert parallelism the local
  experts are whole. Before 0.12 the experts are not wrapped.
* lora/punica_wrapper/punica_base.py, punica_gpu.py: index tensors of ``max_num_batched_tokens`` (4 int64 + 4 int32)
  and ``max_num_seqs`` (3 int64) entries.
* When: v1/worker/gpu_model_runner.py ``load_model`` (0.8.5, 0.10.1, 0.33.0) and V0's worker/model_runner.py
  (0.8.5) build the LoRA manager inside the ``DeviceMemoryProfiler`` of "Model loading took X GiB": the slots are in
  that figure. The dummy adapters of the profiling run are built on the CPU (lora/model_manager.py
  ``create_dummy_lora``) and copied into the slots. Up to 0.15 the profiling run activates them
  (lora_model_runner_mixin.py ``maybe_dummy_run_with_lora``, V0 ``_add_dummy_loras``), so each LoRA layer's shrink
  step holds ``slices x tokens x rank`` fp32 (punica_gpu.py ``add_lora_linear``); from 0.16 it runs with
  ``num_active_loras = 0`` and no LoRA kernel runs.
* Refusals (config/lora.py, config/__init__.py of 0.10.1, config.py of 0.6.4 / 0.7.3 / 0.8.5): the rank must be one
  of (8 .. 256) up to 0.7, (8 .. 512 with 320) in 0.8-0.11, (1, 8 .. 512 with 320) from 0.12; ``max_loras >= 1``;
  ``max_cpu_loras >= max_loras``; ``lora_extra_vocab_size`` 256 or 512; ``lora_dtype`` auto, float16 or bfloat16.
"""

from __future__ import annotations

from ..._record import record
from ...model.params import Tensor
from ...model.spec import ModelSpec
from ...parallel import local_experts
from ...units import InputError
from .settings import Release, VllmSettings, version_minor

# The release a line name stands for (settings.release: "current" is 0.33, "v1" 0.8-0.20 read as 0.10.1, "v0" <= 0.7).
_LINE_MINOR = {"current": 33, "v1": 10, "v0": 7}
_RANKS_OLD = (8, 16, 32, 64, 128, 256)
_RANKS_V1 = (8, 16, 32, 64, 128, 256, 320, 512)
_RANKS_NEW = (1, 8, 16, 32, 64, 128, 256, 320, 512)
_DTYPES = ("auto", "float16", "bfloat16", "half")
_TOKENS_FIELDS = 4 * 8 + 4 * 4  # punica: 4 int64 and 4 int32 entries per batched token
_SEQ_FIELDS = 3 * 8  # 3 int64 per sequence


def minor(settings: VllmSettings, rel: Release) -> int:
    """The 0.x minor release the LoRA rules are read for."""
    m = version_minor(settings.version)
    return m if m is not None else _LINE_MINOR[rel.key]


def ranks(m: int) -> tuple[int, ...]:
    """The ``--max-lora-rank`` values vLLM 0.``m`` accepts."""
    return _RANKS_OLD if m <= 7 else _RANKS_V1 if m <= 11 else _RANKS_NEW


def embedding_lora(model_type: str, m: int) -> bool:
    """Whether the model's class wraps ``embed_tokens`` and ``lm_head`` (its ``embedding_modules``) in 0.``m``."""
    if model_type in ("llama", "mixtral", "granite"):
        return True
    if model_type in ("qwen3", "qwen3_moe"):
        return m >= 16
    if model_type == "mistral":  # served by LlamaForCausalLM until models/mistral.py's class (embedding_modules {})
        return m < 32
    return False


def check(settings: VllmSettings, rel: Release) -> None:
    """vLLM's own refusals of the LoRA sizes, for the release (one error line each)."""
    if not settings.enable_lora:
        return
    m = minor(settings, rel)
    allowed = ranks(m)
    if settings.max_lora_rank not in allowed:
        raise InputError(f"--max-lora-rank {settings.max_lora_rank}: vLLM 0.{m} takes one of "
                         f"{', '.join(map(str, allowed))} (max_lora_rank must be one of them)")
    if settings.max_loras < 1:
        raise InputError(f"--max-loras {settings.max_loras}: vLLM needs at least 1 (max_loras >= 1)")
    if settings.max_cpu_loras is not None and settings.max_cpu_loras < settings.max_loras:
        raise InputError(f"--max-cpu-loras {settings.max_cpu_loras} is below --max-loras {settings.max_loras}: vLLM "
                         f"stops ('max_cpu_loras must be >= max_loras'); give at least {settings.max_loras}")
    if m <= 11 and settings.lora_extra_vocab_size not in (256, 512):
        raise InputError(f"--lora-extra-vocab-size {settings.lora_extra_vocab_size}: vLLM 0.{m} takes 256 or 512")
    if settings.lora_dtype.strip().lower().removeprefix("torch.") not in _DTYPES:
        raise InputError(f"--lora-dtype {settings.lora_dtype[:40]!r}: vLLM takes auto, float16 or bfloat16")


@record
class LoraMemory:
    """The LoRA slots of one TP rank of each pipeline stage (bytes, in "Model loading took"), the profiling run's
    extra activation, and the per-layer arithmetic for the note."""

    per_stage: tuple[int, ...]
    activation: int
    per_layer: int  # the slots of one decoder layer of the fullest kind (bytes)
    embedding: int  # embedding + lm_head slots (and the extra vocabulary rows up to 0.11)
    metadata: int  # punica index tensors
    experts: bool  # the routed experts carry slots (fused-MoE LoRA, from 0.12)
    release_minor: int


def _linear(t: Tensor, loras: int, rank: int, tp: int, fully: bool) -> int:
    """Elements of one LoRA-wrapped linear tensor's A and B stacks (all ``t.count`` of them) on one TP rank."""
    if t.split == "row":
        cols = -(-t.cols // tp)
        a = rank * cols
        b = (-(-t.rows // tp) if fully else t.rows) * rank
    elif t.split in ("col", "kv", "vocab"):
        rows, _ = t.shape_per_rank(tp)
        a = (rank // tp if fully else rank) * t.cols
        b = rows * rank
    else:  # replicated
        a, b = rank * t.cols, t.rows * rank
    return loras * (a + b) * t.count


def _wrapped(t: Tensor) -> bool:
    """A tensor vLLM wraps with LoRA: a linear layer's weight (an MoE router's ``gate`` is a ReplicatedLinear)."""
    return (t.linear or (t.role == "router" and t.cols > 1)) and t.role not in ("experts", "vision")


def _experts(t: Tensor, spec: ModelSpec, loras: int, rank: int, tp: int, ep: int, fully: bool) -> int:
    """fused_moe.py's per-expert stacks of one routed-expert tensor: with EP the rank's whole local experts."""
    if ep > 1:
        per = t.count // max(spec.num_experts, 1)
        return _linear(Tensor(t.role, t.rows, t.cols, per * local_experts(spec.num_experts, ep), "none"), loras, rank, 1,
                       False)
    return _linear(t, loras, rank, tp, fully)


def layer_elements(block: tuple[Tensor, ...], spec: ModelSpec, s: VllmSettings, m: int, tp: int, ep: int) -> int:
    """LoRA elements of one decoder layer on one TP rank."""
    n = 0
    for t in block:
        if t.role == "experts" and t.linear:
            if m >= 12:
                n += _experts(t, spec, s.max_loras, s.max_lora_rank, tp, ep, s.fully_sharded_loras)
        elif _wrapped(t):
            n += _linear(t, s.max_loras, s.max_lora_rank, tp, s.fully_sharded_loras)
    return n


def embedding_elements(spec: ModelSpec, s: VllmSettings, m: int, tp: int) -> tuple[int, int]:
    """(embedding-side, lm_head-side) elements on one TP rank: the slots, and up to 0.11 the extra vocabulary
    rows of the slots and of the base embedding and lm_head. (0, 0) for a model whose class wraps neither."""
    if not embedding_lora(spec.model_type, m):
        return 0, 0
    v, h, r, n = spec.dims.vocab_size, spec.dims.hidden_size, s.max_lora_rank, s.max_loras
    if m >= 12:
        return n * (v * r + h * r), n * (r * h + v * r)
    extra = s.lora_extra_vocab_size
    base = extra * h // tp  # the base embedding / lm_head's extra rows, split over the ranks
    head = n * (extra * h + (v + extra) * r + h * r) + base
    padded = -(-(v + extra) // 256) * 256  # lora_vocab_padding_size 256 (CUDA)
    tail = n * (r * h + padded * r + extra * h) + base
    return head, tail


def vocab_limit(spec: ModelSpec, s: VllmSettings, m: int) -> None:
    """logits_processor.py: the LoRA lm_head refuses a vocabulary over 257,024 (258,048 from 0.17)."""
    if not embedding_lora(spec.model_type, m):
        return
    vocab = spec.dims.vocab_size + (s.lora_extra_vocab_size if m <= 11 else 0)
    limit = 258_048 if m >= 17 else 257_024
    if vocab > limit:
        raise InputError(f"{spec.name} with --enable-lora: vLLM 0.{m} stops ('When using LoRA, vocab size must be "
                         f"<= {limit}'; the LoRA vocabulary is {vocab:,}); serve it without --enable-lora")


def lora_memory(spec: ModelSpec, s: VllmSettings, rel: Release, stage_layers: tuple[tuple[int, int], ...], tp: int,
                ep: int, tokens: int, seqs: int, nbytes: int) -> LoraMemory | None:
    """The LoRA slots of each stage (``stage_layers``: each stage's first decoder layer and count) on one TP rank,
    in ``nbytes``-byte elements, plus the punica index tensors; and the profiling run's shrink buffer. None
    without ``--enable-lora``."""
    if not s.enable_lora:
        return None
    check(s, rel)
    m = minor(s, rel)
    vocab_limit(spec, s, m)
    if m >= 12 and ep > 1 and s.fully_sharded_loras and spec.num_experts:
        raise InputError("--fully-sharded-loras with --enable-expert-parallel: vLLM stops (fused_moe.py: EP and "
                         "fully sharded LoRA split the same group); drop one of them")
    if s.fully_sharded_loras and tp > 1 and s.max_lora_rank % tp:
        raise InputError(f"--fully-sharded-loras: rank {s.max_lora_rank} does not divide over TP {tp} (vLLM's divide() "
                         "stops); give a rank that TP divides")
    head, tail = embedding_elements(spec, s, m, tp)
    metadata = tokens * _TOKENS_FIELDS + seqs * _SEQ_FIELDS
    blocks = spec.inventory.layers
    per_stage: list[int] = []
    for k, (first, count) in enumerate(stage_layers):
        n = sum(layer_elements(blocks[i], spec, s, m, tp, ep) for i in range(first, first + count))
        n += (head if k == 0 else 0) + (tail if k == len(stage_layers) - 1 else 0)
        per_stage.append(n * nbytes + metadata)
    fullest = max(blocks, key=lambda b: layer_elements(b, spec, s, m, tp, ep)) if blocks else ()
    # the profiling run's shrink step of a merged gate/up (2 slices) in fp32, up to 0.15 (V0 included)
    activation = 2 * tokens * s.max_lora_rank * 4 if m <= 15 else 0
    return LoraMemory(tuple(per_stage), activation, layer_elements(fullest, spec, s, m, tp, ep) * nbytes,
                      (head + tail) * nbytes, metadata, m >= 12 and spec.num_experts > 0, m)


def note(lm: LoraMemory, s: VllmSettings, stage_bytes: int) -> str:
    """What the plan says of the LoRA slots."""
    gib = 1 << 30
    text = (f"LoRA: {s.max_loras} adapter slot(s) of rank {s.max_lora_rank} on every wrapped layer "
            f"(vLLM 0.{lm.release_minor} lora/layers create_lora_weights): {stage_bytes / gib:.2f} GiB on this rank, "
            f"{lm.per_layer / gib * 1024:.1f} MiB per decoder layer"
            + (f", {lm.embedding / gib * 1024:.1f} MiB for the embedding and lm_head" if lm.embedding else "")
            + "; allocated at model load, inside 'Model loading took'")
    if lm.activation:
        text += (f"; the profiling run activates dummy adapters (up to 0.15): +{lm.activation / gib * 1024:.1f} MiB "
                 "of fp32 shrink buffer in the activation peak")
    return text
