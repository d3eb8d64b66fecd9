"""Command line: parse (``cli_args``), call the library, render (``report``). No arithmetic and no engine here:
every engine is reached through the registry (``engines/base.py``)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .cli_args import _COMMANDS, PROG, build_parser, error_line, refuse_unknown
from .units import InputError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    import argparse
    from typing import Any

    from .engines.base import Registry

# fit's options every engine reads (the rest, each engine names in its fit_flags)
_EVERY_ENGINE = frozenset({"model", "gpu", "gpu_memory", "context", "engine", "json", "units", "wide", "help", "plot"})


def _given(args: argparse.Namespace, defaults: dict[str, object]) -> list[str]:
    """The options (argparse dests) given with a value other than their default."""
    return [d for d, v in defaults.items() if d not in _EVERY_ENGINE and getattr(args, d, v) != v]


def _parallelism(args: argparse.Namespace) -> tuple[int, int]:
    from .inputs import gpu_layout

    if args.num_gpus is not None and args.tp is None and args.pp is None:
        args.tp_from_num_gpus = args.num_gpus  # an error about this TP names --num-gpus, the flag the user gave
    return gpu_layout(args.num_gpus, args.tp, args.pp)


def _options(args: argparse.Namespace, registry: Registry, command: str) -> dict[str, object]:
    """The chosen engine's own options for ``command``, as given (or their defaults)."""
    engine = registry.get(args.engine)
    return {o.dest: getattr(args, o.dest) for o in engine.options
            if command in o.commands and getattr(args, o.dest, None) is not None}


def _render(args: argparse.Namespace, doc: object, text: str) -> str:
    from .report import json_doc

    return json_doc.dumps(doc) if args.json else text


def _fit(args: argparse.Namespace, registry: Registry, defaults: dict[str, object]) -> str:
    from . import api
    from .report import fit_report

    registry.refuse_foreign("fit", args.engine, _given(args, defaults))
    engine = registry.get(args.engine)
    tp, pp = _parallelism(args)
    answer = api.fit(args.model, gpu=args.gpu, gpu_memory=args.gpu_memory, engine=args.engine, tp=tp, pp=pp,
                     weights_dtype=args.weights_dtype, kv_dtype=args.kv_dtype, context=args.context,
                     batch=1 if args.batch is None else args.batch, options=_options(args, registry, "fit"), registry=registry)
    if args.plot:
        from .report.plots import fit_plot

        fit_plot(answer, engine, args.plot)
    if args.json:
        return _render(args, fit_report.fit_doc(answer, engine, args.units), "")
    return fit_report.fit_text(answer, engine, args.units)


def _explain(args: argparse.Namespace, registry: Registry) -> str:
    from . import api
    from .inputs import split_command
    from .questions.readers import explain
    from .report import fit_report

    words = list(args.launch)
    if words and words[0] == "--":
        words = words[1:]
    if len(words) == 1 and any(c.isspace() for c in words[0]) and not _is_manifest(words[0]):
        words = split_command(words[0])  # the command pasted as one quoted string (a manifest: explain reads its YAML)
    if not words:
        raise InputError("give the launch command after --, e.g. kvbudget explain --gpu H100 -- vllm serve MODEL")
    _no_own_flags_after_dashes(words, "explain --gpu H100 -- " + " ".join(words[:3]))
    given = {o.dest: getattr(args, o.dest) for e in registry for o in e.options
             if "explain" in o.commands and getattr(args, o.dest, None) is not None}
    engine, answer = explain(words, api._device(args.gpu, args.gpu_memory), {**given, "num_gpus": args.num_gpus},
                             registry)
    if args.json:
        return _render(args, fit_report.fit_doc(answer, engine, args.units), "")
    return fit_report.fit_text(answer, engine, args.units)


def _is_manifest(text: str) -> bool:
    from .engines.compared import manifest_command

    return "\n" in text and ("servingEngineSpec" in text or manifest_command([text]) is not None)  # Helm values too


def _no_own_flags_after_dashes(words: list[str], example: str) -> None:
    """kvbudget's own output flags given after ``--`` would be read as the engine's: say so, with ``example``
    (the user's command up to its ``--``) rewritten the right way round."""
    for word in words:
        name = word.partition("=")[0]
        if name in ("--json", "--units"):
            command, _, rest = example.partition(" ")
            own = f"{name}{' GB' if name == '--units' else ''}"
            raise InputError(f"{name} is kvbudget's flag, not the engine's: put it before the -- "
                             f"(e.g. kvbudget {command} {own} {rest} ...)")


