"""Regenerate src/kvbudget/engines/vllm/flags.json from a vLLM release's own `vllm serve` parser (not run in CI).

kvbudget never depends on vLLM. This script builds the parser `vllm serve` uses, the way vLLM builds it
(``FlexibleArgumentParser`` handed to ``vllm/entrypoints/common/cli_args.py make_arg_parser``, which
``vllm/entrypoints/cli/serve.py ServeSubcommand.subparser_init`` calls), walks its argparse actions and
writes every option string as ``[dest, takes_value]`` (takes_value: the action's ``nargs`` is not 0),
sorted, with ``_source`` naming ``vllm.__version__`` and the function read. ``-h/--help`` is left out. The
``historical`` section (flags of older releases that kvbudget still reads) and its ``_historical_source``
are carried over from the existing file untouched: when a release drops a flag that old commands still
use, add it there by hand (the script lists what was removed).

Set up (CPU only, no CUDA download), as for tools/vllm_conformance.py:
    python3 -m venv /tmp/vllmenv && /tmp/vllmenv/bin/pip install torch==2.13.0
    VLLM_TARGET_DEVICE=cpu /tmp/vllmenv/bin/pip install --no-deps vllm==0.33.0   # then the few packages its imports ask for
Run from the repository root:
    VLLM_TARGET_DEVICE=cpu /tmp/vllmenv/bin/python tools/gen_vllm_flags.py           # rewrite the JSON
    VLLM_TARGET_DEVICE=cpu /tmp/vllmenv/bin/python tools/gen_vllm_flags.py --check   # only compare
--check exits 1 when the file would change, printing the flags added, removed and changed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

FLAGS_JSON = Path(__file__).resolve().parents[1] / "src" / "kvbudget" / "engines" / "vllm" / "flags.json"
SOURCE = ("option strings of `vllm serve` in vLLM {version} ({function}), listed with argparse;"
          " dest = the engine argument, value = whether the flag takes a value")
# Actions that are no flag of the server (argparse's own).
_SKIPPED = (argparse._HelpAction, argparse._VersionAction)

Flags = dict[str, tuple[str, bool]]


def flags_of(parser: argparse.ArgumentParser) -> Flags:
    """Every option string of ``parser`` -> (dest, whether it takes a value), sorted by option string."""
    found: Flags = {}
    for action in parser._actions:
        if isinstance(action, _SKIPPED):
            continue
        for option in action.option_strings:
            found[option] = (action.dest, action.nargs != 0)
    return dict(sorted(found.items()))


def render(source: str, flags: Flags, historical_source: str, historical: dict[str, bool]) -> str:
    """The JSON text of engines/vllm/flags.json, byte for byte as committed (indent 0, no final newline);
    the arguments come in the file's order, as ``parse`` returns them."""
    data: dict[str, Any] = {
        "_source": source,
        "flags": {option: [dest, value] for option, (dest, value) in sorted(flags.items())},
        "_historical_source": historical_source,
        "historical": historical,  # hand-kept order
    }
    return json.dumps(data, indent=0)


def parse(text: str) -> tuple[str, Flags, str, dict[str, bool]]:
    """Read engines/vllm/flags.json back: (source, flags, historical source, historical)."""
    data = json.loads(text)
    flags = {option: (str(v[0]), bool(v[1])) for option, v in data["flags"].items()}
    historical = {option: bool(v) for option, v in data["historical"].items()}
    return str(data["_source"]), flags, str(data["_historical_source"]), historical


def differences(old: Flags, new: Flags) -> list[str]:
    """One line per flag added, removed or changed from ``old`` to ``new``."""
    lines = [f"+ {o} {list(new[o])}" for o in sorted(new.keys() - old.keys())]
    lines += [f"- {o} {list(old[o])}" for o in sorted(old.keys() - new.keys())]
    lines += [f"~ {o} {list(old[o])} -> {list(new[o])}" for o in sorted(old.keys() & new.keys()) if old[o] != new[o]]
    return lines


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(description="Regenerate engines/vllm/flags.json from vLLM's `vllm serve` parser.")
    cli.add_argument("--check", action="store_true", help="only compare with the file; exit 1 on a difference")
    cli.add_argument("--json", type=Path, default=FLAGS_JSON, help=f"the file (default {FLAGS_JSON})")
    opts = cli.parse_args(argv)

    import vllm
    from vllm.entrypoints.common.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    function = f"{make_arg_parser.__module__.replace('.', '/')}.py {make_arg_parser.__name__}"
    new_flags = flags_of(parser)

    old_text = opts.json.read_text(encoding="utf-8")
    old_source, old_flags, historical_source, historical = parse(old_text)
    new_source = SOURCE.format(version=vllm.__version__, function=function)
    new_text = render(new_source, new_flags, historical_source, historical)

    changes = differences(old_flags, new_flags)
    for line in changes:
        print(line)
    if old_source != new_source:
        print(f"_source: {old_source!r}\n      -> {new_source!r}")
    for option in sorted(historical.keys() & new_flags.keys()):
        print(f"note: historical {option} is a flag of vLLM {vllm.__version__} too (the flags entry wins)")
    removed = sorted(old_flags.keys() - new_flags.keys() - historical.keys())
    if removed:
        print(f"note: {len(removed)} removed flag(s) not in historical; add those old commands still use by hand")
    if new_text == old_text:
        print(f"{opts.json}: up to date with vLLM {vllm.__version__} ({len(new_flags)} flags)")
        return 0
    if not changes and old_source == new_source:
        print(f"{opts.json}: same flags, different formatting")
    if opts.check:
        return 1
    opts.json.write_text(new_text, encoding="utf-8")
    print(f"{opts.json}: written, {len(new_flags)} flags from vLLM {vllm.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
