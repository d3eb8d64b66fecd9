"""Check an SGLang start-up log against SGLang's own arithmetic.

SGLang 0.5.23 (``mem_cache/kv_cache_configurator.py``, ``model_executor/model_runner.py``): ``Load weight begin. avail mem=P GB`` (free before loading),
``Load weight end. ... avail mem=A GB``, ``mem_fraction_static=f`` in ``server_args``: the pool is
``floor((A - P x (1 - f)) x 2^30 / cell)`` tokens, and ``K size`` is (tokens + page) x the K bytes of a
token. Every logged figure is rounded to 0.01 GB, so a recomputed figure counts as matching when it lies
within what that rounding allows. ``logscan.check_other_log`` runs this and TensorRT-LLM's check on a log.
"""

from __future__ import annotations

import re

from ..._record import replace
from ...model.spec import ModelSpec
from ...units import GiB, InputError
from ..logscan import MAX_GB, NUM, LogText, Row, count, figure
from .log import ALLOCATED, SGLangFigures

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    from ..compared import OtherCheck


def check_sglang_log(log: LogText, model: str | ModelSpec | None = None) -> list[Row]:
    """(figure, reported, recomputed, matches) for every SGLang figure the log lets us recompute (none: an
    empty list). ``model``: a name to load, or the model already loaded (loaded once, its warnings said once)."""
    rows: list[Row] = []
    alloc = log.last("KV Cache is allocated.", ALLOCATED + r"(?:, V size: " + NUM + " GB)?")
    total = log.last("max_total_num_tokens=", r"max_total_num_tokens=" + NUM)  # releases before #tokens in the line
    single = bool(alloc) and alloc.group(2) == "KV"  # type: ignore[union-attr]  # one latent buffer per layer (MLA)
    if alloc and (alloc.group(1) or total) and (single or alloc.group(4)):
        tokens = count(alloc.group(1) or total.group(1), "SGLang #tokens")  # type: ignore[union-attr]
        name = "KV" if single else "K"
        k_gb = figure(alloc.group(3), f"SGLang {name} size (GB)", 0, MAX_GB)
        v_gb = None if single else figure(alloc.group(4), "SGLang V size (GB)", 0, MAX_GB)
        begin = log.last("Load weight begin. avail mem=", r"Load weight begin\. avail mem=" + NUM + " GB")
        end = log.last("Load weight end.", r"Load weight end\.[^\n]{0,400}?avail mem=" + NUM + " GB")
        usage = log.last("Load weight end.", r"Load weight end\.[^\n]{0,400}?mem usage=" + NUM + " GB")
        pre_err = 0.005
        if end and usage and not begin:  # free before loading = free after + what loading took
            begin, pre_err = end, 0.01
        frac = (log.last("mem_fraction_static=", r"mem_fraction_static=" + NUM)
                or log.last("--mem-fraction-static", r"--mem-fraction-static[ =]" + NUM))
        page = log.last("page_size=", r"page_size=" + NUM)
        p = count(page.group(1), "SGLang page_size", 1, 1 << 20) if page else 1
        per_token_k = k_gb * GiB / (tokens + p)  # implied K (or whole latent) bytes per token, from the log itself
        if model:
            per_token_k = _model_k_bytes(model, log, per_token_k, single)
        if begin and end and frac:
            pre = figure(begin.group(1), "SGLang avail mem before loading (GB)", 0, MAX_GB)
            after = figure(end.group(1), "SGLang avail mem after loading (GB)", 0, MAX_GB)
            f = figure(frac.group(1), "SGLang mem_fraction_static", 0, 1, lo_open=True)
            if begin is end and usage:
                pre = after + figure(usage.group(1), "SGLang mem usage (GB)", 0, MAX_GB)
            cell = per_token_k if single else 2 * per_token_k
            if cell <= 0:
                raise InputError(f"the log: SGLang {name} size is 0 GB, so a token's KV bytes cannot be recomputed"
                                 " (give --model)")
            # a hybrid model's Mamba state pool comes out of the same budget first
            mamba = log.last("Mamba Cache is allocated.", r"Mamba Cache is allocated\.[^\n]{0,400}?conv_state size: "
                             + NUM + r" ?GB, ssm_state size: " + NUM + " ?GB")
            states = (figure(mamba.group(1), "SGLang conv_state size (GB)", 0, MAX_GB)
                      + figure(mamba.group(2), "SGLang ssm_state size (GB)", 0, MAX_GB)) if mamba else 0.0
            st_err = 0.01 if mamba else 0.0
            lo = int(((after - 0.005) - (pre + pre_err) * (1 - f) - states - st_err) * GiB // cell)
            hi = int(((after + 0.005) - (pre - pre_err) * (1 - f) - states + st_err) * GiB // cell)
            rows.append(("SGLang #tokens from the logged free memory", tokens, round((lo + hi) / 2), lo <= tokens <= hi))
        if model:  # K (or latent) buffer = (tokens + one padding page) x its bytes per token, in GB of 2^30
            k_want = round((tokens + p) * per_token_k / GiB, 2)
            rows.append((f"SGLang {name} size (GB) from #tokens", k_gb, k_want, k_gb == k_want))
        if v_gb is not None:
            rows.append(("SGLang K size = V size (GB)", v_gb, k_gb, v_gb == k_gb))
    return rows


def _model_k_bytes(ref: str | ModelSpec, log: LogText, implied: float, latent: bool = False) -> float:
    """K bytes per token per rank of full-attention layers of ``ref`` at the TP size the log names, in
    the element size (1, 2 or 4 bytes) closest to what the log's rounded K size implies. ``latent``: the pool's one
    buffer per layer (the "KV size" line): the whole per-token bytes of its MLA layers (MLATokenToKVPool)."""
    from ...model.layers import MLA, SparseIndexer
    from ...model.resolve import load_foreign_model
    from ...units import element_type
    from .dsa import scaled_latent_bytes, sglang_layers
    from .policy import pool_of

    spec = sglang_layers(load_foreign_model(ref) if isinstance(ref, str) else ref, [])
    tp_match = log.last("tp_size=", r"tp_size=" + NUM) or log.last("--tp", r"--tp(?:-size)?[ =]" + NUM)
    # log lines are tagged TP0 .. TP(n-1)
    ranks = [int(m.group(1)) for m in re.finditer(r"TP([0-9]{1,4})\b", log.text)
             if m.start() == 0 or not (log.text[m.start() - 1].isalnum() or log.text[m.start() - 1] == "_")]
    tp = count(tp_match.group(1), "SGLang tp_size", 1, 1 << 16) if tp_match else max(ranks) + 1 if ranks else 1
    if latent:
        mla = [x for x in spec.layers if isinstance(x, MLA)]
        # a DSA pool adds its indexer keys, and may hold an FP8 latent in the scaled layout (dsa.py)
        idx = sum(x.bytes_per_token(element_type("fp8_e4m3")) for x in spec.layers if isinstance(x, SparseIndexer))
        sizes = [sum(x.bytes_per_token(element_type(d), tp) for x in mla) + idx for d in ("fp8_e4m3", "bf16", "fp32")]
        if idx:
            sizes.append(sum(scaled_latent_bytes(x) for x in mla) + idx)
        return min(sizes, key=lambda c: abs(c - implied)) if mla else implied
    attn = [x for x in spec.layers if pool_of(x, old=True) == "full" and not isinstance(x, MLA)]
    full = [x for x in attn if pool_of(x, old=False) == "full"]
    # K bytes with and without sliding-window layers (releases before SWA pools gave them full-length
    # buffers), in 1, 2 and 4 bytes per element
    candidates = [sum(x.bytes_per_token(element_type(d), tp) for x in group) / 2
                  for group in (full, attn) for d in ("fp8_e4m3", "bf16", "fp32")]
    return min(candidates, key=lambda c: abs(c - implied)) if attn else implied


# How far the fraction a log's figures imply may sit from the one planned before check says so: the figures are
# rounded to 0.01 GB and SGLang's pool is floored to whole tokens and pages, a few hundredths at most
_FRACTION_GAP = 0.03


def implied_fraction(figs: SGLangFigures, planned_pre_gb: float, cell_bytes: int = 0) -> float | None:
    """The mem_fraction_static a log's own figures imply, or None where it prints too little (``cell_bytes``:
    kvbudget's bytes per token, for a log that prints its tokens but not its buffers' sizes): SGLang sizes the pool
    as the free memory after loading minus (1 - mem_fraction_static) x the free memory before loading (sglang
    0.5.23 ``srt/model_executor/pool_configurator.py``; ``model_runner.py profile_max_num_token`` before it), so
    fraction = 1 - (after - pool) / before. ``planned_pre_gb``: kvbudget's free memory before loading, where the log
    prints none."""
    pool = (2 * figs.k_gb if figs.k_gb is not None else figs.kv_gb if figs.kv_gb is not None
            else figs.tokens * cell_bytes / GiB if figs.tokens and cell_bytes else None)
    pre = figs.pre_load_gb if figs.pre_load_gb is not None else planned_pre_gb
    if pool is None or figs.after_load_gb is None or pre <= 0:
        return None
    return 1 - (figs.after_load_gb - pool) / pre


# How much less free memory than kvbudget plans for the bare card a log may show before check says something else
# held it: SGLang rounds to 0.01 GB, and kvbudget's CUDA context is a few hundred MB off on some drivers
_HELD_FLOOR_GB, _HELD_SHARE = 0.25, 0.01


def logged_pre_load(figs: SGLangFigures) -> tuple[float, str] | None:
    """The free memory before loading a log shows (GB) and how it shows it: its "Load weight begin. avail mem", or
    the free memory after loading plus the load's "mem usage", which SGLang computes as their difference (sglang
    0.5.23 ``srt/model_executor/model_runner.py``, ``weight_load_mem_usage``); None where it prints neither."""
    if figs.pre_load_gb is not None:
        return figs.pre_load_gb, "its 'Load weight begin' line"
    if figs.after_load_gb is not None and figs.weights_gb is not None:
        return (round(figs.after_load_gb + figs.weights_gb, 2),
                f"free after loading {figs.after_load_gb:.2f} + the load's mem usage {figs.weights_gb:.2f}")
    return None


def held_outside(figs: SGLangFigures, planned_pre_gb: float) -> tuple[float, float, str] | None:
    """(the free memory before loading the log shows, how much less that is than ``planned_pre_gb``, where the
    figure comes from), where the gap is more than ``_HELD_FLOOR_GB`` and ``_HELD_SHARE`` of the planned figure;
    None otherwise. Memory another process holds (a desktop, WSL2's host, a second server) shrinks that figure,
    and SGLang's pool with it."""
    logged = logged_pre_load(figs)
    if logged is None:
        return None
    pre, where = logged
    gap = planned_pre_gb - pre
    return (pre, gap, where) if gap > max(_HELD_FLOOR_GB, _HELD_SHARE * planned_pre_gb) else None


def _held_warning(figs: SGLangFigures, planned_pre: float, device: Any, settings: Any, spec: ModelSpec) -> str | None:
    """The warning for memory held outside the server (``held_outside``; ``planned_pre``: kvbudget's free memory
    before loading, in GB as the row beside the log's shows it), with the pool planned on a card that much smaller,
    so the user sees what that memory explains and how to plan with it (``calibrate``, then ``--profile``)."""
    from ..compared import row
    from .policy import plan

    held = held_outside(figs, planned_pre)
    if held is None:
        return None
    pre, gap, where = held
    said = (f"the log had {pre:.2f} GB free before loading ({where}), {gap:.2f} GB less than kvbudget plans for a bare "
            f"{device.name} ({planned_pre:.2f} GB)")
    if gap * GiB > device.memory_bytes / 4 and device.unified_memory:  # the system's use of the memory it shares
        return (f"{said}: its memory is the system's too, and what the operating system, the page cache and other "
                "processes held then is not modelled (or the run used another GPU: give its --gpu)")
    if gap * GiB > device.memory_bytes / 4:  # more than --profile takes (engines/site.py held_by_site): another card
        return (f"{said}, more than a quarter of it: the run likely used a smaller GPU than the one planned, so every "
                "figure here is for the wrong card; give --gpu (or --gpu-memory) of the card it ran on")
    memory = device.memory_bytes - round(gap * GiB)
    q = plan(spec, replace(device, memory_bytes=memory, memory_source="the free memory the log shows"), settings)
    effect = ""
    if figs.tokens and q.starts:
        err = row("", figs.tokens, q.max_total_num_tokens).error_pct
        effect = f"; planned with that much less, the pool is {q.max_total_num_tokens:,} tokens ({err:+.2f}% against the log)"
    return (f"{said}: memory held outside this server (a desktop, WSL2's host, another process on the GPU) is not "
            f"modelled{effect}; to plan for a GPU shared like this, calibrate on this log (kvbudget calibrate LOG --out "
            "site.json) and give --profile site.json")


def _pool_within_free(figs: SGLangFigures) -> None:
    """SGLang allocates its KV pool out of the free memory after loading (the pool is that memory less
    (1 - mem_fraction_static) x the free memory before it): a log whose pool is larger than that memory has lines of
    two runs, or edited figures, and no plan would explain it."""
    pool = 2 * figs.k_gb if figs.k_gb is not None else figs.kv_gb
    if pool is not None and figs.after_load_gb is not None and pool > figs.after_load_gb + 0.02:  # 0.01 GB rounding each
        raise InputError(f"the log's KV pool ({pool:.2f} GB) is larger than the {figs.after_load_gb:.2f} GB it had free "
                         "after loading the weights, out of which SGLang allocates it: the lines are from different runs "
                         "or were edited; give one run's start-up log as SGLang printed it")


def check_run(text: str, given: dict[str, Any]) -> OtherCheck:
    """``check`` of an SGLang log: the run it shows (``log.read_run``: settings, release line, device) planned by
    ``policy.plan``, each figure it printed beside kvbudget's, then the figures recomputed from each other
    (``check_sglang_log``). ``given``: --model, --gpu, --gpu-memory, --sglang-version and the words after -- (SGLang's
    flags, or the whole launch command: its model where --model is not given, the release its image names where
    --sglang-version is not)."""
    from ..compared import OtherCheck, logged_model, row, run_devices, run_gpu, run_words, settings_items, starts_row
    from ..logscan import open_log
    from .log import COMMAND_EXAMPLE, read_run, whole_command
    from .policy import plan, summary
    from .settings import SGLangSettings, replicas

    log = open_log(text, "SGLang")
    flags, whole = run_words(given.get("flags"), "SGLang", COMMAND_EXAMPLE)
    command = flags if whole else []
    version, said, said_first = given.get("sglang_version"), "given with --sglang-version", list[str]()
    if whole:  # `-- [VAR=1] [docker run ... lmsysorg/sglang:TAG] python3 -m sglang.launch_server ...`
        flags, version, said, said_first = whole_command(flags, version)
    run = read_run(log, flags, version, version_said=said,
                   where="the command after --" if whole else "the flags after --")
    if command:
        run_devices(command, int(run.settings.tp * run.settings.pp * replicas(run.settings)), "SGLang")
    model = given.get("model")
    warnings = [*said_first, *run.warnings]
    notes = [f"release line {run.settings.version}: {run.release_said}"]
    if run.tp_from_ranks:
        notes.append(f"TP {run.settings.tp} from the ranks' tags the log prints (no launch command or server_args names it)")
    fraction_shown = "mem_fraction_static" in dict(settings_items(run.settings, SGLangSettings()))
    if not fraction_shown:
        notes.append("mem_fraction_static: the log shows none (no server_args line), so SGLang's default is planned; "
                     "give -- --mem-fraction-static F if the run set one")
    spec = logged_model(model, run.model, warnings)
    figs = run.figures
    _pool_within_free(figs)
    shown = logged_pre_load(figs)  # printed, or after loading + the load's usage: no card has less than that
    device = run_gpu(given.get("gpu"), given.get("gpu_memory"), run.gpu_name, None, shown[0] if shown else None, "SGLang")
    rows: list[Any] = []
    p = None
    if spec is not None and device is None:
        warnings.append("the log does not say which GPU it ran on: give --gpu (or --gpu-memory) for kvbudget's prediction")
    if spec is not None and device is not None:
        p = plan(spec, device, run.settings)
        notes += list(p.notes)
        planned_pre = (p.pre_load_bytes - p.late_comms_bytes) / GiB  # what "Load weight begin" would print
        implied = None if fraction_shown else implied_fraction(figs, planned_pre, p.cell_bytes)
        if implied is not None and abs(implied - p.mem_fraction_static) > _FRACTION_GAP:
            warnings.append(f"the log's own figures imply mem_fraction_static {implied:.2f}, not the {p.mem_fraction_static:.3g} "
                            "planned (the log shows no server_args line, so SGLang's default was planned): the "
                            f"prediction is for the default; give -- --mem-fraction-static {implied:.2f} if the run set it")
        held = _held_warning(figs, round(planned_pre, 2), device, run.settings, spec)
        if held is not None:
            warnings.append(held)
        if figs.tokens is not None:
            rows.append(row("KV tokens (max_total_num_tokens)", figs.tokens, p.max_total_num_tokens))
        if figs.k_gb is not None and p.v_size_bytes:
            rows.append(row("K size (GB)", figs.k_gb, round(p.k_size_bytes / GiB, 2)))
        if figs.kv_gb is not None and not p.v_size_bytes:  # MLA's one latent buffer (plan: k_size_bytes)
            rows.append(row("KV size (GB)", figs.kv_gb, round(p.k_size_bytes / GiB, 2)))
        if shown is not None:  # printed, or the free memory after loading plus the load's
            label = "free before loading (GB)" if figs.pre_load_gb is not None else "free before loading (GB, after + usage)"
            rows.append(row(label, shown[0], round(planned_pre, 2)))
        if figs.weights_gb is not None:
            rows.append(row("weights: load mem usage (GB)", figs.weights_gb, round(p.weights_bytes / GiB, 2)))
        if figs.after_load_gb is not None:
            rows.append(row("free after loading (GB)", figs.after_load_gb, round(p.after_load_bytes / GiB, 2)))
        if figs.started is not None:
            rows.append(starts_row(figs.started, p.starts))
    recomputed = check_sglang_log(log, spec)
    if not rows and not recomputed:
        if figs.tokens is None:
            raise InputError("no SGLang KV pool figure ('KV Cache is allocated', max_total_num_tokens=) found in the "
                             "log: give the start-up log up to its KV cache lines")
        raise InputError(f"this SGLang log prints max_total_num_tokens={figs.tokens:,} but no line to recompute it from "
                         "(K and V sizes): give --model and --gpu to compare it with kvbudget's prediction")
    return OtherCheck(engine="SGLang", model=spec.name if spec is not None and device is not None else None,
                      gpu=device.name if device is not None and spec is not None else None, release=run.settings.version,
                      settings=settings_items(run.settings, SGLangSettings()), read_from=run.read_from,
                      rows=tuple(rows), recomputed=tuple(recomputed), notes=tuple(notes),
                      warnings=tuple(dict.fromkeys(warnings)), plan=summary(p) if p is not None else None,
                      device_bytes=device.memory_bytes if device is not None else None)
