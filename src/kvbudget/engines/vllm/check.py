"""Check a vLLM start-up log against kvbudget's prediction, figure by figure."""

from __future__ import annotations

import json

from ..._record import record, replace
from ...hardware import GPU, UnknownGPU, card_of_memory, custom_gpu, find_gpu
from ...inputs import excerpt
from ...model.resolve import load_foreign_model
from ...model.spec import ModelSpec
from ...units import GiB, InputError
from ..compared import Row, far_apart, memory_not_the_run, not_contradicted, not_the_run, package_pins, run_devices, run_words
from ..compared import row as _row
from .command import (
    _INT_FIELDS,
    NO_MODEL,
    _apply,
    _speculative,
    config_overrides,
    image_tag_release,
    parse_vllm_command,
)
from .fixes import suggestions
from .log import VllmLog, parse_vllm_log
from .policy import VllmPlan, plan
from .release_lines import MIN_PAIRS, LineEvidence, release_evidence, releases_read
from .settings import VllmSettings, minor_patch, unread_release, version_minor

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from ..base import Verdict


@record
class CheckResult:
    log: VllmLog
    model: str
    gpu: str
    settings: VllmSettings
    plan: VllmPlan  # the full prediction (calibrated non-KV memory)
    given_available: VllmPlan | None  # the KV arithmetic fed with the log's own "Available KV cache memory"
    rows: tuple[Row, ...]
    arithmetic_rows: tuple[Row, ...]
    warnings: tuple[str, ...]
    capacity: Verdict | None = None  # requests of max_model_len the predicted pool holds (one request asked)
    # where the logged run or the prediction does not start: flags that change that, each with kvbudget's plan
    fixes: tuple[tuple[str, VllmPlan], ...] = ()


def _release(log: VllmLog, text: str, given: str | None, lines: LineEvidence) -> tuple[str, list[str]]:
    """The release to plan a log with: the one given (--vllm-version), the V0 engine where the log says it fell
    back to it, the one the log prints, the newest of those its source line numbers fit (``lines``), else the guess
    from its wording; with what is said of it."""
    if given is not None:
        return given, _unlike(lines, given, "given with --vllm-version")
    if "Falling back to V0" in text or "Initializing a V0 LLM engine" in text:  # 0.8-0.10 ran V0 (arg_utils.py)
        # before 0.8 V0 is the release's own engine, planned by its release (NCCL's line, the non-torch rules)
        minor = version_minor(log.version)
        return (log.version, []) if log.version and minor is not None and minor < 8 else ("v0", [])
    if log.version:
        return log.version, _unlike(lines, log.version, "the log prints")
    wording = _version_from_format(log, text)
    if not lines.releases:
        none = (f"the source line numbers of the log's records ({lines.pairs} file:line pairs) fit no vLLM release "
                f"kvbudget has read ({_read_span()}) together: a newer release, a development or a patched build")
        near = LineEvidence(lines.nearest, lines.pairs)
        if lines.nearest and near.one_minor and not (wording == "v0" and (version_minor(lines.nearest[-1]) or 0) >= 8):
            return lines.nearest[-1], [f"{none}; {lines.matched} of them fit vLLM {near.span}, the nearest: planned as "
                                       f"{lines.nearest[-1]} (give --vllm-version if the build is another)"]
        if lines.pairs >= MIN_PAIRS:
            return wording, [f"{none}; the release is guessed from the log's wording"]
        return wording, []
    fits = (f"the log names no vLLM version; the source line numbers of its records ({lines.pairs} file:line pairs) "
            f"fit vLLM {lines.span}")
    if not lines.one_minor:  # the newest of several minor releases would be a guess: their rules differ
        return wording, [f"{fits}: the release is guessed from the log's wording"]
    newest = lines.releases[-1]
    if wording == "v0" and (version_minor(newest) or 0) >= 8:  # the V0 engine of 0.8-0.10 (its lines say so)
        return "v0", [f"{fits}, running the V0 engine: planned as the V0 engine"]
    return newest, [f"{fits}: planned as {newest}"]


