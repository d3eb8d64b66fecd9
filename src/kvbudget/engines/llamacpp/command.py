"""Read a pasted llama.cpp command (``llama-server``, ``llama-cli``, ``llama-bench``-style flags)."""

from __future__ import annotations

import os

from ..._record import record, replace
from ...inputs import excerpt, parse_real, parse_whole, split_command
from ...units import InputError
from .settings import LlamaCppSettings

# llama.cpp flags that matter for memory (common/arg.cpp), and what they set.
_VALUE_FLAGS = {
    "-m": "model", "--model": "model", "-hf": "hf", "--hf-repo": "hf", "-hff": "hf_file", "--hf-file": "hf_file",
    "-c": "n_ctx", "--ctx-size": "n_ctx", "-np": "n_parallel", "--parallel": "n_parallel",
    "-ctk": "type_k", "--cache-type-k": "type_k", "-ctv": "type_v", "--cache-type-v": "type_v",
    "-b": "n_batch", "--batch-size": "n_batch", "-ub": "n_ubatch", "--ubatch-size": "n_ubatch",
    "-ngl": "n_gpu_layers", "--gpu-layers": "n_gpu_layers", "--n-gpu-layers": "n_gpu_layers",
    "-fa": "flash_attn", "--flash-attn": "flash_attn", "-fit": "fit", "--fit": "fit",
    "-ts": "tensor_split", "--tensor-split": "tensor_split",
}
_SWITCHES = {"--swa-full": ("swa_full", True), "-kvu": ("kv_unified", True), "--kv-unified": ("kv_unified", True),
             "--no-kv-unified": ("kv_unified", False)}
# Flags that take a value but do not change memory (accepted silently).
_OTHER_VALUE_FLAGS = {
    "--host", "--port", "-t", "--threads", "-tb", "--threads-batch", "--alias", "-a", "--api-key", "-n", "--n-predict",
    "--temp", "--top-k", "--top-p", "--min-p", "--seed", "-s", "--chat-template", "--jinja-template", "-sm",
    "--split-mode", "-mg", "--main-gpu", "--rope-scaling", "--rope-freq-base", "-p",
    "--prompt", "-f", "--file", "--log-file", "--timeout", "--slot-save-path", "-dev", "--device", "--reasoning-format",
    "--mmproj", "-ot", "--override-tensor", "--numa", "--lora", "-md", "--model-draft", "--ctx-size-draft",
    "--grammar", "--repeat-penalty", "--keep", "-ngld", "--gpu-layers-draft", "--cache-reuse", "--chat-template-file",
}


@record
class LlamaCppCommand:
    model: str
    settings: LlamaCppSettings
    warnings: tuple[str, ...] = ()


# What each numeric flag accepts (common/arg.cpp, tools/server): -c 0 = the model's training context,
# -b/-ub 0 = the default (n_ubatch 0 = n_batch), -ngl -1 = every layer (also "all"/"auto"), llama-server's
# -np -1 = auto and 0 an error ("invalid value for n_parallel"); a negative size is never one.
_RANGES = {"n_ctx": (0, (1 << 32) - 1), "n_batch": (0, 1 << 31), "n_ubatch": (0, 1 << 31),
           "n_parallel": (-1, 1 << 16), "n_gpu_layers": (-1, 1 << 20)}


def _count(field: str, flag: str, value: str, settings: LlamaCppSettings) -> LlamaCppSettings:
    if field == "n_gpu_layers" and value.strip().lower() in ("all", "auto"):
        return replace(settings, n_gpu_layers=-1)
    lo, hi = _RANGES[field]
    n = parse_whole(value, flag, lo, hi)
    if field == "n_parallel":
        if n == 0:
            raise InputError(f"{flag} is 0: give at least 1 slot, or -1 for llama-server's auto")
        return replace(settings, n_parallel=None if n == -1 else n)
    if field == "n_batch" and n == 0:
        return replace(settings, n_batch=LlamaCppSettings().n_batch)
    return replace(settings, **{field: n})


def _shares(flag: str, value: str) -> tuple[float, ...]:
    """-ts 10,6 (or 10/6): each GPU's share of the layers: finite, not negative, adding up to more than 0."""
    parts = [x for x in value.replace("/", ",").split(",") if x.strip()]
    if not parts or len(parts) > 256 or len(value) > 4096:
        raise InputError(f"{flag} {excerpt(value)}: give one share per GPU, such as 3,1")
    shares = [parse_real(x, f"{flag} share", 0, 1e12) for x in parts]
    if sum(shares) <= 0:
        raise InputError(f"{flag} {excerpt(value)}: the shares add up to 0; give shares such as 3,1")
    return tuple(shares)


