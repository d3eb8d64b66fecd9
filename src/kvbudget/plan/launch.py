"""Launch files for a plan: the engine's command line with the flags that realise it, and a Kubernetes
Deployment + Service that runs it (``nvidia.com/gpu`` per pod, a memory-backed ``/dev/shm`` for the
tensor-parallel workers' NCCL traffic, one pod per replica).

The YAML is written by hand (JSON-quoted strings are valid YAML), so kvbudget needs no YAML library.
"""

from __future__ import annotations

import json
import shlex

from ..units import InputError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; the engines load only when needed
if TYPE_CHECKING:
    from ..engines.llamacpp import LlamaCppSettings
    from ..engines.sglang import SGLangSettings
    from ..engines.trtllm import TrtllmSettings
    from ..engines.vllm import VllmSettings

IMAGE = "vllm/vllm-openai:latest"
PORT = 8000
SGLANG_IMAGE = "lmsysorg/sglang:latest"
SGLANG_PORT = 30000
TRTLLM_IMAGE = "nvcr.io/nvidia/tensorrt-llm/release:latest"
LLAMACPP_IMAGE = "ghcr.io/ggml-org/llama.cpp:server-cuda"
LLAMACPP_PORT = 8080


def served(model: str) -> str:
    """What the engine is given: a local model's folder, not its config.json."""
    return model[: -len("config.json")].rstrip("/") or "." if model.endswith("config.json") else model


# kvbudget's weight formats as vLLM's --quantization methods (vLLM 0.33.0,
# model_executor/layers/quantization/__init__.py QUANTIZATION_METHODS); 16-bit formats are --dtype.
VLLM_QUANTIZATION = {"fp8": "fp8", "nf4": "bitsandbytes", "awq": "awq", "gptq": "gptq", "mxfp4": "mxfp4",
                     "nvfp4": "modelopt_fp4", "int8": "compressed-tensors"}


def vllm_quantization(quantization: str | None) -> str | None:
    """The --quantization value that loads ``quantization`` (a kvbudget weight format or vLLM's own word)."""
    if quantization in (None, "", "auto", "none"):
        return None
    from ..model.weights import parse_weight_format

    try:
        name = parse_weight_format(quantization).name
    except InputError:
        return quantization  # vLLM's own method name, passed through as given
    return VLLM_QUANTIZATION.get(name)


def vllm_argv(model: str, s: VllmSettings) -> list[str]:
    """``vllm serve MODEL`` with every memory-relevant setting that differs from vLLM's default."""
    argv = ["vllm", "serve", served(model)]
    flags: list[tuple[str, object]] = [
        ("--tensor-parallel-size", s.tensor_parallel_size if s.tensor_parallel_size > 1 else None),
        ("--pipeline-parallel-size", s.pipeline_parallel_size if s.pipeline_parallel_size > 1 else None),
        ("--max-model-len", s.max_model_len),
        ("--gpu-memory-utilization", s.gpu_memory_utilization),
        # the weight format the plan was made with, always: fp8 (and bitsandbytes) vLLM applies to a 16-bit
        # checkpoint when loading; AWQ, GPTQ, NVFP4 ... need a checkpoint in that format (checkpoint_note)
        ("--quantization", vllm_quantization(s.quantization)),
        ("--kv-cache-dtype", None if s.kv_cache_dtype == "auto" else s.kv_cache_dtype),
        ("--dtype", None if s.dtype == "auto" else s.dtype),
        ("--max-num-seqs", s.max_num_seqs),
        ("--max-num-batched-tokens", s.max_num_batched_tokens),
        ("--block-size", s.block_size),
    ]
    for flag, value in flags:
        if value is not None:
            argv += [flag, str(value)]
    if s.enforce_eager:
        argv.append("--enforce-eager")
    return argv


# Weight formats an engine applies to a 16-bit checkpoint while loading; every other one is read from a
# checkpoint already quantized in that format (vLLM: model_executor/layers/quantization, get_quant_config).
ON_THE_FLY = frozenset({"fp8", "bitsandbytes", "bf16", "fp16", "float16", "bfloat16", "fp32", "float32"})


