"""The JSON bodies the web API takes (pydantic): the CLI's arguments under the same names, argparse dests.

Counts accept what the CLI accepts (``32768``, ``"32K"``, ``"8,192"``); the library checks every value as it checks
the CLI's, so a bad one is refused with the CLI's own message. Nothing here names a file: a model is a catalog
name (or a Hub id when the server allows the Hub) or a pasted config.json; every other input is content.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt

# 8192, "8K" (8,192), "8k" (8,000), "8,192": as the CLI's flags read them. StrictInt: pydantic's lax int read a JSON
# true as 1 (context true planned a context of 1 token, 200 OK) and 4096.0 as 4096
Count = StrictInt | str
OptionValue = bool | int | float | str | dict[str, Any]  # an engine option's value (dict: a pasted profile)
Units = Literal["GiB", "GB"]

_NAME = 4096  # characters in a name (the library's own bound)


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelInput(Body):
    model: str | None = Field(None, max_length=_NAME, description="a catalog name or alias (`kvbudget models`); a "
                              "Hugging Face id when the server was started with --allow-hub; with config: its name")
    config: dict[str, Any] | None = Field(None, description="a pasted config.json, as a JSON object (instead of a name)")


class GpuInput(ModelInput):
    gpu: str | None = Field(None, max_length=_NAME, description="GPU type (H100, A100-80GB, L40S ...: `kvbudget gpus`)")
    gpu_memory: StrictInt | str | None = Field(None, description="memory of a GPU not in the catalog: bytes, or '48GiB'")


class Layout(GpuInput):
    num_gpus: Count | None = Field(None, description="GPUs in total (tensor parallel unless tp/pp say otherwise)")
    tp: Count | None = Field(None, description="tensor-parallel degree")
    pp: Count | None = Field(None, description="pipeline-parallel degree")


class KvBody(ModelInput):
    context: Count | None = Field(None, description="tokens per sequence (default: the model's max context)")
    batch: Count = 1
    kv_dtype: str = Field("auto", max_length=64)
    tp: Count = 1


class KvCurveBody(ModelInput):
    batch: Count = 1
    kv_dtype: str = Field("auto", max_length=64)
    tp: Count = 1


class FitBody(Layout):
    engine: str = Field("vllm", max_length=64, description="`GET /api/engines` lists them")
    weights_dtype: str = Field("auto", max_length=64)
    kv_dtype: str = Field("auto", max_length=64)
    context: Count | None = None
    batch: Count = 1
    options: dict[str, OptionValue] = Field(default_factory=dict, max_length=64,
                                            description="the engine's own options by dest (`GET /api/engines`)")
    units: Units = "GiB"


class ExplainBody(GpuInput):
    command: str = Field(..., max_length=20_000, description="a pasted launch command: vllm serve ..., python -m "
                         "sglang.launch_server ..., trtllm-serve ..., llama-server ...")
    num_gpus: Count | None = Field(None, description="GPUs on the machine (checked against the command's sizes)")
    options: dict[str, OptionValue] = Field(default_factory=dict, max_length=64,
                                            description="explain's own options (a vLLM release, a llama.cpp build ...)")
    units: Units = "GiB"


class CompareBody(Layout):
    context: Count = 8192
    kv_dtype: str = Field("auto", max_length=64)


class LeversBody(Layout):
    context: Count
    engine: str = Field("vllm", max_length=64)
    weights_dtype: str = Field("auto", max_length=64)
    kv_dtype: str = Field("auto", max_length=64)
    options: dict[str, OptionValue] = Field(default_factory=dict, max_length=64)


class PlanBody(ModelInput):
    concurrency: Count
    context: Count
    engine: str = Field("vllm", max_length=64)
    gpus: str | None = Field(None, max_length=_NAME, description="comma-separated GPU types (default: every catalog GPU)")
    max_gpus: Count = 64
    gpus_per_node: Count | None = None
    weights_dtype: str | None = Field(None, max_length=_NAME, description="weight formats to try, comma-separated")
    kv_dtype: str | None = Field(None, max_length=_NAME, description="KV cache dtypes to try, comma-separated")
    options: dict[str, OptionValue] = Field(default_factory=dict, max_length=64)
    units: Units = "GiB"


class SimulateBody(Layout):
    synthetic: str = Field(..., max_length=2000, description="a synthetic workload, e.g. requests=500,rate=4,"
                           "prompt=sharegpt (no files; the server bounds the request count)")
    engine: str = Field("vllm", max_length=64)
    weights_dtype: str = Field("auto", max_length=64)
    kv_dtype: str = Field("auto", max_length=64)
    context: Count | None = None
    prefix_caching: bool = True
    chunked_prefill: bool = True
    policies: str = Field("paged,contiguous-max,contiguous-exact", max_length=200)
    options: dict[str, OptionValue] = Field(default_factory=dict, max_length=64)
    steps: bool = Field(False, description="every step's running, waiting and KV usage (as --steps)")


class DiagnoseBody(Layout):
    """A running server's /metrics page pasted as text (the server fetches no URL and reads no file); ``model`` and
    ``gpu``: hold it against kvbudget's plan of that deployment (as ``--expect MODEL --gpu G``)."""

    metrics: str = Field(..., max_length=1 << 20, description="the engine's /metrics page (Prometheus text)")
    dcgm: str | None = Field(None, max_length=1 << 20, description="the DCGM exporter's /metrics page")
    nvidia_smi: str | None = Field(None, max_length=1 << 20, description="nvidia-smi --query-gpu=... --format=csv output")
    engine: str | None = Field(None, max_length=64, description="whose rules for the plan (default: the page's)")
    weights_dtype: str = Field("auto", max_length=64)
    kv_dtype: str = Field("auto", max_length=64)
    context: Count | None = None
    options: dict[str, OptionValue] = Field(default_factory=dict, max_length=64)


class ErrorDoc(BaseModel):
    error: str = Field(..., description="the one line the CLI prints after 'kvbudget: error:'")
