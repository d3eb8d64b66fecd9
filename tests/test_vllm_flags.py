"""engines/vllm/flags.json, the flags of `vllm serve`, and tools/gen_vllm_flags.py that writes it.

The file is generated from vLLM's own parser (see docs/internals.md); CI has no vLLM, so these tests
check what can be checked without it: the file's shape as kvbudget reads it, the flags the memory plan
reads, and the tool's pure writer and reader against a small real argparse parser.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

import pytest

from kvbudget.engines.vllm import command as vllm_command

ROOT = Path(__file__).resolve().parents[1]
FLAGS_JSON = ROOT / "src" / "kvbudget" / "engines" / "vllm" / "flags.json"
TOOL = ROOT / "tools" / "gen_vllm_flags.py"


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_vllm_flags", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # imports no vLLM: that happens in main() only
    return module


@pytest.fixture(scope="module")
def data() -> dict[str, object]:
    loaded: dict[str, object] = json.loads(FLAGS_JSON.read_text(encoding="utf-8"))
    return loaded


def test_shape(data: dict[str, object]) -> None:
    assert list(data) == ["_source", "flags", "_historical_source", "historical"]
    flags, historical = data["flags"], data["historical"]
    assert isinstance(flags, dict) and isinstance(historical, dict)
    assert list(flags) == sorted(flags)
    for option, entry in flags.items():
        assert re.fullmatch(r"--?[a-z0-9][a-z0-9-]*", option), option
        assert isinstance(entry, list) and len(entry) == 2, option
        dest, takes_value = entry
        assert isinstance(dest, str) and dest.isidentifier(), option
        assert isinstance(takes_value, bool), option
    for option, takes_value in historical.items():
        assert option.startswith("--") and isinstance(takes_value, bool), option


def test_source_names_the_release_and_function(data: dict[str, object], tool: ModuleType) -> None:
    source = data["_source"]
    assert isinstance(source, str)
    m = re.search(r"in vLLM ([0-9]+\.[0-9]+\.[0-9]+\S*) \(", source)
    assert m, source
    function = "vllm/entrypoints/common/cli_args.py make_arg_parser"
    assert source == tool.SOURCE.format(version=m.group(1), function=function)


@pytest.mark.parametrize(("option", "dest", "takes_value"), [
    ("--gpu-memory-utilization", "gpu_memory_utilization", True),
    ("--max-model-len", "max_model_len", True),
    ("--tensor-parallel-size", "tensor_parallel_size", True),
    ("-tp", "tensor_parallel_size", True),
    ("--pipeline-parallel-size", "pipeline_parallel_size", True),
    ("-pp", "pipeline_parallel_size", True),
    ("--data-parallel-size", "data_parallel_size", True),
    ("--kv-cache-dtype", "kv_cache_dtype", True),
    ("--block-size", "block_size", True),
    ("--max-num-seqs", "max_num_seqs", True),
    ("--max-num-batched-tokens", "max_num_batched_tokens", True),
    ("--kv-cache-memory-bytes", "kv_cache_memory_bytes", True),
    ("--num-gpu-blocks-override", "num_gpu_blocks_override", True),
    ("--dtype", "dtype", True),
    ("--quantization", "quantization", True),
    ("-q", "quantization", True),
    ("--enforce-eager", "enforce_eager", False),
    ("--enable-prefix-caching", "enable_prefix_caching", False),
    ("--disable-prefix-caching", "enable_prefix_caching", False),
    ("--model", "model", True),
    ("--config", "config", True),
])
def test_memory_flags_present(data: dict[str, object], option: str, dest: str, takes_value: bool) -> None:
    flags = data["flags"]
    assert isinstance(flags, dict)
    assert flags[option] == [dest, takes_value]


def test_every_engine_argument_kvbudget_reads_has_a_flag() -> None:
    flags, _ = vllm_command._flags()
    dests = {dest for dest, _ in flags.values()}
    read = {*vllm_command._INT_FIELDS, *vllm_command._TEXT_FIELDS, *vllm_command._SWITCHES, *vllm_command._UNMODELLED,
            "max_model_len", "gpu_memory_utilization", "cpu_offload_gb", "model", "config"}
    assert read <= dests, sorted(read - dests)


def test_the_writer_reproduces_the_committed_file(tool: ModuleType) -> None:
    text = FLAGS_JSON.read_text(encoding="utf-8")
    assert tool.render(*tool.parse(text)) == text


def _small_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vllm serve")
    parser.add_argument("model_tag", nargs="?")  # positional: no option string
    parser.add_argument("--max-model-len", type=int)
    parser.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    parser.add_argument("--enforce-eager", action=argparse.BooleanOptionalAction)
    parser.add_argument("--headless", action="store_true")
    parser.add_argument("--hf-token", nargs="?", const=True)
    parser.add_argument("--api-key", nargs="+")
    parser.add_argument("--middleware", action="append", default=[])
    parser.add_argument("--version", action="version", version="0")
    group = parser.add_argument_group("CacheConfig")
    group.add_argument("--gpu-memory-utilization", "--device-memory-utilization", dest="gpu_memory_utilization",
                       type=float)
    return parser


def test_flags_of_a_real_parser(tool: ModuleType) -> None:
    flags = tool.flags_of(_small_parser())
    assert flags == {
        "--api-key": ("api_key", True),
        "--device-memory-utilization": ("gpu_memory_utilization", True),
        "--enforce-eager": ("enforce_eager", False),
        "--gpu-memory-utilization": ("gpu_memory_utilization", True),
        "--headless": ("headless", False),
        "--hf-token": ("hf_token", True),
        "--max-model-len": ("max_model_len", True),
        "--middleware": ("middleware", True),
        "--no-enforce-eager": ("enforce_eager", False),
        "--tensor-parallel-size": ("tensor_parallel_size", True),
        "-tp": ("tensor_parallel_size", True),
    }  # no -h/--help, no --version, no positional
    assert list(flags) == sorted(flags)


def test_round_trip_through_kvbudgets_reader(tool: ModuleType, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    flags = tool.flags_of(_small_parser())
    historical = {"--swap-space": True, "--use-v2-block-manager": False}
    source = tool.SOURCE.format(version="9.9.9", function="vllm/entrypoints/common/cli_args.py make_arg_parser")
    text = tool.render(source, flags, "older releases", historical)
    assert tool.parse(text) == (source, flags, "older releases", historical)
    assert tool.render(*tool.parse(text)) == text
    path = tmp_path / "vllm_flags.json"
    path.write_text(text, encoding="utf-8")
    monkeypatch.setattr(vllm_command, "_FLAGS_FILE", str(path))
    assert vllm_command._flags() == (flags, historical)


def test_differences(tool: ModuleType) -> None:
    old = {"--a": ("a", True), "--b": ("b", False), "--c": ("c", True)}
    new = {"--a": ("a", True), "--b": ("b", True), "--d": ("d", False)}
    assert tool.differences(old, new) == ["+ --d ['d', False]", "- --c ['c', True]",
                                          "~ --b ['b', False] -> ['b', True]"]
    assert tool.differences(old, old) == []


def test_module_entry_point_reads_no_bare_model() -> None:
    """``python -m vllm.entrypoints.openai.api_server MODEL``: the module's parser keeps MODEL as model_tag and
    never reads it (only entrypoints/cli/serve.py copies model_tag to model; 0.33's entrypoints/common/cli_args.py
    make_arg_parser, 0.10.1's entrypoints/openai/cli_args.py): vLLM serves its default model. It was planned for
    MODEL, exit 0; now refused, and with --model beside it, --model is served and the word is said."""
    from kvbudget.engines.vllm.command import parse_vllm_command
    from kvbudget.units import InputError

    with pytest.raises(InputError, match=r"does not read the bare word 'llama-3\.1-8b' as the model"):
        parse_vllm_command("python -m vllm.entrypoints.openai.api_server llama-3.1-8b --max-model-len 4096")
    cmd = parse_vllm_command("python -m vllm.entrypoints.openai.api_server stray --model llama-3.1-8b")
    assert cmd.model == "llama-3.1-8b" and cmd.settings.entrypoint == "serve"
    assert any("passes over the bare word 'stray'" in w for w in cmd.warnings)
    assert parse_vllm_command("vllm serve llama-3.1-8b").model == "llama-3.1-8b"  # vllm serve reads it


def test_old_module_and_image_stop_at_a_bare_word() -> None:
    """Up to 0.9 the OpenAI API server module's parser has no positional argument (0.2.7's api_server.py
    parse_args, 0.4.3's entrypoints/openai/cli_args.py make_arg_parser): argparse stops at the word, with --model
    given or not. vllm/vllm-openai images up to 0.8 run that module (their ENTRYPOINT), so `docker run
    vllm/vllm-openai:v0.4.0 MODEL` stops too; the demo server (entrypoints/api_server.py, AsyncEngineArgs' flags
    only) stops at a word in every release, and is gone from the 0.25 wheel. Each was planned, exit 0."""
    from kvbudget.engines.vllm.command import parse_vllm_command
    from kvbudget.engines.vllm.settings import VllmSettings
    from kvbudget.units import InputError

    old = VllmSettings(version="0.2.7")
    with pytest.raises(InputError, match=r"vLLM 0\.4\.0 stops at start-up on the bare word 'llama-3\.1-8b'"):
        parse_vllm_command("docker run --gpus all vllm/vllm-openai:v0.4.0 llama-3.1-8b")
    with pytest.raises(InputError, match="give the model as --model MODEL"):
        parse_vllm_command("python -m vllm.entrypoints.openai.api_server llama-3.1-8b", old)
    with pytest.raises(InputError, match="drop the word, --model is served"):
        parse_vllm_command("python -m vllm.entrypoints.openai.api_server --model llama-3.1-8b stray", old)
    with pytest.raises(InputError, match=r"the demo server \(vllm\.entrypoints\.api_server\) takes no positional"):
        parse_vllm_command("python -m vllm.entrypoints.api_server --model llama-3.1-8b stray",
                           VllmSettings(version="0.20.0"))
    with pytest.raises(InputError, match=r"vLLM 0\.26 has no such module"):
        parse_vllm_command("python -m vllm.entrypoints.api_server --model llama-3.1-8b", VllmSettings(version="0.26.0"))
    assert parse_vllm_command("docker run vllm/vllm-openai:v0.4.0 --model llama-3.1-8b").model == "llama-3.1-8b"
    assert parse_vllm_command("docker run vllm/vllm-openai:v0.10.1 llama-3.1-8b").model == "llama-3.1-8b"
    assert parse_vllm_command("docker run vllm/vllm-openai:latest llama-3.1-8b").model == "llama-3.1-8b"


@pytest.mark.parametrize("command", [
    "vllm serve llama-3.1-8b --revision v2.0 --tokenizer-revision t1 --code-revision=c1",
    "python -m sglang.launch_server --model-path llama-3.1-8b --revision v2.0",
    "trtllm-serve llama-3.1-8b --revision=v2.0"])
def test_a_revision_kvbudget_does_not_read_is_said(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """--revision names another commit of the model's repo, whose config may differ from the one planned (the
    catalog's or the default branch's): it was passed over silently (vLLM) or called memory-neutral (SGLang,
    trtllm-serve). Now one warning per revision flag; the tokenizer's revision changes no memory and stays silent."""
    from kvbudget.cli import main

    assert main(["explain", "--gpu", "H100", "--", *command.split()]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the report's warnings, wrapped
    assert "warning: --revision 'v2.0': kvbudget reads the model's config from the catalog or the repo's default" in out
    assert "tokenizer-revision" not in out and ("'c1'" in out) == command.startswith("vllm")
    assert "flag --revision does not change memory" not in out
