"""The textbook partition (weights + KV cache + activations + overhead, one rule for every engine) behind the
engine interface (``engines/base.py``): ``fit --engine textbook``. It is no server: compare, plan and the
levers leave it out (``serving``)."""

from __future__ import annotations

from .._record import record
from .base import Ask, Fraction, NotAServer, Option, Setup, Unsupported, Verdict

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    from ..hardware import GPU
    from ..model.spec import ModelSpec
    from .base import EnginePlan
    from .textbook import MemoryPlan


@record
class TextbookSettings:
    """The textbook's deployment, without the GPU (``textbook.Deployment`` with it)."""

    tp: int = 1
    pp: int = 1
    weights: str = "auto"
    kv_dtype: str = "auto"
    context: int | None = None
    batch: int = 1
    prefill_chunk: int = 8192
    overhead_bytes: int | None = None
    activation_bytes: int | None = None
    weights_bytes: int | None = None


class TextbookEngine(NotAServer):
    name, label = "textbook", "the textbook partition"
    serving, multi_node, pipeline = False, False, True
    pooled, lever_load, tensor_parallel, launch_hint = False, 1, True, ""
    default_reader = False
    fraction: Fraction | None = None
    kv_levers: tuple[str, ...] = ()
    options: tuple[Option, ...] = (
        Option("prefill_chunk", "count", "tokens per forward step for the activation estimate", default=8192),
        Option("overhead", "size0", "runtime overhead per GPU instead of the built-in estimate, e.g. 4GiB"),
        Option("activation", "size0", "activation workspace per GPU instead of the estimate, e.g. 2GiB"),
        Option("weights_memory", "size", "measured weights per GPU instead of computing them, e.g. 14.99GiB"),
    )
    fit_flags = frozenset({"prefill_chunk", "overhead", "activation", "weights_memory", "tp", "pp", "num_gpus", "batch",
                           "kv_dtype", "weights_dtype"})
    fit_instead: tuple[tuple[str, str], ...] = ()

    def plan(self, spec: ModelSpec, gpu: GPU, setup: Setup) -> EnginePlan:
        raise Unsupported("the textbook partition is no engine's")

    def accepts(self, settings: object) -> bool:
        return isinstance(settings, TextbookSettings)

    def settings(self, spec: ModelSpec, ask: Ask) -> TextbookSettings:
        return TextbookSettings(ask.tp, ask.pp, ask.weights, ask.kv_dtype, ask.context, ask.batch,
                                ask.option("prefill_chunk", 8192), ask.option("overhead"), ask.option("activation"),
                                ask.option("weights_memory"))

    def run(self, spec: ModelSpec, gpu: GPU, s: TextbookSettings) -> MemoryPlan:
        from .._record import asdict
        from .textbook import Deployment, fit

        return fit(spec, Deployment(gpu=gpu, **asdict(s)))

    def row(self, p: MemoryPlan) -> EnginePlan:
        from .base import engine_plan

        per, kv = p.kv_per_sequence_bytes, max(p.kv_cache_bytes, 0)
        return engine_plan("textbook", p.weights_bytes, kv, kv * p.context // per if per else 0, kv / per if per else 0.0,
                           p.context, p.verdict != "weights_exceed",
                           "total minus weights, activation workspace and overhead", "bytes")

    def verdict(self, spec: ModelSpec, gpu: GPU, s: TextbookSettings, p: MemoryPlan, batch: int) -> Verdict:
        return Verdict(held=p.max_batch or 0, asked=p.batch, fits=p.fits, longest=p.max_context)

    def gpus(self, s: TextbookSettings) -> int:
        return s.tp * s.pp

    def reads_command(self, words: list[str]) -> bool:
        return False

    def reads_log(self, text: str) -> bool:
        return False

    def partition(self, p: MemoryPlan) -> tuple[int, int, list[list[tuple[str, int]]]]:
        parts = [("weights", p.weights_bytes), ("KV cache", max(p.kv_cache_bytes, 0)),
                 ("activation", p.activation_bytes), ("overhead", p.overhead_bytes)]
        free = [("free", max(p.total_bytes - sum(b for _, b in parts), 0))]
        return p.tp, p.pp, [parts + free] * max(p.tp * p.pp, 1)

    def text(self, answer: Any, units: str) -> str:
        from ..report.text import fit_text

        return fit_text(answer.plan, units)

    def doc(self, answer: Any, units: str) -> dict[str, Any]:
        from ..report.json_doc import fit_doc

        return fit_doc(answer.plan, units)


ENGINE = TextbookEngine()
