"""vLLM's ``--quantization``: the weight format it loads and the kernel that runs the 4-bit linear layers.

vLLM's method names (model_executor/layers/quantization/__init__.py QUANTIZATION_METHODS, 0.10.1 to 0.33.0) are
more than kvbudget's weight formats: ``awq_marlin``, ``gptq_marlin``, ``marlin``, ``auto_awq``/``auto_gptq``
(0.24/0.22 on), ``moe_wna16`` and ``compressed-tensors`` run a checkpoint's own 4-bit or 8-bit weights with another
kernel; ``fp8``, ``ptpc_fp8``, ``bitsandbytes``, ``experts_int8`` quantize a 16-bit checkpoint while loading.
A checkpoint whose ``quantization_config`` names another family stops vLLM (config/model.py
``_verify_quantization``: "Quantization method specified in the model config ... does not match ...").

The kernel matters to memory: vLLM's plain AWQ and GPTQ kernels dequantize a whole weight matrix to 16 bits
for the matmul (AWQ for batches of 256 tokens or more, ``awq.py``/``auto_awq.py`` apply; GPTQ on every call,
``csrc/quantization/gptq/q_gemm.cu`` gptq_gemm's ``temp_dq``), so the profiling run's peak holds the largest
one. Marlin kernels do not. vLLM takes Marlin when the GPU can run it (``marlin_utils.py``
query_marlin_supported_quant_types: compute capability 8.0 up to 0.13, 7.5 from 0.14) unless the command names
the plain kernel: ``--quantization awq`` forced it up to 0.23 ("... you specified quantization=awq explicitly,
so forcing awq"; 0.24 brought ``auto_awq``, which picks Marlin for it too) and ``--quantization gptq`` up to
0.21 (``auto_gptq`` from 0.22). Read from the 0.13.0, 0.14.0, 0.21.0, 0.22.0, 0.23.0, 0.24.0 and 0.33.0 wheels.
"""

from __future__ import annotations

from ..._record import replace
from ...hardware import GPU, capability
from ...model.params import ROLES
from ...model.spec import WEIGHTS_FIX, ModelSpec, checkpoint_format
from ...model.weights import WeightFormat, dense_format, parse_weight_format
from ...units import InputError
from .settings import version_minor

# vLLM's method names that run a checkpoint's own 4-bit integer weights (AWQ or GPTQ packing)
_INT4_KERNELS = ("awq", "awq_marlin", "auto_awq", "gptq", "gptq_marlin", "auto_gptq", "marlin", "moe_wna16")
# names that read the scheme from the checkpoint's quantization_config, whatever it is
_FROM_CONFIG = ("compressed-tensors", "compressed_tensors", "modelopt", "modelopt_mixed", "quark", "inc", "humming")
# vLLM's own names whose format carries more than the shared word aliases (model/weights.py) say: FP8 scale layouts
_VLLM_NAMES: dict[str, WeightFormat] = {
    "fbgemm_fp8": WeightFormat("fp8", bits=8, fp8_scales="per_channel"),
    "ptpc_fp8": WeightFormat("fp8", bits=8, fp8_scales="per_channel"),
    "fp8_per_channel": WeightFormat("fp8", bits=8, fp8_scales="per_channel"),
    "fp8_per_tensor": WeightFormat("fp8", bits=8),
    "fp8_per_block": WeightFormat("fp8", bits=8, block=(128, 128), fp8_scales="block"),
    "int8_per_channel_weight_only": WeightFormat("int8", bits=8),
    "nvfp4_per_token": WeightFormat("nvfp4", bits=4),
}
# vLLM's own method words (0.33.0 QUANTIZATION_METHODS, and bitsandbytes, ptpc_fp8, gguf of earlier lines): a launch
# command passes them through as given
VLLM_METHODS = frozenset({"awq", "auto_awq", "fp8", "fbgemm_fp8", "fp_quant", "modelopt", "modelopt_fp4", "modelopt_mxfp8",
                          "modelopt_mixed", "auto_gptq", "gptq", "gptq_marlin", "awq_marlin", "humming",
                          "compressed-tensors", "experts_int8", "quark", "moe_wna16", "torchao", "inc", "mxfp4",
                          "gpt_oss_mxfp4", "fp8_per_tensor", "fp8_per_block", "fp8_per_channel",
                          "int8_per_channel_weight_only", "nvfp4_per_token", "mxfp8", "bitsandbytes", "ptpc_fp8",
                          "gguf", "marlin"})
