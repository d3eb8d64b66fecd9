"""Launch commands behind a wrapper: the environment ``env`` and ``sudo`` set (after their own options) reaches the
engine as the shell's leading NAME=VALUE does, and a wrapper's words before llama.cpp's program are passed over."""

from __future__ import annotations

import pytest

from kvbudget.engines.compared import assignments, command_env, visible_devices
from kvbudget.engines.llamacpp.command import parse_llamacpp_command
from kvbudget.engines.vllm.command import parse_vllm_command
from kvbudget.engines.vllm.settings import VllmSettings

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
