"""Weight formats: the bytes a linear weight matrix takes in each storage format.

Shapes follow the checkpoint layouts that vLLM loads (``model_executor/layers/quantization``):
a matrix has ``rows`` outputs and ``cols`` inputs, and quantization groups run along the inputs.
Only linear weight matrices (``Tensor.linear``) are packed; embeddings, lm_head, norms,
biases, routers and conv kernels stay in the 16-bit dtype, as every one of these formats
leaves them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from .._record import field, record
from ..units import InputError, element_type, excerpt
from .params import Tensor

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _round_up(a: int, b: int) -> int:
    return _cdiv(a, b) * b


@record
class WeightFormat:
    """A storage format for linear weights.

    ``name`` is one of bf16, fp16, fp32, fp8, int8, gptq, awq, nf4, mxfp4, nvfp4, or ``stored``:
    the exact bytes a checkpoint file holds for each tensor (GGUF, safetensors headers).
    ``bits`` and ``group_size`` apply to gptq/awq; ``block`` to fp8 block scales;
    ``skip_roles`` are roles the checkpoint keeps unquantized (``modules_to_not_convert``).
    ``exact``: a quantized format whose tensors carry their ``stored`` bytes (safetensors headers):
    those bytes are used as ``stored`` uses them, except where an engine pads the matrix.
    """

    name: str
    bits: int = 16
    group_size: int = 128
    block: tuple[int, int] | None = None
    fp8_scales: str = "per_tensor"  # per_tensor | per_channel | block
    double_quant: bool = False
    dense_dtype: str = "bf16"
    skip_roles: frozenset[str] = field(default_factory=frozenset)
    expert_padding: tuple[int, int] = (0, 0)  # an engine pads expert matrices: (hidden, intermediate) multiples
    label: str = ""  # how to describe it, where the name alone does not say (e.g. "GGUF Q4_K")
    exact: bool = False  # tensors' ``stored`` bytes are this format's bytes, read from the checkpoint
    ftype: str = ""  # name "gguf": the llama.cpp file type (Q4_K_M, ...), priced tensor by tensor (gguf_quant)
    kv_cache: str = ""  # the KV cache the checkpoint was quantized for ("fp8": modelopt kv_cache_quant_algo FP8,
    # compressed-tensors kv_cache_scheme of 8-bit floats); "": none. TensorRT-LLM takes it when asked for auto.
    vllm_auto_kv: str = ""  # what vLLM >= 0.14 resolves --kv-cache-dtype auto to for this checkpoint: a ModelOpt
    # config's KV format ("fp8_e4m3", "nvfp4"); "": the model dtype (utils/torch_utils.py resolve_kv_cache_dtype_string)
    vllm_stops: str = ""  # why vLLM stops at start-up on this checkpoint's quantization_config where other engines
    # load it ("": it loads it): a ModelOpt nested form vLLM's config reader refuses (``_vllm_nested_modelopt``)
    sglang_auto_fp8: bool = False  # SGLang >= 0.5.3 resolves --kv-cache-dtype auto to FP8 for this checkpoint: its
    # ModelOpt config's KV format as SGLang reads it (``_sglang_auto_fp8``), which differs from vLLM's reading
    zero_points: bool = True  # gptq/awq: a packed zero point per group; compressed-tensors stores none when symmetric
    act_order_index: bool = True  # gptq: the int32 g_idx per input column; compressed-tensors checkpoints hold none

    @property
    def quantized(self) -> bool:
        return self.name not in ("bf16", "fp16", "fp32", "stored")

    def describe(self) -> str:
        if self.label:
            return self.label
        if self.name in ("gptq", "awq"):
            return f"{self.name} {self.bits}-bit, group {self.group_size}" + ("" if self.zero_points else ", symmetric")
        if self.name == "fp8":
            scales = f"block {self.block[0]}x{self.block[1]}" if self.block else self.fp8_scales.replace("_", "-")
            return f"fp8 (e4m3) with {scales} fp32 scales"
        return self.name

    def packs(self, t: Tensor) -> bool:
        return self.quantized and t.linear and t.role not in self.skip_roles

    def matrix_bytes(self, rows: int, cols: int) -> int:
        """Bytes of one ``rows x cols`` linear weight in this format, scales included."""
        n = rows * cols
        name = self.name
        if name in ("bf16", "fp16", "fp32"):
            return element_type(name).nbytes(n)
        if name == "fp8":
            # fp8 e4m3 weight + fp32 scales: one per tensor, per output channel, or per block.
            if self.block:
                return n + _cdiv(rows, self.block[0]) * _cdiv(cols, self.block[1]) * 4
            return n + (rows * 4 if self.fp8_scales == "per_channel" else 4)
        if name == "int8":  # w8a8: int8 weight + fp32 per-channel scale
            return n + rows * 4
        if name in ("gptq", "awq"):
            groups = _cdiv(cols, self.group_size if self.group_size > 0 else cols)
            packed = n * self.bits // 8  # qweight: int32 words of 32/bits values
            zeros = groups * rows * self.bits // 8 if self.zero_points else 0  # qzeros: int32 packed the same way
            scales = groups * rows * 2  # fp16 scales
            g_idx = cols * 4 if name == "gptq" and self.act_order_index else 0  # int32 act-order index
            return packed + zeros + scales + g_idx
        if name == "nf4":
            # bitsandbytes: 4-bit codes + an absmax per 64 values (fp32, or uint8 + fp32 per
            # 256 absmax with double quantization).
            blocks = _cdiv(n, 64)
            absmax = blocks + _cdiv(blocks, 256) * 4 if self.double_quant else blocks * 4
            return _cdiv(n, 2) + absmax
        if name == "mxfp4":  # OCP MX: 32 fp4 values share one e8m0 scale byte
            return _cdiv(n, 2) + rows * _cdiv(cols, 32)
        if name == "nvfp4":  # 16 fp4 values share one fp8 scale; fp32 global + input scales
            return _cdiv(n, 2) + rows * _cdiv(cols, 16) + 8
        if name == "gguf":  # its types depend on each tensor's place in the model: gguf_quant.gguf_weights
            raise InputError(f"{self.describe()} is a llama.cpp file type: plan it with --engine llama.cpp")
        raise InputError(f"unknown weight format {name!r}")  # pragma: no cover - guarded by parse

    def tensor_bytes(self, t: Tensor, tp: int = 1) -> int:
        rows, cols = t.shape_per_rank(tp)
        padded = self.expert_padding != (0, 0) and t.role == "experts" and t.linear
        if (self.name == "stored" or self.exact) and t.stored and not padded:
            return t.count * -(-t.stored * rows * cols // (t.rows * t.cols))  # the file's bytes, split as TP splits the shape
        if padded:
            hidden, inter = self.expert_padding
            if t.split == "col":  # gate/up: intermediate rows x hidden columns
                rows, cols = _round_up(rows, inter), _round_up(cols, hidden)
            else:  # down: hidden rows x intermediate columns
                rows, cols = _round_up(rows, hidden), _round_up(cols, inter)
        if self.packs(t):
            return t.count * self.matrix_bytes(rows, cols)
        return t.count * element_type(self.dense_dtype).nbytes(rows * cols)


WEIGHT_FORMATS = ("bf16", "fp16", "fp32", "fp8", "int8", "gptq", "awq", "nf4", "mxfp4", "nvfp4")
_FORMAT_ALIASES = {
    "bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "auto": "auto",
    "fp8_e4m3": "fp8", "int4": "awq", "4bit": "awq", "bnb": "nf4", "bitsandbytes": "nf4",
    "w8a8": "int8", "mxfp4": "mxfp4", "fp4": "nvfp4", "modelopt_fp4": "nvfp4", "compressed_tensors": "int8",
    # engines' own method names for these formats (vLLM QUANTIZATION_METHODS, SGLang QUANTIZATION_CHOICES): the
    # kernel they name does not change the bytes stored
    "awq_marlin": "awq", "auto_awq": "awq", "moe_wna16": "awq", "gptq_marlin": "gptq", "auto_gptq": "gptq",
    "marlin": "gptq", "w8a8_fp8": "fp8", "w8a8_int8": "int8", "modelopt_fp8": "fp8", "ptpc_fp8": "fp8",
    "fbgemm_fp8": "fp8", "nvfp4_online": "nvfp4", "petit_nvfp4": "nvfp4", "gpt_oss_mxfp4": "mxfp4",
}


DENSE_DTYPES = ("bf16", "fp16", "fp32")


def _word_format(key: str, dense_dtype: str) -> WeightFormat:
    """The format a known word names (``parse_weight_format``), the layers it leaves in ``dense_dtype``."""
    if key in DENSE_DTYPES:
        return WeightFormat(key, dense_dtype=key)
    return WeightFormat(key, bits=4 if key in ("gptq", "awq", "nf4", "mxfp4", "nvfp4") else 8, dense_dtype=dense_dtype)


# Every format a word names, with each 16-bit dtype for the layers it leaves, built once: a plan search asks for the
# same few thousands of times, and one shared record keeps its hash for the memoized functions that key on it
_WORD_FORMATS = {(key, dense): _word_format(key, dense) for key in WEIGHT_FORMATS for dense in DENSE_DTYPES}


def dense_format(dtype: str) -> WeightFormat:
    """Unquantized weights in ``dtype``."""
    return _WORD_FORMATS.get((dtype, dtype)) or WeightFormat(dtype, dense_dtype=dtype)


def parse_weight_format(text: str, dense_dtype: str = "bf16") -> WeightFormat:
    """A weight format from a command-line word (``bf16``, ``fp8``, ``awq``, ``gptq``, ...)."""
    key = text.strip().lower().replace("-", "_")
    key = _FORMAT_ALIASES.get(key, key)
    if key not in WEIGHT_FORMATS:
        from .gguf_quant import is_preset, other_engine

        if is_preset(text):
            raise other_engine(text)
        raise InputError(f"unknown weights dtype {text!r}: use one of {', '.join(WEIGHT_FORMATS)}")
    return _WORD_FORMATS.get((key, dense_dtype)) or _word_format(key, dense_dtype)


_SKIP_WORDS = {
    "self_attn": "attention", "attn": "attention", "attention": "attention",
    "router": "router", "gate": "router", "mlp.gate": "router",
    "embed_tokens": "embeddings", "lm_head": "lm_head", "shared_expert": "shared_experts", "shared_experts": "shared_experts",
    "vision_tower": "vision", "vision_model": "vision", "visual": "vision", "multi_modal_projector": "vision",
}


def _skip_roles(names: object, num_layers: int = 0) -> frozenset[str]:
    """Roles a checkpoint leaves unquantized, from its module-name list. A name that carries a layer number
    (``model.layers.0.self_attn``: ModelOpt's per-layer exclude lists) exempts that layer only: a role counts as
    exempt when such names cover at least 9 in 10 of the model's ``num_layers`` layers (a role that only MoE layers
    have, as DeepSeek's shared experts after its dense layers, is listed for those), and is left out otherwise."""
    roles: set[str] = set()
    layers: dict[str, set[int]] = {}
    dense_mlp: set[str] = set()  # projections of the dense MLP the list names (mlp.gate_proj, mlp.(gate|up)_proj)
    if isinstance(names, list):
        for name in names:
            text = str(name).removeprefix("re:").replace("\\.", ".").strip("^$.*")
            parts = [part for part in text.split(".") if part and part not in ("*", ".*")]
            if not parts:
                continue
            numbers = [int(part) for part in parts if part.isdigit() and len(part) < 7]
            if parts[-1] == "mlp" and numbers:
                # a whole layer's MLP module (ModelOpt's "model.language_model.layers.0.mlp*" for Gemma 4, whose
                # experts are a sibling module): the dense MLP of that layer
                layers.setdefault("mlp", set()).add(numbers[0])
                continue
            if not numbers and len(parts) >= 2 and parts[-2] == "mlp":
                dense_mlp |= _mlp_projections(parts[-1])
            for word in (parts[-1], ".".join(parts[-2:]), *parts):
                role = _SKIP_WORDS.get(word.rstrip("*"))
                if role is not None:
                    if numbers:
                        layers.setdefault(role, set()).add(numbers[0])
                    elif not any(part.isdigit() for part in parts):
                        roles.add(role)
                    break
    if num_layers > 0:
        roles |= {role for role, seen in layers.items() if 10 * len(seen) >= 9 * num_layers}
    if "down" in dense_mlp and ({"gate", "up"} <= dense_mlp or "gate_up" in dense_mlp):
        roles.add("mlp")  # every matrix of the dense MLP stays unquantized (Kimi K2 Thinking's ignore list)
    return frozenset(roles)


_SKIP_KEYS = ("modules_to_not_convert", "ignore", "ignored_layers", "exclude_modules", "llm_int8_skip_modules")
_EVERY = re.compile(r"(?:re:)?\^?(?:(?:model|layers|model\.layers|language_model)?[.\\]*)?[.*]*\$?")


def _matches_every_layer(name: object) -> bool:
    """A skip-list entry that every decoder layer's modules match: ``*``, ``re:.*``, ``model.layers.*``."""
    return isinstance(name, str) and "*" in name and _EVERY.fullmatch(name.replace("\\.", ".")) is not None


def _mlp_projections(part: str) -> set[str]:
    """The dense-MLP projections one name part covers: ``down_proj`` -> {down}; a regular expression's
    alternation ``(gate|up|gate_up|down)_proj`` -> all four; anything else -> none."""
    stem = part.removesuffix("_proj")
    if stem == part:
        return set()
    words = set(stem.strip("()").split("|")) if stem.startswith("(") and stem.endswith(")") else {stem}
    return words if words <= {"gate", "up", "gate_up", "down"} else set()


def _whole(value: object, name: str, allow: tuple[int, ...] = ()) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or (value <= 0 and value not in allow):
        raise InputError(f"{name} must be a positive whole number, got {value!r}")
    return value


def _compressed_tensors(qc: Mapping[str, Any], dense_dtype: str, skip: frozenset[str]) -> WeightFormat:
    """llm-compressor checkpoints: the first config group's weight scheme."""
    groups = qc.get("config_groups")
    if not isinstance(groups, Mapping) or not groups:
        raise InputError("compressed-tensors config has no config_groups")
    # Each group quantizes the layers its targets name (vLLM 0.33.0 compressed_tensors.py): a group with none
    # quantizes nothing, and groups of different weight schemes store some layers one way and some another
    formats: dict[str, WeightFormat] = {}
    for name, group in groups.items():
        targets = group.get("targets") if isinstance(group, Mapping) else None
        if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
            raise InputError(f"compressed-tensors config group {excerpt(name, 40)} needs a 'targets' list of layer "
                             f"names, got {excerpt(targets, 40)}")
        if targets:
            formats[name] = _ct_group(group, dense_dtype, skip)
    if not formats:
        raise InputError("no compressed-tensors config group targets a layer, so none is quantized: drop the "
                         "quantization_config, or give --weights-dtype bf16")
    (first, fmt), *rest = formats.items()
    other = next(((name, f) for name, f in rest if f != fmt), None)
    if other is not None:
        raise InputError(f"compressed-tensors config groups {excerpt(first, 30)} ({fmt.describe()}) and "
                         f"{excerpt(other[0], 30)} ({other[1].describe()}) store layers differently; kvbudget "
                         "prices one scheme: give the model folder with its *.safetensors, or --weights-dtype")
    return fmt


def _ct_group(group: Mapping[str, Any], dense_dtype: str, skip: frozenset[str]) -> WeightFormat:
    """One compressed-tensors config group's weight scheme."""
    w = group.get("weights")
    if not isinstance(w, Mapping):
        raise InputError("compressed-tensors config group has no 'weights' scheme")
    bits = _whole(w.get("num_bits", 8), "num_bits")
    kind = w.get("type")
    if kind == "float" and bits == 8:
        return WeightFormat("fp8", bits=8, dense_dtype=dense_dtype, skip_roles=skip,
                            fp8_scales="per_channel" if w.get("strategy") == "channel" else "per_tensor")
    if kind == "float" and bits == 4:
        return WeightFormat("nvfp4", bits=4, dense_dtype=dense_dtype, skip_roles=skip)
    if kind == "int" and bits == 8:
        return WeightFormat("int8", bits=8, dense_dtype=dense_dtype, skip_roles=skip)
    if kind == "int" and bits in (2, 3, 4):
        group_size = w.get("group_size")  # an explicit 0 is refused below (``or 128`` read it as 128)
        group_size = 128 if group_size is None else group_size
        # pack-quantized: weight_packed, weight_scale, and a weight_zero_point only when not symmetric
        # (compressed-tensors QuantizationArgs defaults symmetric to true); no g_idx: vLLM 0.33.0
        # compressed_tensors.py refuses group/dynamic activation ordering, and schemes/compressed_tensors_wNa16.py
        # and compressed_tensors_moe_wna16.py register none
        symmetric = w.get("symmetric", True) is not False
        return WeightFormat("gptq", bits=bits, group_size=_whole(group_size, "group_size", allow=(-1,)),
                            dense_dtype=dense_dtype, skip_roles=skip, zero_points=not symmetric,
                            act_order_index=False)
    raise InputError(f"compressed-tensors weights of type {kind!r} with {bits} bits are not supported")


def from_quantization_config(qc: Mapping[str, Any], dense_dtype: str, num_layers: int = 0) -> WeightFormat:
    """The weight format a checkpoint's ``quantization_config`` describes (vLLM's readers:
    ``model_executor/layers/quantization/*.py``), with the KV cache it was quantized for. ``num_layers``: the
    model's decoder layers, against which per-layer exclude lists are read."""
    nested = qc.get("quantization")
    method = qc.get("quant_method")
    modelopt = not method or str(method).lower().startswith("modelopt")
    if "quantization" in qc and modelopt and not isinstance(nested, Mapping):  # vLLM 0.33.0 modelopt.py from_config
        raise InputError(f"ModelOpt's 'quantization' must be an object holding quant_algo, got {excerpt(nested, 40)}")
    legacy = isinstance(nested, Mapping) and modelopt
    stops = ""
    if legacy and isinstance(nested, Mapping):
        # ModelOpt 0.29 and before write hf_quant_config.json, {"producer": ..., "quantization": {"quant_algo": ...,
        # "kv_cache_quant_algo": ..., "exclude_modules": [...]}}, which vLLM takes as the quantization_config when
        # config.json has none (transformers_utils/config.py) and reads as ModelOpt (quantization/modelopt.py
        # from_config reads the nested object whenever there is one, with quant_method "modelopt" or none)
        stops = _vllm_nested_modelopt(qc, nested)
        qc = {**nested, "quant_method": "modelopt"}
    fmt = _weights_of(qc, dense_dtype, num_layers)
    kv = _checkpoint_kv(qc)
    auto = _vllm_auto_kv(qc)
    sglang_fp8 = _sglang_auto_fp8(qc, legacy=legacy)
    if kv or auto or sglang_fp8 or stops:
        from .._record import replace

        fmt = replace(fmt, kv_cache=kv, vllm_auto_kv=auto, sglang_auto_fp8=sglang_fp8, vllm_stops=stops)
    return fmt


# The quant_algo values vLLM's config reader takes from ModelOpt's nested form (a "producer" named modelopt, or a
# "modelopt_quant_config" in the nested object): 0.33.0 transformers_utils/model_arch_config_convertor.py
# _normalize_quantization_config (config/model.py in 0.11 - 0.32, which also lacked MIXED_PRECISION); any other stops
# it with "Unknown ModelOpt quant algo", W4A16_NVFP4 among them, which the flat config.json form loads.
_VLLM_NESTED_ALGOS = ("FP8", "FP8_PER_CHANNEL_PER_TOKEN", "FP8_PB_WO", "NVFP4", "MIXED_PRECISION")
_NVFP4_NESTED_FIELDS = ("group_size", "kv_cache_quant_algo", "exclude_modules")


def _vllm_nested_modelopt(qc: Mapping[str, Any], nested: Mapping[str, Any]) -> str:
    """Why vLLM 0.33.0 stops on ModelOpt's nested form ``qc`` ("" when it loads it), where SGLang 0.5.23 loads it
    (configs/model_config.py _parse_modelopt_quant_config takes any FP4 algo, modelopt_quant.py W4A16_NVFP4 among
    them): an algo its config reader does not take (``_VLLM_NESTED_ALGOS``), or an NVFP4-family algo without the
    fields modelopt.py ModelOptNvFp4Config._from_config requires of the nested form ("NVFP4 quantization requires
    the following fields in hf_quant_config.json")."""
    producer = qc.get("producer")
    algo = nested.get("quant_algo")
    named = (isinstance(producer, Mapping) and producer.get("name") == "modelopt") or "modelopt_quant_config" in nested
    if named and algo is not None and str(algo).upper() not in _VLLM_NESTED_ALGOS:
        return (f"ModelOpt quant_algo {excerpt(algo, 40)} in hf_quant_config.json's nested form: vLLM stops at start-up "
                "('Unknown ModelOpt quant algo', model_arch_config_convertor.py); write it flat in config.json's "
                "quantization_config (quant_method modelopt), or use --engine sglang")
    missing = [k for k in _NVFP4_NESTED_FIELDS if k not in nested]
    if "NVFP4" in str(algo).upper() and missing:
        return (f"ModelOpt quant_algo {excerpt(algo, 40)} in the nested form lacks {', '.join(missing)}: vLLM stops at "
                "start-up ('NVFP4 quantization requires the following fields', quantization/modelopt.py); add them "
                "(null where none), or use --engine sglang")
    return ""


def _vllm_auto_kv(qc: Mapping[str, Any]) -> str:
    """What vLLM 0.14-0.33 takes ``--kv-cache-dtype auto`` to be for a checkpoint with this quantization_config
    (utils/torch_utils.py get_kv_cache_quant_algo_string, applied by engine/arg_utils.py create_engine_config): for a
    ModelOpt config (``quant_method`` starting "modelopt") its kv_cache_scheme or kv_cache_quant_algo, "fp8" as
    fp8_e4m3 and "nvfp4" as nvfp4 (matched case-folded; a dict scheme of static 8-bit floats is fp8, of 4-bit floats
    nvfp4); any other value, or another method, leaves auto (the model dtype): ""."""
    if not str(qc.get("quant_method") or "").lower().startswith("modelopt"):
        return ""
    algo = qc.get("kv_cache_scheme") or qc.get("kv_cache_quant_algo")
    if isinstance(algo, Mapping):
        if algo.get("dynamic") is False and algo.get("num_bits") == 8 and algo.get("type") == "float":
            return "fp8_e4m3"
        return "nvfp4" if algo.get("num_bits") == 4 and algo.get("type") == "float" else ""
    return {"fp8": "fp8_e4m3", "nvfp4": "nvfp4"}.get(algo.lower(), "") if isinstance(algo, str) else ""


def _sglang_auto_fp8(qc: Mapping[str, Any], legacy: bool) -> bool:
    """Whether SGLang 0.5.23 caches FP8 for ``--kv-cache-dtype auto`` on a checkpoint with this quantization_config
    (mem_cache/kv_cache_dtype.py configure_kv_cache_dtype: the ModelOpt config's kv_cache_quant_algo, a string equal
    to "FP8" case-folded). layers/quantization/modelopt_quant.py reads that per config class, unlike vLLM: the
    hf_quant_config.json form (``legacy``) by kv_cache_quant_algo alone; config.json's flat form by a kv_cache_scheme
    dict of type "float" and 8 bits (FP8 whatever its ``dynamic``; any other dict: none), else by a kv_cache_scheme
    string for NVFP4 checkpoints only (ModelOptFp4Config: "FP8" / "FLOAT8" stripped and case-folded; any other: none),
    else by kv_cache_quant_algo (ModelOptFp8Config and ModelOptMixedPrecisionConfig ignore a string scheme)."""
    if not str(qc.get("quant_method") or "").lower().startswith("modelopt"):
        return False
    algo = qc.get("kv_cache_quant_algo")
    scheme = None if legacy else qc.get("kv_cache_scheme")
    if isinstance(scheme, Mapping):
        return scheme.get("type") == "float" and scheme.get("num_bits") == 8
    if isinstance(scheme, str) and str(qc.get("quant_algo") or "").upper() == "NVFP4":
        return scheme.strip().upper() in ("FP8", "FLOAT8")
    return isinstance(algo, str) and algo.upper() == "FP8"


def _checkpoint_kv(qc: Mapping[str, Any]) -> str:
    """The KV cache dtype a checkpoint was calibrated for: ModelOpt's ``kv_cache_quant_algo`` (FP8), or
    compressed-tensors' ``kv_cache_scheme`` of 8-bit floats; "" otherwise."""
    given = qc.get("kv_cache_quant_algo")
    if given is not None and not isinstance(given, str):  # vLLM 0.33.0 modelopt.py refuses it as well
        raise InputError(f"kv_cache_quant_algo must be a string such as \"FP8\", got {excerpt(given, 40)}")
    algo = (given or "").upper()
    if algo.startswith("FP8"):
        return "fp8"
    if algo == "NVFP4":  # vLLM 0.33.0 utils/torch_utils.py MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP; others fall back to auto
        return "nvfp4"
    scheme = qc.get("kv_cache_scheme")
    if isinstance(scheme, Mapping) and scheme.get("num_bits") == 8 and str(scheme.get("type", "")).lower() == "float":
        return "fp8"
    return ""


def _weights_of(qc: Mapping[str, Any], dense_dtype: str, num_layers: int = 0) -> WeightFormat:
    method = str(qc.get("quant_method") or qc.get("quant_algo") or "").lower()
    algo = str(qc.get("quant_algo") or "").upper()
    key = next((k for k in _SKIP_KEYS if qc.get(k)), "")
    listed = qc.get(key) if key else None
    if listed is not None and not isinstance(listed, list):  # vLLM: "exclude_modules must be a list" (modelopt.py)
        raise InputError(f"{key} must be a list of module names, got {excerpt(listed, 40)}")
    if listed and (every := next((n for n in listed if _matches_every_layer(n)), None)) is not None:
        # vLLM matches it against every layer's name (modelopt.py fnmatch, compressed-tensors' re:), so no layer is
        # quantized: the checkpoint is 16-bit, whatever quant_method says (was priced as quantized, exit 0)
        raise InputError(f"{key} {excerpt(every, 40)} matches every layer, so none is quantized: drop the "
                         "quantization_config, or give --weights-dtype bf16")
    skip = _skip_roles(listed, num_layers)
    if method == "fp8":
        block = qc.get("weight_block_size")
        if block is not None:
            if not isinstance(block, list) or len(block) != 2:
                raise InputError(f"weight_block_size must be two numbers, got {block!r}")
            block = (_whole(block[0], "weight_block_size"), _whole(block[1], "weight_block_size"))
        return WeightFormat("fp8", bits=8, dense_dtype=dense_dtype, skip_roles=skip, block=block,
                            fp8_scales="block" if block else "per_tensor")
    if method == "fbgemm_fp8":  # fp8 weights with one fp32 scale per output channel
        return WeightFormat("fp8", bits=8, dense_dtype=dense_dtype, skip_roles=skip, fp8_scales="per_channel")
    if method in ("gptq", "awq"):
        bits = _whole(qc.get("bits", qc.get("w_bit", 4)), "bits")
        group = _whole(qc.get("group_size", qc.get("q_group_size", 128)), "group_size", allow=(-1,))
        if bits not in ((4, 8) if method == "awq" else (2, 3, 4, 8)):  # AWQ: 4-bit (vLLM awq.py; 8 from 0.33's Marlin)
            raise InputError(f"{method} bits must be {'4 or 8' if method == 'awq' else '2, 3, 4 or 8'}, got {bits}")
        return WeightFormat(method, bits=bits, group_size=group, dense_dtype="fp16", skip_roles=skip)
    if method == "bitsandbytes":
        flags = {name: qc.get(name) for name in ("load_in_4bit", "load_in_8bit")}
        for name, value in flags.items():  # transformers' BitsAndBytesConfig refuses a non-boolean and both at once
            if value is not None and not isinstance(value, bool):
                raise InputError(f"bitsandbytes {name} must be true or false, got {value!r}")
        if flags["load_in_4bit"] and flags["load_in_8bit"]:
            raise InputError("bitsandbytes load_in_4bit and load_in_8bit are both true: keep one")
        if qc.get("load_in_8bit"):
            return WeightFormat("int8", bits=8, dense_dtype=dense_dtype, skip_roles=skip)
        return WeightFormat("nf4", bits=4, dense_dtype=dense_dtype, skip_roles=skip,
                            double_quant=bool(qc.get("bnb_4bit_use_double_quant")))
    if method == "mxfp4":
        return WeightFormat("mxfp4", bits=4, dense_dtype=dense_dtype, skip_roles=skip)
    if method == "modelopt" or (method.startswith(("fp8", "nvfp4")) and method == algo.lower()):
        # NVIDIA ModelOpt: quant_algo says which, one of vLLM 0.33.0 quantization/modelopt.py LINEAR_ALGOS (any
        # other stops vLLM: "ModelOpt currently only supports ..."); FP8 keeps one fp32 scale per tensor,
        # FP8_PER_CHANNEL_PER_TOKEN one per output channel, FP8_PB_WO one per 128 x 128 block (its alias
        # FP8_BLOCK_SCALES is taken only for a MIXED_PRECISION layer: modelopt.py _BLOCK_FP8_MOE_ALGOS)
        if algo == "FP8":
            return WeightFormat("fp8", bits=8, dense_dtype=dense_dtype, skip_roles=skip)
        if algo == "FP8_PER_CHANNEL_PER_TOKEN":
            return WeightFormat("fp8", bits=8, dense_dtype=dense_dtype, skip_roles=skip, fp8_scales="per_channel")
        if algo == "FP8_PB_WO":
            return WeightFormat("fp8", bits=8, dense_dtype=dense_dtype, skip_roles=skip, block=(128, 128),
                                fp8_scales="block")
        if algo in ("NVFP4", "W4A16_NVFP4"):
            return WeightFormat("nvfp4", bits=4, dense_dtype=dense_dtype, skip_roles=skip)
        if algo in ("MXFP8", "MIXED_PRECISION"):
            raise InputError(f"ModelOpt quant_algo {algo} is not one kvbudget prices")
        raise InputError(f"ModelOpt quant_algo {excerpt(algo or '(none)', 40)} is not one vLLM loads "
                         "(FP8, FP8_PER_CHANNEL_PER_TOKEN, FP8_PB_WO, NVFP4, W4A16_NVFP4)")
    if method in ("compressed-tensors", "compressed_tensors"):
        return _compressed_tensors(qc, dense_dtype, skip)
    raise InputError(
        f"unsupported quantization_config quant_method {method!r}: "
        f"pass --weights-dtype to say how the weights are stored"
    )