# every role but the routed experts: what experts_int8 leaves in 16 bits
_NOT_EXPERTS = frozenset(set(ROLES) - {"experts"})
# families a --quantization word belongs to, to match a checkpoint's own format (vLLM's override rules)
_FAMILY = {"awq": "int4", "gptq": "int4", "fp8": "fp8", "int8": "int8", "nf4": "bnb", "mxfp4": "mxfp4",
           "nvfp4": "nvfp4"}
_WORD_FAMILY = {"bitsandbytes": ("bnb", "int8"), "fp8": ("fp8",), "fbgemm_fp8": ("fp8",), "mxfp4": ("mxfp4",),
                "gpt_oss_mxfp4": ("mxfp4",), "modelopt_fp4": ("nvfp4",), "modelopt_mxfp8": ("fp8",)}


def _word(quantization: str | None) -> str:
    return "" if quantization is None else quantization.strip().lower()


def loaded_format(spec: ModelSpec, quantization: str | None, dense: str) -> WeightFormat:
    """The weight format vLLM loads: the checkpoint's own (in the serving dtype ``dense``), or the one
    ``--quantization`` names for a 16-bit checkpoint; a word of another family than the checkpoint's stops vLLM."""
    word = _word(quantization)
    own = spec.weight_format
    if own is not None and own.vllm_stops:  # its config reader stops before --quantization is compared
        raise InputError(f"{spec.name}: {own.vllm_stops}")
    if word in ("", "auto", "none"):
        own = checkpoint_format(spec, WEIGHTS_FIX)
        return own if own.quantized else dense_format(dense)
    if own is not None and own.quantized:
        family = _FAMILY.get(own.name, own.name)
        if word in _FROM_CONFIG or (word in _INT4_KERNELS and family == "int4") or family in _WORD_FAMILY.get(word, ()):
            return own
        fmt = _from_word(spec, word, dense)
        if _FAMILY.get(fmt.name, fmt.name) != family:
            raise InputError(f"{spec.name} is a {own.describe()} checkpoint and --quantization {quantization} names "
                             f"another format: vLLM stops ('Quantization method specified in the model config does not "
                             f"match the quantization method specified in the quantization argument'); drop "
                             f"--quantization (vLLM reads the checkpoint's) or serve a 16-bit checkpoint")
        return own
    return _from_word(spec, word, dense)


def _from_word(spec: ModelSpec, word: str, dense: str) -> WeightFormat:
    """A 16-bit checkpoint served with ``--quantization word``."""
    if word in _FROM_CONFIG:
        raise InputError(f"vLLM's --quantization {word} reads the scheme from the checkpoint's quantization_config, "
                         f"and {spec.name} has none: pass the quantized checkpoint (its Hub id or config.json), or "
                         "name the weights' format (fp8, int8, awq, gptq)")
    if word == "gguf":
        raise InputError("vLLM's --quantization gguf serves a .gguf file: kvbudget prices GGUF files for llama.cpp "
                         "(--engine llama.cpp with the file); under vLLM give the format it holds (e.g. awq for 4-bit)")
    if word == "experts_int8":  # fused_moe experts quantized to int8 while loading; every other linear stays 16-bit
        if not spec.num_experts:
            raise InputError(f"vLLM's --quantization experts_int8 quantizes MoE experts, and {spec.name} has none")
        return WeightFormat("int8", bits=8, dense_dtype=dense, skip_roles=_NOT_EXPERTS)
    if word in _VLLM_NAMES:
        return replace(_VLLM_NAMES[word], dense_dtype=dense)
    try:
        return parse_weight_format(word, dense_dtype=dense)
    except InputError:
        raise InputError(f"--quantization {word!r} is not a vLLM method kvbudget prices: use the checkpoint's own "
                         "(leave it out), or one of fp8, awq, awq_marlin, gptq, gptq_marlin, bitsandbytes, mxfp4, "
                         "modelopt_fp4, experts_int8, ptpc_fp8") from None


def _minor(version: str) -> int | None:
    """The release's minor number; the V0 line (a T4 or V100 under 0.8.0-0.10.1 falls back to it, policy.py
    _v0_fallback) is at most 0.10, whose rules for these kernels are 0.13's and earlier; None: the newest."""
    return 10 if version.strip().lower() == "v0" else version_minor(version)


