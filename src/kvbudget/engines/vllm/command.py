"""Read a pasted vLLM launch command into a model reference and ``VllmSettings``.

Understands ``vllm serve MODEL ...``, ``python -m vllm.entrypoints.openai.api_server --model ...``,
``python -m vllm.entrypoints.api_server ...``, ``docker run ... vllm/vllm-openai ...``, leading
``VAR=value`` environment assignments, ``--flag value`` and ``--flag=value``, short forms (``-tp``),
unambiguous prefixes (argparse abbreviations, e.g. ``--kv-cache-memory=``) and ``--config`` files
(JSON, or YAML ``key: value`` lines). Every flag of vLLM 0.33 is known (``flags.json``);
flags that do not change memory are accepted silently, unknown ones give a warning.
"""

from __future__ import annotations

import json
import os
import re

from ... import inputs
from ..._record import record, replace
from ...inputs import excerpt, parse_real, parse_whole, whole
from ...units import InputError, digits, human_readable_int
from ..cmdscan import revision_said
from ..compared import assignments, container_env, package_pins, program_name
from .kv_dtypes import kv_dtype_taken
from .settings import VllmSettings, auto_fit_read, version_minor

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

_FLAGS_FILE = os.path.join(os.path.dirname(__file__), "flags.json")
_TRUE = ("1", "true", "yes", "on")


@record
class LaunchCommand:
    """What a pasted command asks vLLM to do."""

    model: str
    settings: VllmSettings
    warnings: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    overrides: str = ""  # --hf-overrides' config.json keys other than RoPE's, as a JSON object ("": none)


def _flags() -> tuple[dict[str, tuple[str, bool]], dict[str, bool]]:
    with open(_FLAGS_FILE, encoding="utf-8") as f:
        data = json.load(f)
    flags = {k: (v[0], bool(v[1])) for k, v in data["flags"].items()}
    return flags, {k: bool(v) for k, v in data["historical"].items()}


_HUMAN = re.compile(r"([0-9]{1,18}(?:\.[0-9]{1,18})?)([kKmMgGtT])")


def human_int(text: str, flag: str) -> int:
    """vLLM's human-readable integers: 1k = 1,000, 25.6k = 25,600 and 1K = 1,024 (no decimals with a
    binary suffix), or a plain integer (vllm/utils/argparse_utils.py ``human_readable_int``, 0.33.0)."""
    t = text.strip()
    value = human_readable_int(t)
    if value is not None:
        return value
    m = _HUMAN.fullmatch(t)
    if m:  # a binary suffix with decimals
        number, suffix = m.groups()
        raise InputError(f"{flag} {excerpt(text)}: vLLM allows no decimals with a binary suffix like {suffix}"
                         f" (did you mean {number}{suffix.lower()}?)")
    return parse_whole(t, flag, forms="vLLM accepts e.g. 8192, 32k, 4K")


# The engine arguments vLLM reads with human_readable_int (engine/arg_utils.py), from the first release that does:
# max_model_len from 0.8.4 (0.8.3: argparse type=int), max_num_batched_tokens from 0.9.1 (0.9.0: max_model_len
# only), kv_cache_memory_bytes since it came (0.11). Every other integer argument is argparse's type=int in every
# release (0.33.0 _compute_kwargs: `kwargs[name]["type"] = int`): '1K' stops vLLM there.
_HUMAN_READABLE = {"max_model_len": (8, 4), "max_num_batched_tokens": (9, 1), "kv_cache_memory_bytes": (0, 0)}
_PYTHON_INT = re.compile(r"[+-]?[0-9](?:_?[0-9]){0,39}")  # what int() takes of ASCII text: 1_000 is 1000


def engine_int(text: str, label: str, dest: str, version: str | None) -> int:
    """An integer engine argument as the release's parser reads it: human-readable (``human_int``) where
    ``_HUMAN_READABLE`` says so (a release not named: the newest), else Python's ``int`` (argparse ``type=int``)."""
    from .settings import minor_patch

    first, release = _HUMAN_READABLE.get(dest), minor_patch(version)
    if first is not None and (release is None or release >= first):
        return human_int(text, label)
    t = text.strip()
    if _PYTHON_INT.fullmatch(t):
        return parse_whole(t.replace("_", ""), label)
    if human_readable_int(t) is not None or _HUMAN.fullmatch(t):
        since = "" if first is None else f"; vLLM reads them there from 0.{first[0]}.{first[1]}"
        raise InputError(f"vLLM stops at start-up: `argument {label}: invalid int value: {excerpt(t)}` (a k/K suffix: "
                         f"{label} takes a plain whole number{since})")
    return parse_whole(t, label)


# The block sizes a release's parser takes (engine/arg_utils.py --block-size choices up to 0.8.4, then the BlockSize
# Literal of config.py / config/cache.py that argparse's choices come from), from the first release of each span; 0.18
# takes any size (config/cache.py block_size: SkipValidation[int]). Read in the wheels of 0.6.3-0.6.6, 0.7.0-0.7.3,
# 0.8.0-0.8.5, 0.9.0, 0.10.0, 0.11.0, 0.12.0, 0.13.0, 0.14.0, 0.16.0, 0.17.0, 0.18.0; releases before 0.6.3 are not checked.
_BLOCK_SIZES = (((6, 3), (8, 16, 32)), ((6, 4), (8, 16, 32, 64, 128)), ((6, 5), (8, 16, 32)),
                ((6, 6), (8, 16, 32, 64, 128)), ((8, 5), (1, 8, 16, 32, 64, 128)), ((12, 0), (1, 8, 16, 32, 64, 128, 256)),
                ((18, 0), None))


def block_size_taken(n: int, label: str, version: str | None) -> None:
    """Refuse a block size the release's parser refuses (``--block-size 24`` on 0.10: "invalid choice")."""
    from .settings import minor_patch

    release = minor_patch(version)
    if release is None or release < _BLOCK_SIZES[0][0]:
        return
    choices = next(sizes for first, sizes in reversed(_BLOCK_SIZES) if release >= first)
    if choices is not None and n not in choices:
        raise InputError(f"vLLM stops at start-up: `argument {label}: invalid choice: {n}` (vLLM {version} takes "
                         f"{', '.join(map(str, choices))})")


# Flags that change memory, from the first release whose parser has them (engine/arg_utils.py of 0.7.3-0.13.0):
# an older one stops at them (argparse: unrecognized arguments), where kvbudget planned them (a 4 GiB KV cache of
# --kv-cache-memory-bytes 4G on 0.10, exit 0)
_FLAG_SINCE = {"--kv-cache-memory-bytes": (11, 0), "--enable-expert-parallel": (8, 0), "--data-parallel-size": (8, 3),
               "-dp": (8, 3), "--async-scheduling": (10, 0)}


def _flag_there(name: str, version: str) -> None:
    from .settings import minor_patch

    first, release = _FLAG_SINCE.get(name), minor_patch(version)
    if first is not None and release is not None and release < first:
        raise InputError(f"vLLM stops at start-up: `vllm serve: error: unrecognized arguments: {name}` (vLLM {version} "
                         f"has no {name}: it came with 0.{first[0]}.{first[1]})")


def _bool(value: str | None) -> bool:
    return value is None or value.strip().lower() in _TRUE