def parse_llamacpp_command(argv: list[str] | str) -> LlamaCppCommand:
    """Read ``llama-server -m model.gguf -c 32768 -np 4 -ctk q8_0 ...`` (or llama-cli)."""
    tokens = split_command(argv) if isinstance(argv, str) else list(argv)
    while tokens and "=" in tokens[0] and not tokens[0].startswith("-"):
        tokens.pop(0)
    if not tokens:
        raise InputError("empty command")
    prog = os.path.basename(tokens[0])
    if prog not in ("llama-server", "llama-cli", "server", "main", "llama-run", "llama-bench"):
        raise InputError(f"not a llama.cpp command: {tokens[0]!r} (expected llama-server or llama-cli)")
    settings = LlamaCppSettings(program="server" if prog in ("llama-server", "server") else "cli")
    model = hf = hf_file = ""
    warnings: list[str] = []
    i = 1
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        flag, eq, inline = tok.partition("=")
        if flag in ("-fa", "--flash-attn") and not eq and (i >= len(tokens) or tokens[i].lower() not in ("on", "off", "auto")):
            settings = replace(settings, flash_attn="on")  # older releases: -fa / --flash-attn was a switch
        elif flag in _VALUE_FLAGS:
            if eq:
                value = inline
            elif i < len(tokens):
                value = tokens[i]
                i += 1
            else:
                raise InputError(f"{flag} needs a value")
            field = _VALUE_FLAGS[flag]
            if field == "model":
                model = value
            elif field == "hf":  # llama-server downloads REPO's QUANT file (Q4_K_M when none is named; arg.cpp)
                hf = value
            elif field == "hf_file":  # -hff FILE: the repo's file to download, over -hf's QUANT (arg.cpp)
                hf_file = value
            elif field in ("type_k", "type_v"):  # matched as written (settings._cache_type)
                settings = replace(settings, **{field: value})
            elif field == "flash_attn":
                settings = replace(settings, **{field: value.lower()})
            elif field == "fit":
                settings = replace(settings, fit=value.lower() in ("on", "1", "true", "yes"))
            elif field == "tensor_split":
                settings = replace(settings, tensor_split=_shares(flag, value))
            else:
                settings = _count(field, flag, value, settings)
        elif flag in _SWITCHES:
            field, on = _SWITCHES[flag]
            settings = replace(settings, **{field: on})
        elif flag in _OTHER_VALUE_FLAGS:
            if not eq:
                i += 1
        elif flag.startswith("-"):
            if flag not in ("--no-mmap", "--mlock", "--cont-batching", "-cb", "--verbose", "-v", "--metrics", "--jinja",
                            "-cnv", "--conversation", "--no-warmup", "-fa", "--embeddings", "--no-webui"):
                warnings.append(f"flag {flag} is not one kvbudget knows: ignored")
        else:
            warnings.append(f"ignored extra word {tok!r}")
    if hf_file and not hf:
        raise InputError(f"--hf-file {excerpt(hf_file, 60)[1:-1]} names a file of a Hugging Face repo: give the repo "
                         "with -hf REPO (or -m PATH.gguf for a file here)")
    if not model and hf_file:
        model = hf_file.replace("\\", "/").rsplit("/", 1)[-1]
        warnings.append(f"-hf {hf} --hf-file {hf_file}: planned as {model} (the file llama-server downloads); give -m "
                        "PATH for the file itself")
    elif not model and hf:
        # read as that model's quantized file: kvbudget plans it from the catalog when it knows the model
        repo, _, quant = hf.partition(":")
        base = repo.rstrip("/").rsplit("/", 1)[-1]
        base = base[:-5] if base.lower().endswith("-gguf") else base
        model = f"{base}-{(quant or 'Q4_K_M').upper()}.gguf"
        warnings.append(f"-hf {hf}: planned as {model} (the file llama-server downloads); give -m PATH for the file itself")
    if not model:
        raise InputError("the command names no model: give -m PATH.gguf (or -hf REPO:QUANT)")
    if settings.n_ubatch == 0:  # -ub 0: the batch size
        settings = replace(settings, n_ubatch=settings.n_batch)
    return LlamaCppCommand(model, settings, tuple(warnings))