def _read_span() -> str:
    read = releases_read()
    return f"{read[0]}-{read[-1]}"


def _unlike(lines: LineEvidence, version: str, said: str) -> list[str]:
    """A warning where the source line numbers fit releases none of which is the release number given or printed
    (to its patch: 0.6.3 for 0.6.3.post1 and 0.10.1 for 0.10.1.1 are the same rules): lines of another run pasted in,
    or a build from between releases. A number the table does not hold (a dev build, a release newer than the table,
    a line such as v1) says nothing."""
    plain = version.strip().lower().removeprefix("v")
    if not lines.releases or plain not in releases_read() or minor_patch(plain) in map(minor_patch, lines.releases):
        return []
    return [f"the source line numbers of the log's records fit vLLM {lines.span}, not the {plain} {said}: planned as "
            f"{version} (a build from between releases, or lines of another run?)"]


def _version_from_format(log: VllmLog, text: str) -> str:
    """The release line the log's wording points to (V0, V1 up to 0.20, or the current one)."""
    if log.num_gpu_blocks is not None and "KV cache size" not in text:
        return "v0"
    if any(clue in text for clue in _V0_CLUES) or (" model_runner.py:" in text and "Loading model weights took" in text):
        return "v0"
    if "Available KV cache memory" in text or "GPU KV cache size" in text:
        return "current" if "tokens, Maximum concurrency" in text.replace("\n", "") else "v1"
    return "v0" if "Memory profiling" in text or "model weights take" in text else "current"


# Lines only the V0 engine prints: its multiprocessing workers' prefix (executor/multiproc_worker_utils.py) and the
# error of worker/worker.py raise_if_cache_size_invalid (0.6-0.10.1; V1 says "To serve at least one request ...").
# V0's runner logs "model_runner.py:N] Loading model weights took" (V1's gpu_model_runner.py says "Model loading
# took"; the 0.7 alpha's gpu_model_runner.py "Loading model weights took" too, hence the file name's space).
_V0_CLUES = ("VllmWorkerProcess", "is larger than the maximum number of tokens that can be stored in KV cache")


def _v1_alpha_format(log: VllmLog, text: str) -> bool:
    """The 0.7 V1 alpha's own lines: "# GPU blocks: N" from v1/core/kv_cache_utils.py, without V0's "# CPU blocks"
    and without the 0.8+ "Available KV cache memory" / "GPU KV cache size" lines."""
    minor = version_minor(log.version)
    return (log.num_gpu_blocks is not None and "# CPU blocks" not in text and "KV cache size" not in text
            and "Available KV cache memory" not in text and "kv_cache_utils" in text and minor in (None, 7))


def _model(ref: str, overrides: str = "") -> ModelSpec:
    return load_foreign_model(ref, overrides)


def _python_dict_json(value: str) -> str:
    """A Python dict as a log prints it ({'method': 'eagle3', 'x': True}) as JSON, for the readers of the flags."""
    return value.replace("'", '"').replace("True", "true").replace("False", "false").replace("None", "null")


def _log_overrides(value: str) -> str:
    """The config.json keys (other than RoPE's) of the log's hf_overrides, as a JSON object ("": none)."""
    as_json = _python_dict_json(value)
    keys = config_overrides(as_json)
    return json.dumps(keys) if keys else ""


def _same_model(given: str, logged: str) -> None:
    """--model beside a log that names its model: refused where both are catalog models of other shapes (a Qwen3-30B
    log checked as Llama-3.1-8B was compared, and calibrated into a +42.83 GiB term, exit 0). A path or an id
    kvbudget does not hold may be the logged model under another name: taken as given."""
    from ...model import catalog

    a, b = catalog.find(given), catalog.find(logged)
    if a is None or b is None or a.id == b.id:
        return
    sa, sb = _model(a.id), _model(b.id)
    if (sa.num_layers, sa.dims) != (sb.num_layers, sb.dims):
        raise InputError(f"--model {excerpt(given, 60)} is not the model the log runs ({excerpt(logged, 60)}, of "
                         "other shapes): drop --model, the log names its model")


