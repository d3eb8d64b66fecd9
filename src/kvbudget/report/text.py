"""Plain-text tables for the terminal (no third-party dependency, fast to import)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from ..units import fmt_bytes, fmt_small, plural
from .verdict import verdict_text

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    from ..engines.base import EnginePlan
    from ..engines.compared import OtherCheck, Row
    from ..engines.llamacpp import LlamaCppPlan
    from ..engines.textbook import MemoryPlan
    from ..engines.vllm import VllmPlan
    from ..engines.vllm.check import CheckResult
    from ..hardware import GPU
    from ..kvreport import KVReport


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool] | None = None) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=False)]
    right = right or [False] + [True] * (len(headers) - 1)

    def line(cells: Sequence[str]) -> str:
        return "  ".join(str(c).rjust(w) if r else str(c).ljust(w) for c, w, r in zip(cells, widths, right, strict=False)).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def _tokens(n: int) -> str:
    return f"{n // 1024}K" if n >= 1024 and n % 1024 == 0 else f"{n:,}"


def kv_text(r: KVReport, units: str) -> str:
    tp = f", TP={r.tp} (per GPU)" if r.tp > 1 else ""
    out = [
        f"{r.model}: {r.params / 1e9:.2f}B params, KV cache {r.kv_dtype}{tp}",
        "",
        table(
            ["layer kind", "layers", "shape", "bytes/token", f"tokens held @{_tokens(r.context)}", "per sequence"],
            [
                [row.kind, str(row.layers), row.detail, f"{row.bytes_per_token:,}", f"{row.tokens_held:,}",
                 fmt_bytes(row.bytes_per_sequence, units)]
                for row in r.rows
            ],
        ),
        "",
        f"KV per token:    {fmt_small(r.bytes_per_token)}",
        f"KV per sequence: {fmt_bytes(r.bytes_per_sequence, units)} at {plural(r.context, 'token')}",
        f"KV total:        {fmt_bytes(r.total_bytes, units)} for {r.batch:,} x {plural(r.context, 'token')}",
        "",
        f"Total KV cache ({units}) by batch size x context length:",
        table(["batch"] + [_tokens(c) for c in r.contexts],
              [[str(b)] + [f"{v / (2**30 if units == 'GiB' else 1e9):,.2f}" for v in row]
               for b, row in zip(r.batches, r.table, strict=False)]),
    ]
    out += [f"note: {n}" for n in r.notes]
    out += [f"warning: {w}" for w in r.warnings]
    return "\n".join(out)


def fit_text(p: MemoryPlan, units: str) -> str:
    par = f"TP={p.tp} PP={p.pp}" + (f", fullest stage {p.stage} (layers {p.stage_layers[0]}..{p.stage_layers[0] + p.stage_layers[1] - 1})" if p.pp > 1 else "")
    # weights, activations and overhead beyond the GPU: nothing is left, and the table says by how much it is short
    kv_left = fmt_bytes(p.kv_cache_bytes, units) if p.kv_cache_bytes >= 0 else f"none, {fmt_bytes(-p.kv_cache_bytes, units)} short"

    def pct(n: int) -> str:
        return f"{100 * n / p.total_bytes:5.1f}%"

    rows = [
        ["weights", fmt_bytes(p.weights_bytes, units), pct(p.weights_bytes)],
        ["activation workspace", fmt_bytes(p.activation_bytes, units), pct(p.activation_bytes)],
        ["runtime overhead", fmt_bytes(p.overhead_bytes, units), pct(p.overhead_bytes)],
        ["KV cache (what is left)", kv_left, pct(max(p.kv_cache_bytes, 0))],
        ["total", fmt_bytes(p.total_bytes, units), pct(p.total_bytes)],
    ]
    out = [
        f"{p.model} ({p.params / 1e9:.2f}B params) on {p.num_gpus} x {p.gpu}, {par}",
        "",
        "Per-GPU memory:",
        table(["part", units, "share"], rows),
        "",
        "Weights by role (per GPU): " + ", ".join(f"{role} {fmt_bytes(b, units)}" for role, b in p.weights_by_role),
    ]
    if p.replicated_by_role:
        out.append("Not split by TP (every GPU holds all of it): "
                   + ", ".join(f"{role} {fmt_bytes(b, units)}" for role, b in p.replicated_by_role))
    if p.kept_16bit:
        out.append("Kept in 16-bit: " + ", ".join(p.kept_16bit))
    mb = "unbounded (no per-sequence cache)" if p.max_batch is None else f"{p.max_batch:,}"
    ctx = f"{p.max_context:,}" + (" (the model's limit)" if p.max_context_capped else "")
    out += [
        "",
        f"KV per sequence at {p.context:,} tokens: {fmt_bytes(p.kv_per_sequence_bytes, units)} ({p.kv_dtype})",
        f"Largest batch at {p.context:,} tokens:  {mb}",
        f"Longest context at batch {p.batch}:     {ctx}",
        "",
        "Assumptions:",
        *(f"  - {a.name}: {_assumed(a.value, a.nbytes, units)}  [{a.source}]" for a in p.assumptions),
        "",
        f"Verdict: {verdict_text(p, units)}",
    ]
    out += [f"note: {n}" for n in p.notes]
    out += [f"warning: {w}" for w in p.warnings]
    return "\n".join(out)


def _assumed(value: str, nbytes: int | None, units: str) -> str:
    return value if nbytes is None else f"{fmt_bytes(nbytes, units)} ({value})"


def _count(n: int) -> str:
    """A parameter count for the models table: trillions as T (Kimi K2), the rest as B."""
    return f"{n / 1e12:.2f}T" if n >= 10**12 else f"{n / 1e9:.2f}B"


def models_text(rows: list[tuple[str, str, int, str]]) -> str:
    return table(["model", "type", "params", "aliases"],
                 [[i, t, _count(p), a] for i, t, p, a in rows], right=[False, False, True, False])


def gpus_text(items: list[GPU], units: str) -> str:
    def opt(v: float | int | None, fmt: str) -> str:
        return "-" if v is None else fmt.format(v)

    rows = [
        [g.name, g.vendor, fmt_bytes(g.memory_bytes, units), opt(g.bandwidth_bytes_per_s and g.bandwidth_bytes_per_s / 1e12, "{:.2f} TB/s"),
         opt(g.bf16_tflops, "{:g}"), opt(g.fp8_tflops, "{:g}"), "yes" if g.fp8 else "no", opt(g.price_per_hour, "${:.4g}")]
        for g in items
    ]
    return table(["GPU", "vendor", "memory (as reported)", "bandwidth", "bf16 TFLOP/s", "fp8 TFLOP/s", "fp8", "$/hour"],
                 rows, right=[False, False, True, True, True, True, False, True])


def vllm_text(p: VllmPlan, units: str, suggestions: list[tuple[str, VllmPlan]] | tuple[tuple[str, VllmPlan], ...] = ()) -> str:
    """The vLLM plan: the per-rank budget, the KV pool, and the lines vLLM will log."""
    par = (f"TP={p.tp} PP={p.pp}" + (f" DP={p.dp} (memory per engine)" if p.dp > 1 else "")
           + (f" EP={p.ep} (whole experts per GPU)" if p.ep > 1 else ""))
    tags = dict(p.provenance)

    def tag(name: str) -> str:
        f = tags.get(name)
        return "" if f is None else f.provenance + (" + site profile" if f.band.startswith(_SITE) else "")

    rows = [
        ["budget: total x gpu_memory_utilization", fmt_bytes(p.requested_bytes, units), f"{p.utilization:g} x {fmt_bytes(p.total_bytes, units)}"],
        ["- model loading (weights, rotary cache" + (", LoRA slots)" if p.lora_bytes else ")"),
         fmt_bytes(p.model_loading_bytes, units), tag("weights_bytes")],
        *([["    of which LoRA adapter slots", fmt_bytes(p.lora_bytes, units), tag("lora_bytes")]] if p.lora_bytes else []),
        *([["    of which EPLB (redundant experts, state)", fmt_bytes(p.eplb_bytes, units), tag("eplb_bytes")]]
          if p.eplb_bytes else []),
        ["- non-torch memory", fmt_bytes(p.non_torch_bytes, units), tag("non_torch_bytes")],
        ["- activation peak of the profiling run", fmt_bytes(p.activation_bytes, units), tag("activation_bytes")],
        ["- CUDA-graph memory", fmt_bytes(p.cudagraph_bytes, units), tag("cudagraph_bytes")],
        *([["- frontend multimodal decoding (--mm-ipc-gpu-memory-gb)", fmt_bytes(p.mm_ipc_bytes, units),
            tag("mm_ipc_bytes")]] if p.mm_ipc_bytes else []),
        ["= available KV cache memory", fmt_bytes(p.available_kv_cache_bytes, units), tag("available_kv_cache_bytes")]
        if not p.load_fails else ["= available KV cache memory", "none", "loading stops first: the weights do not fit"],
    ]
    out = [
        f"{p.model} ({p.params / 1e9:.2f}B params) on {p.tp * p.pp * p.dp} x {p.gpu}, {par}; {p.version_line}",
        f"weights {p.weights_format}, KV cache {p.kv_cache_dtype}, block size {p.block_size}, max_model_len {p.max_model_len:,}, "
        f"max_num_seqs {p.max_num_seqs}, max_num_batched_tokens {p.max_num_batched_tokens:,}",
        "",
        "Per-GPU memory (the binding rank):",
        table(["part", units, "provenance"], rows, right=[False, True, False]),
        "",
        "KV cache groups: " + ", ".join(f"{len(g.layers)} x {g.kind}" for g in p.groups)
        + f"; {p.bytes_per_block:,} B per block, {p.blocks_per_request:,} blocks per request at {p.max_model_len:,} tokens",
        "",
        "vLLM will log:" if p.starts else "vLLM will stop with:",
        *(f"  {line}" for line in p.log_lines),
    ]
    if suggestions:
        out += ["", "Flags that change this:", *_fix_lines(suggestions)]
    out += [f"note: {n}" for n in p.notes]
    out += [f"note: non-torch memory includes the {f.band}" for name, f in p.provenance
            if name == "non_torch_bytes" and f.band.startswith(_SITE)]
    return "\n".join(out)


_SITE = "site profile:"  # the start of a figure's band that a site profile (--profile) moved (engines/site.py)


def _cmp_table(rows: tuple[Row, ...]) -> str:
    def num(v: float | None) -> str:
        if v is None:
            return "-"
        return f"{v:,.2f}" if v != int(v) else f"{int(v):,}"

    def err(r: Row) -> str:
        if r.figure == "starts":
            return "same" if r.error_pct is None else "DIFFERS"
        return "-" if r.error_pct is None else f"{r.error_pct:+.2f}%"

    return table(["figure", "log", "kvbudget", "error"],
                 [[r.figure, "yes" if r.figure == "starts" and r.reported else "no" if r.figure == "starts" else num(r.reported),
                   "yes" if r.figure == "starts" and r.predicted else "no" if r.figure == "starts" else num(r.predicted), err(r)]
                  for r in rows])


def _fix_lines(suggestions: Sequence[tuple[str, VllmPlan]]) -> list[str]:
    out = []
    for flags, s in suggestions:
        what = (f"{s.kv_cache_tokens:,} KV tokens, {s.max_concurrency:.2f}x at {s.max_model_len:,}" if s.starts
                else "still does not start")
        out.append(f"  {flags:<40} -> {what}")
    return out


def check_text(c: CheckResult, units: str) -> str:
    s = c.settings
    out = [
        f"{c.model} on {s.tensor_parallel_size * s.pipeline_parallel_size} x {c.gpu}, {c.plan.version_line}",
        f"settings: max_model_len {c.plan.max_model_len:,}, gpu_memory_utilization {c.plan.utilization:g}, "
        f"kv_cache_dtype {c.plan.kv_cache_dtype}, TP={s.tensor_parallel_size} PP={s.pipeline_parallel_size}"
        + (", enforce_eager" if s.enforce_eager else ""),
        "",
        "Reported by vLLM vs predicted by kvbudget:",
        _cmp_table(c.rows),
    ]
    if c.arithmetic_rows:
        out += ["", "KV-cache arithmetic from the log's own available memory (blocks, tokens, concurrency are exact):",
                _cmp_table(c.arithmetic_rows)]
    if not c.log.started:
        est, held = c.log.estimated_max_model_len, c.log.kv_cache_tokens
        why = (f": vLLM's own estimate of the longest length that fits is {est:,} (--max-model-len {est})" if est
               else f": its KV cache held {held:,} tokens, so --max-model-len {held} starts that run" if held else ".")
        out += ["", "The logged run did not start" + why]
        if not c.plan.starts and c.plan.log_lines:
            out += ["kvbudget predicts the same stop:", f"  {c.plan.log_lines[-1]}"]
    if c.fixes:
        out += ["", "Flags that change this (kvbudget's plan of each):", *_fix_lines(c.fixes)]
    out += [f"warning: {w}" for w in c.warnings]
    return "\n".join(out)


def llamacpp_text(p: LlamaCppPlan, units: str, warnings: list[str] | None = None) -> str:
    """llama.cpp's context: cells, streams, the KV caches to the byte, and where memory goes."""
    out = [
        f"{p.model} with llama.cpp on {p.gpu}; weights {p.weights_format}",
        f"n_ctx {p.n_ctx:,} ({plural(p.n_seq_max, 'sequence')}, {'unified' if p.unified else f'{p.n_stream} streams'}), "
        f"n_ctx_seq {p.n_ctx_seq:,}, KV cache {p.type_k}/{p.type_v}",
        "",
        table(["part", units], [
            ["weights on the GPU", fmt_bytes(p.weights_gpu_bytes, units)],
            ["KV cache on the GPU", fmt_bytes(p.kv_gpu_bytes, units)],
            ["compute buffer (estimate)", fmt_bytes(p.compute_bytes, units)],
            ["total on the GPU", fmt_bytes(p.total_gpu_bytes, units)],
            ["weights in host memory", fmt_bytes(p.weights_cpu_bytes, units)],
        ]),
        "",
        "llama.cpp will log:" if p.fits else "llama.cpp will fail:",
        *(f"  {line}" for line in p.log_lines),
    ]
    if p.fit_note:
        out.append(f"auto-fit: {p.fit_note}")
    out += [f"note: {n}" for n in p.notes]
    out += [f"warning: {w}" for w in warnings or []]
    return "\n".join(out)


