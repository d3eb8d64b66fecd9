"""vLLM's multimodal encoder profiling pass (V1 engine), by mechanism, for the Qwen2.5-VL and Qwen3-VL towers.

Before the dummy text forward, ``profile_run`` (v1/worker/gpu_model_runner.py, 0.10.1 to 0.33.0) encodes a batch of
the largest dummy items of one modality and keeps the outputs in the encoder cache until the text forward and the
sampler are done; torch's peak over the whole run is what vLLM subtracts, so the KV cache loses the larger of

- the encoder stage: the dummy batch's pixels plus the vision tower's own activation peak, and
- the text stage: the text forward's peak plus what the pass holds through it (the outputs and the pixels).

The steps, each from vLLM's source (release named where the rule changed):

1. The tokens of one item, per modality (``get_mm_max_tokens_per_item`` of models/qwen2_vl.py and qwen3_vl.py):
   the image of most features under the processor's max_pixels (a huge square through smart_resize up to 0.13; the
   factor pair of max_pixels / (patch x merge)^2 from 0.14), and a video of as many frames as the context holds
   (``get_num_frames_with_most_features``: at most 16 frames up to 0.10, 14 from 0.11; Qwen3-VL 24576 in 0.11-0.14,
   2048 in 0.15; from 0.16 Qwen3-VL counts a 2-frame video at max_pixels / temporal_patch_size). Qwen3-VL 0.11 and
   0.12 count a video's tokens 12.5 times (its timestamps: 'video_soft_tokens * 12.5').
2. The budget and the batch (v1/core/encoder_cache_manager.py ``compute_mm_encoder_budget``, v1/worker/utils.py
   ``MultiModalBudget`` of 0.10.1-0.12.0, multimodal/encoder_budget.py of 0.21.0-0.33.0): the budget is
   max(max_num_batched_tokens, the largest item's tokens); the modality with the most tokens per item is profiled,
   with min(budget // tokens, max_num_seqs x items per prompt) items (at least one). A modality whose
   --limit-mm-per-prompt is 0 is left out; all 0 (or --language-model-only), or --skip-mm-profiling: no pass.
3. The bytes held: each item's output rows x the width of one output token (Qwen3-VL concatenates its deepstack
   features: out_hidden_size x (1 + deepstack layers)) x the dtype. 0.11 and 0.12 copy each output into a zeros
   tensor of the item's budget tokens when it has fewer rows ('expanded' in profile_run) and the last original stays
   referenced (the loop variable) with the storage its siblings are views of: both are held. The batch's pixels
   (patches x channels x temporal_patch_size x patch_size^2, cast to the model dtype by
   multimodal/processing.py's call of the HF processor) stay alive too (``batched_dummy_mm_inputs``).
4. The tower's peak, per rank: the pixels, plus the largest live set of one ViT block for the batch's patches
   (flash / SDPA attention: no patches x patches matrix). Qwen2.5-VL (qwen2_5_vl.py Qwen2_5_VisionBlock and
   Qwen2_5_VisionMLP): the block input, norm2's output and the residual, gate_up (2 x intermediate / TP) and
   SiluAndMul on its native path (custom ops are off under torch.compile, vLLM's default, 'custom_ops': ['none'] in
   the logs; the tower itself runs eager): the SiLU of the gate half and the product (1 + 1):
   3 x hidden + 4 x intermediate / TP elements a patch. Qwen3-VL (qwen3_vl.py
   Qwen3_VisionBlock): the input, the sum after attention, norm2's output, fc1's output and its activation:
   3 x hidden + 2 x intermediate / TP. In attention both hold the input, norm1's output and the output projection
   (3 x hidden) and, split by TP, qkv (3), the contiguous q/k copy (2), the rotated q/k (2) and the attention
   output (1): 3 x hidden + 8 x hidden / TP. The block peak is the larger of the two. Qwen3-VL's deepstack features
   already taken are alive too. With --mm-encoder-tp-mode data the tower is whole on each rank and the items are
   split over the ranks (the rank with the most items binds).

Not counted: the tower's rotary cos/sin tables and position-embedding interpolation (a few MiB), fp32 temporaries
of a norm, and the caching allocator's fragmentation. Other towers (SigLIP of Gemma 3, Llama 4's) are not modelled:
``profile_pass`` returns None for them and the plan keeps its warning.
"""

