"""Synthetic traffic, seeded and reproducible: arrivals at a rate (Poisson, bursty, evenly spaced or all at once),
prompt and output lengths from a distribution, shared system prompts and multi-turn conversations.

The workload is one comma-separated spec, for example::

    requests=2000,rate=8,prompt=lognormal:800:1.0,output=uniform:50:500,prefixes=4x512@0.8,turns=3,seed=1

- ``requests``: how many (conversations count each turn); ``rate``: requests (or conversations) per second;
- ``arrivals``: ``poisson`` (default), ``bursty`` (Poisson bursts of ``burst`` requests), ``uniform`` (evenly
  spaced), ``at-once`` (all at time 0);
- ``prompt``, ``output``: ``N`` or ``fixed:N``, ``uniform:LOW:HIGH``, ``normal:MEAN:SD``, ``lognormal:MEDIAN:SIGMA`` or
  ``hist:FILE`` (a file of ``length count`` lines, an empirical histogram), or the preset ``sharegpt``;
- ``prefixes=KxP@F``: K system prompts of P tokens, one of them (uniformly) opening a share F of the requests;
- ``turns=T``: conversations of T turns, each turn resending the whole history (earlier prompts and answers)
  plus a new user message; ``think=S``: seconds between an answer and the next turn (default 5).

``sharegpt``: lognormal lengths with the mean input (161 tokens) and output (338 tokens) the PagedAttention paper
reports for its ShareGPT sample (Kwon et al., SOSP 2023, section 6.1), spread sigma 1.0 - a stand-in with the same
means, not the dataset.
"""

from __future__ import annotations

import math
import random
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .trace import (
    MAX_HELD_IDS,
    MAX_REQUEST_TOKENS,
    MAX_REQUESTS,
    MAX_TOTAL_TOKENS,
    RequestSpec,
    TokenSource,
    TraceError,
)

SHAREGPT = {"prompt": ("lognormal", 161.0, 1.0), "output": ("lognormal", 338.0, 1.0)}  # means, turned into medians


@dataclass(frozen=True)
class Lengths:
    kind: str
    a: float = 0.0
    b: float = 0.0
    table: tuple[tuple[int, int], ...] = ()  # (length, count) of a histogram
    low: int = 1
    high: int = MAX_REQUEST_TOKENS

    def draw(self, rng: random.Random) -> int:
        if self.kind == "fixed":
            n = self.a
        elif self.kind == "uniform":
            n = rng.randint(int(self.a), int(self.b))
        elif self.kind == "normal":
            n = rng.gauss(self.a, self.b)
        elif self.kind == "lognormal":
            n = rng.lognormvariate(math.log(self.a), self.b)
        else:
            lengths, counts = zip(*self.table, strict=True)
            n = rng.choices(lengths, counts)[0]
        return min(max(round(n), self.low), self.high)


def lengths(text: str, what: str, read_file: Callable[[str], str] | None = None) -> Lengths:
    """A length distribution from its spec (``uniform:50:500`` ...)."""
    if text == "sharegpt":
        kind, mean, sigma = SHAREGPT[what]
        return Lengths(kind, mean / math.exp(sigma * sigma / 2), sigma)  # median of a lognormal with that mean
    kind, _, rest = text.partition(":")
    if kind.isdigit() and not rest:  # a bare length: fixed
        kind, rest = "fixed", kind
    if kind == "hist":
        if read_file is None:
            raise TraceError(f"{what}=hist:FILE needs a file")
        table = []
        for n, line in enumerate(read_file(rest).splitlines(), 1):
            if line.strip() and not line.lstrip().startswith("#"):
                parts = line.split()
                try:
                    length, count = int(parts[0]), int(parts[1])
                except (ValueError, IndexError):
                    raise TraceError(f"{what} histogram {rest} line {n}: expected 'length count'") from None
                if not 1 <= length <= MAX_REQUEST_TOKENS or count < 0:
                    raise TraceError(f"{what} histogram {rest} line {n}: length 1..{MAX_REQUEST_TOKENS:,}, count >= 0")
                table.append((length, count))
        if not table or sum(c for _, c in table) == 0:
            raise TraceError(f"{what} histogram {rest}: no lengths with a positive count")
        return Lengths("hist", table=tuple(table))
    args = rest.split(":") if rest else []
    try:
        nums = [float(a) for a in args]
    except ValueError:
        nums = []
    want = {"fixed": 1, "uniform": 2, "normal": 2, "lognormal": 2}
    if kind not in want or len(nums) != want[kind] or not all(math.isfinite(x) for x in nums):
        raise TraceError(f"{what}={text}: expected N, fixed:N, uniform:LOW:HIGH, normal:MEAN:SD, lognormal:MEDIAN:SIGMA, "
                         "hist:FILE or sharegpt")
    if kind == "fixed" and not 1 <= nums[0] <= MAX_REQUEST_TOKENS:
        raise TraceError(f"{what}={text}: the length must be 1..{MAX_REQUEST_TOKENS:,}")
    if kind == "uniform" and not 1 <= nums[0] <= nums[1] <= MAX_REQUEST_TOKENS:
        raise TraceError(f"{what}={text}: need 1 <= LOW <= HIGH <= {MAX_REQUEST_TOKENS:,}")
    if kind == "normal" and not (1 <= nums[0] <= MAX_REQUEST_TOKENS and 0 <= nums[1] <= MAX_REQUEST_TOKENS):
        raise TraceError(f"{what}={text}: need a mean of 1..{MAX_REQUEST_TOKENS:,} and SD >= 0")
    if kind == "lognormal" and not (1 <= nums[0] <= MAX_REQUEST_TOKENS and 0 <= nums[1] <= 4):
        raise TraceError(f"{what}={text}: need a median of 1..{MAX_REQUEST_TOKENS:,} and 0 <= SIGMA <= 4")
    return Lengths(kind, nums[0], nums[1] if len(nums) > 1 else 0.0)