def _check(args: argparse.Namespace, registry: Registry) -> str:
    from .questions.readers import check

    _no_own_flags_after_dashes(list(args.flags or ()), f"check {args.log} --")
    text = _log_text(args.log)
    given = {o.dest: getattr(args, o.dest) for e in registry for o in e.options
             if "check" in o.commands and getattr(args, o.dest, None) is not None}
    engine, result = check(text, {**given, "model": args.model, "gpu": args.gpu, "gpu_memory": args.gpu_memory,
                                  "flags": args.flags}, registry)
    if args.json:
        return _render(args, engine.check_doc(result, args.units), "")
    return engine.check_text(result, args.units)


def _log_text(path: str) -> str:
    """A log file's text, or standard input's for ``-`` (bounded like a file)."""
    from . import inputs

    if path != "-":
        return inputs.read_log(path)
    text = sys.stdin.read(inputs.MAX_LOG_BYTES + 1)
    if len(text) > inputs.MAX_LOG_BYTES:
        raise InputError(f"standard input: more than the {inputs.MAX_LOG_BYTES:,} characters kvbudget reads of a log")
    return inputs.plain_spaces(text)


def _writable_report(path: str, flag: str = "--report", example: str = "report.md", inputs: Sequence[str] = ()) -> None:
    """Refuse an output path (``flag``'s) that cannot be written to, before the work runs (a missing folder was found
    only when the first figure was written, named as '--plot PATH-1.png'), or that is one of the ``inputs`` it is
    made from (calibrate --out LOG wrote the profile over the log, exit 0)."""
    import os

    from .inputs import excerpt_path

    folder = os.path.dirname(os.path.abspath(path))
    if not path.strip():
        raise InputError(f"{flag} is empty: give a file name (e.g. {example})")
    if path.strip() == "-":  # read as standard input where a log is given, yet it wrote a file named '-' here
        raise InputError(f"{flag} '-': the answer already goes to standard output; give a file name to write "
                         f"(e.g. {example})")
    if os.path.isdir(path):
        raise InputError(f"{flag} {excerpt_path(path)} is a folder: give a file name in it (e.g. {example})")
    if not os.path.isdir(folder):
        raise InputError(f"{flag} {excerpt_path(path)}: folder {excerpt_path(folder)} does not exist: create it or "
                         "give a path in an existing folder")
    if not os.access(folder, os.W_OK):
        raise InputError(f"{flag} {excerpt_path(path)}: folder {excerpt_path(folder)} is not writable: give a path "
                         "in a folder you can write to")
    for given in inputs:
        try:
            same = os.path.exists(path) and os.path.samefile(path, given)
        except OSError:  # an input that is no file (standard input's '-', a missing log: its reader says so)
            same = False
        if same:
            other = "" if os.path.abspath(given) == os.path.abspath(path) else f" ({excerpt_path(given)})"
            raise InputError(f"{flag} {excerpt_path(path)} is one of the files it is made from{other}: writing it would "
                             f"overwrite that file; give another name (e.g. {example})")


def _calibrate(args: argparse.Namespace, registry: Registry) -> str:
    from . import inputs
    from .questions.calibrate import calibrate, profile_doc
    from .report import calibrate_report

    if len(args.logs) > 1000:
        raise InputError(f"{len(args.logs):,} logs: give at most 1,000")
    if args.out is not None:
        _writable_report(args.out, "--out", "profile.json", args.logs)
    if args.logs.count("-") > 1:
        raise InputError("standard input ('-') is given more than once: it holds one log; give the others as files")
    logs = ((path, _log_text(path)) for path in args.logs)  # one at a time; '-' is standard input, as check reads it
    given = {o.dest: getattr(args, o.dest) for e in registry for o in e.options
             if "calibrate" in o.commands and getattr(args, o.dest, None) is not None}  # each engine's release
    c = calibrate(logs, {**given, "model": args.model, "gpu": args.gpu, "gpu_memory": args.gpu_memory}, registry)
    if not c.terms:
        why = "; ".join(f"{log}: {reason}" for log, reason in c.skipped[:3])
        raise InputError(f"no log to calibrate on ({why})")
    if args.out is not None:
        import json

        inputs.write_text(args.out, json.dumps(profile_doc(c), indent=1) + "\n")
    if args.json:
        return _render(args, calibrate_report.calibrate_doc(c, args.out), "")
    return calibrate_report.calibrate_text(c, args.units, args.out)


