"""Read a pasted llama.cpp command (``llama-server``, ``llama-cli``, ``llama-bench``-style flags)."""

from __future__ import annotations

import difflib
import functools
import json
import os

from ..._record import record, replace
from ...inputs import excerpt, parse_real, parse_whole, split_command
from ...units import InputError
from . import calibration as eras
from . import placement
from .settings import LlamaCppSettings

# llama.cpp flags that matter for memory (common/arg.cpp), and what they set.
_VALUE_FLAGS = {
    "-m": "model", "--model": "model", "-hf": "hf", "--hf-repo": "hf", "-hff": "hf_file", "--hf-file": "hf_file",
    "-c": "n_ctx", "--ctx-size": "n_ctx", "-np": "n_parallel", "--parallel": "n_parallel",
    "-ctk": "type_k", "--cache-type-k": "type_k", "-ctv": "type_v", "--cache-type-v": "type_v",
    "-b": "n_batch", "--batch-size": "n_batch", "-ub": "n_ubatch", "--ubatch-size": "n_ubatch",
    "-ngl": "n_gpu_layers", "--gpu-layers": "n_gpu_layers", "--n-gpu-layers": "n_gpu_layers",
    "-fa": "flash_attn", "--flash-attn": "flash_attn", "-fit": "fit", "--fit": "fit",
    "-ts": "tensor_split", "--tensor-split": "tensor_split", "-hfr": "hf",
    "-fitt": "fit_target_mib", "--fit-target": "fit_target_mib", "-fitc": "fit_ctx", "--fit-ctx": "fit_ctx",
    "-sm": "split_mode", "--split-mode": "split_mode", "-ot": "overrides", "--override-tensor": "overrides",
    "-ncmoe": "n_cpu_moe", "--n-cpu-moe": "n_cpu_moe",
}
_SWITCHES = {"--swa-full": ("swa_full", True), "-kvu": ("kv_unified", True), "--kv-unified": ("kv_unified", True),
             "-no-kvu": ("kv_unified", False), "--no-kv-unified": ("kv_unified", False),
             "--no-mmap": ("mmap", False), "--mmap": ("mmap", True)}
_CPU_MOE = ("-cmoe", "--cpu-moe")  # every layer's expert tensors to the CPU (placement.cpu_moe)
# Switches that do not change GPU memory (accepted silently).
_QUIET_SWITCHES = {"--mlock", "--cont-batching", "-cb", "--verbose", "-v", "--metrics", "--jinja", "-cnv",
                   "--conversation", "--no-warmup", "--embeddings", "--no-webui"}
# Flags that take a value but do not change memory (accepted silently).
_OTHER_VALUE_FLAGS = {
    "--host", "--port", "-t", "--threads", "-tb", "--threads-batch", "--alias", "-a", "--api-key", "-n", "--n-predict",
    "--temp", "--top-k", "--top-p", "--min-p", "--seed", "-s", "--chat-template", "--jinja-template", "-mg", "--main-gpu", "--rope-scaling", "--rope-freq-base", "-p",
    "--prompt", "-f", "--file", "--log-file", "--timeout", "--slot-save-path", "-dev", "--device", "--reasoning-format",
    "--mmproj", "--numa", "--lora", "-md", "--model-draft", "--ctx-size-draft",
    "--grammar", "--repeat-penalty", "--keep", "-ngld", "--gpu-layers-draft", "--cache-reuse", "--chat-template-file",
}


# -sm's values (common/arg.cpp; newer builds add an experimental 'tensor'): any other stops llama-server
_SPLIT_MODES = ("none", "layer", "row", "tensor")

_FLAGS_FILE = os.path.join(os.path.dirname(__file__), "flags.json")