@dataclass(frozen=True)
class Workload:
    requests: int = 1000
    rate: float = 4.0
    arrivals: str = "poisson"
    burst: int = 16
    prompt: Lengths = Lengths("lognormal", 800.0, 1.0)
    output: Lengths = Lengths("lognormal", 200.0, 1.0)
    prefixes: int = 0
    prefix_tokens: int = 0
    prefix_share: float = 0.0
    turns: int = 1
    think: float = 5.0
    seed: int = 0


def parse_workload(spec: str, read_file: Callable[[str], str] | None = None) -> Workload:
    """``requests=...,rate=...`` as a Workload (unknown keys and bad values refused, one line each)."""
    if len(spec) > 10_000:
        raise TraceError("--synthetic: the spec is longer than 10,000 characters")
    fields: dict[str, object] = {}
    seen: set[str] = set()
    items = [x for x in (x.strip() for x in spec.split(",")) if x]
    if not items:  # "" ran the default workload, as if a spec had been given
        raise TraceError(f"--synthetic {spec!r} names no key: give key=value pairs, e.g. requests=1000 for the "
                         "defaults (requests=1000,rate=4: docs/simulate.md)")
    for item in items:
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq:
            raise TraceError(f"--synthetic: '{item}' is not key=value (e.g. requests=500,rate=4)")
        if key in seen:
            raise TraceError(f"--synthetic: {key} is given twice: keep one {key}=...")
        seen.add(key)
        try:
            if key in ("requests", "burst", "turns", "seed"):
                n = int(value)
                limit = {"requests": MAX_REQUESTS, "burst": 100_000, "turns": 1000, "seed": 2**63}[key]
                low = 0 if key == "seed" else 1
                if not low <= n <= limit:  # was 'bad value for requests: '500001'', the range unsaid
                    shown = f"{n:,}" if abs(n) < 10**15 else "a number that large"
                    raise TraceError(f"--synthetic: {key}={shown} is outside {low:,}..{limit:,}"
                                     + ("; replay a sample" if key == "requests" and n > limit else ""))
                fields[key] = n
            elif key in ("rate", "think"):
                x = float(value)
                # a rate below 1e-6 per second puts arrivals past 1e300 s, where a step's milliseconds vanish in
                # the float sum (every latency 0 ms); traces' arrivals are held below 1e9 s (trace.py)
                if not (math.isfinite(x) and (x >= 1e-6 if key == "rate" else x >= 0) and x <= 1e6):
                    raise ValueError
                fields[key] = x
            elif key == "arrivals":
                if value not in ("poisson", "bursty", "uniform", "at-once"):
                    raise ValueError
                fields[key] = value
            elif key in ("prompt", "output"):
                fields[key] = lengths(value, key, read_file)
            elif key == "prefixes":
                k, _, rest = value.partition("x")
                p, _, f = rest.partition("@")
                fields["prefixes"], fields["prefix_tokens"], fields["prefix_share"] = int(k), int(p), float(f or 1)
                if not (1 <= int(k) <= 100_000 and 1 <= int(p) <= MAX_REQUEST_TOKENS and 0 <= float(f or 1) <= 1):
                    raise ValueError
            else:
                raise TraceError(f"--synthetic: unknown key '{key}' (requests, rate, arrivals, burst, prompt, "
                                 "output, prefixes, turns, think, seed)")
        except TraceError:
            raise
        except ValueError:
            hint = {"prefixes": "KxP@F, e.g. 4x512@0.8", "arrivals": "poisson, bursty, uniform or at-once",
                    "rate": "requests per second, 1e-6 to 1e6", "think": "seconds, 0 to 1e6",
                    "requests": f"a whole number, 1 to {MAX_REQUESTS:,}", "burst": "a whole number, 1 to 100,000",
                    "turns": "a whole number, 1 to 1,000", "seed": "a whole number >= 0"}
            raise TraceError(f"--synthetic: bad value for {key}: '{value}'"
                             + (f" (expected {hint[key]})" if key in hint else "")) from None
    return Workload(**fields)  # type: ignore[arg-type]