# Engine arguments that set a VllmSettings field of the same name, by the kind of value they take.
_INT_FIELDS = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "block_size", "max_num_seqs",
               "max_num_batched_tokens", "kv_cache_memory_bytes", "num_gpu_blocks_override", "max_loras", "max_lora_rank",
               "max_cpu_loras")
# Their ranges, as vLLM 0.33.0 declares them (vllm/config/parallel.py, cache.py, scheduler.py: Field(ge=1),
# block_size Field(gt=0)); the upper bounds are beyond any machine (they keep sizes from overflowing).
_INT_RANGES = {
    "tensor_parallel_size": (1, 1 << 16), "pipeline_parallel_size": (1, 1 << 16), "data_parallel_size": (1, 1 << 16),
    "block_size": (1, 1 << 20), "max_num_seqs": (1, 1 << 32), "max_num_batched_tokens": (1, 1 << 40),
    "kv_cache_memory_bytes": (0, 1 << 60), "num_gpu_blocks_override": (1, 1 << 48),
    # config/lora.py max_loras Field(ge=1); the rank's allowed values and max_cpu_loras >= max_loras per release are
    # lora.py check's (the bounds here only keep sizes sane)
    "max_loras": (1, 1 << 20), "max_lora_rank": (1, 1 << 20), "max_cpu_loras": (1, 1 << 20),
}
_TEXT_FIELDS = ("kv_cache_dtype", "dtype", "quantization", "performance_mode", "lora_dtype")
# Boolean switches: the field, and the flag prefix that turns it on (--enable-x / --disable-x / --x / --no-x).
_SWITCHES = {"enforce_eager": "--enforce", "enable_prefix_caching": "--enable", "enable_chunked_prefill": "--enable",
             "disable_hybrid_kv_cache_manager": "--disable", "enable_expert_parallel": "--enable",
             "async_scheduling": "--async", "enable_lora": "--enable", "fully_sharded_loras": "--fully"}


def _apply(settings: VllmSettings, dest: str, flag: str, value: str | None, label: str = "") -> VllmSettings:
    """Set what engine argument ``dest`` (given as ``flag value``) means for the memory plan, checked
    against the range vLLM itself enforces; errors name ``label`` (the flag, or the file and key it came from)."""
    v = value or ""
    label = label or flag
    if dest in _INT_FIELDS:
        lo, hi = _INT_RANGES[dest]
        n = whole(engine_int(v, label, dest, settings.version), label, lo, hi)
        if dest == "block_size":
            block_size_taken(n, label, settings.version)
        return replace(settings, **{dest: n})
    if dest in _TEXT_FIELDS:
        v = v.strip()
        if not v or len(v) > 64:
            raise InputError(f"{label} {excerpt(v)}: give a name such as auto, bfloat16 or fp8")
        if dest == "kv_cache_dtype":
            kv_dtype_taken(v, settings.version, label)
        return replace(settings, **{dest: v.removeprefix("torch.") if dest == "dtype" else v})
    if dest in _SWITCHES:
        return replace(settings, **{dest: flag.startswith(_SWITCHES[dest]) and _bool(value)})
    if dest == "max_model_len":  # Field(ge=-1), -1 or auto: fit to memory; a request of 0 tokens is no length
        if v.strip().lower() == "auto" and not auto_fit_read(settings.version):
            raise InputError(f"vLLM stops at start-up: `argument {label}: invalid human_readable_int value: 'auto'` "
                             f"(vLLM {settings.version} has no auto-fit: --max-model-len auto came with 0.14)")
        if v.strip() == "-1" and not auto_fit_read(settings.version):
            # human_readable_int reads '-1' as int('-1'): before 0.14 a length of -1 tokens, not a fit to memory.
            # The default batch of tokens becomes max_num_seqs x -1 (engine/arg_utils.py, 0.10-0.13) and the
            # scheduler refuses it (config/scheduler.py Field(ge=1) on 0.12-0.13); where it does start, no prompt fits
            raise InputError(f"{label} -1: vLLM {settings.version} takes it as a length of -1 tokens (no request "
                             "fits; its scheduler's checks stop it at start-up): -1 and auto mean 'fit to memory' "
                             "from 0.14; give a length of at least 1 token, or --vllm-version 0.14 or later")
        n = -1 if v.strip().lower() in ("auto", "-1") else engine_int(v, label, dest, settings.version)
        if n != -1 and n < 1:
            raise InputError(f"{label} is {n}: give a length of at least 1 token, or auto (-1) to fit it to memory")
        return replace(settings, max_model_len=whole(n, label, -1, 1 << 40))
    if dest in ("gpu_memory_utilization", "device_memory_utilization"):  # CacheConfig Field(gt=0, le=1)
        return replace(settings, gpu_memory_utilization=parse_real(v, label, 0, 1, lo_open=True))
    if dest == "cpu_offload_gb":  # UVAOffloadConfig Field(ge=0), GiB
        return replace(settings, cpu_offload_bytes=round(parse_real(v, label, 0, 1 << 30) * (1 << 30)))
    return settings


# Engine arguments that change GPU memory in ways kvbudget does not model: said, not ignored (vLLM 0.33.0's
# engine arguments; the value after the flag that leaves memory as it is, where there is one).
_UNMODELLED = {
    "enable_tower_connector_lora": "LoRA slots on the vision tower and connector",
    "enable_moe_shared_loras": "MoE LoRA factors shared across experts (kvbudget counts per-expert slots)",
    "specialize_active_lora": "CUDA graphs captured per count of active LoRA adapters",
    "speculative_config": "a speculative-decoding draft model's weights and KV cache",
    "offload_group_size": "weights offloaded to host memory by layer group (prefetch offloading)",
}
_UNMODELLED_UNLESS = {"offload_group_size": ("0",)}
# Flags of older releases (flags.json "historical") that took memory kvbudget does not model.
_UNMODELLED_HISTORICAL = {"--speculative-model": "a speculative-decoding draft model's weights and KV cache",
                          "--enable-lora-bias": "LoRA bias slots", "--long-lora-scaling-factors": "long-context LoRA",
                          "--num-speculative-tokens": "a speculative-decoding draft model's weights and KV cache"}


def unmodelled(name: str, dest: str | None, value: str | None) -> str | None:
    """The warning for flag ``name`` (engine argument ``dest``) given ``value``, when vLLM spends GPU memory on
    it that kvbudget does not model; None otherwise (a flag that turns the feature off, or its default)."""
    if dest == "speculative_config":  # read by _speculative: MTP and n-gram are modelled, other drafts warned of
        return None
    what = _UNMODELLED_HISTORICAL.get(name) if dest is None else _UNMODELLED.get(dest)
    if what is None or name.startswith(("--no-", "--disable")):
        return None
    if dest in _UNMODELLED_UNLESS and (value or "").strip().lower() in _UNMODELLED_UNLESS[dest]:
        return None
    if value is not None and value.strip().lower() in ("false", "0", "off", "no") and dest not in _UNMODELLED_UNLESS:
        return None  # --enable-lora=false, a config file's enable_lora: false
    return f"{name}: kvbudget does not model the memory it takes ({what})"