def checkpoint_note(model: str, quantization: str | None) -> str | None:
    """Where the plan's weight format needs a checkpoint already quantized in that format: what to serve
    (None when the engine quantizes a 16-bit checkpoint itself while loading)."""
    if quantization in (None, "", "auto", "none"):
        return None
    from ..model.weights import parse_weight_format

    try:
        name = parse_weight_format(quantization).name
    except InputError:
        return None
    if name in ON_THE_FLY or name == "nf4":
        return None
    fmt = name.upper()
    article = "an" if fmt[0] in "AEFHILMNORSX" else "a"
    return f"{fmt} weights need {article} {fmt} checkpoint of the model: serve one in place of {served(model)} unless it is one"


def launch_doc(model: str, argv: list[str], quantization: str | None, manifest: str | None) -> dict[str, str | None]:
    """The ``launch`` object of the JSON output: command, Kubernetes manifest, and the checkpoint note."""
    doc: dict[str, str | None] = {"command": command(argv), "kubernetes": manifest}
    note = checkpoint_note(model, quantization)
    if note:
        doc["note"] = note
    return doc


def sglang_argv(model: str, s: SGLangSettings) -> list[str]:
    """``python -m sglang.launch_server`` with every memory-relevant setting that differs from SGLang's default."""
    argv = ["python", "-m", "sglang.launch_server", "--model-path", served(model)]
    flags: list[tuple[str, object]] = [
        ("--tp-size", s.tp if s.tp > 1 else None), ("--pp-size", s.pp if s.pp > 1 else None),
        ("--context-length", s.context_length), ("--mem-fraction-static", s.mem_fraction_static),
        ("--quantization", s.quantization), ("--kv-cache-dtype", None if s.kv_cache_dtype == "auto" else s.kv_cache_dtype),
        ("--max-running-requests", s.max_running_requests), ("--page-size", s.page_size),
    ]
    for flag, value in flags:
        if value is not None:
            argv += [flag, str(value)]
    return argv


def trtllm_argv(model: str, s: TrtllmSettings) -> list[str]:
    """``trtllm-serve MODEL`` (PyTorch backend) with the settings that differ from its defaults."""
    from ..engines.trtllm import TrtllmSettings

    argv = ["trtllm-serve", served(model)]
    defaults = TrtllmSettings()
    flags: list[tuple[str, object]] = [
        ("--tp_size", s.tp if s.tp > 1 else None), ("--pp_size", s.pp if s.pp > 1 else None),
        ("--max_seq_len", s.max_seq_len),
        # a trtllm-serve option since TensorRT-LLM PR #11487 (March 2026): auto | fp8 | nvfp4
        ("--kv_cache_dtype", s.kv_cache_dtype if s.kv_cache_dtype != defaults.kv_cache_dtype else None),
        ("--max_batch_size", s.max_batch_size if s.max_batch_size != defaults.max_batch_size else None),
        ("--max_num_tokens", s.max_num_tokens if s.max_num_tokens != defaults.max_num_tokens else None),
        ("--kv_cache_free_gpu_memory_fraction",
         s.free_gpu_memory_fraction if s.free_gpu_memory_fraction != defaults.free_gpu_memory_fraction else None),
    ]
    for flag, value in flags:
        if value is not None:
            argv += [flag, str(value)]
    return argv


