"""The requests a simulation replays: what each asks for, as a frozen record, and the files they come from.

A trace is JSON Lines, one request per line:

    {"arrival": 0.25, "prompt_tokens": 812, "output_tokens": 200}
    {"arrival": 0.40, "prompt": [128000, 9906, ...], "output_tokens": 64, "id": "r2"}
    {"arrival": 0.90, "text": "Summarise ...", "output_tokens": 128}

``arrival`` is seconds from the start (or ``arrival_step``, the engine step it joins before); the prompt is token
ids (``prompt``), a token count (``prompt_tokens``: tokens no other request shares) or ``text`` (tokenized with a
local ``tokenizer.json`` through the ``tokenizers`` package); ``output_tokens`` (or ``output``, token ids) is what it
generates. OpenAI-style request logs (``{"request": {"messages": [...], "max_tokens": N}, "timestamp": ...}``) are
read too when a tokenizer is given.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..units import InputError, excerpt

MAX_TRACE_BYTES = 256 * 1024 * 1024
MAX_REQUESTS = 500_000  # each about 900 bytes held through the replay (a million took 1.07 GB)
MAX_TOTAL_TOKENS = 200_000_000  # prompt + output tokens over the whole trace (counts are ranges: no memory each)
MAX_HELD_IDS = 25_000_000  # token ids held as lists (a trace's 'prompt' / 'output', a conversation's resent history)
MAX_REQUEST_TOKENS = 10_000_000
MAX_TOKEN_ID = 1 << 32  # no vocabulary comes near it; below TokenSource's fresh ids


class TraceError(InputError):
    """A trace file or synthetic workload that cannot be replayed."""


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One request: when it arrives, its prompt token ids and the token ids it will generate."""

    id: str
    arrival: float  # seconds from the start of the run
    prompt: Sequence[int]  # token ids: an array ('q'), or a range of fresh ids (TokenSource: no memory per token)
    output: Sequence[int]  # the token ids it generates, in order; len() is the output length
    arrival_step: int | None = None  # the engine step it is added before (traces recorded from a scheduler)
    after: str | None = None  # a request that must finish first (the previous turn of a conversation) ...
    delay: float = 0.0  # ... and the seconds (or, replayed by step, steps) from its finish to this one's arrival

    @property
    def prompt_len(self) -> int:
        return len(self.prompt)

    @property
    def output_len(self) -> int:
        return len(self.output)


class TokenSource:
    """Token ids no other request shares: a counter far above any vocabulary, so that synthetic prompts and outputs
    given as counts never match another request's blocks by accident. They are ranges, made into ids only when the
    scheduler runs the request (200 million counted tokens held as arrays took 1.6 GB before any replay)."""

    def __init__(self, start: int = 1 << 40) -> None:
        self._next = start

    def fresh(self, n: int) -> range:
        out = range(self._next, self._next + n)
        self._next += n
        return out


def _int(value: Any, what: str, where: str, low: int = 0, high: int = MAX_REQUEST_TOKENS) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise TraceError(f"{where}: {what} must be a whole number, got {value!r}")
    if not low <= value <= high:
        shown = f"{value:,}" if abs(value) < 10**15 else "a number that large"
        raise TraceError(f"{where}: {what} {shown} is outside {low:,}..{high:,}")
    return int(value)


def _ids(value: Any, what: str, where: str) -> array[int]:
    if not isinstance(value, list) or len(value) > MAX_REQUEST_TOKENS:
        raise TraceError(f"{where}: {what} must be a list of token ids (at most {MAX_REQUEST_TOKENS:,})")
    try:
        ids = array("q", value)
    except (TypeError, OverflowError):
        raise TraceError(f"{where}: {what} must hold whole-number token ids") from None
    # an id is an index into the vocabulary: a negative one is none, and one at TokenSource's counter (2^40) would
    # share prefix-cache blocks with the requests given as counts
    if ids and not 0 <= min(ids) <= max(ids) < MAX_TOKEN_ID:
        bad = min(ids) if min(ids) < 0 else max(ids)
        shown = f"{bad:,}" if abs(bad) < 10**15 else "a number that large"
        raise TraceError(f"{where}: {what} holds token id {shown}: ids index the vocabulary, 0 to {MAX_TOKEN_ID - 1:,}")
    return ids


_MOST_SECONDS = 1e9  # about 32 years: a larger time is a unit mix-up (nanoseconds, an epoch in ms), not a trace