@functools.cache
def _server_flags() -> tuple[dict[str, int], dict[str, str], dict[str, int], int]:
    """llama-server's own flags (``flags.json``, read from common/arg.cpp): those of build ``listed`` and the words
    each takes, the flags that build keeps only to refuse ('the argument has been removed') and what to use
    instead, and the flags of a build of 2025-08 (before b6325), some removed since."""
    with open(_FLAGS_FILE, encoding="utf-8") as f:
        doc = json.load(f)
    return doc["server"], doc["server_removed"], doc["server_2025_08"], doc["build"]


def _server_flag(flag: str, build: int, warnings: list[str]) -> int | None:
    """How many words follow ``flag`` on llama-server build ``build`` (None: a flag neither list has). A build
    given (not today's default) is held to its parser: from b6325 to the listed build a flag neither list has
    stops llama-server ('error: invalid argument: FLAG'), and from the listed build on so does a flag it has
    dropped or keeps only to refuse; for an unknown build (or one past the list, whose flags may be newer) these
    are warnings."""
    new, removed, old, listed = _server_flags()
    given = build != eras.CURRENT
    again = " (or give the build it runs, --llamacpp-build N)" if given else ""
    if flag in removed:
        said = f"{flag}: llama-server b{listed} stops on it ('the argument has been removed'): {removed[flag]}"
        if given and build >= listed:
            raise InputError(f"{said} instead{again}")
        warnings.append(f"{said}; ignored here")
    elif flag not in new and flag in old:
        said = (f"{flag} is a flag of llama.cpp builds of 2025-08 that b{listed} no longer has (llama-server stops with "
                f"'invalid argument: {flag}')")
        if given and build >= listed:
            raise InputError(f"{said}: drop it, or give the build it runs (--llamacpp-build N)")
        if build >= listed:
            warnings.append(f"{said}; ignored here (give --llamacpp-build N of the build it runs)")
    elif flag not in new:
        if given and FA_VALUES_FROM <= build <= listed:
            near = difflib.get_close_matches(flag, list(new), n=1, cutoff=0.75) if len(flag) > 4 else []
            hint = f"did you mean {near[0]}? " if near else ""
            raise InputError(f"{excerpt(flag, 60)[1:-1]} is not a flag of llama-server b{build} (it stops with 'error: "
                             f"invalid argument: {excerpt(flag, 60)[1:-1]}'): {hint}drop it, or give the build it runs "
                             "(--llamacpp-build N)")
        return None
    if flag in old and (build < listed or flag not in new):
        return old[flag]
    return new[flag]


@record
class LlamaCppCommand:
    model: str
    settings: LlamaCppSettings
    warnings: tuple[str, ...] = ()


# What each numeric flag accepts (common/arg.cpp, tools/server): -c 0 = the model's training context,
# -b/-ub 0 = the default (n_ubatch 0 = n_batch), -ngl -1 = every layer (also "all"/"auto"), llama-server's
# -np -1 = auto and 0 an error ("invalid value for n_parallel"); a negative size is never one.
_RANGES = {"n_ctx": (0, (1 << 32) - 1), "n_batch": (0, 1 << 31), "n_ubatch": (0, 1 << 31),
           "n_parallel": (-1, 1 << 16), "n_gpu_layers": (-1, 1 << 20), "fit_ctx": (0, (1 << 32) - 1)}


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


# src/llama.cpp llama_max_devices(): common/arg.cpp refuses a -ts or -fitt list of this many values or more ("got N
# input configs, but system only has 16 devices")
MAX_DEVICES = 16


def _per_device(flag: str, value: str) -> list[str]:
    """A -ts or -fitt list split as common/arg.cpp splits it (at each run of ',' and '/'), at most ``MAX_DEVICES`` - 1
    values."""
    parts = [x for x in value[:4096].replace("/", ",").split(",") if x.strip()]
    if len(parts) >= MAX_DEVICES or len(value) > 4096:
        raise InputError(f"{flag} {excerpt(value, 40)[1:-1]}: {len(parts):,} values, and llama.cpp takes fewer than "
                         f"{MAX_DEVICES} ('got {len(parts)} input configs, but system only has {MAX_DEVICES} "
                         f"devices'); give one {'target' if 'fit' in flag else 'share'} per GPU")
    return parts


