"""A log as a log collector hands it over reads the same as the engine printed it: every corpus log, each line
headed by a Docker/kubectl time stamp, a Compose service name, a kubectl --prefix or a journald head, gives the
figures of the bare log (before, a line starting with a digit or a lowercase letter was taken for a wrapped
continuation and joined to the line above: "max_num_batched_tokens '2048.vllm-1' is not a whole number")."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvbudget.engines.llamacpp.log import parse_llamacpp_log
from kvbudget.engines.logscan import check_other_log, strip_line_prefixes
from kvbudget.engines.vllm.log import parse_vllm_log
from kvbudget.units import InputError

DATA = Path(__file__).parent / "data"
PREFIXES = {
    "docker -t": "2026-12-01T10:00:00.123456789Z ",
    "kubectl --timestamps": "2026-12-01T10:00:00+01:00 ",
    "compose": "vllm-1  | ",
    "kubectl --prefix": "[pod/vllm-0/server] ",
    "journald": "Dec  1 10:00:00 gpu-node docker[1234]: ",
}


def _prefixed(text: str, prefix: str) -> str:
    return "".join(prefix + line for line in text.splitlines(keepends=True))


def _outcome(parse, text: str) -> object:  # type: ignore[no-untyped-def]
    try:
        return parse(text)
    except InputError as exc:
        return f"error: {exc}"


@pytest.mark.parametrize("kind", sorted(PREFIXES))
@pytest.mark.parametrize(("folder", "parse"), [
    ("vllm_logs", parse_vllm_log), ("llamacpp_logs", parse_llamacpp_log), ("sglang_logs", check_other_log),
    ("trtllm_logs", check_other_log),
])
def test_every_corpus_log_reads_the_same_under_a_collectors_prefix(kind: str, folder: str, parse) -> None:  # type: ignore[no-untyped-def]
    logs = sorted((DATA / folder).glob("*.log"))
    assert len(logs) >= 10
    for path in logs:
        text = path.read_text(encoding="utf-8")
        assert _outcome(parse, _prefixed(text, PREFIXES[kind])) == _outcome(parse, text), (path.name, kind)


def test_a_prefix_on_a_few_lines_only_is_left_alone() -> None:
    text = "INFO a\nINFO b\nINFO c\n2026-12-01T10:00:00Z INFO d\n"
    assert strip_line_prefixes(text) == text
    assert strip_line_prefixes(_prefixed(text, "vllm-1  | ")) == text
