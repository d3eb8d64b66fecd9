"""What SGLang and TensorRT-LLM share behind the engine interface: a KV pool in tokens with a scheduler's cap,
the same report section, one command reader and one log checker for both (each engine reads its own lines)."""

from __future__ import annotations

import os

from .base import Command, Verdict

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any


def program(words: list[str]) -> str:
    """The launched program of a pasted command: its first word that is not an environment assignment."""
    return os.path.basename(next((w for w in words if "=" not in w or w.startswith("-")), ""))


def pool_verdict(starts: bool, pool_tokens: int, context: int, cap: int, batch: int) -> Verdict:
    """Requests of ``context`` tokens a pool of ``pool_tokens`` holds, as its scheduler (``cap``) admits them."""
    pool = pool_tokens // context if starts and context > 0 else 0
    held = min(pool, cap)
    return Verdict(held=held, asked=batch, fits=held >= batch, cap=cap, pool_held=pool)


class PoolServer:
    """Report sections and readers SGLang and TensorRT-LLM share (each subclass says which it is)."""

    name: str  # each subclass's engine name, which is also its package's
    label: str  # the engine's name as users know it
    serving, pooled, lever_load, tensor_parallel, launch_hint = True, True, 1, True, ""
    default_reader = False
    kv_levers: tuple[str, ...] = ("fp8",)

    def read_command(self, words: list[str], given: dict[str, Any]) -> Command:
        from .cmdscan import parse_other_command

        version = given.get("sglang_version")
        cmd = parse_other_command(words, version)  # its flags checked against the release line named
        settings = cmd.sglang if cmd.sglang is not None else cmd.trtllm
        from .._record import replace

        if version is not None and cmd.sglang is not None:  # the release line the user names for the command
            settings = replace(settings, version="current" if version in ("current", "0.5") else version)
        if given.get("profile"):  # a site profile (kvbudget calibrate --out), checked as this engine's
            settings = replace(settings, site=self.site_terms(given["profile"]))
        return Command(cmd.model, settings, cmd.warnings)

    def site_terms(self, doc: object) -> tuple[Any, ...]:
        """A site profile's terms for this engine (none when no profile is given), checked against its release
        lines (``profile_releases``)."""
        if doc is None:
            return ()
        from .site import site_profile

        return site_profile(doc, self.name, self.label, self.profile_releases())

    def profile_releases(self) -> Any:
        """The release line keys a profile term of this engine may name, or a test of one (engines/site.py)."""
        raise NotImplementedError

    def calibration_point(self, name: str, text: str, given: dict[str, Any]) -> Any:
        """The run a log shows: its GPU, release line and TP x PP, and the free memory the pool was sized from as
        the log shows it and as kvbudget plans it (``calibration_free``; None when the log shows neither)."""
        from ..questions.calibrate import Point

        c = self.check(text, given)
        free = self.calibration_free(c) if c.plan is not None else None
        if free is None:
            return None
        figure, logged, predicted, release = free
        s = dict(c.settings)
        return Point(name, self.name, c.gpu, release, int(s.get("tp", 1)) * int(s.get("pp", 1)), logged, predicted, figure,
                     c.device_bytes or 0)

    def calibration_free(self, c: Any) -> tuple[str, int, int, str] | None:
        """(what the figure is, the log's bytes, kvbudget's bytes, the release line's key) of a checked log."""
        raise NotImplementedError

    def gpus(self, s: Any) -> int:
        return int(s.tp * s.pp)

    reads_run_flags = True  # check: the engine's flags a logged run used, after --

    def check(self, text: str, given: dict[str, Any]) -> Any:
        """The run the log shows, planned by kvbudget (each engine's ``check.check_run``)."""
        import importlib

        return importlib.import_module(f"{__package__}.{self.name}.check").check_run(text, given)

    def text(self, answer: Any, units: str) -> str:
        from ..report.text import engine_text

        p = answer.plan
        return engine_text(answer.row, p.model, p.gpu, list(p.log_lines), list(p.notes)
                           + [f"warning: {w}" for w in answer.warnings], units, answer.label)

    def doc(self, answer: Any, units: str) -> dict[str, Any]:
        from ..report.json_doc import engine_doc

        p = answer.plan
        return engine_doc(answer.row, p, list(p.log_lines), list(p.notes), list(answer.warnings))

    def check_text(self, result: Any, units: str) -> str:
        from ..report.text import other_check_text

        return other_check_text(result)

    def check_doc(self, result: Any, units: str) -> dict[str, Any]:
        from ..report.json_doc import other_check_doc

        return other_check_doc(result)
