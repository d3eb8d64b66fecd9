"""A model named by its Hugging Face cache folder on another machine (vLLM logs print ``model='/root/.cache/
huggingface/hub/models--ORG--NAME/snapshots/COMMIT'`` when a user passes the snapshot path) is the Hub repository
huggingface_hub stored there: ``models--`` + the repo id with ``/`` written ``--`` (huggingface_hub's
``repo_folder_name``), each revision under ``snapshots/<commit>``."""

from __future__ import annotations

from pathlib import Path

import pytest
from huggingface_hub.file_download import repo_folder_name

from kvbudget.cli import main
from kvbudget.model.resolve import hub_cache_repo, load_foreign_model

LOGS = Path(__file__).parent / "data" / "vllm_logs"


@pytest.mark.parametrize("repo", ["Qwen/Qwen2.5-7B-Instruct", "meta-llama/Llama-3.1-8B-Instruct",
                                  "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", "org.x/name_with.dots-1"])
@pytest.mark.parametrize("tail", ["", "/", "/snapshots/a09a35458c702b33eeacc393d103063234e8bc28", "/snapshots"])
def test_cache_folder_names_its_repo(repo: str, tail: str) -> None:
    folder = repo_folder_name(repo_id=repo, repo_type="model")  # huggingface_hub's own naming
    assert hub_cache_repo(f"/root/.cache/huggingface/hub/{folder}{tail}") == repo
    assert hub_cache_repo(f"C:\\hf\\{folder}{tail.replace('/', chr(92))}") == repo


@pytest.mark.parametrize("path", ["/models/Qwen3-8B", "/data/my-models--x", "Qwen/Qwen3-8B", "datasets--a--b"])
def test_other_paths_are_not_cache_folders(path: str) -> None:
    assert hub_cache_repo(path) is None


def test_a_cache_snapshot_path_is_planned_as_its_repo() -> None:
    spec = load_foreign_model("/root/.cache/huggingface/hub/models--Qwen--Qwen2.5-7B-Instruct/snapshots/"
                              "a09a35458c702b33eeacc393d103063234e8bc28")
    assert len(spec.layers) == 28 and spec.dims.hidden_size == 3584  # Qwen2.5-7B's config.json
    assert any("Qwen/Qwen2.5-7B-Instruct" in n for n in spec.notes)


def test_check_reads_a_log_that_names_a_snapshot_path(capsys: pytest.CaptureFixture[str]) -> None:
    # vLLM 0.29.0 on an RTX 5090 serving the snapshot path
    log = LOGS / "v0.29.0_rtx5090_qwen2.5-7b_bf16_len8192_gmu0.9.log"
    assert "models--Qwen--Qwen2.5-7B-Instruct/snapshots/" in log.read_text()
    assert main(["check", str(log)]) == 0
    out, err = capsys.readouterr()
    assert "planned as Qwen/Qwen2.5-7B-Instruct" in err
    assert "209,120" in out  # the log's own KV cache tokens, compared


def test_an_unknown_repo_in_a_cache_path_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    text = (LOGS / "v0.29.0_rtx5090_qwen2.5-7b_bf16_len8192_gmu0.9.log").read_text()
    log.write_text(text.replace("models--Qwen--Qwen2.5-7B-Instruct", "models--nobody--no-such-model-xyz"))
    assert main(["check", str(log)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "error" in err


def test_a_modelscope_folder_is_planned_as_the_model_it_names(capsys: pytest.CaptureFixture[str]) -> None:
    # ModelScope's snapshot_download writes the '.' of a model's name as '___' in its folder; the corpus log
    # (vLLM 0.10.2 on an RTX 4090, its URL in the record's .json) serves /root/autodl-tmp/models/qwen/Qwen2___5-3B
    spec = load_foreign_model("/root/autodl-tmp/models/qwen/Qwen2___5-3B")
    assert len(spec.layers) == 36 and spec.dims.hidden_size == 2048  # Qwen2.5-3B's config.json
    log = LOGS / "v0.10.2_rtx4090_qwen2.5-3b_fp16_len4096_mns1.log"
    assert main(["check", str(log)]) == 0
    out, err = capsys.readouterr()
    assert "planned as Qwen/Qwen2.5-3B" in err and "5.79" in out  # the log's 'Model loading took 5.79 GiB'
