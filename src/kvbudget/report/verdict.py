"""The verdict of a fit, in words, in the user's units."""

from __future__ import annotations

from ..units import fmt_bytes, noun, plural, verb

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from ..engines.textbook import MemoryPlan


def verdict_text(p: MemoryPlan, units: str = "GiB") -> str:
    """One sentence: does it fit, and if not, what does."""
    where = f" (pipeline stage {p.stage}, the fullest)" if p.pp > 1 else ""
    load = f"{p.batch:,} x {p.context:,}-token " + f"{noun(p.batch, 'sequence')} {verb(p.batch, 'need')}"

    def b(n: int) -> str:
        return fmt_bytes(n, units)

    if p.verdict == "weights_exceed":
        fixed = p.weights_bytes + p.activation_bytes + p.overhead_bytes
        return (
            f"does not fit: weights, activations and overhead need {b(fixed)} of {b(p.total_bytes)} per GPU{where}; "
            f"use more GPUs (--tp/--pp) or smaller weights (--weights-dtype fp8)"
        )
    if p.verdict == "no_cache":
        return "fits: the model keeps no per-sequence cache"
    if p.verdict == "no_token":
        return (
            f"does not fit: {b(p.kv_cache_bytes)} is left for the KV cache{where}, not enough for one token of "
            f"{plural(p.batch, 'sequence')}; use more GPUs (--tp/--pp), --kv-dtype fp8 or smaller weights"
        )
    if p.verdict == "fits":
        return (
            f"fits: {load} {b(p.kv_needed_bytes)} of the "
            f"{b(p.kv_cache_bytes)} left for the KV cache; up to {plural(p.max_batch or 0, 'sequence')} at this context"
        )
    most = f"at most {plural(p.max_batch, 'sequence')}" if p.max_batch else "not one sequence"
    return (
        f"does not fit: {load} {b(p.kv_needed_bytes)} of KV cache, "
        f"{b(p.kv_cache_bytes)} is left{where}; {most} at {p.context:,} tokens, "
        f"or {plural(p.max_context, 'token')} at batch {p.batch:,}"
    )
