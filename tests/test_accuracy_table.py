"""The accuracy tables in README.md and docs/validation.md are what tools/accuracy.py computes from the
real-log corpus now (issue #11): a table written by hand, or left behind when a log is added, fails here.
Regenerate with ``PYTHONPATH=src python tools/accuracy.py --write``.

Validation records (``"split": "validation"``, logs added after the modelling) are measured here, in the
table, never asserted within a tolerance: a miss on them is reported, not tuned away."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("kvbudget_accuracy_tool", ROOT / "tools" / "accuracy.py")
assert _spec is not None and _spec.loader is not None
accuracy = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = accuracy  # dataclasses look their module up
_spec.loader.exec_module(accuracy)


def test_every_record_names_its_split_and_source() -> None:
    for sub in ("vllm_logs", "sglang_logs", "trtllm_logs"):
        for path in sorted((ROOT / "tests" / "data" / sub).glob("*.json")):
            meta = json.loads(path.read_text(encoding="utf-8"))
            assert meta.get("split") in ("modelling", "validation"), path.name
            assert meta["url"].startswith("https://") and meta.get("date"), path.name
            if meta["split"] == "validation":  # held out: never set aside as an "outlier" after the fact
                assert "outlier" not in meta.get("kvbudget", {}), path.name


def test_the_marked_sections_are_what_the_script_writes_now() -> None:
    new = accuracy.section(accuracy.collect())
    for path in accuracy.TARGETS:
        text = path.read_text(encoding="utf-8")
        assert accuracy.BEGIN in text and accuracy.END in text, f"{path.name} has no accuracy section"
        assert accuracy.rewrite(text, new) == text, f"{path.name}: accuracy table is stale, run tools/accuracy.py --write"
