"""Check SGLang and TensorRT-LLM start-up logs against the engines' own arithmetic.

SGLang 0.5.23 (``mem_cache/kv_cache_configurator.py``, ``model_executor/model_runner.py``): ``Load weight begin. avail mem=P GB`` (free before loading),
``Load weight end. ... avail mem=A GB``, ``mem_fraction_static=f`` in ``server_args``: the pool is
``floor((A - P x (1 - f)) x 2^30 / cell)`` tokens, and ``K size`` is (tokens + page) x the K bytes of a
token. TensorRT-LLM (``_torch/pyexecutor/_util.py``, ``kvCacheManager.cpp``): ``available: A GiB`` (engine path) or ``available KV cache memory when
calculating max tokens: A GiB ... kv size [per token] is S`` (PyTorch backend), ``Number of blocks in
KV cache primary pool: N``, ``Allocated X GiB for max tokens in paged KV cache (T)``. Every logged
figure is rounded to 0.01 GB, so a recomputed figure counts as matching when it lies within what that
rounding allows.
"""

from __future__ import annotations

import re

from ..units import GiB, InputError

_N = r"([0-9][0-9,]*(?:\.[0-9]+)?)"


def _f(text: str) -> float:
    return float(text.replace(",", ""))


def _last(pattern: str, text: str) -> re.Match[str] | None:
    found = list(re.finditer(pattern, text))
    return found[-1] if found else None


Row = tuple[str, float, float, bool]


def check_other_log(text: str, model: str | None = None) -> list[Row]:
    """(figure, reported, recomputed, matches) for every figure the log lets us recompute."""
    rows: list[Row] = []
    alloc = _last(r"KV Cache is allocated\.(?: dtype: [\w.]+,)?(?: #tokens: " + _N + r",)? K size: " + _N + r" GB, V size: "
                  + _N + " GB", text)
    total = _last(r"max_total_num_tokens=" + _N, text)  # releases before #tokens was in the line print it here
    if alloc and (alloc.group(1) or total):
        tokens = int(_f(alloc.group(1) or total.group(1)))  # type: ignore[union-attr]
        k_gb = _f(alloc.group(2))
        begin = _last(r"Load weight begin\. avail mem=" + _N + " GB", text)
        end = _last(r"Load weight end\..*?avail mem=" + _N + " GB", text)
        usage = _last(r"Load weight end\..*?mem usage=" + _N + " GB", text)
        pre_err = 0.005
        if end and usage and not begin:  # free before loading = free after + what loading took
            begin, pre_err = end, 0.01
        frac = _last(r"mem_fraction_static=" + _N, text) or _last(r"--mem-fraction-static[ =]" + _N, text)
        page = _last(r"page_size=" + _N, text)
        p = int(_f(page.group(1))) if page else 1
        per_token_k = k_gb * GiB / (tokens + p)  # implied K bytes per token, from the log itself
        if model:
            per_token_k = _model_k_bytes(model, text, per_token_k)
        if begin and end and frac:
            pre, after, f = _f(begin.group(1)), _f(end.group(1)), _f(frac.group(1))
            if begin is end and usage:
                pre = after + _f(usage.group(1))
            cell = 2 * per_token_k
            # a hybrid model's Mamba state pool comes out of the same budget first
            mamba = _last(r"Mamba Cache is allocated\..*?conv_state size: " + _N + r" ?GB, ssm_state size: " + _N + " ?GB", text)
            states = _f(mamba.group(1)) + _f(mamba.group(2)) if mamba else 0.0
            st_err = 0.01 if mamba else 0.0
            lo = int(((after - 0.005) - (pre + pre_err) * (1 - f) - states - st_err) * GiB // cell)
            hi = int(((after + 0.005) - (pre - pre_err) * (1 - f) - states + st_err) * GiB // cell)
            rows.append(("SGLang #tokens from the logged free memory", tokens, round((lo + hi) / 2), lo <= tokens <= hi))
        if model:  # K buffer = (tokens + one padding page) x K bytes of a token, in GB of 2^30
            k_want = round((tokens + p) * per_token_k / GiB, 2)
            rows.append(("SGLang K size (GB) from #tokens", k_gb, k_want, k_gb == k_want))
        rows.append(("SGLang K size = V size (GB)", _f(alloc.group(3)), k_gb, _f(alloc.group(3)) == k_gb))
    pool = _last(r"Allocated " + _N + r" GiB for max tokens in paged KV cache \(" + _N + r"\)", text)
    if pool:
        x, t = _f(pool.group(1)), int(_f(pool.group(2)))
        blocks = _last(r"Number of blocks in KV cache primary pool: " + _N, text)
        tpb = _last(r"Number of tokens per block: " + _N, text)
        if blocks and tpb:
            n, b = int(_f(blocks.group(1))), int(_f(tpb.group(1)))
            rows.append(("TRT-LLM tokens = blocks x tokens per block", t, n * b, t == n * b))
        avail = _last(r"available: " + _N + " GiB", text)
        frac = _last(r"(?:free_gpu_memory_fraction|freeGpuMemoryFraction|kv_cache_free_gpu_mem_fraction)['\"]?[=: ]+" + _N, text)
        if avail and frac:
            want = _f(avail.group(1)) * _f(frac.group(1))
            rows.append(("TRT-LLM pool GiB = available x fraction", x, round(want, 2), abs(want - x) <= 0.005 * 2 + 0.01 * _f(frac.group(1))))
        per = _last(r"available KV cache memory when calculating max tokens: " + _N + r" GiB.*?kv size(?: per token)? is " + _N, text)
        if per:
            a, s = _f(per.group(1)), _f(per.group(2))
            most = int((a + 0.005) * GiB // s)
            rows.append(("TRT-LLM tokens <= available / kv size per token", t, most, t <= most))
    if not rows:
        raise InputError("no SGLang ('KV Cache is allocated') or TensorRT-LLM ('Allocated ... for max tokens in paged KV cache') "
                         "figures found in the log")
    return rows


def _model_k_bytes(ref: str, text: str, implied: float) -> float:
    """K bytes per token per rank of full-attention layers of ``ref`` at the TP size the log names, in
    the element size (1, 2 or 4 bytes) closest to what the log's rounded K size implies."""
    from ..model.layers import MLA, FullAttention, SlidingWindow
    from ..model.resolve import load_model
    from ..units import element_type

    spec = load_model(ref)
    tp_match = _last(r"tp_size=" + _N, text) or _last(r"--tp(?:-size)?[ =]" + _N, text)
    ranks = [int(x) for x in re.findall(r"\bTP(\d+)\b", text)]  # log lines are tagged TP0 .. TP(n-1)
    tp = int(_f(tp_match.group(1))) if tp_match else max(ranks) + 1 if ranks else 1
    attn = [x for x in spec.layers if isinstance(x, FullAttention) and not isinstance(x, MLA)]
    full = [x for x in attn if not isinstance(x, SlidingWindow)]
    # K bytes with and without sliding-window layers (releases before SWA pools gave them full-length
    # buffers), in 1, 2 and 4 bytes per element
    candidates = [sum(x.bytes_per_token(element_type(d), tp) for x in group) / 2
                  for group in (full, attn) for d in ("fp8_e4m3", "bf16", "fp32")]
    return min(candidates, key=lambda c: abs(c - implied)) if attn else implied
