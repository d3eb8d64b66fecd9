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
    serving, pooled, lever_load, tensor_parallel, launch_hint = True, True, 1, True, ""
    default_reader = False
    kv_levers: tuple[str, ...] = ("fp8",)

    def read_command(self, words: list[str], given: dict[str, Any]) -> Command:
        from .cmdscan import parse_other_command

        version = given.get("sglang_version")
        cmd = parse_other_command(words, version)  # its flags checked against the release line named
        settings = cmd.sglang if cmd.sglang is not None else cmd.trtllm
        if version is not None and cmd.sglang is not None:  # the release line the user names for the command
            from .._record import replace

            settings = replace(settings, version="current" if version in ("current", "0.5") else version)
        return Command(cmd.model, settings, cmd.warnings)

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
