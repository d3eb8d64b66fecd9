"""Regenerate src/kvbudget/engines/sglang/flags.json from SGLang releases' own sources (not run in CI).

kvbudget never depends on SGLang, and this script never imports it: it reads each release's wheel with
``zipfile`` and its launch parser with ``ast``. The parser of ``python -m sglang.launch_server`` (and of 0.5's
``sglang serve``) is ``sglang/srt/server_args.py ServerArgs.add_cli_args``:

- up to 0.5.13 it is a list of ``parser.add_argument(...)`` calls;
- from 0.5.14 it first calls ``add_cli_args_from_dataclass(parser, ServerArgs)`` (``sglang/srt/arg_groups/
  arg_utils.py``), which derives a flag from every field annotated ``A[T, "help"]`` or ``A[T, Arg(...)]``: the
  field's name dashed (or ``Arg.cli_name``) and ``Arg.aliases``; ``bool`` a store_true switch; ``Literal[...]``
  choices; ``List[T]`` ``nargs='+'``; a custom ``Arg.action``, ``argparse.BooleanOptionalAction`` adding
  ``--no-X``. From 0.5.20 the fields live in ``sglang/srt/arg_groups/fields/*.py`` (classes with ``_NS_PATH``).

For each option string the table keeps how many values it takes (argparse ``nargs``: 0, 1, '?', '+', '*'), its
``dest`` where it is not the option's own name, and its ``choices`` (sorted) where they are literal strings in the source;
then, per flag, the first and last release read that have it alike (``[first, last, nargs]`` or ``[first, last,
nargs, dest, choices]``, ``""`` for the option's own dest, ``null`` for no choices). ``releases`` lists every
release read, in order: a release between two of them is bracketed by them.

Get the wheels (small: 0.7 - 40 MB each), one folder per release:
    pip download -q --no-deps sglang==0.4.6 -d /tmp/sq/0.4.6
Run from the repository root:
    python3 tools/gen_sglang_flags.py /tmp/sq            # rewrite the JSON from every sglang-*.whl under /tmp/sq
    python3 tools/gen_sglang_flags.py /tmp/sq --check    # only compare; exit 1 when the file would change
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

FLAGS_JSON = Path(__file__).resolve().parents[1] / "src" / "kvbudget" / "engines" / "sglang" / "flags.json"
SOURCE = ("option strings of `python -m sglang.launch_server` in SGLang {first} - {last} (sglang/srt/server_args.py "
          "ServerArgs.add_cli_args; from 0.5.14 also the fields add_cli_args_from_dataclass reads, in server_args.py "
          "and from 0.5.20 sglang/srt/arg_groups/fields/), read from each release's wheel with ast; per flag "
          "[first release, last release, values taken (argparse nargs: 0, 1, '?', '+', '*'), dest where not the "
          "flag's own, its literal choices sorted]")
_RELEASE = re.compile(r"sglang-(\d+\.\d+\.\d+(?:\.post\d+)?)-")
_NO_VALUE_ACTIONS = {"store_true": 0, "store_false": 0, "store_const": 0, "count": 0, "append_const": 0}
_SKIPPED_ACTIONS = ("help", "version")

Nargs = int | str
Variant = tuple[Nargs, str, tuple[str, ...] | None]  # nargs, dest ("" = the option's own), choices


def release_key(version: str) -> tuple[int, ...]:
    """``0.4.6.post5`` -> (0, 4, 6, 5); a release before its posts."""
    base, _, post = version.partition(".post")
    return (*(int(p) for p in base.split(".")), int(post or 0))


def auto_dest(options: Iterable[str]) -> str:
    """argparse's dest for option strings: the first long one (else the first), dashes stripped and replaced."""
    opts = list(options)
    first = next((o for o in opts if o.startswith("--")), opts[0])
    return first.lstrip("-").replace("-", "_")


