"""A log as a log collector hands it over reads the same as the engine printed it: every corpus log, each line
headed by a Docker/kubectl time stamp, a Compose service name, a kubectl --prefix or a journald head, gives the
figures of the bare log (before, a line starting with a digit or a lowercase letter was taken for a wrapped
continuation and joined to the line above: "max_num_batched_tokens '2048.vllm-1' is not a whole number")."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvbudget.engines.llamacpp.log import parse_llamacpp_log
from kvbudget.engines.logscan import check_other_log, json_records, strip_line_prefixes, unwrap_terminal
from kvbudget.engines.vllm.log import parse_vllm_log
from kvbudget.units import InputError

DATA = Path(__file__).parent / "data"
PREFIXES = {
    "docker -t": "2026-12-01T10:00:00.123456789Z ",
    "kubectl --timestamps": "2026-12-01T10:00:00+01:00 ",
    "compose": "vllm-1  | ",
    "kubectl --prefix": "[pod/vllm-0/server] ",
    "journald": "Dec  1 10:00:00 gpu-node docker[1234]: ",
    # hostile round 15: these were joined to the line above (a line starting with a digit or a lowercase word read as
    # a wrapped continuation): "max_num_batched_tokens '2048.stderr' is not a whole number"
    "CRI log file": "2026-12-01T10:00:00.123456789Z stderr F ",
    "journalctl -o short-iso": "2026-12-01T10:00:00+0100 gpu-node vllm[1234]: ",
    "journalctl -o short-precise": "Dec 01 10:00:00.123456 gpu-node vllm[1234]: ",
    "ts / a shipper": "2026-12-01 10:00:00,123 | ",
    # an issue's raw Markdown: each line quoted
    "markdown quote": "> ",
}


def _prefixed(text: str, prefix: str) -> str:
    return "".join(prefix + line for line in text.splitlines(keepends=True))


def _outcome(parse, text: str) -> object:  # type: ignore[no-untyped-def]
    try:
        return parse(text)
    except InputError as exc:
        return f"error: {exc}"


def _sglang_run(text: str) -> object:
    """The run check reads from an SGLang log (settings, release line, figures)."""
    from kvbudget.engines.logscan import open_log
    from kvbudget.engines.sglang.log import read_run

    return read_run(open_log(text, "SGLang"))


def _trtllm_run(text: str) -> object:
    from kvbudget.engines.logscan import open_log
    from kvbudget.engines.trtllm.log import read_run

    return read_run(open_log(text, "TensorRT-LLM"))


@pytest.mark.parametrize("kind", sorted(PREFIXES))
@pytest.mark.parametrize(("folder", "parse"), [
    ("vllm_logs", parse_vllm_log), ("llamacpp_logs", parse_llamacpp_log), ("sglang_logs", check_other_log),
    ("trtllm_logs", check_other_log), ("sglang_logs", _sglang_run), ("trtllm_logs", _trtllm_run),
])
def test_every_corpus_log_reads_the_same_under_a_collectors_prefix(kind: str, folder: str, parse) -> None:  # type: ignore[no-untyped-def]
    logs = sorted((DATA / folder).glob("*.log"))
    assert len(logs) >= 10
    for path in logs:
        text = path.read_text(encoding="utf-8")
        assert _outcome(parse, _prefixed(text, PREFIXES[kind])) == _outcome(parse, text), (path.name, kind)


def test_a_markdown_code_blocks_indent_is_taken_off_only_where_every_line_has_it() -> None:
    text = "INFO a: 1\n  File x\n\nINFO b: 2\n"
    assert strip_line_prefixes(_prefixed(text, "    ")) == "INFO a: 1\n  File x\n\nINFO b: 2\n"
    assert strip_line_prefixes(_prefixed(text, "\t")) == text
    traceback = "Traceback:\n    raise X\n    raise Y\n    raise Z\n"  # a traceback's own indent stays
    assert strip_line_prefixes(traceback) == traceback
    path = DATA / "vllm_logs" / "v0.10.1.1_a100-80gb-x2_qwen2-7b_tp2_gmu0.5.log"
    log = path.read_text(encoding="utf-8")
    assert parse_vllm_log(_prefixed(log, "    ")) == parse_vllm_log(log)


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


def _filled(text: str, width: int, keep_blank: bool) -> str:
    """The log as ``fold -s -w width`` (``keep_blank``: the blank stays at the line's end) or an editor's hard wrap
    (the blank dropped) writes it: each line broken at its last blank before ``width``, a word longer than
    ``width`` cut."""
    out = []
    for line in text.splitlines():
        while len(line) > width:
            cut = line.rfind(" ", 0, width)
            if cut <= 0:
                out.append(line[:width])
                line = line[width:]
                continue
            out.append(line[:cut + 1] if keep_blank else line[:cut])
            line = line[cut + 1:]
        out.append(line)
    return "\n".join(out) + "\n"


# Corpus logs a wrap between words cannot be told from: a record whose line ends in a blank and is followed by a
# piece of a record without its head (the 0.6.4 excerpt's "...gpu_memory_utilization=0.90 " / "GPU blocks: 1952"), a
# journald head of non-ASCII month names ("9月 02 14:47:57 host ollama[1]: "), a traceback's unindented lines
UNFILLABLE = {"v0.6.4_rtx3090_llama3.1-8b_len20000.log", "ollama_2025-09_cpu_qwen3-8b_unified.log",
              "v0.23.0_48gb_llama3.2-1b_len4096_flashinfer-jit-fail.log", "v0.7.2_rtx4090x2_r1-distill-qwen-14b_tp2_fail.log",
              # a pasted command whose words are three blanks apart: fold -s breaks it inside a run of blanks, which
              # unwrap_words does not rejoin at 80 columns (the same command one blank apart reads the same wrapped)
              "v0.19.0_a100-80gb_gemma-4-26b-a4b_len131072_eager.log",
              # at 80 columns the run's TypeError breaks before "'array.array' is not subscriptable", which is not
              # joined back: only the failure's text differs (other_failure), every figure reads the same
              "v0.27.1_h100_qwen3.6-27b-fp8_len4096_gmu0.88_eager_warmup-fail.log"}


@pytest.mark.parametrize("width", [80, 120, 160])
@pytest.mark.parametrize(("folder", "parse"), [
    ("vllm_logs", parse_vllm_log), ("llamacpp_logs", parse_llamacpp_log), ("sglang_logs", check_other_log),
    ("trtllm_logs", check_other_log),
])
def test_every_corpus_log_reads_the_same_wrapped_between_words(width: int, folder: str, parse) -> None:  # type: ignore[no-untyped-def]
    """Wrapped by fold -s (the blank kept at each line's end), each corpus log as printed (not one a terminal
    wrapped already) reads the same."""
    for path in sorted((DATA / folder).glob("*.log")):
        text = path.read_text(encoding="utf-8")
        if path.name in UNFILLABLE or unwrap_terminal(text.replace("\r", "")) != text.replace("\r", ""):
            continue
        assert _outcome(parse, _filled(text, width, True)) == _outcome(parse, text), (path.name, width)


@pytest.mark.parametrize(("width", "keep_blank"), [(72, False), (80, True), (80, False), (100, False), (120, True)])
def test_a_log_wrapped_between_words_keeps_its_settings(width: int, keep_blank: bool) -> None:
    """Wrapped by fold -s or an editor (the blank dropped) at 80 columns, the 0.10.0 Qwen3-32B log's non-default
    args were cut between words ('rope_scaling': {'rope_type': / 'yarn', ...}): the YaRN factor lost, check refused
    max_model_len 131,072 as past the model's 40,960 (exit 2, a wrong reason); 'GPU KV cache size: 855,344' /
    'tokens' was read glued."""
    text = (DATA / "vllm_logs" / "v0.10.0_h100x4_qwen3-32b_tp4_yarn4_len131072_gmu0.95.log").read_text(encoding="utf-8")
    assert parse_vllm_log(_filled(text, width, keep_blank)) == parse_vllm_log(text)


def test_a_log_of_short_lines_is_not_filled() -> None:
    """A traceback's indented lines, an empty line and records that head their lines are never joined."""
    from kvbudget.engines.logscan import unwrap_words

    text = ("INFO 08-07 11:12:30 [core.py:1] EngineCore failed to start because of the error that follows here:\n"
            "Traceback (most recent call last):\n  File \"/usr/lib/python3.12/site-packages/vllm/engine.py\", line 1\n"
            "\nINFO 08-07 11:12:30 [core.py:1] done\nERROR 08-07 11:12:30 [core.py:1] RuntimeError: one\n")
    assert unwrap_words(text) == text


def test_a_cri_log_file_joins_its_partial_lines() -> None:
    """The CRI format splits a line longer than 16 KiB into 'P' pieces and a last 'F' one: read as one line again (the
    engine config line of a vLLM log, whose max_num_seqs is past the cut)."""
    text = (DATA / "vllm_logs" / "v0.11.0_l4_llama3.1-8b_len32000_gmu0.92_mns128.log").read_text(encoding="utf-8")
    head = "2026-12-01T10:00:00.1Z stdout "
    lines = []
    for line in text.splitlines():
        pieces = [line[i:i + 300] for i in range(0, len(line), 300)] or [""]
        lines += [head + ("P " if n < len(pieces) - 1 else "F ") + piece for n, piece in enumerate(pieces)]
    cri = "\n".join(lines) + "\n"
    assert strip_line_prefixes(cri) == text
    assert parse_vllm_log(cri) == parse_vllm_log(text)


def _docker_json(text: str) -> str:
    """The log as Docker's json-file driver stores it: one JSON record a line, the line's break inside "log"."""
    import json

    return "".join(json.dumps({"log": line, "stream": "stderr", "time": "2026-12-01T10:00:00.123456789Z"}) + "\n"
                   for line in text.splitlines(keepends=True))


def _shipped(text: str) -> str:
    """The log as a shipper exports it: one JSON record a line, the line (without its break) under "message"."""
    import json

    return "".join(json.dumps({"timestamp": "2026-12-01T10:00:00Z", "message": line, "level": "info"}) + "\n"
                   for line in text.splitlines())


@pytest.mark.parametrize("form", [_docker_json, _shipped])
@pytest.mark.parametrize(("folder", "parse"), [
    ("vllm_logs", parse_vllm_log), ("llamacpp_logs", parse_llamacpp_log), ("sglang_logs", check_other_log),
    ("trtllm_logs", check_other_log), ("sglang_logs", _sglang_run), ("trtllm_logs", _trtllm_run),
])
def test_every_corpus_log_reads_the_same_as_json_records(form, folder: str, parse) -> None:  # type: ignore[no-untyped-def]
    """A JSON-lines log (Docker's json-file driver, a shipper's export) was read as its JSON text: llama.cpp's
    ggml-ci logs were refused ("KV width is -1"), a TP 2 vLLM log was refused as showing one of its two ranks."""
    for path in sorted((DATA / folder).glob("*.log")):
        text = path.read_text(encoding="utf-8")
        assert _outcome(parse, form(text)) == _outcome(parse, text), (path.name, form.__name__)


def test_docker_splits_a_long_line_into_records_the_next_continues() -> None:
    line = "INFO 12-01 10:00:00 [gpu_worker.py:298] Available KV cache memory: 35.82 GiB\n"
    import json

    pieces = "".join(json.dumps({"log": piece, "stream": "stderr"}) + "\n" for piece in (line[:40], line[40:]))
    assert json_records(pieces * 2) == line * 2


def test_json_records_on_a_few_lines_only_or_nested_without_end_are_left_alone() -> None:
    text = 'INFO a\nINFO b\nINFO c\n{"log": "INFO d\\n"}\n'
    assert json_records(text) == text
    deep = '{"log": ' * 100_000 + "1" + "}" * 100_000  # past the decoder's recursion limit: not a record, kept as a line
    record = '{"log": "INFO a\\n"}\n'
    assert json_records(f"{deep}\n{record * 3}") == f"{deep}\n" + "INFO a\n" * 3


@pytest.mark.parametrize(("log", "args"), [
    ("vllm_logs/v0.10.1.1_a100-80gb-x2_qwen2-7b_tp2_gmu0.5.log", ["--gpu-memory", "80GiB"]),
    ("sglang_logs/v0.4.1docs_h100_llama3.1-8b_default.log", ["--gpu-memory", "80GiB"]),
    ("llamacpp_logs/b4462_2x3090ti_qwen2.5-coder-32b_q8kv_split.log", ["--model", "Qwen/Qwen2.5-32B-Instruct"]),
])
def test_a_log_copied_with_no_break_spaces_checks_the_same(log: str, args: list[str], tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """A copy from a web page or a chat puts no-break spaces where the engine printed blanks: every phrase was missed
    ("no engine kvbudget knows printed this log", or no figures found)."""
    from kvbudget.cli import main

    text = (DATA / log).read_text(encoding="utf-8")
    copied = tmp_path / "copied.log"
    copied.write_text(text.replace(" ", "\u00a0").replace("INFO", "IN\u200bFO"), encoding="utf-8")
    outputs = []
    for path in (DATA / log, copied):
        assert main(["check", str(path), "--json", *args]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1].replace(str(copied), str(DATA / log))


def test_docker_records_decoded_at_once_drop_a_cr_and_keep_what_is_not_a_record() -> None:
    """Docker's lines are decoded a chunk at a time in one call; a CR or NUL their JSON escapes is taken off as
    open_log takes it off plain text, and a chunk holding a line that is not such a record is read line by line."""
    assert json_records('{"log":"INFO a\\r\\n","stream":"stderr"}\n' * 3) == "INFO a\n" * 3
    assert json_records('{"log":"INFO \\u0000a\\n"}\n' * 3) == "INFO a\n" * 3
    mixed = '{"log":"INFO a\\n"}\n[1]\n{"log":"INFO b\\n"}\n{"log":5}\n{"log":"INFO c\\n"}\n'
    assert json_records(mixed) == 'INFO a\n[1]\nINFO b\n{"log":5}\nINFO c\n'
