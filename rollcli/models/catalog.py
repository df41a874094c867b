"""Public models people post-train, with numbers from their config.json (planning only).

Each entry copies the architecture fields of the model's public Hugging Face
`config.json` (`num_hidden_layers`, `hidden_size`, `intermediate_size`,
`num_attention_heads`, `num_key_value_heads`, `head_dim`, `vocab_size`,
`tie_word_embeddings`, `max_position_embeddings`; for MoE `num_experts`,
`num_experts_per_tok`, `moe_intermediate_size`). `PUBLISHED_PARAMS` holds the total
parameter count each model card states, so a test can check `registry.param_count`
against it. `source="hub"`: weights are fetched only when a user names the model on a
machine that can reach the hub.
"""

from __future__ import annotations

from rollcli.models.spec import ModelSpec

CATALOG: list[ModelSpec] = []


def _spec(
    name: str,
    hf_id: str,
    architecture: str,
    layers: int,
    hidden: int,
    intermediate: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    vocab: int,
    tied: bool,
    max_pos: int,
    description: str,
    *,
    experts: int = 0,
    experts_per_token: int = 0,
    moe_intermediate: int = 0,
) -> ModelSpec:
    return ModelSpec(
        name=name,
        hf_id=hf_id,
        source="hub",
        architecture=architecture,
        num_layers=layers,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        vocab_size=vocab,
        tie_word_embeddings=tied,
        max_position_embeddings=max_pos,
        num_experts=experts,
        num_experts_per_token=experts_per_token,
        moe_intermediate_size=moe_intermediate,
        description=description,
    )


_Q25 = "Qwen/Qwen2.5-{}-Instruct"
_Q3 = "Qwen/Qwen3-{}"
_LLAMA = "meta-llama/Llama-3.1-{}-Instruct"
_SMOL = "HuggingFaceTB/SmolLM2-{}-Instruct"