# Engine arguments of the multimodal profiling pass (encoder_profile.py); --enable-multimodal-encoder-data-parallel is
# 0.10-0.12's name for --mm-encoder-tp-mode data (engine/arg_utils.py of 0.12.0).
_MULTIMODAL = ("limit_mm_per_prompt", "mm_processor_kwargs", "skip_mm_profiling", "mm_encoder_tp_mode",
               "language_model_only", "enable_multimodal_encoder_data_parallel")
_JSON_KEYED = ("limit_mm_per_prompt", "mm_processor_kwargs", "eplb_config", "kv_transfer_config")  # also given one key at a time: --limit-mm-per-prompt.video 0


# Engine arguments of EPLB, decode context parallelism, KV connectors and the multimodal IPC carve-out (eplb.py,
# context_parallel.py, kv_connector.py, mm_memory.py).
_EXTRA_DESTS = ("enable_eplb", "eplb_config", "decode_context_parallel_size", "kv_transfer_config", "kv_offloading_size",
                "kv_offloading_backend", "mm_ipc_gpu_memory_gb")


def _extra_flag(settings: VllmSettings, dest: str, name: str, value: str | None, label: str,
                offload: tuple[int | None, str]) -> tuple[VllmSettings, tuple[int | None, str]]:
    """One of ``_EXTRA_DESTS`` into the settings (and the KV offloading flags, resolved after every flag is read)."""
    from .rope import json_object

    v = (value or "").strip()
    if dest == "enable_eplb":
        return replace(settings, enable_eplb=not name.startswith(("--no-", "--disable")) and _bool(value)), offload
    if dest == "decode_context_parallel_size":  # ParallelConfig Field(ge=1)
        return replace(settings, decode_context_parallel_size=whole(engine_int(v, label, dest, settings.version), label,
                                                                    1, 1 << 16)), offload
    if dest == "mm_ipc_gpu_memory_gb":  # MultiModalConfig Field(ge=0), GiB: int(gb x GiB_bytes)
        return replace(settings, mm_ipc_bytes=int(parse_real(v, label, 0, 1 << 20) * (1 << 30))), offload
    if dest == "kv_offloading_size":  # CacheConfig kv_offloading_size, GiB of host memory
        return settings, (round(parse_real(v, label, 0, 1 << 30) * (1 << 30)), offload[1])
    if dest == "kv_offloading_backend":
        return settings, (offload[0], v)
    data = json_object(v, 65536)
    if data is None:
        raise InputError(f"{label} {excerpt(v)}: give a JSON object")
    if dest == "kv_transfer_config":
        from .kv_connector import read_transfer

        return replace(settings, kv_connector=read_transfer(data, label)), offload
    # eplb_config (config/parallel.py EPLBConfig): num_redundant_experts Field(ge=0), window_size Field(gt=0)
    redundant = data.get("num_redundant_experts", settings.num_redundant_experts)
    window = data.get("window_size", settings.eplb_window_size)
    comm = data.get("communicator", settings.eplb_communicator)
    if comm is not None and not isinstance(comm, str):
        raise InputError(f"{label}: communicator must be a name such as nixl or torch_gloo")
    return replace(settings, num_redundant_experts=whole(redundant, f"{label} num_redundant_experts", 0, 1 << 20),
                   eplb_window_size=whole(window, f"{label} window_size", 1, 1 << 20),
                   eplb_communicator=comm), offload


def _dotted_value(text: str) -> object:
    """The value of a dotted key as FlexibleArgumentParser reads it (utils/argparse_utils.py, 0.33.0): JSON, else a
    human-readable integer (2k), else the text."""
    try:
        return json.loads(text[:10_000])
    except ValueError:
        return human_readable_int(text.strip()) if human_readable_int(text.strip()) is not None else text[:40]


def _merge_dotted(into: dict[str, object], keys: list[str], value: object) -> None:
    """One dotted argument's keys into the flag's value (a later key wins, nested objects merge)."""
    for key in keys[:-1]:
        inner = into.get(key[:40])
        if not isinstance(inner, dict):
            inner = into[key[:40]] = {}
        into = inner
    into[keys[-1][:40]] = value


def _multimodal(settings: VllmSettings, dest: str, name: str, value: str | None, label: str) -> VllmSettings:
    """An engine argument of the vision encoder's profiling pass into the settings."""
    from .encoder_profile import parse_limits, parse_processor_kwargs

    off = name.startswith("--no-") or (value is not None and value.strip().lower() in ("false", "0", "off", "no"))
    if dest == "limit_mm_per_prompt":
        limits, _notes = parse_limits(value or "", label, settings.version)
        merged = {**dict(settings.mm_limits), **dict(limits)}
        return replace(settings, mm_limits=tuple(merged.items()))
    if dest == "mm_processor_kwargs":
        hi, lo, scoped, _notes = parse_processor_kwargs(value or "{}", label)
        return replace(settings, mm_max_pixels=hi, mm_min_pixels=lo, mm_scoped_pixels=scoped)
    if dest == "mm_encoder_tp_mode":
        mode = (value or "").strip().lower()
        if mode not in ("weights", "data"):
            raise InputError(f"{label} {excerpt(value or '')}: vLLM takes weights or data")
        return replace(settings, mm_encoder_tp_mode=mode)
    if dest == "enable_multimodal_encoder_data_parallel":
        return replace(settings, mm_encoder_tp_mode="weights" if off else "data")
    return replace(settings, **{dest: not off})


def _overrides(settings: VllmSettings, name: str, value: str, label: str) -> tuple[VllmSettings, list[str]]:
    """``--rope-scaling JSON`` or ``--hf-overrides JSON`` into the settings: the RoPE scaling is read (rope.py); the
    other keys of the model's config are returned by ``config_overrides`` and applied to the config planned."""
    from .rope import json_object, parse_rope

    if name == "--rope-scaling":
        return replace(settings, rope_scaling=parse_rope(value, label)), []
    data = json_object(value, 65536)
    if data is None:
        raise InputError(f"{label} {excerpt(value)}: give a JSON object of config.json keys, e.g. "
                         '\'{"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}\'')
    rope = data.get("rope_scaling", data.get("rope_parameters"))
    if "rope_scaling" in data and "rope_parameters" in data and data["rope_scaling"] != data["rope_parameters"]:
        # transformers 5 reads rope_parameters and older releases rope_scaling: which applies depends on the install
        raise InputError(f"{label} sets rope_scaling and rope_parameters to different values: give one")
    if rope is not None:
        settings = replace(settings, rope_scaling=parse_rope(json.dumps(rope), f"{label} rope_scaling"))
    return settings, []


def config_overrides(value: str) -> dict[str, Any]:
    """--hf-overrides' keys of the model's config other than RoPE's (read into the settings by ``_overrides``)."""
    from .rope import json_object

    data = json_object(value, 65536) or {}
    return {k: v for k, v in data.items() if k not in ("rope_scaling", "rope_parameters")}


