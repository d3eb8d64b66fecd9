"""Write src/kvbudget/engines/vllm/lines.json: for each vLLM release read, the source lines its logger calls sit on,
so that a log's ``[gpu_worker.py:298]`` tags tell which releases could have printed it (engines/vllm/release_lines.py).

vLLM's log format names the file and the line of the call (``%(filename)s:%(lineno)d``, vllm/logger.py). For a call
spread over several lines, Python 3.8 to 3.13 report the line where the call begins (``logger.info(``); 3.10 on,
for a call split before ``.info``, the line of ``.info`` (both are recorded). ``logger.info_once(...)`` reports its
caller's line (vllm/logger.py passes a stacklevel), which is the call recorded here.

Reads each release's PyPI wheel with zipfile (never imports vLLM), one wheel at a time: each is downloaded, its
Python files kept in DIR/X/src.zip and the wheel deleted, so a rerun downloads only what is missing. Usage:

    python tools/gen_vllm_lines.py DIR              # every release 0.6.0-0.33.0 that `pip index versions vllm` lists
    python tools/gen_vllm_lines.py DIR 0.10.1 ...   # those releases only (with the ones already read into DIR)

Each is fetched as ``pip download -q --no-deps vllm==X -d DIR/X``. Outside CI: the committed JSON is the test data."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "src" / "kvbudget" / "engines" / "vllm" / "lines.json"
FIRST, LAST = (0, 6, 0), (0, 33, 0)
# Folders (under vllm/) left out of the table to keep it small (300 KB with them, 265 KB without): the model files,
# the benchmarks and the tool-call and reasoning parsers, whose lines a start-up log seldom shows. A file name that
# one of them shares with a file of the table (config.py, layer.py) leaves the releases where it does "open": a line
# of that name the table does not hold does not rule such a release out.
SKIP = ("model_executor/models/", "models/", "benchmarks/", "tool_parsers/", "entrypoints/openai/tool_parsers/",
        "reasoning/", "third_party/")
LEVELS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "fatal", "log",
                    "debug_once", "info_once", "warning_once", "error_once"})
LOGGER = re.compile(r"(?:^|_)(?:logger|log|lgr|LOGGER|LOG)$")


def _key(version: str) -> tuple[int, ...]:
    m = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)(?:\.(\d+))?(?:\.post(\d+))?", version)
    assert m is not None, version
    return tuple(int(x or 0) for x in m.groups())


def _pypi_releases() -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "vllm"], capture_output=True, text=True,
                         check=True).stdout
    listed = re.search(r"Available versions: (.*)", out)
    assert listed is not None, out
    found = [v.strip() for v in listed.group(1).split(",")]
    return sorted((v for v in found if re.fullmatch(r"[0-9.]+(?:\.post[0-9]+)?", v) and FIRST <= _key(v)[:3] <= LAST),
                  key=_key)


# A logger call: ``logger.info(``, ``self.logger.warning_once(``, ``init_logger(__name__).debug(`` (split anywhere
# between its words: black's ``logger\\n    .info(`` too); in comments and strings too, which only adds lines that
# no log shows.
CALL = re.compile(r"(?:\b\w*(?:logger|LOGGER)|\blog|\blgr|\bLOG|\binit_logger\(__name__\))\s*(\.)\s*(?:"
                  + "|".join(sorted(LEVELS)) + r")\s*\(")


def _is_logger(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return bool(LOGGER.search(node.id))
    if isinstance(node, ast.Attribute):
        return bool(LOGGER.search(node.attr))
    return False


def _helpers(source: str) -> set[str]:
    """Functions that log their caller's line: a logger call with stacklevel=2 in their body (utils.py
    print_warning_once of 0.6.2-0.7, logger.py _print_info_once of 0.8 on): a call of one of them is where the
    line is. (Parsed only where "stacklevel" is written: a parse of every file takes ten times the regex's time.)"""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
                isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in LEVELS
                and _is_logger(call.func.value) and any(k.arg == "stacklevel" and isinstance(k.value, ast.Constant)
                                                        and k.value.value == 2 for k in call.keywords)
                for call in ast.walk(node)):
            found.add(node.name)
    return found


