"""KV connectors: ``--kv-transfer-config`` and ``--kv-offloading-size`` (vLLM's native CPU offload, LMCache).

What vLLM does (paths relative to the ``vllm`` package; 0.33.0 unless a release is named):

* When the connector is built. 0.9-0.11: v1/worker/gpu_worker.py ``init_worker_distributed_environment`` ->
  ``ensure_kv_transfer_initialized(vllm_config)``, after the worker's start-up snapshot and before the model loads.
  From 0.12: ``initialize_from_config(kv_cache_config)`` -> ``ensure_kv_transfer_initialized(vllm_config,
  kv_cache_config)``, after the KV cache has been sized (0.12.0-0.33.0 gpu_worker.py): nothing a connector allocates
  there changes a figure vLLM prints; it comes out of the headroom that ``--gpu-memory-utilization`` leaves.
* What 0.9.1-0.11 count of a buffer the connector allocates at start-up: nothing (utils memory_profiling of 0.10.1:
  weights from the loading profiler, the torch peak over the profiling run's start, non-torch memory beside torch's
  reserved bytes), so a torch buffer built there is outside every figure too. The releases that read the device's
  free memory (0.7.0-0.9.0) count it as non-torch memory.
* LMCache (lmcache/integration/vllm/vllm_adapter.py ``init_lmcache_engine`` and lmcache/v1/gpu_connector.py
  ``VLLMPagedMemGPUConnectorV2`` of lmcache 0.3.3): one GPU staging buffer ``[2 (1 with MLA), layers of the rank,
  chunk_size, KV heads of the rank x head_dim]`` in the KV cache dtype, chunk_size 256 by default (lmcache/v1/config.py;
  LMCACHE_CHUNK_SIZE or its config file change it); its local CPU cache (local_cpu, max_local_cpu_size 5 GB) is host
  memory.
* vLLM's native offload (``--kv-offloading-size GB``, 0.12 on; config/vllm.py ``_post_init_kv_transfer_config``):
  ``OffloadingConnector`` (SimpleCPUOffloadConnector with VLLM_USE_SIMPLE_KV_OFFLOAD) with ``cpu_bytes_to_use = GB x
  2^30`` of pinned host memory (v1/kv_offload/cpu/gpu_worker.py: CPU tensors ``torch.zeros(..., pin_memory)`` and
  pinned copy descriptors); on the GPU it only registers the KV cache already allocated. ``--kv-offloading-backend
  lmcache`` selects LMCacheConnectorV1 (0.12-0.26) or LMCacheMPConnector (0.27 on, whose store is a separate process).
* The hybrid KV cache manager. 0.10.2-0.21 (config/vllm.py ``__post_init__``): any connector turns it off ("Turning
  off hybrid kv cache manager because `--kv-transfer-config` is set"); from 0.22 only a connector that is not a
  ``SupportsHMA`` subclass does (``KVConnectorFactory.supports_hma_config``): in 0.33.0 OffloadingConnector,
  SimpleCPUOffloadConnector, MooncakeConnector, MooncakeStoreConnector, MoRIIOConnector, HiSparseConnector and
  ExampleHiddenStatesConnector support it (OffloadingConnector from 0.22.0). Without it a sliding-window model caches
  every layer in full.
"""

from __future__ import annotations

from ...units import GiB, InputError, MiB
from .settings import VllmSettings, release_minor

LMCACHE = ("LMCacheConnectorV1", "LMCacheMPConnector")
OFFLOADING = ("OffloadingConnector", "SimpleCPUOffloadConnector")
HMA = frozenset({"OffloadingConnector", "SimpleCPUOffloadConnector", "MooncakeConnector", "MooncakeStoreConnector",
                 "MoRIIOConnector", "HiSparseConnector", "ExampleHiddenStatesConnector"})
LMCACHE_CHUNK = 256  # lmcache/v1/config.py chunk_size default