def _compare(args: argparse.Namespace, registry: Registry) -> str:
    from . import api
    from .questions.compare import compare
    from .report import json_doc, text

    tp, pp = _parallelism(args)
    device = api._device(args.gpu, args.gpu_memory)
    rows, omitted = compare(api.load_model(args.model), device, args.context, tp, args.kv_dtype, pp, registry,
                            args.weights_dtype)
    if args.json:
        return _render(args, json_doc.compare_doc(args.model, args.context, tp, pp, rows, omitted, args.weights_dtype), "")
    from .hardware import unified_note

    # every engine's budget on a unified-memory device leaves out the host's use of it (each fit says so)
    notes = (unified_note(device),) if device.unified_memory else ()
    return text.compare_text(rows, args.model, args.context, args.units, omitted, notes, args.weights_dtype)


def _plan(args: argparse.Namespace, registry: Registry) -> str:
    from . import api
    from .report import plan_report

    answer = api.plan_deployments(args.model, concurrency=args.concurrency, context=args.context, engine=args.engine,
                      gpus=args.gpus, max_gpus=args.max_gpus, gpus_per_node=args.gpus_per_node,
                      weights=args.weights_dtype, kv_dtype=args.kv_dtype, prices=args.prices,
                      options=_options(args, registry, "plan"), registry=registry, slo=args.slo)
    plot_warning = ""
    if args.plot:
        from .report.plots import plan_plot

        try:
            plan_plot(list(answer.rows), args.plot, args.concurrency)
        except InputError as exc:
            if "no priced deployment" not in str(exc):
                raise
            plot_warning = f"warning: {exc} (no plot written)"
    if args.json:
        return _render(args, plan_report.plan_answer_doc(answer, args.units), "")
    return plan_report.plan_answer_text(answer, args.units, args.top, args.max_gpus, args.gpus_per_node) \
        + (f"\n{plot_warning}" if plot_warning else "")


def _levers(args: argparse.Namespace, registry: Registry, defaults: dict[str, object]) -> str:
    from . import api
    from .report import plan_report

    registry.refuse_foreign("levers", args.engine, _given(args, defaults))
    tp, pp = _parallelism(args)
    answer = api.levers(args.model, gpu=args.gpu, gpu_memory=args.gpu_memory, context=args.context, engine=args.engine,
                        tp=tp, pp=pp, weights=args.weights_dtype, kv_dtype=args.kv_dtype,
                        options=_options(args, registry, "levers"), registry=registry)
    if args.json:
        return _render(args, plan_report.levers_answer_doc(answer), "")
    return plan_report.levers_answer_text(answer, args.units)


def _simulate(args: argparse.Namespace, registry: Registry, defaults: dict[str, object]) -> str:
    from . import api
    from .report import sim_report

    registry.refuse_foreign("fit", args.engine, _given(args, defaults))  # fit's options: another engine's, refused
    tp, pp = _parallelism(args)
    progress = None if args.json or args.no_progress or not sys.stderr.isatty() else _Progress()
    try:
        answer = api.simulate(args.model, gpu=args.gpu, gpu_memory=args.gpu_memory, trace=args.trace,
                              synthetic=args.synthetic, tokenizer=args.tokenizer, engine=args.engine, tp=tp, pp=pp,
                              weights_dtype=args.weights_dtype, kv_dtype=args.kv_dtype, context=args.context,
                              prefix_caching=not args.no_prefix_caching, chunked_prefill=not args.no_chunked_prefill,
                              policies=tuple(x.strip() for x in args.policies.split(",") if x.strip()),
                              options=_options(args, registry, "fit"), registry=registry, on_step=progress)
    finally:
        if progress is not None:
            progress.close()
    if args.plot:
        from .report.plots import sim_plot

        sim_plot(answer, args.plot)
    if args.json:
        return _render(args, sim_report.sim_doc(answer, series=args.steps), "")
    return sim_report.sim_text(answer)