def _gpu(log: VllmLog, gpu: str | None, gpu_memory: int | None) -> GPU:
    """The device of the run: the named card (``gpu``, else the log's device name; the log's total where it names
    another board of that name), or an unnamed card of ``gpu_memory`` / the log's total. A named card given with
    ``gpu_memory`` keeps its name (compute capability, board: cuBLAS's workspace, NCCL's NVSwitch buffers)."""
    total = round(log.total_gib * GiB) if log.total_gib else None
    memory_not_the_run(gpu_memory, total)
    if gpu:
        not_the_run(gpu, find_gpu(gpu), log.gpu_name, total if gpu_memory is None else None)
        _capability_not_the_run(gpu, find_gpu(gpu), log.capability)
    if gpu_memory is not None:
        if gpu:
            return replace(find_gpu(gpu), memory_bytes=gpu_memory, nvidia_smi_mib=None, memory_source="given with the GPU")
        return custom_gpu(gpu_memory)
    device = find_gpu(gpu) if gpu else None
    if device is None and log.gpu_name:
        try:
            device = find_gpu(log.gpu_name)
        except UnknownGPU:  # a name boards of different memory print (RTX 4060 Ti: 8 or 16 GB): the log's total picks
            device = card_of_memory(log.gpu_name, total) if total is not None else None
    if device is not None:
        if total is None:
            return device
        if abs(device.memory_bytes - total) > 0.1 * total:
            # one device name, two boards (the 8 and 16 GB RTX 4060 Ti, 5060 Ti, 3060): the log's own total
            # decides the memory, the catalog card the compute capability
            return replace(device, name=f"{device.name} ({log.total_gib:.2f} GiB as the log prints)", memory_bytes=total,
                           nvidia_smi_mib=None, memory_source="the log's total GPU memory")
        return device  # the log prints its total to one or two decimals: the catalog's bytes are finer
    if total is not None:
        return custom_gpu(total)
    raise InputError("the log does not say which GPU it ran on: give --gpu or --gpu-memory")


def _capability_not_the_run(gpu: str, device: GPU, said: tuple[str, float, float] | None) -> None:
    """Refuse ``--gpu`` whose compute capability the log's own lines rule out (``log.capability_said``): an H100
    given for a log that says it cannot use FlashAttention-2 on a Turing GPU was checked as an H100 run, exit 0."""
    from ...hardware import capability

    cc = capability(device)
    if said is None or cc is None or said[1] - 1e-6 <= cc <= said[2] + 1e-6:
        return
    words, lo, hi = said
    allows = f"compute capability {lo:.1f}" if lo == hi else (f"compute capability below {hi + 0.1:.1f}" if lo == 0
                                                                else f"compute capability {lo:.1f} to {hi:.1f}"
                                                                if hi < 99 else f"compute capability {lo:.1f} or above")
    raise InputError(f"--gpu {excerpt(gpu, 40)} ({device.name}, compute capability {cc:.1f}) is not the run's device: "
                     f"the log says {excerpt(words, 80)} ({allows}); drop --gpu, or give the card it ran on")


def _layout_from_workers(log: VllmLog, s: VllmSettings) -> tuple[VllmSettings, list[str]]:
    """A log that prints no parallel sizes (a published excerpt without the engine's config line) but whose
    workers' prefixes carry ranks: TP (and PP) from the highest rank tags, said in a warning. vLLM's
    multiprocessing executor names a worker by its rank ("VllmWorker rank=N", 0.8-0.10.0: the global rank,
    TP x PP, read as TP) or by its place ("Worker_TPn", "Worker_PPm_TPn", 0.10.1 on)."""
    layout = log.worker_layout
    if layout is None or s.tensor_parallel_size * s.pipeline_parallel_size > 1 or s.data_parallel_size > 1:
        return s, []
    tp, pp, seen = layout
    if tp * pp < 2:
        return s, []
    how = "--pipeline-parallel-size" if pp > 1 else "--tensor-parallel-size"
    read = ("read from its workers' rank tags" if seen else "planned: the smallest layout its workers' tags allow "
            "(vLLM names a worker's TP and PP rank only where that size is above 1, and V0 a process for each rank "
            "after the first; the log shows only some ranks)")
    return (replace(s, tensor_parallel_size=tp, pipeline_parallel_size=pp),
            [f"the log prints no parallel sizes: TP={tp} PP={pp} {read} (give -- {how} N if that is not the run's "
             "layout)"])