def marlin_capable(gpu: GPU, version: str, fmt: WeightFormat) -> bool:
    """Whether vLLM's Marlin kernels run ``fmt`` on ``gpu`` (marlin_utils.py: 4- and 8-bit, groups of -1, 32,
    64 or 128, compute capability 8.0 up to 0.13 and 7.5 from 0.14; CUDA only). An unknown GPU counts as able."""
    if gpu.vendor != "nvidia" or fmt.bits not in (4, 8) or fmt.group_size not in (-1, 32, 64, 128):
        return False
    minor = _minor(version)
    have = capability(gpu)
    return have is None or have >= (8.0 if minor is not None and minor <= 13 else 7.5)


def int4_kernel(fmt: WeightFormat, quantization: str | None, gpu: GPU, version: str) -> str:
    """The kernel family vLLM runs AWQ/GPTQ weights with: "marlin", or the plain "awq"/"gptq" kernel."""
    if fmt.name not in ("awq", "gptq"):
        return ""
    word, minor = _word(quantization), _minor(version)
    forced = (word == "awq" == fmt.name and minor is not None and minor <= 23) or (
        word == "gptq" == fmt.name and minor is not None and minor <= 21)
    return fmt.name if forced or not marlin_capable(gpu, version, fmt) else "marlin"


def largest_linear(spec: ModelSpec, fmt: WeightFormat, tp: int) -> int:
    """Elements of the largest quantized linear layer on one TP rank as vLLM builds it (q, k and v merged in
    QKVParallelLinear, gate and up in MergedColumnParallelLinear); routed experts run their own MoE kernel."""
    best = 0
    for block in set(spec.inventory.layers):
        merged: dict[tuple[str, int], int] = {}
        for t in block:
            if not fmt.packs(t) or t.role == "experts":
                continue
            rows, cols = t.shape_per_rank(tp)
            if t.split in ("col", "kv"):
                merged[(t.role, cols)] = merged.get((t.role, cols), 0) + rows * t.count
            else:
                best = max(best, rows * cols)
        best = max([best, *(rows * cols for (_, cols), rows in merged.items())])
    return best


def dequant_bytes(spec: ModelSpec, fmt: WeightFormat, kernel: str, tp: int, tokens: int) -> int:
    """Bytes of the 16-bit copy a plain AWQ (for ``tokens`` >= 256) or GPTQ kernel makes of the largest weight."""
    if kernel == "gptq" or (kernel == "awq" and tokens >= 256):
        return 2 * largest_linear(spec, fmt, tp)
    return 0


def dequant_note(fmt: WeightFormat, quantization: str | None, gpu: GPU, version: str, nbytes: int) -> str:
    """Why the plain kernel runs, and what its copy costs."""
    name = fmt.name.upper()
    copy = (f"it dequantizes each weight to 16 bits for the matmul, and the largest, {nbytes / 2**30:.2f} GiB a rank, "
            "is held through the profiling run's forward (the run's peak is the larger of the forward and the sampler)")
    if marlin_capable(gpu, version, fmt):
        last = "0.23" if fmt.name == "awq" else "0.21"
        return (f"--quantization {fmt.name} forces vLLM's plain {name} kernel over Marlin (up to {last}): {copy}; "
                f"leave --quantization out (or give {fmt.name}_marlin) and Marlin runs without it")
    return (f"{name} weights on vLLM's plain {name} kernel ({gpu.name} cannot run Marlin, which needs an NVIDIA GPU of "
            f"compute capability 8.0, 7.5 from vLLM 0.14, and 4- or 8-bit weights in groups of 32, 64, 128 or all): {copy}")


def format_name(quantization: str | None) -> str | None:
    """kvbudget's name for the format a --quantization word loads (``auto_awq`` -> awq, ``ptpc_fp8`` -> fp8); the
    word itself when it names none kvbudget prices; None for none."""
    word = _word(quantization)
    if word in ("", "auto", "none"):
        return None
    if word in _VLLM_NAMES:
        return _VLLM_NAMES[word].name
    try:
        return parse_weight_format(word).name
    except InputError:
        return word