from __future__ import annotations

import difflib
import json
import math

from ..._record import record
from ...model.spec import ModelSpec, VisionTower
from ...units import GiB, InputError, element_type, excerpt
from .settings import Release, VllmSettings, version_minor

# The pixel bounds of the checkpoints' processors (preprocessor_config.json "min_pixels" / "max_pixels" of
# Qwen2.5-VL, the same for its videos: vLLM's Qwen2-VL info sizes a video by the image processor's size;
# preprocessor_config.json and video_preprocessor_config.json "size" {"shortest_edge", "longest_edge"} of Qwen3-VL).
PROCESSOR_PIXELS: dict[str, dict[str, tuple[int, int]]] = {
    "qwen2_5_vl": {"image": (3136, 12845056), "video": (3136, 12845056)},
    "qwen3_vl": {"image": (65536, 16777216), "video": (4096, 25165824)},
}
DEFAULT_LIMIT = 999  # config/multimodal.py get_limit_per_prompt (0.12.0): a modality not named allows 999 items
MODALITIES = ("image", "video")


@record
class EncoderPass:
    """What vLLM's profiling run spends on the vision encoder, per rank (bytes)."""

    modality: str
    items: int
    tokens_per_item: int  # the item's tokens as the budget counts them (get_mm_max_tokens_per_item)
    rows_per_item: int  # the encoder's output rows for the dummy item
    patches_per_item: int
    budget: int  # "Encoder cache will be initialized with a budget of N tokens"
    held_bytes: int  # encoder outputs kept through the text forward
    pixel_bytes: int  # the dummy batch's pixels, alive through the whole run
    tower_bytes: int  # the tower's own peak above the pixels (the largest ViT block for the batch)
    rule: str  # the release whose rules were applied

    @property
    def log_line(self) -> str:
        return (f"Encoder cache will be initialized with a budget of {self.budget} tokens, and profiled with "
                f"{self.items} {self.modality} items of the maximum feature size.")

    def peak(self, text_peak: int) -> int:
        """The profiled peak: the encoder stage or the text stage with the pass's tensors held, whichever is larger."""
        return max(self.pixel_bytes + self.tower_bytes, text_peak + self.held_bytes + self.pixel_bytes)


# --- the processor's arithmetic (transformers' Qwen2-VL / Qwen3-VL smart_resize, as vLLM calls it) -------------


