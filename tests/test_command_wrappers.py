"""Launch commands behind a wrapper: the environment ``env`` and ``sudo`` set (after their own options) reaches the
engine as the shell's leading NAME=VALUE does, and a wrapper's words before llama.cpp's program are passed over."""

from __future__ import annotations

import pytest

from kvbudget.engines.compared import assignments, command_env, shell_command, visible_devices
from kvbudget.engines.llamacpp.command import parse_llamacpp_command
from kvbudget.engines.vllm.command import parse_vllm_command
from kvbudget.engines.vllm.settings import VllmSettings
from kvbudget.units import InputError

PREFIXES = [[], ["env"], ["sudo"], ["env", "-u", "HOME"], ["sudo", "-E", "-u", "svc"], ["/usr/bin/env", "-i"]]


@pytest.mark.parametrize("prefix", PREFIXES[1:])
def test_vllm_reads_the_environment_env_and_sudo_set(prefix: list[str]) -> None:
    # VLLM_USE_V1=0 on 0.8.5 runs V0 (envs.py); after env or sudo it was dropped and V1 planned, exit 0
    base = VllmSettings(version="0.8.5")
    plain = parse_vllm_command(["VLLM_USE_V1=0", "vllm", "serve", "Qwen/Qwen2-7B-Instruct"], base).settings
    assert plain != parse_vllm_command(["vllm", "serve", "Qwen/Qwen2-7B-Instruct"], base).settings  # V0 is planned
    assert parse_vllm_command([*prefix, "VLLM_USE_V1=0", "vllm", "serve", "Qwen/Qwen2-7B-Instruct"], base).settings == plain


@pytest.mark.parametrize("prefix", [*PREFIXES[1:], ["numactl", "-N", "0"], ["taskset", "-c", "0-7"]])
def test_llamacpp_reads_through_a_wrapper(prefix: list[str]) -> None:
    # 'numactl ... llama-server' was 'not a llama.cpp command'; LLAMA_ARG_CTX_SIZE after sudo / env -u X was dropped
    env = [] if prefix[0] in ("numactl", "taskset") else ["LLAMA_ARG_CTX_SIZE=8192"]  # numactl would run 'A=1'
    plain = parse_llamacpp_command([*env, "llama-server", "-m", "x.gguf", "-np", "2"])
    assert plain.settings.n_ctx == (8192 if env else 0)
    assert parse_llamacpp_command([*prefix, *env, "llama-server", "-m", "x.gguf", "-np", "2"]) == plain


def test_assignments_stop_at_the_program_and_the_last_one_wins() -> None:
    words = ["sudo", "-u", "svc", "A=1", "CUDA_VISIBLE_DEVICES=0", "CUDA_VISIBLE_DEVICES=0,1", "vllm", "serve", "B=2"]
    assert assignments(words) == [("A", "1"), ("CUDA_VISIBLE_DEVICES", "0"), ("CUDA_VISIBLE_DEVICES", "0,1")]
    assert visible_devices(words) == ("CUDA_VISIBLE_DEVICES", 2)  # the shell passes the last one on
    assert assignments(["numactl", "-N", "0", "A=1", "prog"]) == []  # numactl would run 'A=1' as its program
    assert command_env(["docker", "run", "-e", "A=1", "--env=B=2", "img"]) == [("A", "1"), ("B", "2")]


def test_llamacpp_container_images_run_their_program() -> None:
    # llama.cpp's server images (ghcr.io/ggml-org/llama.cpp:server-cuda; earlier ghcr.io/ggerganov/llama.cpp:server)
    # run /app/llama-server with the words after the image; `docker run ... IMAGE -m x.gguf` was refused as
    # 'not a llama.cpp command: docker'. docker's -e LLAMA_ARG_* reaches the server as its environment.
    plain = parse_llamacpp_command(["llama-server", "-m", "/models/x.gguf", "-c", "8192", "-ngl", "99"])
    for image in ("ghcr.io/ggml-org/llama.cpp:server-cuda", "ghcr.io/ggerganov/llama.cpp:server",
                  "ggml-org/llama.cpp:server-vulkan-b6000"):
        words = ["docker", "run", "--gpus", "all", "-v", "/models:/models", "-p", "8080:8080", image,
                 "-m", "/models/x.gguf", "-c", "8192", "-ngl", "99"]
        assert parse_llamacpp_command(words) == plain, image
    env = parse_llamacpp_command(["docker", "run", "-e", "LLAMA_ARG_CTX_SIZE=16384", "ghcr.io/ggml-org/llama.cpp:server",
                                  "-m", "/models/x.gguf"])
    assert env.settings.n_ctx == 16384
    assert parse_llamacpp_command(["docker", "run", "ghcr.io/ggml-org/llama.cpp:light-cuda", "-m", "x.gguf"]).settings.program == "cli"
    with pytest.raises(InputError, match=r"not a llama\.cpp command"):  # another program, by --entrypoint
        parse_llamacpp_command(["docker", "run", "--entrypoint", "/bin/bash", "ghcr.io/ggml-org/llama.cpp:server-cuda"])


@pytest.mark.parametrize("text", [
    "bash -c 'vllm serve Qwen/Qwen3-8B --max-model-len 8192'",
    "HF_HOME=/x sh -lc 'vllm serve Qwen/Qwen3-8B --max-model-len 8192 2>&1 | tee serve.log'",
    "python -m vllm.entrypoints.cli.main serve Qwen/Qwen3-8B --max-model-len 8192",
])
def test_shell_strings_and_the_vllm_module_are_the_command(text: str) -> None:
    # `bash -c '...'` runs the string as its command, and `python -m vllm.entrypoints.cli.main serve` is what the
    # `vllm` program runs (vLLM's pyproject.toml [project.scripts]); both were 'not a launch command'
    import kvbudget

    t = kvbudget.explain(text, gpu="H100")
    assert (t.engine, t.model, t.settings.max_model_len) == ("vllm", "Qwen/Qwen3-8B", 8192)
    assert shell_command(["A=1", "bash", "-x", "-c", "vllm serve M", "arg0"]) == ["A=1", "vllm", "serve", "M"]
    assert shell_command(["bash", "serve.sh"]) == ["bash", "serve.sh"]  # a script file: not read
    with pytest.raises(InputError, match="2 launch commands"):
        kvbudget.explain("bash -c 'vllm serve Qwen/Qwen3-8B && vllm serve Qwen/Qwen3-4B'", gpu="H100")


def test_a_program_after_an_image_that_runs_it_is_named() -> None:
    # the image's entrypoint already runs the server: `docker run IMAGE vllm serve M` passes 'vllm serve M' to it as
    # arguments and it stops. Refused before too, but as '2 launch commands', which is not what is wrong.
    import kvbudget

    for text, program in (("docker run --gpus all vllm/vllm-openai:v0.10.2 vllm serve Qwen/Qwen3-8B", "--entrypoint vllm"),
                          ("docker run ghcr.io/ggml-org/llama.cpp:server-cuda llama-server -m x.gguf",
                           "--entrypoint llama-server")):
        with pytest.raises(InputError, match=r"already runs .* \(its entrypoint\).*" + program):
            kvbudget.explain(text, gpu="H100")