def _expect(args: argparse.Namespace, registry: Registry, defaults: dict[str, object]) -> Any:
    """With ``--expect MODEL``: a function of the first snapshot giving kvbudget's plan for it (the engine: --engine,
    else the one the page is from); otherwise None. The plan's flags without --expect are refused, and with it
    another engine's."""
    from . import api
    from .questions.diagnose import expected_from_fit

    given = _given(args, defaults)
    if args.expect is None:
        if args.gpu or args.gpu_memory:
            raise InputError("--gpu is read with --expect MODEL (the plan to hold the metrics against); give both")
        plan_flags = set().union(*(e.fit_flags for e in registry))
        stray = [d for d in ("engine", "context") if getattr(args, d, None) is not None] + \
            sorted(d for d in given if d in plan_flags or d == "num_gpus")
        if stray:  # the page's own figures do not change with them: ignoring them would look as if they were read
            raise InputError(f"--{stray[0].replace('_', '-')} is read with --expect MODEL --gpu GPU (the plan to "
                             "hold the metrics against); give both, or leave it out")
        return None
    if not (args.gpu or args.gpu_memory):
        raise InputError(f"--expect {args.expect} needs the GPU: add --gpu (e.g. --gpu H100) or --gpu-memory")
    tp, pp = _parallelism(args)

    def plan(snapshot: Any) -> Any:
        engine = args.engine or snapshot.servers[0].engine
        shown = sorted({s.engine for s in snapshot.servers})
        if engine not in shown:  # the plan of one engine held against another's figures: blocks of another size
            raise InputError(f"--engine {engine}, but the page is {' and '.join(shown)}'s /metrics: give --engine "
                             f"{shown[0]}, or the {engine} server's page")
        registry.refuse_foreign("fit", engine, given)
        options = {o.dest: getattr(args, o.dest) for o in registry.get(engine).options
                   if "fit" in o.commands and getattr(args, o.dest, None) is not None}
        answer = api.fit(args.expect, gpu=args.gpu, gpu_memory=args.gpu_memory, engine=engine, tp=tp, pp=pp,
                         weights_dtype=args.weights_dtype, kv_dtype=args.kv_dtype, context=args.context,
                         options=options, registry=registry)
        return expected_from_fit(answer)

    return plan


def _diagnose(args: argparse.Namespace, registry: Registry, defaults: dict[str, object]) -> str:
    from .questions.diagnose import diagnose_once
    from .report import diagnose_report

    expect = _expect(args, registry, defaults)
    if args.count is not None and args.watch is None:
        raise InputError("--count bounds --watch: give --watch N as well")
    if args.prometheus is not None:
        return _fleet(args, expect)
    if args.selector != '{job="vllm"}' or args.window != "5m":
        raise InputError("--selector and --window are read with --prometheus URL (a fleet through Prometheus)")
    if args.watch is not None:
        return _watch(args, expect)
    answer = diagnose_once(args.metrics, dcgm=args.dcgm, nvidia_smi=args.nvidia_smi, expect=expect,
                           interval=args.interval, timeout=args.timeout)
    if args.json:
        return _render(args, diagnose_report.diagnose_doc(answer), "")
    return diagnose_report.diagnose_text(answer, args.units)


def _fleet(args: argparse.Namespace, expect: Any) -> str:
    """``--prometheus``: every replica at once, ranked by risk; with --watch, asked again every N seconds."""
    import time

    from .questions.diagnose import diagnose_fleet
    from .report import diagnose_report

    if args.dcgm or args.nvidia_smi:
        raise InputError("with --prometheus the GPUs' memory comes from the DCGM series Prometheus holds: leave out "
                         "--dcgm / --nvidia-smi")

    def ask() -> Any:
        return diagnose_fleet(args.prometheus, selector=args.selector, window=args.window, expect=expect,
                              timeout=args.timeout)

    if args.watch is None:
        answer = ask()
        if args.json:
            return _render(args, diagnose_report.fleet_doc(answer), "")
        return diagnose_report.fleet_text(answer, args.units)
    n = 0
    try:
        while args.count is None or n < args.count:
            n += 1
            try:
                answer = ask()
                block = diagnose_report.fleet_text(answer, args.units)
                doc: dict[str, Any] = {"poll": n, "down": False, **diagnose_report.fleet_doc(answer)}
            except InputError as exc:  # Prometheus down or refusing: say so and keep watching
                block = f"Prometheus {args.prometheus} DOWN (still watching): {exc}"
                doc = {"poll": n, "down": True, "problem": str(exc)}
            _show_poll(args, n, f"poll {n} at {time.strftime('%H:%M:%S')}\n{block}", doc)
            if args.count is None or n < args.count:
                time.sleep(args.watch)
    except KeyboardInterrupt:
        pass
    return ""


def _show_poll(args: argparse.Namespace, n: int, block: str, doc: dict[str, Any]) -> None:
    """One --watch poll: a JSON line under --json; else the block, redrawn in place on a terminal, one after the
    other anywhere else."""
    import json

    from .report.text import fit_width

    if args.json:
        sys.stdout.write(json.dumps(doc) + "\n")
    else:
        block = block if args.wide else fit_width(block)
        redraw = sys.stdout.isatty()
        sys.stdout.write(("\x1b[H\x1b[J" if redraw else ("\n" if n > 1 else "")) + block + "\n")
    sys.stdout.flush()


