"""``kvbudget serve``: one local web page and a JSON API, on the same library as the CLI.

Every answer is the document ``kvbudget <command> --json`` prints for the same inputs: the endpoints call the same
``kvbudget.api`` functions and ``kvbudget.report`` renderers, reach every engine through the registry, and do no
arithmetic of their own. Safe by default: loopback only unless ``--host`` says otherwise, no file-system path
accepted (each request runs inside ``inputs.sealed``: a config is pasted as content), no Hugging Face Hub lookup
unless ``--allow-hub`` (then config.json only: no code from a model repository runs), bodies over 1 MiB refused,
and the long searches (plan, simulate) run on worker threads, a few at a time, so that one never blocks the others.

FastAPI and uvicorn are imported here only (``pip install 'kvbudget[web]'``): the CLI's start-up does not pay for them.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, overload

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles

from .. import api, inputs
from ..cli_args import error_line
from ..engines.base import Option, Registry, check_option, default_registry
from ..model.spec import ModelSpec
from ..report import json_doc
from ..units import InputError
from . import bodies

if TYPE_CHECKING:
    from ..engines.base import Engine

T = TypeVar("T")
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

STATIC = Path(__file__).parent / "static"
MAX_BODY = 1 << 20  # bytes in a request body: a config.json is a few KB
DRAIN = 8  # a body over MAX_BODY is read up to DRAIN x MAX_BODY before the 413 (then the connection just closes)
MAX_SIM_REQUESTS = 2000  # requests in a simulated workload from the web (kvbudget simulate takes more)
SLOW_AT_ONCE = 4  # plan searches and simulations running at once (the others wait, the quick answers do not)
NO_FILES = "the web page reads no files: paste the config.json (or the profile) as content instead"
NO_HUB = ("this server looks nothing up on the Hugging Face Hub: paste the model's config.json, "
          "or start it with kvbudget serve --allow-hub")
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")
ERRORS: dict[int | str, dict[str, Any]] = {400: {"model": bodies.ErrorDoc, "description": "bad input: the CLI's message"},
                                           413: {"model": bodies.ErrorDoc, "description": "body over 1 MiB"},
                                           415: {"model": bodies.ErrorDoc, "description": "a body not sent as JSON"}}


class BodyLimit:
    """Refuse a request body over ``limit`` bytes with 413, whether it says its length or streams it."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or ()).get(b"content-length")
        if length is not None and not (length.isascii() and length.isdigit()):
            # '-1', '+5', ' 5', '5, 5': no byte count (was answered 413 'request body over 1,048,576 bytes')
            said = f"Content-Length {inputs.excerpt(length.decode('latin-1'), 30)} is not a byte count: send the body's length in bytes"
            await JSONResponse({"error": said}, 400)(scope, receive, send)
            return
        refused = length is not None and int(length) > self.limit
        chunks: list[bytes] = []
        size, more = 0, True
        while more and size <= DRAIN * self.limit:  # read (and drop) what is sent, so that the client hears the 413
            message = await receive()
            if message["type"] != "http.request":
                break
            body = message.get("body", b"")
            size += len(body)
            more = message.get("more_body", False)
            if size <= self.limit and not refused:
                chunks.append(body)
        if refused or size > self.limit:
            await _too_large(scope, receive, send, self.limit)
            return
        if scope.get("method") == "POST" and (said := _body_problem(scope, b"".join(chunks))):
            await JSONResponse({"error": said}, 415 if said.startswith("send the body") else 400)(scope, receive, send)
            return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def _body_problem(scope: Scope, body: bytes) -> str:
    """Why a POST body is not the one JSON object the API reads ("" when it is), in one line. FastAPI reads a body
    of another Content-Type as no body at all ('Input should be a valid dictionary'), and its own parse failures
    (an integer past Python's 4,300 digits, nesting past the recursion limit, bytes no UTF encoding reads) as
    {"detail": "There was an error parsing the body"}: neither names the problem."""
    headers = dict(scope.get("headers") or ())
    kind = headers.get(b"content-type", b"").split(b";")[0].strip().lower().decode("latin-1")
    if kind != "application/json":
        got = f"got {inputs.excerpt(kind, 40)}" if kind else "it has none"
        return f"send the body as one JSON object with Content-Type: application/json ({got})"
    twice, pairs = inputs.repeated_keys()  # a key given twice: JSON readers keep the last

    try:
        parsed = json.loads(body, object_pairs_hook=pairs)  # as FastAPI reads it (UTF-8, -16 or -32)
    except json.JSONDecodeError as exc:
        return f"the body is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}): send one JSON object"
    except UnicodeDecodeError:
        return "the body is not UTF-8 text: send one JSON object in UTF-8"
    except RecursionError:
        return "the body is nested too deeply to read: send one flat JSON object"
    except ValueError:  # Python's int limit (sys.get_int_max_str_digits)
        return "the body holds an integer of thousands of digits: give counts as ordinary numbers"
    if not isinstance(parsed, dict):
        return f"the body must be one JSON object ({{\"model\": ...}}), not a JSON {type(parsed).__name__}"
    if twice:
        return f"the body gives {inputs.excerpt(twice[0], 40)} twice (only the last would be read): give each key once"
    return ""


