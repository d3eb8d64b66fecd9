"""The README's command examples: each ``$ kvbudget ...`` line in a fenced block is followed by
exactly what that command prints (stdout, or stderr for errors). ``| head -N`` keeps N lines and
adds a "…" line. Used by tests/test_readme.py (the README must stay true) and by
``python -m kvbudget._readme README.md`` (rewrite the outputs after a change)."""

from __future__ import annotations

import contextlib
import io
import shlex
import sys

from .cli import main


def run(command: str) -> str:
    """What ``$ kvbudget ...`` prints, with ``| head -N`` applied."""
    head = None
    if "| head -" in command:
        command, _, n = command.partition("| head -")
        head = int(n)
    argv = shlex.split(command)[1:]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        main(argv)
    lines = (out.getvalue() + err.getvalue()).rstrip("\n").split("\n")
    if head is not None and len(lines) > head:
        lines = [*lines[:head], "…"]
    return "\n".join(lines)


def render(text: str) -> str:
    """The README with every example's output replaced by what the command prints now."""
    out: list[str] = []
    lines = text.split("\n")
    i = 0
    in_block = False
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            in_block = not in_block
            out.append(line)
            i += 1
            continue
        if in_block and line.startswith("$ kvbudget"):
            out.append(line)
            out.extend(run(line[2:]).split("\n"))
            i += 1
            while i < len(lines) and not lines[i].startswith(("$ kvbudget", "```")):
                i += 1
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


if __name__ == "__main__":  # pragma: no cover
    path = sys.argv[1] if len(sys.argv) > 1 else "README.md"
    with open(path, encoding="utf-8") as f:
        old = f.read()
    new = render(old)
    with open(path, "w", encoding="utf-8") as f:
        f.write(new)
    print("README examples " + ("updated" if new != old else "already current"))