def engine_text(row: EnginePlan, model: str, gpu: str, lines: list[str], notes: list[str], units: str,
                label: str = "") -> str:
    """SGLang and TensorRT-LLM plans: the budget, the pool and the lines the engine will print."""
    label = label or row.engine
    out = [
        f"{model} with {label} on {gpu}",
        "",
        table(["part", units], [["weights per GPU", fmt_bytes(row.weights_bytes, units)],
                                ["KV cache budget per GPU", fmt_bytes(row.kv_budget_bytes, units)]]),
        f"budget rule: {row.budget_rule}; unit: {row.unit}",
        _pool_line(row),
    ]
    if lines:
        out += ["", f"{label} will log:" if row.starts else f"{label} will fail:", *(f"  {line}" for line in lines)]
    out += [n if n.startswith("warning:") else f"note: {n}" for n in notes]
    return "\n".join(out)


def _pool_line(row: EnginePlan) -> str:
    """The pool's tokens and the requests it holds; under DP attention, per DP rank and in all."""
    held = _whole(row.max_concurrency)
    if row.pools > 1:
        return (f"KV tokens per DP rank: {row.kv_tokens:,}; each DP rank's pool holds {plural(held, 'request')} of "
                f"{row.context:,} tokens ({held * row.pools:,} in all over {row.pools} DP ranks)")
    return f"KV tokens: {row.kv_tokens:,}; the pool holds {plural(held, 'request')} of {row.context:,} tokens"


