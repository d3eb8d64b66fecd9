"""``plan --slo ttft=2s,tpot=50ms``: deployments ranked by what they serve within a latency target, not only by
what fits in memory.

Latency comes from the roofline step-time model (``sim/timing.py``: a step reads every weight on a GPU and the KV
of every scheduled request's context, and computes 2 x active parameters FLOPs per scheduled token; the slower of
the two at the GPU's datasheet bandwidth and BF16 throughput). For a replica running ``b`` requests of ``context``
tokens:

- TPOT: one decode step of ``b`` requests, each reading a ``context``-token KV cache (its length at the end of the
  request: the slowest step it meets);
- TTFT: one step computing a ``prompt``-token prompt (the whole context unless ``prompt=N`` is given) alongside one
  decode token for each of the other ``b - 1`` requests (a prompt split into chunks does the same compute; queueing
  before admission is not counted).

Under pipeline parallelism a step passes every stage in turn, so its latency counts each stage's weights and KV. The
model is a lower bound (real steps add kernel launches, scheduling and attention FLOPs, and reach 60-85% of the
datasheet bandwidth), so a deployment it puts just inside the target may miss it: leave a margin. A replica runs
the largest batch that meets both targets and fits its KV cache, and the load needs enough replicas at that batch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .._record import replace
from ..inputs import excerpt, parse_whole
from ..units import InputError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..hardware import GPU
    from ..model.spec import ModelSpec
    from .search import Deployment

_UNITS = {"ms": 1e-3, "s": 1.0}
MAX_SECONDS = 3600.0
MAX_PROMPT = 1 << 31  # tokens; a prompt past the plan's --context is refused where both are known


@dataclass(frozen=True)
class SLO:
    ttft_s: float | None = None  # time to first token
    tpot_s: float | None = None  # time per output token
    prompt: int | None = None  # prompt tokens for TTFT (None: the whole context)

    def words(self) -> str:
        parts = [f"TTFT <= {_ms(self.ttft_s)}" if self.ttft_s else "", f"TPOT <= {_ms(self.tpot_s)}" if self.tpot_s else ""]
        return " and ".join(p for p in parts if p)


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e3:,.0f} ms" if seconds < 1 else f"{seconds:,.2f} s"


_FORMS = "a number and ms or s, e.g. {key}=500ms or {key}=2s"
_NUMBER = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?", re.ASCII)


def _seconds(key: str, value: str) -> float:
    """A duration written as a decimal number and the unit ms or s (``500ms``, ``2 s``, ``1.5e-3s``)."""
    forms = _FORMS.format(key=key)
    shown = excerpt(value, 30)[1:-1]
    text = value.strip().lower()
    match = re.fullmatch(r"(.*?)\s*([a-zµμ]*)", text[:41])
    if len(text) > 40 or match is None:
        raise InputError(f"--slo {key}={shown}: not a duration: give {forms}")
    number_text, unit = match.group(1), match.group(2)
    if not _NUMBER.fullmatch(number_text):  # ASCII digits only: no sign, no '1_000', no other scripts' digits
        above = " above 0" if number_text.startswith("-") else ""
        raise InputError(f"--slo {key}={shown}: not a duration{above}: give {forms}")
    if unit not in _UNITS:
        if not unit:
            raise InputError(f"--slo {key}={shown}: a duration needs its unit: give {forms}")
        said = "ambiguous (minutes or milliseconds?)" if unit == "m" else "not one kvbudget reads"
        raise InputError(f"--slo {key}={shown}: the unit {unit!r} is {said}: give {forms}")
    seconds = float(number_text) * _UNITS[unit]
    if not 0 < seconds <= MAX_SECONDS:  # 0, 1e400
        raise InputError(f"--slo {key}={shown}: a duration above 0 and at most {MAX_SECONDS:,.0f} s: give {forms}")
    return seconds


def parse_slo(text: str) -> SLO:
    """``ttft=2s,tpot=50ms[,prompt=N]`` (either target may be left out, not both)."""
    fields: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, sep, value = part.partition("=")
        key = key.strip().lower()
        if not sep or key not in ("ttft", "tpot", "prompt"):
            raise InputError(f"--slo: {part!r} is not ttft=DURATION, tpot=DURATION or prompt=TOKENS "
                             "(e.g. --slo ttft=2s,tpot=50ms)")
        if key in fields:
            raise InputError(f"--slo: {key} given twice")
        fields[key] = value
    if "ttft" not in fields and "tpot" not in fields:
        raise InputError("--slo needs ttft=DURATION and/or tpot=DURATION (e.g. --slo ttft=2s,tpot=50ms)")
    prompt = None
    if "prompt" in fields:
        prompt = parse_whole(fields["prompt"], "--slo prompt", 1, MAX_PROMPT, forms="a count of tokens, e.g. prompt=2000")
    return SLO(_seconds("ttft", fields["ttft"]) if "ttft" in fields else None,
               _seconds("tpot", fields["tpot"]) if "tpot" in fields else None, prompt)


@dataclass(frozen=True)
class Latency:
    """One replica's step-time model (per step, latency through every pipeline stage)."""

    weight_bytes: float  # read per step, all stages
    kv_bytes_per_token: float  # read per context token, all stages
    flops_per_token: float  # per scheduled token, on one stage's GPUs in turn
    bandwidth: float
    flops: float

    def step(self, scheduled: int, context_read: int) -> float:
        memory = (self.weight_bytes + context_read * self.kv_bytes_per_token) / self.bandwidth
        return max(memory, scheduled * self.flops_per_token / self.flops)

    def tpot(self, batch: int, context: int) -> float:
        return self.step(batch, batch * context)

    def ttft(self, batch: int, context: int, prompt: int) -> float:
        return self.step(prompt + batch - 1, (batch - 1) * context + prompt)