def _speculative(settings: VllmSettings, name: str, value: str | None, label: str) -> tuple[VllmSettings, list[str]]:
    """``--speculative-config JSON`` into the settings: MTP and the n-gram proposers as they are; an EAGLE /
    EAGLE-3 head or a draft model with its config.json read (the draft catalog, a local folder, the Hugging Face
    cache or Hub: model/resolve.py ``draft_config``) and checked as vLLM checks it; a warning (and a wider band)
    for a draft whose memory kvbudget does not model or whose config it cannot find."""
    from ...model.resolve import draft_config
    from .settings import minor_patch
    from .speculative import DRAFT_METHODS, draft_method, parse_speculative_config, read_draft

    if value is None or value.strip().lower() in ("", "none", "null"):
        return replace(settings, speculative_method=None, num_speculative_tokens=0, speculative_draft=None), []
    sc = parse_speculative_config(value, label)
    settings = replace(settings, speculative_method=sc.method, num_speculative_tokens=sc.tokens, speculative_draft=None)
    if sc.modelled:
        return settings, []
    tp = settings.tensor_parallel_size
    if sc.draft_tp is not None and sc.draft_tp not in (1, tp):
        raise InputError(f"{label}: draft_tensor_parallel_size {sc.draft_tp} with --tensor-parallel-size {tp}: vLLM stops "
                         "(\"cannot be other value than 1 or target model tensor_parallel_size\", config/speculative.py); "
                         f"give 1 or {tp}")
    what = f"the {sc.method} draft model's weights and KV cache" + (f" ({excerpt(sc.model, 60)})" if sc.model else "")
    unmodelled = [f"{name}: kvbudget does not model the memory it takes ({what})"]
    if sc.model is None or sc.method not in DRAFT_METHODS:
        return settings, unmodelled
    method = draft_method(sc.method, sc.model, settings.version)
    unmodelled = [f"{name}: kvbudget does not model the memory it takes (the {method} draft model's weights and KV "
                  "cache "
                  f"({excerpt(sc.model, 60)}))"]
    rel = minor_patch(settings.version)
    if method == "draft_model" and rel is not None and (10, 2) <= rel < (15, 0):
        raise InputError(f"{label}: a separate draft model ({excerpt(sc.model, 60)}) on vLLM {settings.version}: vLLM "
                         "stops (\"Speculative decoding with draft model is not supported yet\", config/speculative.py"
                         " before 0.15.0); use 0.15.0 or later, or an EAGLE head")
    if settings.version.strip().lower() == "v0" or (rel is not None and rel < (8, 5)) or (
            method == "draft_model" and rel is not None and rel < (10, 2)):
        return replace(settings, speculative_method=method), unmodelled  # V0's draft worker: not modelled
    found = draft_config(sc.model)
    if found is None:
        return replace(settings, speculative_method=method), [
            f"{name}: kvbudget has no config.json for the draft {excerpt(sc.model, 60)} (not in its draft catalog, "
            "not a local folder, not in the Hugging Face cache, the Hub not asked or not reachable): pass the draft's "
            "local folder as \"model\" to count it", *unmodelled]
    draft = read_draft(method, sc.model, found[0], found[1])
    tokens = sc.tokens or draft.n_predict
    if not tokens:
        raise InputError(f"{label}: no num_speculative_tokens and the draft's config.json has no n_predict: vLLM stops "
                         "(\"num_speculative_tokens must be provided with speculative model unless the draft model "
                         "config contains an n_predict parameter\"); add num_speculative_tokens")
    if draft.method == "draft_model" and sc.draft_tp is not None and sc.draft_tp != tp:
        raise InputError(f"{label}: draft_tensor_parallel_size {sc.draft_tp} with --tensor-parallel-size {tp}: vLLM "
                         "stops (\"'draft_tensor_parallel_size' and 'tensor_parallel_size' must be the same\", "
                         f"v1/spec_decode/draft_model.py); give {tp}")
    return replace(settings, speculative_method=draft.method, num_speculative_tokens=tokens,
                   speculative_draft=draft), []


# Engine arguments of compilation and CUDA graphs (compile_flags.py)
_COMPILE_DESTS = ("compilation_config", "optimization_level", "cudagraph_capture_sizes", "max_cudagraph_capture_size")


def _compile(settings: VllmSettings, dest: str, value: str | None, label: str) -> tuple[VllmSettings, list[str]]:
    """A compilation or CUDA-graph flag into the settings, checked as the release checks it (compile_flags.py)."""
    from .compile_flags import optimization_level, read_config, sizes

    flags, said = settings.compile, list[str]()
    v = value or ""
    if dest == "compilation_config":
        flags, said = read_config(flags, v, label, settings.version)
    elif dest == "optimization_level":
        flags = replace(flags, optimization_level=optimization_level(v, label))
    elif dest == "cudagraph_capture_sizes":
        flags = replace(flags, flag_sizes=sizes(v.split(), label))
    else:  # --max-cudagraph-capture-size: argparse type=int; below 1 stops vLLM where graphs are captured
        if not digits(v.strip().lstrip("-")) or len(v.strip()) > 12:
            raise InputError(f"vLLM stops at start-up: `argument {label}: invalid int value: {excerpt(v, 30)}`")
        flags = replace(flags, flag_max=int(v))
    return replace(settings, compile=flags), said


# vLLM 0.33's short forms of --speculative-config's keys (engine/arg_utils.py create_speculative_config)
_SPEC_FLAGS = {"spec_method": "method", "spec_model": "model", "spec_tokens": "num_speculative_tokens"}


def _spec_flags(spec: tuple[str, str | None, str] | None, flags: dict[str, tuple[str, str]]) -> tuple[str, str, str]:
    """--speculative-config with --spec-method / --spec-model / --spec-tokens set into it, as create_speculative_config
    does (a key given both ways stops vLLM); was: the short forms passed over, an MTP draft's memory left out."""
    from .speculative import parse_speculative_config

    doc: dict[str, object] = {}
    if spec is not None and (spec[1] or "").strip().lower() not in ("", "none", "null"):
        try:
            loaded = json.loads(spec[1] or "") if len(spec[1] or "") <= 10_000 else None
        except (ValueError, RecursionError):
            loaded = None
        if not isinstance(loaded, dict):
            parse_speculative_config(spec[1], spec[2])  # names what is wrong with the value
            raise InputError(f"{spec[2]}: must be a JSON object")  # not reached: the line above refuses it
        doc = loaded
    for key, (flag, value) in flags.items():
        if key in doc:
            raise InputError(f"vLLM stops at start-up: \"{flag} and --speculative-config['{key}'] are mutually "
                             "exclusive\": give one")
        doc[key] = inputs.parse_whole(value, flag, 1, 1 << 16) if key == "num_speculative_tokens" else value[:300]
    return " + ".join([*(f for f, _ in flags.values()), *(["--speculative-config"] if spec else [])]), json.dumps(doc), \
        "/".join(f for f, _ in flags.values())


_STRTOLL = re.compile(r"[+-]?(0[xX][0-9a-fA-F]+|[0-9]+)")


def _nccl_param(key: str, value: str) -> bool | None:
    """An NCCL integer parameter from the environment, on (non-zero) or off, as NCCL's ncclLoadParam reads it with
    strtoll (leading blanks skipped, base 0, a numeric prefix taken: '2' is on, not off); None where it is empty
    (NCCL's default). Text with no number ('abc', 'true') is 0 to NCCL releases that check errno only and the
    default to those that check the end pointer: refused rather than guessed."""
    text = value.lstrip(" \t")
    if not text:
        return None
    match = _STRTOLL.match(text)
    if match is None:
        raise InputError(f"{key}={excerpt(value, 30)[1:-1]} is not a number NCCL reads (older NCCL takes it as 0, "
                         f"newer keeps its default): give {key}=0 or {key}=1")
    digits = match.group(1)
    return any(c not in "0xX" for c in digits)


