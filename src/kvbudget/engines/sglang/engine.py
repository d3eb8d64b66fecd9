"""SGLang behind the engine interface (``engines/base.py``)."""

from __future__ import annotations

from ..base import Ask, Command, Container, Fraction, Launch, Layout, Option, Setup, Verdict, known_weights
from ..server import PoolServer, pool_verdict, program

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    from ...hardware import GPU
    from ...model.spec import ModelSpec
    from ..base import EnginePlan
    from .policy import SGLangPlan
    from .settings import SGLangSettings


def _kv(name: str) -> str:
    return "fp8_e4m3" if name in ("fp8", "fp8_e4m3") else name  # kvbudget's fp8: SGLang's e4m3


class SGLangEngine(PoolServer):
    name, label = "sglang", "SGLang"
    release_option = "sglang_version"  # the option naming the release line whose rules apply (calibrate's hint)
    multi_node, pipeline = False, True
    # SGLang's image (docs.sglang.ai, "Install SGLang": docker); launch_server's default port 30000
    container: Container | None = Container("sglang", "lmsysorg/sglang:latest", 30000,
                                            ("python", "-m", "sglang.launch_server"), listen=True)
    fraction: Fraction | None = Fraction("mem_fraction_static", 0.03)
    options: tuple[Option, ...] = (Option("mem_fraction_static", "fraction", "SGLang's mem_fraction_static (default: by GPU memory)",
                      commands=("fit", "levers")),
               Option("max_num_seqs", "count", "requests running at once: SGLang's max_running_requests (default: by pool size)"),
               Option("dp", "count", "SGLang --dp-size: whole replicas of tp x pp GPUs each, or with --enable-dp-attention "
                      "attention data-parallel groups inside the TP group", default=1),
               Option("enable_dp_attention", "switch", "SGLang --enable-dp-attention: attention (and its KV pool) split "
                      "over tp / dp GPUs, each group serving its own requests; MoE and lm_head stay over all tp",
                      default=False),
               Option("ep_size", "count", "SGLang --ep-size: an MoE model's routed experts spread over this many GPUs "
                      "of the TP group (must divide --tp)", default=1),
               Option("profile", "json", "a site profile (kvbudget calibrate LOG ... --out FILE): the memory the "
                      "site's logs show held outside the server", commands=("fit", "explain", "levers")),
               Option("sglang_version", "choice", "SGLang release line whose memory rules apply: current (0.5.3 on), "
                      "0.4.8 (0.4.8 - 0.5.2) or 0.4 (up to 0.4.7)",
                      default="current", choices=("current", "0.5", "0.4.8", "0.4"),
                      commands=("fit", "explain", "check", "levers", "calibrate")))
    fit_flags = frozenset({"max_num_seqs", "mem_fraction_static", "sglang_version", "tp", "pp", "num_gpus", "batch",
                           "kv_dtype", "weights_dtype", "dp", "enable_dp_attention", "ep_size", "profile"})
    fit_instead = tuple({"gpu_memory_utilization": "--mem-fraction-static", "np": "--max-num-seqs"}.items())

    # what `kvbudget plan` tries by default, and the names it accepts
    plan_weights: tuple[str, ...] = ("auto", "fp8")
    plan_kv: tuple[str, ...] = ("auto", "fp8")

    check_weights = staticmethod(known_weights)  # any weight format kvbudget knows

    def check_kv(self, name: str) -> None:
        from ..base import known_kv
        from .settings import KV_DTYPES

        known_kv(name, ("fp8", *KV_DTYPES), self.label)  # kvbudget's fp8: SGLang's fp8_e4m3

    def plan(self, spec: ModelSpec, gpu: GPU, setup: Setup) -> EnginePlan:
        from .settings import SGLangSettings

        return self.row(self.run(spec, gpu, SGLangSettings(context_length=setup.context, tp=setup.tp, pp=setup.pp,
                                                           kv_cache_dtype=_kv(setup.kv_dtype),
                                                           quantization=None if setup.weights == "auto" else setup.weights)))

    def replica(self, *args: Any, **site: Any) -> Any:  # site: a profile's terms (plan/search.py with_site)
        from .policy import replica

        return replica(*args, **site)

    def accepts(self, settings: object) -> bool:
        from .settings import SGLangSettings

        return isinstance(settings, SGLangSettings)

    def settings(self, spec: ModelSpec, ask: Ask) -> SGLangSettings:
        from .settings import SGLangSettings

        return SGLangSettings(version=_line(ask.option("sglang_version", "current")),
                              mem_fraction_static=ask.option("mem_fraction_static"), tp=ask.tp, pp=ask.pp,
                              context_length=ask.context, kv_cache_dtype=_kv(ask.kv_dtype),
                              max_running_requests=ask.option("max_num_seqs"),
                              dp=int(ask.option("dp", 1)), enable_dp_attention=bool(ask.option("enable_dp_attention", False)),
                              ep_size=int(ask.option("ep_size", 1)),
                              quantization=None if ask.weights == "auto" else ask.weights,
                              site=self.site_terms(ask.option("profile")))

    def run(self, spec: ModelSpec, gpu: GPU, settings: SGLangSettings) -> SGLangPlan:
        from .policy import plan

        return plan(spec, gpu, settings)

    def row(self, native: SGLangPlan) -> EnginePlan:
        from .policy import summary

        return summary(native)

    def verdict(self, spec: ModelSpec, gpu: GPU, settings: SGLangSettings, p: SGLangPlan, batch: int) -> Verdict:
        """Requests of the context the pool holds, as the scheduler admits them. Under DP attention one server
        runs ``attn_dp`` schedulers, each with its own pool and its share of max_running_requests
        (``KVCacheConfigurator.resolve_max_num_reqs``): the server holds ``attn_dp`` times one. ``--dp`` replicas
        without it share the load as separate engines (``per_instance``). With either, or ``--ep-size``, the
        longest context comes from SGLang's own plan (the replica search knows none of them)."""
        from ..._record import replace
        from .settings import replicas

        v = self._held(p)
        n = replicas(settings)
        each = -(-batch // n)
        longest = None
        if p.attn_dp > 1 or p.ep_size > 1 or n > 1:
            from ..._bisect import largest
            from .policy import plan

            def ok(context: int) -> bool:
                return self._held(plan(spec, gpu, replace(settings, context_length=context))).held >= each

            longest = largest(ok, spec.max_context)
        return replace(v, asked=each, fits=v.held >= each, longest=longest, per_instance=n, load=batch if n > 1 else 0)

    @staticmethod
    def _held(p: SGLangPlan) -> Verdict:
        """One server's requests of ``p``'s context: every attention-DP worker's pool and cap together."""
        from ..._record import replace

        v = pool_verdict(p.starts, p.max_total_num_tokens, p.context_len, p.max_running_requests, 1)
        n = p.attn_dp
        return replace(v, held=v.held * n, cap=v.cap * n, pool_held=v.pool_held * n)

    def levers(self, spec: ModelSpec, gpu: GPU, settings: SGLangSettings, p: SGLangPlan,
               gpus_per_node: int | None = None) -> Any:
        """The replica search's levers (``plan/levers.py``), which know tp, pp, weights, KV dtype and fraction
        only: none under --dp, --enable-dp-attention or --ep-size rather than levers of another layout."""
        from ...plan.levers import replica_levers
        from .settings import replicas

        if p.attn_dp > 1 or p.ep_size > 1 or replicas(settings) > 1:
            return None, []
        layout = self.layout(settings)
        return replica_levers(spec, gpu, self.name, p.context_len, tp=layout.tp, pp=layout.pp, weights=layout.weights,
                              kv=layout.kv, fraction=layout.fraction, version=layout.version, gpus_per_node=gpus_per_node,
                              site=layout.site)

    def gpus(self, s: SGLangSettings) -> int:
        from .settings import replicas

        return int(s.tp * s.pp * replicas(s))  # under DP attention tp is the world size

    def layout(self, s: SGLangSettings) -> Layout:
        return Layout(s.tp, s.pp, s.quantization or "auto", s.kv_cache_dtype, s.mem_fraction_static, s.version, s.site)

    def launch(self, model: str, s: SGLangSettings) -> Launch:
        from ..served import checkpoint_note
        from .launch import sglang_argv
        from .settings import replicas

        # one launch_server starts every --dp replica (its data-parallel controller): one pod of them
        return Launch(tuple(sglang_argv(model, s)), checkpoint_note(model, s.quantization), group=replicas(s))

    def read_command(self, words: list[str], given: dict[str, Any]) -> Command:
        """The command as ``PoolServer`` reads it, under --sglang-version, else the release line its lmsysorg/sglang:TAG
        image names (as ``check LOG -- COMMAND`` reads it; explain planned the current line for any image)."""
        from ..._record import replace
        from .log import whole_command

        _, line, _, said = whole_command(words, given.get("sglang_version"))
        cmd = super().read_command(words, {**given, "sglang_version": line} if line is not None else given)
        # the image against --sglang-version (a tag naming no release: the log says more, and explain has none)
        image = [w for w in said if w.startswith("the image ") and not w.startswith("the image tag")]
        return replace(cmd, warnings=(*cmd.warnings, *image))

    def profile_releases(self) -> Any:
        from .settings import LINES

        return LINES

    def calibration_free(self, c: Any) -> tuple[str, int, int, str] | None:
        """SGLang's free memory before loading (printed, or after loading plus the load's usage: check's row)."""
        from ...units import GiB

        row = next((r for r in c.rows if r.figure.startswith("free before loading")), None)
        if row is None or row.reported is None or row.predicted is None:
            return None
        return "free memory before loading", round(row.reported * GiB), round(row.predicted * GiB), c.release

    def reads_command(self, words: list[str]) -> bool:
        from ..cmdscan import sglang_serve_at

        return ("sglang.launch_server" in words or program(words) == "sglang.launch_server"
                or sglang_serve_at(words) is not None)

    def reads_log(self, text: str) -> bool:
        """SGLang's own phrases (server_args, the weight loader, the memory pool), in every release line's log:
        a log that stopped before its KV cache was allocated is still SGLang's, not vLLM's."""
        return any(mark in text for mark in _MARKS)


_MARKS = ("KV Cache is allocated", "ServerArgs(", "sglang.srt", "sglang.launch_server", "Load weight begin",
          "Load weight end.", "Memory pool end", "max_total_num_tokens=", "lmsysorg/sglang")


def _line(version: str) -> str:
    """The release line of an SGLang version as kvbudget's rules name it (0.5 is the current one)."""
    return "current" if version in ("current", "0.5") else version


ENGINE = SGLangEngine()