def _all_ranks(log: VllmLog, s: VllmSettings) -> list[str]:
    """Refuse a log of a multi-GPU run cut short before every rank printed its figures (warn where only the
    token lines are missing). vLLM 0.8-0.11 print
    "Available KV cache memory" once per worker (gpu_worker.py determine_available_memory, logger.info; 0.12.0 on
    once per node: info_once(scope="local")) and up to 0.10 the engine core prints "GPU KV cache size" once per
    worker's config (v1/engine/core.py of 0.10.2: get_kv_cache_config in a loop over the workers, before
    unify_kv_cache_configs gives every rank the smallest); a log with fewer such lines than TP x PP ranks shows some
    ranks only, and the figure vLLM used (the smallest) may be missing (a TP 4 log cut after rank 0's 52.21 GiB
    was checked against 52.21, where vLLM ran on rank 2's 52.11)."""
    world = s.tensor_parallel_size * s.pipeline_parallel_size
    if world < 2 or log.error is not None:
        return []
    minor = version_minor(s.version)
    labels = log.available_ranks
    # a worker other than the first, or two of them, print: the once-per-worker form whatever the release
    per_worker = (minor is not None and 8 <= minor <= 11) or (minor is None and (
        len(set(labels)) >= 2 or any(label not in ("rank=0", "TP0") for label in labels)))
    release = f"vLLM {s.version}" if minor is not None else "this vLLM (it prints it per worker)"
    layout = f"TP={s.tensor_parallel_size} x PP={s.pipeline_parallel_size}"
    if per_worker and 0 < log.available_printed < world:
        shown = f" ({', '.join(excerpt(label, 24) for label in labels[:4])}{', ...' if len(labels) > 4 else ''})" if labels else ""
        raise InputError(f"the log shows 'Available KV cache memory' from {log.available_printed} of {world} ranks{shown}, "
                         f"which {release} prints once per rank ({layout}), sizing the KV cache by the smallest: the "
                         "log is cut short; give the whole log, from the start-up to 'Maximum concurrency'")
    if minor is not None and 8 <= minor <= 10 and 0 < log.kv_size_printed < world:
        # published excerpts keep one such line (the 0.8.5 4 x A10 log): warned, the ranks of one TP group being alike
        return [f"the log shows 'GPU KV cache size' for {log.kv_size_printed} of {world} ranks, which vLLM {s.version} "
                f"prints once per rank ({layout}) before taking the smallest: the tokens checked may be one rank's; give "
                "the whole log for the pool's"]
    return []


def _rows(log: VllmLog, p: VllmPlan) -> tuple[Row, ...]:
    rows = []
    if log.model_loading_gib is not None:
        rows.append(_row("model loading (GiB)", log.model_loading_gib, round(p.model_loading_bytes / GiB, 2)))
    rows += _profile_rows(log, p)
    if log.available_kv_gib is not None:
        rows.append(_row("available KV cache (GiB)", log.available_kv_gib, round(p.available_kv_cache_bytes / GiB, 2)))
    if log.num_gpu_blocks is not None:
        rows.append(_row("GPU blocks", log.num_gpu_blocks, p.num_gpu_blocks))
    if log.kv_cache_tokens is not None:
        rows.append(_row("KV cache tokens", log.kv_cache_tokens, p.kv_cache_tokens))
    if log.max_concurrency is not None:
        rows.append(_row("max concurrency (x)", log.max_concurrency, round(p.max_concurrency, 2)))
    if log.estimated_max_model_len is not None:
        rows.append(_row("estimated max model len", log.estimated_max_model_len, p.estimated_max_model_len))
    rows += _graph_rows(log, p)
    started = log.started
    rows.append(Row("starts", float(started), float(p.starts), None if started == p.starts else 100.0))
    return tuple(rows)