NO_MODEL = "the command names no model"  # the start of the error a command without a model gets
_IMAGE = "vllm/vllm-openai"  # vLLM's Docker image (Docker Hub), whose entrypoint is the OpenAI API server
# The same image pulled by Apptainer / Singularity (`apptainer pull docker://vllm/vllm-openai:v0.10.2` writes
# vllm-openai_v0.10.2.sif; sites prefix the owner: vllm_vllm-openai_v0.10.2.sif): its tag after the last "vllm-openai_"
_SIF = re.compile(r"(?:.*[/_])?vllm-openai_([^/]+)\.sif")


def _is_image(word: str) -> bool:
    """Whether a word of a command is vLLM's image: ``vllm/vllm-openai[:TAG]`` or an Apptainer .sif of it."""
    return _IMAGE in word or "vllm-openai:" in word or _SIF.fullmatch(word) is not None


def _as_docker_image(word: str) -> str:
    """An Apptainer .sif of vLLM's image as the Docker reference it was pulled from (other words as they are)."""
    m = _SIF.fullmatch(word)
    return f"{_IMAGE}:{m.group(1)}" if m is not None else word
_TAG = re.compile(r"v?(0\.[0-9]{1,3}\.[0-9]{1,3}(?:\.[0-9]{1,3}|\.post[0-9]{1,3})?)(?:[-_][A-Za-z0-9_.\-]{0,40})?")


def _image_release(image: str, base: VllmSettings | None) -> tuple[str | None, list[str]]:
    """The vLLM release a ``vllm/vllm-openai:TAG`` image names (``v0.9.2`` -> 0.9.2), planned when --vllm-version is
    not given; a tag that names no release (nightly, a digest, a model name) is said in a warning."""
    name = image.rsplit("/", 1)[-1]
    tag = name.partition(":")[2] if "@" not in name else ""
    if "@" in name:
        said = f"the image {excerpt(image, 60)} is pinned by digest, which names no vLLM release"
    elif not tag or tag == "latest":
        return None, []
    elif (m := _TAG.fullmatch(tag)) is not None:
        if base is None:
            return m.group(1), []
        if version_minor(base.version) is not None and version_minor(base.version) != version_minor(m.group(1)):
            return None, [f"the image {excerpt(image, 60)[1:-1]} is vLLM {m.group(1)}; planned with --vllm-version "
                          f"{base.version} as given"]
        return None, []
    else:
        said = f"the image tag {excerpt(tag, 40)} names no vLLM release"
    if base is not None:
        return None, []
    return None, [f"{said}: planned with the newest release's rules; give --vllm-version for the one it runs"]


def _pinned_release(pinned: str, base: VllmSettings | None, tagged: str | None,
                    said: list[str]) -> tuple[str | None, list[str]]:
    """The release a command pins (vllm==X where it installs or runs vLLM) as the one to plan, unless --vllm-version
    names one (a warning where they differ); an image's tag that names another release is said."""
    if base is not None:
        if version_minor(base.version) is not None and version_minor(base.version) != version_minor(pinned):
            return None, [*said, f"the command pins vLLM {pinned}; planned with --vllm-version {base.version} as given"]
        return None, said
    if tagged is not None and tagged != pinned:
        said = [*said, f"the command pins vLLM {pinned} and its image is {tagged}: planned with {pinned}, the one it runs"]
    return pinned, said


def image_tag_release(words: list[str]) -> str | None:
    """The vLLM release a ``vllm/vllm-openai:TAG`` image among the words names (None: no image, or a tag naming none)."""
    image = next((w for w in words if _is_image(w)), None)
    return _image_release(_as_docker_image(image), None)[0] if image is not None else None


def _v0_asked(settings: VllmSettings, named: bool) -> tuple[VllmSettings, list[str]]:
    """VLLM_USE_V1=0 as each release takes it: 0.8-0.10 run the V0 engine (engine/arg_utils.py), 0.11's API server
    asserts V1 (entrypoints/openai/api_server.py: it stops), 0.12 on have no such variable (envs.py: ignored), and
    up to 0.7 V0 is the engine anyway. With no release named, the V0 engine is planned and said."""
    minor = version_minor(settings.version)
    if (settings.version == "current" and named) or (minor is not None and minor >= 12):
        shown = "0.33" if minor is None else f"0.{minor}"
        return settings, [f"VLLM_USE_V1=0: vLLM {shown} has no V0 engine and does not read it (gone from envs.py in "
                          "0.12): planned as V1"]
    if minor == 11:
        raise InputError("VLLM_USE_V1=0: vLLM 0.11 stops at start-up (its API server asserts the V1 engine, "
                         "entrypoints/openai/api_server.py): unset it, or give the --vllm-version that runs V0 (0.10 "
                         "or earlier)")
    said = [] if named else ["VLLM_USE_V1=0: planned as the V0 engine of vLLM 0.10 and earlier (0.11 stops on it, "
                             "0.12 on ignore it); give --vllm-version for the release it runs"]
    return replace(settings, version="v0"), said


def _v1_asked(settings: VllmSettings) -> tuple[VllmSettings, list[str]]:
    """VLLM_USE_V1=1 as each release takes it: the V1 alpha on 0.7 (planned as such: settings.is_v1_alpha), the
    default engine from 0.8 (nothing to do), before 0.7 no V1 engine kvbudget models (envs.py of 0.6.5-0.6.6 reads
    it for a pre-alpha engine): planned as V0 and said."""
    minor = version_minor(settings.version)
    if minor == 7:
        return replace(settings, use_v1=True), []
    if minor is not None and minor < 7:
        return settings, [f"VLLM_USE_V1=1: vLLM 0.{minor} has no V1 engine kvbudget models (its alpha came with 0.7): "
                          "planned as the V0 engine"]
    return settings, []


def _program(tokens: list[str]) -> tuple[list[str], str]:
    """Drop the program part; return the argument tokens and the entry point."""
    for i, tok in enumerate(tokens):
        base = program_name(tok)
        if (base == "vllm" or tok == "vllm.entrypoints.cli.main") and i + 1 < len(tokens) and tokens[i + 1] == "serve":
            return tokens[i + 2:], "serve"
        if tok == "vllm.entrypoints.openai.api_server":
            return tokens[i + 1:], "module"  # python -m: the model only as --model
        if tok == "vllm.entrypoints.api_server":
            return tokens[i + 1:], "demo"  # the demo server: the model only as --model, and no model_tag
        if _is_image(tok):  # apptainer instance run IMAGE NAME ...: NAME is the instance's, not the container's
            entrypoint = _entrypoint(tokens[:i])
            if entrypoint is not None:  # docker run --entrypoint vllm IMAGE serve M: that program, not the image's
                return _program([entrypoint, *tokens[i + 1:]] if entrypoint else tokens[i + 1:])
            if _SIF.fullmatch(tok) and "exec" in tokens[:i]:  # apptainer exec IMAGE vllm serve M: the words run
                return _program(tokens[i + 1:])
            skip = 2 if _SIF.fullmatch(tok) and "instance" in tokens[:i] else 1
            return tokens[i + skip:], "image"
    if tokens and tokens[0].startswith("-"):
        return tokens, "serve"
    raise InputError("not a launch command kvbudget reads: give `vllm serve MODEL ...` (or python -m "
                     "vllm.entrypoints.openai.api_server), `python -m sglang.launch_server ...`, `trtllm-serve MODEL ...` "
                     "or `llama-server -m FILE.gguf ...`")