def _shares(flag: str, value: str) -> tuple[float, ...]:
    """-ts 10,6 (or 10/6): each GPU's share of the layers: finite, not negative, adding up to more than 0."""
    parts = _per_device(flag, value)
    if not parts:
        raise InputError(f"{flag} {excerpt(value)}: give one share per GPU, such as 3,1")
    shares = [parse_real(x, f"{flag} share", 0, 1e12) for x in parts]
    if sum(shares) <= 0:
        raise InputError(f"{flag} {excerpt(value)}: the shares add up to 0; give shares such as 3,1")
    return tuple(shares)


def on_devices(s: LlamaCppSettings, seen: int, warnings: list[str]) -> LlamaCppSettings:
    """The settings of a command run where llama.cpp sees ``seen`` GPUs (--num-gpus, CUDA_VISIBLE_DEVICES): it splits
    the layers over all of them (-sm layer and row), -ts's shares read for those devices only, 0 for any it leaves
    out (src/llama-model.cpp: the split copies n_devices() shares of the list common/arg.cpp padded with zeros)."""
    if s.split_mode == "none" or seen < 1:
        return s
    if not s.tensor_split:
        return replace(s, devices=seen)
    shares = s.tensor_split[:seen] + (0.0,) * (seen - len(s.tensor_split))
    if len(s.tensor_split) > seen:
        if sum(shares) <= 0:
            raise InputError(f"-ts {','.join(f'{x:g}' for x in s.tensor_split)}: the shares of the {seen} GPU"
                             f"{'s' if seen > 1 else ''} llama.cpp sees add up to 0, so it splits by free memory "
                             "instead; give one share per GPU it sees")
        warnings.append(f"-ts lists {len(s.tensor_split)} shares for the {seen} GPU{'s' if seen > 1 else ''} llama.cpp "
                        f"sees: it splits by the first {seen} ({','.join(f'{x:g}' for x in shares)})")
    return replace(s, tensor_split=shares, devices=seen)


# -fa / --flash-attn: a bare switch before b6325; from b6325 (#15434) it takes a value, matched as written by
# common/arg.cpp's common_arg_utils::is_truthy / is_falsey / is_autoy (llama.cpp as vendored by llama-cpp-python
# 0.3.36): on enabled true 1 | off disabled false 0 | auto -1 ('ON' stops llama-server: "unknown value for
# --flash-attn"). --fit takes the first two sets.
FA_VALUES_FROM = 6325
_TRUTHY = ("on", "enabled", "true", "1")
_FALSEY = ("off", "disabled", "false", "0")
_AUTOY = ("auto", "-1")
# Environment variables llama.cpp reads for these flags (common/arg.cpp set_env); a flag on the command line wins.
_ENV = {"LLAMA_ARG_MODEL": "-m", "LLAMA_ARG_HF_REPO": "-hf", "LLAMA_ARG_HF_FILE": "-hff", "LLAMA_ARG_CTX_SIZE": "-c",
        "LLAMA_ARG_N_PARALLEL": "-np", "LLAMA_ARG_CACHE_TYPE_K": "-ctk", "LLAMA_ARG_CACHE_TYPE_V": "-ctv",
        "LLAMA_ARG_BATCH": "-b", "LLAMA_ARG_UBATCH": "-ub", "LLAMA_ARG_N_GPU_LAYERS": "-ngl",
        "LLAMA_ARG_TENSOR_SPLIT": "-ts", "LLAMA_ARG_FIT": "-fit", "LLAMA_ARG_FLASH_ATTN": "-fa",
        "LLAMA_ARG_OVERRIDE_TENSOR": "-ot", "LLAMA_ARG_N_CPU_MOE": "-ncmoe"}
