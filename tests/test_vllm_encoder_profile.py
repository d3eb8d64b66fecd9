"""vLLM's vision-encoder profiling pass (engines/vllm/encoder_profile.py), figure by figure.

Every figure is worked out here by hand from the processor's rules and the checkpoint's config (the release whose
vLLM source gives the rule is named), or read from a published start-up log in tests/data/vllm_logs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import kvbudget
from kvbudget.engines.vllm.command import LaunchCommand, parse_vllm_command
from kvbudget.engines.vllm.encoder_profile import EncoderPass, most_features_size, profile_pass, smart_resize, video_smart_resize
from kvbudget.engines.vllm.policy import plan
from kvbudget.engines.vllm.settings import VllmSettings, release
from kvbudget.hardware import find_gpu
from kvbudget.units import GiB, InputError

LOGS = Path(__file__).parent / "data" / "vllm_logs"
QWEN3_VL = "Qwen/Qwen3-VL-30B-A3B-Instruct"
QWEN25_VL = "Qwen/Qwen2.5-VL-7B-Instruct"
BF16 = 2


def _pass(model: str, version: str, max_len: int, mnbt: int, seqs: int = 256, tp: int = 1,
          **kw: object) -> EncoderPass | None:
    settings = VllmSettings(version=version, **kw)  # type: ignore[arg-type]
    return profile_pass(kvbudget.load_model(model), settings, release(version), max_len, mnbt, seqs, tp, "bf16")


# --- step 1: the dummy item's tokens, from the processor's rules ---------------------------------------------------


def test_qwen2_5_vl_image_item_by_hand() -> None:
    """preprocessor_config.json max_pixels 12845056, patch 14, merge 2: a 28-pixel unit, 12845056 / 28^2 = 16384
    cells = 128 x 128, so the dummy image is 3584 x 3584 (both the pre-0.14 huge square through smart_resize and the
    0.14+ factor pair give it): (3584 / 14)^2 = 65,536 patches, 4 to a token = 16,384 tokens."""
    spec = kvbudget.load_model(QWEN25_VL)
    assert spec.vision is not None
    assert most_features_size(spec.vision, 12845056, 3136, 13) == (3584, 3584)
    assert most_features_size(spec.vision, 12845056, 3136, 33) == (3584, 3584)
    p = _pass(QWEN25_VL, "0.33.0", 128000, 2048, mm_limits=(("video", 0),))
    assert p is not None and p.modality == "image"
    assert p.tokens_per_item == p.rows_per_item == (3584 // 14) ** 2 // 4 == 16384
    assert p.patches_per_item == 65536


@pytest.mark.parametrize(("version", "max_len", "frames"), [
    ("0.33.0", 128000, 14),  # 0.11+: at most 14 frames; 14 frames = 7 temporal patches x 16,384 = 114,688 <= 128,000
    ("0.33.0", 32768, 4),  # 4 frames = 2 x 16,384 = 32,768 fits, 5 frames pad to 6 = 49,152 does not
    ("0.12.0", 65536, 8),
    ("0.10.1", 49152, 4),  # 0.10.1: the context less one image's 16,384 tokens: 4 frames = 32,768 fit, 5 do not
    ("0.10.1", 128000, 12),  # 128,000 - 16,384 = 111,616: 12 frames = 98,304 fit, 13 (padded to 14: 114,688) do not
])
def test_qwen2_5_vl_video_item_frames_rule_per_release(version: str, max_len: int, frames: int) -> None:
    """qwen2_vl.py get_num_frames_with_most_features: each frame resized on its own to 3584 x 3584 (16,384 tokens
    per temporal patch of 2 frames); the most frames whose tokens fit the context, at most 14 (0.11.0, 0.12.0,
    0.33.0) or 16 with the image's tokens taken off the context first (0.10.1)."""
    assert _pass(QWEN25_VL, "0.10.1", 10**6, 2048).rows_per_item == 8 * 16384  # type: ignore[union-attr]  # 16 frames
    p = _pass(QWEN25_VL, version, max_len, 2048)
    assert p is not None and p.modality == "video"
    assert p.rows_per_item == -(-frames // 2) * 16384


def test_qwen3_vl_items_per_release() -> None:
    """Qwen3-VL: image processor size longest_edge 16777216, patch 16, merge 2 -> 4096 x 4096 -> 16,384 tokens.
    Video processor longest_edge 25165824 for all frames together: at most 25165824 / (2 x 32^2) = 12,288 tokens.
    0.11 and 0.12 count them 12.5 times (153,600: more than the image, so a video is profiled); 0.13-0.15 do not
    (the image's 16,384 win); from 0.16 a 2-frame video at 25165824 / 2 pixels: the factor pair 96 x 128 of
    12,288 cells, 3072 x 4096, one temporal patch of 192 x 256 patches = 12,288 tokens."""
    spec = kvbudget.load_model(QWEN3_VL)
    assert spec.vision is not None
    assert smart_resize(4096, 4096, 32, 65536, 16777216) == (4096, 4096)
    assert video_smart_resize(24, 4096, 4096, 2, 32, 4096, 25165824) == (1024, 1024)  # beta = sqrt(24 x 4096^2 / max) = 4
    p12 = _pass(QWEN3_VL, "0.12.0", 65536, 8192, tp=2)
    assert p12 is not None and (p12.modality, p12.rows_per_item, p12.tokens_per_item) == ("video", 12288, 153600)
    assert p12.budget == 153600 and p12.items == 1
    p13 = _pass(QWEN3_VL, "0.13.0", 65536, 8192, tp=2)
    assert p13 is not None and (p13.modality, p13.tokens_per_item, p13.budget, p13.items) == ("image", 16384, 16384, 1)
    video33 = _pass(QWEN3_VL, "0.33.0", 65536, 8192, mm_limits=(("image", 0),))
    assert video33 is not None and (video33.modality, video33.rows_per_item) == ("video", 192 * 256 // 4)
    assert most_features_size(spec.vision, 25165824 // 2, 4096, 33) == (3072, 4096)


def test_mm_processor_kwargs_max_pixels_shrinks_the_item() -> None:
    """--mm-processor-kwargs '{"max_pixels": 1003520}' (1280 cells of 28^2, transformers' Qwen2-VL default): the
    factor pair closest to a square is 32 x 40 -> 896 x 1120 pixels -> 32 x 40 tokens = 1,280."""
    cmd = parse_vllm_command(["vllm", "serve", QWEN25_VL, "--mm-processor-kwargs", '{"max_pixels": 1003520}',
                              "--limit-mm-per-prompt", '{"video": 0}'])
    p = _pass(QWEN25_VL, "0.33.0", 32768, 8192, mm_max_pixels=cmd.settings.mm_max_pixels,
              mm_limits=cmd.settings.mm_limits)
    assert p is not None and p.rows_per_item == 32 * 40 == 1280



def test_mm_processor_kwargs_scopes_and_keys_as_vllm_reads_them() -> None:
    """vLLM 0.33.0 (multimodal/processing/context.py, qwen2_vl.py _get_vision_size): images_kwargs / videos_kwargs
    bound one modality and win over the flat keys; "size" is merged into the processor's size dict, so a number
    there stops vLLM. Before, the scopes were passed over (the 16,384-token video planned, exit 0), size 448 and
    images_kwargs 5 were planned as no override, and a misspelt key was dropped without a word."""
    def read(value: str) -> LaunchCommand:
        return parse_vllm_command(["vllm", "serve", QWEN25_VL, "--mm-processor-kwargs", value])

    scoped = read('{"videos_kwargs": {"max_pixels": 100352}, "max_pixels": 1003520}').settings
    assert scoped.mm_scoped_pixels == (("video", 100352, None),) and scoped.mm_max_pixels == 1003520
    # the video bound alone: vLLM sizes a frame from the image's most-features size (3584 x 3584 under the image's
    # 12,845,056 pixels) put through smart_resize under 100,352: beta = 3584 / sqrt(100352) = 11.31, 11 units of 28 a
    # side = 308 x 308 -> 11 x 11 = 121 tokens per two frames, 14 frames (qwen2_vl.py's cap) -> 7 x 121. The flat
    # 100,352 also shrinks the image first: 128 cells -> 8 x 16 units (224 x 448) -> 128 tokens per two frames.
    video = _pass(QWEN25_VL, "0.33.0", 32768, 8192, mm_limits=(("image", 0),), mm_scoped_pixels=scoped.mm_scoped_pixels)
    flat = _pass(QWEN25_VL, "0.33.0", 32768, 8192, mm_limits=(("image", 0),), mm_max_pixels=100352)
    assert video is not None and flat is not None and (video.rows_per_item, flat.rows_per_item) == (7 * 121, 7 * 128)
    # the image keeps the flat 1,003,520 (1,280 cells: 32 x 40), the video scope does not touch it
    image = _pass(QWEN25_VL, "0.33.0", 32768, 8192, mm_limits=(("video", 0),), mm_max_pixels=1003520,
                  mm_scoped_pixels=scoped.mm_scoped_pixels)
    assert image is not None and image.rows_per_item == 32 * 40
    typo = read('{"max_pixel": 100352}')
    assert typo.settings.mm_max_pixels is None
    assert any("'max_pixel' changes no size kvbudget models (did you mean max_pixels?)" in w for w in typo.warnings)
    assert any("min_pixels 200,000 is above max_pixels 100,352" in w
               for w in read('{"min_pixels": 200000, "max_pixels": 100352}').warnings)
    for value, words in [('{"size": 448}', "size must be an object of pixel bounds, got '448'"),
                         ('{"images_kwargs": 5}', "images_kwargs must be an object of the image processor's options"),
                         ('{"videos_kwargs": {"max_pixels": -1}}', "videos_kwargs: max_pixels must be a whole number")]:
        with pytest.raises(InputError, match=re.escape(words)):
            read(value)


# --- step 2: the budget and the item count ---------------------------------------------------------------------------


def test_budget_and_item_count() -> None:
    """compute_mm_encoder_budget: budget = max(max_num_batched_tokens, the largest item); items =
    min(budget // tokens, max_num_seqs x min(limit, max_model_len // tokens)), at least 1 (MultiModalBudget)."""
    images = _pass(QWEN25_VL, "0.33.0", 128000, 65536, mm_limits=(("video", 0),))
    assert images is not None and (images.budget, images.items) == (65536, 65536 // 16384)
    assert images.log_line == ("Encoder cache will be initialized with a budget of 65536 tokens, and profiled with 4 "
                               "image items of the maximum feature size.")
    capped = _pass(QWEN25_VL, "0.33.0", 128000, 65536, seqs=2, mm_limits=(("video", 0), ("image", 1)))
    assert capped is not None and capped.items == 2 * 1  # 2 requests x 1 image a prompt
    small = _pass(QWEN25_VL, "0.12.0", 8192, 2048, mm_limits=(("video", 0),))
    assert small is not None and (small.budget, small.items) == (16384, 1)  # an item above the context still counts


def test_zero_items_remove_the_pass() -> None:
    """Every modality at 0 (compute_mm_encoder_budget: no encoder cache), --language-model-only, or
    --skip-mm-profiling: no pass; the plan's activation peak is then the text model's own."""
    for kw in ({"mm_limits": (("image", 0), ("video", 0))}, {"language_model_only": True}, {"skip_mm_profiling": True}):
        assert _pass(QWEN3_VL, "0.12.0", 65536, 8192, tp=2, **kw) is None
    spec, gpu = kvbudget.load_model(QWEN3_VL), find_gpu("H100")
    base = VllmSettings(version="0.12.0", tensor_parallel_size=2, max_model_len=65536)
    full = plan(spec, gpu, base)
    off = plan(spec, gpu, parse_vllm_command("vllm serve M --limit-mm-per-prompt '{\"image\": 0, \"video\": 0}'",
                                             base).settings)
    p = _pass(QWEN3_VL, "0.12.0", 65536, 8192, tp=2)
    assert p is not None
    assert full.activation_bytes == p.peak(off.activation_bytes) > off.activation_bytes
    assert [n for n in off.notes if n.startswith("vision encoder: no profiling pass")]


# --- steps 3 and 4: the memory -------------------------------------------------------------------------------------


def test_held_bytes_by_hand() -> None:
    """Qwen3-VL-30B-A3B: one output token is out_hidden_size 2048 x (1 + 3 deepstack layers) = 8192 wide. 0.12.0
    pads the 12,288-row video output into zeros of its 153,600 budget tokens and keeps the original: (153,600 +
    12,288) x 8192 x 2 bytes. 0.13+ keeps the image's 16,384 rows only. Pixels: rows x merge^2 patches x
    3 channels x 2 frames x 16^2 in bf16."""
    p12 = _pass(QWEN3_VL, "0.12.0", 65536, 8192, tp=2)
    assert p12 is not None
    assert p12.held_bytes == (153600 + 12288) * 2048 * 4 * BF16
    assert p12.pixel_bytes == 12288 * 4 * 3 * 2 * 16 * 16 * BF16
    p33 = _pass(QWEN3_VL, "0.33.0", 65536, 8192, tp=2)
    assert p33 is not None and p33.held_bytes == 16384 * 2048 * 4 * BF16
    q25 = _pass(QWEN25_VL, "0.33.0", 128000, 2048)
    assert q25 is not None and q25.held_bytes == 114688 * 3584 * BF16  # no deepstack: out_hidden_size only


def test_tower_peak_by_hand_and_tp_modes() -> None:
    """Qwen2.5-VL-7B's tower, 114,688-token video = 458,752 patches: a block holds 3 x 1280 + 4 x 3420 (MLP) vs
    3 x 1280 + 8 x 1280 (attention) elements a patch; the MLP's 17,520 wins at TP 1. At TP 2 the intermediate
    halves (3 x 1280 + 2 x 3420 = 10,680 vs 3 x 1280 + 4 x 1280 = 8,960). With --mm-encoder-tp-mode data the
    tower is whole (TP 1's block) and the one item runs on one rank."""
    patches = 114688 * 4
    one = _pass(QWEN25_VL, "0.33.0", 128000, 2048)
    two = _pass(QWEN25_VL, "0.33.0", 128000, 2048, tp=2)
    data = _pass(QWEN25_VL, "0.33.0", 128000, 2048, tp=2, mm_encoder_tp_mode="data")
    assert one is not None and two is not None and data is not None
    assert one.tower_bytes == patches * (3 * 1280 + 4 * 3420) * BF16
    assert two.tower_bytes == patches * (3 * 1280 + 2 * 3420) * BF16
    assert data.tower_bytes == one.tower_bytes and data.held_bytes == two.held_bytes


def test_the_peak_is_the_larger_stage() -> None:
    """torch's peak over the run: the encoder stage (pixels + tower) or the text forward with the pass held."""
    p = _pass(QWEN25_VL, "0.33.0", 128000, 2048)
    assert p is not None
    assert p.peak(0) == p.pixel_bytes + p.tower_bytes  # the tower dominates a 458,752-patch video
    huge = 100 * GiB
    assert p.peak(huge) == huge + p.held_bytes + p.pixel_bytes


# --- the published logs ----------------------------------------------------------------------------------------------

_ENCODER_LINE = re.compile(r"Encoder cache will be initialized with a budget of \d+ tokens, and profiled with \d+ \w+ "
                           r"items of the maximum feature size\.")


@pytest.mark.parametrize(("record", "tp", "mnbt", "bound"), [
    ("v0.12.0_h100x2_qwen3-vl-30b-a3b_tp2_len65536", 2, 8192, 0.04),  # +9.98% before the pass was modelled
    ("v0.11.0_rtx3090x4_qwen3-vl-30b-a3b_tp4_len65536", 4, 2048, 0.07),  # +122.69% before
])
def test_published_logs_encoder_line_and_kv_tokens(record: str, tp: int, mnbt: int, bound: float) -> None:
    """The log's 'Encoder cache will be initialized ...' line is kvbudget's to the character, and its KV tokens
    come within ``bound`` (both runs print 'budget of 153600 tokens, and profiled with 1 video items')."""
    from kvbudget.engines.vllm.check import check_log

    meta = json.loads((LOGS / f"{record}.json").read_text(encoding="utf-8"))
    text = (LOGS / f"{record}.log").read_text(encoding="utf-8")
    logged = _ENCODER_LINE.search(text)
    assert logged is not None
    p = _pass(QWEN3_VL, meta["kvbudget"]["version"], 65536, mnbt, tp=tp)
    assert p is not None and p.log_line == logged.group(0)
    k = meta["kvbudget"]
    result = check_log(text, model=k["model"], gpu=k["gpu"], version=k["version"], flags=k["flags"])
    tokens = meta["reported"]["kv_cache_tokens"]
    assert abs(result.plan.kv_cache_tokens - tokens) / tokens < bound
    assert any(n.startswith("vision encoder profiling (vLLM 0.1") for n in result.plan.notes)


# --- the flags -------------------------------------------------------------------------------------------------------


def test_flag_forms() -> None:
    """--limit-mm-per-prompt as JSON counts, JSON {count: N} (0.11+), key=value (older releases) and the dotted
    form; bad counts are one error line."""
    read = lambda *a: parse_vllm_command(["vllm", "serve", "M", *a]).settings  # noqa: E731
    assert read("--limit-mm-per-prompt", '{"image": 2, "video": 0}').mm_limits == (("image", 2), ("video", 0))
    assert read("--limit-mm-per-prompt", '{"video": {"count": 1, "num_frames": 8}}').mm_limits == (("video", 1),)
    old = lambda *a: parse_vllm_command(["vllm", "serve", "M", *a], VllmSettings(version="0.9.2")).settings  # noqa: E731
    assert old("--limit-mm-per-prompt", "image=3,video=0").mm_limits == (("image", 3), ("video", 0))
    assert read("--limit-mm-per-prompt.video", "0", "--limit-mm-per-prompt.image=1").mm_limits == (("video", 0), ("image", 1))
    # FlexibleArgumentParser nests dotted keys and adds them after the other words (utils/argparse_utils.py, 0.33.0)
    assert read("--limit-mm-per-prompt.image.count", "0", "--limit-mm-per-prompt.image.width=512",
                "--limit-mm-per-prompt", '{"image": 5, "video": 0}').mm_limits == (("image", 0), ("video", 0))
    assert read("--limit-mm-per-prompt.image", "2k").mm_limits == (("image", 2000),)
    assert read("--skip-mm-profiling").skip_mm_profiling and not read("--no-skip-mm-profiling").skip_mm_profiling
    assert read("--mm-encoder-tp-mode", "data").mm_encoder_tp_mode == "data"
    assert read("--enable-multimodal-encoder-data-parallel").mm_encoder_tp_mode == "data"
    assert read("--language-model-only").language_model_only
    assert read("--mm-processor-kwargs", '{"size": {"longest_edge": 802816, "shortest_edge": 3136}}').mm_max_pixels == 802816
    with pytest.raises(InputError, match="needs a whole count of 0 or more"):
        read("--limit-mm-per-prompt", '{"image": -1}')
    with pytest.raises(InputError, match="weights or data"):
        read("--mm-encoder-tp-mode", "both")
    with pytest.raises(InputError, match="not a JSON object"):
        read("--mm-processor-kwargs", "{max_pixels")


def test_limits_as_each_release_reads_them() -> None:
    """vLLM 0.10+ reads --limit-mm-per-prompt with json.loads only (engine/arg_utils.py parse_type; 0.9.2 still took
    image=2,video=0 through nullable_kvs); a count that is a string or a float stops vLLM 0.33 (config/multimodal.py
    _validate_limit_per_prompt: ImageDummyOptions(**v) of a non-mapping), as do a dummy size below 1 (Field(gt=0)) and
    a key the modality's options forbid (extra="forbid"). The {"count": N} object is 0.11's."""
    def read(value: str, version: str = "current") -> LaunchCommand:
        return parse_vllm_command(["vllm", "serve", "M", "--limit-mm-per-prompt", value], VllmSettings(version=version))

    for value in ("image=2,video=1", "", "image=2"):
        with pytest.raises(InputError, match="reads a JSON object only"):
            read(value)
    with pytest.raises(InputError, match=r"vLLM 0\.10 reads a JSON object only"):
        read("image=2,video=1", "0.10.1")
    assert read("image=2,video=1", "0.9.2").settings.mm_limits == (("image", 2), ("video", 1))
    with pytest.raises(InputError, match="'video' is not KEY=VALUE"):
        read("image=2,video", "0.8.5")
    for value, words in [('{"image": "2"}', "got '2'"), ('{"image": 2.0}', "got '2.0'"), ('{"image": null}', "got 'None'"),
                         ('{"image": {"count": 2, "width": -5}}', "image.width must be a whole number of 1 or more"),
                         ('{"image": {"count": 2, "width": 1e308}}', "image.width must be"),
                         ('{"image": {"count": 2, "frames": 4}}', "'image' takes count, width, height, not 'frames'"),
                         ('{"video": {"count": "x"}}', "got 'x'")]:
        with pytest.raises(InputError, match=re.escape(words)):
            read(value)
    with pytest.raises(InputError, match=re.escape('the "count" object is from 0.11')):
        read('{"video": {"count": 1}}', "0.10.1")
    # accepted, with a note: a modality name vLLM passes over, a dummy size kvbudget does not shrink the item by
    said = read('{"imag": 0, "video": {"count": 1, "num_frames": 8}}').warnings
    assert any("'imag' is not image, video or audio" in w for w in said)
    assert any("the video dummy num_frames override" in w for w in said)
    assert read('{"vision_chunk": {"count": 1, "anything": 2}}').settings.mm_limits == (("vision_chunk", 1),)


def test_a_logs_non_default_args_carry_the_limits() -> None:
    """'limit_mm_per_prompt': {...} in the non-default args line (a Python dict as vLLM prints it) is read."""
    from kvbudget.engines.vllm.check import check_log

    text = (LOGS / "v0.12.0_h100x2_qwen3-vl-30b-a3b_tp2_len65536.log").read_text(encoding="utf-8")
    text = text.replace("'max_num_seqs': 256}", "'max_num_seqs': 256, 'limit_mm_per_prompt': {'image': 0, 'video': "
                        "{'count': 0, 'num_frames': 8}}, 'mm_encoder_tp_mode': 'data'}")
    result = check_log(text, model=QWEN3_VL, gpu="H100-SXM-80GB")
    assert result.settings.mm_limits == (("image", 0), ("video", 0)) and result.settings.mm_encoder_tp_mode == "data"
    assert not any(n.startswith("vision encoder profiling") for n in result.plan.notes)