async def _too_large(scope: Scope, receive: Receive, send: Send, limit: int) -> None:
    await JSONResponse({"error": f"request body over {limit:,} bytes: a config.json is a few KB"}, 413)(scope, receive, send)


class Security:
    """Headers on every response: the page loads nothing from elsewhere, and is not framed."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []),
                                      (b"content-security-policy", b"default-src 'self'; img-src 'self' data:; "
                                       b"frame-ancestors 'none'"),
                                      (b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer")]
            await send(message)

        await self.app(scope, receive, with_headers)


def _json(doc: object) -> Response:
    """A document as the CLI prints it with --json (the same serialiser)."""
    return Response(json_doc.dumps(doc), media_type="application/json")


@overload
def _count(flag: str, value: int | str) -> int: ...
@overload
def _count(flag: str, value: None) -> None: ...
@overload
def _count(flag: str, value: int | str | None) -> int | None: ...
def _count(flag: str, value: int | str | None) -> int | None:
    """A count as the CLI's flag reads it: a number stays one (the library checks its range), text is read as the
    flag's (``32K``, ``8,192``)."""
    if not isinstance(value, str):
        return value
    return _parsed(flag, "count", value)  # type: ignore[return-value]


def _parsed(flag: str, kind: str, text: str) -> object:
    import argparse

    from ..cli_args import _KINDS

    parse = _KINDS.get(kind)
    if parse is None:
        return text
    try:
        return parse(text)
    except argparse.ArgumentTypeError as exc:
        raise InputError(f"argument {flag}: {exc}") from None


def _size(value: int | str | None) -> int | None:
    if isinstance(value, str):
        from ..units import parse_size

        return parse_size(value)
    return value


def _layout(body: bodies.Layout) -> tuple[int, int]:
    return inputs.gpu_layout(_count("--num-gpus", body.num_gpus), _count("--tp", body.tp), _count("--pp", body.pp))


def _option(o: Option, value: bodies.OptionValue) -> object:
    """An engine option's value: text read as its flag's would be, anything else checked as the Python API checks it."""
    return check_option(o, _parsed(o.flag, o.kind, value) if isinstance(value, str) else value)


def _engine_options(registry: Registry, engine: Engine, command: str, given: dict[str, bodies.OptionValue]) -> dict[str, object]:
    """The options the CLI would hand the library for ``command`` under ``engine``: for fit (and simulate) the
    engine's defaults, then what was given; another engine's option refused with the CLI's message."""
    registry.refuse_foreign(command, engine.name, list(given))
    known = {o.dest: o for o in engine.options if command in o.commands}
    out: dict[str, object] = {d: o.default for d, o in known.items() if command == "fit" and o.default is not None}
    for dest, value in given.items():
        if dest not in known:
            raise InputError(f"{dest} is not an option of {engine.name} for {command}: use one of {', '.join(known) or 'none'}")
        out[dest] = _option(known[dest], value)
    return out