def _watch(args: argparse.Namespace, expect: Any) -> str:
    """Poll until Ctrl-C (or --count polls): a TTY redraws in place, anything else gets one block (or one JSON line)
    per poll."""
    import time

    from .questions.diagnose import polls
    from .report import diagnose_report

    done = 0
    try:
        for poll in polls(args.metrics, args.watch, count=args.count, dcgm=args.dcgm, nvidia_smi=args.nvidia_smi,
                          expect=expect, timeout=args.timeout):
            done = poll.index
            _show_poll(args, done, "" if args.json else diagnose_report.watch_text(poll, args.units,
                                                                                    time.strftime("%H:%M:%S")),
                       diagnose_report.poll_doc(poll) if args.json else {})
    except KeyboardInterrupt:
        pass
    if args.json:
        return ""
    return f"stopped after {done:,} poll{'s' if done != 1 else ''}"


def _size(args: argparse.Namespace, registry: Registry, defaults: dict[str, object]) -> str:
    from . import api, inputs
    from .report import size_report

    registry.refuse_foreign("fit", args.engine, _given(args, defaults))  # fit's options: another engine's, refused
    tp, pp = _parallelism(args)
    if args.report is not None and not args.report.lower().endswith((".md", ".html", ".htm")):
        raise InputError(f"--report {args.report}: give a .md or .html file")
    if args.report is not None:
        _writable_report(args.report, inputs=[p for p in (args.log, args.trace, args.metrics, args.dcgm, args.nvidia_smi,
                                                          args.tokenizer) if p])
    if args.metrics is None and (args.dcgm or args.nvidia_smi):
        raise InputError("--dcgm / --nvidia-smi are read with --metrics (step 4): give the server's /metrics too")
    log = inputs.read_log(args.log) if args.log else None
    progress = None if args.json or args.no_progress or not sys.stderr.isatty() else _Progress()
    try:
        answer = api.size(args.model, gpu=args.gpu, gpu_memory=args.gpu_memory, engine=args.engine, tp=tp, pp=pp,
                          weights_dtype=args.weights_dtype, kv_dtype=args.kv_dtype, context=args.context, log=log,
                          trace=args.trace, synthetic=args.synthetic, tokenizer=args.tokenizer, metrics=args.metrics,
                          dcgm=args.dcgm, nvidia_smi=args.nvidia_smi, interval=args.interval, timeout=args.timeout,
                          options=_options(args, registry, "fit"), registry=registry, on_step=progress)
    finally:
        if progress is not None:
            progress.close()
    note = ""
    if args.report:
        written = size_report.write_report(answer, args.report, args.units)
        note = f"\nreport written: {', '.join(written)}"
    if args.json:
        return _render(args, size_report.size_doc(answer, args.units), "")
    return size_report.size_text(answer, args.units) + note


