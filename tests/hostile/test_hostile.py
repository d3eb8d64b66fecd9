"""Run the hostile corpus (``corpus.py``, cases from the ``gen_*.py`` generators) through the CLI
in-process: exit code 2, nothing on stdout, exactly one short line on stderr, bounded memory
(tracemalloc peak under 200 MB), and no hang (a 10 s alarm; ``benchmarks/bench_hostile.py``
measures the time per case against the 1 s target)."""

from __future__ import annotations

import io
import signal
import sys
import tracemalloc
from pathlib import Path

import pytest
from corpus import load_all

from kvbudget.cli import main

CASES = load_all()
MAX_PEAK = 200 * 2**20
MAX_LINE = 400


class _Hang(Exception):
    pass


def _alarm(_signum: int, _frame: object) -> None:
    raise _Hang()


def run_case(case_id: str, root: Path) -> tuple[int, str, str, int]:
    """(exit code, stdout, stderr, peak bytes) of one case, run in this process."""
    case = CASES[case_id]
    args = case.build(root)
    out, err = io.StringIO(), io.StringIO()
    old = sys.stdout, sys.stderr, sys.stdin
    sys.stdout, sys.stderr = out, err
    if case.stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(case.stdin), encoding="utf-8", errors="replace")
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(10)
    tracemalloc.start()
    try:
        try:
            code = main(args)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        sys.stdout, sys.stderr, sys.stdin = old
    return code, out.getvalue(), err.getvalue(), peak


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_hostile_input(case_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "120")
    code, out, err, peak = run_case(case_id, tmp_path)
    expect = CASES[case_id].expect
    assert peak < MAX_PEAK, f"peak {peak / 2**20:.0f} MB"
    if expect == 0:
        assert code == 0, err
        return
    lines = err.splitlines()
    assert code == 2 and out == "", (code, out[:500], err[:500])
    assert len(lines) == 1 and lines[0].startswith("kvbudget: error: "), err[:1000]
    assert len(lines[0]) <= MAX_LINE, lines[0][:500]
    assert "Traceback" not in err
    assert CASES[case_id].expect_in.lower() in lines[0].lower(), (CASES[case_id].expect_in, lines[0])


def test_corpus_is_large() -> None:
    assert len(CASES) >= 500, len(CASES)
