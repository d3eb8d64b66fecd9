"""Launch commands an orchestrator builds from its own words: ``kubectl run NAME --image=IMAGE -- ARGS`` and the
values file of vLLM's production-stack Helm chart. Each is read as the container it creates (``compared.Manifest``:
its command's words and the GPUs its pod asks), then planned as that command."""

from __future__ import annotations

import os

from ..units import InputError
from .compared import Manifest, container_words, gpus_asked

# kubectl run's options that take a value as the next word (kubectl 1.31 `kubectl run --help`); the others are
# switches (--rm, -i, -t, --command, --privileged ...) or are written --name=value
_KUBECTL_VALUED = ("--image", "--env", "--overrides", "--port", "--labels", "-l", "--restart", "--namespace", "-n",
                   "--context", "--image-pull-policy", "--annotations", "--pod-running-timeout", "--override-type",
                   "--kubeconfig", "--cluster", "--user", "--dry-run", "-o", "--output", "--field-manager")


def kubectl_command(words: list[str]) -> Manifest | None:
    """``kubectl run NAME --image=IMAGE [--env=K=V] [--command] -- ARGS`` (``oc run`` the same) as the manifest of the
    Pod it creates: ARGS are the container's args, which the image's entrypoint takes, or with --command its command
    (kubectl run --help). An ``--overrides`` JSON's container resources say its GPUs. None for other words."""
    at = next((i for i in range(len(words) - 1) if os.path.basename(words[i]) in ("kubectl", "oc")
               and words[i + 1] == "run"), None)
    if at is None:
        return None
    end = words.index("--", at) if "--" in words[at:] else len(words)
    spec: dict[str, object] = {"env": []}
    overrides: object = None
    i = at + 2
    while i < end:
        word = words[i]
        name, eq, value = word.partition("=")
        if not eq and name in _KUBECTL_VALUED and i + 1 < end:
            value, i = words[i + 1], i + 1
        if name == "--image":
            spec["image"] = value
        elif name == "--env" and "=" in value:
            spec["env"].append(value)  # type: ignore[attr-defined]
        elif name == "--overrides":
            overrides = _overrides(value)
        i += 1
    if not isinstance(spec.get("image"), str):
        raise InputError("kubectl run without --image=IMAGE: give the image whose container runs the engine "
                         "(kubectl run NAME --image=vllm/vllm-openai:v0.10.1 -- --model M ...)")
    spec["command" if "--command" in words[at:end] else "args"] = words[end + 1:]
    gpus = next((g for g in (gpus_asked(c) for c in _container_specs(overrides)) if g is not None), None)
    run = container_words(spec, str(spec["image"]), True, 1)
    return Manifest(tuple([*words[:at], *run.words]), gpus, "kubectl run --overrides")


def _overrides(text: str) -> object:
    from ..inputs import load_json

    return load_json(text[:1 << 20], "kubectl run --overrides")


def _container_specs(node: object, depth: int = 0) -> list[dict[str, object]]:
    """The mappings in a ``containers`` list under ``node`` (an --overrides Pod), however deep."""
    if depth > 40 or not isinstance(node, (dict, list)):
        return []
    if isinstance(node, list):
        return [c for item in node for c in _container_specs(item, depth + 1)]
    listed = node.get("containers")
    own = [c for c in listed if isinstance(c, dict)] if isinstance(listed, list) else []
    return own + [c for k, v in node.items() if k != "containers" for c in _container_specs(v, depth + 1)]


# --- the values file of vLLM's production-stack Helm chart ----------------------------------------------------------------

# servingEngineSpec.modelSpec[].vllmConfig keys and the flag each becomes (production-stack
# helm/templates/deployment-vllm-multi.yaml: emitted when the key is present, its value quoted)
_VLLM_CONFIG_FLAGS = (("maxModelLen", "--max-model-len"), ("dtype", "--dtype"),
                      ("tensorParallelSize", "--tensor-parallel-size"), ("maxNumSeqs", "--max-num-seqs"),
                      ("gpuMemoryUtilization", "--gpu_memory_utilization"), ("maxLoras", "--max_loras"))


def helm_values_command(words: list[str]) -> Manifest | None:
    """The vLLM container vLLM's production-stack chart makes of a pasted values file's one ``modelSpec``
    (helm/templates/deployment-vllm-multi.yaml): image REPOSITORY:TAG running ``vllm serve MODELURL`` with the
    vllmConfig flags, its env, and requestGPU GPUs (_helpers.tpl chart.resources). None for other words."""
    from ..inputs import check_command_size, load_yaml

    if len(words) > 1 and os.path.basename(words[0]) == "helm":  # was 'not a launch command kvbudget reads'
        raise InputError("a helm command: the server it deploys is in the chart's values; paste the values file "
                         "(servingEngineSpec: modelSpec: ... of vLLM's production-stack chart), or the launch command")
    if len(words) != 1 or "servingEngineSpec" not in words[0]:
        return None
    check_command_size(len(words[0]))
    doc = load_yaml(words[0], "the pasted Helm values")
    spec = doc.get("servingEngineSpec") if isinstance(doc, dict) else None
    models = spec.get("modelSpec") if isinstance(spec, dict) else None
    if not isinstance(models, list) or not models or not all(isinstance(m, dict) for m in models):
        raise InputError("the pasted Helm values have no servingEngineSpec.modelSpec list: give the values file with "
                         "the model to plan (modelURL, repository, tag, vllmConfig)")
    if len(models) > 1:
        raise InputError(f"the pasted Helm values hold {len(models)} modelSpec entries: paste the one to plan")
    m = models[0]
    for key in ("modelURL", "repository", "tag"):
        if not isinstance(m.get(key), (str, int, float)) or isinstance(m.get(key), bool) or str(m[key]) == "":
            raise InputError(f"the pasted Helm values' modelSpec has no {key}: the chart requires it (helm stops: "
                             f"'Required value 'modelSpec.{key}' must be defined')")
    command = ["vllm", "serve", str(m["modelURL"])] + (["--enable-lora"] if m.get("enableLoRA") else [])
    env = [e for e in m.get("env") or [] if isinstance(e, dict)]
    config = m.get("vllmConfig")
    if isinstance(config, dict) and config:  # `with .vllmConfig`: an empty or absent one adds nothing
        command += _config_words(config)
        if str(config.get("v0")) == "1":
            env.append({"name": "VLLM_USE_V1", "value": "0"})
    gpus = gpus_asked({"resources": {"limits": {"nvidia.com/gpu": m.get("requestGPU")}}})
    run = container_words({"command": command, "env": env}, f"{m['repository']}:{m['tag']}", True, 1)
    replicas = m.get("replicaCount")
    return Manifest(run.words, gpus, "the Helm values' requestGPU" + (" (per replica)" if replicas not in (None, 1) else ""))


def _config_words(config: dict[str, object]) -> list[str]:
    """The flags the chart writes for a vllmConfig, in its order."""
    words: list[str] = []
    if "enableChunkedPrefill" in config:
        words.append("--enable-chunked-prefill" if config["enableChunkedPrefill"] else "--no-enable-chunked-prefill")
    words.append("--enable-prefix-caching" if config.get("enablePrefixCaching") else "--no-enable-prefix-caching")
    for key, flag in _VLLM_CONFIG_FLAGS:
        if key in config:
            value = config[key]
            words += [flag, "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)]
    extra = config.get("extraArgs")
    if isinstance(extra, list):
        words += [str(w) for w in extra if isinstance(w, (str, int, float))]
    elif extra is not None:
        raise InputError("the pasted Helm values' vllmConfig.extraArgs is not a list of words")
    return words
