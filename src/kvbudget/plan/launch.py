"""Launch files for a plan: the engine's command line with the flags that realise it, and a Kubernetes
Deployment + Service that runs it (``nvidia.com/gpu`` per pod, a memory-backed ``/dev/shm`` for the
tensor-parallel workers' NCCL traffic, one pod per replica). Each engine's own command line is written by
its ``launch.py`` (``engines/vllm/launch.py``, ``engines/sglang/launch.py``, ``engines/trtllm/launch.py``,
``engines/llamacpp/launch.py``); ``argv_for`` asks the engine whose settings they are, and each engine's
``container`` says how it runs in a pod.

The YAML is written by hand (JSON-quoted strings are valid YAML), so kvbudget needs no YAML library.
"""

from __future__ import annotations

import json
import shlex

from ..engines.served import ON_THE_FLY, checkpoint_note, served
from ..units import InputError

__all__ = ["ON_THE_FLY", "argv_for", "checkpoint_note", "command", "container_of", "kubernetes", "kubernetes_multinode",
           "manifest", "served"]

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; the engines load only when needed
if TYPE_CHECKING:
    from ..engines.base import Container, Engine, Registry

def argv_for(model: str, s: object, registry: Registry | None = None) -> list[str]:
    """The command line that realises settings ``s``, written by the engine whose settings they are."""
    return list(_engine_of(s, registry).launch(model, s).argv)


def _engine_of(s: object, registry: Registry | None) -> Engine:
    from ..engines.base import default_registry

    engine = next((e for e in registry or default_registry() if e.serving and e.accepts(s)), None)
    if engine is None:
        raise InputError(f"no engine takes these settings: {type(s).__name__}")
    return engine


def container_of(argv: list[str], registry: Registry | None = None) -> Container:
    """The container of the engine whose program ``argv`` runs (its ``container.program`` starts it)."""
    from ..engines.base import default_registry

    for engine in registry or default_registry():
        c = engine.container
        if c is not None and argv[:len(c.program)] == list(c.program):
            return c
    raise InputError(f"kvbudget writes no Kubernetes manifest for {argv[0] if argv else 'an empty command'!r}: "
                     "no engine it knows runs that program in a container")


def command(argv: list[str]) -> str:
    return shlex.join(argv)


def _name(model: str, engine: str) -> str:
    base = model.rstrip("/").split("/")[-1].lower()
    cleaned = "".join(c if c.isalnum() else "-" for c in base).strip("-")
    return (f"{engine}-" + cleaned)[:52].rstrip("-") or engine


def kubernetes(model: str, argv: list[str], gpus_per_pod: int, replicas: int = 1, container: Container | None = None) -> str:
    """A Deployment (``replicas`` pods of ``gpus_per_pod`` GPUs) and a Service in front of it, running ``argv`` in
    its engine's container."""
    c = container or container_of(argv)
    name = _name(model, c.prefix)
    q = json.dumps
    program = list(c.program)
    args = argv[len(program):] if argv[:len(program)] == program else argv
    program = list(c.entry or c.program)
    image, port, listen = c.image, c.port, c.listen
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


def kubernetes_multinode(model: str, argv: list[str], gpus_per_pod: int, pods: int, replicas: int = 1,
                         container: Container | None = None) -> str:
    """A layout wider than a node (PP across nodes): a LeaderWorkerSet (``leaderworkerset.x-k8s.io``) of
    ``pods`` pods per replica joined into one Ray cluster; the leader waits for the workers, then runs
    ``vllm serve`` with the Ray executor; each pod holds ``gpus_per_pod`` GPUs (one TP group). A Service
    selects the leaders."""
    c = container or container_of(argv)
    name = _name(model, c.prefix)
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
            f"            image: {q(c.image)}",
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
        *_service(name, f"{{app: {q(name)}, role: leader}}", c.port),
    ]
    return "\n".join(lines) + "\n"


def manifest(model: str, argv: list[str], tp: int, pp: int, replicas: int, gpus_per_node: int = 8,
             container: Container | None = None) -> str:
    """The Deployment when a replica fits in a node; when it spans nodes (an engine run across nodes by Ray, as
    vLLM is), a LeaderWorkerSet with one pod of ``tp`` GPUs per pipeline stage, so no tensor-parallel group is
    split across nodes."""
    c = container or container_of(argv)
    if tp * pp > gpus_per_node:
        if not c.multi_node or tp > gpus_per_node:
            raise InputError(f"TP {tp} x PP {pp} spans nodes of {gpus_per_node} GPUs: kvbudget writes multi-node "
                             "manifests with TP within a node only, for engines it runs across nodes (vLLM)")
        return kubernetes_multinode(model, argv, tp, pp, replicas, c)
    return kubernetes(model, argv, tp * pp, replicas, c)
