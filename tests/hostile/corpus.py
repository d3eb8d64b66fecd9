"""The hostile-input corpus: each case writes the files it needs under a fresh folder and gives the
command line that reads them. Every case must end in exit code 2 and one line on stderr naming the
problem (or, where ``expect`` is 0, be accepted: e.g. llama.cpp's ``-ub 0`` means "the default").

Cases are generated, not stored: the ``gen_*.py`` modules beside this file each register theirs with
``@case`` or ``add``. Keep each generator small and deterministic (no randomness without a seed)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

Builder = Callable[[Path], list[str]]


@dataclass(frozen=True)
class Case:
    id: str
    build: Builder  # writes files under the folder it is given, returns the argv for kvbudget
    expect: int = 2
    stdin: bytes | None = None
    expect_in: str = ""  # a piece of the error line the case is about (case-insensitive), so that it cannot pass
    #                      on some other error


CASES: dict[str, Case] = {}


def add(case_id: str, build: Builder, expect: int = 2, stdin: bytes | None = None, expect_in: str = "") -> None:
    if case_id in CASES:
        raise ValueError(f"duplicate hostile case id {case_id}")
    CASES[case_id] = Case(case_id, build, expect, stdin, expect_in)


def argv(case_id: str, args: Iterable[str], expect: int = 2, expect_in: str = "") -> None:
    """A case that needs no files."""
    fixed = list(args)
    add(case_id, lambda _root: list(fixed), expect, expect_in=expect_in)


def write(root: Path, name: str, data: str | bytes) -> str:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return str(path)


def load_all() -> dict[str, Case]:
    """Import every generator module (they register on import) and return the corpus."""
    import importlib
    import pkgutil

    here = Path(__file__).parent
    for info in sorted(pkgutil.iter_modules([str(here)]), key=lambda m: m.name):
        if info.name.startswith("gen_"):
            importlib.import_module(info.name)
    return CASES
