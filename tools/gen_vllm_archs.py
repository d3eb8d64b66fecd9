"""Write src/kvbudget/engines/vllm/archs.json: the first vLLM release (of the wheels read) whose model registry lists
each architecture (the ``architectures`` names of config.json), so that a plan on an older release is refused as
vLLM refuses it at start-up ("Model architectures [...] are not supported for now").

Reads each release's registry as published on PyPI (vllm/model_executor/models/registry.py from 0.5, the _MODELS
tables of models/__init__.py before), never imports vLLM. Usage:

    pip download -q --no-deps vllm==X -d DIR/X      # for each release to read
    python tools/gen_vllm_archs.py DIR [SRC_TREE_OF_NEWEST VERSION]

Outside CI: the committed JSON is the test data."""

from __future__ import annotations

import json
import re
import sys
import zipfile
from pathlib import Path

KEY = re.compile(r'^\s+"([A-Z][A-Za-z0-9_]+)": \(', re.M)
FILES = ("vllm/model_executor/models/registry.py", "vllm/model_executor/models/__init__.py")
OUT = Path(__file__).resolve().parent.parent / "src" / "kvbudget" / "engines" / "vllm" / "archs.json"


def _version(name: str) -> tuple[int, ...] | None:
    m = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", name)
    return tuple(int(x) for x in m.groups()) if m else None


def _archs(texts: list[str]) -> set[str]:
    return {k for t in texts for k in KEY.findall(t)}


def main() -> None:
    root = Path(sys.argv[1])
    releases: dict[tuple[int, ...], set[str]] = {}
    for d in sorted(root.iterdir()):
        v = _version(d.name)
        wheels = list(d.glob("vllm-*.whl")) if d.is_dir() else []
        if v is None or not wheels:
            continue
        with zipfile.ZipFile(wheels[0]) as z:
            texts = [z.read(f).decode() for f in FILES if f in z.namelist()]
        found = _archs(texts)
        if found:
            releases[v] = found
    if len(sys.argv) > 3:  # the newest release from an unpacked source tree
        tree, v = Path(sys.argv[2]), _version(sys.argv[3])
        assert v is not None
        releases[v] = _archs([(tree / f.removeprefix("vllm/")).read_text() for f in FILES
                              if (tree / f.removeprefix("vllm/")).exists()])
    order = sorted(releases)
    first: dict[str, str] = {}
    for v in order:
        for arch in sorted(releases[v]):
            first.setdefault(arch, ".".join(map(str, v)))
    data = {"source": "vllm/model_executor/models/registry.py (models/__init__.py before 0.5) of each release's "
                      "PyPI wheel, read by tools/gen_vllm_archs.py",
            "releases": [".".join(map(str, v)) for v in order],
            "first_listed": dict(sorted(first.items()))}
    OUT.write_text(json.dumps(data, indent=1) + "\n")
    print(f"{len(order)} releases, {len(first)} architectures -> {OUT}")


if __name__ == "__main__":
    main()