# Switches read from the environment with is_truthy / is_falsey; LLAMA_ARG_NO_... of a negatable switch sets it off.
_ENV_SWITCHES = {"LLAMA_ARG_SWA_FULL": ("--swa-full", None), "LLAMA_ARG_KV_UNIFIED": ("-kvu", "--no-kv-unified"),
                 "LLAMA_ARG_CPU_MOE": ("--cpu-moe", None), "LLAMA_ARG_MMAP": ("--mmap", "--no-mmap")}


def _choice(flag: str, value: str, auto: bool = True) -> str:
    """on / off / auto from a -fa or --fit value, as common/arg.cpp reads it (case and all)."""
    if value in _TRUTHY:
        return "on"
    if value in _FALSEY:
        return "off"
    if auto and value in _AUTOY:
        return "auto"
    said = "on, off or auto" if auto else "on or off"
    hint = f" (values are matched as written: {value.lower()})" if value.lower() in (*_TRUTHY, *_FALSEY, *_AUTOY) else ""
    raise InputError(f"{flag} {excerpt(value, 40)} is not a value llama.cpp takes{hint}: write {flag} {said}")


class _Read:
    """What the words read so far set (the model, the -hf repo and file, the settings, warnings)."""

    def __init__(self, settings: LlamaCppSettings) -> None:
        self.model = self.hf = self.hf_file = ""
        self.settings = settings
        self.warnings: list[str] = []

    def words(self, tokens: list[str]) -> None:
        build = self.settings.build
        server = self.settings.program == "server"
        unknown = False  # the last flag is one no list has: a bare word after it may be its value
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            i += 1
            flag, eq, inline = tok.partition("=") if tok.startswith("-") else (tok, "", "")
            if flag.startswith("--"):  # common/arg.cpp turns '_' into '-' in a '--' flag (--ctx_size is --ctx-size)
                flag = "--" + flag[2:].replace("_", "-")
            takes = _server_flag(flag, build, self.warnings) if server and flag.startswith("-") else None
            known = flag in _VALUE_FLAGS or flag in _SWITCHES or flag in _OTHER_VALUE_FLAGS or takes is not None
            after_unknown, unknown = unknown, flag.startswith("-") and not known
            if eq and known:  # common/arg.cpp looks each word up whole: "error: invalid argument: -c=4096"
                raise InputError(f"{excerpt(tok, 60)[1:-1]}: llama.cpp takes no FLAG=VALUE word (it stops with "
                                 f"'invalid argument'); write {flag} {excerpt(inline, 40)[1:-1]}")
            if flag in ("-fa", "--flash-attn") and build < FA_VALUES_FROM:
                nxt = tokens[i] if i < len(tokens) else ""
                if nxt.lower() in (*_TRUTHY, *_FALSEY, *_AUTOY):
                    raise InputError(f"{flag} {excerpt(nxt, 40)[1:-1]}: llama.cpp build {build} takes {flag} as a bare "
                                     f"switch (values on/off/auto from b{FA_VALUES_FROM}), so '{nxt}' stops it "
                                     f"('invalid argument'); write {flag} alone, or give the build it runs "
                                     "(--llamacpp-build N)")
                self.settings = replace(self.settings, flash_attn="on")
            elif flag in _VALUE_FLAGS:
                if flag in ("-sm", "--split-mode") and i < len(tokens) and tokens[i] not in _SPLIT_MODES:
                    raise InputError(f"{flag} {excerpt(tokens[i], 40)[1:-1]}: llama-server stops on it (common/arg.cpp: "
                                     "'invalid value'); give none, layer or row")
                if i >= len(tokens) and _VALUE_FLAGS[flag] == "flash_attn":
                    raise InputError(f"{flag} needs a value from b{FA_VALUES_FROM} (llama.cpp: 'expected value for "
                                     f"argument'); write {flag} on (or give --llamacpp-build N of an older build, where "
                                     f"{flag} was a bare switch)")
                if i >= len(tokens):
                    raise InputError(f"{flag} needs a value")
                value = tokens[i]
                i += 1
                self.value(flag, value)
            elif flag in _CPU_MOE:
                self.settings = replace(self.settings, overrides=(*self.settings.overrides, placement.cpu_moe()))
            elif flag in _SWITCHES:
                field, on = _SWITCHES[flag]
                self.settings = replace(self.settings, **{field: on})
            elif flag in _OTHER_VALUE_FLAGS:
                i += 1 if takes is None else takes
            elif flag.startswith("-"):
                i += takes or 0  # a llama-server flag kvbudget does not model: its value(s) with it
                if flag not in _QUIET_SWITCHES:
                    self.warnings.append(f"flag {flag} is not one kvbudget knows: ignored")
            elif server and build != eras.CURRENT and build >= FA_VALUES_FROM and not after_unknown:
                raise InputError(f"{excerpt(tok, 60)[1:-1]}: llama-server b{build} takes no bare word (it stops with "
                                 f"'error: invalid argument: {excerpt(tok, 60)[1:-1]}'); give the model as -m PATH")
            else:
                self.warnings.append(f"ignored extra word {tok!r}")

    def value(self, flag: str, value: str) -> None:
        field = _VALUE_FLAGS[flag]
        s = self.settings
        if field == "model":
            self.model = value
        elif field == "hf":  # llama-server downloads REPO's QUANT file (Q4_K_M when none is named; arg.cpp)
            self.hf = value
        elif field == "hf_file":  # -hff FILE: the repo's file to download, over -hf's QUANT (arg.cpp)
            self.hf_file = value
        elif field in ("type_k", "type_v"):  # matched as written (settings._cache_type)
            self.settings = replace(s, **{field: value})
        elif field == "flash_attn":  # from b6325 a value is required: a bare -fa takes the next word as its value
            if value.startswith("-") and value != "-1":
                raise InputError(f"{flag} is followed by {excerpt(value, 40)[1:-1]}: from b{FA_VALUES_FROM} llama.cpp's "
                                 f"{flag} takes a value ('unknown value for --flash-attn'); write {flag} on (or give "
                                 f"--llamacpp-build N of an older build, where {flag} was a bare switch)")
            self.settings = replace(s, flash_attn=_choice(flag, value))
        elif field == "fit":
            self.settings = replace(s, fit=_choice(flag, value, auto=False) == "on")
        elif field == "tensor_split":
            self.settings = replace(s, tensor_split=_shares(flag, value))
        elif field == "split_mode":  # checked against _SPLIT_MODES as it is read
            self.settings = replace(s, split_mode=value)
        elif field == "overrides":  # -ot PATTERN=BUFFER[,...]: the user places tensors, so auto-fit moves none
            self.settings = replace(s, overrides=(*s.overrides, *placement.parse_overrides(value, flag)))
        elif field == "n_cpu_moe":  # -ncmoe N: the first N layers' expert tensors to the CPU (N < 0: 'invalid value')
            n = parse_whole(value, flag, 0, (1 << 31) - 1)
            self.settings = replace(s, overrides=(*s.overrides, *placement.n_cpu_moe(n, flag, s.build)))
        elif field == "fit_target_mib":  # -fitt M[,M...]: MiB left free per device (common/arg.cpp), the first planned
            values = [parse_whole(x, flag, 0, 1 << 30) for x in _per_device(flag, value) or [value]]
            self.settings = replace(s, fit_target_mib=values[0])
            if len(set(values)) > 1:
                self.warnings.append(f"{flag} {excerpt(value, 40)[1:-1]}: one target per device; kvbudget plans "
                                     f"{values[0]} MiB on every device")
        elif field == "n_gpu_layers":  # given at all (but auto): auto-fit keeps the user's layers (common/fit.cpp)
            self.settings = replace(_count(field, flag, value, s), ngl_given=value.strip().lower() not in ("auto", "-1"))
        else:
            self.settings = _count(field, flag, value, s)

    def environment(self, assignments: list[str]) -> None:
        """``LLAMA_ARG_CTX_SIZE=32768 llama-server ...``: read as the flag it stands for, before the command's own."""
        for word in assignments:
            name, _, value = word.partition("=")
            try:
                if name in _ENV:
                    flag = _ENV[name]
                    if flag == "-fa" and self.settings.build < FA_VALUES_FROM:
                        if value in _TRUTHY:  # a switch: set by a true value
                            self.settings = replace(self.settings, flash_attn="on")
                    elif flag == "-fa":
                        self.settings = replace(self.settings, flash_attn=_choice(flag, value))
                    else:
                        self.value(flag, value)
                elif name in _ENV_SWITCHES or (name.startswith("LLAMA_ARG_NO_") and
                                                "LLAMA_ARG_" + name[13:] in _ENV_SWITCHES):
                    on, off = _ENV_SWITCHES.get(name, ("", ""))
                    if not on:  # LLAMA_ARG_NO_KV_UNIFIED: set at all, the switch is off
                        on, off = _ENV_SWITCHES["LLAMA_ARG_" + name[13:]]
                        value = "0"
                    state = _choice(name, value, auto=False) == "on"
                    switch = on if state else off
                    if switch in _CPU_MOE:
                        self.settings = replace(self.settings, overrides=(*self.settings.overrides, placement.cpu_moe()))
                    elif switch:
                        field, set_to = _SWITCHES[switch]
                        self.settings = replace(self.settings, **{field: set_to})
            except InputError as exc:
                raise InputError(f"{excerpt(word, 60)[1:-1]} (llama.cpp reads it as {_ENV.get(name, name)}): {exc}") from None


