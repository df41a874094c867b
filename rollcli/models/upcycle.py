"""A dense llama upcycled into a Mixtral mixture of experts (`smollm2-135m-moe`).

Sparse upcycling (Komatsuzaki et al., 2023, *Sparse Upcycling: Training Mixture-of-Experts
from Dense Checkpoints*): every expert of a layer starts as an exact copy of the dense
model's MLP, and the embeddings, attention, norms and LM head are the dense model's. A
token's MoE output is `Σ_top-k w_i · MLP(x)` with Mixtral's top-k weights renormalised to
sum to 1, so the upcycled model computes the dense model's outputs up to float rounding,
whatever the router chooses; training then makes the experts differ.

Mixtral stores a layer's experts as two 3-D parameters: `gate_up_proj [E, 2I, H]`, expert
e's gate projection's weight in rows `[0, I)` and its up projection's in `[I, 2I)`
(`MixtralExperts.forward` chunks `x @ gate_up_proj[e].T` in that order), and
`down_proj [E, H, I]`, the down projection's weight. `tests/models/test_upcycle.py` checks
that one expert reproduces the dense MLP.

The router starts spread out: small random weights (normal, std `ROUTER_STD`, seed
`ROUTER_SEED`) with, in each layer, the directions of the mean MLP input of each of a few
calibration chats (`CALIBRATION`) projected out, so that what all of a text's tokens share
favours no expert and a token is routed by how it differs from its text. Plain random rows
gave one expert 1.2% and another 47.7% of a layer's token x top-2 slots on GSM8K text; with
the projection every expert of every layer had 16.6-36.8% (25% is even; GSM8K test problems
100-131, question and reference answer in the chat template, 6,926 tokens).
"""

from __future__ import annotations

import shutil
from pathlib import Path

# files of the dense folder copied as they are: its tokenizer and its generation defaults
COPIED_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "generation_config.json",
)
ROUTER_STD = 0.02  # Mixtral's initializer_range
ROUTER_SEED = 0
# (user, assistant) chats whose mean MLP inputs the routers are made blind to
CALIBRATION = (
    (
        "Tom has 3 apples and buys 5 more. How many apples does he have now?",
        "Tom starts with 3 apples. He buys 5 more, so 3 + 5 = 8. He has 8 apples.",
    ),
    (
        "What is 47 - 19? Put the final answer in \\boxed{}.",
        "47 - 19 = 28, so the answer is \\boxed{28}.",
    ),
    ("Write a Python function that reverses a string.", "def reverse(s):\n    return s[::-1]"),
    (
        "Write a short poem about the sea.",
        "The sea is wide, the sea is deep,\nit sings the sailors off to sleep.",
    ),
    (
        "Why is the sky blue?",
        "Sunlight is scattered by the air, and blue light is scattered the most, so the sky "
        "looks blue.",
    ),
    ("Name the capital of France.", "Paris is the capital of France; the Seine flows through it."),
)


def upcycle(dense: Path, out: Path, *, experts: int, top_k: int) -> None:
    """Write to `out` the Mixtral of the llama in `dense` (a Hugging Face folder): `experts`
    copies of each layer's MLP, `top_k` of them a token, seeded routers blind to the
    calibration chats' means, and `dense`'s tokenizer and generation config."""
    import torch
    from transformers import LlamaForCausalLM, MixtralConfig, MixtralForCausalLM

    source = LlamaForCausalLM.from_pretrained(dense, dtype=torch.float32).eval()
    c = source.config
    if c.attention_bias or c.mlp_bias:
        raise ValueError(f"{dense}: Mixtral has no attention or MLP biases to hold this llama's")
    config = MixtralConfig(
        vocab_size=c.vocab_size,
        hidden_size=c.hidden_size,
        intermediate_size=c.intermediate_size,  # one expert's width: the dense MLP's
        num_hidden_layers=c.num_hidden_layers,
        num_attention_heads=c.num_attention_heads,
        num_key_value_heads=c.num_key_value_heads,
        head_dim=c.head_dim,
        hidden_act=c.hidden_act,
        max_position_embeddings=c.max_position_embeddings,
        rms_norm_eps=c.rms_norm_eps,
        rope_parameters=c.rope_parameters,
        tie_word_embeddings=c.tie_word_embeddings,
        bos_token_id=c.bos_token_id,
        eos_token_id=c.eos_token_id,
        pad_token_id=c.pad_token_id,
        num_local_experts=experts,
        num_experts_per_tok=top_k,
        router_jitter_noise=0.0,  # routing is a function of the input alone
    )  # router_aux_loss_coef: Mixtral's default
    model = MixtralForCausalLM(config)  # every weight is then the dense model's or seeded
    means = _mean_mlp_inputs(source, dense)
    generator = torch.Generator().manual_seed(ROUTER_SEED)
    with torch.no_grad():
        _copy_shared(source, model)
        for i, (dense_layer, layer) in enumerate(
            zip(source.model.layers, model.model.layers, strict=True)
        ):
            mlp, moe = dense_layer.mlp, layer.mlp
            gate_up = torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight])  # [2I, H]
            moe.experts.gate_up_proj.copy_(gate_up.expand(experts, -1, -1))
            moe.experts.down_proj.copy_(mlp.down_proj.weight.expand(experts, -1, -1))
            router = torch.randn(moe.gate.weight.shape, generator=generator) * ROUTER_STD
            basis, _ = torch.linalg.qr(means[i].T)  # [H, chats]: the means' span
            moe.gate.weight.copy_(router - router @ basis @ basis.T)
    model.save_pretrained(out, safe_serialization=True)
    for name in COPIED_FILES:
        if (dense / name).is_file():
            shutil.copyfile(dense / name, out / name)


def _mean_mlp_inputs(source, dense: Path) -> list:  # noqa: ANN001
    """Per layer, the mean MLP input of each `CALIBRATION` chat: a [chats, H] tensor."""
    import torch
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(dense)
    means: list[list] = [[] for _ in source.model.layers]
    hooks = [
        layer.mlp.register_forward_pre_hook(
            lambda _m, args, i=i: means[i].append(args[0][0].mean(dim=0))
        )
        for i, layer in enumerate(source.model.layers)
    ]
    try:
        with torch.no_grad():
            for user, assistant in CALIBRATION:
                chat = [
                    {"role": "user", "content": user},
                    {"role": "assistant", "content": assistant},
                ]
                text = tokenizer.apply_chat_template(chat, tokenize=False)
                ids = tokenizer(text, return_tensors="pt", add_special_tokens=False).input_ids
                source(input_ids=ids)
    finally:
        for hook in hooks:
            hook.remove()
    return [torch.stack(m) for m in means]


def _copy_shared(source, model) -> None:  # noqa: ANN001
    """The dense model's embeddings, attention, norms and head into `model` (same names)."""
    mine = dict(model.named_parameters())
    shared = {n: p for n, p in source.named_parameters() if ".mlp." not in n}
    if set(shared) != {n for n in mine if ".mlp." not in n}:
        raise ValueError("the upcycled model's non-MLP weights are not the dense model's")
    for name, value in shared.items():
        mine[name].copy_(value)
