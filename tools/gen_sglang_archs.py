"""Write src/kvbudget/engines/sglang/archs.json: the first SGLang release (of the wheels read) whose models
register each architecture (the ``EntryClass`` of each srt/models/*.py, which its model registry loads by class
name), so that a plan on an older release line is refused as SGLang refuses the model at start-up.

Reads each release's PyPI wheel, never imports SGLang. Usage:

    pip download -q --no-deps sglang==X -d DIR/X      # for each release to read
    python tools/gen_sglang_archs.py DIR

Outside CI: the committed JSON is the test data."""

from __future__ import annotations

import json
import re
import sys
import zipfile
from pathlib import Path

ENTRY = re.compile(r"^EntryClass\s*=\s*(\[[^\]]*\]|[A-Za-z_][A-Za-z0-9_]*)", re.M)
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
OUT = Path(__file__).resolve().parent.parent / "src" / "kvbudget" / "engines" / "sglang" / "archs.json"


def _version(name: str) -> tuple[int, ...] | None:
    m = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)(?:\.post(\d+))?", name)
    return tuple(int(x or 0) for x in m.groups()) if m else None


def main() -> None:
    root = Path(sys.argv[1])
    releases: dict[tuple[int, ...], set[str]] = {}
    for d in sorted(root.iterdir()):
        v = _version(d.name)
        wheels = list(d.glob("sglang-*.whl")) if d.is_dir() else []
        if v is None or not wheels:
            continue
        found: set[str] = set()
        with zipfile.ZipFile(wheels[0]) as z:
            for f in z.namelist():
                if f.startswith("sglang/srt/models/") and f.endswith(".py"):
                    for m in ENTRY.finditer(z.read(f).decode(errors="replace")):
                        found |= set(NAME.findall(m.group(1)))
        if found:
            releases[v] = found
    order = sorted(releases)
    first: dict[str, str] = {}
    for v in order:
        for arch in sorted(releases[v]):
            first.setdefault(arch, _show(v))
    data = {"source": "the EntryClass of each sglang/srt/models/*.py in each release's PyPI wheel, read by "
                      "tools/gen_sglang_archs.py",
            "releases": [_show(v) for v in order],
            "first_listed": dict(sorted(first.items()))}
    OUT.write_text(json.dumps(data, indent=1) + "\n")
    print(f"{len(order)} releases, {len(first)} architectures -> {OUT}")


def _show(v: tuple[int, ...]) -> str:
    return ".".join(map(str, v[:3])) + (f".post{v[3]}" if v[3] else "")


if __name__ == "__main__":
    main()