def parse_llamacpp_command(argv: list[str] | str, build: int | None = None) -> LlamaCppCommand:
    """Read ``llama-server -m model.gguf -c 32768 -np 4 -ctk q8_0 ...`` (or llama-cli) as llama.cpp build ``build``
    (default: today's) parses it, with ``LLAMA_ARG_...=VALUE`` assignments before it."""
    from ..compared import command_env, llama_image

    tokens = split_command(argv) if isinstance(argv, str) else list(argv)
    assignments: list[str] = []
    image = next((i for i, t in enumerate(tokens) if llama_image(t)), None)
    if image is not None and not any(t.startswith("--entrypoint") for t in tokens[:image]):
        # docker run [options] ghcr.io/ggml-org/llama.cpp:server-cuda -m ...: the image's program, then its arguments
        tokens = [*tokens[:image], str(llama_image(tokens[image])), *tokens[image + 1:]]
    at = next((i for i, t in enumerate(tokens) if os.path.basename(t) in ("llama-server", "llama-cli", "llama-run",
                                                                            "llama-bench")), 0)
    if at > 0:  # a wrapper before the program (sudo, env -u X, numactl -N 0, taskset ...): its own words passed over,
        assignments = [f"{key}={value}" for key, value in command_env(tokens[:at])]  # the environment it sets kept
        tokens = tokens[at:]
    while tokens and "=" in tokens[0] and not tokens[0].startswith("-"):
        assignments.append(tokens.pop(0))
    if not tokens:
        raise InputError("empty command")
    prog = os.path.basename(tokens[0])
    if prog not in ("llama-server", "llama-cli", "server", "main", "llama-run", "llama-bench"):
        raise InputError(f"not a llama.cpp command: {tokens[0]!r} (expected llama-server or llama-cli)")
    settings = LlamaCppSettings(program="server" if prog in ("llama-server", "server") else "cli")
    if build is not None:
        settings = replace(settings, build=build)
    read = _Read(settings)
    read.environment(assignments)
    read.words(tokens[1:])
    model, hf, hf_file, settings, warnings = read.model, read.hf, read.hf_file, read.settings, read.warnings
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
