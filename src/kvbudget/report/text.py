"""Plain-text tables for the terminal (no third-party dependency, fast to import)."""

from __future__ import annotations

from collections.abc import Sequence

from ..units import fmt_bytes, fmt_small
from .verdict import verdict_text

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from ..engines.llamacpp import LlamaCppPlan
    from ..engines.summary import EngineRow
    from ..engines.textbook import MemoryPlan
    from ..engines.vllm import VllmPlan
    from ..engines.vllm_check import CheckResult, Row
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
        f"KV per sequence: {fmt_bytes(r.bytes_per_sequence, units)} at {r.context:,} tokens",
        f"KV total:        {fmt_bytes(r.total_bytes, units)} for {r.batch} x {r.context:,} tokens",
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
    kv_left = fmt_bytes(p.kv_cache_bytes, units) if p.kv_cache_bytes >= 0 else f"-{fmt_bytes(-p.kv_cache_bytes, units)}"

    def pct(n: int) -> str:
        return f"{100 * n / p.total_bytes:5.1f}%"

    rows = [
        ["weights", fmt_bytes(p.weights_bytes, units), pct(p.weights_bytes)],
        ["activation workspace", fmt_bytes(p.activation_bytes, units), pct(p.activation_bytes)],
        ["runtime overhead", fmt_bytes(p.overhead_bytes, units), pct(p.overhead_bytes)],
        ["KV cache (what is left)", kv_left, pct(p.kv_cache_bytes)],
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


def models_text(rows: list[tuple[str, str, int, str]]) -> str:
    return table(["model", "type", "params", "aliases"],
                 [[i, t, f"{p / 1e9:.2f}B", a] for i, t, p, a in rows], right=[False, False, True, False])


def gpus_text(items: list[GPU], units: str) -> str:
    def opt(v: float | int | None, fmt: str) -> str:
        return "-" if v is None else fmt.format(v)

    rows = [
        [g.name, g.vendor, fmt_bytes(g.memory_bytes, units), opt(g.bandwidth_bytes_per_s and g.bandwidth_bytes_per_s / 1e12, "{:.2f} TB/s"),
         opt(g.bf16_tflops, "{:g}"), opt(g.fp8_tflops, "{:g}"), "yes" if g.fp8 else "no", opt(g.price_per_hour, "${:.2f}")]
        for g in items
    ]
    return table(["GPU", "vendor", "memory (as reported)", "bandwidth", "bf16 TFLOP/s", "fp8 TFLOP/s", "fp8", "$/hour"],
                 rows, right=[False, False, True, True, True, True, False, True])


def vllm_text(p: VllmPlan, units: str, suggestions: list[tuple[str, VllmPlan]] | None = None, batch: int | None = None) -> str:
    """The vLLM plan: the per-rank budget, the KV pool, and the lines vLLM will log."""
    from ..engines.vllm import capacity

    par = f"TP={p.tp} PP={p.pp}" + (f" DP={p.dp} (figures per DP engine)" if p.dp > 1 else "")
    tags = dict(p.provenance)

    def tag(name: str) -> str:
        f = tags.get(name)
        return f.provenance if f else ""

    rows = [
        ["budget: total x gpu_memory_utilization", fmt_bytes(p.requested_bytes, units), f"{p.utilization:g} x {fmt_bytes(p.total_bytes, units)}"],
        ["- model loading (weights, rotary cache)", fmt_bytes(p.model_loading_bytes, units), tag("weights_bytes")],
        ["- non-torch memory", fmt_bytes(p.non_torch_bytes, units), tag("non_torch_bytes")],
        ["- activation peak of the profiling run", fmt_bytes(p.activation_bytes, units), tag("activation_bytes")],
        ["- CUDA-graph memory", fmt_bytes(p.cudagraph_bytes, units), tag("cudagraph_bytes")],
        ["= available KV cache memory", fmt_bytes(p.available_kv_cache_bytes, units), tag("available_kv_cache_bytes")],
    ]
    out = [
        f"{p.model} ({p.params / 1e9:.2f}B params) on {p.tp * p.pp} x {p.gpu}, {par}; {p.version_line}",
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
    if batch is not None and p.starts:
        most, longest = capacity(p, batch)
        ok = p.max_concurrency >= batch
        out += [
            "",
            f"Requests of {p.max_model_len:,} tokens held at once: {most:,}",
            f"Longest context for {batch} requests at once:  {longest:,}",
            f"Verdict: {'fits' if ok else 'does not fit'}: {batch} x {p.max_model_len:,}-token requests "
            + (f"fit in the pool ({p.max_concurrency:.2f}x)" if ok else f"need more than the pool's {p.max_concurrency:.2f}x"),
        ]
    elif batch is not None:
        out += ["", "Verdict: does not fit: vLLM will not start (see above)"]
    if suggestions:
        out += ["", "Flags that change this:"]
        for flags, s in suggestions:
            what = (f"{s.kv_cache_tokens:,} KV tokens, {s.max_concurrency:.2f}x at {s.max_model_len:,}" if s.starts
                    else "still does not start")
            out.append(f"  {flags:<40} -> {what}")
    out += [f"note: {n}" for n in p.notes]
    return "\n".join(out)


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
    out += [f"warning: {w}" for w in c.warnings]
    return "\n".join(out)


def llamacpp_text(p: LlamaCppPlan, units: str, warnings: list[str] | None = None) -> str:
    """llama.cpp's context: cells, streams, the KV caches to the byte, and where memory goes."""
    out = [
        f"{p.model} with llama.cpp on {p.gpu}; weights {p.weights_format}",
        f"n_ctx {p.n_ctx:,} ({p.n_seq_max} sequence(s), {'unified' if p.unified else f'{p.n_stream} streams'}), "
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
        "llama.cpp will log:",
        *(f"  {line}" for line in p.log_lines),
    ]
    if p.fit_note:
        out.append(f"auto-fit: {p.fit_note}")
    out.append(f"Verdict: {'fits' if p.fits else 'does not fit'} on {p.gpu}")
    out += [f"note: {n}" for n in p.notes]
    out += [f"warning: {w}" for w in warnings or []]
    return "\n".join(out)


def engine_text(row: EngineRow, model: str, gpu: str, lines: list[str], notes: list[str], units: str) -> str:
    """SGLang and TensorRT-LLM plans: the budget, the pool and the lines the engine will print."""
    out = [
        f"{model} with {row.engine} on {gpu}",
        "",
        table(["part", units], [["weights per GPU", fmt_bytes(row.weights_bytes, units)],
                                ["KV cache budget per GPU", fmt_bytes(row.kv_budget_bytes, units)]]),
        f"budget rule: {row.budget_rule}; unit: {row.unit}",
        f"KV tokens: {row.kv_tokens:,}; requests of {row.context:,} tokens at once: {row.max_concurrency:.2f}",
    ]
    if lines:
        out += ["", f"{row.engine} will log:" if row.starts else f"{row.engine} will fail:", *(f"  {line}" for line in lines)]
    out += [n if n.startswith("warning:") else f"note: {n}" for n in notes]
    return "\n".join(out)


def compare_text(rows: tuple[EngineRow, ...], model: str, context: int, units: str,
                 omitted: tuple[tuple[str, str], ...] = ()) -> str:
    out = [f"{model}, requests of {context:,} tokens, each engine with its defaults (per GPU):", ""]
    out.append(table(
        ["engine", "weights", "KV budget", "KV tokens", "requests at once", "starts"],
        [[r.engine, fmt_bytes(r.weights_bytes, units), fmt_bytes(r.kv_budget_bytes, units), f"{r.kv_tokens:,}",
          f"{r.max_concurrency:.2f}" + ("" if r.context == context else f" at {r.context:,}"),
          "yes" if r.starts else "no (see its fit)"]
         for r in rows]))
    out += ["", "Why they differ:"]
    out += [f"  {r.engine}: budget = {r.budget_rule}; allocated in {r.unit}" for r in rows]
    out += [f"Not compared: {engine}: {why}" for engine, why in omitted]
    return "\n".join(out)
