"""JSON documents of each command (schema documented in the README). Integers are bytes."""

from __future__ import annotations

import json

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
    from ..model.catalog import CatalogEntry


def dumps(doc: Any) -> str:
    return json.dumps(doc, indent=2)


def kv_doc(r: KVReport) -> dict[str, Any]:
    return {
        "model": r.model,
        "params": r.params,
        "kv_dtype": r.kv_dtype,
        "tp": r.tp,
        "context": r.context,
        "batch": r.batch,
        "kv_bytes_per_token": r.bytes_per_token,
        "kv_bytes_per_sequence": r.bytes_per_sequence,
        "kv_bytes_total": r.total_bytes,
        "layers": [
            {
                "kind": row.kind,
                "count": row.layers,
                "detail": row.detail,
                "bytes_per_token": row.bytes_per_token,
                "tokens_held": row.tokens_held,
                "bytes_per_sequence": row.bytes_per_sequence,
            }
            for row in r.rows
        ],
        "table": {"contexts": list(r.contexts), "batches": list(r.batches), "bytes": [list(x) for x in r.table]},
        "max_context": r.max_context,
        "warnings": list(r.warnings),
        "notes": list(r.notes),
    }


def fit_doc(p: MemoryPlan, units: str = "GiB") -> dict[str, Any]:
    return {
        "model": p.model,
        "params": p.params,
        "engine": {"name": "textbook"},
        "gpu": p.gpu,
        "num_gpus": p.num_gpus,
        "tp": p.tp,
        "pp": p.pp,
        "stage": {"index": p.stage, "first_layer": p.stage_layers[0], "num_layers": p.stage_layers[1]},
        "memory": {
            "total_bytes": p.total_bytes,
            "weights_bytes": p.weights_bytes,
            "kv_cache_bytes": max(p.kv_cache_bytes, 0),  # nothing is left when the rest exceeds the GPU
            "activation_bytes": p.activation_bytes,
            "overhead_bytes": p.overhead_bytes,
        },
        "short_bytes": max(-p.kv_cache_bytes, 0),  # by how much weights, activations and overhead exceed the GPU
        "weights_by_role": dict(p.weights_by_role),
        "replicated_by_role": dict(p.replicated_by_role),
        "weights_format": p.weights_format,
        "kept_16bit": list(p.kept_16bit),
        "kv_dtype": p.kv_dtype,
        "context": p.context,
        "batch": p.batch,
        "kv_per_sequence_bytes": p.kv_per_sequence_bytes,
        "kv_needed_bytes": p.kv_needed_bytes,
        "max_batch": p.max_batch,
        # the keys every engine's document carries: tokens of the context the KV space holds, requests of the
        # context at once, and whether the weights load at all
        "kv_cache_tokens": (p.max_batch or 0) * p.context,
        "max_concurrency": round(max(p.kv_cache_bytes, 0) / p.kv_per_sequence_bytes, 4) if p.kv_per_sequence_bytes else None,
        "starts": p.verdict != "weights_exceed",
        "max_context": p.max_context,
        "max_context_is_model_limit": p.max_context_capped,
        "fits": p.fits,
        "verdict": verdict_text(p, units),
        "verdict_code": p.verdict,
        "warnings": list(p.warnings),
        "notes": list(p.notes),
        "assumptions": [{"name": a.name, "value": a.value, "source": a.source, "bytes": a.nbytes} for a in p.assumptions],
    }


def models_doc(entries: list[CatalogEntry], params: dict[str, int]) -> list[dict[str, Any]]:
    return [
        {
            "id": e.id,
            "aliases": list(e.aliases),
            "model_type": e.config.get("model_type"),
            "params": params[e.id],
            "official_params": e.official_params,
            "official_params_source": e.official_params_source,
            "config_source": e.config_source,
        }
        for e in entries
    ]


