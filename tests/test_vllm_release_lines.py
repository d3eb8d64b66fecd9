"""A vLLM log's release from the source lines its records name (engines/vllm/release_lines.py; lines.json from each
release's PyPI wheel, tools/gen_vllm_lines.py), and check's use of it where the log prints no version."""

from __future__ import annotations

import importlib.util
import json
import logging
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from kvbudget.engines.vllm.check import check_log
from kvbudget.engines.vllm.release_lines import MIN_PAIRS, TABLE, pairs, release_evidence, releases_read

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "vllm_logs"
_spec = importlib.util.spec_from_file_location("kvbudget_gen_vllm_lines", ROOT / "tools" / "gen_vllm_lines.py")
assert _spec is not None and _spec.loader is not None
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)

# the lines that name the release: the API server's banner, the engine's "(v0.10.1.1)", a "version 0.16.0" banner
_VERSION_LINE = re.compile(r"vLLM API server version|LLM engine \(v|vLLM version|\bversion [0-9]+\.[0-9]+\.[0-9]")
# records whose printed release the line numbers rule out, and why
_PRINTED_BUT_NOT_THE_RELEASE = {
    # the banner says 0.7.3 on 02-13 (2025), a week before 0.7.3 reached PyPI: a main build whose files had not
    # moved since 0.7.2, whose lines every record matches
    "v0.7.3_l40s_granite-3.0-3b-a800m_v1_default": "0.7.2",
}


def _without_version(text: str) -> str:
    return "\n".join(line for line in text.split("\n") if not _VERSION_LINE.search(line))


def _meta(name: str) -> dict[str, Any]:
    return json.loads((DATA / f"{name}.json").read_text())  # type: ignore[no-any-return]


def test_the_table_holds_every_release_from_0_6_to_0_33() -> None:
    data = json.loads(TABLE.read_text())
    releases = data["releases"]
    assert releases[0] == "0.6.0" and releases[-1] == "0.33.0" and len(releases) == 66
    for patch in ("0.6.3.post1", "0.8.5.post1", "0.9.0.1", "0.10.1", "0.10.1.1", "0.10.2", "0.27.1"):
        assert patch in releases
    assert "tools/gen_vllm_lines.py" in data["command"] and "pip download" in data["command"]
    assert TABLE.stat().st_size < 300_000


def test_the_generator_records_the_line_that_logging_reports(tmp_path: Path) -> None:
    """Python's logging reports the line a call starts on (a call spread over lines, an implicit concatenation, a
    function or method that logs its caller's line with stacklevel=2); the generator records those lines."""
    source = '''import logging
logger = logging.getLogger("kvbudget_lines_probe")


def print_warning_once(msg):
    logger.warning(msg, stacklevel=2)


def run(x):
    logger.info("one line %s", x)
    logger.info(
        "spread %s over %s",
        x,
        len(str(x)),
    )
    logger.warning("implicit "
                   "concatenation %s", x)
    print_warning_once(
        f"through a helper {x}")
    if x:
        logger.debug("nested %s",
                     x)
    Worker().fail(x)


class Worker:
    def _log_failure(self, msg):
        logger.error(msg, stacklevel=2)

    def fail(self, x):
        self._log_failure(f"a method that logs its caller's line {x}")
'''
    (tmp_path / "probe_lines.py").write_text(source)
    reported: list[int] = []

    class Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            reported.append(record.lineno)

    probe = logging.getLogger("kvbudget_lines_probe")
    probe.addHandler(handler := Handler())
    probe.setLevel(logging.DEBUG)
    sys.path.insert(0, str(tmp_path))
    try:
        importlib.import_module("probe_lines").run(1)
    finally:
        sys.path.remove(str(tmp_path))
        probe.removeHandler(handler)
    recorded = set(gen.release_lines({"vllm/probe_lines.py": source})["vllm/probe_lines.py"])
    assert reported == [10, 11, 16, 18, 21, 31]
    assert set(reported) <= recorded
    assert recorded - set(reported) == {6, 28}  # the helpers' own calls, which no record names


@pytest.mark.parametrize("name", sorted(p.stem for p in DATA.glob("*.log")))
def test_a_corpus_log_without_its_version_line_fits_its_release(name: str) -> None:
    meta = _meta(name)
    evidence = release_evidence(_without_version((DATA / f"{name}.log").read_text()))
    release = str(meta.get("vllm_version") or "").split(" ")[0]
    if release not in releases_read():
        return  # a development build, a release older than the table, or none named: nothing to hold it to
    expected = _PRINTED_BUT_NOT_THE_RELEASE.get(name, release)
    assert expected in evidence.releases or (not evidence.releases and evidence.pairs < MIN_PAIRS), evidence