def _whole(concurrency: float) -> int:
    """Requests held at once: the whole ones of a pool's concurrency (the engine's own "x" figure keeps decimals)."""
    return max(int(concurrency), 0)


def compare_text(rows: tuple[EnginePlan, ...], model: str, context: int, units: str,
                 omitted: tuple[tuple[str, str], ...] = (), notes: tuple[str, ...] = (), weights: str = "auto") -> str:
    said = "" if weights == "auto" else f", weights {weights}"
    out = [f"{model}, requests of {context:,} tokens{said}, each engine with its defaults (per GPU):", ""]
    out.append(table(
        ["engine", "weights", "KV budget", "KV tokens", "requests at once", "starts"],
        [[r.engine, fmt_bytes(r.weights_bytes, units), fmt_bytes(r.kv_budget_bytes, units), f"{r.kv_tokens:,}",
          f"{_whole(r.max_concurrency):,}" + ("" if r.context == context else f" at {r.context:,}"),
          "yes" if r.starts else "no (see its fit)"]
         for r in rows]))
    out += ["", "Why they differ:"]
    out += [f"  {r.engine}: budget = {r.budget_rule}; allocated in {r.unit}" for r in rows]
    out += [f"Not compared: {engine}: {why}" for engine, why in omitted]
    out += [f"note: {n}" for n in notes]
    return "\n".join(out)