# rows of the memory profile, not of the KV arithmetic: left out of the rows fed with the log's available memory
_NOT_ARITHMETIC = ("available KV cache (GiB)", "model loading (GiB)", "non-torch memory (GiB)", "activation peak (GiB)")


def _profile_rows(log: VllmLog, p: VllmPlan) -> list[Row]:
    """The memory profile's own terms, where the log prints them as kvbudget's plan counts them: the non-torch
    memory and the activation peak above the weights of V0 (worker/worker.py: "non_torch_memory takes X GiB;
    PyTorch activation peak memory takes Y GiB", 0.6.5-0.10; 0.6.4's "non_torch_memory=X") and of the V1 worker up
    to 0.20 ("Actual usage is W GiB for weight, Y GiB for peak activation, X GiB for non-torch memory", 0.10-0.20
    v1/worker/gpu_worker.py). They show which term of a KV figure's error is off. Not for the current line (0.21 on:
    the CUDA-graph estimate and, from 0.27, the consumed memory and transient peak of utils/mem_utils.py are measured
    otherwise, compared in their own rows)."""
    if p.release == "current" or log.consumed_gib is not None:
        return []
    rows = []
    if log.non_torch_gib is not None:
        rows.append(_row("non-torch memory (GiB)", log.non_torch_gib, round(p.non_torch_bytes / GiB, 2)))
    if log.activation_gib is not None:
        rows.append(_row("activation peak (GiB)", log.activation_gib, round(p.activation_bytes / GiB, 2)))
    return rows


def _graph_rows(log: VllmLog, p: VllmPlan) -> list[Row]:
    """vLLM's CUDA-graph estimate (>= 0.21) against kvbudget's (cudagraph.py): the graphs of each mode the log counts
    ("Profiling CUDA graph memory: PIECEWISE=n (largest=a), FULL=m (largest=b)") and the estimate in GiB
    (log.VllmLog.graph_estimate: from the equivalent-utilization line to 4 decimals of the total)."""
    rows = []
    g = p.cudagraph
    for mode, n, _ in log.graph_modes:
        predicted = None if g is None else {"PIECEWISE": g.piecewise, "FULL": g.full}.get(mode)
        rows.append(_row(f"{mode} CUDA graphs", n, predicted))
    reported = log.graph_estimate(p.total_bytes / GiB)
    if reported is not None:
        rows.append(_row("CUDA-graph estimate (GiB)", reported, round(g.bytes / GiB, 3) if g is not None else None))
    return rows


