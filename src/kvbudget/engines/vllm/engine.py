"""vLLM behind the engine interface (``engines/base.py``): its options, settings, verdict, levers, launch
command, command and log readers, each delegated to the module that does it."""

from __future__ import annotations

import json

from ..base import Ask, Command, Container, Fraction, Launch, Layout, Option, Setup, Verdict, known_weights

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    from ...hardware import GPU
    from ...model.spec import ModelSpec
    from ..base import EnginePlan
    from .policy import VllmPlan
    from .settings import VllmSettings

_ALL = ("fit", "explain", "check", "plan", "levers")


class VllmEngine:
    name, label = "vllm", "vLLM"
    release_option = "vllm_version"  # the option naming the release line whose rules apply (calibrate's hint)
    package = "vllm"  # its name on PyPI: a command's `pip install vllm==0.10.1` (or uvx vllm@0.10.1) names the release
    serving, multi_node, pipeline = True, True, True  # launch files across nodes; pipeline stages
    pooled, lever_load, tensor_parallel, launch_hint = True, 1, True, ""
    default_reader = True  # a command or a log no other engine claims is vLLM's
    reads_run_flags = True  # check: the vLLM flags a logged run used, after --
    long_context = "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"  # what lets it run past the model's own context
    kv_levers: tuple[str, ...] = ("fp8",)
    # vLLM's OpenAI-compatible server image (docs.vllm.ai, "Using Docker"); `vllm serve` listens on 8000
    container: Container | None = Container("vllm", "vllm/vllm-openai:latest", 8000, ("vllm", "serve"), multi_node=True)
    fraction: Fraction | None = Fraction("gpu_memory_utilization", 0.03)
    options: tuple[Option, ...] = (
        Option("vllm_version", "text", "vLLM release whose accounting to use: 0.33.0, 0.10.1, 0.6.3, current, v1, v0",
               commands=(*_ALL, "calibrate")),
        Option("gpu_memory_utilization", "fraction", "vLLM's budget fraction (default: the release's)",
               commands=("fit", "levers")),
        Option("max_num_seqs", "count", "requests running at once: vLLM's max_num_seqs (default: by GPU and release)"),
        Option("max_num_batched_tokens", "count", "vLLM max_num_batched_tokens (default: by GPU and release)"),
        Option("block_size", "count", "tokens per KV block (default 16, raised for hybrid models)"),
        Option("enforce_eager", "switch", "no CUDA graphs", default=False),
        Option("dp", "count", "data-parallel engines (figures are per engine; an MoE model's experts are shared "
               "over DP x TP GPUs)", default=1),
        Option("enable_expert_parallel", "switch", "vLLM --enable-expert-parallel: each of the DP x TP GPUs holds "
               "whole experts of an MoE model (without it, every expert is split over them)", default=False),
        Option("speculative_config", "text", "vLLM --speculative-config JSON, e.g. '{\"method\": \"mtp\", "
               "\"num_speculative_tokens\": 1}': MTP from the model's own checkpoint (DeepSeek-V3/R1, Qwen3-Next) is "
               "modelled (its layers' weights and KV), n-gram takes no memory, an EAGLE / EAGLE-3 head or draft model is "
               "read from its config.json (draft catalog, local folder, Hugging Face cache); other drafts are refused"),
        Option("profile", "json", "a site profile (kvbudget calibrate LOG ... --out FILE): its non-KV memory on "
               "runs like the logged ones", commands=("fit", "explain", "levers")),
        Option("vllm_sampler", "choice", "the top-k/top-p sampler of the profiling run: flashinfer (Docker images, "
               "vLLM >= 0.12) or native (a pip install of vLLM <= 0.11 without flashinfer: PyTorch sorts the logits, "
               "more memory); default flashinfer on NVIDIA, native on AMD", choices=("flashinfer", "native"),
               commands=("fit", "levers")),
        Option("vllm_compile_cache", "choice", "vLLM's torch.compile cache at start-up (>= 0.21): cold (the first "
               "start with a model, flags and release compiles afresh, and Inductor's benchmarks hold a copy of the "
               "embedding table in the profiling run) or warm (a later start loads the compiled graph); default cold",
               choices=("cold", "warm"), commands=("fit", "explain", "levers")),
    )
    # the `kvbudget fit` options it reads (their dests), and what to give instead of another engine's
    fit_flags = frozenset({"vllm_version", "gpu_memory_utilization", "max_num_batched_tokens", "block_size", "profile",
                           "enforce_eager", "dp", "enable_expert_parallel", "max_num_seqs", "tp", "pp", "num_gpus", "batch",
                           "speculative_config", "vllm_sampler", "vllm_compile_cache",
                           "kv_dtype", "weights_dtype"})
    fit_instead = tuple({"mem_fraction_static": "--gpu-memory-utilization", "free_gpu_memory_fraction": "--gpu-memory-utilization",
                         "np": "--max-num-seqs", "overhead": "--gpu-memory-utilization", "weights_memory": "--engine textbook"}.items())

    # what `kvbudget plan` tries by default, and the names it accepts
    plan_weights: tuple[str, ...] = ("auto", "fp8")
    plan_kv: tuple[str, ...] = ("auto", "fp8")

    check_weights = staticmethod(known_weights)  # any weight format kvbudget knows

    def check_kv(self, name: str) -> None:
        from .kv_dtypes import kv_dtype_taken

        kv_dtype_taken(name, "current", "--kv-dtype")  # as vLLM's newest parser takes it, written as it lists it

    def plan(self, spec: ModelSpec, gpu: GPU, setup: Setup) -> EnginePlan:
        from .settings import VllmSettings

        return self.row(self.run(spec, gpu, VllmSettings(
            max_model_len=setup.context, tensor_parallel_size=setup.tp, pipeline_parallel_size=setup.pp,
            kv_cache_dtype=setup.kv_dtype, quantization=_quantization(setup.weights))))

    def replica(self, *args: Any) -> Any:
        from .policy import replica

        return replica(*args)

    def settings(self, spec: ModelSpec, ask: Ask) -> VllmSettings:
        from .command import block_size_taken
        from .settings import VllmSettings

        if ask.option("block_size") is not None:  # as the release's parser takes it (fit --block-size 7 on 0.6.3)
            block_size_taken(ask.option("block_size"), "--block-size", ask.option("vllm_version", "current"))
        return VllmSettings(
            version=ask.option("vllm_version", "current"), gpu_memory_utilization=ask.option("gpu_memory_utilization"),
            max_model_len=ask.context, block_size=ask.option("block_size"), kv_cache_dtype=ask.kv_dtype,
            quantization=_quantization(ask.weights), tensor_parallel_size=ask.tp,
            pipeline_parallel_size=ask.pp, data_parallel_size=ask.option("dp", 1), max_num_seqs=ask.option("max_num_seqs"),
            max_num_batched_tokens=ask.option("max_num_batched_tokens"), enforce_eager=ask.option("enforce_eager", False),
            enable_expert_parallel=bool(ask.option("enable_expert_parallel", False)),
            allow_long_max_model_len=bool(ask.option("allow_long_max_model_len", False)),
            site=_site(ask.option("profile")), sampler=ask.option("vllm_sampler"),
            compile_cache=ask.option("vllm_compile_cache") or "cold",
            **_speculative(ask.option("speculative_config"), ask.option("vllm_version", "current"), ask.tp))

    def accepts(self, settings: object) -> bool:
        from .settings import VllmSettings

        return isinstance(settings, VllmSettings)

    def held_at(self, spec: ModelSpec, gpu: GPU, settings: VllmSettings, context: int) -> int:
        """Requests of ``context`` tokens one plan holds: whole ones of its blocks, capped by ``max_num_seqs``."""
        from ..._record import replace
        from .policy import held

        p = self.run(spec, gpu, replace(settings, max_model_len=context))
        return min(held(p), p.max_num_seqs)

    def longest_for(self, spec: ModelSpec, gpu: GPU, settings: VllmSettings, concurrency: int) -> int:
        """The longest context at which ``concurrency`` requests fit: vLLM's own binary search over lengths on
        one profiled pool (0 when the scheduler's ``max_num_seqs`` never runs that many at once)."""
        from ..._record import replace
        from .policy import capacity

        p = self.run(spec, gpu, replace(settings, max_model_len=None))
        if (not p.starts and not p.num_gpu_blocks) or concurrency > p.max_num_seqs:
            return 0
        return capacity(replace(p, starts=True), concurrency)[1]

    def run(self, spec: ModelSpec, gpu: GPU, settings: VllmSettings) -> VllmPlan:
        from .policy import plan

        return plan(spec, gpu, settings)

    def row(self, native: VllmPlan) -> EnginePlan:
        from .policy import summary

        return summary(native)

    def verdict(self, spec: ModelSpec, gpu: GPU, settings: VllmSettings, p: VllmPlan, batch: int) -> Verdict:
        """Requests per engine of ``max_model_len``: whole ones of the pool's blocks (vLLM's own count), and the
        longest context at which the engine's share of the load fits, by vLLM's own block arithmetic."""
        from .policy import capacity

        each = -(-batch // p.dp)  # data-parallel engines share the load: each holds its part in its own pool
        held, longest = capacity(p, each) if p.starts else (0, 0)
        return Verdict(held=held, asked=each, fits=p.starts and p.max_concurrency >= each, longest=longest,
                       per_instance=p.dp, cap=0, pool_held=held, load=batch)

    def advice(self, spec: ModelSpec, gpu: GPU, settings: VllmSettings, p: VllmPlan) -> list[tuple[str, VllmPlan]]:
        from .fixes import suggestions

        return suggestions(spec, gpu, settings, p)

    def levers(self, spec: ModelSpec, gpu: GPU, settings: VllmSettings, p: VllmPlan, gpus_per_node: int | None = None) -> Any:
        """vLLM's own levers (``plan/levers.py``), each re-planned with its rules at the plan's context."""
        from ..._record import replace
        from .levers import levers

        return levers(spec, gpu, replace(settings, max_model_len=p.max_model_len if p.max_model_len > 0
                                         else settings.max_model_len), gpus_per_node)

    def partition(self, p: VllmPlan) -> tuple[int, int, list[list[tuple[str, int]]]]:
        """Each GPU's memory, bottom to top, ending with what stays free: under pipeline parallelism each stage's
        own, otherwise the binding rank's for every GPU (tensor-parallel ranks hold the same)."""
        def stack(parts: list[tuple[str, int]]) -> list[tuple[str, int]]:
            return [*parts, ("free", max(p.total_bytes - sum(b for _, b in parts), 0))]

        one = stack([("weights", p.model_loading_bytes), ("KV cache", max(p.available_kv_cache_bytes, 0)),
                     ("activation", p.activation_bytes), ("CUDA graphs", p.cudagraph_bytes), ("overhead", p.non_torch_bytes)])
        if p.pp > 1 and len(p.stage_memory) == p.pp:
            return p.tp, p.pp, [stack([("weights", w), ("KV cache", kv), ("activation", act), ("CUDA graphs", graphs),
                                       ("overhead", p.non_torch_bytes)])
                                for w, kv, act, graphs in p.stage_memory for _ in range(p.tp)]
        return p.tp, p.pp, [one] * max(p.tp * p.pp, 1)

    def release_note(self, s: VllmSettings) -> str | None:
        """What a plan says of a release kvbudget has not read (newer than 0.33.0, older than 0.6.0)."""
        from .settings import unread_release

        return unread_release(s.version)

    def layout(self, s: VllmSettings) -> Layout:
        from .quant import format_name

        return Layout(s.tensor_parallel_size, s.pipeline_parallel_size, format_name(s.quantization) or "auto", s.kv_cache_dtype,
                      s.gpu_memory_utilization, s.version)

    def launch(self, model: str, s: VllmSettings) -> Launch:
        from ..served import checkpoint_note
        from .launch import vllm_argv

        group = s.data_parallel_size  # one vllm serve runs every DP engine (one pod of dp x tp x pp GPUs)
        from .quant import format_name

        return Launch(tuple(vllm_argv(model, s)), checkpoint_note(model, format_name(s.quantization)), group=group)

    def reads_command(self, words: list[str]) -> bool:
        return True  # vLLM reads what no other engine claims (vllm serve, python -m vllm.entrypoints ...)

    def read_command(self, words: list[str], given: dict[str, Any]) -> Command:
        from ..._record import replace
        from .command import parse_vllm_command
        from .settings import VllmSettings

        version = given.get("vllm_version")
        cmd = parse_vllm_command(words, VllmSettings(version=version) if version is not None else None,
                                 given.get("pinned"))
        settings = replace(cmd.settings, site=_site(given.get("profile"))) if given.get("profile") else cmd.settings
        if given.get("vllm_compile_cache"):
            settings = replace(settings, compile_cache=given["vllm_compile_cache"])
        return Command(cmd.model, settings, cmd.warnings, cmd.overrides)

    def gpus(self, s: VllmSettings) -> int:
        return s.tensor_parallel_size * s.pipeline_parallel_size * s.data_parallel_size

    def reads_log(self, text: str) -> bool:
        return True  # any release line's log that no other engine claims

    def check(self, text: str, given: dict[str, Any]) -> Any:
        from ..._record import replace
        from .check import check_log

        result = check_log(text, model=given.get("model"), gpu=given.get("gpu"), gpu_memory=given.get("gpu_memory"),
                           version=given.get("vllm_version"),
                           flags=None if given.get("flags") is None else list(given["flags"]))
        return replace(result, capacity=self.verdict(None, None, result.settings, result.plan, 1))  # type: ignore[arg-type]

    def calibration_point(self, name: str, text: str, given: dict[str, Any]) -> Any:
        """The run a log shows: its GPU, release line and TP x PP, the available KV memory it logged and the one
        kvbudget predicts (None when the log prints no available KV memory)."""
        from ...questions.calibrate import Point
        from ...units import GiB

        c = self.check(text, {**given, "profile": None})
        row = next((r for r in c.rows if r.figure == "available KV cache (GiB)"), None)
        if row is None or row.reported is None or row.predicted is None:
            return None
        s = c.settings
        return Point(name, self.name, c.gpu, c.plan.release, s.tensor_parallel_size * s.pipeline_parallel_size,
                     round(row.reported * GiB), round(row.predicted * GiB), device_bytes=c.plan.total_bytes)

    def text(self, answer: Any, units: str) -> str:
        from ...report.text import vllm_text

        said = "".join(f"\nwarning: {w}" for w in answer.warnings)  # what the command reader warned (explain)
        return vllm_text(answer.plan, units, answer.advice) + said

    def doc(self, answer: Any, units: str) -> dict[str, Any]:
        from ...report.json_doc import vllm_doc

        return {**vllm_doc(answer.plan, units, answer.advice), "warnings": list(answer.warnings)}

    def check_text(self, result: Any, units: str) -> str:
        from ...report.text import check_text

        return check_text(result, units)

    def check_doc(self, result: Any, units: str) -> dict[str, Any]:
        from ...report.json_doc import check_doc

        return check_doc(result, units)


def _speculative(value: object, version: str = "current", tp: int = 1) -> dict[str, Any]:
    """``fit --speculative-config JSON`` as VllmSettings fields, read as the launch command's flag is (an EAGLE head or
    draft model from its config.json); a draft kvbudget does not model is refused (fit has no band to widen for it)."""
    if value is None:
        return {}
    from ...units import InputError
    from .command import _speculative as read
    from .settings import VllmSettings

    settings, warnings = read(VllmSettings(version=version, tensor_parallel_size=tp), "--speculative-config",
                              value if isinstance(value, str) else json.dumps(value), "--speculative-config")
    if warnings:
        raise InputError(f"--speculative-config: kvbudget models MTP from the model's own checkpoint, n-gram proposers "
                         f"and EAGLE / draft models whose config.json it finds, not the {settings.speculative_method} "
                         "draft here: " + warnings[0].split(": ", 1)[1])
    return {"speculative_method": settings.speculative_method, "num_speculative_tokens": settings.num_speculative_tokens,
            "speculative_draft": settings.speculative_draft}


def _quantization(weights: str) -> str | None:
    """--quantization for kvbudget's ``--weights``: none for the checkpoint's own; an AWQ or GPTQ checkpoint of the
    model as vLLM runs one it detects (``auto_awq``/``auto_gptq``: Marlin where the GPU has it, quant.py)."""
    if weights == "auto":
        return None
    from .quant import format_name

    name = format_name(weights)
    return f"auto_{name}" if name in ("awq", "gptq") and weights.strip().lower() in ("awq", "gptq", "int4", "4bit") else weights


def _site(doc: object) -> tuple[Any, ...]:
    """A site profile's terms (none when no profile is given)."""
    if doc is None:
        return ()
    from ..site import site_profile
    from .settings import RELEASES

    return site_profile(doc, "vllm", "vLLM", RELEASES)


ENGINE = VllmEngine()