def read_transfer(value: object, label: str) -> str | None:
    """The connector a ``--kv-transfer-config`` JSON object names (None: no ``kv_connector``)."""
    if not isinstance(value, dict):
        raise InputError(f"{label}: give a JSON object such as '{{\"kv_connector\":\"LMCacheConnectorV1\","
                         "\"kv_role\":\"kv_both\"}'")
    name = value.get("kv_connector")
    if name is None:
        return None
    if not isinstance(name, str) or not name.strip() or len(name) > 80:
        raise InputError(f"{label}: kv_connector must name a connector, e.g. LMCacheConnectorV1 or NixlConnector")
    return name.strip()


def offloading_connector(backend: str, version: str) -> str:
    """The connector ``--kv-offloading-size`` selects for ``--kv-offloading-backend`` in the release."""
    b = backend.strip().lower()
    if b == "native":
        return "OffloadingConnector"
    if b == "lmcache":
        return "LMCacheMPConnector" if release_minor(version) >= 27 else "LMCacheConnectorV1"
    raise InputError(f"--kv-offloading-backend {backend[:40]!r}: vLLM takes native or lmcache")


def keeps_hybrid_manager(connector: str | None, version: str) -> bool:
    """Whether the hybrid KV cache manager stays on with ``connector`` (None: no connector)."""
    if connector is None:
        return True
    return release_minor(version) >= 22 and connector in HMA


def lmcache_buffer(layers: int, token_bytes: int) -> int:
    """LMCache's GPU staging buffer (VLLMPagedMemGPUConnectorV2) for ``layers`` layers of a rank whose one layer holds
    ``token_bytes`` of K and V (an MLA latent: one "head") per token, at the default chunk of 256 tokens."""
    return layers * LMCACHE_CHUNK * token_bytes


def counted_before_sizing(settings: VllmSettings) -> bool:
    """Whether the release builds the connector before it sizes the KV cache (0.9-0.11)."""
    return release_minor(settings.version) <= 11


def effect(settings: VllmSettings, buffer: int, counted: bool, hybrid: bool) -> tuple[int, str, str | None]:
    """What the connector does to the figures: the bytes the plan charges as non-torch memory, the note, and what is
    not modelled (None: nothing). ``buffer``: LMCache's staging buffer on the rank; ``counted``: the release reads
    the device's free memory (so a buffer built before the measurement is counted); ``hybrid``: the model has more than
    one kind of layer (the hybrid KV cache manager matters to it)."""
    c = settings.kv_connector
    assert c is not None
    early = counted_before_sizing(settings)
    parts: list[str] = []
    charged = 0
    unknown: str | None = None
    if c in OFFLOADING:
        parts.append(f"{c}: {settings.kv_offload_bytes / GiB:.2f} GiB of pinned host memory for offloaded KV blocks; on "
                     "the GPU it registers the KV cache already allocated, so the pool vLLM prints is unchanged")
    elif c in LMCACHE:
        where = "built before the model loads" if early else "built after the KV cache is sized"
        parts.append(f"{c}: LMCache's GPU staging buffer, 2 x layers x 256-token chunk x KV heads x head size, "
                     f"{buffer / MiB:.0f} MiB, {where}")
        if early and counted:
            charged = buffer
            parts.append("this release reads the device's free memory, so it is counted with the non-torch memory")
        else:
            parts.append("no figure vLLM prints counts it: it comes out of what --gpu-memory-utilization leaves; its "
                         "local CPU cache is host memory")
    else:
        parts.append(f"{c}: " + ("built before the model loads" if early else
                                 "built after the KV cache is sized, so the pool vLLM prints is unchanged"))
        if early:
            unknown = f"the {c} KV connector's buffers"
    if hybrid and not keeps_hybrid_manager(c, settings.version):
        parts.append("the connector turns vLLM's hybrid KV cache manager off: every layer is cached as the fullest "
                     "kind needs (a sliding window in full)")
    return charged, "KV connector " + "; ".join(parts), unknown
