"""Prices files for ``kvbudget plan ... --prices FILE`` that are not prices: NaN, infinite, negative,
absurd, unknown GPUs, the wrong shape, huge, binary, a FIFO, a device; and pipeline or tensor
parallelism beyond the model for every engine."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from corpus import add, argv, write

PLAN = ["plan", "llama-3.2-1b", "--concurrency", "4", "--context", "4096", "--gpus", "H100,L4", "--max-gpus", "2"]

PRICES: dict[str, str | bytes] = {
    "json-nan": '{"H100": NaN}', "json-inf": '{"H100": Infinity}', "json-neg-inf": '{"H100": -Infinity}',
    "json-negative": '{"H100": -2.5}', "json-huge": '{"H100": 1e30}', "json-1000": '{"H100": 1000}',
    "json-bigint": '{"H100": ' + "9" * 5000 + "}", "json-bool": '{"H100": true}', "json-null": '{"H100": null}',
    "json-list-price": '{"H100": [2.5]}', "json-obj-price": '{"H100": {"usd": 2.5}}',
    "json-str-nan": '{"H100": "nan"}', "json-str-inf": '{"H100": "inf"}', "json-str-word": '{"H100": "cheap"}',
    "json-str-long": '{"H100": "' + "1" * 10_000 + '"}',
    "json-unknown-gpu": '{"H9000": 2.5}', "json-empty-gpu": '{"": 2.5}', "json-long-gpu": '{"' + "H" * 100_000 + '": 2.5}',
    "json-twice": '{"H100": 2.5, "h100-sxm": 2.6}', "json-truncated": '{"H100": 2.',
    "json-deep": "{" + '"a":{' * 10_000 + "}" * 10_001, "json-list": '[{"H100": 2.5}]',
    "csv-nan": "H100,nan\n", "csv-inf": "H100,inf\n", "csv-negative": "H100,-1\n", "csv-huge": "H100,1e30\n",
    "csv-word": "H100,cheap\n", "csv-empty-price": "H100,\n", "csv-no-comma": "H100 2.5\n",
    "csv-unknown-gpu": "H9000,2.5\n", "csv-twice": "H100,2.5\nH100,2.6\n", "csv-long-line": "H100," + "9" * 100_000 + "\n",
    "csv-many-bad-lines": "H100 2.5\n" * 100_000,
    "binary": bytes(range(256)) * 16, "latin1": "H100,2.5 \xa3\n".encode("latin-1"), "nul": b"H100,2.5\x00\n",
}
for tag, data in PRICES.items():

    def build(root: Path, data: str | bytes = data) -> list[str]:
        return [*PLAN, "--prices", write(root, "prices.txt", data)]

    add(f"prices-{tag}", build)


def _huge(root: Path) -> list[str]:
    path = write(root, "prices.json", "")
    os.truncate(path, 256 * 2**20)  # sparse: nothing on disk, far more than kvbudget reads
    return [*PLAN, "--prices", path]


def _fifo(root: Path) -> list[str]:
    path = root / "prices.csv"
    os.mkfifo(path)  # nobody writes: opening it would block for ever
    return [*PLAN, "--prices", str(path)]


def _folder(root: Path) -> list[str]:
    (root / "prices").mkdir()
    return [*PLAN, "--prices", str(root / "prices")]


add("prices-huge", _huge)
add("prices-fifo", _fifo)
add("prices-folder", _folder)
add("prices-missing", lambda root: [*PLAN, "--prices", str(root / "nowhere.json")])
add("prices-dev-zero", lambda _root: [*PLAN, "--prices", "/dev/zero"])

# More pipeline stages than layers, or absurd tensor parallelism, under every engine: refused before a
# list of a million stages is built.
for engine in ("vllm", "sglang", "trtllm", "textbook"):
    for flag, value in (("--pp", "1000000"), ("--pp", "17"), ("--tp", "1000000"), ("--tp", "3")):
        argv(f"parallel-{engine}{flag}-{value}", ["fit", "llama-3.2-1b", "--gpu", "H100", "--engine", engine, flag, value])


# Found by `make fuzz` (tests/fuzz): a vLLM --config file that is not UTF-8 escaped as UnicodeDecodeError.
def _vllm_config(data: bytes) -> Callable[[Path], list[str]]:
    def build(root: Path) -> list[str]:
        path = write(root, "options.yaml", data)
        return ["explain", "--gpu", "H100", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--config", path]

    return build


add("options-vllm-config-not-utf8", _vllm_config(b"\x80"))
add("options-vllm-config-latin1", _vllm_config("max-model-len: 4096 # caf\xe9\n".encode("latin-1")))
# Found by `make fuzz`: vLLM's --cpu-offload-gb nan / inf escaped as ValueError / OverflowError.
for n, value in enumerate(["nan", "inf", "-inf", "1e400"]):
    argv(f"options-vllm-cpu-offload-{n}", ["explain", "--gpu", "H100", "--", "vllm", "serve",
                                           "meta-llama/Llama-3.1-8B-Instruct", "--cpu-offload-gb", value])
