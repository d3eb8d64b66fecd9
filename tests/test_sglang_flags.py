"""SGLang launch flags checked against the release planned (engines/sglang/flags.json, written by
tools/gen_sglang_flags.py from each release's sglang/srt/server_args.py; engines/sglang/command.py).

The facts below were read from the releases' wheels on PyPI (sglang-X-py3-none-any.whl, sglang/srt/server_args.py
ServerArgs.add_cli_args): --disable-mla is added in 0.4.5 and absent from 0.4.5.post3; --attn-cp-size (field
attn_cp_size) is in 0.5.9, not 0.5.8.post1; --pp-size in 0.4.6.post5, not 0.4.6; --kv-cache-dtype's choices are
auto, fp8_e5m2 in 0.4.1 and add fp8_e4m3 in 0.4.1.post7, bf16 in 0.5.4; --cuda-graph-max-bs is in 0.5.19
(an alias of cuda_graph_max_bs_decode) and gone from 0.5.20; --ep is an alias of --ep-size from 0.4.10, while
0.4.6.post5 - 0.4.9.post6 also have --ep-dispatch-algorithm, --ep-num-redundant-experts (so --ep is ambiguous there).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import zipfile
from pathlib import Path

import pytest

from kvbudget.cli import main
from kvbudget.engines.cmdscan import parse_other_command
from kvbudget.engines.sglang.command import sglang_command
from kvbudget.engines.sglang.flags import flags_at, releases, resolve, spec, whence, window
from kvbudget.units import InputError

ROOT = Path(__file__).resolve().parents[1]
QWEN = "Qwen/Qwen3-8B"
CMD = f"python -m sglang.launch_server --model-path {QWEN} "


def _at(version: str) -> int:
    return releases().index(version)


def test_table_holds_the_releases_read() -> None:
    """One release per patch line (and its last post release) from 0.3.0 to 0.5.23, oldest first; the flags of each
    as its source has them."""
    rel = releases()
    assert rel[0] == "0.3.0" and rel[-1] == "0.5.23" and len(rel) == len(set(rel)) >= 60
    for line in ("0.3.6", "0.4.0", "0.4.5", "0.4.10", "0.5.1", "0.5.10", "0.5.22"):
        assert line in rel
    assert spec("--disable-mla", _at("0.4.5")) is not None and spec("--disable-mla", _at("0.4.5.post3")) is None
    assert spec("--attn-cp-size", _at("0.5.9")) is not None and spec("--attn-cp-size", _at("0.5.8.post1")) is None
    assert spec("--pp-size", _at("0.4.6.post5")) is not None and spec("--pp-size", _at("0.4.6")) is None
    kv = spec("--kv-cache-dtype", _at("0.4.1"))
    assert kv is not None and kv[2] == 1 and kv[4] == ("auto", "fp8_e5m2")
    assert spec("--kv-cache-dtype", _at("0.4.1.post7"))[4] == ("auto", "fp8_e4m3", "fp8_e5m2")  # type: ignore[index]
    assert spec("--cuda-graph-max-bs", _at("0.5.19"))[3] == "cuda_graph_max_bs_decode"  # type: ignore[index]
    assert spec("--cuda-graph-max-bs", _at("0.5.20")) is None
    assert spec("--trust-remote-code", _at("0.3.0"))[2] == 0  # type: ignore[index]
    assert whence("--attn-cp-size") == "came with SGLang 0.5.9 (not in 0.5.8.post1)"
    assert whence("--disable-mla") == "is a flag of SGLang 0.3.1.post3 - 0.4.5 (not in 0.4.5.post3 on)"


def test_abbreviations_read_by_each_releases_flags() -> None:
    """argparse's prefix rule against each release's own flags: --pp is no flag before 0.4.6.post5, --pp-size there,
    ambiguous once --pp-max-micro-batch-size came (0.5.3.post3); --ep is ambiguous between
    --ep-num-redundant-experts (0.4.6.post5) and the --ep alias (0.4.10)."""
    assert resolve("--pp", _at("0.4.6")) == ()
    assert resolve("--pp", _at("0.4.6.post5")) == ("--pp-size",)
    assert len(resolve("--pp", _at("0.5.23"))) > 1
    assert resolve("--ep", _at("0.4.6")) == ("--ep-size",)
    assert len(resolve("--ep", _at("0.4.7"))) > 1
    assert resolve("--ep", _at("0.4.10")) == ("--ep",)


def test_flag_of_an_older_release_accepted_for_it_refused_for_the_newest() -> None:
    """--disable-mla (0.3.1.post3 - 0.4.5) on the 0.4 line reads with a note (0.4.5.post3 on stop); without a
    release named (0.5.23) and for 0.4.6 it stops SGLang, said with the releases that have it. Before the table was
    per release, 0.4 commands were checked against 0.5.23's flags and this was refused."""
    cmd = parse_other_command(CMD + "--disable-mla --tp 2", "0.4")
    assert cmd.sglang is not None and cmd.sglang.tp == 2
    assert any(w.startswith("--disable-mla: SGLang 0.4.0 - 0.4.5 read it, 0.4.5.post3 - 0.4.7.post1 stop with "
                            "'unrecognized arguments'") for w in cmd.warnings)
    assert parse_other_command(CMD + "--disable-mla", "0.4.5").warnings == (
        "sglang flag --disable-mla does not change memory in kvbudget's model: ignored",)
    with pytest.raises(InputError, match=r"^SGLang 0\.5\.23 stops at start-up: `error: unrecognized arguments: "
                                         r"--disable-mla`: --disable-mla is a flag of SGLang 0\.3\.1\.post3 - 0\.4\.5"):
        parse_other_command(CMD + "--disable-mla")
    with pytest.raises(InputError, match=r"^SGLang 0\.4\.6 stops at start-up"):
        sglang_command(["--model-path", QWEN, "--disable-mla"], "0.4.6")