def test_the_corpus_logs_are_identified_and_narrowly() -> None:
    """How many release-named corpus logs the line numbers identify, and to how many releases (the table, the rule
    and the corpus as of this commit: 52 logs, all identified, 41 to one release, 10 to two, 1 to nine). A log
    whose excerpt keeps no line with vLLM's [file.py:line] tag (a page quoting the figures alone, an issue quoting
    them without the prefix) has nothing to identify its release by, and is not counted."""
    widths = []
    for log in sorted(DATA.glob("*.log")):
        release = str(_meta(log.stem).get("vllm_version") or "").split(" ")[0]
        evidence = release_evidence(_without_version(log.read_text()))
        if release in releases_read() and evidence.pairs > 0:
            widths.append(len(evidence.releases))
    assert len(widths) >= 52
    assert widths.count(0) == 0
    assert widths.count(1) >= 41 and widths.count(1) + widths.count(2) >= 51


_LOG = {  # one record of each, as vLLM prints them; the releases whose table each line is in
    "worker": "(Worker_TP0 pid=1) INFO 12-17 12:56:07 [gpu_worker.py:298] Available KV cache memory: 35.82 GiB",  # 0.10.2, 0.11.0
    "size": "(EngineCore_DP0 pid=1) INFO 12-17 12:56:09 [kv_cache_utils.py:1028] GPU KV cache size: 1,043,264 tokens",  # 0.10.0, 0.10.2, 0.12.0
    "loading": "(EngineCore_0 pid=1) INFO 08-20 18:04:10 [gpu_model_runner.py:2007] Model loading took 65.9651 GiB",  # 0.10.1, 0.10.1.1
    "failed": "(EngineCore_0 pid=1) ERROR 08-20 18:04:22 [core.py:700] EngineCore failed to start.",  # 0.10.0-0.10.1.1
}


def test_pairs_that_no_release_holds_together_name_no_release() -> None:
    assert release_evidence("\n".join((_LOG["worker"], _LOG["size"]))).releases == ("0.10.2",)
    assert release_evidence("\n".join((_LOG["loading"], _LOG["failed"]))).releases == ("0.10.1", "0.10.1.1")
    impossible = release_evidence("\n".join(_LOG.values()))
    assert impossible.releases == () and impossible.pairs == 4
    assert release_evidence(_LOG["worker"]).releases == ()  # one pair alone can match a release by chance


def test_only_vllm_record_tags_are_read() -> None:
    text = "\n".join((
        "\x1b[32mINFO\x1b[0m \x1b[90m12-17 12:56:07\x1b[0m \x1b[90m[gpu_worker.py:298]\x1b[0m Available",  # colored
        "DEBUG 12-17 12:56:09 [v1/core/kv_cache_utils.py:1028] GPU KV cache size: 1 tokens",  # debug level's path
        "INFO 01-30 03:18:12 gpu_model_runner.py:848] Loading model weights took 1 GB",  # before 0.8: no bracket
        "W1006 15:57:53.123000 1 torch/_dynamo/utils.py:1250] PyTorch's own format",
        '  File "/usr/lib/python3.12/site-packages/vllm/v1/worker/gpu_worker.py", line 276, in determine',
        "INFO 01-30 03:18:12 [my_plugin.py:12] a plugin's line: a file name the table does not hold",
    ))
    assert pairs(text) == {("gpu_worker.py", 298), ("kv_cache_utils.py", 1028), ("gpu_model_runner.py", 848),
                           ("my_plugin.py", 12)}
    assert release_evidence(text).releases == ()  # 0.7's runner line with 0.10.2's worker: no release


def test_check_plans_the_release_the_line_numbers_name() -> None:
    """A 0.29.0 excerpt without its banner was planned on the current line's defaults (utilization 0.92, +48.6% on
    the KV tokens); its line numbers name 0.29.0, whose figures kvbudget matches to 1.4%."""
    name = "v0.29.0_rtx5060ti-wsl_qwen3-4b-2507-ft_len8192_gmu0.7"
    k = _meta(name)["kvbudget"]
    text = _without_version((DATA / f"{name}.log").read_text())
    result = check_log(text, model=k["model"], gpu=k["gpu"], flags=k.get("flags"))
    assert result.settings.version == "0.29.0"
    assert any("fit vLLM 0.29.0: planned as 0.29.0" in w for w in result.warnings)
    tokens = next(r for r in result.rows if r.figure == "KV cache tokens")
    assert tokens.error_pct is not None and abs(tokens.error_pct) < 2


def test_check_names_the_range_and_plans_its_newest() -> None:
    name = "v0.10.1_h100_gpt-oss-120b_default_negative-kv"
    k = _meta(name)["kvbudget"]
    result = check_log((DATA / f"{name}.log").read_text(), model=k["model"], gpu=k["gpu"])
    assert result.settings.version == "0.10.1.1"
    assert any("fit vLLM 0.10.1-0.10.1.1: planned as 0.10.1.1" in w for w in result.warnings)