class _Progress:
    """A progress bar per allocation policy on standard error (tqdm), requests finished out of the trace's."""

    def __init__(self) -> None:
        self._bar: Any = None
        self._policy = ""

    def __call__(self, policy: str, steps: int, done: int, total: int) -> None:
        if policy != self._policy:
            import shutil

            from tqdm import tqdm

            self.close()
            size = shutil.get_terminal_size()  # tqdm reads a fresh terminal's 0 x 0 as no room for a bar
            self._policy = policy
            self._bar = tqdm(total=total, desc=f"simulating {policy}", unit="req", file=sys.stderr, leave=False,
                             mininterval=0.5, ncols=min(size.columns, 100), nrows=max(size.lines, 2))
        self._bar.set_postfix_str(f"{steps:,} steps", refresh=False)
        self._bar.update(done - self._bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def _run(args: argparse.Namespace, registry: Registry, defaults: dict[str, object]) -> str:
    from . import api
    from .report import json_doc, text

    if args.command == "kv":
        r = api.kv(args.model, context=args.context, batch=args.batch, kv_dtype=args.kv_dtype, tp=args.tp)
        if args.plot:
            api.kv_plot(args.model, args.plot, context=args.context, kv_dtype=args.kv_dtype, tp=args.tp)
        return json_doc.dumps(json_doc.kv_doc(r)) if args.json else text.kv_text(r, args.units)
    commands = {"fit": lambda: _fit(args, registry, defaults), "explain": lambda: _explain(args, registry),
                "check": lambda: _check(args, registry), "compare": lambda: _compare(args, registry),
                "calibrate": lambda: _calibrate(args, registry),
                "plan": lambda: _plan(args, registry), "levers": lambda: _levers(args, registry, defaults),
                "simulate": lambda: _simulate(args, registry, defaults),
                "diagnose": lambda: _diagnose(args, registry, defaults),
                "size": lambda: _size(args, registry, defaults)}
    if args.command in commands:
        return commands[args.command]()
    if args.command == "models":
        from .model import catalog

        entries = catalog.entries()
        params = {e.id: api.load_model(e.id).params for e in entries}
        if args.json:
            return json_doc.dumps(json_doc.models_doc(entries, params))
        return text.models_text([(e.id, str(e.config.get("model_type")), params[e.id], ", ".join(e.aliases[:3])) for e in entries])
    from .hardware import gpus

    items = gpus()
    return json_doc.dumps(json_doc.gpus_doc(items)) if args.json else text.gpus_text(items, args.units)


def _serve(args: argparse.Namespace, registry: Registry) -> int:
    """``kvbudget serve``: the web page and its API until interrupted (FastAPI and uvicorn imported here only)."""
    try:
        from .web.app import serve
    except ImportError as exc:
        sys.stderr.write(f"{PROG}: error: serve needs FastAPI and uvicorn: pip install 'kvbudget[web]' ({exc.name} is missing)\n")
        return 2
    try:
        serve(args.host, args.port, allow_hub=args.allow_hub, registry=registry)
    except InputError as exc:  # the address cannot be listened on: refused before uvicorn starts
        sys.stderr.write(f"{PROG}: error: {exc}\n")
        return 2
    return 0


def _defaults(parser: argparse.ArgumentParser, command: str) -> dict[str, object]:
    """Each option's default in ``command``'s parser."""
    import argparse

    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {a.dest: a.default for a in sub.choices[command]._actions}


def _quoted_command_last(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """``explain "vllm serve MODEL ..." --gpu H100``: a launch command pasted as one quoted word, with kvbudget's own
    options after it, is moved behind a ``--`` so that those options stay kvbudget's (argparse would otherwise read
    everything after the command as part of it)."""
    import argparse

    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["explain"]
    takes_value = {s for a in sub._actions if a.nargs != 0 for s in a.option_strings}
    for i in range(1, len(argv)):
        word = argv[i]
        if word.startswith("-") or not any(c.isspace() for c in word.strip()):
            continue
        if argv[i - 1] in takes_value:  # the value of an option (--gpu-memory "48 GiB")
            continue
        return [*argv[:i], *argv[i + 1:], "--", word]
    return argv


def main(argv: Sequence[str] | None = None, registry: Registry | None = None) -> int:
    """``kvbudget ARGS``: the answer on stdout, exit 0; bad input: one line on stderr, exit 2. ``registry``: the
    engines to ask (default: the ones kvbudget ships)."""
    from .engines.base import default_registry

    registry = registry or default_registry()
    argv = list(sys.argv[1:] if argv is None else argv)
    first = argv[0] if argv else None
    tail: list[str] | None = None  # None: no -- (an empty list: nothing after it)
    if first == "check" and "--" in argv:  # vLLM flags after -- belong to the logged run, not to kvbudget
        cut = argv.index("--")
        argv, tail = argv[:cut], argv[cut + 1:]
    parser = build_parser(registry, first if first in _COMMANDS else None)
    if first == "explain" and "--" not in argv:
        argv = _quoted_command_last(parser, argv)
    args, extra = parser.parse_known_args(argv)
    if extra:
        refuse_unknown(parser, args.command, extra)
    args.flags = tail
    if args.command == "serve":
        return _serve(args, registry)
    try:
        out = _run(args, registry, _defaults(parser, args.command))
    except InputError as exc:
        message = error_line(exc, getattr(args, "tp_from_num_gpus", None))
        sys.stderr.write(f"{PROG}: error: {message}\n")
        return 2
    except RecursionError:  # a structure nested past Python's stack in some reader: still one line
        sys.stderr.write(f"{PROG}: error: input nested too deeply to read\n")
        return 2
    except BrokenPipeError:  # pragma: no cover - e.g. piped into head
        return 0
    if not (args.json or args.wide):
        from .report.text import fit_width

        out = fit_width(out)
    if out:  # diagnose --watch --json has written its lines already
        sys.stdout.write(out + "\n")
    return 0