def test_flag_of_a_later_release_refused_for_an_earlier_one() -> None:
    """--attn-cp-size came with 0.5.9: refused for the 0.4 line and 0.4.6 (was accepted, checked against 0.5.23),
    read for 0.5.23."""
    for version, label in (("0.4", r"0\.4 \(0\.4\.0 - 0\.4\.7\.post1\)"), ("0.4.6", r"0\.4\.6"),
                           ("0.5.8.post1", r"0\.5\.8\.post1")):
        with pytest.raises(InputError, match=rf"^SGLang {label} stops at start-up: `error: unrecognized arguments: "
                                             r"--attn-cp-size`: --attn-cp-size came with SGLang 0\.5\.9 "
                                             r"\(not in 0\.5\.8\.post1\)$"):
            parse_other_command(CMD + "--attn-cp-size 2", version)
    assert parse_other_command(CMD + "--attn-cp-size 2", "0.5.9").sglang is not None
    assert parse_other_command(CMD + "--attn-cp-size 2").sglang is not None


def test_abbreviation_and_alias_per_release() -> None:
    """--pp 2 is --pp-size 2 for 0.4.6.post5, no flag for 0.4.6, ambiguous for 0.5.23; --ep 2 is --ep-size for
    0.4.6, ambiguous for 0.4.7 (kvbudget read it as --ep-size for any release before), the alias from 0.4.10."""
    assert parse_other_command(CMD + "--pp 2", "0.4.6.post5").sglang.pp == 2  # type: ignore[union-attr]
    with pytest.raises(InputError, match=r"^SGLang 0\.4\.6 stops at start-up: `error: unrecognized arguments: --pp`"):
        parse_other_command(CMD + "--pp 2", "0.4.6")
    with pytest.raises(InputError, match=r"^SGLang 0\.5\.23 stops at start-up: `error: ambiguous option: --pp could "
                                         r"match --pp-async-batch-depth, --pp-max-micro-batch-size, --pp-size`"):
        parse_other_command(CMD + "--pp 2")
    tp8 = CMD + "--tp 8 --ep 2"
    assert parse_other_command(tp8, "0.4.6").sglang.ep_size == 2  # type: ignore[union-attr]
    with pytest.raises(InputError, match=r"^SGLang 0\.4\.7 stops at start-up: `error: ambiguous option: --ep could "
                                         r"match --ep-dispatch-algorithm, --ep-num-redundant-experts, --ep-size, --eplb-algorithm, \.\.\.`"):
        parse_other_command(tp8, "0.4.7")
    assert parse_other_command(tp8, "0.4.10").sglang.ep_size == 2  # type: ignore[union-attr]


def test_renamed_cuda_graph_flag() -> None:
    """--cuda-graph-max-bs: read by 0.5.19 (cuda_graph_max_bs_decode), ambiguous in 0.5.23 (between
    --cuda-graph-max-bs-decode and -prefill: kvbudget read it before); --cuda-graph-max-bs-decode sets the same."""
    assert parse_other_command(CMD + "--cuda-graph-max-bs 8", "0.5.19").sglang.cuda_graph_max_bs == 8  # type: ignore[union-attr]
    with pytest.raises(InputError, match="ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode"):
        parse_other_command(CMD + "--cuda-graph-max-bs 8")
    assert parse_other_command(CMD + "--cuda-graph-max-bs-decode 8").sglang.cuda_graph_max_bs == 8  # type: ignore[union-attr]


