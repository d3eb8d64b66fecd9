"""vLLM's memory accounting, per rank, as vLLM itself does it.

Read from vLLM 0.33.0's Python sources (paths relative to the ``vllm`` package) and written in
our own words; the file and function behind each rule are named where it is applied. The figures this
package produces are the ones vLLM logs at start-up: ``Available KV cache memory``, ``GPU KV cache
size: N tokens``, ``Maximum concurrency for L tokens per request: C x`` (and ``# GPU blocks`` on
the V0 line), or the error it stops with.

One module a part: ``settings`` (release lines, engine arguments), ``kv_layout`` (pages, groups, blocks),
``calibration`` (batch defaults, capture sizes, the non-KV memory model), ``policy`` (the plan and the
engine interface); and, imported only by what needs them, ``command`` (launch commands), ``log`` (start-up
logs), ``check`` (a log against the plan), ``launch`` (the ``vllm serve`` line of a plan), ``fixes``
(flags that would make a plan start, or hold more). This package holds what the old ``engines/vllm.py``
module held, so ``from kvbudget.engines.vllm import plan, VllmSettings`` reads as before.
"""

from __future__ import annotations

from ..lazy import lazy_exports

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from .calibration import (
        ACTIVATION,
        NON_TORCH_TP1_BYTES,
        NON_TORCH_TP_BYTES,
        ActivationModel,
        activation_peak,
        batch_defaults,
        capture_sizes,
        forward_bytes,
        rotary_cache_bytes,
    )
    from .cudagraph import GRAPH_CAPTURE_BYTES, GraphEstimate
    from .kv_layout import _KV_DTYPES as _KV_DTYPES
    from .kv_layout import (
        ChunkedSpec,
        FullSpec,
        KVGroup,
        KVLayout,
        MambaSpec,
        MLASpec,
        ModelFacts,
        SlidingSpec,
        blocks_per_request,
        bytes_per_block,
        kv_cache_dtype,
        kv_layout,
        kv_spec,
        layer_pages,
        model_facts,
        stage_block_bytes,
    )
    from .policy import (
        MIN_CAPABILITY,
        Figure,
        VllmPlan,
        capacity,
        check_capability,
        plan,
        replica,
        request_blocks,
        summary,
    )
    from .settings import RELEASES, Release, VllmSettings, release

# the names the old module gave, loaded when first read (importing the package, e.g. for its ``engine`` module
# in the registry, loads none of its planners: every command's start-up pays only for what it uses)
_EXPORTS = (
    dict.fromkeys(("ACTIVATION", "NON_TORCH_TP1_BYTES", "NON_TORCH_TP_BYTES", "ActivationModel",
        "activation_peak", "batch_defaults", "capture_sizes", "forward_bytes", "rotary_cache_bytes",), ".calibration")
    | dict.fromkeys(("GRAPH_CAPTURE_BYTES", "GraphEstimate",), ".cudagraph")
    | dict.fromkeys(("_KV_DTYPES", "ChunkedSpec", "FullSpec", "KVGroup", "KVLayout", "MambaSpec", "MLASpec", "ModelFacts",
        "SlidingSpec", "blocks_per_request", "bytes_per_block", "kv_cache_dtype", "kv_layout",
        "kv_spec", "layer_pages", "model_facts", "stage_block_bytes",), ".kv_layout")
    | dict.fromkeys(("MIN_CAPABILITY", "Figure", "VllmPlan", "capacity", "check_capability", "plan", "replica",
        "request_blocks", "summary",), ".policy")
    | dict.fromkeys(("RELEASES", "Release", "VllmSettings", "release",), ".settings")
)


__getattr__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "ACTIVATION",
    "GRAPH_CAPTURE_BYTES",
    "MIN_CAPABILITY",
    "NON_TORCH_TP1_BYTES",
    "NON_TORCH_TP_BYTES",
    "RELEASES",
    "ActivationModel",
    "ChunkedSpec",
    "Figure",
    "FullSpec",
    "GraphEstimate",
    "KVGroup",
    "KVLayout",
    "MLASpec",
    "MambaSpec",
    "ModelFacts",
    "Release",
    "SlidingSpec",
    "VllmPlan",
    "VllmSettings",
    "activation_peak",
    "batch_defaults",
    "blocks_per_request",
    "bytes_per_block",
    "capacity",
    "capture_sizes",
    "check_capability",
    "forward_bytes",
    "kv_cache_dtype",
    "kv_layout",
    "kv_spec",
    "layer_pages",
    "model_facts",
    "plan",
    "release",
    "replica",
    "request_blocks",
    "rotary_cache_bytes",
    "stage_block_bytes",
    "summary",
]