# fmt: off
# name, hf_id, architecture, layers, hidden, intermediate, heads, kv_heads, head_dim,
# vocab, tied embeddings, max positions, description
CATALOG += [
    _spec("qwen2.5-0.5b", _Q25.format("0.5B"), "qwen2", 24, 896, 4864, 14, 2, 64,
          151936, True, 32768, "Qwen2.5-0.5B-Instruct (dense, GQA)"),
    _spec("qwen2.5-1.5b", _Q25.format("1.5B"), "qwen2", 28, 1536, 8960, 12, 2, 128,
          151936, True, 32768, "Qwen2.5-1.5B-Instruct (dense, GQA)"),
    _spec("qwen2.5-3b", _Q25.format("3B"), "qwen2", 36, 2048, 11008, 16, 2, 128,
          151936, True, 32768, "Qwen2.5-3B-Instruct (dense, GQA)"),
    _spec("qwen2.5-7b", _Q25.format("7B"), "qwen2", 28, 3584, 18944, 28, 4, 128,
          152064, False, 32768, "Qwen2.5-7B-Instruct (dense, GQA)"),
    # the base (pre-trained) model the ROLL paper's RLVR runs start from (docs/paper.md);
    # its config differs from the Instruct model's only in max_position_embeddings
    _spec("qwen2.5-7b-base", "Qwen/Qwen2.5-7B", "qwen2", 28, 3584, 18944, 28, 4, 128,
          152064, False, 131072, "Qwen2.5-7B base, not instruction-tuned (dense, GQA)"),
    _spec("qwen2.5-14b", _Q25.format("14B"), "qwen2", 48, 5120, 13824, 40, 8, 128,
          152064, False, 32768, "Qwen2.5-14B-Instruct (dense, GQA)"),
    _spec("qwen2.5-32b", _Q25.format("32B"), "qwen2", 64, 5120, 27648, 40, 8, 128,
          152064, False, 32768, "Qwen2.5-32B-Instruct (dense, GQA)"),
    _spec("qwen2.5-72b", _Q25.format("72B"), "qwen2", 80, 8192, 29568, 64, 8, 128,
          152064, False, 32768, "Qwen2.5-72B-Instruct (dense, GQA)"),
    _spec("qwen3-0.6b", _Q3.format("0.6B"), "qwen3", 28, 1024, 3072, 16, 8, 128,
          151936, True, 40960, "Qwen3-0.6B (dense, thinking/non-thinking)"),
    _spec("qwen3-1.7b", _Q3.format("1.7B"), "qwen3", 28, 2048, 6144, 16, 8, 128,
          151936, True, 40960, "Qwen3-1.7B (dense, thinking/non-thinking)"),
    _spec("qwen3-4b", _Q3.format("4B"), "qwen3", 36, 2560, 9728, 32, 8, 128,
          151936, True, 40960, "Qwen3-4B (dense, thinking/non-thinking)"),
    _spec("qwen3-8b", _Q3.format("8B"), "qwen3", 36, 4096, 12288, 32, 8, 128,
          151936, False, 40960, "Qwen3-8B (dense, thinking/non-thinking)"),
    _spec("qwen3-14b", _Q3.format("14B"), "qwen3", 40, 5120, 17408, 40, 8, 128,
          151936, False, 40960, "Qwen3-14B (dense, thinking/non-thinking)"),
    _spec("qwen3-32b", _Q3.format("32B"), "qwen3", 64, 5120, 25600, 64, 8, 128,
          151936, False, 40960, "Qwen3-32B (dense, thinking/non-thinking)"),
    _spec("qwen3-30b-a3b", _Q3.format("30B-A3B"), "qwen3_moe", 48, 2048, 6144, 32, 4, 128,
          151936, False, 40960, "Qwen3-30B-A3B (MoE: 128 experts, 8 active, ~3.3B active)",
          experts=128, experts_per_token=8, moe_intermediate=768),
    _spec("qwen3-30b-a3b-base", "Qwen/Qwen3-30B-A3B-Base", "qwen3_moe", 48, 2048, 6144, 32,
          4, 128, 151936, False, 32768,
          "Qwen3-30B-A3B-Base, not instruction-tuned (MoE: 128 experts, 8 active)",
          experts=128, experts_per_token=8, moe_intermediate=768),
    _spec("qwen3-235b-a22b", _Q3.format("235B-A22B"), "qwen3_moe", 94, 4096, 12288, 64, 4,
          128, 151936, False, 40960,
          "Qwen3-235B-A22B (MoE: 128 experts, 8 active, ~22B active)",
          experts=128, experts_per_token=8, moe_intermediate=1536),
    _spec("llama3.1-8b", _LLAMA.format("8B"), "llama", 32, 4096, 14336, 32, 8, 128,
          128256, False, 131072, "Llama-3.1-8B-Instruct (dense, GQA; gated on the hub)"),
    _spec("llama3.1-70b", _LLAMA.format("70B"), "llama", 80, 8192, 28672, 64, 8, 128,
          128256, False, 131072, "Llama-3.1-70B-Instruct (dense, GQA; gated on the hub)"),
    _spec("smollm2-360m", _SMOL.format("360M"), "llama", 32, 960, 2560, 15, 5, 64,
          49152, True, 8192, "SmolLM2-360M-Instruct (dense)"),
    _spec("smollm2-1.7b", _SMOL.format("1.7B"), "llama", 24, 2048, 8192, 32, 32, 64,
          49152, True, 8192, "SmolLM2-1.7B-Instruct (dense, full multi-head attention)"),
]
# fmt: on

# Total parameters as stated on each model card (for the param_count test).
PUBLISHED_PARAMS: dict[str, float] = {
    "qwen2.5-0.5b": 0.49e9,
    "qwen2.5-1.5b": 1.54e9,
    "qwen2.5-3b": 3.09e9,
    "qwen2.5-7b": 7.61e9,
    "qwen2.5-7b-base": 7.61e9,
    "qwen2.5-14b": 14.7e9,
    "qwen2.5-32b": 32.5e9,
    "qwen2.5-72b": 72.7e9,
    "qwen3-0.6b": 0.6e9,
    "qwen3-1.7b": 1.7e9,
    "qwen3-4b": 4.0e9,
    "qwen3-8b": 8.2e9,
    "qwen3-14b": 14.8e9,
    "qwen3-32b": 32.8e9,
    "qwen3-30b-a3b": 30.5e9,
    "qwen3-30b-a3b-base": 30.5e9,
    "qwen3-235b-a22b": 235e9,
    "llama3.1-8b": 8.03e9,
    "llama3.1-70b": 70.6e9,
    "smollm2-360m": 362e6,
    "smollm2-1.7b": 1.71e9,
}
