"""Regenerate src/kvbudget/engines/llamacpp/flags.json from llama.cpp's common/arg.cpp (not run in CI).

kvbudget never depends on llama.cpp. llama-server's parser (common/arg.cpp ``common_params_parser_init``) is a
list of ``add_opt(common_arg({names...}, [{negated names...}], [VALUE, [VALUE2]], help, handler)...)`` calls,
each kept for llama-server when its ``set_examples`` names ``LLAMA_EXAMPLE_SERVER`` or ``LLAMA_EXAMPLE_COMMON`` (the
default) and its ``set_excludes`` does not name the server. This script reads those calls from the source text
and writes, for each flag name, how many words follow it: 0 for a switch (a handler of ``params`` alone, or a
negatable ``bool`` one), else the handler's parameters after ``params`` (1, or 2 for ``handler_str_str``). Flags
whose handler only calls ``arg_removed(...)`` (llama-server stops: "the argument has been removed") are listed
apart with the flag to use instead.

Two sources, both llama.cpp as llama-cpp-python's sdist vendors it (vendor/llama.cpp/common/arg.cpp):
    pip download --no-deps --no-binary :all: llama_cpp_python==0.3.36   # llama.cpp 0c1e57098 = build b11312
    pip download --no-deps --no-binary :all: llama_cpp_python==0.3.16   # llama.cpp 4227c9be (2025-08-14, before b6325)
Run from the repository root with the two unpacked arg.cpp files:
    python tools/gen_llamacpp_flags.py NEW/arg.cpp OLD/arg.cpp           # rewrite the JSON
    python tools/gen_llamacpp_flags.py NEW/arg.cpp OLD/arg.cpp --check   # exit 1 when the file would change
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

FLAGS_JSON = Path(__file__).resolve().parents[1] / "src" / "kvbudget" / "engines" / "llamacpp" / "flags.json"
NEW_BUILD = 11312
SOURCE = ("option names of llama-server (LLAMA_EXAMPLE_SERVER) in llama.cpp's common/arg.cpp "
          "common_params_parser_init; value = the words that follow the flag (0: a switch). 'server': llama.cpp "
          "commit 0c1e57098 = build b11312 (as vendored in llama-cpp-python 0.3.36); 'server_2025_08': commit "
          "4227c9be of 2025-08-14, before b6325 (llama-cpp-python 0.3.16); 'server_removed': flags b11312 keeps only "
          "to stop with 'the argument has been removed', and what to use instead")
_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')


def _call_items(src: str, start: int) -> tuple[list[str], int]:
    """The top-level comma-separated items of the call whose '(' is just before ``start``; the index of its ')'."""
    depth, items, cur, j = 0, [], start, start
    while True:
        c = src[j]
        if src.startswith("//", j):
            j = src.index("\n", j)
            continue
        if c in "\"'":
            j += 1
            while src[j] != c:
                j += 2 if src[j] == "\\" else 1
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                items.append(src[cur:j])
                return items, j
            depth -= 1
        elif c == "," and depth == 0:
            items.append(src[cur:j])
            cur = j + 1
        j += 1


def server_flags(path: str) -> tuple[dict[str, int], dict[str, str]]:
    """(flag -> words after it, removed flag -> what to use instead) for llama-server in one arg.cpp."""
    src = Path(path).read_text()
    flags: dict[str, int] = {}
    removed: dict[str, str] = {}
    head = "add_opt(common_arg("
    pos = src.find(head)
    while pos >= 0:
        items, close = _call_items(src, pos + len(head))
        chain = src[close + 1:src.index(");\n", close)]
        names = _LITERAL.findall(items[0])
        handler = items[-1]
        negated = _LITERAL.findall(items[1]) if items[1].strip().startswith("{") else []
        params = handler[handler.index("(") + 1:handler.index(")")]
        words = 0 if negated or "bool" in params else params.count(",")
        examples = re.search(r"set_examples\(\{([^}]*)\}\)", chain)
        excludes = re.search(r"set_excludes\(\{([^}]*)\}\)", chain)
        kept = (not examples or any(e in examples.group(1) for e in ("LLAMA_EXAMPLE_SERVER", "LLAMA_EXAMPLE_COMMON"))) \
            and not (excludes and "LLAMA_EXAMPLE_SERVER" in excludes.group(1))
        if kept:
            flags.update({n: words for n in names})
            flags.update({n: 0 for n in negated})
            gone = re.search(r'arg_removed\("([^"]*)"\)', handler)
            if gone:
                removed.update({n: gone.group(1) for n in names})
        pos = src.find(head, close)
    return flags, removed


def build(new: str, old: str) -> dict[str, Any]:
    flags, removed = server_flags(new)
    old_flags, _ = server_flags(old)
    return {"_source": SOURCE, "build": NEW_BUILD, "server": dict(sorted(flags.items())),
            "server_removed": dict(sorted(removed.items())), "server_2025_08": dict(sorted(old_flags.items()))}


def main(argv: list[str]) -> int:
    doc = build(argv[0], argv[1])
    text = json.dumps(doc, indent=0) + "\n"
    if "--check" in argv:
        same = FLAGS_JSON.read_text() == text
        print("flags.json is up to date" if same else "flags.json would change")
        return 0 if same else 1
    FLAGS_JSON.write_text(text)
    print(f"wrote {FLAGS_JSON}: {len(doc['server'])} flags (b{NEW_BUILD}), {len(doc['server_2025_08'])} (2025-08)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