def _fit_doc(answer: Any, engine: Engine, units: str) -> object:
    from ..report import fit_report

    return fit_report.fit_doc(answer, engine, units)


def _partition_doc(answer: Any, engine: Engine) -> object:
    from ..report.plots import partition_doc

    return partition_doc(answer, engine)


def engines_doc(registry: Registry) -> list[dict[str, Any]]:
    """Each engine and its own options, for the page's settings form."""
    return [{"name": e.name, "label": e.label, "serving": e.serving, "launch_hint": e.launch_hint,
             "fraction": e.fraction.dest if e.fraction is not None else None,
             "plan_weights": list(e.plan_weights), "plan_kv": list(e.plan_kv),
             "options": [{"dest": o.dest, "flag": o.flag, "kind": o.kind, "help": o.help, "default": o.default,
                          "choices": list(o.choices), "commands": list(o.commands)} for o in e.options]}
            for e in registry]


def create_app(*, allow_hub: bool = False, registry: Registry | None = None, max_sim_requests: int = MAX_SIM_REQUESTS,
               allowed_hosts: tuple[str, ...] | None = LOOPBACK) -> FastAPI:
    """The web page and its API. ``allow_hub``: look Hub ids up (config.json only); ``allowed_hosts``: the Host
    headers answered (loopback names by default, against DNS rebinding; None: any, for a server bound elsewhere)."""
    reg = registry or default_registry()
    app = FastAPI(title="kvbudget", version=_version(), docs_url=None, redoc_url=None,  # their pages load a CDN
                  description="GPU memory for LLM serving: the answers `kvbudget ... --json` prints, for the same inputs.")
    slow = anyio.CapacityLimiter(SLOW_AT_ONCE)
    models_cache: list[Any] = []

    async def answer(work: Callable[[], T], limiter: anyio.CapacityLimiter | None = None) -> T:
        """``work`` on a worker thread, sealed: no file read, no Hub unless allowed."""
        def sealed() -> T:
            with inputs.sealed(NO_FILES, None if allow_hub else NO_HUB):
                return work()

        return await anyio.to_thread.run_sync(sealed, limiter=limiter)

    def spec(body: bodies.ModelInput) -> ModelSpec:
        if body.config is not None:
            from ..model.hf_config import spec_from_config

            return spec_from_config(body.config, name=body.model or "config.json")
        if body.model is None:
            raise InputError("give a model: a catalog name (kvbudget models) or a pasted config.json")
        return api.load_model(body.model)

    def fit_answer(body: bodies.FitBody) -> tuple[Any, Engine]:
        engine = reg.get(body.engine)
        tp, pp = _layout(body)
        a = api.fit(spec(body), gpu=body.gpu, gpu_memory=_size(body.gpu_memory), engine=body.engine, tp=tp, pp=pp,
                    weights_dtype=body.weights_dtype, kv_dtype=body.kv_dtype, context=_count("--context", body.context),
                    batch=_count("--batch", body.batch), options=_engine_options(reg, engine, "fit", body.options),
                    registry=reg)
        return a, engine

    @app.post("/api/kv", responses=ERRORS, summary="kvbudget kv --json")
    async def kv(body: bodies.KvBody) -> Response:
        def work() -> object:
            r = api.kv(spec(body), context=_count("--context", body.context), batch=_count("--batch", body.batch),
                       kv_dtype=body.kv_dtype, tp=_count("--tp", body.tp))
            return json_doc.kv_doc(r)

        return _json(await answer(work))

    @app.post("/api/kv/curve", responses=ERRORS, summary="KV cache against context (kv --plot's data)")
    async def kv_curve(body: bodies.KvCurveBody) -> Response:
        return _json(await answer(lambda: api.kv_curve(spec(body), batch=_count("--batch", body.batch),
                                                        kv_dtype=body.kv_dtype, tp=_count("--tp", body.tp))))

    @app.post("/api/fit", responses=ERRORS, summary="kvbudget fit --json")
    async def fit(body: bodies.FitBody) -> Response:
        return _json(await answer(lambda: _fit_doc(*fit_answer(body), body.units)))

    @app.post("/api/partition", responses=ERRORS, summary="each GPU's memory, part by part (fit --plot's data)")
    async def partition(body: bodies.FitBody) -> Response:
        return _json(await answer(lambda: _partition_doc(*fit_answer(body))))

    def explain_answer(body: bodies.ExplainBody) -> tuple[Any, Engine]:
        from ..inputs import split_command
        from ..questions.readers import explain as read

        words = split_command(body.command)
        if not words:
            raise InputError("paste a launch command, e.g. vllm serve Qwen/Qwen3-8B --max-model-len 8192")
        readers = {o.dest: o for e in reg for o in e.options if "explain" in o.commands}
        given: dict[str, Any] = {}
        for dest, value in body.options.items():
            if dest not in readers:
                raise InputError(f"{dest} is not an option of explain: use one of {', '.join(readers)}")
            given[dest] = _option(readers[dest], value)
        engine, a = read(words, api._device(body.gpu, _size(body.gpu_memory)),
                         {**given, "num_gpus": _count("--num-gpus", body.num_gpus)}, reg)
        return a, engine

    @app.post("/api/explain", responses=ERRORS, summary="kvbudget explain --json: a pasted launch command")
    async def explain(body: bodies.ExplainBody) -> Response:
        return _json(await answer(lambda: _fit_doc(*explain_answer(body), body.units)))

    @app.post("/api/explain/partition", responses=ERRORS, summary="a pasted command's memory per GPU, part by part")
    async def explain_partition(body: bodies.ExplainBody) -> Response:
        return _json(await answer(lambda: _partition_doc(*explain_answer(body))))

    @app.post("/api/compare", responses=ERRORS, summary="kvbudget compare --json")
    async def compare(body: bodies.CompareBody) -> Response:
        from ..questions.compare import compare as ask

        def work() -> object:
            tp, pp = _layout(body)
            context = _count("--context", body.context)
            rows, omitted = ask(spec(body), api._device(body.gpu, _size(body.gpu_memory)), context, tp, body.kv_dtype,
                                pp, reg)
            return json_doc.compare_doc(body.model or "config.json", context or 0, tp, pp, rows, omitted)

        return _json(await answer(work))

    @app.post("/api/levers", responses=ERRORS, summary="kvbudget levers --json")
    async def levers(body: bodies.LeversBody) -> Response:
        from ..report import plan_report

        def work() -> object:
            engine = reg.get(body.engine)
            tp, pp = _layout(body)
            a = api.levers(spec(body), gpu=body.gpu, gpu_memory=_size(body.gpu_memory),
                           context=_count("--context", body.context), engine=body.engine, tp=tp, pp=pp,
                           weights=body.weights_dtype, kv_dtype=body.kv_dtype,
                           options=_engine_options(reg, engine, "levers", body.options), registry=reg)
            return plan_report.levers_answer_doc(a)

        return _json(await answer(work, slow))

    @app.post("/api/plan", responses=ERRORS, summary="kvbudget plan --json: the cheapest deployments for a load")
    async def plan(body: bodies.PlanBody) -> Response:
        from ..report import plan_report

        def work() -> object:
            engine = reg.get(body.engine)
            a = api.plan_deployments(spec(body), concurrency=_count("--concurrency", body.concurrency),
                                     context=_count("--context", body.context), engine=body.engine, gpus=body.gpus,
                                     max_gpus=_count("--max-gpus", body.max_gpus),
                                     gpus_per_node=_count("--gpus-per-node", body.gpus_per_node),
                                     weights=body.weights_dtype, kv_dtype=body.kv_dtype,
                                     options=_engine_options(reg, engine, "plan", body.options), registry=reg)
            return plan_report.plan_answer_doc(a, body.units)

        return _json(await answer(work, slow))

    @app.post("/api/simulate", responses=ERRORS, summary="kvbudget simulate --synthetic SPEC --json")
    async def simulate(body: bodies.SimulateBody) -> Response:
        from ..report import sim_report
        from ..sim import workload

        def work() -> object:
            w = workload.parse_workload(body.synthetic)  # no file reader: a histogram file is refused
            if w.requests > max_sim_requests:
                raise InputError(f"--synthetic requests={w.requests:,}: the web page simulates at most "
                                 f"{max_sim_requests:,} requests (kvbudget simulate takes more)")
            engine = reg.get(body.engine)
            tp, pp = _layout(body)
            a = api.simulate(spec(body), gpu=body.gpu, gpu_memory=_size(body.gpu_memory), trace=workload.generate(w),
                             engine=body.engine, tp=tp, pp=pp, weights_dtype=body.weights_dtype, kv_dtype=body.kv_dtype,
                             context=_count("--context", body.context), prefix_caching=body.prefix_caching,
                             chunked_prefill=body.chunked_prefill,
                             policies=tuple(x.strip() for x in body.policies.split(",") if x.strip()),
                             options=_engine_options(reg, engine, "fit", body.options), registry=reg)
            return sim_report.sim_doc(a, series=body.steps)

        return _json(await answer(work, slow))

    @app.post("/api/diagnose", responses=ERRORS, summary="kvbudget diagnose --metrics FILE --json (pasted pages)")
    async def diagnose(body: bodies.DiagnoseBody) -> Response:
        import time

        from ..ops.exposition import parse
        from ..ops.gpu_memory import parse_dcgm, parse_nvidia_smi
        from ..questions.diagnose import answer_of, expected_from_fit
        from ..report import diagnose_report

        def work() -> object:
            if body.dcgm is not None and body.nvidia_smi is not None:
                raise InputError("give the GPUs' memory one way: dcgm or nvidia_smi, not both")
            now = parse(body.metrics, "the pasted /metrics page", time.time())
            gpus, source = ((parse_dcgm(body.dcgm, "the pasted DCGM page"), "DCGM") if body.dcgm is not None else
                            (parse_nvidia_smi(body.nvidia_smi, "the pasted nvidia-smi output"), "nvidia-smi")
                            if body.nvidia_smi is not None else ((), ""))
            expected = None
            if body.model is None and body.config is None:
                stray = [k for k in ("gpu", "gpu_memory", "engine", "context", "num_gpus", "tp", "pp")
                         if getattr(body, k) is not None] + \
                    [k for k in ("weights_dtype", "kv_dtype") if getattr(body, k) != "auto"] + list(body.options)
                if stray:  # the page's figures do not change with them: ignored, they would look read
                    raise InputError(f"{stray[0]} is read with a model and gpu to hold the metrics against: give "
                                     "both, or leave it out")
            else:
                if body.gpu is None and body.gpu_memory is None:
                    raise InputError("a model to hold the metrics against needs its GPU: give gpu (e.g. H100)")
                name = body.engine or now.servers[0].engine
                engine = reg.get(name)
                tp, pp = _layout(body)
                expected = expected_from_fit(api.fit(
                    spec(body), gpu=body.gpu, gpu_memory=_size(body.gpu_memory), engine=name, tp=tp, pp=pp,
                    weights_dtype=body.weights_dtype, kv_dtype=body.kv_dtype, context=_count("--context", body.context),
                    options=_engine_options(reg, engine, "fit", body.options), registry=reg))
            return diagnose_report.diagnose_doc(answer_of("the pasted /metrics page", now, gpus, source, expected))

        return _json(await answer(work))

    @app.get("/api/models", summary="kvbudget models --json: the catalog, for type-ahead")
    async def models() -> Response:
        def work() -> object:
            if not models_cache:  # the catalog does not change while the server runs
                from ..model import catalog

                entries = catalog.entries()
                models_cache.append(json_doc.models_doc(entries, {e.id: api.load_model(e.id).params for e in entries}))
            return models_cache[0]

        return _json(await answer(work))

    @app.get("/api/gpus", summary="kvbudget gpus --json")
    async def gpus() -> Response:
        from ..hardware import gpus as catalog_gpus

        return _json(json_doc.gpus_doc(catalog_gpus()))

    @app.get("/api/engines", summary="each engine and its own options (the settings form)")
    async def engines() -> Response:
        return _json(engines_doc(reg))

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.exception_handler(InputError)
    async def refused(request: Request, exc: InputError) -> JSONResponse:
        return JSONResponse({"error": error_line(exc)}, 400)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"error": _validation_line(exc)}, 400)

    @app.exception_handler(RecursionError)
    async def nested(request: Request, exc: RecursionError) -> JSONResponse:
        return JSONResponse({"error": "input nested too deeply to read"}, 400)

    @app.exception_handler(Exception)
    async def failed(request: Request, exc: Exception) -> JSONResponse:  # a bug: one line, no traceback
        return JSONResponse({"error": f"kvbudget could not answer this ({type(exc).__name__}): please report it "
                                      "with the inputs"}, 500)

    if allowed_hosts is not None:
        from starlette.middleware.trustedhost import TrustedHostMiddleware

        app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))
    app.add_middleware(Security)
    app.add_middleware(BodyLimit, limit=MAX_BODY)
    return app