def test_values_checked_against_the_releases_choices() -> None:
    """--kv-cache-dtype: fp8_e4m3 stops 0.4.1 (auto, fp8_e5m2) and reads on 0.4.1.post7; bf16 stops every 0.4
    release; on the 0.4 line fp8_e4m3 reads with a note naming 0.4.0 - 0.4.1."""
    with pytest.raises(InputError, match=r"^SGLang 0\.4\.1 stops at start-up: `error: argument --kv-cache-dtype: "
                                         r"invalid choice: 'fp8_e4m3'` \(SGLang 0\.4\.1 takes auto, fp8_e5m2\)$"):
        parse_other_command(CMD + "--kv-cache-dtype fp8_e4m3", "0.4.1")
    assert parse_other_command(CMD + "--kv-cache-dtype=fp8_e4m3", "0.4.1.post7").sglang.kv_cache_dtype == "fp8_e4m3"  # type: ignore[union-attr]
    with pytest.raises(InputError, match="invalid choice: 'bf16'"):
        parse_other_command(CMD + "--kv-cache-dtype bf16", "0.4")
    said = parse_other_command(CMD + "--kv-cache-dtype fp8_e4m3", "0.4").warnings
    assert said[0].startswith("--kv-cache-dtype fp8_e4m3: SGLang 0.4.0 - 0.4.1 refuse it (invalid choice)")


def test_release_outside_the_table() -> None:
    """A release between two read ones is checked against both (a flag one of them lacks reads with a note); one
    newer than the table, or text naming no release, against the newest with a note."""
    w = window("0.4.6.post3")
    assert (releases()[w.lo], releases()[w.hi]) == ("0.4.6", "0.4.6.post5")
    said = parse_other_command(CMD + "--pp-size 2", "0.4.6.post3").warnings
    assert said[0].startswith("--pp-size: SGLang 0.4.6.post5 read it, 0.4.6 stop with 'unrecognized arguments'")
    assert parse_other_command(CMD + "--tp 2", "0.6.0").warnings[0] == (
        "SGLang 0.6.0 is newer than kvbudget's SGLang flag table (0.3.0 - 0.5.23): flags checked against 0.5.23's")
    assert window(None) == window("0.5.23")
    assert window("current").label == "current (0.5.3 - 0.5.23)" and window("0.4.8").label == "0.4.8 (0.4.8 - 0.5.2)"