def gpus_doc(items: list[GPU]) -> list[dict[str, Any]]:
    return [
        {
            "name": g.name,
            "aliases": list(g.aliases),
            "vendor": g.vendor,
            "memory_bytes": g.memory_bytes,
            "memory_source": g.memory_source,
            "marketing_memory": g.marketing_memory,
            "nvidia_smi_mib": g.nvidia_smi_mib,
            "bandwidth_bytes_per_s": g.bandwidth_bytes_per_s,
            "bf16_tflops": g.bf16_tflops,
            "fp8_tflops": g.fp8_tflops,
            "fp8": g.fp8,
            "price_per_hour_usd": g.price_per_hour,
            "price_source": g.price_source,
        }
        for g in items
    ]


def vllm_doc(
    p: VllmPlan, units: str = "GiB", suggestions: list[tuple[str, VllmPlan]] | tuple[tuple[str, VllmPlan], ...] | None = None,
) -> dict[str, Any]:
    """``fit --engine vllm`` and ``explain``: the figures vLLM prints, with their provenance (the verdict's keys
    are added for every engine alike: ``report/fit_report.py``)."""
    doc: dict[str, Any] = {
        "model": p.model,
        "params": p.params,
        "engine": {"name": "vllm", "version_line": p.release, "label": p.version_line},
        "gpu": p.gpu,
        "tp": p.tp,
        "pp": p.pp,
        "dp": p.dp,
        "ep": p.ep,
        "memory": {
            "total_bytes": p.total_bytes,
            "gpu_memory_utilization": p.utilization,
            "requested_bytes": p.requested_bytes,
            "weights_bytes": p.weights_bytes,
            "model_loading_bytes": p.model_loading_bytes,
            "lora_bytes": p.lora_bytes,  # --enable-lora's adapter slots, inside model_loading_bytes
            "non_torch_bytes": p.non_torch_bytes,
            "activation_bytes": p.activation_bytes,
            "cudagraph_bytes": p.cudagraph_bytes,
            # the KV cache vLLM allocates: none when it does not start (available_kv_cache_bytes below is
            # vLLM's own signed figure, as it logs it)
            "kv_cache_bytes": max(p.available_kv_cache_bytes, 0) if p.starts else 0,
            "overhead_bytes": p.non_torch_bytes + p.cudagraph_bytes,
        },
        "available_kv_cache_bytes": p.available_kv_cache_bytes,
        "kv_cache_dtype": p.kv_cache_dtype,
        "block_size": p.block_size,
        "bytes_per_block": p.bytes_per_block,
        "num_gpu_blocks": p.num_gpu_blocks,
        "blocks_per_request": p.blocks_per_request,
        "max_model_len": p.max_model_len,
        "kv_cache_tokens": p.kv_cache_tokens,
        "max_concurrency": round(p.max_concurrency, 4),
        "max_num_seqs": p.max_num_seqs,
        "max_num_batched_tokens": p.max_num_batched_tokens,
        "starts": p.starts,
        "error": p.error,
        "estimated_max_model_len": p.estimated_max_model_len,
        "kv_cache_groups": [{"kind": g.kind, "layers": len(g.layers), "page_bytes": g.page} for g in p.groups],
        "provenance": {name: {"value": f.value, "provenance": f.provenance, "note": f.band} for name, f in p.provenance},
        "log_lines": list(p.log_lines),
        "notes": list(p.notes),
        "warnings": [],
        "weights_format": p.weights_format,
    }
    if suggestions is not None:
        doc["suggestions"] = [
            {"flags": flags, "starts": s.starts, "kv_cache_tokens": s.kv_cache_tokens,
             "max_concurrency": round(s.max_concurrency, 4), "max_model_len": s.max_model_len}
            for flags, s in suggestions
        ]
    return doc


def _rows_doc(rows: tuple[Row, ...]) -> list[dict[str, Any]]:
    return [{"figure": r.figure, "reported": r.reported, "predicted": r.predicted,
             "error_pct": None if r.error_pct is None else round(r.error_pct, 3)} for r in rows]


