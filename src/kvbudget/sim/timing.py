"""How long an engine step takes: a roofline estimate from the GPU catalog, not a measurement.

A step reads every weight on the GPU once and the KV of every scheduled request's context; it computes about
2 x active parameters FLOPs per scheduled token. The estimate is the larger of the two at the GPU's datasheet
memory bandwidth and dense BF16 (or FP8) tensor throughput, so it is a lower bound: real steps add kernel launch
and scheduling overhead, attention FLOPs and imperfect bandwidth use (commonly 60-85% of the datasheet figure on
decode). Use its latencies to compare settings, not as a promise of absolute speed.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..units import InputError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..model.spec import ModelSpec


def flops_per_token(spec: ModelSpec) -> float:
    """2 x the parameters one token passes through: all but the embeddings, and of the routed experts only the
    ``experts_per_token`` a token is sent to."""
    roles = spec.params_by_role()
    experts = roles.get("experts", 0)
    active = spec.params - roles.get("embeddings", 0)
    if spec.num_experts and spec.experts_per_token:
        active -= experts - experts * spec.experts_per_token // spec.num_experts
    return 2.0 * active


@dataclass(frozen=True)
class StepTime:
    weight_bytes: int  # per GPU
    kv_bytes_per_token: int  # per GPU
    flops_per_token: float  # per GPU: 2 x active parameters / GPUs sharing the work
    bandwidth: float  # bytes/s
    flops: float  # FLOP/s
    gpu: str = ""

    def __post_init__(self) -> None:
        if not (self.bandwidth > 0 and self.flops > 0):
            raise InputError(f"{self.gpu or 'the GPU'}: no memory bandwidth or tensor throughput in the catalog, "
                             "so steps cannot be timed")

    def seconds(self, scheduled_tokens: int, context_read: int) -> float:
        memory = (self.weight_bytes + context_read * self.kv_bytes_per_token) / self.bandwidth
        compute = scheduled_tokens * self.flops_per_token / self.flops
        return max(memory, compute)
