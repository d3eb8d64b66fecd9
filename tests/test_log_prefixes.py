"""A log as a log collector hands it over reads the same as the engine printed it: every corpus log, each line
headed by a Docker/kubectl time stamp, a Compose service name, a kubectl --prefix or a journald head, gives the
figures of the bare log (before, a line starting with a digit or a lowercase letter was taken for a wrapped
continuation and joined to the line above: "max_num_batched_tokens '2048.vllm-1' is not a whole number")."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvbudget.engines.llamacpp.log import parse_llamacpp_log
from kvbudget.engines.logscan import check_other_log, strip_line_prefixes, unwrap_terminal
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


def _wrapped(text: str, width: int) -> str:
    """The log as a terminal of ``width`` columns shows it, copied: each line cut into pieces of ``width``."""
    return "".join("".join(line[i:i + width] + "\n" for i in range(0, max(len(line), 1), width))
                   for line in text.splitlines())


@pytest.mark.parametrize("width", [80, 120, 160])
@pytest.mark.parametrize(("folder", "parse"), [
    ("vllm_logs", parse_vllm_log), ("llamacpp_logs", parse_llamacpp_log), ("sglang_logs", check_other_log),
    ("trtllm_logs", check_other_log),
])
def test_every_corpus_log_reads_the_same_wrapped_by_a_terminal(width: int, folder: str, parse) -> None:  # type: ignore[no-untyped-def]
    """Wrapped at 120 columns, the 0.10.0 Qwen3-32B log's 'rope_scaling' was cut into 'rope' / '_scaling' (a line
    that starts with '_' was not taken for a continuation): check refused max_model_len 131,072 as past the
    model's 40,960 (the YaRN factor lost); SGLang's 'V size: 2.33 GB' and TensorRT-LLM's 'available: 12.22 GiB'
    were lost the same way."""
    logs = sorted((DATA / folder).glob("*.log"))
    for path in logs:
        text = path.read_text(encoding="utf-8")
        assert _outcome(parse, _wrapped(text, width)) == _outcome(parse, text), (path.name, width)


def test_a_log_of_long_lines_that_is_not_wrapped_is_left_alone() -> None:
    """Lines of one length that head records (four TP ranks' lines) are not joined; nor is an empty line."""
    rank = "(VllmWorker rank={} pid=4148421) INFO 08-07 11:12:30 [gpu_worker.py:255] Available KV cache memory: 52.21 GiB"
    text = "\n".join(rank.format(r) for r in range(4)) + "\n\nINFO done\n"
    assert unwrap_terminal(text) == text
    assert unwrap_terminal(_wrapped(text, 80)) == text