def _arrival_times(w: Workload, n: int, rng: random.Random) -> list[float]:
    if w.arrivals == "at-once":
        return [0.0] * n
    if w.arrivals == "uniform":
        return [i / w.rate for i in range(n)]
    t, out = 0.0, list[float]()
    while len(out) < n:
        if w.arrivals == "poisson":
            t += rng.expovariate(w.rate)
            out.append(t)
        else:  # bursts of `burst` requests, the bursts themselves Poisson at rate / burst
            t += rng.expovariate(w.rate / w.burst)
            out.extend([t] * min(w.burst, n - len(out)))
    return out


def _drawn(w: Workload) -> list[tuple[int, int, float, int | None, int, int]]:
    """Every request's (conversation, turn, start, shared prefix or None, prompt draw, output draw), drawn in the
    order ``generate`` consumes the seeded generator, and the total refused before any token id is made (a
    workload of 200 million tokens took 45 s and 1.6 GB to be refused)."""
    rng = random.Random(w.seed)
    starts = _arrival_times(w, -(-w.requests // w.turns), rng)
    out: list[tuple[int, int, float, int | None, int, int]] = []
    total = held = 0
    for c, start in enumerate(starts):
        k = rng.randrange(w.prefixes) if w.prefixes and rng.random() < w.prefix_share else None
        history = w.prefix_tokens if k is not None else 0
        for t in range(w.turns):
            if len(out) >= w.requests:
                break
            prompt, output = w.prompt.draw(rng), w.output.draw(rng)
            total += history + prompt + output
            held += history + prompt if history else 0  # a prompt after a prefix or turn is made as ids, 8 bytes each
            if total > MAX_TOTAL_TOKENS or history + prompt > MAX_REQUEST_TOKENS:
                raise TraceError(f"--synthetic: more than {MAX_TOTAL_TOKENS:,} tokens in all; fewer requests, "
                                 "turns or shorter lengths")
            if held > MAX_HELD_IDS:
                raise TraceError(f"--synthetic: the shared prefixes and resent conversation histories come to more "
                                 f"than {MAX_HELD_IDS:,} token ids held; fewer requests, turns or shorter lengths")
            out.append((c, t, start, k, prompt, output))
            history += prompt + output
    return out


def generate(w: Workload) -> list[RequestSpec]:
    """The requests of a workload, in arrival order. Later turns of a conversation name the turn before them
    (``after``) and arrive ``think`` seconds after it finishes."""
    tokens = TokenSource()
    systems: dict[int, range] = {}  # the shared prefixes, each made when a conversation first draws it
    out: list[RequestSpec] = []
    history = array("q")
    for c, t, start, k, prompt_len, output_len in _drawn(w):
        if t == 0:
            history = array("q")
            if k is not None:
                if k not in systems:
                    systems[k] = tokens.fresh(w.prefix_tokens)
                history.extend(systems[k])
        prompt: Sequence[int] = tokens.fresh(prompt_len)  # fresh ids as a range; after a prefix or turn, ids
        if history:
            prompt = history + array("q", prompt)
        output = tokens.fresh(output_len)
        rid = f"c{c}t{t}" if w.turns > 1 else f"r{c}"
        out.append(RequestSpec(rid, start if t == 0 else 0.0, prompt, output,
                               after=out[-1].id if t else None, delay=w.think if t else 0.0))
        history = array("q", prompt) + array("q", output) if w.turns > 1 else array("q")
    return out