def test_a_printed_or_given_version_wins_and_a_contradiction_is_said() -> None:
    name = "v0.29.0_rtx5090_qwen2.5-7b_bf16_len8192_gmu0.9"
    k = _meta(name)["kvbudget"]
    text = (DATA / f"{name}.log").read_text()
    assert text.count("0.29.0") == 2  # the banner's "version 0.29.0" and the engine's "(v0.29.0)"
    printed = check_log(text.replace("0.29.0", "0.23.0"), model=k["model"], gpu=k["gpu"])
    assert printed.settings.version == "0.23.0"
    assert any("fit vLLM 0.29.0, not the 0.23.0 the log prints" in w for w in printed.warnings)
    given = check_log(text, model=k["model"], gpu=k["gpu"], version="0.23.0")
    assert given.settings.version == "0.23.0"
    assert any("not the 0.23.0 given with --vllm-version" in w for w in given.warnings)
    same = check_log(text, model=k["model"], gpu=k["gpu"])  # printed and fitting: nothing said
    assert same.settings.version == "0.29.0" and not any("line numbers" in w for w in same.warnings)
    # a release line, or a release to its patch (0.29 for 0.29.0): no contradiction
    for version in ("current", "0.29"):
        assert not any("line numbers" in w for w in check_log(text, model=k["model"], gpu=k["gpu"], version=version).warnings)


def test_a_development_build_is_planned_as_its_nearest_release() -> None:
    """0.15.0rc2.dev46's lines fit no release together; 16 of its ruling pairs fit 0.15.0 (its moved files are the rest),
    so it is planned as 0.15.0 and said so: -0.02% against the log, where the wording's guess (the current line) was
    -14.9%. A ROCm 0.14.0rc1 build fits no release on more than 12 of its 25 pairs: no release is named."""
    name = "v0.15.0dev_80gb_llama3-8b-w4a16-awq_default"
    k = _meta(name)["kvbudget"]
    text = _without_version((DATA / f"{name}.log").read_text())
    evidence = release_evidence(text)
    assert evidence.releases == () and evidence.nearest == ("0.15.0",) and evidence.matched >= 2 / 3 * evidence.pairs
    result = check_log(text, model=k["model"], gpu=k["gpu"], gpu_memory=None, flags=k.get("flags"))
    assert result.settings.version == "0.15.0"
    assert any("fit no vLLM release kvbudget has read (0.6.0-0.33.0)" in w and "the nearest: planned as 0.15.0" in w
               for w in result.warnings)
    tokens = next(r for r in result.rows if r.figure == "KV cache tokens")
    assert tokens.error_pct is not None and abs(tokens.error_pct) < 0.5
    rocm = release_evidence(_without_version((DATA / "v0.14.0rc1-rocm_rx9070xt_r1-distill-qwen-14b-awq_len1024_gmu0.75.log")
                                             .read_text()))
    assert rocm.releases == () and rocm.nearest == () and rocm.pairs >= 20


def test_releases_of_several_minor_versions_leave_the_wording_guess() -> None:
    name = "v0.19.0_a100-80gb_gpt-oss-20b_len131072_gmu0.65"
    k = _meta(name)["kvbudget"]
    text = _without_version((DATA / f"{name}.log").read_text())
    evidence = release_evidence(text)
    assert "0.19.0" in evidence.releases and not evidence.one_minor
    result = check_log(text, model=k["model"], gpu=k["gpu"], flags=k.get("flags"))
    assert result.settings.version in ("current", "v1")
    assert any(f"fit vLLM {evidence.span}: the release is guessed from the log's wording" in w for w in result.warnings)


def test_an_image_tag_wins_over_the_line_numbers_and_a_contradiction_is_said() -> None:
    name = "v0.10.1_h100_gpt-oss-120b_default_negative-kv"
    k = _meta(name)["kvbudget"]
    text = (DATA / f"{name}.log").read_text()
    run = ["docker", "run", "--gpus", "all", "vllm/vllm-openai:{tag}", "--model", k["model"]]
    tagged = check_log(text, model=k["model"], gpu=k["gpu"], flags=[w.format(tag="v0.10.2") for w in run])
    assert tagged.settings.version == "0.10.2"
    assert any("fit vLLM 0.10.1-0.10.1.1, not the 0.10.2 that the image's tag names" in w for w in tagged.warnings)
    assert not any("planned as 0.10.1.1" in w for w in tagged.warnings)  # the note of the release it no longer plans
    fitting = check_log(text, model=k["model"], gpu=k["gpu"], flags=[w.format(tag="v0.10.1.1") for w in run])
    assert fitting.settings.version == "0.10.1.1" and not any("line numbers" in w for w in fitting.warnings)