def _seconds(value: Any, what: str, where: str) -> float:
    """A time in seconds, 0 <= t < 1e9, each way of being wrong told apart (missing, not a number, negative, huge)."""
    if value is None:
        raise TraceError(f"{where}: {what} is missing: give it as a number of seconds >= 0")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise TraceError(f"{where}: {what} is {excerpt(value, 30)}, not a number: give seconds >= 0, e.g. 0.25")
    if value < 0:
        raise TraceError(f"{where}: {what} is negative ({excerpt(value, 30)}): give seconds >= 0")
    if not value < _MOST_SECONDS:
        raise TraceError(f"{where}: {what} is {excerpt(value, 30)} seconds, beyond 1e9 (32 years): give seconds from "
                         "the start of the trace, not a clock time (epoch seconds, ms or ns)")
    return float(value)


def request_from(obj: Any, where: str, index: int, tokens: TokenSource, tokenize: Any = None) -> RequestSpec:
    """One trace line (already parsed) as a request; ``tokenize(text) -> list[int]`` reads ``text`` prompts."""
    if not isinstance(obj, dict):
        raise TraceError(f"{where}: each line must be a JSON object with a prompt and an output length")
    if "request" in obj and isinstance(obj["request"], dict):  # an OpenAI-style request log line
        obj = _from_openai(obj, where)
    step = obj.get("arrival_step")
    arrival = obj.get("arrival", obj.get("timestamp", 0.0 if step is not None else None))
    arrival = _seconds(arrival, "'arrival' (seconds from the start)", where)
    prompts = [k for k in ("prompt", "prompt_tokens", "text") if k in obj]
    prompt: Sequence[int]
    output: Sequence[int]
    if len(prompts) != 1:
        raise TraceError(f"{where}: give exactly one of 'prompt' (token ids), 'prompt_tokens' (a count) or 'text'")
    if "prompt" in obj:
        prompt = _ids(obj["prompt"], "'prompt'", where)
    elif "prompt_tokens" in obj:
        prompt = tokens.fresh(_int(obj["prompt_tokens"], "'prompt_tokens'", where, 1))
    else:
        if tokenize is None:
            raise TraceError(f"{where}: a 'text' prompt needs --tokenizer tokenizer.json to count its tokens")
        if not isinstance(obj["text"], str):
            raise TraceError(f"{where}: 'text' must be a string")
        prompt = array("q", tokenize(obj["text"]))
        if not prompt and obj["text"]:  # was 'the prompt is empty', the trace's text being there
            raise TraceError(f"{where}: --tokenizer gives no token for its 'text' ({len(obj['text']):,} characters): "
                             "is it the model's tokenizer.json?")
    if len(prompt) == 0:
        raise TraceError(f"{where}: the prompt is empty (a request needs at least one prompt token)")
    if "output" in obj:
        output = _ids(obj["output"], "'output'", where)
    elif "output_tokens" in obj:
        output = tokens.fresh(_int(obj["output_tokens"], "'output_tokens'", where, 1))
    else:
        raise TraceError(f"{where}: 'output_tokens' (how many tokens the request generates) is missing")
    if len(output) == 0:
        raise TraceError(f"{where}: the output is empty (a request generates at least one token)")
    rid = obj.get("id", f"r{index}")
    after = obj.get("after")
    if after is not None and not isinstance(after, str):
        raise TraceError(f"{where}: 'after' must be the id of an earlier request")
    delay = _seconds(obj.get("delay", 0.0), "'delay' (seconds from the earlier request's finish)", where)
    return RequestSpec(str(rid)[:200], float(arrival), prompt, output,
                       None if step is None else _int(step, "'arrival_step'", where, 0, 10**9), after, float(delay))


def _from_openai(obj: dict[str, Any], where: str) -> dict[str, Any]:
    req = obj["request"]
    messages = req.get("messages")
    if isinstance(messages, list):
        text = "\n".join(_content(m.get("content"), where) for m in messages if isinstance(m, dict))
    elif isinstance(req.get("prompt"), str):
        text = req["prompt"]
    else:
        raise TraceError(f"{where}: an OpenAI-style request needs 'messages' or a 'prompt' string")
    out: dict[str, Any] = {"text": text, "arrival": obj.get("timestamp", obj.get("arrival", 0.0))}
    usage = obj["response"].get("usage") if isinstance(obj.get("response"), dict) else None
    usage = usage if isinstance(usage, dict) else {}
    n = usage.get("completion_tokens", req.get("max_completion_tokens", req.get("max_tokens")))
    if n is None:
        raise TraceError(f"{where}: the request gives no output length (response usage, max_tokens)")
    out["output_tokens"] = n
    if "id" in obj:
        out["id"] = obj["id"]
    return out