def _entrypoint(words: list[str]) -> str | None:
    """The program ``docker run --entrypoint PROG`` (or ``--entrypoint=PROG``) runs in place of the image's own (""
    for an empty one: the words after the image are the command); None where none is given."""
    found: str | None = None
    for i, word in enumerate(words):
        if word == "--entrypoint" and i + 1 < len(words):
            found = words[i + 1]
        elif word.startswith("--entrypoint="):
            found = word.partition("=")[2]
    return found


# The newest vllm/vllm-openai image whose entrypoint is ``python3 -m vllm.entrypoints.openai.api_server`` (the
# Dockerfile's ENTRYPOINT up to 0.8.5 at least, as a maintainer says in https://github.com/vllm-project/vllm/issues/17172;
# https://docs.vllm.ai/en/v0.4.2/serving/deploying_with_docker.html passes the model as --model). Newer images run
# ``vllm serve``.
_MODULE_IMAGE_MINOR = 8
# The releases whose V1 sampler takes FlashInfer's top-k/top-p whenever the package imports (topk_topp_sampler.py
# 0.8-0.11; 0.12-0.20 only on VLLM_USE_FLASHINFER_SAMPLER=1, 0.21 on by default): the vllm/vllm-openai image of those
# releases installs flashinfer-python (docker/Dockerfile, vllm-base stage, x86-64), a plain pip install does not
_IMAGE_FLASHINFER = (8, 11)
_DEMO_GONE_MINOR = 25  # vllm/entrypoints/api_server.py, the demo server, is in the wheels up to 0.24


def _module_words(bare: list[str], model: str | None, version: str, demo: bool) -> tuple[str, str]:
    """Words no flag takes after ``python -m vllm.entrypoints.openai.api_server`` (or the demo server
    ``vllm.entrypoints.api_server``): the model as --model gives it, and the warning; an InputError where vLLM
    stops. Only ``vllm serve`` serves a positional model (entrypoints/cli/serve.py: args.model = args.model_tag);
    the OpenAI module's own main parses one into model_tag from 0.10 (entrypoints/openai/cli_args.py
    make_arg_parser; 0.33: entrypoints/common/cli_args.py) and never reads it, so the engine's default model is
    served (config/model.py ModelConfig.model, Qwen/Qwen3-0.6B on 0.10.1 and 0.33.0). Up to 0.9 its parser has no
    positional argument, nor has the demo server's in any release (entrypoints/api_server.py: AsyncEngineArgs'
    flags only): argparse stops at the word (unrecognized arguments), with --model given or not."""
    word = excerpt(bare[0], 60)
    minor = version_minor(version)
    if demo or (minor is not None and minor <= 9):
        server = "the demo server (vllm.entrypoints.api_server)" if demo else "its OpenAI API server module"
        shown = f"vLLM {version.lstrip('v')}" if minor is not None else "vLLM"
        fix = "drop the word, --model is served" if model is not None else "give the model as --model MODEL"
        raise InputError(f"{shown} stops at start-up on the bare word {word} (api_server.py: error: unrecognized "
                         f"arguments): {server} takes no positional model{' up to 0.9' if not demo else ''}; {fix}")
    if model is None:
        raise InputError(f"python -m vllm...api_server does not read the bare word {word} as the model (vLLM 0.10+ "
                         "serves its default, Qwen/Qwen3-0.6B; 0.9 stops): give it as --model, or use vllm serve MODEL")
    return model, (f"python -m vllm...api_server passes over the bare word {word} (vLLM 0.10+; 0.9 stops at it: "
                   "unrecognized arguments): --model is served")


def _config_file(path: str) -> list[tuple[str, str | None, str]]:
    """``--config`` file entries as (flag, value, label naming the file and key): a YAML (or JSON) mapping of
    engine arguments, as vLLM's FlexibleArgumentParser._pull_args_from_config reads it. Read with a size
    cap, no aliases bombs; nothing it names is opened here (a ``config:`` inside it is not followed)."""
    where = f"--config {inputs.excerpt_path(path)}"
    loaded = inputs.load_options(path, "--config")
    if not isinstance(loaded, dict):
        raise InputError(f"{where}: must hold a mapping of engine arguments (max_model_len: 8192 ...)")
    out: list[tuple[str, str | None, str]] = []
    for key, item in loaded.items():
        name = str(key)[:100]
        flag = "--" + name.replace("_", "-")
        label = f"{where}: {name}"
        if isinstance(item, bool):
            out.append((flag if item else "--no-" + flag[2:], None, label))
        elif isinstance(item, (int, float, str)):
            out.append((flag, str(item), label))  # a long integer is refused by its length (parse_whole)
        elif isinstance(item, dict) and name == "speculative_config" and all(
                isinstance(v, (int, float, str, bool)) or v is None for v in item.values()):
            out.append((flag, json.dumps({str(k)[:100]: v for k, v in item.items()}), label))  # flat: no alias bomb
        elif isinstance(item, dict) and name == "compilation_config" and len(item) <= 200 and all(
                _small_value(v) or (isinstance(v, dict) and len(v) <= 100 and all(_small_value(w) for w in v.values()))
                for v in item.values()):  # two levels (pass_config: {...}), each bounded: no alias bomb
            out.append((flag, json.dumps({str(k)[:100]: v for k, v in item.items()}), label))
        elif isinstance(item, list) and name == "cudagraph_capture_sizes" and len(item) <= 4096 and all(
                isinstance(v, int) and not isinstance(v, bool) for v in item):
            out.append((flag, " ".join(str(v) for v in item), label))
        elif item is not None:  # a list or mapping: named, never printed (it may be an alias bomb)
            out.append((flag, f"<a {type(item).__name__}>", label))
    return out


def _small_value(v: object) -> bool:
    """A scalar, or a short list of scalars (a config file's value kvbudget passes on as JSON)."""
    scalar = (int, float, str, bool, type(None))
    return isinstance(v, scalar) or (isinstance(v, list) and len(v) <= 4096 and all(isinstance(w, scalar) for w in v))


def dashed(token: str) -> str:
    """``--tensor_parallel_size=2`` as vLLM reads it: underscores in a long flag's name (up to its first
    ``.``) become dashes (vllm/utils/argparse_utils.py, FlexibleArgumentParser.parse_args, 0.33.0)."""
    if not token.startswith("--"):
        return token
    name, eq, value = token.partition("=")
    head, dot, tail = name[2:].partition(".")
    return "--" + head.replace("_", "-") + dot + tail + eq + value