def smart_resize(height: int, width: int, factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """An image's size after the Qwen2-VL processor's resize: each side a multiple of ``factor``, the area within
    [min_pixels, max_pixels] (transformers models/qwen2_vl/image_processing_qwen2_vl.py smart_resize; the float
    operations in the same order, so the floors land where the processor's do)."""
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def video_smart_resize(frames: int, height: int, width: int, temporal: int, factor: int, min_pixels: int,
                       max_pixels: int) -> tuple[int, int]:
    """A video frame's size after the Qwen3-VL video processor's resize: the pixel bounds hold for all frames
    together, the frames padded to a multiple of ``temporal`` (transformers
    models/qwen3_vl/video_processing_qwen3_vl.py smart_resize)."""
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    t_bar = math.ceil(frames / temporal) * temporal
    if t_bar * h_bar * w_bar > max_pixels:
        beta = math.sqrt((frames * height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif t_bar * h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (frames * height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def most_features_size(v: VisionTower, max_pixels: int, min_pixels: int, minor: int) -> tuple[int, int]:
    """The dummy image's (height, width) (qwen2_vl.py get_image_size_with_most_features): up to 0.13 a 9999999-pixel
    square through smart_resize; from 0.14 the factor pair of max_pixels // unit^2 closest to a square whose sides'
    ratio is at most 200 (unit = patch x merge)."""
    unit = v.patch_size * v.merge_size
    if minor <= 13:
        return smart_resize(9999999, 9999999, unit, min_pixels, max_pixels)
    cells = max_pixels // (unit * unit)
    for n in range(cells, 0, -1):
        d = next(d for d in range(math.isqrt(n), 0, -1) if n % d == 0)
        if (n // d) / d <= 200:
            return unit * d, unit * (n // d)
    return unit, unit


def _grid_tokens(v: VisionTower, frames: int, height: int, width: int) -> int:
    """Output tokens of ``frames`` frames of height x width (qwen2_vl.py _get_vision_info): the frames padded to
    temporal_patch_size, patches of patch_size, merge_size^2 patches to a token."""
    t = v.temporal_patch_size
    grid_t = max((frames + (-frames % t)) // t, 1)
    return grid_t * (height // v.patch_size) * (width // v.patch_size) // (v.merge_size ** 2)


@record
class _Item:
    tokens: int  # as the budget counts them
    rows: int  # the encoder's output rows


def _pixels(v: VisionTower, modality: str, settings: VllmSettings) -> tuple[int, int]:
    """A modality's (min, max) pixels: its images_kwargs / videos_kwargs bound, else the flat one, else the
    processor's own."""
    lo, hi = PROCESSOR_PIXELS[v.kind][modality]
    s_hi, s_lo = next(((h, low) for name, h, low in settings.mm_scoped_pixels if name == modality), (None, None))
    return s_lo or settings.mm_min_pixels or lo, s_hi or settings.mm_max_pixels or hi


def _max_frames(tokens_of: object, seq_len: int, start: int, cap: int) -> int:
    """qwen2_vl.py _get_max_video_frames and get_num_frames_with_most_features for one video: the most frames whose
    tokens fit ``seq_len`` (from ``start``), at most ``cap`` (and at least one)."""
    assert callable(tokens_of)
    n = start
    while n < cap and tokens_of(n + 1) <= seq_len:
        n += 1
    return max(min(n, cap), 1)


def _items(v: VisionTower, settings: VllmSettings, seq_len: int, enabled: tuple[str, ...], minor: int) -> dict[str, _Item]:
    """Each enabled modality's dummy item (step 1 of the module docstring)."""
    out: dict[str, _Item] = {}
    lo, hi = _pixels(v, "image", settings)
    ih, iw = most_features_size(v, hi, lo, minor)
    image = _grid_tokens(v, 1, *smart_resize(ih, iw, v.patch_size * v.merge_size, lo, hi))
    if "image" in enabled:
        out["image"] = _Item(image, image)
    if "video" not in enabled:
        return out
    vlo, vhi = _pixels(v, "video", settings)
    unit = v.patch_size * v.merge_size
    if v.kind == "qwen2_5_vl":
        def per_frames(n: int) -> int:  # each frame resized on its own, with the image processor's bounds
            return _grid_tokens(v, n, *smart_resize(ih, iw, unit, vlo, vhi))
        if minor <= 10:  # 0.10.1: 16 frames at most, the context less one image's tokens when images are on
            budget = seq_len - (image if "image" in enabled else 0)
            frames = _max_frames(per_frames, budget, 0, 16)
        else:
            frames = _max_frames(per_frames, seq_len, 1, 14)
        rows = per_frames(frames)
        out["video"] = _Item(rows, rows)
        return out

    def per_video(n: int, h: int = ih, w: int = iw) -> int:  # Qwen3-VL: the bounds hold for the whole video
        return _grid_tokens(v, n, *video_smart_resize(n, h, w, v.temporal_patch_size, unit, vlo, vhi))
    if minor >= 16:
        vh, vw = most_features_size(v, vhi // v.temporal_patch_size, vlo, minor)
        rows = per_video(2, vh, vw)
        out["video"] = _Item(rows, rows)
        return out
    frames = _max_frames(per_video, seq_len, 2, 2048 if minor == 15 else 24576)
    rows = per_video(frames)
    out["video"] = _Item(int(rows * 12.5) if minor <= 12 else rows, rows)
    return out


def _limits(settings: VllmSettings) -> dict[str, int]:
    given = dict(settings.mm_limits)
    if settings.language_model_only:
        return dict.fromkeys(MODALITIES, 0)
    return {m: given.get(m, DEFAULT_LIMIT) for m in MODALITIES}


def _minor(settings: VllmSettings, rel: Release) -> int:
    """The release whose rules apply: the version's minor; a bare line name takes its newest release."""
    minor = version_minor(settings.version)
    if minor is not None:
        return minor
    return 33 if rel.key == "current" else 20


def profile_pass(spec: ModelSpec, settings: VllmSettings, rel: Release, max_model_len: int, max_num_batched_tokens: int,
                 max_num_seqs: int, tp: int, dtype: str) -> EncoderPass | None:
    """The encoder pass of vLLM's profiling run for ``spec`` (None: no pass, or a tower kvbudget does not model)."""
    v = spec.vision
    if v is None or v.kind not in PROCESSOR_PIXELS or rel.key == "v0" or settings.skip_mm_profiling:
        return None
    limits = _limits(settings)
    enabled = tuple(m for m in MODALITIES if limits[m] > 0)
    if not enabled:
        return None  # compute_mm_encoder_budget: every modality disabled, no encoder cache, no pass
    minor = _minor(settings, rel)
    minor = max(minor, 11) if v.kind == "qwen3_vl" else minor  # Qwen3-VL arrived in 0.11
    items = _items(v, settings, max_model_len, enabled, minor)
    key = (lambda m: (items[m].tokens, m)) if minor >= 21 else (lambda m: (items[m].tokens, -MODALITIES.index(m)))
    modality = max(items, key=key)  # get_modality_with_max_tokens (0.21+: ties to the later name)
    item = items[modality]
    budget = max(max_num_batched_tokens, max(i.tokens for i in items.values()))
    per_prompt = max(1, min(limits[modality], max_model_len // item.tokens))
    reqs = max_num_seqs
    if settings.enable_chunked_prefill is False:
        reqs = min(reqs, max_num_batched_tokens // item.tokens)
    count = max(1, min(budget // item.tokens, reqs * per_prompt))
    return _memory(v, modality, count, item, budget, tp, settings.mm_encoder_tp_mode == "data", dtype, minor)


def _memory(v: VisionTower, modality: str, items: int, item: _Item, budget: int, tp: int, data_mode: bool, dtype: str,
            minor: int) -> EncoderPass:
    """Steps 3 and 4: the bytes held through the text forward and the tower's peak, per rank."""
    b = element_type(dtype).nbytes(1)
    width = v.out_hidden_size * (1 + v.deepstack_layers)
    held = items * item.rows * width
    if minor in (11, 12) and item.rows < item.tokens:
        held += items * item.tokens * width  # the zeros tensors of the budget's tokens, the originals still referenced
    patches = item.rows * v.merge_size ** 2
    pixels = items * patches * v.in_channels * v.temporal_patch_size * v.patch_size ** 2
    t = 1 if data_mode else tp
    on_rank = -(-items // tp) if data_mode else items  # data mode: the items split over the ranks
    s = on_rank * patches
    h, i = v.hidden_size, v.intermediate_size
    mlp = 3 * h + (4 if v.kind == "qwen2_5_vl" else 2) * i / t
    attention = 3 * h + 8 * h / t
    block = s * max(mlp, attention) + v.deepstack_layers * on_rank * item.rows * v.out_hidden_size
    return EncoderPass(modality, items, item.tokens, item.rows, patches, budget, held * b, pixels * b, int(block * b),
                       f"vLLM 0.{minor}")


def note(p: EncoderPass, v: VisionTower) -> str:
    """The plan's note on the pass: what it encodes and holds, and how it enters the profiled peak."""
    return (f"vision encoder profiling ({p.rule} rules, gpu_model_runner.py profile_run): {p.items} dummy {p.modality} "
            f"item(s) of {p.rows_per_item:,} tokens ({p.patches_per_item:,} patches of {v.patch_size}px) encoded; the "
            f"profiled peak is the larger of the encoder stage (pixels {p.pixel_bytes / GiB:.2f} GiB + the {v.depth}-block "
            f"tower's {p.tower_bytes / GiB:.2f} GiB) and the text forward with {(p.held_bytes + p.pixel_bytes) / GiB:.2f} GiB "
            f"held (outputs and pixels). vLLM logs '{p.log_line}'; --limit-mm-per-prompt with 0 items or "
            "--skip-mm-profiling drops the pass. Not counted: the tower's rotary tables, norm temporaries, fragmentation")


# --- engine arguments ---------------------------------------------------------------------------------------------


# Dummy-data options a count may carry from 0.11 (config/multimodal.py of 0.33.0: ImageDummyOptions, VideoDummyOptions,
# AudioDummyOptions, each with extra="forbid"; another modality's BaseDummyOptions takes count only)
_DUMMY_KEYS = {"image": ("width", "height"), "video": ("num_frames", "width", "height"), "audio": ("length",)}
_LIMITS_EG = '\'{"image": 2, "video": 0}\''


def parse_limits(value: str, label: str, version: str = "current") -> tuple[tuple[tuple[str, int], ...], list[str]]:
    """--limit-mm-per-prompt as vLLM reads it, and the notes on it: a JSON object of counts ('{"image": 2, "video": 0}';
    from 0.11 a count may be an object with "count" and dummy sizes, config/multimodal.py), or, up to 0.9, the
    key=value form ('image=2,video=0', engine/arg_utils.py nullable_kvs; 0.10 reads JSON only)."""
    from .settings import version_minor

    minor = version_minor(version)
    text = value.strip()
    pairs: list[tuple[str, object]]
    if text.startswith("{"):
        try:
            loaded = json.loads(text[:10_000])
        except ValueError:
            raise InputError(f"{label}: not a JSON object of counts (e.g. {_LIMITS_EG})") from None
        if not isinstance(loaded, dict):
            raise InputError(f"{label}: give a JSON object of counts (e.g. {_LIMITS_EG})")
        pairs = list(loaded.items())
    elif minor is not None and minor <= 9:
        pairs = []
        for part in text.split(","):
            word, eq, given = part.partition("=")
            if not eq or not word.strip():
                raise InputError(f"{label}: {excerpt(part, 40)} is not KEY=VALUE (e.g. image=2,video=0)")
            try:  # nullable_kvs: int() of each value
                pairs.append((word.strip().lower(), int(given.strip())))
            except ValueError:
                pairs.append((word.strip().lower(), given.strip()))
    else:
        release = f"vLLM 0.{minor}" if minor is not None else "vLLM 0.33"
        raise InputError(f"{label} {excerpt(text, 40)}: {release} reads a JSON object only (the image=2,video=0 form "
                         f"went in 0.10); give e.g. {_LIMITS_EG}")
    out: list[tuple[str, int]] = []
    notes: list[str] = []
    for key, raw in pairs[:32]:
        name = str(key).strip()[:40]
        count: object = raw
        if isinstance(raw, dict):
            if minor is not None and minor <= 10:
                raise InputError(f"{label}: {name!r} is an object; vLLM 0.{minor} takes a count per modality (the "
                                 "\"count\" object is from 0.11)")
            allowed = _DUMMY_KEYS.get(name, ())
            for field, size in raw.items():
                if field == "count" or (field not in allowed and name not in _DUMMY_KEYS):
                    continue  # another modality's options take count only (extra keys ignored)
                if field not in allowed:
                    raise InputError(f"{label}: {name!r} takes {', '.join(('count', *allowed))}, not "
                                     f"{str(field)[:40]!r} (vLLM's dummy options)")
                if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= 1 << 20:
                    raise InputError(f"{label}: {name}.{field} must be a whole number of 1 or more, got "
                                     f"{str(size)[:40]!r}")
            sizes = sorted(f for f in raw if f != "count" and f in allowed)
            if sizes:
                notes.append(f"{label}: kvbudget does not model the memory it takes (the {name} dummy "
                             f"{'/'.join(sizes)} override; the profile is of the largest item)")
            count = raw.get("count", 999)
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= 1 << 20:
            raise InputError(f"{label}: {name!r} needs a whole count of 0 or more items, got {str(count)[:40]!r} "
                             f"(e.g. {_LIMITS_EG})")
        if name not in _DUMMY_KEYS:
            notes.append(f"{label}: {name!r} is not image, video or audio; vLLM passes over a modality the model does "
                         "not take, and the others keep 999 items")
        out.append((name, count))
    return tuple(out), notes


_PIXELS_EG = '\'{"max_pixels": 1003520}\''
_SCOPES = {"images_kwargs": "image", "videos_kwargs": "video"}
_SIZE_KEYS = ("max_pixels", "min_pixels", "size")


def _scope_bounds(obj: dict[str, object], label: str) -> tuple[int | None, int | None, list[str]]:
    """One scope's pixel bounds (max, min) and the keys in it kvbudget passes over: "max_pixels" / "min_pixels" win
    over "size" {"longest_edge", "shortest_edge"} (qwen2_vl.py _get_vision_size of vLLM 0.33.0)."""
    raw_size = obj.get("size")
    if raw_size is not None and not isinstance(raw_size, dict):
        # _get_vision_size updates the processor's size dict with it: vLLM stops on anything but an object
        raise InputError(f"{label}: size must be an object of pixel bounds, got {excerpt(json.dumps(raw_size), 40)} "
                         '(e.g. \'{"size": {"longest_edge": 1003520, "shortest_edge": 3136}}\')')
    size: dict[str, object] = raw_size or {}
    bounds: list[int | None] = []
    for key, alt in (("max_pixels", "longest_edge"), ("min_pixels", "shortest_edge")):
        raw = obj.get(key, size.get(alt))
        if raw is None:
            bounds.append(None)
            continue
        if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= 1 << 32:  # 4.3 gigapixels at most
            raise InputError(f"{label}: {key} must be a whole number of pixels, got {str(raw)[:40]!r}")
        bounds.append(raw)
    hi, lo = bounds
    notes = [f"{label}: size.{str(k)[:40]} changes no size kvbudget models (it reads longest_edge and shortest_edge)"
             for k in list(size)[:8] if k not in ("longest_edge", "shortest_edge")]
    if hi is not None and lo is not None and lo > hi:
        notes.append(f"{label}: min_pixels {lo:,} is above max_pixels {hi:,}; the processor's smart_resize shrinks the "
                     "largest item to max_pixels and takes min_pixels only for smaller ones (transformers qwen2_vl)")
    return hi, lo, notes


def parse_processor_kwargs(value: str, label: str) -> tuple[int | None, int | None,
                                                               tuple[tuple[str, int | None, int | None], ...], list[str]]:
    """--mm-processor-kwargs' pixel bounds (the Qwen-VL processors' keys) as vLLM 0.33.0 reads them: the flat
    "max_pixels" / "min_pixels" (or "size" {"longest_edge", "shortest_edge"}) for every modality, and the same keys
    inside "images_kwargs" / "videos_kwargs" for that modality alone, winning over the flat ones
    (multimodal/processing/context.py: a scoped value takes precedence). Returns (max, min, the scoped (modality, max,
    min), notes); a key naming no size kvbudget models is passed over with a note (vLLM hands it to the processor)."""
    try:
        loaded = json.loads(value.strip()[:10_000])
    except ValueError:
        raise InputError(f"{label}: not a JSON object (e.g. {_PIXELS_EG})") from None
    if not isinstance(loaded, dict):
        raise InputError(f"{label}: give a JSON object (e.g. {_PIXELS_EG})")
    hi, lo, notes = _scope_bounds(loaded, label)
    scoped: list[tuple[str, int | None, int | None]] = []
    for key, modality in _SCOPES.items():
        inner = loaded.get(key)
        if inner is None:
            continue
        if not isinstance(inner, dict):
            raise InputError(f"{label}: {key} must be an object of the {modality} processor's options, got "
                             f"{excerpt(json.dumps(inner), 40)} (e.g. \'{{\"{key}\": {{\"max_pixels\": 1003520}}}}\')")
        s_hi, s_lo, s_notes = _scope_bounds(inner, f"{label} {key}")
        notes += s_notes
        if s_hi is not None or s_lo is not None:
            scoped.append((modality, s_hi, s_lo))
    other = [str(k) for k in loaded if k not in (*_SIZE_KEYS, *_SCOPES)]
    for key in other[:8]:
        close = difflib.get_close_matches(key.lower(), [*_SIZE_KEYS, *_SCOPES], n=1, cutoff=0.75)
        hint = f" (did you mean {close[0]}?)" if close else ""
        notes.append(f"{label}: {excerpt(key, 40)} changes no size kvbudget models{hint}; vLLM passes it to the "
                     "processor, and the item is planned from max_pixels, min_pixels and size")
    return hi, lo, tuple(scoped), notes