# The activation dtypes each --quantization method runs in (QuantizationConfig.get_supported_act_dtypes, 0.33.0:
# fp8.py, fbgemm_fp8.py, experts_int8.py, moe_wna16.py, awq_marlin/gptq_marlin (0.20.0); mxfp4.py and fp_quant.py
# bfloat16 only); bitsandbytes, torchao and compressed-tensors also run float32. vLLM stops at start-up on another
# (config/vllm.py _get_quantization_config: "... is not supported for quantization method ...")
_HALF = ("bf16", "fp16")
_ACT_DTYPES = {**{w: _HALF for w in ("fp8", "fbgemm_fp8", "ptpc_fp8", "fp8_per_tensor", "fp8_per_block", "fp8_per_channel",
                                     "experts_int8", "moe_wna16", "awq_marlin", "gptq_marlin", "auto_awq", "auto_gptq",
                                     "modelopt", "quark", "inc", "humming", "marlin", "awq", "gptq")},
               "mxfp4": ("bf16",), "gpt_oss_mxfp4": ("bf16",), "fp_quant": ("bf16",)}
_TORCH = {"bf16": "torch.bfloat16", "fp16": "torch.float16", "fp32": "torch.float32"}


def act_dtype_taken(fmt: WeightFormat, quantization: str | None, gpu: GPU, version: str, model_dtype: str) -> None:
    """Refuse a --dtype the quantization method does not run its activations in. The plain AWQ and GPTQ kernels
    (awq.py, gptq.py up to 0.23 / 0.21, before auto_awq and auto_gptq took their place) run float16 only."""
    kernel = int4_kernel(fmt, quantization, gpu, version)
    minor = _minor(version)
    word = _word(quantization)
    if word in ("", "auto", "none") and fmt.name == "mxfp4":  # a checkpoint's own quant_method (gpt-oss: mxfp4)
        word = "mxfp4"
    allowed: tuple[str, ...]
    if kernel in ("awq", "gptq") and minor is not None and minor <= (23 if kernel == "awq" else 21):
        word, allowed = kernel, ("fp16",)
    elif word in _ACT_DTYPES:
        allowed = _ACT_DTYPES[word]
    else:
        return
    if model_dtype not in allowed:
        shown = ", ".join(_TORCH[d] for d in allowed)
        raise InputError(f"vLLM stops at start-up: `ValueError: {_TORCH.get(model_dtype, model_dtype)} is not supported "
                         f"for quantization method {word}. Supported dtypes: [{shown}]`: give --dtype "
                         f"{' or '.join({'bf16': 'bfloat16', 'fp16': 'float16'}[d] for d in allowed)}")


# vLLM's method words that name a pre-quantized checkpoint's format (vLLM reads the weights as stored: it cannot make
# them from a 16-bit checkpoint): given for a 16-bit model they stand for such a checkpoint, whose quantization_config
# (its ``ignore`` / ``exclude_modules`` / ``modules_to_not_convert``) says which modules stay 16-bit
_CHECKPOINT_ONLY = (*_INT4_KERNELS, "modelopt_fp4", "modelopt_mxfp8")
# roles kvbudget packs for such a stand-in that checkpoints often keep in 16 bits (lm_head and the router never packed)
_OFTEN_KEPT = ("vision", "attention", "shared_experts")


def stand_in_note(spec: ModelSpec, fmt: WeightFormat, quantization: str | None, tp: int) -> str | None:
    """A note where ``--quantization`` names a checkpoint-only format for a 16-bit model: every linear layer is
    packed but the embeddings, the lm_head and the router, while a real checkpoint keeps what its quantization_config
    excludes in 16 bits, so its weights may be larger; the 16-bit bytes of the roles often kept so, per rank."""
    word = _word(quantization)
    own = spec.weight_format
    if word not in _CHECKPOINT_ONLY or (own is not None and own.quantized) or not fmt.quantized:
        return None
    more: dict[str, int] = {}
    for t in spec.inventory.tensors():
        if t.role in _OFTEN_KEPT and fmt.packs(t):
            rows, cols = t.shape_per_rank(tp)
            dense = rows * cols * 2 - fmt.matrix_bytes(rows, cols)
            more[t.role] = more.get(t.role, 0) + dense * t.count
    kept = ", ".join(f"{role.replace('_', ' ')} +{n / 2**30:.2f} GiB" for role, n in more.items() if n >= 2**24)
    return (f"--quantization {quantization} on {spec.name}'s 16-bit weights stands for a checkpoint of {fmt.name} weights with every "
            "linear layer but the lm_head and the router packed; a real checkpoint keeps the modules its "
            "quantization_config excludes in 16 bits" + (f" (if it keeps them, per rank: {kept})" if kept else "")
            + ": give its config.json for its own layout")
