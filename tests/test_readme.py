"""The README tells the truth: every `$ kvbudget ...` example shows what the command prints now,
the Python API example gives the values its comments state, and both set-up commands are there."""

from __future__ import annotations

import ast
from pathlib import Path

from kvbudget import _readme

README = Path(__file__).resolve().parent.parent / "README.md"


def test_command_examples_match_what_kvbudget_prints() -> None:
    text = README.read_text(encoding="utf-8")
    assert text.count("$ kvbudget") >= 8
    assert _readme.render(text) == text, "README examples are stale: run python -m kvbudget._readme README.md"


def test_readme_opens_with_the_two_commands() -> None:
    head = README.read_text(encoding="utf-8").split("## ")[0]
    assert "make run" in head and "make test" in head


def test_python_api_example_values() -> None:
    text = README.read_text(encoding="utf-8")
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, object] = {}
    checked = 0
    for line in code.splitlines():
        statement, _, comment = line.partition("#")
        statement = statement.strip()
        if not statement:
            continue
        comment = comment.strip()
        literal = comment if comment.startswith("(") else comment.split(" (")[0]
        try:
            expected = ast.literal_eval(literal) if literal[:1] in "{(0123456789" else None
        except (ValueError, SyntaxError):
            expected = None
        if "=" in statement.split("(")[0] or statement.startswith("import"):
            exec(statement, namespace)
        elif expected is not None:
            assert eval(statement, namespace) == expected, statement
            checked += 1
    assert checked == 10


def test_quick_start_has_three_commands_and_the_output_is_explained() -> None:
    text = README.read_text(encoding="utf-8")
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert quick.count("$ kvbudget ") == 3  # each re-run by test_command_examples_match_what_kvbudget_prints
    reading = text.split("## How to read the output", 1)[1].split("\n## ", 1)[0]
    for term in ("55.34x", "headroom", "ckpt", "exact", "modelled", "calibrated"):
        assert f"{term}`" in reading, term
    assert "55.34x" in quick and "headroom" in quick and "ckpt" in quick  # the terms explained are in the examples


def test_linked_docs_exist() -> None:
    import re

    text = README.read_text(encoding="utf-8")
    links = {link.split("#")[0] for link in re.findall(r"\]\((docs/[^)]+)\)", text)}
    assert {"docs/json-schema.md", "docs/validation.md", "docs/internals.md"} <= links
    assert all((README.parent / link).is_file() for link in links)


def test_no_word_from_outside_the_project() -> None:
    import re

    # the research notes and seed documents live outside this repository: cite engine sources or public URLs instead
    outside = re.compile("shared/(research|seeds)|engines" + r"\.md|seed 0[0-9]{2}|the seed" + "'s")
    root = README.parent
    files = [README, *root.glob("docs/*.md"), *root.glob("src/**/*.py"), *root.glob("tests/**/*.py")]
    hits = [f"{p.relative_to(root)}:{n}" for p in files
            for n, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1) if outside.search(line)]
    assert not hits, hits


def test_figures_quoted_in_the_prose_are_the_ones_the_examples_print() -> None:
    """The prose quotes figures of the examples above it: each must be the one the example prints (the quick
    start's whole requests, the levers example's added requests) or the catalog's own count."""
    import re

    from kvbudget.hardware import gpus

    text = README.read_text()
    quick = re.search(r"Maximum concurrency for 8,192 tokens per request: ([\d.]+)x\n\nRequests of 8,192 tokens held "
                      r"at once: (\d+)", text)
    assert quick is not None
    assert int(quick.group(2)) == int(float(quick.group(1)))  # whole requests of vLLM's concurrency
    assert f"`Requests of 8,192\n  tokens held at once: {quick.group(2)}`" in text
    assert f"Every GPU type (the catalog's {len(gpus())}," in text
    added = re.search(r"1/2 of every sequence: vLLM fits \+(\d+)", text)
    assert added is not None
    assert f"vLLM fits {added.group(1)} more." in text
