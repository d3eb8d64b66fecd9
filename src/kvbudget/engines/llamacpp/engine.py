"""llama.cpp (llama-server) behind the engine interface (``engines/base.py``)."""

from __future__ import annotations

from ...units import InputError
from ..base import Ask, Command, Container, Fraction, Launch, Layout, Option, Setup, Verdict
from ..server import program

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    from ...hardware import GPU
    from ...model.spec import ModelSpec
    from ..base import EnginePlan
    from .policy import LlamaCppPlan
    from .settings import LlamaCppSettings

PROGRAMS = ("llama-server", "llama-cli", "server", "main", "llama-run", "llama-bench")


class LlamaCppEngine:
    name, label = "llama.cpp", "llama.cpp"
    serving, multi_node, pipeline = True, False, False  # layers split within one server (-ts)
    # no KV pool (the cache is what -c asks for); 8- and 4-bit caches; levers planned with as many slots as
    # llama-server takes; GPUs split the layers, not the heads
    pooled, tensor_parallel = False, False
    default_reader = False
    # llama.cpp's CUDA server image (ghcr.io/ggml-org/llama.cpp:server-cuda keeps it at /app/llama-server); port 8080
    container: Container | None = Container("llamacpp", "ghcr.io/ggml-org/llama.cpp:server-cuda", 8080,
                                            ("llama-server",), entry=("/app/llama-server",), listen=True)
    fraction: Fraction | None = None
    no_fraction = "llama.cpp allocates what -c and the cache types ask for"  # what to say to a memory fraction
    kv_levers: tuple[str, ...] = ("q8_0", "q4_0")
    launch_hint = "-m takes the model's GGUF file; its tensor types set the weights"
    options: tuple[Option, ...] = (
        Option("np", "count", "-np: parallel sequences (llama-server default: 4, unified)"),
        Option("ctk", "text", "-ctk: K cache type (f16, q8_0, q4_0 ...)", default="f16"),
        Option("ctv", "text", "-ctv: V cache type", default="f16"),
        Option("ngl", "layers", "-ngl: layers on the GPU (default: all)", default=-1),
        Option("fa", "choice", "-fa: flash attention", default="auto", choices=("on", "off", "auto")),
        Option("ubatch", "count", "-ub: physical batch size", default=512),
        Option("swa_full", "switch", "--swa-full: full-size cache for sliding-window layers", default=False),
        Option("kv_unified", "choice", "--kv-unified", default="auto", choices=("auto", "on", "off")),
        # where the weight tensors go (placement.py): the MoE-on-one-GPU question, answered by fit and levers
        Option("n_cpu_moe", "count", "--n-cpu-moe: the expert tensors of the first N layers in host memory",
               commands=("fit", "levers")),
        Option("cpu_moe", "switch", "--cpu-moe: every layer's expert tensors in host memory", default=False,
               commands=("fit", "levers")),
        Option("override_tensor", "text", "-ot / --override-tensor PATTERN=BUFFER[,...]: tensors whose name matches "
               "PATTERN on BUFFER (CPU, CUDA0 ...)", commands=("fit", "levers")),
        Option("llamacpp_build", "count", "llama.cpp build number (its 'build: N' line) whose sizing rules apply "
               "(default: current)", commands=("fit", "explain")),
        Option("profile", "json", "a site profile (kvbudget calibrate LOG ... --out FILE): the memory the site's logs "
               "show held outside llama.cpp, taken off the free memory auto-fit sizes from", commands=("fit", "explain")),
    )
    fit_flags = frozenset({"np", "ctk", "ctv", "ngl", "fa", "ubatch", "swa_full", "kv_unified", "n_cpu_moe", "cpu_moe",
                           "override_tensor", "llamacpp_build", "tp",
                           "num_gpus", "weights_dtype", "profile"})
    fit_instead = tuple({"batch": "--np (llama-server's parallel sequences)", "kv_dtype": "--ctk and --ctv (the K and V cache types)",
                         "pp": "--num-gpus (llama.cpp splits the layers over the GPUs, -sm layer)"}.items())

    @property
    def lever_load(self) -> int:
        from .policy import MAX_SEQ

        return MAX_SEQ

    # what `kvbudget plan` tries by default, and the names it accepts
    plan_weights: tuple[str, ...] = ("auto",)
    plan_kv: tuple[str, ...] = ("auto", "q8_0")

    def check_weights(self, name: str) -> None:
        """llama.cpp's weights are a GGUF file's types: a llama-quantize type (Q4_K_M ...) of a model given by name."""
        if name != "auto":
            from ...model import gguf_quant

            gguf_quant.weight_format(name)

    def check_kv(self, name: str) -> None:
        from ..base import known_kv
        from .settings import CACHE_TYPES

        known_kv(name, ("auto", "fp8", "fp8_e4m3", *CACHE_TYPES), self.label)  # fp8: its 8-bit cache, q8_0

    def plan(self, spec: ModelSpec, gpu: GPU, setup: Setup) -> EnginePlan:
        from .policy import plan, summary
        from .settings import LlamaCppSettings

        ctk = "q8_0" if setup.eight_bit else "f16"  # its 8-bit cache
        # no tensor parallelism: over several GPUs llama.cpp splits the layers (-sm layer, -ts even)
        # what fits the GPUs alone: auto-fit may shrink the context (steps 1-2) but moves no weights (step 3)
        s = LlamaCppSettings(n_ctx=0, type_k=ctk, type_v=ctk, flash_attn="on", devices=setup.tp * setup.pp,
                             fit_weights=False, quantize=_quantize(spec, setup.weights))
        return summary(plan(_quantized(spec, s), gpu, s), setup.context)

    def replica(self, *args: Any) -> Any:
        from .policy import replica

        return replica(*args)

    def accepts(self, settings: object) -> bool:
        from .settings import LlamaCppSettings

        return isinstance(settings, LlamaCppSettings)

    def settings(self, spec: ModelSpec, ask: Ask) -> LlamaCppSettings:
        from .settings import LlamaCppSettings

        quantize = _quantize(spec, ask.weights)
        build = ask.option("llamacpp_build")
        return LlamaCppSettings(overrides=_overrides(ask),
            n_ctx=ask.context or 0, n_parallel=ask.option("np"), kv_unified={"on": True, "off": False}.get(ask.option("kv_unified")),
            type_k=ask.option("ctk", "f16"), type_v=ask.option("ctv", "f16"), flash_attn=ask.option("fa", "auto"),
            n_ubatch=ask.option("ubatch", 512), swa_full=ask.option("swa_full", False), n_gpu_layers=ask.option("ngl", -1),
            devices=ask.tp,  # --num-gpus / --tp: layers split over the GPUs (-sm layer, -ts even)
            ngl_given=ask.option("ngl", -1) >= 0, site=self.site_terms(ask.option("profile")),
            quantize=quantize, **({"build": build} if build else {}))

    def run(self, spec: ModelSpec, gpu: GPU, s: LlamaCppSettings) -> LlamaCppPlan:
        from .policy import plan

        return plan(_quantized(spec, s), gpu, s)

    def row(self, native: LlamaCppPlan) -> EnginePlan:
        from .policy import summary

        return summary(native)

    def verdict(self, spec: ModelSpec, gpu: GPU, s: LlamaCppSettings, p: LlamaCppPlan, batch: int) -> Verdict:
        """The command's own slots: they fit or not; the load is its slots, each with its share of a unified
        cache's cells."""
        each = max(p.n_ctx // p.n_seq_max, 1) if p.unified else p.n_ctx_seq
        longest = 0
        if p.fits:  # the longest context per slot with the command's own settings (-ngl, cache types ...): -c grows
            from ..._bisect import largest
            from ..._record import replace

            slots = p.n_seq_max
            if p.fit_moved:  # the placement auto-fit chose stays: a longer -c is planned with it
                s = replace(s, n_gpu_layers=p.offloaded, overrides=p.overrides)
            longest = largest(lambda c: self.run(spec, gpu, replace(s, n_ctx=c * slots, fit=False)).fits,
                              spec.max_context)
        return Verdict(held=p.n_seq_max if p.fits else 0, asked=p.n_seq_max, fits=p.fits, longest=longest, context=each,
                       shared_cells=p.n_ctx if p.unified and p.n_seq_max > 1 else 0, cells=p.n_ctx, said=p.placement,
                       host_weights=p.fit_moved)

    def advice(self, spec: ModelSpec, gpu: GPU, s: LlamaCppSettings, p: LlamaCppPlan) -> tuple[str, ...]:
        """A 16-bit model that does not fit the GPU (or only with weights in host memory): would its Q4_K_M file?"""
        if (p.fits and not p.fit_moved) or s.quantize or spec.weight_format is None or spec.weight_format.name not in ("bf16", "fp16", "fp32"):
            return ()
        from ..._record import replace

        q4 = self.run(spec, gpu, replace(s, quantize="Q4_K_M", fit_weights=False))  # on the GPU alone
        return (f"a Q4_K_M file (--weights-dtype q4_k_m) {'fits' if q4.fits else 'does not fit either'}: "
                f"{q4.total_gpu_bytes / 2**30:.2f} GiB on the GPU",)

    def layout(self, s: LlamaCppSettings) -> Layout:
        return Layout(s.devices, 1, s.quantize or "auto", s.type_k if s.type_k != "f16" else "auto")

    def launch(self, model: str, s: LlamaCppSettings) -> Launch:

        note = None
        if s.quantize:
            from ...model import gguf_quant

            served = gguf_quant.file_name(model, s.quantize)
            note = f"weights as llama-quantize writes them (serve the result with llama-server -m {served}):"
            from ..._record import replace

            s = replace(s, model_file=served)
        from .launch import llamacpp_argv

        return Launch(tuple(llamacpp_argv(model, s)), note)

    def gpus(self, s: LlamaCppSettings) -> int:
        return s.devices

    def reads_command(self, words: list[str]) -> bool:
        from ..compared import launcher

        return program(words) in PROGRAMS or launcher(words) == "llama.cpp"

    def read_command(self, words: list[str], given: dict[str, Any]) -> Command:
        from .command import parse_llamacpp_command

        build = given.get("llamacpp_build")
        cmd = parse_llamacpp_command(words, build or None)
        hf = next((w.split()[1].rstrip(":") for w in cmd.warnings if w.startswith("-hf ")), None)
        if hf is not None:  # a repository to download from: planned only when the catalog knows its model
            from ...model.resolve import load_model

            try:
                load_model(cmd.model)
            except InputError:
                raise InputError(f"-hf {hf}: not a model kvbudget's catalog knows, so its file cannot be planned: "
                                 "download the GGUF and give -m PATH (kvbudget reads its header)") from None
        from ..compared import container_gpus, slurm_gpus, visible_devices
        from .command import on_devices

        warnings = list(cmd.warnings)
        shown = visible_devices(words) or container_gpus(words) or slurm_gpus(words)
        have = given.get("num_gpus")
        seen = min(shown[1], have or shown[1]) if shown is not None and shown[1] > 0 else have
        settings = on_devices(cmd.settings, seen, warnings) if seen else cmd.settings
        if given.get("profile"):  # a site profile (kvbudget calibrate --out), checked as llama.cpp's
            from ..._record import replace

            settings = replace(settings, site=self.site_terms(given["profile"]))
        return Command(cmd.model, settings, tuple(warnings))

    def reads_log(self, text: str) -> bool:
        return ("llama_kv_cache" in text or "KV self size" in text or "llama_context:" in text
                or "llama_params_fit_impl:" in text or "common_params_fit_impl:" in text)

    def check(self, text: str, given: dict[str, Any]) -> Any:
        from ...model.resolve import load_model
        from .check import check_caches
        from .log import parse_llamacpp_log

        log = parse_llamacpp_log(text)
        model = given.get("model")
        checks = check_caches(log, load_model(model) if model else None)
        if checks and not any(c.n_embd_k_gqa for c in checks):  # nothing to recompute a cache from: no 0 MiB figure
            raise InputError("the llama.cpp log lacks the KV widths (no n_embd_k_gqa / n_head_kv lines and no GGUF "
                             "key dump), so its KV caches cannot be recomputed: give --model (the model it loaded)")
        return log, checks, _fit_section(text, given)

    def calibration_point(self, name: str, text: str, given: dict[str, Any]) -> Any:
        """The free memory auto-fit sized from, as the log shows it (its fit line, else its device lines) and as
        kvbudget plans it for a bare card of the GPU (--gpu, else the one the log names); None when it shows none."""
        from ...questions.calibrate import Point
        from ..logscan import open_log
        from .fit import backend_context_bytes
        from .fitlog import log_gpu, logged_free, read_fit

        f = read_fit(open_log(text, "llama.cpp"))
        logged = logged_free(f) if f is not None else None
        if f is None or logged is None:
            return None
        gpu = log_gpu(f, given)
        if gpu is None:
            raise InputError("the log does not name a GPU kvbudget knows: give --gpu (or --gpu-memory) of the card it ran on")
        free, devices, _ = logged
        bare = gpu.memory_bytes - backend_context_bytes(gpu.memory_bytes)
        return Point(name, self.name, gpu.name, "current", devices, free, bare, "free device memory auto-fit sizes from",
                     gpu.memory_bytes)

    def site_terms(self, doc: object) -> tuple[Any, ...]:
        """A site profile's terms for llama.cpp (one release line, 'current': a bare card's free memory does not
        change with the build)."""
        if doc is None:
            return ()
        from ..site import site_profile

        return site_profile(doc, self.name, self.label, ("current",))

    def text(self, answer: Any, units: str) -> str:
        from ...report.text import llamacpp_text

        return "\n".join([llamacpp_text(answer.plan, units, list(answer.warnings)), *(f"note: {a}" for a in answer.advice)])

    def doc(self, answer: Any, units: str) -> dict[str, Any]:
        from ...report.json_doc import llamacpp_doc

        doc = llamacpp_doc(answer.plan, list(answer.warnings))
        if answer.advice:
            doc["suggestion"] = answer.advice[0]
        return doc

    def check_text(self, result: Any, units: str) -> str:
        from ...report.text import llamacpp_check_text

        return llamacpp_check_text(result[1], result[2])

    def check_doc(self, result: Any, units: str) -> dict[str, Any]:
        from ...report.json_doc import llamacpp_check_doc

        return llamacpp_check_doc(*result)


def _fit_section(text: str, given: dict[str, Any]) -> Any:
    """The log's auto-fit and device lines beside kvbudget's bare-card free memory, and a warning when the log had
    less (``fitlog.py``); None when it prints none."""
    from ..logscan import open_log
    from .fitlog import check_free, fit_rows, held_warning, log_gpu, read_fit

    f = read_fit(open_log(text, "llama.cpp"))
    if f is None:
        return None
    check_free(f)
    gpu = log_gpu(f, given)
    warning = held_warning(f, gpu) if gpu is not None else None
    return f, gpu.name if gpu is not None else None, fit_rows(f, gpu), (warning,) if warning else ()


def _overrides(ask: Ask) -> tuple[tuple[str, str], ...]:
    """The tensor placement fit's options ask for, in the order llama-server applies its flags written as
    ``-ot ... --cpu-moe --n-cpu-moe N`` (the first override whose pattern matches a tensor places it)."""
    from . import placement

    given = ask.option("override_tensor")
    n = ask.option("n_cpu_moe")
    return (*(placement.parse_overrides(given, "--override-tensor") if given else ()),
            *((placement.cpu_moe(),) if ask.option("cpu_moe", False) else ()),
            *(placement.n_cpu_moe(n) if n else ()))


def _quantize(spec: ModelSpec, weights: str) -> str:
    """--weights-dtype as llama-quantize's file type (Q4_K_M, Q8_0, ...) made from the model; "" for auto."""
    if weights == "auto":
        return ""
    from ...model import gguf_quant

    if spec.weight_format is not None and spec.weight_format.name == "stored":
        raise InputError(f"{spec.name} is a GGUF file: its tensor types are the weights (drop --weights-dtype, "
                         "or give the original model to plan what llama-quantize makes)")
    gguf_quant.weight_format(weights)  # an unknown type: one error line
    return weights


def _quantized(spec: ModelSpec, s: LlamaCppSettings) -> ModelSpec:
    """The model as the file llama-quantize makes of it with ``s.quantize`` (the model itself without)."""
    if not s.quantize:
        return spec
    from ..._record import replace
    from ...model import gguf_quant

    return replace(spec, weight_format=gguf_quant.weight_format(s.quantize))


ENGINE = LlamaCppEngine()
