"""How llama.cpp's KV sizing rules changed from build to build.

A build number ``bN`` is the commit count of llama.cpp's master (the ``build: N (hash)`` line of every
log, the ``bN`` release tags). Each rule names the build that introduced it, read from llama.cpp's
history (``src/llama-context.cpp``, ``src/llama-kv-cache*.cpp``, ``tools/server/server.cpp``,
``common/arg.cpp``, ``ggml/src/ggml-cuda/ggml-cuda.cu``):

- n_ctx padding: none before b2493; 32 from b2493 (#6177); 256 from b2771 (flash attention, #5021);
  256 with flash attention and 32 without from b2871 (#7257, ``llama_kv_cache_get_padding``), where
  ``-fa auto`` (the default from b6325, #15434) counts as on because the cache is made before auto is
  resolved; none from b6868 (#16812); 256 always from b6975 (#17046).
- Streams: one shared cache before b5913; ``kv_unified`` from b5913 (#14363) but really per-sequence
  only once ``LLAMA_SET_ROWS`` became the default at b6071. Per-stream cells were
  ``pad(ceil(n_ctx / n_seq))`` until b6925 (#16736) made ``n_ctx_seq = pad(pad(n_ctx) / n_seq)``.
- llama-server slots: one by default; from b6925 a default (or explicit) ``-np 1`` without ``-kvu``
  became 4 unified slots; from b7433 (#17997) ``-np`` defaults to auto = 4 unified slots and an explicit
  ``-np N`` keeps per-sequence streams.
- Sliding-window cache: none before b5429 (every layer full size); ``min(n_ctx, pad(n_swa x n_seq +
  n_batch))`` from b5429 (#13194); ``n_ubatch`` instead of ``n_batch`` from b5554 (#13833); the ``n_seq``
  factor only for a unified cache from b5913; no padding b6868-b6974; ``pad256(min(...))`` from b6975.
- MLA (DeepSeek-V2/V3/R1, Kimi-K2: the ``deepseek2`` architecture): every head's decompressed K and V
  (``n_head x (qk_nope + qk_rope)`` and ``n_head x v_head_dim``) before b5137 (#12801); the latent
  (``kv_lora_rank + qk_rope``) from b5137, for a GGUF converted for it; a V tensor of width
  ``value_length`` was allocated until b7832 (#19067).
- Hybrid models' attention cache held ``n_ctx`` cells per stream (not ``n_ctx_seq``) from b5702 until
  b8025 (#19559).
- The output buffer: ``n_vocab x n_batch`` floats before b2540, ``n_vocab x n_seq_max`` since.
- K/V tensors were 1-D (``n_embd_gqa x kv_size`` elements) before b5429, which matters for the CUDA
  buffer's quantized-row padding (512 elements, once per tensor, ``ggml_backend_cuda_buffer_type_get_alloc_size``).
- Auto-fit of n_ctx to free memory (``--fit``) is on by default from b7407.
"""

from __future__ import annotations

CURRENT = 1_000_000  # a build beyond every release: today's rules


