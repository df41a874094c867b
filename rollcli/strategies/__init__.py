"""Backends behind workers. Train: `hf` (plain torch). Infer: `hf` (transformers generate).

Optional backends (vllm, deepspeed, megatron, sglang) are extras, imported lazily.
"""
