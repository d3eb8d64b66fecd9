"""SGLang's launch command (``python -m sglang.launch_server``) read into ``SGLangSettings``; the flag loop is
``engines/cmdscan.py``'s, shared with TensorRT-LLM's reader."""

from __future__ import annotations

from ..._record import replace
from ...inputs import excerpt
from ...units import InputError
from ..cmdscan import PARALLEL, WHOLE, OtherCommand, Parser, flag_value, scan_flags
from .flags import Window, flags_at, releases, resolve, spec, whence, window
from .settings import SGLangSettings

_SGLANG = {  # flag -> (field, kind)
    "--model-path": ("model", "str"), "--model": ("model", "str"), "--tp": ("tp", "int"), "--tp-size": ("tp", "int"),
    "--tensor-parallel-size": ("tp", "int"), "--pp-size": ("pp", "int"),
    "--pipeline-parallel-size": ("pp", "int"), "--dp": ("dp", "int"), "--dp-size": ("dp", "int"),
    "--data-parallel-size": ("dp", "int"),
    # sglang 0.5.23 arg_groups/fields/parallel.py: ep_size (aliases --expert-parallel-size, --ep) and attn_dp_size
    # (alias --attention-data-parallel-size), the new spelling of --dp-size N --enable-dp-attention
    "--ep-size": ("ep_size", "int"), "--expert-parallel-size": ("ep_size", "int"), "--ep": ("ep_size", "int"),
    "--attn-dp-size": ("attn_dp_size", "int"), "--attention-data-parallel-size": ("attn_dp_size", "int"),
    "--mem-fraction-static": ("mem_fraction_static", "float"), "--context-length": ("context_length", "int"),
    "--kv-cache-dtype": ("kv_cache_dtype", "str"), "--page-size": ("page_size", "int"),
    "--max-running-requests": ("max_running_requests", "int"), "--chunked-prefill-size": ("chunked_prefill_size", "int"),
    "--cuda-graph-max-bs": ("cuda_graph_max_bs", "int"), "--max-total-tokens": ("max_total_tokens", "int"),
    # 0.5.14 - 0.5.19 read --cuda-graph-max-bs into cuda_graph_max_bs_decode (flags.json's dest), the field
    # --cuda-graph-max-bs-decode sets; 0.5.20 dropped the old spelling, so 0.5.23 takes only this one
    "--cuda-graph-max-bs-decode": ("cuda_graph_max_bs", "int"),
    "--quantization": ("quantization", "str"), "--swa-full-tokens-ratio": ("swa_full_tokens_ratio", "float"),
    "--mamba-ssm-dtype": ("mamba_ssm_dtype", "str"), "--mamba-full-memory-ratio": ("mamba_full_memory_ratio", "float"),
}
_SGLANG_SWITCHES = {"--disable-cuda-graph": "disable_cuda_graph", "--enable-dp-attention": "enable_dp_attention",
                    "--disable-custom-all-reduce": "disable_custom_all_reduce"}

# Ranges of the numeric flags, as SGLang takes them (python/sglang/srt/server_args.py: sizes of at least 1,
# chunked_prefill_size -1 to disable it, fractions in (0, 1)).
_INT_RANGES = {"tp": PARALLEL, "pp": PARALLEL, "dp": PARALLEL, "ep_size": PARALLEL, "attn_dp_size": PARALLEL, "page_size": (1, 1 << 20), "chunked_prefill_size": (-1, 1 << 40)}


def _value(kind: str, text: str, flag: str, field: str) -> object:
    """A flag's value, checked against SGLang's range for it (swa_full_tokens_ratio may be 1; the memory
    fraction must stay below it)."""
    value = flag_value(kind, text, flag, _INT_RANGES.get(field, WHOLE), field != "swa_full_tokens_ratio")
    if field == "chunked_prefill_size" and value == 0:
        raise InputError(f"{flag} is 0: give a size of at least 1 token, or -1 to turn chunked prefill off")
    return value


_UNKNOWN = "unrecognized arguments"


def _parser(w: Window) -> Parser:
    """What ``scan_flags`` needs of the releases' parsers once ``release_args`` has checked the flags: every option
    string of the window's releases (the newest's values where they differ), abbreviations already spelt out."""
    flags: dict[str, int | str] = {}
    for i in range(w.lo, w.hi + 1):
        flags.update(flags_at(i))
    return Parser(f"SGLang {w.label}", flags, "error: unrecognized arguments: {flag}",
                  "error: unrecognized arguments: {word}")


def _stops(label: str, said: str) -> InputError:
    return InputError(f"SGLang {label} stops at start-up: {said}")


def _flag(token: str, w: Window) -> tuple[str, int | str, list[str]] | None:
    """``token`` (``--flag``, its ``=value`` cut off) as the releases of ``w`` read it (``flags.resolve``): the
    flag, the values it takes (the newest release's) and what the releases do not agree on; refused as the
    releases refuse it where none reads it (None: no release read has it, for ``scan_flags`` to refuse)."""
    outcomes = {i: resolve(token, i) for i in range(w.lo, w.hi + 1)}
    known = {i: o[0] for i, o in outcomes.items() if len(o) == 1}
    if not known:
        ambiguous = [o for o in outcomes.values() if len(o) > 1]
        if ambiguous:
            shown = ", ".join(ambiguous[-1][:4]) + (", ..." if len(ambiguous[-1]) > 4 else "")
            raise _stops(w.label, f"`error: ambiguous option: {excerpt(token, 60)[1:-1]} could match {shown}` "
                                  "(spell the flag out)")
        said = whence(token)
        if said:
            raise _stops(w.label, f"`error: {_UNKNOWN}: {token}`: {token} {said}")
        if token not in _SGLANG and token not in _SGLANG_SWITCHES:
            return None  # no release has it: scan_flags refuses it with the nearest flags
        raise _stops(w.label, f"`error: {_UNKNOWN}: {token}`")
    newest = max(known)
    flag = known[newest]
    notes: list[str] = []
    missing = [i for i in outcomes if i not in known]
    if missing or len(set(known.values())) > 1:
        read = "" if token == flag else f" (read as {flag})"
        stop = "as ambiguous" if all(outcomes[i] for i in missing) else f"with '{_UNKNOWN}'" if not any(
            outcomes[i] for i in missing) else f"with '{_UNKNOWN}' or as ambiguous"
        notes.append(f"{token}{read}: SGLang {_ranges(list(known))} read it" + (
            f", {_ranges(missing)} stop {stop}" if missing else "")
                     + f" ({flag} {whence(flag)}); give --sglang-version for the release you run")
    run = spec(flag, newest)
    return flag, run[2] if run else 1, notes