def latency_model(spec: ModelSpec, gpu: GPU, d: Deployment) -> Latency | None:
    """The step-time model of one replica of ``d``, or None without the GPU's bandwidth and throughput."""
    from ..sim.timing import flops_per_token

    if not gpu.bandwidth_bytes_per_s or not gpu.bf16_tflops or not d.kv_cache_tokens:
        return None
    return Latency(float(d.weights_bytes * d.pp), d.kv_cache_bytes * d.pp / d.kv_cache_tokens,
                   flops_per_token(spec) / d.tp, float(gpu.bandwidth_bytes_per_s), float(gpu.bf16_tflops) * 1e12)


def within(lat: Latency, slo: SLO, context: int, most: int) -> int:
    """The largest batch up to ``most`` whose TTFT and TPOT meet ``slo`` (0: not even one request). Both grow with
    the batch, so a binary search finds it."""
    prompt = min(slo.prompt or context, context)

    def meets(b: int) -> bool:
        return ((slo.tpot_s is None or lat.tpot(b, context) <= slo.tpot_s)
                and (slo.ttft_s is None or lat.ttft(b, context, prompt) <= slo.ttft_s))

    lo, hi = 0, most
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if meets(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def apply_slo(rows: list[Deployment], spec: ModelSpec, gpus: dict[str, GPU], slo: SLO, concurrency: int,
              context: int, max_gpus: int) -> list[Deployment]:
    """Each deployment that starts, re-sized to the replicas it needs when each runs only the batch the SLO
    allows; its TTFT and TPOT at that batch."""
    out = []
    for d in rows:
        lat = latency_model(spec, gpus[d.gpu], d) if d.starts and d.per_replica else None
        if lat is None:
            if d.serves:
                d = replace(d, serves=False, reason=f"{d.gpu} has no bandwidth or throughput figure to time steps")
            out.append(d)
            continue
        batch = within(lat, slo, context, d.per_replica)
        prompt = min(slo.prompt or context, context)
        at = max(batch, 1)
        d = replace(d, slo_batch=batch, ttft_s=lat.ttft(at, context, prompt), tpot_s=lat.tpot(at, context))
        if not d.serves:
            out.append(d)
            continue
        if batch == 0:
            out.append(replace(d, serves=False, reason=f"misses the SLO with one request per replica "
                                                       f"(TTFT {_ms(d.ttft_s)}, TPOT {_ms(d.tpot_s)})"))
            continue
        replicas = -(-concurrency // batch)
        n = replicas * d.tp * d.pp
        unit = d.price_per_hour / d.num_gpus if d.price_per_hour is not None and d.num_gpus else None
        d = replace(d, replicas=replicas, num_gpus=n, max_concurrency=batch * replicas,
                    headroom=batch * replicas / concurrency - 1,
                    price_per_hour=None if unit is None else round(unit * n, 4))
        if n > max_gpus:
            d = replace(d, serves=False, reason=f"within the SLO a replica runs {batch:,} requests: needs {replicas} "
                                                f"replicas = {n} GPUs, more than --max-gpus {max_gpus}")
        out.append(d)
    return out