def test_explain_checks_the_line_given(capsys: pytest.CaptureFixture[str]) -> None:
    """explain --sglang-version 0.4: a 0.4-era flag reads (exit 0), a 0.5.9 flag is one error line, exit 2."""
    argv = ["explain", "--gpu", "H100", "--sglang-version", "0.4", "--json", "--", *CMD.split()]
    assert main([*argv, "--disable-mla"]) == 0
    assert "--disable-mla: SGLang 0.4.0 - 0.4.5 read it" in capsys.readouterr().out
    assert main([*argv, "--attn-cp-size", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--attn-cp-size came with SGLang 0.5.9" in err and "Traceback" not in err


def _generator() -> object:
    spec_ = importlib.util.spec_from_file_location("gen_sglang_flags", ROOT / "tools" / "gen_sglang_flags.py")
    assert spec_ is not None and spec_.loader is not None
    mod = importlib.util.module_from_spec(spec_)
    sys.modules["gen_sglang_flags"] = mod
    spec_.loader.exec_module(mod)
    return mod


_OLD = '''
import argparse
KV = ["auto", "fp8_e5m2"]
class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--model-path", type=str)
        parser.add_argument("--tp-size", "--tensor-parallel-size", type=int, dest="tp_size")
        parser.add_argument("--kv-cache-dtype", choices=KV + ["fp8_e4m3"])
        parser.add_argument("--disable-mla", action="store_true")
        parser.add_argument("--cuda-graph-bs", type=int, nargs="+")
        parser.add_argument("--old", action=DeprecatedAction)
        parser.add_argument("-h", action="help")
class DeprecatedAction(argparse.Action):
    def __init__(self, option_strings, dest, nargs=0, **kwargs):
        super().__init__(option_strings, dest, nargs=nargs, **kwargs)
'''
_NEW = '''
from typing import Literal, Optional, List
class ServerArgs:
    model_path: A[str, Arg(help="m", aliases=["--model"])]
    tp_size: A[int, Arg(help="t", aliases=["--tensor-parallel-size"])] = 1
    kv_cache_dtype: A[Literal["auto", "bf16"], "k"] = "auto"
    cuda_graph_bs_decode: A[Optional[List[int]], Arg(help="b", aliases=["--cuda-graph-bs"])] = None
    fused: A[bool, Arg(help="f", action=argparse.BooleanOptionalAction)] = True
    hidden: A[int, Arg(help="h", no_cli=True)] = 0
    @staticmethod
    def add_cli_args(parser):
        add_cli_args_from_dataclass(parser, ServerArgs)
        parser.add_argument("--config", type=str)
'''


def test_generator_reads_both_parser_styles(tmp_path: Path) -> None:
    """tools/gen_sglang_flags.py on two wheels, an add_argument parser and a dataclass one (0.5.14 on): option
    strings, values taken, dest where not the flag's own, literal choices, runs of releases alike."""
    gen = _generator()
    for version, text in (("0.4.1", _OLD), ("0.5.14", _NEW)):
        with zipfile.ZipFile(tmp_path / f"sglang-{version}-py3-none-any.whl", "w") as z:
            z.writestr("sglang/srt/server_args.py", text)
    out = tmp_path / "flags.json"
    assert gen.main([str(tmp_path), "--json", str(out)]) == 0  # type: ignore[attr-defined]
    data = json.loads(out.read_text())
    assert data["releases"] == ["0.4.1", "0.5.14"]
    f = data["flags"]
    assert f["--model-path"] == [["0.4.1", "0.5.14", 1]] and f["--model"] == [["0.5.14", "0.5.14", 1, "model_path", None]]
    assert f["--tensor-parallel-size"] == [["0.4.1", "0.5.14", 1, "tp_size", None]]
    assert f["--kv-cache-dtype"] == [["0.4.1", "0.4.1", 1, "", ["auto", "fp8_e4m3", "fp8_e5m2"]],
                                     ["0.5.14", "0.5.14", 1, "", ["auto", "bf16"]]]
    assert f["--disable-mla"] == [["0.4.1", "0.4.1", 0]] and f["--old"] == [["0.4.1", "0.4.1", 0]]
    assert f["--cuda-graph-bs"] == [["0.4.1", "0.4.1", "+"], ["0.5.14", "0.5.14", "+", "cuda_graph_bs_decode", None]]
    assert f["--fused"] == [["0.5.14", "0.5.14", 0]] and f["--no-fused"] == [["0.5.14", "0.5.14", 0, "fused", None]]
    assert "--hidden" not in f and "-h" not in f and f["--config"] == [["0.5.14", "0.5.14", 1]]
    assert gen.main([str(tmp_path), "--json", str(out), "--check"]) == 0  # type: ignore[attr-defined]


_WHEELS = Path(os.environ.get("SGLANG_WHEELS", "")) if os.environ.get("SGLANG_WHEELS") else None


@pytest.mark.skipif(_WHEELS is None, reason="set SGLANG_WHEELS to a folder of sglang-*.whl to compare with them")
def test_generator_matches_the_committed_table() -> None:
    """Where SGLang's wheels are at hand (SGLANG_WHEELS), the generator reads from each release the table holds
    exactly the flags, values, dests and choices the table has for it."""
    gen = _generator()
    assert _WHEELS is not None
    seen = 0
    for wheel in sorted(_WHEELS.rglob("sglang-*.whl")):
        rel = gen.read_wheel(wheel)  # type: ignore[attr-defined]
        if rel.version not in releases():
            continue
        i = _at(rel.version)
        read = gen.release_flags(rel)  # type: ignore[attr-defined]
        assert {o: v[0] for o, v in read.items()} == flags_at(i), rel.version
        for option, (_nargs, dest, choices) in read.items():
            run = spec(option, i)
            assert run is not None and (run[3], run[4]) == (dest, choices), (rel.version, option)
        seen += 1
    assert seen > 0


def test_front_end_flags_are_read_without_a_warning() -> None:
    # the HTTP front end, logging and tokenizer flags of a usual launch take no GPU memory: vLLM's are read silently,
    # and SGLang's and trtllm-serve's were each a warning ("--host does not change memory ...: ignored", four lines on
    # a plain `--host 0.0.0.0 --port 30000 --trust-remote-code --log-level info`); a flag kvbudget does not model
    # still says so
    front = "--host 0.0.0.0 --port 30000 --trust-remote-code --log-level info --served-model-name q --api-key k "
    sglang = parse_other_command(CMD + front + "--enable-torch-compile")
    assert sglang.warnings == ("sglang flag --enable-torch-compile does not change memory in kvbudget's model: ignored",)
    trtllm = parse_other_command("trtllm-serve meta-llama/Llama-3.1-8B-Instruct --host 0.0.0.0 --port 8000 "
                                 "--trust_remote_code --log_level info")
    assert trtllm.trtllm is not None and trtllm.warnings == ()