def check_log(
    text: str, *, model: str | None = None, gpu: str | None = None, gpu_memory: int | None = None,
    version: str | None = None, flags: list[str] | None = None,
) -> CheckResult:
    """Predict what the logged run should have printed and compare, figure by figure."""
    log = parse_vllm_log(text)
    lines = release_evidence(text)
    resolved, of_release = _release(log, text, version, lines)  # said before the other warnings
    warnings: list[str] = []
    settings = VllmSettings(version=resolved)
    if _v1_alpha_format(log, text) and (version is None or version_minor(version) == 7) and version_minor(resolved) in (None, 7):
        settings = replace(settings, version=resolved if version_minor(resolved) == 7 else log.version or "0.7", use_v1=True)
    ref = model
    # --hf-overrides' config.json keys: vLLM applies them before anything reads the config (config/model.py of
    # 0.33.0), from the log's command, its non-default args, then the flags after -- (the last one wins)
    overrides = ""
    served = log.model  # the checkpoint the log names: its command's, else its own model line
    if log.command:
        try:
            cmd = parse_vllm_command(log.command, settings)
            settings, ref = cmd.settings, ref or cmd.model
            served = cmd.model
            warnings += cmd.warnings
            overrides = cmd.overrides
        except InputError as exc:
            warnings.append(f"the launch command in the log could not be read: {exc}")
    for key, value in log.settings:
        if key == "speculative_config":  # a draft's memory, read as --speculative-config is (its warnings too)
            settings, said = _speculative(settings, "the log's speculative_config", _python_dict_json(value),
                                          "the log's engine argument speculative_config")
            warnings += said
            continue
        settings = _setting(settings, key, value)
        if key == "hf_overrides":
            overrides = _log_overrides(value)
    command: list[str] = []  # the whole launch command after --, if one was given
    logged = settings  # what the log itself prints of the run's engine arguments
    if flags is not None:  # `-- docker run ... vllm/vllm-openai:TAG ...`, `-- VAR=1 vllm serve M ...` or the flags
        flags, whole = run_words(flags, "vLLM", "vllm serve MODEL ...")
        command = flags if whole else []
        pinned = package_pins(flags).get("vllm") if whole else None  # uvx --from vllm==0.10.1, pip install vllm==X
        if whole and version is None and (tagged := pinned or image_tag_release(flags)):
            # the release the command pins or its image's tag names: more than the log's format
            settings = replace(settings, version=tagged)
            of_release = _unlike(lines, tagged, "that the command pins" if pinned else "that the image's tag names")
        try:
            cmd = parse_vllm_command(flags if whole else ["vllm", "serve", ref or "model", *flags], settings)
        except InputError as exc:  # a whole command without its model: --model's (or the log's command's)
            if not (whole and ref and str(exc).startswith(NO_MODEL)):
                raise
            cmd = parse_vllm_command([*flags, "--model", ref], settings)
        settings = cmd.settings
        ref = ref or (cmd.model if whole else None)
        warnings += cmd.warnings
        if any(f == "--hf-overrides" or f.startswith(("--hf-overrides=", "--hf-overrides.")) for f in flags):
            overrides = cmd.overrides
    _not_contradicted(log, logged, settings)
    if flags is None and not log.command and not log.settings:  # an excerpt of figures only: every setting a default
        warnings.append("the log shows none of the run's engine arguments (no launch command, no 'non-default args' "
                        "line): kvbudget planned vLLM's defaults for what it does not print (kv_cache_dtype, "
                        "max_num_seqs, speculative decoding, ...), so a gap, the arithmetic rows' too, may be a setting "
                        "rather than memory: give the run's flags after --")
    settings, said = _layout_from_workers(log, settings)
    warnings += said
    if command:
        run_devices(command, settings.tensor_parallel_size * settings.pipeline_parallel_size * settings.data_parallel_size,
                    "vLLM")
    if log.concurrency_len and settings.max_model_len is None:
        settings = replace(settings, max_model_len=log.concurrency_len)
    if model and log.model:
        _same_model(model, log.model)
    ref = ref or log.model
    if not ref:
        raise InputError("the log does not name its model: give --model")
    if log.starts > 1:  # a restarted server, or logs pasted together: parse_vllm_log read the last one
        how = ("of vLLM's engine (its 'Initializing ... LLM engine' line printed again after a run's KV-cache figures)"
               if log.engine_starts else f"of the vLLM API server (its version line printed {log.starts} times)")
        warnings.append(f"the log holds {log.starts} start-ups {how}: the last one is checked; give one run's lines to "
                        "check another")
    if log.other_failure:
        warnings.append(f"the run stopped after its KV cache was sized, for a reason that is not memory ({log.other_failure}): "
                        "'starts' compares the memory outcome")
    warnings += _all_ranks(log, settings)
    device = _gpu(log, gpu, gpu_memory)  # a --gpu that is not the run's is refused before the model is fetched
    spec = _model(ref, overrides)
    if (later := unread_release(settings.version)) is not None:  # the plan's note, which the check printed nowhere
        warnings.append(later)
    predicted = plan(spec, device, settings)
    warnings += _utilization_unseen(log.available_kv_gib, settings, predicted)
    warnings += _non_torch_unlike(log, predicted)
    warnings += _weights_unlike(log, predicted, served or log.model)
    if device.unified_memory and settings.kv_cache_memory_bytes is None:  # the plan's note, which check prints nowhere
        from ...hardware import unified_note

        warnings.append(unified_note(device))
    given = None
    if log.available_kv_gib is not None and log.available_kv_gib > 0:
        given = plan(spec, device, replace(settings, kv_cache_memory_bytes=round(log.available_kv_gib * GiB)))
    return CheckResult(
        log=log, model=spec.name, gpu=device.name, settings=settings, plan=predicted, given_available=given,
        rows=_rows(log, predicted),
        arithmetic_rows=tuple(r for r in _rows(log, given) if r.figure not in _NOT_ARITHMETIC
                              and "CUDA graph" not in r.figure and "CUDA-graph" not in r.figure)
        if given else (),
        warnings=tuple(dict.fromkeys(of_release + warnings)),  # a flag in the log's command and after -- is said once
        fixes=tuple(suggestions(spec, device, settings, predicted)) if not (log.started and predicted.starts) else (),
    )


