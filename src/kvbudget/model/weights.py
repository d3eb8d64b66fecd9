"""Weight formats: the bytes a linear weight matrix takes in each storage format.

Shapes follow the checkpoint layouts that vLLM loads (``model_executor/layers/quantization``):
a matrix has ``rows`` outputs and ``cols`` inputs, and quantization groups run along the inputs.
Only linear weight matrices (``Tensor.linear``) are packed; embeddings, lm_head, norms,
biases, routers and conv kernels stay in the 16-bit dtype, as every one of these formats
leaves them.
"""

from __future__ import annotations

from collections.abc import Mapping

from .._record import field, record
from ..units import InputError, element_type
from .params import Tensor

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@record
class WeightFormat:
    """A storage format for linear weights.

    ``name`` is one of bf16, fp16, fp32, fp8, int8, gptq, awq, nf4, mxfp4, nvfp4.
    ``bits`` and ``group_size`` apply to gptq/awq; ``block`` to fp8 block scales;
    ``skip_roles`` are roles the checkpoint keeps unquantized (``modules_to_not_convert``).
    """

    name: str
    bits: int = 16
    group_size: int = 128
    block: tuple[int, int] | None = None
    fp8_scales: str = "per_tensor"  # per_tensor | per_channel | block
    double_quant: bool = False
    dense_dtype: str = "bf16"
    skip_roles: frozenset[str] = field(default_factory=frozenset)

    @property
    def quantized(self) -> bool:
        return self.name not in ("bf16", "fp16", "fp32")

    def describe(self) -> str:
        if self.name in ("gptq", "awq"):
            return f"{self.name} {self.bits}-bit, group {self.group_size}"
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
            zeros = groups * rows * self.bits // 8  # qzeros: int32 packed the same way
            scales = groups * rows * 2  # fp16 scales
            g_idx = cols * 4 if name == "gptq" else 0  # int32 act-order index
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
        raise InputError(f"unknown weight format {name!r}")  # pragma: no cover - guarded by parse

    def tensor_bytes(self, t: Tensor, tp: int = 1) -> int:
        rows, cols = t.shape_per_rank(tp)
        if self.packs(t):
            return t.count * self.matrix_bytes(rows, cols)
        return t.count * element_type(self.dense_dtype).nbytes(rows * cols)


WEIGHT_FORMATS = ("bf16", "fp16", "fp32", "fp8", "int8", "gptq", "awq", "nf4", "mxfp4", "nvfp4")
_FORMAT_ALIASES = {
    "bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "auto": "auto",
    "fp8_e4m3": "fp8", "int4": "awq", "4bit": "awq", "bnb": "nf4", "bitsandbytes": "nf4",
    "w8a8": "int8", "mxfp4": "mxfp4", "fp4": "nvfp4",
}


def parse_weight_format(text: str, dense_dtype: str = "bf16") -> WeightFormat:
    """A weight format from a command-line word (``bf16``, ``fp8``, ``awq``, ``gptq``, ...)."""
    key = text.strip().lower().replace("-", "_")
    key = _FORMAT_ALIASES.get(key, key)
    if key not in WEIGHT_FORMATS:
        raise InputError(f"unknown weights dtype {text!r}: use one of {', '.join(WEIGHT_FORMATS)}")
    if key in ("bf16", "fp16", "fp32"):
        return WeightFormat(key, dense_dtype=key)
    bits = 4 if key in ("gptq", "awq", "nf4", "mxfp4", "nvfp4") else 8
    return WeightFormat(key, bits=bits, dense_dtype=dense_dtype)


_SKIP_WORDS = {
    "self_attn": "attention", "attn": "attention", "attention": "attention",
    "router": "router", "gate": "router", "mlp.gate": "router",
    "embed_tokens": "embeddings", "lm_head": "lm_head", "shared_expert": "shared_experts",
}


def _skip_roles(names: object) -> frozenset[str]:
    roles: set[str] = set()
    if isinstance(names, list):
        for name in names:
            last = str(name).rstrip(".*").split(".")
            for word in (last[-1], ".".join(last[-2:])):
                if word in _SKIP_WORDS:
                    roles.add(_SKIP_WORDS[word])
    return frozenset(roles)


def _whole(value: object, name: str, allow: tuple[int, ...] = ()) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or (value <= 0 and value not in allow):
        raise InputError(f"{name} must be a positive whole number, got {value!r}")
    return value


def from_quantization_config(qc: Mapping[str, Any], dense_dtype: str) -> WeightFormat:
    """The weight format a checkpoint's ``quantization_config`` describes."""
    method = str(qc.get("quant_method") or qc.get("quant_algo") or "").lower()
    skip = _skip_roles(qc.get("modules_to_not_convert") or qc.get("ignore") or qc.get("ignored_layers"))
    if method == "fp8":
        block = qc.get("weight_block_size")
        if block is not None and (not isinstance(block, list) or len(block) != 2):
            raise InputError(f"weight_block_size must be two numbers, got {block!r}")
        return WeightFormat(
            "fp8", bits=8, dense_dtype=dense_dtype, skip_roles=skip,
            block=(int(block[0]), int(block[1])) if block else None,
            fp8_scales="block" if block else "per_tensor",
        )
    if method in ("gptq", "awq"):
        bits = _whole(qc.get("bits", qc.get("w_bit", 4)), "bits")
        group = _whole(qc.get("group_size", qc.get("q_group_size", 128)), "group_size", allow=(-1,))
        if bits not in (2, 3, 4, 8):
            raise InputError(f"{method} bits must be 2, 3, 4 or 8, got {bits}")
        return WeightFormat(method, bits=bits, group_size=group, dense_dtype="fp16", skip_roles=skip)
    if method == "bitsandbytes":
        if qc.get("load_in_8bit"):
            return WeightFormat("int8", bits=8, dense_dtype=dense_dtype, skip_roles=skip)
        return WeightFormat(
            "nf4", bits=4, dense_dtype=dense_dtype, skip_roles=skip,
            double_quant=bool(qc.get("bnb_4bit_use_double_quant")),
        )
    if method == "mxfp4":
        return WeightFormat("mxfp4", bits=4, dense_dtype=dense_dtype, skip_roles=skip)
    if method in ("modelopt", "nvfp4") or "nvfp4" in method or "fp4" in str(qc.get("quant_algo", "")).lower():
        return WeightFormat("nvfp4", bits=4, dense_dtype=dense_dtype, skip_roles=skip)
    if method in ("compressed-tensors", "compressed_tensors"):
        groups = qc.get("config_groups") or {}
        for group in groups.values() if isinstance(groups, dict) else []:
            w = group.get("weights") or {}
            if w.get("type") == "float" and int(w.get("num_bits", 8)) == 8:
                return WeightFormat("fp8", bits=8, dense_dtype=dense_dtype, skip_roles=skip,
                                    fp8_scales="per_channel" if w.get("strategy") == "channel" else "per_tensor")
            if w.get("type") == "int":
                bits = int(w.get("num_bits", 4))
                if bits == 8:
                    return WeightFormat("int8", bits=8, dense_dtype=dense_dtype, skip_roles=skip)
                return WeightFormat("gptq", bits=bits, group_size=int(w.get("group_size") or 128),
                                    dense_dtype=dense_dtype, skip_roles=skip)
    raise InputError(
        f"unsupported quantization_config quant_method {method!r}: "
        f"pass --weights-dtype to say how the weights are stored"
    )