def _content(content: Any, where: str) -> str:
    """A chat message's text: a string, or OpenAI's list of parts (their ``text``; images and audio hold none)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    raise TraceError(f"{where}: a message's 'content' must be a string or a list of parts, got {type(content).__name__}")


def _lines(text: str) -> Iterator[str]:
    """The lines of ``text`` one at a time, split at line feeds only (JSON Lines' separator: a U+2028 or form feed
    inside a JSON string is part of its line, where ``str.splitlines`` cut it), without a list of them all."""
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        yield text[start:end]
        start = end + 1


def _objects(text: str, path: str) -> Iterator[tuple[str, Any]]:
    """Each non-blank line of a JSON Lines trace, parsed, with where it is."""
    for n, line in enumerate(_lines(text), 1):
        if not line.strip():
            continue
        where = f"{path} line {n}"
        try:
            yield where, json.loads(line)
        except (ValueError, RecursionError):
            if "," in line and not line.lstrip().startswith(("{", "[", '"')):  # a header row: was 'line 1: not JSON'
                raise TraceError(f"{where}: comma-separated values, not JSON: a trace is JSON Lines, one object per "
                                 'line, e.g. {"arrival": 0.25, "prompt_tokens": 812, "output_tokens": 200}') from None
            raise TraceError(f"{where}: not JSON (a trace is one JSON object per line)") from None


def _given_tokens(obj: Any) -> tuple[int, int]:
    """The tokens a trace line gives as counts or id lists, and of those the ids given as lists (0 for what
    ``request_from`` refuses or tokenizes)."""
    if not isinstance(obj, dict):
        return 0, 0
    given = listed = 0
    for key in ("prompt", "prompt_tokens", "output", "output_tokens"):
        value = obj.get(key)
        if isinstance(value, list):
            given, listed = given + len(value), listed + len(value)
        elif isinstance(value, int) and not isinstance(value, bool) and value > 0:
            given += min(value, MAX_REQUEST_TOKENS + 1)
    return given, listed


def read_trace(path: str, tokenize: Any = None) -> list[RequestSpec]:
    """The requests of a JSON Lines trace file, ordered by arrival (stable)."""
    from ..inputs import read_text

    text = read_text(path, "trace", MAX_TRACE_BYTES)
    too_many = TraceError(f"{path}: more than {MAX_REQUESTS:,} requests or {MAX_TOTAL_TOKENS:,} tokens; replay a "
                          "sample of it")
    # the lengths the lines give, summed in a first reading before any token id is made (30 lines of
    # 'prompt_tokens': 9000000 took 50 s and 1.6 GB to be refused); 'text' prompts are counted as they are tokenized
    lines = given = listed = 0
    for _, obj in _objects(text, path):
        counted, in_lists = _given_tokens(obj)
        lines, given, listed = lines + 1, given + counted, listed + in_lists
        if lines > MAX_REQUESTS or given > MAX_TOTAL_TOKENS:
            raise too_many
        if listed > MAX_HELD_IDS:  # each id is 8 bytes held through the replay (counts are ranges, held as none)
            raise TraceError(f"{path}: more than {MAX_HELD_IDS:,} token ids given as lists ('prompt', 'output'); "
                             "give the requests that share no prefix as counts ('prompt_tokens', 'output_tokens'), "
                             "or replay a sample of it")
    tokens = TokenSource()
    requests: list[RequestSpec] = []
    total = held = 0
    for where, obj in _objects(text, path):
        req = request_from(obj, where, len(requests), tokens, tokenize)
        total += req.prompt_len + req.output_len
        held += sum(len(seq) for seq in (req.prompt, req.output) if not isinstance(seq, range))
        if total > MAX_TOTAL_TOKENS:
            raise too_many
        if held > MAX_HELD_IDS:  # 'text' prompts, tokenized
            raise TraceError(f"{path}: more than {MAX_HELD_IDS:,} token ids from 'text' prompts and lists; replay a "
                             "sample of it")
        requests.append(req)
    if not requests:
        raise TraceError(f"{path}: no requests (a trace is one JSON object per line)")
    ids = [r.id for r in requests]
    if len(set(ids)) != len(ids):
        raise TraceError(f"{path}: request ids repeat ('id' must be unique, or left out)")
    seen: set[str] = set()
    for r in requests:
        if r.after is not None and r.after not in seen:
            raise TraceError(f"{path}: request {r.id} comes after '{r.after}', which is not an earlier request")
        seen.add(r.id)
    return requests