def check_doc(c: CheckResult, units: str = "GiB") -> dict[str, Any]:
    """``check``: the log's figures beside the prediction, and the prediction itself."""
    return {
        "model": c.model,
        "gpu": c.gpu,
        "version_line": c.plan.release,
        "comparison": _rows_doc(c.rows),
        "kv_arithmetic_from_logged_memory": _rows_doc(c.arithmetic_rows),
        "prediction": {**vllm_doc(c.plan, units), **capacity_doc(c.capacity)},
        "warnings": list(c.warnings),
        "fixes": [{"flags": flags, "starts": s.starts, "kv_cache_tokens": s.kv_cache_tokens,
                   "max_concurrency": round(s.max_concurrency, 4), "max_model_len": s.max_model_len}
                  for flags, s in c.fixes],
    }


def capacity_doc(v: Any) -> dict[str, Any]:
    """The verdict's keys, as ``fit --json`` gives them (report/fit_report.py), for one request."""
    if v is None:
        return {}
    return {"batch": v.load or v.asked, "max_batch": v.held * v.per_instance, "max_context": v.longest, "fits": v.fits}


def llamacpp_doc(p: LlamaCppPlan, warnings: list[str] | None = None) -> dict[str, Any]:
    """``fit --engine llama.cpp`` and ``explain -- llama-server ...``."""
    return {
        "model": p.model,
        "engine": {"name": "llama.cpp"},
        "gpu": p.gpu,
        "memory": {
            "total_bytes": p.total_gpu_bytes,
            "weights_bytes": p.weights_gpu_bytes,
            "weights_cpu_bytes": p.weights_cpu_bytes,
            # what llama.cpp allocates: nothing when the load runs out of memory first (kv.total_bytes: what
            # the context asks for)
            "kv_cache_bytes": p.kv_gpu_bytes if p.fits else 0,
            "compute_bytes": p.compute_bytes,
            "output_bytes": p.output_bytes,
        },
        "fits": p.fits,
        "n_ctx": p.n_ctx,
        "n_ctx_seq": p.n_ctx_seq,
        "n_seq_max": p.n_seq_max,
        "n_stream": p.n_stream,
        "kv_unified": p.unified,
        "kv_cache_tokens": p.cells * p.n_stream if p.fits else 0,
        "max_concurrency": p.n_seq_max if p.fits else 0,
        "kv": {
            "type_k": p.type_k, "type_v": p.type_v, "cells": p.cells, "layers": p.kv_layers,
            "k_bytes": p.k_bytes, "v_bytes": p.v_bytes, "swa_cells": p.swa_cells, "swa_layers": p.swa_layers,
            "swa_k_bytes": p.swa_k_bytes, "swa_v_bytes": p.swa_v_bytes, "recurrent_bytes": p.recurrent_bytes,
            "total_bytes": p.kv_bytes,
        },
        "offloaded_layers": p.offloaded,
        "starts": p.fits,
        "fit": p.fit_note,
        "log_lines": list(p.log_lines),
        "notes": list(p.notes),
        "warnings": list(warnings or []),
        "weights_format": p.weights_format,
    }


def engine_doc(row: EnginePlan, plan: object, lines: list[str], notes: list[str], warnings: list[str]) -> dict[str, Any]:
    """SGLang and TensorRT-LLM: the common keys, then the engine's own figures."""
    from .._record import asdict

    own = asdict(plan)
    own.pop("log_lines", None)
    own.pop("notes", None)
    return {
        "model": own.get("model"),
        "engine": {"name": row.engine},
        "memory": {"weights_bytes": row.weights_bytes, "kv_cache_bytes": row.kv_budget_bytes},
        "kv_cache_tokens": row.kv_tokens,
        "max_concurrency": round(row.max_concurrency, 4),
        "starts": row.starts,
        "budget_rule": row.budget_rule,
        "figures": own,
        "log_lines": lines,
        "notes": notes,
        "warnings": warnings,
        **_pools_doc(row),
    }


def _pools_doc(row: EnginePlan) -> dict[str, Any]:
    """Under DP attention: kv_cache_tokens and max_concurrency are one DP rank's; the ranks and the server's total."""
    if row.pools <= 1:
        return {}
    return {"dp_attention": {"ranks": row.pools, "per_rank": ["kv_cache_tokens", "max_concurrency"],
                             "kv_cache_tokens_in_all": row.kv_tokens * row.pools,
                             "max_concurrency_in_all": round(row.max_concurrency * row.pools, 4)}}