# How far kvbudget's available KV cache may sit from a log's (GiB, besides compared.far_apart's share) before check,
# having planned the default gpu_memory_utilization for a log that shows none, says what utilization the log fits
_UNSEEN_GAP_GIB = 1.0


def _utilization_unseen(logged_gib: float | None, settings: VllmSettings, p: VllmPlan) -> list[str]:
    """A warning where neither the log nor the flags set gpu_memory_utilization (or --kv-cache-memory), the release's
    default was planned, and the available KV cache the log prints is far from kvbudget's: the utilization that the
    logged figure fits, everything else as planned (vLLM budgets utilization x total, less what the profile run held:
    ``v1/worker/gpu_worker.py determine_available_memory``, 0.33.0; ``worker/worker.py``, V0), since a dropped
    non-default-args line or command is the likeliest cause. Nothing where the utilization is known: the gap is then
    the error check shows."""
    if settings.gpu_memory_utilization is not None or settings.kv_cache_memory_bytes is not None or not logged_gib:
        return []
    gap = logged_gib - p.available_kv_cache_bytes / GiB
    if not far_apart(p.available_kv_cache_bytes / GiB, logged_gib, _UNSEEN_GAP_GIB):
        return []
    fits = p.utilization + gap * GiB / p.total_bytes
    said = (f"it fits {fits:.2f} (give -- --gpu-memory-utilization {fits:.2f} if the run set that)" if 0.05 <= fits <= 1
            else "no utilization fits it, so memory kvbudget does not model is the likelier cause")
    return [f"available KV cache: kvbudget plans {p.available_kv_cache_bytes / GiB:.2f} GiB where the log shows "
            f"{logged_gib:.2f}, and the log shows no gpu_memory_utilization, so the default {p.utilization:g} was "
            f"planned: {said}"]


# How far the log's non-torch memory may sit from kvbudget's (GiB, besides compared.far_apart's share) before check
# says which of kvbudget's notes names the memory behind it
_NON_TORCH_GAP_GIB = 0.25


def _non_torch_unlike(log: VllmLog, p: VllmPlan) -> list[str]:
    """A warning where the log's own non-torch figure (its memory profile's line) is far from kvbudget's in a
    multi-GPU run, with the plan's note on NCCL's buffers (nccl.py link_note: the link between the GPUs, which
    neither the model, the GPU's name nor the flags say) where it has one."""
    rows = {r.figure: r for r in _profile_rows(log, p)}
    row = rows.get("non-torch memory (GiB)")
    if row is None or row.reported is None or p.tp * p.pp < 2:
        return []
    if not far_apart(p.non_torch_bytes / GiB, row.reported, _NON_TORCH_GAP_GIB):
        return []
    nccl = next((n for n in p.notes if n.startswith("NCCL at ")), None)
    said = (f"the log's non-torch memory is {row.reported:.2f} GiB a rank where kvbudget charges "
            f"{p.non_torch_bytes / GiB:.2f}")
    return [f"{said}: {nccl}" if nccl else said]


