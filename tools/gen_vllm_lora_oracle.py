"""Generate tests/data/vllm_lora_oracle.json: the bytes of vLLM's own LoRA layer classes (not run in CI).

vLLM 0.33.0's base layers (QKVParallelLinear, MergedColumnParallelLinear, RowParallelLinear, VocabParallelEmbedding,
ParallelLMHead + LogitsProcessor) are built at one model's decoder-layer shapes on the ``meta`` device (no memory),
wrapped by vLLM's own lora/utils.py ``from_layer`` / ``from_layer_logits_processor`` (which call each class's
``create_lora_weights``), and the bytes of every tensor the wrappers hold in ``lora_a_stacked`` / ``lora_b_stacked``
(and ``embeddings_tensors`` where a release has it) are summed. TP 1 (one process).

Set up as tools/gen_vllm_oracle.py says (/tmp/vllmenv with torch 2.13.0 CPU and vllm==0.33.0 --no-deps), then:
    VLLM_TARGET_DEVICE=cpu PYTHONPATH=src /tmp/vllmenv/bin/python tools/gen_vllm_lora_oracle.py
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import torch
import vllm
from vllm.config import LoRAConfig, VllmConfig, set_current_vllm_config
from vllm.distributed import init_distributed_environment, initialize_model_parallel
from vllm.lora.utils import from_layer, from_layer_logits_processor
from vllm.model_executor.layers.linear import MergedColumnParallelLinear, QKVParallelLinear, RowParallelLinear
from vllm.model_executor.layers.logits_processor import LogitsProcessor
from vllm.model_executor.layers.vocab_parallel_embedding import ParallelLMHead, VocabParallelEmbedding

import kvbudget

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "vllm_lora_oracle.json"
CASES = [("meta-llama/Llama-3.1-8B-Instruct", 4, 64), ("meta-llama/Llama-3.1-8B-Instruct", 1, 16),
         ("Qwen/Qwen2.5-7B-Instruct", 2, 32)]


def _bytes(module: torch.nn.Module) -> int:
    total = 0
    for name in ("lora_a_stacked", "lora_b_stacked", "embeddings_tensors"):
        value = getattr(module, name, None)
        for t in value if isinstance(value, (tuple, list)) else [value]:
            if isinstance(t, torch.Tensor):
                total += t.numel() * t.element_size()
    return total


def main() -> None:
    rows = []
    with set_current_vllm_config(VllmConfig()):
        init_distributed_environment(1, 0, f"file://{tempfile.mkstemp()[1]}", 0, "gloo")
        initialize_model_parallel(1, 1)
        for model, loras, rank in CASES:
            spec = kvbudget.load_model(model)
            d = spec.dims
            kv_heads = next(t.heads for t in spec.inventory.layers[0] if t.split == "kv")
            inter = d.intermediate_size
            cfg = LoRAConfig(max_loras=loras, max_lora_rank=rank, lora_dtype=torch.bfloat16)
            torch.set_default_device("meta")
            torch.set_default_dtype(torch.bfloat16)
            qkv = QKVParallelLinear(d.hidden_size, d.head_dim, d.num_attention_heads, kv_heads, bias=False)
            o = RowParallelLinear(d.num_attention_heads * d.head_dim, d.hidden_size, bias=False)
            gate_up = MergedColumnParallelLinear(d.hidden_size, [inter, inter], bias=False)
            down = RowParallelLinear(inter, d.hidden_size, bias=False)
            layer = {name: _bytes(from_layer(m, loras, cfg, packed, None))
                     for name, m, packed in (("qkv_proj", qkv, ["q_proj", "k_proj", "v_proj"]), ("o_proj", o, []),
                                             ("gate_up_proj", gate_up, ["gate_proj", "up_proj"]), ("down_proj", down, []))}
            embed = VocabParallelEmbedding(d.vocab_size, d.hidden_size)
            lm_head = ParallelLMHead(d.vocab_size, d.hidden_size)
            logits = from_layer_logits_processor(LogitsProcessor(d.vocab_size), lm_head, loras, cfg, None)
            torch.set_default_device("cpu")
            rows.append({"model": model, "tp": 1, "max_loras": loras, "max_lora_rank": rank, "lora_dtype": "bfloat16",
                         "layer_bytes": layer, "embed_tokens_bytes": _bytes(from_layer(embed, loras, cfg, [], None)),
                         "lm_head_bytes": _bytes(logits), "num_layers": spec.num_layers})
    OUT.write_text(json.dumps({"vllm": vllm.__version__, "source": "vllm/lora/layers create_lora_weights, run on the "
                               "meta device by tools/gen_vllm_lora_oracle.py", "rows": rows}, indent=1) + "\n")
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    main()