def llamacpp_argv(model: str, s: LlamaCppSettings) -> list[str]:
    """``llama-server -m MODEL`` with the context settings that differ from its defaults."""
    from ..engines.llamacpp import LlamaCppSettings

    d = LlamaCppSettings()
    argv = ["llama-server", "-m", s.model_file or model]
    flags: list[tuple[str, object]] = [
        ("-c", s.n_ctx or None), ("-np", s.n_parallel), ("-ctk", s.type_k if s.type_k != d.type_k else None),
        ("-ctv", s.type_v if s.type_v != d.type_v else None),
        ("-ngl", s.n_gpu_layers if s.n_gpu_layers >= 0 else None), ("-fa", s.flash_attn if s.flash_attn != d.flash_attn else None),
        ("-b", s.n_batch if s.n_batch != d.n_batch else None), ("-ub", s.n_ubatch if s.n_ubatch != d.n_ubatch else None),
    ]
    for flag, value in flags:
        if value is not None:
            argv += [flag, str(value)]
    if s.tensor_split:
        argv += ["-ts", ",".join(f"{x:g}" for x in s.tensor_split)]
    elif s.devices > 1:
        argv += ["-ts", ",".join(["1"] * s.devices)]
    if s.swa_full:
        argv.append("--swa-full")
    if s.kv_unified is not None:
        argv.append("--kv-unified" if s.kv_unified else "--no-kv-unified")
    return argv


def argv_for(model: str, s: VllmSettings | SGLangSettings | TrtllmSettings | LlamaCppSettings) -> list[str]:
    from ..engines.llamacpp import LlamaCppSettings
    from ..engines.sglang import SGLangSettings
    from ..engines.trtllm import TrtllmSettings

    if isinstance(s, LlamaCppSettings):
        return llamacpp_argv(model, s)
    if isinstance(s, SGLangSettings):
        return sglang_argv(model, s)
    if isinstance(s, TrtllmSettings):
        return trtllm_argv(model, s)
    return vllm_argv(model, s)


def command(argv: list[str]) -> str:
    return shlex.join(argv)


def _name(model: str, engine: str) -> str:
    base = model.rstrip("/").split("/")[-1].lower()
    cleaned = "".join(c if c.isalnum() else "-" for c in base).strip("-")
    return (f"{engine}-" + cleaned)[:52].rstrip("-") or engine


def kubernetes(model: str, argv: list[str], gpus_per_pod: int, replicas: int = 1) -> str:
    """A Deployment (``replicas`` pods of ``gpus_per_pod`` GPUs) and a Service in front of it."""
    sgl = argv[:3] == ["python", "-m", "sglang.launch_server"]
    trt = argv[:1] == ["trtllm-serve"]
    lcpp = argv[:1] == ["llama-server"]
    name = _name(model, "sglang" if sgl else "trtllm" if trt else "llamacpp" if lcpp else "vllm")
    q = json.dumps
    program = argv[:3] if sgl else argv[:1] if trt or lcpp else ["vllm", "serve"]
    args = argv[len(program):] if argv[:len(program)] == program else argv
    if lcpp:
        program = ["/app/llama-server"]  # where the server image keeps it
    image, port = ((SGLANG_IMAGE, SGLANG_PORT) if sgl else (TRTLLM_IMAGE, PORT) if trt
                   else (LLAMACPP_IMAGE, LLAMACPP_PORT) if lcpp else (IMAGE, PORT))
    listen = sgl or trt or lcpp  # these servers are told --host / --port
    lines = [
        "apiVersion: apps/v1",
        "kind: Deployment",
        "metadata:",
        f"  name: {q(name)}",
        f"  labels: {{app: {q(name)}}}",
        "spec:",
        f"  replicas: {replicas}",
        f"  selector: {{matchLabels: {{app: {q(name)}}}}}",
        "  template:",
        f"    metadata: {{labels: {{app: {q(name)}}}}}",
        "    spec:",
        "      containers:",
        f"        - name: {q(name)}",
        f"          image: {q(image)}",
        f"          command: {q(program)}",
        f"          args: {q(args + (['--host', '0.0.0.0', '--port', str(port)] if listen else []))}",
        f"          ports: [{{containerPort: {port}, name: http}}]",
        "          resources:",
        f"            limits: {{nvidia.com/gpu: {gpus_per_pod}}}",
        f"            requests: {{nvidia.com/gpu: {gpus_per_pod}}}",
        f"          volumeMounts: [{{name: dshm, mountPath: {q('/dev/shm')}}}]",
        f"          readinessProbe: {{httpGet: {{path: {q('/health')}, port: {port}}}, periodSeconds: 10}}",
        "      volumes:",
        "        - name: dshm",
        "          emptyDir: {medium: Memory, sizeLimit: 16Gi}",
        *_service(name, f"{{app: {q(name)}}}", port),
    ]
    return "\n".join(lines) + "\n"


