"""Every public function x every parameter x bad values: ``kvbudget.InputError`` with the CLI's
message (naming the parameter), never AttributeError, TypeError, a traceback or a NaN answer."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import kvbudget
from kvbudget import api
from kvbudget.engines.vllm import VllmSettings

MODEL = "llama-3.1-8b"
SPEC = kvbudget.load_model(MODEL)
NAN, INF = float("nan"), float("inf")
# Bad values for a count (context, batch, tp ...): each must be refused.
BAD_COUNTS: list[Any] = [-1, 0, NAN, INF, -INF, 1.5, "8", None, [], [8], {}, True, False, 2**63, 10**30, 1e30]
BAD_OPTIONAL_COUNTS = [v for v in BAD_COUNTS if v is not None]  # None means "the default" there
BAD_NAMES: list[Any] = [None, 7, 1.5, NAN, [], {}, True, b"H100", "x" * 100_000]
BAD_OPTIONAL_NAMES = [v for v in BAD_NAMES if v is not None]

BASE: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {
    "kv": (kvbudget.kv, {"model": SPEC, "context": 4096}),
    "fit": (kvbudget.fit, {"model": SPEC, "gpu": "H100", "context": 4096, "engine": "textbook"}),
    "vllm_plan": (kvbudget.vllm_plan, {"model": SPEC, "gpu": "H100"}),
    "max_concurrency": (kvbudget.max_concurrency, {"model": SPEC, "gpu": "H100", "context": 4096}),
    "max_concurrency_sglang": (kvbudget.max_concurrency, {"model": SPEC, "gpu": "H100", "context": 4096,
                                                         "engine": "sglang"}),
    "max_context": (kvbudget.max_context, {"model": SPEC, "gpu": "H100", "concurrency": 4}),
    "fewest_gpus": (kvbudget.fewest_gpus, {"model": SPEC, "gpu": "H100", "concurrency": 4, "context": 4096,
                                           "max_gpus": 2}),
    "explain": (kvbudget.explain, {"command": "vllm serve meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100"}),
}
# (function, parameter, bad values)
COUNT_PARAMS = [
    ("kv", "context", BAD_OPTIONAL_COUNTS), ("kv", "batch", BAD_COUNTS), ("kv", "tp", BAD_COUNTS),
    ("fit", "context", BAD_OPTIONAL_COUNTS), ("fit", "batch", BAD_COUNTS), ("fit", "tp", BAD_COUNTS),
    ("fit", "pp", BAD_COUNTS), ("fit", "prefill_chunk", BAD_OPTIONAL_COUNTS), ("fit", "gpu_memory", BAD_OPTIONAL_COUNTS),
    ("fit", "overhead_bytes", [v for v in BAD_OPTIONAL_COUNTS if v != 0]),
    ("fit", "activation_bytes", [v for v in BAD_OPTIONAL_COUNTS if v != 0]),
    ("fit", "weights_bytes", [v for v in BAD_OPTIONAL_COUNTS if v != 0]),
    ("vllm_plan", "gpu_memory", BAD_OPTIONAL_COUNTS),
    ("max_concurrency", "context", BAD_COUNTS), ("max_concurrency", "tp", BAD_COUNTS), ("max_concurrency", "pp", BAD_COUNTS),
    ("max_concurrency", "gpu_memory", BAD_OPTIONAL_COUNTS),
    ("max_concurrency_sglang", "context", BAD_COUNTS), ("max_concurrency_sglang", "tp", BAD_COUNTS),
    ("max_concurrency_sglang", "pp", BAD_COUNTS),
    ("max_context", "concurrency", BAD_COUNTS), ("max_context", "tp", BAD_COUNTS), ("max_context", "pp", BAD_COUNTS),
    ("fewest_gpus", "concurrency", BAD_COUNTS), ("fewest_gpus", "context", BAD_COUNTS),
    ("fewest_gpus", "max_gpus", BAD_COUNTS), ("fewest_gpus", "gpus_per_node", BAD_OPTIONAL_COUNTS),
    ("fewest_gpus", "gpu_memory", BAD_OPTIONAL_COUNTS),
]
NAME_PARAMS = [
    ("kv", "model", BAD_NAMES), ("kv", "kv_dtype", BAD_NAMES),
    ("fit", "model", BAD_NAMES), ("fit", "gpu", BAD_OPTIONAL_NAMES), ("fit", "weights_dtype", BAD_NAMES),
    ("fit", "kv_dtype", BAD_NAMES), ("fit", "engine", [*BAD_NAMES, "tgi"]),
    ("vllm_plan", "model", BAD_NAMES), ("vllm_plan", "gpu", BAD_OPTIONAL_NAMES),
    ("max_concurrency", "model", BAD_NAMES), ("max_concurrency", "gpu", BAD_OPTIONAL_NAMES),
    ("max_concurrency", "engine", [*BAD_NAMES, "tgi"]), ("max_concurrency", "weights", BAD_NAMES),
    ("max_concurrency", "kv_dtype", BAD_NAMES),
    ("max_context", "model", BAD_NAMES), ("max_context", "engine", BAD_NAMES), ("max_context", "weights", BAD_NAMES),
    ("fewest_gpus", "model", BAD_NAMES), ("fewest_gpus", "gpu", BAD_OPTIONAL_NAMES), ("fewest_gpus", "engine", BAD_NAMES),
    ("fewest_gpus", "version", BAD_NAMES), ("fewest_gpus", "weights", [*BAD_NAMES, (), ("auto", 5)]),
    ("fewest_gpus", "kv_dtype", [*BAD_NAMES, ()]),
    ("explain", "command", [None, 7, NAN, {}, [1, 2], b"vllm serve x"]), ("explain", "gpu", BAD_OPTIONAL_NAMES),
    ("explain", "version", BAD_OPTIONAL_NAMES),
]
OTHER_PARAMS = [
    ("fewest_gpus", "fraction", [NAN, INF, -0.1, 0, 1.5, "0.9", [], True]),
    ("vllm_plan", "settings", ["tp=2", {"tensor_parallel_size": 2}, 7, []]),
    ("max_concurrency", "settings", ["tp=2", {"tensor_parallel_size": 2}, 7]),
]
CASES = [(f, p, v) for f, p, values in COUNT_PARAMS + NAME_PARAMS + OTHER_PARAMS for v in values]


def _id(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 20 else text[:17] + "..."


@pytest.mark.parametrize(("func", "param", "value"), CASES, ids=[f"{f}-{p}-{_id(v)}" for f, p, v in CASES])
def test_bad_argument_is_input_error(func: str, param: str, value: Any) -> None:
    call, base = BASE[func]
    kwargs = {**base, param: value}
    if param == "gpu_memory":
        kwargs.pop("gpu", None)
    with pytest.raises(kvbudget.InputError) as info:
        call(**kwargs)
    message = str(info.value)
    assert "\n" not in message and len(message) <= 400, message[:500]


@pytest.mark.parametrize("func", sorted(BASE))
def test_good_arguments_answer(func: str) -> None:
    """The same calls with good values answer: the refusals above come from the bad value alone."""
    call, base = BASE[func]
    assert call(**base) is not None or func == "fewest_gpus"


def test_messages_name_the_parameter_as_the_cli_does() -> None:
    with pytest.raises(kvbudget.InputError, match="--context is -5: it must be at least 1"):
        kvbudget.kv(SPEC, context=-5)
    with pytest.raises(kvbudget.InputError, match="--batch must be a whole number"):
        kvbudget.fit(SPEC, gpu="H100", batch=NAN)
    with pytest.raises(kvbudget.InputError, match="--tp must be a whole number, not True"):
        kvbudget.kv(SPEC, tp=True)
    with pytest.raises(kvbudget.InputError, match="unknown GPU"):
        kvbudget.fit(SPEC, gpu="H9000")


def test_input_error_is_the_cli_one() -> None:
    from kvbudget.units import InputError

    assert kvbudget.InputError is InputError and issubclass(InputError, ValueError)


def test_integral_floats_are_counts() -> None:
    """2.0 is a whole number (JSON and YAML give them): the same answer as 2."""
    assert kvbudget.kv(SPEC, context=4096.0, batch=2.0).total_bytes == kvbudget.kv(SPEC, context=4096, batch=2).total_bytes


def test_fit_is_the_answer_the_cli_prints(capsys: pytest.CaptureFixture[str]) -> None:
    """kvbudget.fit and `kvbudget fit --json` answer alike for every engine (vLLM by default, as the CLI)."""
    import json

    from kvbudget.cli import main

    for engine in ("vllm", "sglang", "trtllm", "llama.cpp", "transformers", "textbook"):
        answer = kvbudget.fit(SPEC, gpu="H100", context=4096, engine=engine)
        assert isinstance(answer, kvbudget.FitAnswer) and answer.engine == engine
        assert main(["fit", SPEC.name, "--gpu", "H100", "--context", "4096", "--engine", engine, "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["fits"] == answer.fits
        assert doc.get("max_batch", answer.capacity.held) == answer.capacity.held * answer.capacity.per_instance
    assert kvbudget.fit(SPEC, gpu="H100", context=4096).engine == "vllm"
    with pytest.raises(kvbudget.InputError, match="unknown engine 'tgi'"):
        kvbudget.fit(SPEC, gpu="H100", engine="tgi")
    with pytest.raises(kvbudget.InputError, match="--prefill-chunk is not read under --engine vllm"):
        kvbudget.fit(SPEC, gpu="H100", prefill_chunk=4096)


def test_answers_are_finite_numbers() -> None:
    """No NaN or negative number in an answer built from good arguments."""
    plan = kvbudget.fit(SPEC, gpu="H100", context=4096, batch=8, engine="textbook")
    for name in ("total_bytes", "weights_bytes", "kv_cache_bytes", "activation_bytes", "overhead_bytes", "max_context"):
        value = getattr(plan, name)
        assert isinstance(value, int) and value >= 0 and not math.isnan(value)
    assert kvbudget.max_concurrency(SPEC, gpu="H100", context=4096, settings=VllmSettings()) > 0


@pytest.mark.parametrize("options", [[1], "max_num_seqs=8", ("max_num_seqs", 8), 5])
def test_options_that_are_not_a_dict_are_refused(options: object) -> None:
    """A list or a string for ``options`` raised AttributeError ('list' object has no attribute 'items')."""
    for call in (lambda: kvbudget.fit(SPEC, gpu="H100", options=options),
                 lambda: kvbudget.levers(SPEC, gpu="H100", context=4096, options=options)):
        with pytest.raises(kvbudget.InputError, match="options must be a dict"):
            call()


def test_numpy_and_fraction_numbers_are_the_numbers_they_hold() -> None:
    """numpy's integers are whole numbers and its floats numbers (np.int64(4096) was 'not a whole number'); numpy's
    bool, a Decimal and a numeric string stay refused. The figures are those of the plain ints."""
    np = pytest.importorskip("numpy")
    from fractions import Fraction

    plain = kvbudget.kv(SPEC, context=4096, batch=2).bytes_per_sequence
    assert kvbudget.kv(SPEC, context=np.int64(4096), batch=np.int32(2)).bytes_per_sequence == plain
    fit = kvbudget.fit(SPEC, gpu="H100", options={"gpu_memory_utilization": 0.5})
    for fraction in (np.float32(0.5), Fraction(1, 2)):
        assert kvbudget.fit(SPEC, gpu="H100", options={"gpu_memory_utilization": fraction}) == fit
    for bad in (np.bool_(True), np.float64("nan"), np.int64(-1)):
        with pytest.raises(kvbudget.InputError, match="--context"):
            kvbudget.kv(SPEC, context=bad)


def test_a_policy_given_as_a_string_is_one_policy() -> None:
    """policies='paged' was read letter by letter: "unknown policy 'p'"."""
    answer = kvbudget.simulate(SPEC, gpu="H100", synthetic="requests=3,prompt=10,output=5", policies="paged")
    assert [r.policy for r in answer.results] == ["paged"]
    with pytest.raises(kvbudget.InputError, match="unknown policy 'pagde'"):
        kvbudget.simulate(SPEC, gpu="H100", synthetic="requests=3", policies="pagde")


def _one_request() -> list[Any]:
    from array import array

    from kvbudget.sim.trace import RequestSpec

    return [RequestSpec("r0", 0.0, array("q", range(1, 101)), array("q", [7] * 10))]


@pytest.mark.parametrize(("call", "value"), [
    # a trace is a file name or the requests themselves: 5 raised TypeError, ['x'] AttributeError in the replay
    *[(lambda v: kvbudget.simulate(SPEC, gpu="H100", context=4096, trace=v), v) for v in (5, ["x"], [1], (), {}, b"t")],
    *[(lambda v: api.size(SPEC, gpu="H100", trace=v), v) for v in (5, [1])],
    # a log is its text: 5 raised TypeError
    *[(lambda v: api.size(SPEC, gpu="H100", log=v), v) for v in (5, [], {})],
    # prices is a file name: 5 read file descriptor 5 (0 would have read stdin), a dict raised TypeError
    *[(lambda v: kvbudget.plan_deployments(SPEC, concurrency=4, context=4096, gpus="H100", prices=v), v)
      for v in (5, 0, {"H100": 1.0}, b"p.csv")],
    # a plot is a file name: 5 raised AttributeError, a NUL in the name ValueError
    *[(lambda v: api.kv_plot(SPEC, v), v) for v in (5, None, b"x.png", "x\x00.png")],
], ids=lambda v: _id(v) if not callable(v) else "call")
def test_files_and_requests_of_the_wrong_kind_are_input_errors(call: Callable[[Any], Any], value: Any) -> None:
    with pytest.raises(kvbudget.InputError) as info:
        call(value)
    assert "\n" not in str(info.value) and len(str(info.value)) <= 400


@pytest.mark.parametrize(("kwargs", "said"), [
    ({"tp": 0}, "--tp is 0: it must be at least 1"),  # ZeroDivisionError
    ({"tp": 2.5}, "--tp must be a whole number, not 2.5"),  # drawn as TP 2.5
    ({"tp": True}, "--tp must be a whole number, not True"),  # drawn as TP 1
    ({"context": -5}, "--context is -5: it must be at least 1"),  # drawn
    ({"context": 10**30}, "it must be at most 134,217,728"),  # drawn
    ({"kv_dtype": 5}, "--kv-dtype must be a string"),  # AttributeError: 'int' object has no attribute 'strip'
])
def test_kv_plot_checks_its_numbers_as_kv_does(tmp_path: Path, kwargs: dict[str, Any], said: str) -> None:
    """kvbudget.api.kv_plot passed tp, context and kv_dtype to the drawing unchecked (hostile-input round 13)."""
    with pytest.raises(kvbudget.InputError, match=re.escape(said)):
        api.kv_plot(SPEC, str(tmp_path / "kv.png"), **kwargs)
    assert not (tmp_path / "kv.png").exists()