# --- 120 columns -------------------------------------------------------------------------------------------------

WIDTH = 120
_LAUNCHERS = ("vllm serve ", "python -m ", "python3 -m ", "llama-server ", "llama-cli ", "trtllm-serve ", "docker run ",
              "kvbudget ", "ollama ")


def fit_width(text: str, width: int = WIDTH) -> str:
    """``text`` with every line at most ``width`` columns where it can be: a table too wide has its widest text
    column wrapped onto continuation rows; a shell command is continued with `` \\`` (still copyable); any other
    line is wrapped at spaces under a hanging indent. A single word longer than the width stays whole."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        spans = _rule_spans(lines[i + 1]) if i + 1 < len(lines) and lines[i].strip() else None
        if spans:
            j = i + 2
            while j < len(lines) and _in_table(lines[j], spans):
                j += 1
            block = lines[i:j]
            out += _fit_table(block, spans, width) if max(map(len, block)) > width else block
            i = j
            continue
        out += _fit_line(lines[i], width)
        i += 1
    return "\n".join(out)


def _rule_spans(line: str) -> list[tuple[int, int]] | None:
    """The columns of a table's ``---  ---`` rule (two or more), as (start, end) offsets."""
    if not line.startswith("-") or set(line) - {"-", " "} or "   " in line:
        return None
    spans: list[tuple[int, int]] = []
    start = 0
    for part in line.split("  "):
        if not part or set(part) != {"-"}:
            return None
        spans.append((start, start + len(part)))
        start += len(part) + 2
    return spans if len(spans) >= 2 else None


