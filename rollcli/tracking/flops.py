"""The FLOPs a decoder-only transformer spends on the tokens a phase actually computes.

Per computed token, the weight matmuls cost `2 x params_per_token` FLOPs (a multiply and an
add per weight): the attention projections (q, k, v, o) and the MLP of every layer (for a
mixture of experts, the experts a token is routed to and the router). The LM head
(`hidden x vocab`) costs its `2 x hidden x vocab` only at the positions whose logits are
needed. Attention itself costs `2 x 2 x layers x q_dim x ctx` per token (`q . k` and
`softmax . v` over the `ctx` keys the token sees; `q_dim` = heads x head_dim, the hidden size
for llama-style models). Embedding look-ups, norms and activations are left out (well under
1% here). Backward costs twice the forward (gradients of activations and of weights); with
frozen weights (LoRA) only the activations' half is needed. This is the PaLM paper's model
FLOPs (Chowdhery et al., 2022, appendix B): recomputation (gradient checkpointing) and padding
are not useful work and are not counted.

Tokens are counted by groups: one prompt of `p` tokens and the responses sampled from it.

>>> model = FlopModel(layers=1, hidden=2, q_dim=2, kv_dim=2, mlp_params=0, vocab=0)
>>> model.params_per_token  # q, k, v, o: 4 x 2 x 2
16
>>> model.forward(tokens=3, context=6, head_tokens=0)  # 2 x 16 x 3 + 4 x 1 x 2 x 6
144
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rollcli.models.spec import ModelSpec


def triangle(n: int) -> int:
    """Keys seen by positions 0..n-1 of a causal sequence: 1 + 2 + ... + n.

    >>> triangle(4)
    10
    """
    return n * (n + 1) // 2


@dataclass(frozen=True)
class Group:
    """One prompt of `prompt` tokens and the lengths of the responses that follow it."""

    prompt: int
    responses: tuple[int, ...]


@dataclass(frozen=True)
class FlopModel:
    layers: int
    hidden: int
    q_dim: int  # attention heads x head_dim
    kv_dim: int  # key/value heads x head_dim
    mlp_params: int  # weights a token passes through in one layer's MLP (or routed experts)
    vocab: int

    @classmethod
    def from_spec(cls, spec: ModelSpec) -> FlopModel:
        """The numbers of a model's config (see `planning.from_recipe.spec_from_config`)."""
        from rollcli.models.spec import mlp_params

        h = spec.hidden_size
        # gate, up, down; of an MoE the routed experts, the router and a shared expert (a
        # layer's mean where some layers are dense)
        mlp = mlp_params(spec, active=True) // spec.num_layers
        return cls(
            layers=spec.num_layers,
            hidden=h,
            q_dim=spec.num_attention_heads * spec.head_dim,
            kv_dim=spec.num_kv_heads * spec.head_dim,
            mlp_params=mlp,
            vocab=spec.vocab_size,
        )

    @property
    def params_per_token(self) -> int:
        """Decoder weights one token's forward multiplies by (the LM head apart)."""
        attention = 2 * self.hidden * self.q_dim + 2 * self.hidden * self.kv_dim
        return self.layers * (attention + self.mlp_params)

    def forward(self, *, tokens: int, context: int, head_tokens: int) -> int:
        """FLOPs of a forward over `tokens` positions that see `context` keys in all, with
        logits at `head_tokens` of them."""
        return (
            2 * self.params_per_token * tokens
            + 2 * self.hidden * self.vocab * head_tokens
            + 4 * self.layers * self.q_dim * context
        )

    def generate(self, groups: Iterable[Group]) -> int:
        """Sampling: each prompt prefilled once (its KV cache shared by its samples, as the
        hf and vllm engines do), logits at its last position; then every sampled token but
        each response's last is fed back as one decode position with logits."""
        tokens = context = head = 0
        for g in groups:
            tokens += g.prompt
            context += triangle(g.prompt)
            head += 1
            for r in g.responses:
                fed = max(r - 1, 0)
                tokens += fed
                context += triangle(g.prompt + fed) - triangle(g.prompt)
                head += fed
        return self.forward(tokens=tokens, context=context, head_tokens=head)

    def logprobs(self, groups: Iterable[Group], *, shared_prefix: bool, head: bool = True) -> int:
        """A log-prob (or value) forward over `[prompt | response]` rows, logits at the
        response positions (`head=False`: a critic, whose value head is negligible). With
        `shared_prefix` each group's prompt is computed once (`rollcli.data.shared_prefix`);
        every response token sees the same keys either way."""
        tokens = context = head_tokens = 0
        for g in groups:
            copies = 1 if shared_prefix else len(g.responses)
            tokens += copies * g.prompt + sum(g.responses)
            context += copies * triangle(g.prompt)
            context += sum(triangle(g.prompt + r) - triangle(g.prompt) for r in g.responses)
            head_tokens += sum(g.responses)
        return self.forward(tokens=tokens, context=context, head_tokens=head_tokens * head)

    def sequences(self, lengths: Sequence[int], *, head_tokens: int) -> int:
        """A forward over whole sequences (SFT, DPO), each causal on its own (packed rows
        do not attend across samples), logits at `head_tokens` positions."""
        return self.forward(
            tokens=sum(lengths),
            context=sum(triangle(n) for n in lengths),
            head_tokens=head_tokens,
        )


def train_factor(*, frozen_weights: bool) -> int:
    """Forward + backward in units of one forward: 3, or 2 when the weights are frozen
    (LoRA: only the activations' gradients flow through them).

    >>> train_factor(frozen_weights=False), train_factor(frozen_weights=True)
    (3, 2)
    """
    return 2 if frozen_weights else 3