def _service(name: str, selector: str, port: int) -> list[str]:
    """A ClusterIP Service in front of the serving pods, after a document separator."""
    return ["---", "apiVersion: v1", "kind: Service", "metadata:", f"  name: {json.dumps(name)}", "spec:",
            f"  selector: {selector}", f"  ports: [{{port: {port}, targetPort: {port}, name: http}}]"]


def kubernetes_multinode(model: str, argv: list[str], gpus_per_pod: int, pods: int, replicas: int = 1) -> str:
    """A layout wider than a node (PP across nodes): a LeaderWorkerSet (``leaderworkerset.x-k8s.io``) of
    ``pods`` pods per replica joined into one Ray cluster; the leader waits for the workers, then runs
    ``vllm serve`` with the Ray executor; each pod holds ``gpus_per_pod`` GPUs (one TP group). A Service
    selects the leaders."""
    name = _name(model, "vllm")
    q = json.dumps
    serve = [*argv, "--distributed-executor-backend", "ray"]
    # vLLM needs every GPU of the group in the Ray cluster before it starts: wait for the workers to join
    wait = ('until [ "$(ray status 2>/dev/null | grep -c \' node_\')" -ge "$LWS_GROUP_SIZE" ]; do sleep 5; done')
    leader = f"ray start --head --port=6379 && {wait} && {command(serve)}"
    worker = "ray start --address=$(LWS_LEADER_ADDRESS):6379 --block"

    def pod(key: str, shell: str) -> list[str]:
        role = key.removesuffix("Template")
        return [
            f"    {key}:",
            f"      metadata: {{labels: {{app: {q(name)}, role: {role}}}}}",
            "      spec:",
            "        containers:",
            f"          - name: {q(name + '-' + role)}",
            f"            image: {q(IMAGE)}",
            f"            command: {q(['sh', '-c'])}",
            f"            args: {q([shell])}",
            f"            resources: {{limits: {{nvidia.com/gpu: {gpus_per_pod}}}, requests: {{nvidia.com/gpu: {gpus_per_pod}}}}}",
            f"            volumeMounts: [{{name: dshm, mountPath: {q('/dev/shm')}}}]",
            "        volumes: [{name: dshm, emptyDir: {medium: Memory, sizeLimit: 16Gi}}]",
        ]

    lines = [
        "apiVersion: leaderworkerset.x-k8s.io/v1",
        "kind: LeaderWorkerSet",
        "metadata:",
        f"  name: {q(name)}",
        "spec:",
        f"  replicas: {replicas}",
        "  leaderWorkerTemplate:",
        f"    size: {pods}",
        *pod("leaderTemplate", leader),
        *pod("workerTemplate", worker),
        *_service(name, f"{{app: {q(name)}, role: leader}}", PORT),
    ]
    return "\n".join(lines) + "\n"


def manifest(model: str, argv: list[str], tp: int, pp: int, replicas: int, gpus_per_node: int = 8) -> str:
    """The Deployment when a replica fits in a node; when it spans nodes (vLLM), a LeaderWorkerSet with one
    pod of ``tp`` GPUs per pipeline stage, so no tensor-parallel group is split across nodes."""
    if tp * pp > gpus_per_node:
        if argv[:2] != ["vllm", "serve"] or tp > gpus_per_node:
            raise InputError(f"TP {tp} x PP {pp} spans nodes of {gpus_per_node} GPUs: kvbudget writes multi-node "
                             "manifests for vLLM with TP within a node only")
        return kubernetes_multinode(model, argv, tp, pp, replicas)
    return kubernetes(model, argv, tp * pp, replicas)