def _weights_unlike(log: VllmLog, p: VllmPlan, served: str | None) -> list[str]:
    """A warning where the weights the log loaded are far from kvbudget's model's (over a fifth and 1 GiB apart): the
    run served another checkpoint than the one planned (a quantized one under a base model's name, another size), so
    every figure after it compares two different models."""
    logged = log.model_loading_gib
    if logged is None or logged <= 0 or p.model_loading_bytes <= 0:
        return []
    planned = p.model_loading_bytes / GiB
    if abs(planned - logged) <= 1.0 or 0.8 <= planned / logged <= 1.25:
        return []
    which = f" (the log serves {excerpt(served, 80)})" if served else ""
    return [f"model loading: the log loaded {logged:.2f} GiB a GPU where kvbudget's model loads {planned:.2f}: the run "
            f"served another checkpoint than the one planned{which}; give --model that checkpoint (its repo or "
            "config.json folder), or its --quantization after --, for figures that compare"]


# Engine arguments a log prints (its engine config or non-default args line) that the flags after -- may not contradict:
# the run used the printed value, so a check against another one compares kvbudget's plan of a run that never happened
# with the logged run's figures (-- --max-model-len 4096 beside a log of max_model_len 32000: "+659%", exit 0).
_PRINTED = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "max_model_len",
            "gpu_memory_utilization", "block_size", "max_num_seqs", "max_num_batched_tokens", "enforce_eager")


def _not_contradicted(log: VllmLog, logged: VllmSettings, settings: VllmSettings) -> None:
    """Refuse flags after -- that set an engine argument the log prints to another value."""
    printed = {key for key, _ in log.settings}
    not_contradicted({key: getattr(logged, key) for key in _PRINTED if key in printed},
                     {key: getattr(settings, key) for key in _PRINTED}, _PRINTED, "the flags after --",
                     "the logged run's own engine arguments")


def _setting(s: VllmSettings, key: str, value: str) -> VllmSettings:
    """A setting as a log's engine-config line prints it, in the range vLLM accepts (a log that shows
    ``block_size=-16`` is not one vLLM printed: one error naming it, not a plan of negative memory)."""
    v = value.strip()
    if key in _INT_FIELDS or key in ("max_model_len", "gpu_memory_utilization"):
        return _apply(s, key, f"the log's engine argument {key}", v)
    if key == "kv_cache_dtype":
        return replace(s, kv_cache_dtype=v)
    if key in ("enforce_eager", "enable_prefix_caching"):
        return replace(s, **{key: v.lower() == "true"})
    if key == "quantization" and v.lower() not in ("none", "auto"):
        return replace(s, quantization=v)
    if key == "sampler":
        return replace(s, sampler=v)
    if key == "flashinfer_installed":  # 0.8-0.11 sample with FlashInfer whenever it imports (topk_topp_sampler.py)
        minor = version_minor(s.version)
        return replace(s, sampler="flashinfer") if s.sampler is None and minor is not None and 8 <= minor <= 11 else s
    if key == "compile_cache":
        return replace(s, compile_cache=v)
    if key == "dtype" and v.lower() != "auto":
        return replace(s, dtype=v.removeprefix("torch."))
    if key in ("limit_mm_per_prompt", "mm_processor_kwargs"):  # a Python dict as the log prints it, read as JSON
        from .command import _multimodal

        as_json = _python_dict_json(v)
        return _multimodal(s, key, "--" + key.replace("_", "-"), as_json, f"the log's engine argument {key}")
    if key in ("rope_scaling", "hf_overrides"):  # a Python dict as the log prints it, read as JSON
        from .command import _overrides

        as_json = _python_dict_json(v)
        return _overrides(s, "--" + key.replace("_", "-"), as_json, f"the log's engine argument {key}")[0]
    if key in ("skip_mm_profiling", "language_model_only"):
        return replace(s, **{key: v.lower() == "true"})
    if key == "mm_encoder_tp_mode" and v.strip("'\"") in ("weights", "data"):
        return replace(s, mm_encoder_tp_mode=v.strip("'\""))
    return s