def parse_vllm_command(argv: list[str] | str, base: VllmSettings | None = None, pinned: str | None = None) -> LaunchCommand:
    """Read a vLLM launch command (a list of words, or one string as a shell would split it). ``pinned``: the release
    a setup step before it installed (``pip install vllm==0.10.1 && ...``), where the words do not pin one."""
    tokens = inputs.split_command(argv) if isinstance(argv, str) else list(argv)
    tokens = [t for t in tokens if t not in ("\\", "\n")]
    # NAME=VALUE before the program, also after env / sudo and their options (env VLLM_USE_V1=0 vllm serve M was
    # planned as V1): the program's environment
    env = [(key, value) for key, value in assignments(tokens) if key.isupper()]
    env_warnings: list[str] = []
    while tokens and "=" in tokens[0] and not tokens[0].startswith("-") and tokens[0].split("=")[0].isupper():
        tokens.pop(0)
    if tokens and tokens[0] == "env":
        tokens.pop(0)
    image_at = next((i for i, t in enumerate(tokens) if _is_image(t)), None)
    tag_version: str | None = None
    image_warnings: list[str] = []
    if image_at is not None:  # docker run [-e NAME=VALUE ...] vllm/vllm-openai:TAG ...: the container's environment
        env += container_env(tokens[:image_at])
        tag_version, image_warnings = _image_release(_as_docker_image(tokens[image_at]), base)
    pinned = package_pins(tokens).get("vllm", pinned)  # uvx --from vllm==0.10.1, uv run --with vllm==0.10.1, vllm@0.10.1
    if pinned is not None:
        tag_version, image_warnings = _pinned_release(pinned, base, tag_version, image_warnings)
    args, entry = _program(tokens)
    if entry == "image":  # the image's own entrypoint: the OpenAI API server module up to 0.8, vllm serve after
        image_minor = version_minor(tag_version) if tag_version is not None else None
        entry = "module" if image_minor is not None and image_minor <= _MODULE_IMAGE_MINOR else "serve"
    named_minor = version_minor(base.version if base is not None else tag_version)
    if entry == "demo" and named_minor is not None and named_minor >= _DEMO_GONE_MINOR:
        raise InputError(f"python -m vllm.entrypoints.api_server: vLLM 0.{named_minor} has no such module (the demo "
                         "server's entrypoints/api_server.py is gone from 0.25): use vllm serve MODEL")
    flags, historical = _flags()
    settings = replace(base or VllmSettings(version=tag_version or "current"),
                       entrypoint="serve" if entry in ("serve", "module", "demo") else "llm")
    named = base is not None or tag_version is not None  # a release the user (or the image tag) names
    for key, env_value in env:
        on = env_value.strip().lower() in _TRUE
        if key == "VLLM_USE_V1" and not on:
            settings, v0_said = _v0_asked(settings, named)
            env_warnings += v0_said
        elif key == "VLLM_USE_V1":
            settings, v1_said = _v1_asked(settings)
            env_warnings += v1_said
        elif key == "VLLM_ALLOW_LONG_MAX_MODEL_LEN":
            settings = replace(settings, allow_long_max_model_len=on)
        elif key == "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS":
            settings = replace(settings, estimate_cudagraphs=on)
        elif key == "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE":
            settings = replace(settings, chunked_local_hybrid=on)
        elif key == "VLLM_USE_FLASHINFER_SAMPLER":
            settings = replace(settings, sampler="flashinfer" if on else "native")
        elif key == "NCCL_CUMEM_ENABLE" and (nccl := _nccl_param(key, env_value)) is not None:
            settings = replace(settings, nccl_cumem=nccl)
        elif key == "NCCL_NVLS_ENABLE" and (nccl := _nccl_param(key, env_value)) is not None:
            settings = replace(settings, nccl_nvls=nccl)
        elif key == "VLLM_PP_LAYER_PARTITION":
            env_warnings.append("VLLM_PP_LAYER_PARTITION is not modelled: vLLM's default layer split is used")
    if image_at is not None and settings.sampler is None and _IMAGE_FLASHINFER[0] <= (version_minor(settings.version)
                                                                                    or 0) <= _IMAGE_FLASHINFER[1]:
        settings = replace(settings, sampler="flashinfer")  # the image has FlashInfer, which the sampler takes
    model: str | None = None
    warnings: list[str] = [*image_warnings, *env_warnings]
    pending: list[tuple[str, str | None, str]] = []
    dotted: dict[str, tuple[dict[str, object], str]] = {}  # --limit-mm-per-prompt.image.count 2: the keys per flag
    bare: list[str] = []  # words that are no flag's value, after python -m vllm.entrypoints...api_server
    i = 0
    while i < len(args):
        tok = args[i]
        i += 1
        if not tok.startswith("-") or tok == "-":
            if model is None and entry == "serve":
                model = tok
            elif entry in ("module", "demo"):
                bare.append(tok)
            else:  # vllm serve takes one positional (model_tag, nargs="?"): argparse refuses a second
                raise InputError(f"vLLM stops at start-up: `vllm serve: error: unrecognized arguments: "
                                 f"{excerpt(tok, 60)[1:-1]}`: a word that is no flag's value (a flag's `--` missing, or "
                                 "a value with spaces left unquoted?)")
            continue
        if tok.startswith("-O"):  # -O3, -O 3, -O=3, -O.level=3, -O '{...}': per release (compile_flags.short_o)
            from .compile_flags import release, short_o

            flag, o_value, took = short_o(tok, args[i] if i < len(args) else None, release(settings.version))
            i += took
            if flag.startswith("-O."):
                dotted.setdefault("--compilation-config", ({}, tok))
                _merge_dotted(dotted["--compilation-config"][0], flag[3:].split(".")[:8], _dotted_value(o_value or ""))
            else:
                pending.append((flag, o_value, tok.partition("=")[0] if tok.startswith("-O=") else tok))
            continue
        name, eq, inline = dashed(tok).partition("=")
        head, dot, key = name.partition(".")
        if dot and head in flags and flags[head][0] == "compilation_config" and key:
            from .compile_flags import refused_flag, release

            if (said := refused_flag(head, release(settings.version))) is not None:
                raise InputError(said)
            if release(settings.version) < (9, 0):  # FlexibleArgumentParser's dotted keys came with 0.9
                raise InputError(f"vLLM stops at start-up: `vllm serve: error: unrecognized arguments: {excerpt(name, 60)[1:-1]}`"
                                 " (dotted keys came with 0.9): give --compilation-config '{...}'")
            if not eq:
                if i >= len(args):
                    raise InputError(f"{name} needs a value")
                inline, i = args[i], i + 1
            dotted.setdefault("--compilation-config", ({}, name))
            _merge_dotted(dotted["--compilation-config"][0], key.split(".")[:8], _dotted_value(inline))
            continue
        if dot and head in flags and flags[head][0] in _JSON_KEYED and key:
            # FlexibleArgumentParser's dotted form: --limit-mm-per-prompt.video 0 sets one key of the JSON value
            if not eq:
                if i >= len(args):
                    raise InputError(f"{name} needs a value")
                inline, i = args[i], i + 1
            dotted.setdefault(head, ({}, name))
            _merge_dotted(dotted[head][0], key.split(".")[:8], _dotted_value(inline))
            continue
        if name not in flags and name.startswith("--no-") and "--" + name[5:] in flags:
            flags[name] = (flags["--" + name[5:]][0], False)  # BooleanOptionalAction's --no-X of older releases
        if name not in flags and name not in historical:
            matches = [f for f in flags if f.startswith(name)] if name.startswith("--") else []
            if len(matches) == 1:
                name = matches[0]
        _flag_there(name, settings.version)
        takes_value = flags[name][1] if name in flags else historical.get(name)
        arg: str | None = inline if eq else None
        if name in flags and flags[name][0] in _COMPILE_DESTS:
            from .compile_flags import refused_flag, release

            if (said := refused_flag(name, release(settings.version))) is not None:
                raise InputError(said)
        if takes_value and not eq and name in flags and flags[name][0] == "cudagraph_capture_sizes":
            # nargs="+": every following word that is not an option (argparse takes -1 as a value, a number)
            taken = []
            while i < len(args) and (not args[i].startswith("-") or digits(args[i][1:])):
                taken.append(args[i])
                i += 1
            if not taken:
                raise InputError(f"vLLM stops at start-up: `argument {name}: expected at least one argument`")
            arg = " ".join(taken)
        elif takes_value and not eq:
            if i >= len(args):
                raise InputError(f"{name} needs a value")
            arg = args[i]
            i += 1
        if name not in flags and name not in historical:
            # vLLM's argparse stops at an argument it does not know: the server does not start
            import difflib

            close = difflib.get_close_matches(name, list(flags), n=2, cutoff=0.75) if len(name) <= 80 else []
            hint = f" (did you mean {' or '.join(close)}?)" if close else " (not a flag of vLLM 0.33)"
            raise InputError(f"vLLM stops at start-up: `vllm serve: error: unrecognized arguments: {excerpt(name, 60)[1:-1]}`"
                             f"{hint}")
        pending.append((name, arg, name))
    # FlexibleArgumentParser adds the dotted keys back as one JSON value after the other words: they win
    pending += [(head, json.dumps(value), label) for head, (value, label) in dotted.items()]
    for name, arg, _ in list(pending):
        if name in flags and flags[name][0] == "config" and arg:
            pending[:0] = _config_file(arg)  # the command line wins over the file
    overrides = ""
    spec: tuple[str, str | None, str] | None = None  # --speculative-config's (flag, value, label), read after the loop
    spec_flags: dict[str, tuple[str, str]] = {}  # --spec-method, --spec-model, --spec-tokens: its keys
    offload: tuple[int | None, str] = (None, "native")  # --kv-offloading-size (bytes) and --kv-offloading-backend
    for name, arg, label in pending:
        if name in ("--rope-scaling", "--hf-overrides"):  # --rope-scaling: flags of 0.10 and earlier
            settings, extra = _overrides(settings, name, arg or "", label)
            warnings.extend(extra)
            if name == "--hf-overrides":  # the last one wins, as argparse keeps the last value
                overrides = json.dumps(config_overrides(arg or "")) if config_overrides(arg or "") else ""
            continue
        if name == "--enable-multimodal-encoder-data-parallel":  # a flag of 0.10-0.12, gone from 0.33's list
            settings = _multimodal(settings, "enable_multimodal_encoder_data_parallel", name, arg, label)
            continue
        if name in ("--num-redundant-experts", "--eplb-window-size"):  # flags of 0.9.2-0.11 (eplb.py)
            field = "num_redundant_experts" if name == "--num-redundant-experts" else "eplb_window_size"
            settings = replace(settings, **{field: whole(engine_int(arg or "", label, field, settings.version), label,
                                                         0 if field == "num_redundant_experts" else 1, 1 << 20)})
            continue
        if name == "--lora-extra-vocab-size":  # a flag of 0.11 and earlier (lora.py: the extra vocabulary rows)
            settings = replace(settings, lora_extra_vocab_size=whole(engine_int(arg or "", label, "lora_extra_vocab_size",
                                                                                settings.version), label, 1, 1 << 20))
            continue
        if name not in flags:
            if (said := unmodelled(name, None, arg)) is not None:
                warnings.append(said)
            continue
        dest = flags[name][0]
        if (said := unmodelled(name, dest, arg)) is not None:
            warnings.append(said)
        if dest == "model" and arg:
            if model is not None and model != arg and label == name:
                # 0.33 moves --model to the front, and the positional one is then an unrecognized argument
                # (utils/argparse_utils.py); 0.10 and before served the positional one (entrypoints/cli/serve.py)
                raise InputError(f"the command names two models, {excerpt(model, 60)} and {name} {excerpt(arg, 60)}: "
                                 "vLLM 0.33 stops at start-up (unrecognized arguments) and older releases serve the "
                                 "first; keep one")
            model = arg
        elif dest == "speculative_config":
            spec = (name, arg, label)
        elif dest in _SPEC_FLAGS:
            spec_flags[_SPEC_FLAGS[dest]] = (name, arg or "")
        elif dest in _MULTIMODAL:
            settings = _multimodal(settings, dest, name, arg, label)
            if dest == "limit_mm_per_prompt":
                from .encoder_profile import parse_limits

                warnings.extend(parse_limits(arg or "", label, settings.version)[1])
            if dest == "mm_processor_kwargs":
                from .encoder_profile import parse_processor_kwargs

                warnings.extend(parse_processor_kwargs(arg or "{}", label)[3])
        elif dest in ("revision", "code_revision") and arg:  # the model's config (or its code) at another commit
            warnings.append(revision_said(label, arg))
        elif dest in _COMPILE_DESTS:
            settings, compile_said = _compile(settings, dest, arg, label)
            warnings.extend(compile_said)
        elif dest in _EXTRA_DESTS:
            settings, offload = _extra_flag(settings, dest, name, arg, label, offload)
        elif dest == "lora_target_modules" and arg:
            warnings.append(f"{name}: kvbudget counts LoRA slots on every module vLLM supports; fewer target modules "
                            "take less")
        else:
            settings = _apply(settings, dest, name, arg, label)
    if offload[0] is not None:  # --kv-offloading-size selects the connector, over --kv-transfer-config's (kv_connector.py)
        from .kv_connector import offloading_connector

        settings = replace(settings, kv_connector=offloading_connector(offload[1], settings.version),
                           kv_offload_bytes=offload[0])
    if spec is not None or spec_flags:
        if spec_flags:
            spec = _spec_flags(spec, spec_flags)
        assert spec is not None
        settings, spec_warnings = _speculative(settings, spec[0], spec[1], spec[2])
        warnings += spec_warnings
    if settings.compile.given:
        from .compile_flags import checked

        compile_flags, compile_said = checked(settings.compile, settings.tensor_parallel_size, settings.version)
        settings = replace(settings, compile=compile_flags)
        warnings += compile_said
    if bare:
        model, bare_said = _module_words(bare, model, settings.version, entry == "demo")
        warnings.append(bare_said)
    if not model:
        raise InputError(NO_MODEL + ": give `vllm serve MODEL` or `--model MODEL`")
    if settings.tensor_parallel_size < 1 or settings.pipeline_parallel_size < 1 or settings.data_parallel_size < 1:
        raise InputError("parallel sizes must be at least 1")
    unmodelled_flags = tuple(dict.fromkeys(w.split(":", 1)[0] for w in warnings if "does not model the memory" in w))
    if unmodelled_flags:  # the figures carry a wider band: memory the run spends that kvbudget does not count
        settings = replace(settings, unmodelled=unmodelled_flags)
    return LaunchCommand(model, settings, tuple(warnings), tuple(env), overrides)