class Release:
    """One release's sources as ``ast`` trees, and the module-level names they bind to literals."""

    def __init__(self, version: str, sources: dict[str, str]):
        self.version = version
        self.trees = {path: ast.parse(text, path) for path, text in sources.items()}
        self.env: dict[str, ast.expr] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        for tree in self.trees.values():
            for node in tree.body:
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    self.env.setdefault(node.targets[0].id, node.value)
                elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                    self.env.setdefault(node.target.id, node.value)
                elif isinstance(node, ast.ClassDef):
                    self.classes.setdefault(node.name, node)

    def strings(self, node: ast.expr | None, depth: int = 0) -> tuple[str, ...] | None:
        """The literal strings an expression stands for (a list, tuple, set or dict's keys, a name bound to one,
        ``a + b``, ``list(x)``, ``sorted(x)``, ``x.keys()``), or None where it is computed at run time."""
        if node is None or depth > 8:
            return None
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            out: list[str] = []
            for e in node.elts:
                if isinstance(e, ast.Constant) and isinstance(e.value, str):
                    out.append(e.value)
                elif isinstance(e, ast.Starred):
                    inner = self.strings(e.value, depth + 1)
                    if inner is None:
                        return None
                    out.extend(inner)
                else:
                    return None
            return tuple(out)
        if isinstance(node, ast.Dict):
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            return tuple(keys) if len(keys) == len(node.keys) else None
        if isinstance(node, ast.Name) and node.id in self.env:
            return self.strings(self.env[node.id], depth + 1)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.strings(node.left, depth + 1), self.strings(node.right, depth + 1)
            return None if left is None or right is None else left + right
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("list", "tuple", "sorted") \
                and len(node.args) == 1 and not node.keywords:
            inner = self.strings(node.args[0], depth + 1)
            return None if inner is None else (tuple(sorted(inner)) if node.func.id == "sorted" else inner)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "keys" \
                and not node.args:
            return self.strings(node.func.value, depth + 1)
        return None

    def action_nargs(self, action: ast.expr) -> Nargs | None:
        """The values an ``action=`` takes by default: argparse's own by name, a custom class's ``nargs``
        default (its ``__init__``'s parameter, or the constant it hands ``super().__init__``); None: one value."""
        if isinstance(action, ast.Constant) and isinstance(action.value, str):
            return _NO_VALUE_ACTIONS.get(action.value)
        name = action.attr if isinstance(action, ast.Attribute) else action.id if isinstance(action, ast.Name) else ""
        if name == "BooleanOptionalAction":
            return 0
        cls = self.classes.get(name)
        init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None) if cls else None
        if init is None:
            return None
        args = init.args
        for arg, default in zip(reversed(args.args), reversed(args.defaults), strict=False):
            if arg.arg == "nargs" and isinstance(default, ast.Constant):
                return default.value  # type: ignore[no-any-return]
        for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
            if arg.arg == "nargs" and isinstance(kw_default, ast.Constant):
                return kw_default.value  # type: ignore[no-any-return]
        for call in ast.walk(init):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "__init__":
                for kw in call.keywords:
                    if kw.arg == "nargs" and isinstance(kw.value, ast.Constant):
                        return kw.value.value  # type: ignore[no-any-return]
        return None


def _kw(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _const(node: ast.expr | None) -> Any:
    return node.value if isinstance(node, ast.Constant) else None


def _add(found: dict[str, Variant], options: list[str], nargs: Nargs | None, dest: str | None,
         choices: tuple[str, ...] | None) -> None:
    if not options:
        return
    dest = auto_dest(options) if dest is None else str(dest)  # argparse's dest for the action
    sort = None if choices is None else tuple(sorted(set(choices)))
    for option in options:
        own = option.lstrip("-").replace("-", "_")
        found[option] = (1 if nargs is None else nargs, "" if dest == own else dest, sort)


def explicit_flags(rel: Release, found: dict[str, Variant]) -> None:
    """Every ``*.add_argument(...)`` call inside ``ServerArgs.add_cli_args`` (helpers nested in it included)."""
    cls = rel.classes.get("ServerArgs")
    funcs = [n for n in (cls.body if cls else []) if isinstance(n, ast.FunctionDef) and n.name == "add_cli_args"]
    for func in funcs:
        for call in ast.walk(func):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                    and call.func.attr == "add_argument"):
                continue
            options = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
                       and a.value.startswith("-")]
            action = _kw(call, "action")
            if _const(action) in _SKIPPED_ACTIONS:
                continue
            nargs_kw = _kw(call, "nargs")
            nargs = _const(nargs_kw) if nargs_kw is not None else (rel.action_nargs(action) if action else None)
            choices = rel.strings(_kw(call, "choices"))
            _add(found, options, nargs, _const(_kw(call, "dest")), choices)
            if isinstance(action, (ast.Attribute, ast.Name)) and getattr(action, "attr", getattr(action, "id", "")) \
                    == "BooleanOptionalAction":
                _add(found, ["--no-" + o[2:] for o in options if o.startswith("--")], 0, auto_dest(options), None)