def _in_table(line: str, spans: list[tuple[int, int]]) -> bool:
    """Whether ``line`` is a row of the table: not blank, and blank in every gap between columns."""
    return bool(line.strip()) and all(not line[e:s].strip() for (_, e), (s, _) in pairwise(spans))


def _words(text: str, width: int) -> list[str]:
    """``text`` greedily wrapped at spaces into pieces of at most ``width`` (a longer word stays whole; a list's
    comma at the end of a piece that would overflow is dropped, the line break separating the items)."""
    pieces: list[str] = []
    for word in text.split(" "):
        if pieces and len(pieces[-1]) + 1 + len(word) <= width:
            pieces[-1] += " " + word
        else:
            pieces.append(word)
    return [p[:-1] if len(p) > width and p.endswith(",") and n < len(pieces) - 1 else p for n, p in enumerate(pieces)] or [""]


def _fit_table(block: list[str], spans: list[tuple[int, int]], width: int) -> list[str]:
    bounds = [*spans[:-1], (spans[-1][0], max(map(len, block)))]
    cells = [[line[s:e].strip() for s, e in bounds] for line in block[:1] + block[2:]]
    left = [all(not line[s:e] or line[s] != " " for line in block[:1] + block[2:]) for s, e in bounds]
    widths = [max(len(row[k]) for row in cells) for k in range(len(bounds))]
    wrapped = [[[c] for c in row] for row in cells]
    tried: set[int] = set()
    while sum(widths) + 2 * (len(widths) - 1) > width:
        free = [k for k in range(len(widths)) if left[k] and k not in tried and any(" " in r[k] for r in cells)]
        if not free:
            break
        # flags and commands are copied: a column of them is wrapped last
        k = max(free, key=lambda c: (not any(r[c].startswith("-") for r in cells), widths[c]))
        tried.add(k)
        target = max(8, widths[k] - (sum(widths) + 2 * (len(widths) - 1) - width))
        for n, row in enumerate(cells):
            wrapped[n][k] = _words(row[k], target)
        widths[k] = max(len(p) for r in wrapped for p in r[k])

    def line(parts: list[str]) -> str:
        return "  ".join(p.ljust(w) if lf else p.rjust(w) for p, w, lf in zip(parts, widths, left, strict=False)).rstrip()

    out: list[str] = []
    for n, parts in enumerate(wrapped):
        depth = max(len(c) for c in parts)
        out += [line([c[d] if d < len(c) else "" for c in parts]) for d in range(depth)]
        if n == 0:
            out.append(line(["-" * w for w in widths]))
    return out


def _fit_line(line: str, width: int) -> list[str]:
    if len(line) <= width:
        return [line]
    body = line.lstrip(" ")
    indent = len(line) - len(body)
    if body.startswith(_LAUNCHERS) or (body.split(" ", 1)[0].count("=") == 1 and " vllm " in body):
        return _fit_command(body, indent, width)
    hang = " " * (indent + (4 if body.startswith("- ") else 2))
    out = [" " * indent]
    for word in body.split(" "):
        if out[-1].strip() and len(out[-1]) + 1 + len(word) > width:
            out.append(hang + word)
        else:
            out[-1] += (" " if out[-1].strip() else "") + word
    return out


