"""inputs.py: bounded reads, strict JSON and YAML, number checks — each failure an InputError naming the input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kvbudget import inputs
from kvbudget.units import InputError


def test_files_are_regular_and_capped(tmp_path: Path) -> None:
    small = tmp_path / "a.json"
    small.write_text('{"a": 1}')
    assert inputs.read_text(str(small), "config", 100) == '{"a": 1}'
    with pytest.raises(InputError, match="more than the 4 kvbudget reads"):
        inputs.read_text(str(small), "config", 4)
    with pytest.raises(InputError, match="no such file"):
        inputs.read_text(str(tmp_path / "missing"), "config", 100)
    with pytest.raises(InputError, match="is a folder"):
        inputs.read_text(str(tmp_path), "config", 100)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # reading it would block forever: refused before it is opened
    with pytest.raises(InputError, match="not a regular file"):
        inputs.read_text(str(fifo), "log", 100)
    with pytest.raises(InputError, match="not a regular file"):
        inputs.read_bytes("/dev/zero", "log", 100)
    (tmp_path / "latin1").write_bytes(b"caf\xe9")
    with pytest.raises(InputError, match="not UTF-8 text"):
        inputs.read_text(str(tmp_path / "latin1"), "options", 100)
    assert inputs.read_text(str(tmp_path / "latin1"), "log", 100, errors="replace") == "caf\ufffd"


@pytest.mark.parametrize(("text", "message"), [
    ('{"a": NaN}', "not valid JSON"), ('{"a": Infinity}', "not valid JSON"), ('{"a": -Infinity}', "not valid JSON"),
    ("[" * 2000 + "]" * 2000, "nested more than 1,024 levels"), (b'{"a": "\xff"}', "not UTF-8"),
    ('{"a": 1', "not valid JSON"), ("", "not valid JSON"),
])
def test_json_is_strict(text: str | bytes, message: str) -> None:
    with pytest.raises(InputError, match=message):
        inputs.load_json(text, "x.json")


def test_json_matches_the_standard_library_on_valid_documents() -> None:
    doc = {"a": [1, 2.5, None, True, "é"], "b": {"c": -3, "d": 2**63 - 1}, "e": ""}
    text = json.dumps(doc)
    assert inputs.load_json(text, "x") == json.loads(text) == inputs.load_json(text.encode(), "x")
    # an integer past 64 bits comes back as a float (no count accepts it); past a double's range it is refused
    big = inputs.load_json('{"heads": ' + "9" * 30 + "}", "x")["heads"]
    assert isinstance(big, float)
    with pytest.raises(InputError, match="not valid JSON"):
        inputs.load_json('{"heads": ' + "9" * 5000 + "}", "x")
    with pytest.raises(InputError, match="at most"):
        inputs.whole(big, "num_attention_heads", 1, 1 << 20)


def test_yaml_aliases_depth_and_digits_are_bounded() -> None:
    # each level repeats the one before 4 times: 4^40 items once expanded, 160 aliases as written
    bomb = "a0: &a0 [x, x]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]\n" for i in range(1, 41))
    with pytest.raises(InputError, match="aliases"):
        inputs.load_yaml(bomb, "options.yaml")
    with pytest.raises(InputError, match="nested more than"):
        inputs.load_yaml("[" * 500 + "]" * 500, "options.yaml")
    with pytest.raises(InputError, match="thousands of digits"):
        inputs.load_yaml("n: " + "9" * 5000, "options.yaml")
    with pytest.raises(InputError, match="not valid YAML"):
        inputs.load_yaml("a: !!python/object/apply:os.system ['true']", "options.yaml")
    assert inputs.load_yaml("a: 1\nb: [1, 2]\n", "options.yaml") == {"a": 1, "b": [1, 2]}


@pytest.mark.parametrize("value", [True, "8", None, [8], 1.5, float("nan"), float("inf"), -1, 10**30])
def test_whole_numbers(value: object) -> None:
    with pytest.raises(InputError, match="num_heads"):
        inputs.whole(value, "num_heads", 0, 1 << 20)


def test_whole_and_real_accept_what_they_should() -> None:
    assert inputs.whole(8.0, "n", 1, 10) == 8 and inputs.whole(8, "n") == 8
    assert inputs.real(0.9, "fraction", 0, 1, lo_open=True) == 0.9
    with pytest.raises(InputError, match="above 0"):
        inputs.real(0, "fraction", 0, 1, lo_open=True)
    with pytest.raises(InputError, match="finite"):
        inputs.real(float("nan"), "fraction", 0, 1)
    assert inputs.excerpt("x" * 1000).endswith("...") and len(inputs.excerpt("x" * 1000)) == 60
    assert "digits" in inputs.excerpt(10**40)


@pytest.mark.parametrize(("text", "message"), [
    ("", "--tp is empty: give a whole number"), ("  ", "--tp is empty"),
    ("9" * 5000, r"--tp '9{20}\.\.\. is not a number kvbudget reads \(more than 40 digits\)"),
    ("1" + "0" * 39, "--tp is an integer of 40 digits: it must be at most 65,536"),
    ("nan", "--tp 'nan' is not a whole number"), ("1e3", "--tp '1e3' is not a whole number"),
    ("1.0", "--tp '1.0' is not a whole number"), ("lots", "--tp 'lots' is not a whole number"),
    ("-3", "--tp is -3: it must be at least 1"), ("0", "--tp is 0: it must be at least 1"),
    ("\u0661", "is not a whole number"),  # an Arabic-Indic digit: int() reads it, no engine does
])
def test_parse_whole_refuses_by_name(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        inputs.parse_whole(text, "--tp", 1, 1 << 16)


@pytest.mark.parametrize(("text", "message"), [
    ("", "--frac is empty: give a number"), ("9" * 41, r"more than 40 digits"), ("0." + "1" * 40, "more than 40 characters"),
    ("nan", "--frac must be a finite number, not nan"), ("-inf", "--frac must be a finite number, not -inf"),
    ("1e400", "--frac is '1e400': far out of range"), ("0x10", "--frac '0x10' is not a number"),
    ("0", "--frac is 0: it must be above 0"), ("1.5", "--frac is 1.5: it must be at most 1"),
])
def test_parse_real_refuses_by_name(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        inputs.parse_real(text, "--frac", 0, 1, lo_open=True)


def test_parse_whole_and_real_read_what_they_should() -> None:
    assert inputs.parse_whole(" +8 ", "n", 1, 10) == 8 and inputs.parse_whole("-1", "n", -1) == -1
    assert inputs.parse_whole("1" + "0" * 39, "n") == 10**39  # 40 characters: read, then checked by range
    assert inputs.parse_real("0.9", "f", 0, 1, lo_open=True) == 0.9 and inputs.parse_real("1e-3", "f") == 0.001
    assert inputs.parse_real("0", "f", 0, 1) == 0.0
    with pytest.raises(InputError, match=r"options\.yaml: max_seq_len is -4"):
        inputs.parse_whole("-4", "max_seq_len", 1, where="options.yaml")


def test_split_command_and_load_options(tmp_path: Path) -> None:
    """The helpers every engine's command reader shares: a shell's words, and a capped option file."""
    assert inputs.split_command("vllm serve 'my model' --tp 2") == ["vllm", "serve", "my model", "--tp", "2"]
    for text in ("vllm serve 'x", 'vllm serve "x', "vllm serve x\\"):
        with pytest.raises(InputError, match=r"cannot be split into words .*: close its quotes"):
            inputs.split_command(text)
    options = tmp_path / "a-long-folder-name-that-pushes-the-file-name-out-of-an-excerpt" / "o.yaml"
    options.parent.mkdir()
    options.write_text("max_batch_size: [8\n")
    with pytest.raises(InputError, match=r"^--config '\.\.\..*/o\.yaml': not valid YAML"):  # the file's name kept
        inputs.load_options(str(options), "--config")
    options.write_text("max_batch_size: 8\n")
    assert inputs.load_options(str(options), "--config") == {"max_batch_size": 8}


def test_split_command_keeps_the_shells_list_operators() -> None:
    """Two commands joined by ``&&``, ``;``, ``|`` or a line end were one list of words (``2;`` a word, the second
    command's words flags of the first): each operator is a word of its own now, outside quotes only; a line end
    before a line that starts with '-' (a command copied without its backslashes) continues the command, and the
    ``&`` of a redirection is not an operator."""
    split = inputs.split_command
    assert split("vllm serve a -tp 2&&vllm serve b") == ["vllm", "serve", "a", "-tp", "2", "&&", "vllm", "serve", "b"]
    assert split("a 'x;y' \"p|q\"; b") == ["a", "x;y", "p|q", ";", "b"]
    assert split("a\nb") == ["a", ";", "b"]
    assert split("vllm serve a\n  --tp 2\n\t-c 3\n") == ["vllm", "serve", "a", "--tp", "2", "-c", "3"]
    assert split("a 2>&1 &> x | tee y &") == ["a", "|", "tee", "y"]  # the redirections are the shell's (below)
    assert split("a || b |& c ;; d") == ["a", "||", "b", "|&", "c", ";;", "d"]
    assert split("a 'x\ny' z") == ["a", "x\ny", "z"]
    assert split("\n" * 60_000 + "a") == [";"] * 60_000 + ["a"]  # linear: 60,000 line ends in well under a second


def test_split_command_drops_the_shells_redirections() -> None:
    """``vllm serve M > serve.log 2>&1 &`` pasted whole: the shell takes the redirections, vLLM never sees them (they
    were read as extra words); a quoted '>' stays a word."""
    split = inputs.split_command
    assert split("vllm serve m --port 8000 > serve.log 2>&1 &") == ["vllm", "serve", "m", "--port", "8000"]
    assert split("nohup vllm serve m >/tmp/x.log 2>/dev/null < /dev/null") == ["nohup", "vllm", "serve", "m"]
    assert split("vllm serve m >> a.log 2> b.log -tp 2") == ["vllm", "serve", "m", "-tp", "2"]
    assert split("vllm serve m &>> all.log") == ["vllm", "serve", "m"]


def test_a_small_file_under_a_large_cap_is_read_without_allocating_the_cap(tmp_path: Path) -> None:
    """read(n) allocates n bytes first: a 100-byte trace under the 256 MiB cap took 256 MiB of memory."""
    import tracemalloc

    from kvbudget.inputs import read_bytes

    path = tmp_path / "small.jsonl"
    path.write_bytes(b"x" * 100)
    tracemalloc.start()
    try:
        data = read_bytes(str(path), "trace", 256 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert data == b"x" * 100 and peak < 1 << 20, peak


def test_a_fifo_swapped_in_after_the_check_is_refused_not_waited_on(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The path passes the stat as a regular file, then is a FIFO nobody writes to when it is opened: a blocking
    open waited for a writer for ever (the test would hang; the alarm fails it instead)."""
    import signal

    from kvbudget.model.gguf_reader import read_gguf_header
    from kvbudget.model.safetensors_reader import read_header

    fifo = tmp_path / "swapped"
    os.mkfifo(fifo)
    regular = (tmp_path / "regular.json")
    regular.write_text("{}")
    real_stat = os.stat
    monkeypatch.setattr(inputs.os, "stat", lambda p, *a, **k: real_stat(regular if p == str(fifo) else p, *a, **k))

    def hang(_signum: int, _frame: object) -> None:
        raise TimeoutError("the open waited on the FIFO")

    previous = signal.signal(signal.SIGALRM, hang)
    signal.alarm(5)
    try:
        for read in (lambda: inputs.read_bytes(str(fifo), "config", 100), lambda: read_header(str(fifo)),
                     lambda: read_gguf_header(str(fifo))):
            with pytest.raises(InputError, match="not a regular file"):
                read()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_split_command_keeps_each_shell_substitution_in_one_word() -> None:
    # shlex cut a substitution at its spaces: '$(echo' and '16384)' were planned as a stray word ('unrecognized
    # arguments: 16384)'), '> >(tee log)' left 'log)' behind; the shell keeps each in one word until it runs it
    split = inputs.split_command
    assert split("vllm serve M --max-model-len $(echo 16384) -tp 2") == [
        "vllm", "serve", "M", "--max-model-len", "$(echo 16384)", "-tp", "2"]
    assert split("vllm serve M -tp `nvidia-smi -L | wc -l`") == ["vllm", "serve", "M", "-tp", "`nvidia-smi -L | wc -l`"]
    assert split("vllm serve M --port $(( 8000 + 1 ))") == ["vllm", "serve", "M", "--port", "$(( 8000 + 1 ))"]
    assert split("vllm serve M > >(tee 'a log') 2>&1") == ["vllm", "serve", "M"]  # a redirection into a process
    assert split("vllm serve M --download-dir \"$(pwd)/my models\"") == ["vllm", "serve", "M", "--download-dir",
                                                                         "$(pwd)/my models"]
    assert split("vllm serve M --served-model-name '$(a b)'") == ["vllm", "serve", "M", "--served-model-name", "$(a b)"]
    for text, opened in (("vllm serve M -tp $(nproc", "$("), ("vllm serve M -tp `nproc", "`")):
        with pytest.raises(InputError, match=f"opens {opened.replace('$', '[$]').replace('(', '[(]')} without closing it"):
            split(text)


@pytest.mark.parametrize("text", ["$TP", "${TP:-2}", "$(nproc)", "`nproc`", "$((2*2))"])
def test_a_number_left_to_the_shell_is_named_so(text: str) -> None:
    # was 'is not a whole number' (a reason, but not the one): kvbudget does not run the shell
    with pytest.raises(InputError, match="is a shell expansion, which kvbudget does not evaluate: write the value"):
        inputs.parse_whole(text, "-tp")
    with pytest.raises(InputError, match="is a shell expansion"):
        inputs.parse_real(text, "--gpu-memory-utilization")