def _validation_line(exc: RequestValidationError) -> str:
    """The first problem pydantic found, in one line: where (the field) and what."""
    from ..cli_args import one_line

    errors = exc.errors()
    if not errors:
        return "the request body is not valid"
    first = errors[0]
    where = ".".join(str(x) for x in first.get("loc", ()) if x != "body") or "the body"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return one_line(f"{where}: {first.get('msg', 'invalid')}{more}")


def _version() -> str:
    from .. import __version__

    return __version__


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` for the server, or one InputError line: an empty host (every interface,
    without saying so), a name that does not resolve, a port in use or not this machine's address. Bound here,
    before uvicorn starts, so that a failure is the CLI's one line and exit 2 (uvicorn logs it and exits 3)."""
    from ..inputs import excerpt

    name = host.strip()
    if not name:
        raise InputError(f"--host {host!r} names no address (it would listen on every interface): give 127.0.0.1 "
                         "for this machine only, or 0.0.0.0 to listen beyond it (docs/web.md, Safety)")
    bare = name[1:-1] if name.startswith("[") and name.endswith("]") else name
    try:
        family, kind, proto, _, address = socket.getaddrinfo(bare, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
    except (socket.gaierror, UnicodeError, ValueError) as exc:
        why = getattr(exc, "strerror", None) or exc.__class__.__name__
        raise InputError(f"--host {excerpt(host, 60)} is not an address to listen on ({why}): give 127.0.0.1, "
                         "::1, 0.0.0.0 or an address of this machine") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: a restart is not refused
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise InputError(f"--host {excerpt(host, 60)} --port {port}: cannot listen there ({exc.strerror or exc}): "
                         "pick another --port (0: any free one), or stop the server that holds it") from None
    return sock


def serve(host: str, port: int, *, allow_hub: bool = False, registry: Registry | None = None) -> None:
    """Run the page until interrupted (uvicorn), loopback only unless ``host`` says otherwise."""
    import uvicorn

    sock = listen(host, port)
    hosts = LOOPBACK if host in LOOPBACK else None
    app = create_app(allow_hub=allow_hub, registry=registry, allowed_hosts=hosts)
    config = uvicorn.Config(app, host=host, port=port, log_level="info", access_log=False, server_header=False)
    server = uvicorn.Server(config)
    bound = sock.getsockname()[1]
    print(f"kvbudget: the page is at http://{'[' + host + ']' if ':' in host and not host.startswith('[') else host}"
          f":{bound}/" + ("" if allow_hub else "  (Hub lookups off: --allow-hub to look ids up)"), flush=True)
    with sock:
        server.run(sockets=[sock])