def _ranges(indexes: list[int]) -> str:
    """Release indexes as runs: ``0.4.0 - 0.4.5, 0.4.7``."""
    rel = releases()
    runs: list[list[int]] = []
    for i in sorted(indexes):
        if runs and runs[-1][1] == i - 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ", ".join(rel[a] if a == b else f"{rel[a]} - {rel[b]}" for a, b in runs)


def _choices(flag: str, values: list[str], w: Window) -> list[str]:
    """``values`` of ``flag`` checked against each release's choices (where the source lists them): refused where
    no release of ``w`` takes one, noted where only some do."""
    rel = releases()
    runs = {i: spec(flag, i) for i in range(w.lo, w.hi + 1)}
    notes: list[str] = []
    for value in values:
        refused = {i: r[4] for i, r in runs.items() if r is not None and r[4] is not None and value not in r[4]}
        having = [i for i, r in runs.items() if r is not None]
        if not refused:
            continue
        last = refused[max(refused)] or ()
        choose = ", ".join(last[:12]) + (", ..." if len(last) > 12 else "")
        if len(refused) == len(having):
            raise _stops(w.label, f"`error: argument {flag}: invalid choice: '{excerpt(value, 40)[1:-1]}'` (SGLang "
                                  f"{rel[max(refused)]} takes {choose})")
        notes.append(f"{flag} {excerpt(value, 40)[1:-1]}: SGLang {_ranges(list(refused))} refuse it "
                     f"(invalid choice); give --sglang-version for the release you run")
    return notes


def release_args(args: list[str], version: str | None) -> tuple[list[str], list[str], Parser]:
    """The flag-table boundary: ``args`` checked against the SGLang release ``version`` names (``flags.window``:
    None, the newest read) as its argparse reads them. A flag no release of the window has stops the server
    ("unrecognized arguments", said with the releases that have it), an abbreviation reads as the one flag it
    begins there or stops it as ambiguous, a value outside the release's choices stops it. The arguments with
    abbreviations spelt out, the notes (the window's releases disagree, the release is not in the table) and the
    parser ``scan_flags`` reads the rest with."""
    w = window(version)
    notes = [w.note] if w.note else []
    out: list[str] = []
    i = 0
    while i < len(args):
        token = args[i]
        i += 1
        if not token.startswith("--") or token == "--":
            out.append(token)
            continue
        head, eq, inline = token.partition("=")
        read = _flag(head, w)
        if read is None:
            out.append(token)
            continue
        flag, takes, said = read
        notes.extend(said)
        # a flag kvbudget reads stays as written (its errors name it so); another abbreviation is spelt out
        out.append(token if head in _SGLANG or head in _SGLANG_SWITCHES else flag + eq + inline)
        values = [inline] if eq else []
        if not eq and takes == 1 and i < len(args):
            values, i = [args[i]], i + 1
        elif not eq and takes in ("?", "+", "*"):
            while i < len(args) and not args[i].startswith("-"):
                values.append(args[i])
                i += 1
                if takes == "?":
                    break
        out.extend(values if not eq else [])
        notes.extend(_choices(flag, values, w))
    return out, notes, _parser(w)


def sglang_fields(args: list[str], version: str | None = None) -> tuple[str, dict[str, object], list[str]]:
    """The model, the ``SGLangSettings`` fields and the warnings of the arguments after ``sglang.launch_server``,
    checked against the release ``version`` names (a release, a line of ``flags.LINES``; None: the newest the flag
    table holds): what ``sglang_command`` builds its settings from, and ``check`` lays over the settings a log shows."""
    args, notes, parser = release_args(args, version)
    model, fields, warnings = scan_flags("sglang", args, _SGLANG, _value, _SGLANG_SWITCHES, positional_model=False,
                                         parser=parser)
    warnings = notes + warnings
    attn = fields.pop("attn_dp_size", 1)
    if attn != 1:  # --attn-dp-size N is --dp N --enable-dp-attention (arg_groups/parallel_hook.py)
        if fields.get("dp", 1) != 1:
            # parallel_hook.py (_handle_data_parallelism) refuses replicas combined with attention DP
            raise InputError(f"--dp-size {fields['dp']} with --attn-dp-size {attn}: SGLang does not combine "
                             "data-parallel replicas with attention data parallelism")
        fields.update(dp=attn, enable_dp_attention=True)
    return model, fields, warnings


def known_flags() -> frozenset[str]:
    """Every option string the newest SGLang release in ``flags.json`` takes."""
    return frozenset(_parser(window(None)).flags)


def sglang_command(args: list[str], version: str | None = None) -> OtherCommand:
    """The arguments after ``sglang.launch_server``, read as release ``version``'s parser reads them."""
    model, fields, warnings = sglang_fields(args, version)
    return OtherCommand("sglang", model, replace(SGLangSettings(), **fields), None, tuple(warnings))