def compare_doc(model: str, context: int, tp: int, pp: int, rows: tuple[EnginePlan, ...],
                omitted: tuple[tuple[str, str], ...], weights: str = "auto") -> dict[str, Any]:
    """``compare``: one object per engine, and the engines left out with the reason."""
    return {"model": model, "context": context, "tp": tp, "pp": pp, "weights_dtype": weights, "engines": [
        {"engine": r.engine, "weights_bytes": r.weights_bytes, "kv_budget_bytes": r.kv_budget_bytes,
         "kv_cache_tokens": r.kv_tokens, "max_concurrency": round(r.max_concurrency, 3), "context": r.context,
         "starts": r.starts, "budget_rule": r.budget_rule, "unit": r.unit, "max_running": r.cap or None,
         "blocks": r.blocks, "block_tokens": r.block_tokens,
         "parts": [{"name": x.name, "bytes": x.bytes, "provenance": x.provenance} for x in r.parts]} for r in rows],
        "not_compared": [{"engine": e, "reason": why} for e, why in omitted]}


def recomputed_doc(rows: list[tuple[str, float, float, bool]] | tuple[tuple[str, float, float, bool], ...]) -> list[dict[str, Any]]:
    """An SGLang or TensorRT-LLM log's figures recomputed from each other."""
    return [{"figure": f, "reported": r, "recomputed": c, "exact": e} for f, r, c, e in rows]


def other_check_doc(c: OtherCheck) -> dict[str, Any]:
    """``check`` of an SGLang or TensorRT-LLM log (docs/json-schema.md)."""
    return {
        "engine": c.engine, "model": c.model, "gpu": c.gpu, "release_line": c.release,
        "settings": {name: value for name, value in c.settings}, "settings_read_from": list(c.read_from),
        "comparison": _rows_doc(c.rows), "recomputed_from_log": recomputed_doc(c.recomputed),
        "prediction": None if c.plan is None else {
            "kv_tokens": c.plan.kv_tokens, "kv_cache_bytes": c.plan.kv_budget_bytes, "weights_bytes": c.plan.weights_bytes,
            "starts": c.plan.starts, "error": c.plan.error, "log_lines": list(c.plan.printed)},
        "notes": list(c.notes), "warnings": list(c.warnings),
    }


def llamacpp_check_doc(log: Any, checks: list[Any], fit: Any = None) -> dict[str, Any]:
    """``check`` of a llama.cpp log: each KV cache it reports beside kvbudget's bytes, and its buffers; its auto-fit
    lines beside kvbudget's free memory of a bare card."""
    doc = _llamacpp_caches_doc(log, checks)
    if fit is not None:
        f, gpu, rows, warnings = fit
        doc["fit"] = {"gpu": gpu, "rows": [{"figure": n, "log": a, "kvbudget": b} for n, a, b in rows],
                      "aborted": f.aborted or None, "warnings": list(warnings)}
    return doc


def _llamacpp_caches_doc(log: Any, checks: list[Any]) -> dict[str, Any]:
    return {"engine": "llama.cpp", "caches": [
        {"cells": c.cache.cells, "layers": c.cache.layers, "type_k": c.cache.type_k, "type_v": c.cache.type_v,
         "swa": c.cache.swa, "reported_k_mib": c.cache.k_mib, "predicted_k_mib": c.predicted_k_mib,
         "reported_v_mib": c.cache.v_mib, "predicted_v_mib": c.predicted_v_mib, "exact": c.exact,
         "n_embd_k_gqa": c.n_embd_k_gqa, "n_embd_v_gqa": c.n_embd_v_gqa,
         "buffers": [{"name": b, "mib": m, "layers": n} for (b, m), n in zip(c.cache.buffers, c.buffer_layers, strict=False)],
         "buffers_exact": c.buffers_exact} for c in checks],
        "buffers_mib": dict(log.buffers_mib)}