def _unwrap(node: ast.expr) -> ast.expr:
    """``Optional[X]``, ``Union[X, None]`` and ``X | None`` -> X."""
    if isinstance(node, ast.Subscript) and _name(node.value) == "Optional":
        return _unwrap(node.slice)
    if isinstance(node, ast.Subscript) and _name(node.value) == "Union" and isinstance(node.slice, ast.Tuple):
        rest = [e for e in node.slice.elts if not (isinstance(e, ast.Constant) and e.value is None)]
        return _unwrap(rest[0]) if len(rest) == 1 else node
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        for a, b in ((node.left, node.right), (node.right, node.left)):
            if isinstance(b, ast.Constant) and b.value is None:
                return _unwrap(a)
    return node


def _name(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def field_flags(rel: Release, cls: ast.ClassDef, found: dict[str, Variant]) -> None:
    """The flags ``add_cli_args_from_dataclass`` derives from a class's ``A[T, ...]`` fields."""
    for node in cls.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        ann = node.annotation
        if not (isinstance(ann, ast.Subscript) and _name(ann.value) in ("A", "Annotated")
                and isinstance(ann.slice, ast.Tuple) and len(ann.slice.elts) >= 2):
            continue
        field = node.target.id
        raw, metas = ann.slice.elts[0], ann.slice.elts[1:]
        meta = next((m for m in metas if (isinstance(m, ast.Call) and _name(m.func) == "Arg") or isinstance(m, ast.JoinedStr)
                     or (isinstance(m, ast.Constant) and isinstance(m.value, str))), None)
        if meta is None:
            continue
        arg: dict[str, ast.expr] = {k.arg: k.value for k in meta.keywords if k.arg} if isinstance(meta, ast.Call) else {}
        if _const(arg.get("no_cli")) is True:
            continue
        cli = _const(arg.get("cli_name")) or "--" + field.replace("_", "-")
        aliases = rel.strings(arg["aliases"]) if "aliases" in arg else ()
        options = [cli, *(aliases or ())]
        dest = field
        choices = rel.strings(arg.get("choices"))
        nargs_given = _const(arg.get("nargs"))
        if "action" in arg:
            action = arg["action"]
            kwargs = arg.get("action_kwargs")
            nargs = rel.action_nargs(action)
            if isinstance(kwargs, ast.Dict):
                for k, v in zip(kwargs.keys, kwargs.values, strict=True):
                    if _const(k) == "nargs":
                        nargs = _const(v)
            _add(found, options, nargs, dest, None)
            if _name(action) == "BooleanOptionalAction":
                _add(found, ["--no-" + o[2:] for o in options if o.startswith("--")], 0, dest, None)
            continue
        inner = _unwrap(raw)
        if isinstance(inner, ast.Subscript) and _name(inner.value) == "Literal":
            values = inner.slice.elts if isinstance(inner.slice, ast.Tuple) else [inner.slice]
            literal = tuple(v.value for v in values if isinstance(v, ast.Constant) and isinstance(v.value, str))
            _add(found, options, None, dest, choices or (literal if len(literal) == len(values) else None))
        elif isinstance(inner, ast.Subscript) and _name(inner.value) in ("List", "list") and "type_parser" not in arg:
            _add(found, options, nargs_given or "+", dest, choices)
        elif _name(inner) == "bool":
            _add(found, options, 0, dest, None)
        else:
            _add(found, options, nargs_given, dest, choices)


def release_flags(rel: Release) -> dict[str, Variant]:
    """Every option string of the release's launch parser -> (nargs, dest, choices)."""
    found: dict[str, Variant] = {}
    if any("add_cli_args_from_dataclass" in ast.dump(t) for p, t in rel.trees.items() if p.endswith("server_args.py")):
        classes = [c for p, t in rel.trees.items() if "/arg_groups/fields/" in p for c in t.body
                   if isinstance(c, ast.ClassDef) and any(isinstance(n, ast.Assign) and any(
                       isinstance(t, ast.Name) and t.id == "_NS_PATH" for t in n.targets) for n in c.body)]
        server = rel.classes.get("ServerArgs")
        for cls in ([server] if server else []) + classes:
            field_flags(rel, cls, found)
    explicit_flags(rel, found)
    return found


def read_wheel(path: Path) -> Release:
    """The release's server_args.py and arg_groups/ sources from its wheel."""
    m = _RELEASE.search(path.name)
    if not m:
        raise SystemExit(f"{path}: not an sglang wheel name")
    with zipfile.ZipFile(path) as z:
        names = [n for n in z.namelist() if n == "sglang/srt/server_args.py"
                 or (n.startswith("sglang/srt/arg_groups/") and n.endswith(".py"))]
        if "sglang/srt/server_args.py" not in names:
            raise SystemExit(f"{path}: no sglang/srt/server_args.py")
        return Release(m.group(1), {n: z.read(n).decode("utf-8") for n in names})


def table(per_release: list[tuple[str, dict[str, Variant]]]) -> dict[str, list[list[Any]]]:
    """Per flag, its runs of consecutive releases alike: [first, last, nargs(, dest, choices)]."""
    out: dict[str, list[list[Any]]] = {}
    for option in sorted({o for _, flags in per_release for o in flags}):
        runs: list[list[Any]] = []
        prev: Variant | None = None
        for version, flags in per_release:
            v = flags.get(option)
            if v is not None and v == prev:
                runs[-1][1] = version
            elif v is not None:
                nargs, dest, choices = v
                runs.append([version, version, nargs] + ([dest, list(choices) if choices is not None else None]
                                                         if dest or choices is not None else []))
            prev = v
        out[option] = runs
    return out


def render(releases: list[str], flags: dict[str, list[list[Any]]]) -> str:
    """The JSON text of engines/sglang/flags.json: one flag a line, no final newline."""
    head = json.dumps({"_source": SOURCE.format(first=releases[0], last=releases[-1]), "releases": releases})
    body = ",\n".join(f"{json.dumps(o)}: {json.dumps(v, separators=(',', ':'))}" for o, v in flags.items())
    return head[:-1] + ',\n"flags": {\n' + body + "\n}}"


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(description="Regenerate engines/sglang/flags.json from SGLang wheels' sources.")
    cli.add_argument("wheels", type=Path, nargs="+", help="sglang-*.whl files, or folders searched for them")
    cli.add_argument("--check", action="store_true", help="only compare with the file; exit 1 on a difference")
    cli.add_argument("--json", type=Path, default=FLAGS_JSON, help=f"the file (default {FLAGS_JSON})")
    opts = cli.parse_args(argv)

    paths = sorted({p for w in opts.wheels for p in ([w] if w.is_file() else w.rglob("sglang-*.whl"))})
    by_version: dict[str, Path] = {}
    for p in paths:
        m = _RELEASE.search(p.name)
        if m:
            by_version.setdefault(m.group(1), p)
    if not by_version:
        print("no sglang-*.whl found", file=sys.stderr)
        return 2
    per_release = []
    for version in sorted(by_version, key=release_key):
        flags = release_flags(read_wheel(by_version[version]))
        print(f"{version}: {len(flags)} option strings")
        per_release.append((version, flags))
    releases = [v for v, _ in per_release]
    text = render(releases, table(per_release))
    old = opts.json.read_text(encoding="utf-8") if opts.json.exists() else ""
    if text == old:
        print(f"{opts.json}: up to date ({len(releases)} releases)")
        return 0
    if opts.check:
        print(f"{opts.json}: would change")
        return 1
    opts.json.write_text(text, encoding="utf-8")
    print(f"{opts.json}: written, {len(releases)} releases, {len(text)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
