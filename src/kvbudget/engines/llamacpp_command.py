"""Read a pasted llama.cpp command (``llama-server``, ``llama-cli``, ``llama-bench``-style flags)."""

from __future__ import annotations

import os
import shlex

from .._record import record, replace
from ..units import InputError
from .llamacpp import LlamaCppSettings

# llama.cpp flags that matter for memory (common/arg.cpp), and what they set.
_VALUE_FLAGS = {
    "-m": "model", "--model": "model", "-hf": "hf", "--hf-repo": "hf",
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


def _int(text: str, flag: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InputError(f"{flag} {text!r} is not a whole number") from None


def parse_llamacpp_command(argv: list[str] | str) -> LlamaCppCommand:
    """Read ``llama-server -m model.gguf -c 32768 -np 4 -ctk q8_0 ...`` (or llama-cli)."""
    tokens = shlex.split(argv) if isinstance(argv, str) else list(argv)
    while tokens and "=" in tokens[0] and not tokens[0].startswith("-"):
        tokens.pop(0)
    if not tokens:
        raise InputError("empty command")
    prog = os.path.basename(tokens[0])
    if prog not in ("llama-server", "llama-cli", "server", "main", "llama-run", "llama-bench"):
        raise InputError(f"not a llama.cpp command: {tokens[0]!r} (expected llama-server or llama-cli)")
    settings = LlamaCppSettings(program="server" if prog in ("llama-server", "server") else "cli")
    model = ""
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
            elif field == "hf":
                warnings.append(f"{flag} {value}: kvbudget needs the GGUF file itself; give -m PATH")
            elif field in ("type_k", "type_v", "flash_attn"):
                settings = replace(settings, **{field: value.lower()})
            elif field == "fit":
                settings = replace(settings, fit=value.lower() in ("on", "1", "true", "yes"))
            elif field == "tensor_split":  # -ts 10,6 (or 10/6): each GPU's share of the layers
                try:
                    shares = tuple(float(x) for x in value.replace("/", ",").split(",") if x.strip())
                except ValueError:
                    raise InputError(f"{flag} {value!r}: give shares such as 3,1") from None
                settings = replace(settings, tensor_split=shares)
            else:
                settings = replace(settings, **{field: _int(value, flag)})
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
    if not model:
        raise InputError("the command names no model: give -m PATH.gguf")
    return LlamaCppCommand(model, settings, tuple(warnings))