def release_lines(sources: dict[str, str]) -> dict[str, list[int]]:
    """The line numbers Python's logging reports for the logger calls of each file (path -> source): for a call
    spread over lines, the line it starts on (and, from Python 3.10, for one split before ``.info``, that line)."""
    helpers: set[str] = set()
    for path, source in sources.items():
        if "stacklevel" in source:
            try:
                helpers |= _helpers(source)
            except SyntaxError as exc:  # a file this Python cannot parse: said, not silently skipped
                print(f"  {path}: {exc}", file=sys.stderr)
    calls = CALL.pattern
    if helpers:
        calls += r"|(?<!\w)(?<!def )(" + "|".join(sorted(helpers)) + r")\s*\("
    rx = re.compile(calls)
    out: dict[str, list[int]] = {}
    for path, source in sources.items():
        lines: set[int] = set()
        for m in rx.finditer(source):
            lines.add(source.count("\n", 0, m.start()) + 1)
            if m.start(1) >= 0:
                lines.add(source.count("\n", 0, m.start(1)) + 1)
        if lines:
            out[path] = sorted(lines)
    return out


def read_release(root: Path, version: str) -> dict[str, list[int]]:
    """The logger lines of each vllm/*.py file of the release's wheel. The wheel's Python files are kept in
    DIR/X/src.zip (a few MB), the wheel itself deleted once read: one wheel on disk at a time."""
    here = root / version
    kept = here / "src.zip"
    if not kept.exists():
        here.mkdir(parents=True, exist_ok=True)
        wheels = list(here.glob("vllm-*.whl"))
        if not wheels:
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", f"vllm=={version}", "-d",
                            str(here)], check=True)
            wheels = list(here.glob("vllm-*.whl"))
        with zipfile.ZipFile(wheels[0]) as z, zipfile.ZipFile(kept.with_suffix(".part"), "w",
                                                              zipfile.ZIP_DEFLATED) as out:
            for name in z.namelist():
                if name.startswith("vllm/") and name.endswith(".py"):
                    out.writestr(name, z.read(name))
        kept.with_suffix(".part").rename(kept)
        for wheel in wheels:
            wheel.unlink()
    with zipfile.ZipFile(kept) as z:
        sources = {name: z.read(name).decode("utf-8", errors="replace") for name in z.namelist()}
    return release_lines(sources)


def _ranges(indices: list[int]) -> str:
    """0,1,2,5 -> '0-2,5'."""
    out: list[str] = []
    start = prev = indices[0]
    for i in [*indices[1:], -2]:
        if i != prev + 1:
            out.append(str(start) if start == prev else f"{start}-{prev}")
            start = i
        prev = i
    return ",".join(out)


def _kept(path: str) -> bool:
    return not path.removeprefix("vllm/").startswith(SKIP)


def main() -> None:
    root = Path(sys.argv[1])
    versions = sys.argv[2:] or _pypi_releases()
    versions = sorted({*versions, *(d.name for d in root.iterdir() if (d / "src.zip").exists())}, key=_key)
    table: dict[str, dict[int, set[int]]] = {}  # file name -> line -> releases (indices)
    left_out: dict[str, set[int]] = {}  # file name -> releases where a file of the name left out logs
    for i, version in enumerate(versions):
        calls = read_release(root, version)
        print(f"{version}: {len(calls)} files with logger calls", file=sys.stderr)
        for path, lines in calls.items():
            name = path.rsplit("/", 1)[-1]
            if not _kept(path):
                left_out.setdefault(name, set()).add(i)
                continue
            per_file = table.setdefault(name, {})
            for line in lines:
                per_file.setdefault(line, set()).add(i)
    grouped: dict[str, dict[str, list[int]]] = {}
    for name, per_file in sorted(table.items()):
        by_releases: dict[str, list[int]] = {}
        for line, rel in sorted(per_file.items()):
            by_releases.setdefault(_ranges(sorted(rel)), []).append(line)
        grouped[name] = by_releases
    data = {
        "source": "the logger calls (logger.info/warning/debug/error/exception, ..._once, and the helpers that log "
                  "their caller's line) of every vllm/**/*.py file but those under vllm/" + ", vllm/".join(SKIP)
                  + " in each release's PyPI wheel, read by tools/gen_vllm_lines.py",
        "command": "python tools/gen_vllm_lines.py DIR (each release: pip download -q --no-deps vllm==X -d DIR/X)",
        "lineno": "the line Python's logging reports for a call: where the call starts (Python 3.8-3.13)",
        "format": {"lines": "file name -> releases (indices into releases, ranges a-b) -> the lines a logger call of "
                            "a file of that name starts on in each of those releases",
                   "open": "file name -> the releases in which a file of that name outside the table logs"},
        "releases": versions,
        "lines": grouped,
        "open": {name: _ranges(sorted(rel)) for name, rel in sorted(left_out.items()) if name in table},
    }
    OUT.write_text(json.dumps(data, separators=(",", ":")) + "\n")
    pairs = sum(len(v) for v in table.values())
    print(f"{len(versions)} releases, {len(table)} file names, {pairs} lines, {OUT.stat().st_size:,} bytes -> {OUT}")


if __name__ == "__main__":
    main()
