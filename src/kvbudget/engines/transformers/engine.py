"""Hugging Face transformers' plain ``generate`` behind the engine interface (``engines/base.py``)."""

from __future__ import annotations

from ..._record import record
from ..base import Ask, Fraction, NotAServer, Option, Setup, Unsupported, Verdict, known_weights

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    from ...hardware import GPU
    from ...model.spec import ModelSpec
    from ..base import EnginePlan
    from .policy import TransformersPlan


@record
class TransformersSettings:
    """One ``generate`` call: its batch, its length and the cache class."""

    batch: int = 1
    context: int | None = None  # default: the model's
    dtype: str = "auto"
    cache: str = "dynamic"  # DynamicCache (generate's default) | StaticCache


class TransformersEngine(NotAServer):
    name, label = "transformers", "transformers"
    serving, multi_node, pipeline = True, False, False
    pooled, lever_load, tensor_parallel, launch_hint = False, 1, False, ""
    default_reader = False
    fraction: Fraction | None = None
    kv_levers: tuple[str, ...] = ()
    options: tuple[Option, ...] = (Option("cache", "choice", "transformers: DynamicCache (generate's default) or StaticCache",
                      default="dynamic", choices=("dynamic", "static")),)
    fit_flags = frozenset({"cache", "batch", "weights_dtype"})
    fit_instead: tuple[tuple[str, str], ...] = ()

    def check_weights(self, name: str) -> None:
        """The dtype ``from_pretrained`` loads the model in: the checkpoint's (auto), fp32, fp16 or bf16."""
        if name != "auto":
            from .policy import check_dtype

            known_weights(name)  # a llama.cpp type or an unknown name: that engine's or kvbudget's own line
            check_dtype(name)

    def plan(self, spec: ModelSpec, gpu: GPU, setup: Setup) -> EnginePlan:
        if setup.eight_bit:
            raise Unsupported("its KV caches hold the model's dtype; there is no fp8 cache")
        if setup.tp * setup.pp > 1:
            raise Unsupported("plain generate runs on one GPU here (kvbudget does not model device_map splits)")
        return self.row(self.run(spec, gpu, TransformersSettings(context=setup.context, dtype=setup.weights)))

    def accepts(self, settings: object) -> bool:
        return isinstance(settings, TransformersSettings)

    def settings(self, spec: ModelSpec, ask: Ask) -> TransformersSettings:
        return TransformersSettings(ask.batch, ask.context, ask.weights, ask.option("cache", "dynamic"))

    def run(self, spec: ModelSpec, gpu: GPU, s: TransformersSettings) -> TransformersPlan:
        from .policy import plan

        return plan(spec, gpu, s.batch, s.context or spec.max_context, s.dtype, s.cache)

    def row(self, native: TransformersPlan) -> EnginePlan:
        from .policy import row

        return row(native)

    def verdict(self, spec: ModelSpec, gpu: GPU, s: TransformersSettings, p: TransformersPlan, batch: int) -> Verdict:
        return Verdict(held=p.max_batch, asked=p.batch, fits=p.fits)

    def gpus(self, s: TransformersSettings) -> int:
        return 1

    def reads_command(self, words: list[str]) -> bool:
        return False

    def reads_log(self, text: str) -> bool:
        return False

    def text(self, answer: Any, units: str) -> str:
        from ...report.text import engine_text

        p = answer.plan
        return engine_text(answer.row, p.model, p.gpu, [], list(p.notes), units, answer.label)

    def doc(self, answer: Any, units: str) -> dict[str, Any]:
        from ...report.json_doc import engine_doc

        return engine_doc(answer.row, answer.plan, [], list(answer.plan.notes), list(answer.warnings))


ENGINE = TransformersEngine()
