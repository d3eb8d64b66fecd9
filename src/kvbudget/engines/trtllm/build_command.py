"""The engine's build command where a log holds it: the limits a TensorRT engine was built with, which its runtime
does not print before 0.9 (``trtllm-build``, 0.8 on, ``tensorrt_llm/commands/build.py``; before it each model's
``examples/<model>/build.py``).

Only the flags given are read, with one exception: the legacy ``build.py`` scripts build ``max_input_len`` +
``max_output_len`` into the engine's sequence length (their defaults 2048 and 512 in every model's script of the 0.5
to 0.7 line seen, e.g. ``examples/llama/build.py``; their default batch differs, 8 or 1, and is not assumed), and
without ``--max_num_tokens`` (0.5 has no such flag) the engine's activations are sized for ``max_batch_size`` x
``max_input_len`` tokens (with remove_input_padding)."""

from __future__ import annotations

from ...inputs import split_command
from ...units import InputError
from ..logscan import LogText, count

_INTS = {"--max_batch_size": "max_batch_size", "--max_seq_len": "max_seq_len", "--max_num_tokens": "max_num_tokens",
         "--max_beam_width": "max_beam_width", "--tokens_per_block": "tokens_per_block"}
_LEGACY_INPUT, _LEGACY_OUTPUT = 2048, 512


def build_fields(log: LogText) -> dict[str, object]:
    """The settings the log's trtllm-build or build.py command gives the engine ({} where the log holds none)."""
    for start, stop, i in log.lines(("trtllm-build ", "build.py ")):
        line = log.text[start:stop]
        legacy = line.startswith("build.py ", i - start)
        try:
            words = split_command(line[i - start + len("build.py " if legacy else "trtllm-build "):])
        except InputError:
            continue
        given: dict[str, int] = {}
        for j, word in enumerate(words):
            name, eq, value = word.partition("=")
            value = value if eq else words[j + 1] if j + 1 < len(words) else ""
            if name in _INTS or name in ("--max_input_len", "--max_output_len"):
                if not value.isdigit():
                    continue
                given[name] = count(value, name.lstrip("-"), 1, 1 << 40)
        fields: dict[str, object] = {_INTS[k]: v for k, v in given.items() if k in _INTS}
        if legacy and "max_seq_len" not in fields:
            fields["max_seq_len"] = given.get("--max_input_len", _LEGACY_INPUT) + given.get("--max_output_len", _LEGACY_OUTPUT)
            if "max_num_tokens" not in fields and "--max_batch_size" in given:
                fields["max_num_tokens"] = given["--max_batch_size"] * given.get("--max_input_len", _LEGACY_INPUT)
        elif "--max_input_len" in given and "--max_output_len" in given and "max_seq_len" not in fields:
            fields["max_seq_len"] = given["--max_input_len"] + given["--max_output_len"]
        if fields:
            fields["backend"] = "engine"
            return fields
    return {}
