"""Write src/kvbudget/engines/vllm/compile_keys.json: the keys --compilation-config takes in each vLLM release.

Usage: python tools/gen_vllm_compile_keys.py DIR [--write]

DIR holds one folder per release named by its version (``0.8.5``, ``0.10.1``, ``0.33.0`` ...), each with the
release's ``vllm`` package unpacked from its wheel (``vllm/config.py`` up to 0.10.0, ``vllm/config/compilation.py``
from 0.10.1). The keys are CompilationConfig's init fields, read with ``ast`` (no vLLM import): annotated class
attributes, less ``ClassVar``s, ``PrivateAttr``s and ``field(..., init=False)``. Each key is written with the first
and last release of DIR that has it; a key that leaves and comes back is an error (one span per key).
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "src" / "kvbudget" / "engines" / "vllm" / "compile_keys.json"


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(p) for p in name.split("."))


def init_fields(source: str) -> list[str]:
    """The init fields of ``class CompilationConfig`` in a module's source."""
    tree = ast.parse(source)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "CompilationConfig")
    out = []
    for node in cls.body:
        if not isinstance(node, ast.AnnAssign) or not isinstance(node.target, ast.Name):
            continue
        if "ClassVar" in ast.unparse(node.annotation):
            continue
        value = node.value
        if isinstance(value, ast.Call):
            func = ast.unparse(value.func)
            if func.endswith("PrivateAttr") or any(
                    k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False
                    for k in value.keywords):
                continue
        elif isinstance(value, ast.Name) and value.id == "PrivateAttr":
            continue
        out.append(node.target.id)
    return out


def spans(root: Path) -> dict[str, list[str]]:
    versions = sorted((d.name for d in root.iterdir() if (d / "vllm").is_dir()), key=_version_key)
    fields = {}
    for v in versions:
        path = root / v / "vllm" / "config" / "compilation.py"
        if not path.exists():
            path = root / v / "vllm" / "config.py"
        fields[v] = init_fields(path.read_text(encoding="utf-8"))
    out = {}
    for key in sorted({k for names in fields.values() for k in names}):
        have = [i for i, v in enumerate(versions) if key in fields[v]]
        if have != list(range(have[0], have[-1] + 1)):
            raise SystemExit(f"{key}: not in one span of releases ({[versions[i] for i in have]})")
        out[key] = [versions[have[0]], versions[have[-1]]]
    return out


def main(argv: list[str]) -> int:
    keys = spans(Path(argv[0]))
    text = json.dumps({"_source": json.loads(OUT.read_text(encoding="utf-8"))["_source"], "keys": keys},
                      indent=1, sort_keys=True) + "\n"
    if "--write" in argv:
        OUT.write_text(text, encoding="utf-8")
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
