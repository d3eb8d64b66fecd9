"""Prices files for ``kvbudget plan ... --prices FILE`` that are not prices: NaN, infinite, negative,
absurd, unknown GPUs, the wrong shape, huge, binary, a FIFO, a device; and pipeline or tensor
parallelism beyond the model for every engine."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from corpus import add, argv, write

PLAN = ["plan", "llama-3.2-1b", "--concurrency", "4", "--context", "4096", "--gpus", "H100,L4", "--max-gpus", "2"]

H100 = "price of 'H100'"  # an entry whose price is bad: the error names the entry
BETWEEN, NOT_NUMBER = "must be between 0 and 1000 $/hour", "must be a number"
PRICES: dict[str, tuple[str | bytes, str]] = {  # the file, and what the error says about it
    "json-nan": ('{"H100": NaN}', "'H100' is NaN"), "json-inf": ('{"H100": Infinity}', "'H100' is Infinity"),
    "json-neg-inf": ('{"H100": -Infinity}', "'H100' is -Infinity"),
    "json-negative": ('{"H100": -2.5}', f"{H100} {BETWEEN}, got -2.5"), "json-huge": ('{"H100": 1e30}', f"{H100} {BETWEEN}, got 1e+30"),
    "json-1000": ('{"H100": 1000}', f"{H100} {BETWEEN}, got 1000"),
    "json-bigint": ('{"H100": ' + "9" * 5000 + "}", "'H100' is an integer of 5,000 digits"),
    "json-bool": ('{"H100": true}', f"{H100} {NOT_NUMBER}"), "json-null": ('{"H100": null}', f"{H100} {NOT_NUMBER}"),
    "json-list-price": ('{"H100": [2.5]}', f"{H100} {NOT_NUMBER}"), "json-obj-price": ('{"H100": {"usd": 2.5}}', f"{H100} {NOT_NUMBER}"),
    "json-str-nan": ('{"H100": "nan"}', f"{H100} must be a finite number"),
    "json-str-inf": ('{"H100": "inf"}', f"{H100} must be a finite number"),
    "json-str-word": ('{"H100": "cheap"}', f"{H100} is not a number: 'cheap'"),
    "json-str-long": ('{"H100": "' + "1" * 10_000 + '"}', f"{H100} {NOT_NUMBER}, not '1111"),
    "json-unknown-gpu": ('{"H9000": 2.5}', "unknown GPU 'H9000'"), "json-empty-gpu": ('{"": 2.5}', "empty GPU name"),
    "json-long-gpu": ('{"' + "H" * 100_000 + '": 2.5}', "(100,000 characters"),
    "json-twice": ('{"H100": 2.5, "h100-sxm": 2.6}', "'h100-sxm' names H100-SXM-80GB, which the file already prices"),
    "json-same-key": ('{"H100": 2.5, "L4": 0.7, "H100": 0.1}', "'H100' is priced twice (a JSON reader keeps only the last)"),
    "json-empty": ("{}", "prices no GPU"), "csv-header-only": ("gpu,price\n# none yet\n", "prices no GPU"),
    "json-truncated": ('{"H100": 2.', "unexpected end of data"),
    "json-deep": ("{" + '"a":{' * 10_000 + "}" * 10_001, "nested more than"),
    "json-list": ('[{"H100": 2.5}]', "a JSON prices file holds one object"),
    "csv-nan": ("H100,nan\n", f"{H100} must be a finite number"), "csv-inf": ("H100,inf\n", f"{H100} must be a finite number"),
    "csv-negative": ("H100,-1\n", f"{H100} {BETWEEN}, got -1"), "csv-huge": ("H100,1e30\n", f"{H100} {BETWEEN}, got 1e+30"),
    "csv-word": ("H100,cheap\n", f"{H100} is not a number: 'cheap'"), "csv-empty-price": ("H100,\n", f"{H100} is not a number: ''"),
    "csv-no-comma": ("H100 2.5\n", ":1: expected 'gpu,price', got 'H100 2.5'"),
    "csv-unknown-gpu": ("H9000,2.5\n", "unknown GPU 'H9000'"),
    "csv-twice": ("H100,2.5\nH100,2.6\n", "'H100' names H100-SXM-80GB, which the file already prices"),
    "csv-long-line": ("H100," + "9" * 100_000 + "\n", f"{H100} {NOT_NUMBER}, not '9999"),
    "csv-many-bad-lines": ("H100 2.5\n" * 100_000, ":1: expected 'gpu,price'"),  # the first bad line, once
    "binary": (bytes(range(256)) * 16, "not UTF-8"), "latin1": ("H100,2.5 \xa3\n".encode("latin-1"), "not UTF-8"),
    "nul": (b"H100,2.5\x00\n", f"{H100} is not a number: '2.5\\x00'"),
}
for tag, (data, about) in PRICES.items():

    def build(root: Path, data: str | bytes = data) -> list[str]:
        return [*PLAN, "--prices", write(root, "prices.txt", data)]

    add(f"prices-{tag}", build, expect_in=about)


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


add("prices-huge", _huge, expect_in="more than the 4,194,304 kvbudget reads")
add("prices-fifo", _fifo, expect_in="not a regular file")
add("prices-folder", _folder, expect_in="is a folder")
add("prices-missing", lambda root: [*PLAN, "--prices", str(root / "nowhere.json")], expect_in="no such file")
add("prices-dev-zero", lambda _root: [*PLAN, "--prices", "/dev/zero"], expect_in="not a regular file")

# More pipeline stages than layers, or absurd tensor parallelism, under every engine: refused before a
# list of a million stages is built. Llama-3.2-1B has 16 layers and 32 attention heads; each engine checks the
# stages against the layers first.
REASON = {("--pp", "1000000"): "the model's 16 layers", ("--pp", "17"): "the model's 16 layers",
          ("--tp", "1000000"): "--tp is 1000000: it must be at most 1,024", ("--tp", "3"): "does not divide the 32 attention heads"}
for engine in ("vllm", "sglang", "trtllm", "textbook"):
    for (flag, value), reason in REASON.items():
        argv(f"parallel-{engine}{flag}-{value}", ["fit", "llama-3.2-1b", "--gpu", "H100", "--engine", engine, flag, value],
             expect_in=reason)


# Found by `make fuzz` (tests/fuzz): a vLLM --config file that is not UTF-8 escaped as UnicodeDecodeError.
def _vllm_config(data: bytes) -> Callable[[Path], list[str]]:
    def build(root: Path) -> list[str]:
        path = write(root, "options.yaml", data)
        return ["explain", "--gpu", "H100", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--config", path]

    return build


add("options-vllm-config-not-utf8", _vllm_config(b"\x80"), expect_in="not UTF-8 text")
add("options-vllm-config-latin1", _vllm_config("max-model-len: 4096 # caf\xe9\n".encode("latin-1")),
    expect_in="not UTF-8 text")
# Found by `make fuzz`: vLLM's --cpu-offload-gb nan / inf escaped as ValueError / OverflowError.
for n, (value, why) in enumerate([("nan", "must be a finite number"), ("inf", "must be a finite number"),
                                  ("-inf", "must be a finite number"), ("1e400", "far out of range")]):
    argv(f"options-vllm-cpu-offload-{n}", ["explain", "--gpu", "H100", "--", "vllm", "serve",
                                           "meta-llama/Llama-3.1-8B-Instruct", "--cpu-offload-gb", value],
         expect_in=f"--cpu-offload-gb {why}" if why.startswith("must") else why)
