"""TensorRT-LLM (the PyTorch backend of ``trtllm-serve``) behind the engine interface (``engines/base.py``)."""

from __future__ import annotations

from ..base import Ask, Command, Container, Fraction, Launch, Layout, Option, Setup, Unsupported, Verdict, known_weights
from ..server import PoolServer, pool_verdict, program

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    from ...hardware import GPU
    from ...model.spec import ModelSpec
    from ..base import EnginePlan
    from .policy import TrtllmPlan
    from .settings import TrtllmSettings


class TrtllmEngine(PoolServer):
    name, label = "trtllm", "TensorRT-LLM"
    release_option = "trtllm_release"  # the option naming the release line whose rules apply (calibrate's hint)
    multi_node, pipeline = False, True
    # the TensorRT-LLM release image on NGC (nvcr.io/nvidia/tensorrt-llm/release); trtllm-serve's port 8000
    container: Container | None = Container("trtllm", "nvcr.io/nvidia/tensorrt-llm/release:latest", 8000,
                                            ("trtllm-serve",), listen=True)
    fraction: Fraction | None = Fraction("free_gpu_memory_fraction", 0.05)
    options: tuple[Option, ...] = (
        Option("free_gpu_memory_fraction", "fraction", "TensorRT-LLM's fraction (default 0.9)", commands=("fit", "levers")),
        Option("trtllm_release", "text", "TensorRT-LLM release whose rules apply (0.13, 0.20, 1.1.0rc3 ...): the one "
               "a logged run used where the log does not print it, or the one a plan is for (default: the current "
               "source)", commands=("fit", "explain", "levers", "check", "calibrate")),
        Option("moe_expert_parallel_size", "count", "TensorRT-LLM --ep_size: an MoE model's routed experts spread over "
               "this many of the TP ranks, whole (default: none, every expert split over the TP ranks)"),
        Option("moe_tensor_parallel_size", "count", "TensorRT-LLM moe_tensor_parallel_size (options file): each "
               "expert split this many ways; x moe_expert_parallel_size must equal --tp"),
        Option("enable_attention_dp", "switch", "TensorRT-LLM enable_attention_dp (options file): every rank holds the "
               "attention whole and caches all KV heads of its own requests", default=False),
        Option("profile", "json", "a site profile (kvbudget calibrate LOG ... --out FILE): the memory the site's logs "
               "show held outside the pool", commands=("fit", "explain", "levers")),
    )
    fit_flags = frozenset({"free_gpu_memory_fraction", "moe_expert_parallel_size", "moe_tensor_parallel_size",
                           "enable_attention_dp", "tp", "pp", "num_gpus", "batch", "kv_dtype", "weights_dtype", "profile",
                           "trtllm_release"})
    fit_instead = tuple({"gpu_memory_utilization": "--free-gpu-memory-fraction",
                         "max_num_seqs": "a --config options file with max_batch_size"}.items())

    # what `kvbudget plan` tries by default, and the names it accepts
    plan_weights: tuple[str, ...] = ("auto",)
    plan_kv: tuple[str, ...] = ("auto", "fp8")

    check_weights = staticmethod(known_weights)  # any weight format kvbudget knows

    def check_kv(self, name: str) -> None:
        from ..base import known_kv
        from .settings import _KV_DTYPES

        known_kv(name.lower(), _KV_DTYPES, self.label)

    def plan(self, spec: ModelSpec, gpu: GPU, setup: Setup) -> EnginePlan:
        from .settings import TrtllmSettings

        if setup.kv_dtype == "fp8_e5m2":
            raise Unsupported("its FP8 KV cache is e4m3 (kv_cache_config.dtype fp8); ask for fp8")
        kv = "fp8" if setup.eight_bit else "auto"
        return self.row(self.run(spec, gpu, TrtllmSettings(tp=setup.tp, pp=setup.pp, kv_cache_dtype=kv,
                                                           max_seq_len=setup.context,
                                                           quantization=None if setup.weights == "auto" else setup.weights)))

    def replica(self, *args: Any, **site: Any) -> Any:  # site: a profile's terms (plan/search.py with_site)
        from .policy import replica

        return replica(*args, **site)

    def accepts(self, settings: object) -> bool:
        from .settings import TrtllmSettings

        return isinstance(settings, TrtllmSettings)

    def settings(self, spec: ModelSpec, ask: Ask) -> TrtllmSettings:
        from .policy import given_release
        from .settings import TrtllmSettings

        return TrtllmSettings(free_gpu_memory_fraction=ask.option("free_gpu_memory_fraction", 0.9), tp=ask.tp, pp=ask.pp,
                              kv_cache_dtype=ask.kv_dtype, quantization=None if ask.weights == "auto" else ask.weights,
                              max_seq_len=ask.context, moe_ep=ask.option("moe_expert_parallel_size", None),
                              moe_tp=ask.option("moe_tensor_parallel_size", None),
                              enable_attention_dp=bool(ask.option("enable_attention_dp", False)),
                              site=self.site_terms(ask.option("profile")), release=given_release(ask.option("trtllm_release")))

    def read_command(self, words: list[str], given: dict[str, Any]) -> Command:
        """The command as ``PoolServer`` reads it, planned under the release --trtllm-release names, else the one
        its nvcr.io/nvidia/tensorrt-llm/release:TAG image names (as ``check LOG -- COMMAND`` reads it): both were
        passed over (the current source planned, a profile's term of that release unapplied, garbage accepted)."""
        from ..._record import replace
        from .log import whole_command
        from .policy import given_release

        cmd = super().read_command(words, given)
        _, release, _, said = whole_command(words, given_release(given.get("trtllm_release")))
        if release is None:
            return cmd
        return replace(cmd, settings=replace(cmd.settings, release=release),
                       warnings=(*cmd.warnings, *(w for w in said if w.startswith("the image"))))

    def profile_releases(self) -> Any:
        from .policy import is_release_key

        return is_release_key  # any 'major.minor' line, or 'current'

    def calibration_free(self, c: Any) -> tuple[str, int, int, str] | None:
        """The free memory TensorRT-LLM sized its pool from: printed (the engine path's "available"; the PyTorch
        path's available KV memory over its fraction), or the total less what the pool implies was held outside it."""
        from ...units import GiB, InputError
        from .check import HELD
        from .policy import release_key

        if unseen := [a for a in c.assumed if a.split(" ", 1)[0] in _SIZED_BY]:  # the peak planned is the defaults'
            raise InputError(f"the log does not print {', '.join(a.split(' ', 1)[0] for a in unseen)}: kvbudget planned "
                             "TensorRT-LLM's defaults, and a profile would take their difference for the site's memory")
        rows = {r.figure: r for r in c.rows if r.reported is not None and r.predicted is not None}
        fraction = float(dict(c.settings).get("free_gpu_memory_fraction", 0.9))
        total = c.device_bytes
        if "free when the pool is sized (GiB)" in rows:
            r = rows["free when the pool is sized (GiB)"]
            logged, planned = r.reported * GiB, r.predicted * GiB
        elif "available KV cache memory (GiB)" in rows:
            r = rows["available KV cache memory (GiB)"]
            logged, planned = r.reported * GiB / fraction, r.predicted * GiB / fraction
        elif HELD in rows and total is not None:
            r = rows[HELD]
            logged, planned = total - r.reported * GiB, total - r.predicted * GiB
        else:
            return None
        return "free memory when the pool is sized", round(logged), round(planned), release_key(c.release)

    def run(self, spec: ModelSpec, gpu: GPU, settings: TrtllmSettings) -> TrtllmPlan:
        from .policy import plan

        return plan(spec, gpu, settings)

    def row(self, native: TrtllmPlan) -> EnginePlan:
        from .policy import summary

        return summary(native)

    def verdict(self, spec: ModelSpec, gpu: GPU, settings: TrtllmSettings, p: TrtllmPlan, batch: int) -> Verdict:
        return pool_verdict(p.starts, p.max_tokens, p.max_seq_len, settings.max_batch_size, batch)

    def layout(self, s: TrtllmSettings) -> Layout:
        return Layout(s.tp, s.pp, s.quantization or "auto", s.kv_cache_dtype, s.free_gpu_memory_fraction,
                      s.release or "current", s.site)

    def launch(self, model: str, s: TrtllmSettings) -> Launch:
        from ..served import checkpoint_note
        from .launch import options_note, trtllm_argv

        notes = [n for n in (checkpoint_note(model, s.quantization), options_note(s)) if n]
        return Launch(tuple(trtllm_argv(model, s)), "; ".join(notes) or None)

    def reads_command(self, words: list[str]) -> bool:
        from ..compared import launcher

        # trtllm-serve, or a wrapper around it (docker run ... nvcr.io/nvidia/tensorrt-llm/release:TAG trtllm-serve ...)
        return program(words) == "trtllm-serve" or launcher(words) == "TensorRT-LLM"

    def reads_log(self, text: str) -> bool:
        """Its tags, or (lines pasted without them) the phrases only its KV cache manager prints."""
        return any(p in text for p in ("[TensorRT-LLM]", "[TRT-LLM]", "for max tokens in paged KV cache",
                                       "tokens in paged KV cache", "blocks in KV cache primary pool"))


# The settings the memory held outside the pool depends on (the weights, the engine's buffers or the profiling run):
# a log that shows none of them cannot be calibrated on
_SIZED_BY = frozenset({"free_gpu_memory_fraction", "max_batch_size", "max_num_tokens", "max_seq_len", "kv_cache_dtype"})

ENGINE = TrtllmEngine()
