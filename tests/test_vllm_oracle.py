"""kvbudget's vLLM planner against vLLM's own planner (tests/data/vllm_oracle, made by tools/gen_vllm_oracle.py).

The table was made by running vLLM's KV-cache planning code (grouping, page-size unification, bytes per block,
block count, the null block, the 'not enough memory' check and its estimated maximum length, the capacity) on
per-layer specs built from kvbudget's reading of each model. Here, without vLLM, kvbudget's own functions must
give the same numbers for every row: ``kv_layout`` / ``layer_pages`` / ``stage_block_bytes`` for the groups,
pages and bytes per block, and ``policy.kv_pool_fit`` for the rest.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

import kvbudget
from kvbudget.engines.vllm.kv_layout import KVLayout, kv_cache_dtype, kv_layout, layer_pages, stage_block_bytes
from kvbudget.engines.vllm.policy import kv_pool_fit
from kvbudget.kvcache import serving_dtype

DATA = Path(__file__).parent / "data" / "vllm_oracle"
TABLES = sorted(DATA.glob("vllm-*.json"))


def _table(path: Path) -> dict:
    return json.loads(path.read_text())


@cache
def _layout(model: str, tp: int, kv: str, block_size: int, hma: bool, mode: str) -> tuple[KVLayout, dict[int, int], int]:
    spec = kvbudget.load_model(model)
    model_dtype = serving_dtype(spec)
    kv_dtype = kv_cache_dtype(kv, model_dtype)
    layout = kv_layout(spec, kv_dtype, model_dtype, tp, block_size, hma, mode == "align")
    pages = layer_pages(spec, layout, kv_dtype, tp)
    return layout, pages, stage_block_bytes(spec, layout, kv_dtype, tp, 1)[0]


def _layout_differences(theirs: dict, ours: KVLayout, pages: dict[int, int], bpb: int) -> Iterator[str]:
    if theirs["bytes_per_block"] != bpb:
        yield f"bytes per block: vLLM {theirs['bytes_per_block']:,}, kvbudget {bpb:,}"
    # each attention group's tokens per block: the block size, times the factor page-size unification grew a smaller
    # page's block by (Gemma 4's full layers, half the sliding layers' page, take blocks of twice the size)
    blocks = {tuple(g.layers): ours.block_size * getattr(g.spec, "scale", 1) for g in ours.groups}
    for kind, layers, _, size in theirs["groups"]:
        if kind != "recurrent_state" and blocks.get(tuple(layers)) != size:
            yield f"{kind} block size of layers {layers[:4]}...: vLLM {size}, kvbudget {blocks.get(tuple(layers))}"
    got = sorted((g.kind, list(g.layers)) for g in ours.groups)
    want = sorted((g[0], g[1]) for g in theirs["groups"])
    if got != want:
        yield f"groups: vLLM {want}, kvbudget {got}"
    for kind, layers, page, _ in theirs["groups"]:
        want_pages = page if isinstance(page, list) else [page] * len(layers)
        got_pages = [pages.get(i) for i in layers]
        if got_pages != want_pages:
            yield f"{kind} pages of layers {layers[:4]}...: vLLM {want_pages[:4]}, kvbudget {got_pages[:4]}"


def _row_difference(row: list, layouts: list[dict]) -> str | None:
    model, tp, kv, bs, hma, mode, max_len, in_flight, memory, lay, *result = row
    layout, pages, bpb = _layout(model, tp, kv, bs, hma, mode)
    problems = list(_layout_differences(layouts[lay], layout, pages, bpb))
    fit = kv_pool_fit(layout, bpb, memory, max_len, in_flight, 2 if mode == "align" else 1)
    if isinstance(result[0], str):
        want = (result[0], result[1])
        got: tuple = (fit.error, fit.estimated_max_model_len)
    else:
        want = tuple(result)
        got = (fit.num_blocks, fit.kv_cache_tokens, fit.max_concurrency) if fit.error is None else (
            fit.error, fit.estimated_max_model_len)
    if got != want:
        problems.append(f"vLLM {want}, kvbudget {got}")
    if problems:
        return f"{model} tp={tp} kv={kv} block={bs} hma={hma} mamba={mode} len={max_len} in_flight={in_flight} " \
               f"memory={memory:,}: " + "; ".join(problems)
    return None


def test_tables_exist_and_name_their_release() -> None:
    assert TABLES, "tests/data/vllm_oracle holds no table: run tools/gen_vllm_oracle.py"
    for path in TABLES:
        table = _table(path)
        assert path.name == f"vllm-{table['vllm_version']}.json"
        assert "gen_vllm_oracle.py" in table["command"]
        assert len({r[0] for r in table["rows"]}) >= 20  # architectures
        assert any(isinstance(r[10], str) and r[10] == "too_small" and r[11] > 0 for r in table["rows"])


@pytest.mark.parametrize("path", TABLES, ids=[p.stem for p in TABLES])
def test_kvbudget_matches_vllm_planner(path: Path) -> None:
    table = _table(path)
    differences = [d for row in table["rows"] if (d := _row_difference(row, table["layouts"]))]
    shown = "\n".join(differences[:40])
    assert not differences, f"{len(differences)} of {len(table['rows'])} rows differ from vLLM {table['vllm_version']}:\n{shown}"