def _fit_command(body: str, indent: int, width: int) -> list[str]:
    """A shell command continued with `` \\`` at spaces outside quotes, each line within ``width``."""
    words: list[str] = []
    quote = ""
    current = ""
    for ch in body:
        if ch == " " and not quote:
            words.append(current)
            current = ""
            continue
        if ch in "'\"" and (not quote or quote == ch):
            quote = "" if quote else ch
        current += ch
    words.append(current)
    out = [" " * indent]
    for word in words:
        if out[-1].strip() and len(out[-1]) + 1 + len(word) > width - 2:
            out[-1] += " \\"
            out.append(" " * (indent + 4) + word)
        else:
            out[-1] += ("" if not out[-1].strip() else " ") + word
    return out


def recomputed_text(rows: list[tuple[str, float, float, bool]] | tuple[tuple[str, float, float, bool], ...]) -> str:
    """An SGLang or TensorRT-LLM log's figures recomputed from each other."""
    return "\n".join(["Reported vs recomputed from the log's own figures (matches: within the log's 0.01 GB rounding):",
                      table(["figure", "log", "kvbudget", ""], [[f, f"{r:,}", f"{c:,}", "matches" if e else "DIFFERS"]
                                                               for f, r, c, e in rows])])


def other_check_text(c: OtherCheck) -> str:
    """``check`` of an SGLang or TensorRT-LLM log: the run read from it, reported vs predicted, then the figures
    recomputed from each other."""
    shown = ", ".join(f"{name} {value}" for name, value in c.settings if name not in ("version", "release")) or "defaults"
    out = [f"{c.engine} log: {c.model} on {c.gpu}, release line {c.release}" if c.model else f"{c.engine} log",
           f"settings planned: {shown} (read from: {', '.join(c.read_from) or 'no line of the log'})"]
    if c.rows:
        out += ["", f"Reported by {c.engine} vs predicted by kvbudget:", _cmp_table(c.rows)]
    if c.recomputed:
        out += ["", recomputed_text(c.recomputed)]
    out += [f"note: {n}" for n in c.notes]
    out += [f"warning: {w}" for w in c.warnings]
    return "\n".join(out)


def llamacpp_check_text(checks: list[Any], fit: Any = None) -> str:
    """``check`` of a llama.cpp log: each KV cache reported vs recomputed, and each KV buffer in whole layers; then
    its auto-fit lines beside kvbudget's free memory of a bare card (``fit``: engines/llamacpp/engine.py
    ``_fit_section``)."""

    def buffers(c: Any) -> str:
        if not c.cache.buffers:
            return "-"
        return ", ".join(f"{name} {mib:.2f} = {n} layers" for (name, mib), n in zip(c.cache.buffers, c.buffer_layers, strict=False)) \
            + ("" if c.buffers_exact else " (NOT whole layers)")

    rows = [[("SWA " if c.cache.swa else "") + f"{c.cache.cells:,} cells x {c.cache.layers} layers", c.cache.type_k + "/" + c.cache.type_v,
             f"{c.cache.k_mib:.2f} / {c.cache.v_mib:.2f}", f"{c.predicted_k_mib:.2f} / {c.predicted_v_mib:.2f}",
             "exact" if c.exact else "DIFFERS", buffers(c)] for c in checks]
    out = ["llama.cpp KV caches, reported vs recomputed (K / V MiB), and each KV buffer in whole layers:",
           table(["cache", "types", "log", "kvbudget", "", "KV buffers (MiB)"], rows,
                 right=[False, False, True, True, False, False])]
    if fit is not None:
        f, gpu, fit_rows, warnings = fit
        out.append(f"auto-fit (--fit) as the log prints it, and kvbudget's free memory of a bare {gpu or 'card (give --gpu)'}:")
        out.append(table(["figure", "log", "kvbudget"], [[name, f"{a:,}", "-" if b is None else f"{b:,}"]
                                                         for name, a, b in fit_rows], right=[False, True, True]))
        if f.aborted:
            out.append(f"auto-fit aborted: {f.aborted} (llama.cpp loads with the parameters as fit left them)")
        out += [f"warning: {w}" for w in warnings]
    return "\n".join(out)