def pad(n: int, to: int) -> int:
    """``n`` rounded up to a multiple of ``to`` (GGML_PAD)."""
    return -(-n // to) * to


def ctx_padding(build: int, flash_attn: str) -> int:
    """What n_ctx (and per-stream cells) are rounded up to."""
    if build < 2493:
        return 1
    if build < 2771:
        return 32
    if build < 2871:
        return 256
    if build < 6868:
        flash_on = flash_attn == "on" or (flash_attn == "auto" and build >= 6325)
        return 256 if flash_on else 32
    if build < 6975:
        return 1
    return 256


def server_slots(build: int, program: str, n_parallel: int | None, kv_unified: bool | None) -> tuple[int, bool]:
    """(n_seq_max, unified) as the program resolves ``-np`` and ``--kv-unified``."""
    server = program == "server"
    explicit = n_parallel is not None and n_parallel > 0
    parallel = n_parallel if explicit and n_parallel is not None else 1
    unified = bool(kv_unified)
    if server and kv_unified is None and ((build >= 7433 and not explicit) or (6925 <= build < 7433 and parallel == 1)):
        parallel, unified = 4, True
    if build < 6071:  # one shared cache: per-sequence streams did not exist (or were forced off)
        unified = True
    return parallel, unified


def stream_cells(build: int, n_ctx: int, parallel: int, unified: bool, padding: int) -> tuple[int, int]:
    """(n_ctx as the context reports it, cells per stream)."""
    padded = pad(n_ctx, padding)
    if unified:
        return padded, padded
    per = pad(padded // parallel, padding) if build >= 6925 else pad(-(-n_ctx // parallel), padding)
    return per * parallel, per


def ctx_seq(build: int, n_ctx: int, cells: int, parallel: int, unified: bool) -> int:
    """The context one sequence may reach (``n_ctx_seq``): its stream's cells, or a unified cache's whole ``n_ctx``;
    before b5913 (#14363) ``n_ctx / n_seq_max`` of the one shared cache (llama-context.cpp's ``n_ctx_per_seq``, which
    the b4905 and b5452 logs print: 512 of -c 2048 -np 4, 3072 of -c 49152 -np 16)."""
    return n_ctx // max(parallel, 1) if build < 5913 and unified else cells


# The names a build prints its start-up lines under (``__func__`` of the function printing them), as the corpus logs
# (tests/data/llamacpp_logs) show them: (first build, weights loader, context, KV cache). The builds between two
# logged eras print one or the other; kvbudget switches at the first logged build of the newer one (where a PR dates
# it, at that PR's build).
LogNames = tuple[str, str, str]
_LOG_NAMES: tuple[tuple[int, LogNames], ...] = (
    (0, ("llm_load_tensors", "llama_new_context_with_model", "llama_kv_cache_init")),  # b3107, b4445, b4462
    (4801, ("load_tensors", "llama_init_from_model", "llama_kv_cache_init")),  # b4801
    # #12181 (2025-03) moved the context into class llama_context and the cache's init() printing "init:"
    (4905, ("load_tensors", "llama_context", "init")),  # b4905, b4908, b4963, b5261
    (5331, ("load_tensors", "llama_context", "llama_kv_cache_unified")),  # b5331, b5452, b5935
    # #15467 (2025-08-21, before b6325's #15434) dropped the "unified": llama_kv_cache (rocm log of ~b6800, b9525)
    (6325, ("load_tensors", "llama_context", "llama_kv_cache")),
)
# the K and V tensors were 1-D before b5429 (#13194): the cache printed "KV self size = ..." (under the context's name
# until the cache printed its own lines, b5331); from b5429 "size = X MiB ( N cells, L layers), K ...", from b5913
# (#14363, streams) with ", a/b seqs" in a field of two digits each as b5935 prints it (" 1/ 1 seqs"), and later
# "%4s" of "a/b" as the Ollama log of 2025-09 and b9525 print it (" 1/1", " 4/1"; the change is undated: kvbudget
# takes the later form after b5935)
KV_SIZE_LINE_FROM = 5429
KV_SEQS_FROM = 5913
KV_SEQS_WIDE_UNTIL = 5935


def log_names(build: int) -> LogNames:
    """(weights loader, context, KV cache): the names build ``build`` prints its lines under."""
    return next(names for first, names in reversed(_LOG_NAMES) if build >= first)


def ctx_seq_label(build: int) -> str:
    """llama-context.cpp's name for it: ``n_ctx_per_seq`` until b6925 (#16736) made it ``cparams.n_ctx_seq`` (the
    corpus logs of about b6800 still print ``n_ctx_per_seq``)."""
    return "n_ctx_per_seq" if build < 6925 else "n_ctx_seq"


def swa_cells(build: int, cells: int, window: int, parallel: int, unified: bool, n_batch: int, n_ubatch: int,
              padding: int, swa_full: bool) -> int:
    """Cells per stream of the sliding-window cache (``cells``: the full-size cache's)."""
    if build < 5429 or swa_full:
        return cells
    seqs = parallel if unified or build < 5913 else 1
    batch = n_batch if build < 5554 else n_ubatch
    if build >= 6975:
        return pad(min(cells, window * seqs + batch), 256)
    return min(cells, pad(window * seqs + batch, padding))


def mla_latent(build: int) -> bool:
    """The build caches MLA's compressed latent (``kv_lora_rank + qk_rope_head_dim`` per token and layer).

    From b5137 (ggml-org/llama.cpp PR #12801, commit daa42288, "llama : DeepSeek V2/V3 MLA implementation",
    2025-04-15). Before it, ``deepseek2`` cached every head's decompressed K (``n_embd_head_k = qk_nope +
    qk_rope``) and V (``n_embd_head_v``) like any multi-head attention (``src/llama-kv-cache.cpp``:
    ``n_embd_k_gqa = n_embd_head_k x n_head_kv``, ``n_head_kv = n_head``): 128 x 192 and 128 x 128 elements a
    layer for DeepSeek-V3/R1. Its GGUFs lack ``attention.key_length_mla``; later builds still load them and
    cache them that way (``is_mla`` false in ``llama_model::load_tensors``), while a GGUF converted for the
    latent (``attn_k_b`` / ``attn_v_b`` in place of ``attn_kv_b``) does not load in a build before b5137."""
    return build >= 5137


def mla_has_v(build: int) -> bool:
    return build < 7832


def hybrid_cells(build: int, n_ctx: int, cells: int, unified: bool) -> int:
    """Cells per stream of a hybrid model's attention cache."""
    return n_ctx if 5702 <= build < 8025 and not unified else cells


def fit_default(build: int) -> bool:
    return build >= 7407


def flat_tensors(build: int) -> bool:
    """K/V tensors were one row of n_embd_gqa x kv_size elements."""
    return build < 5429


def output_rows(build: int, n_seq_max: int, n_batch: int) -> int:
    return n_batch if build < 2540 else n_seq_max


def cuda_pad_elems(ne0: int, quantized: bool) -> int:
    """Elements ggml-cuda adds to a quantized tensor's allocation (once per tensor), before the
    buffer's 128-byte alignment: the padding of its first row to a multiple of 512."""
    return 512 - ne0 % 512 if quantized and ne0 % 512 else 0


def output_first(build: int) -> bool:
    """From b7467 (#18148, "offload output layer to GPU first") -ngl N puts the output layer and the last N - 1
    repeating layers on the GPU; before, the last N repeating layers, and the output layer only when N > n_layer."""
    return build >= 7467


def split_layers(n_layer: int, n_gpu_layers: int, tensor_split: list[float], output_first: bool = True) -> list[int]:
    """Repeating layers per GPU under ``-ts`` (llama-model.cpp, load_tensors): the splits are made
    cumulative and normalised, and layer ``il`` of the offloaded ones goes to the first device whose
    cumulative share exceeds ``(il - first) / min(ngl, n_layer + 1)``."""
    if not tensor_split or any(x < 0 for x in tensor_split) or sum(tensor_split) <= 0:
        raise ValueError("-ts needs non-negative shares that add up to more than 0")
    total = sum(tensor_split)
    cumulative = []
    running = 0.0
    for share in tensor_split:
        running += share
        cumulative.append(running / total)
    ngl = n_layer + 1 if n_gpu_layers < 0 else n_gpu_layers
    first = max(n_layer + 1 - ngl, 0) if output_first else max(n_layer - ngl, 0)
    active = min(ngl, n_layer + 1)
    counts = [0] * len(tensor_split)
    for il in range(first, n_layer):
        x = (il - first) / active
        device = next((i for i, c in enumerate(cumulative) if c > x), len(cumulative) - 1)
        counts[device] += 1
    return counts
