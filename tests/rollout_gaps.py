"""A low-precision rollout's log-probs against a model's fp32 ones, per sampled token (the
int8 and bf16 rollout tests)."""

from __future__ import annotations

import torch

from rollcli.data.padding import rollout_tensors
from rollcli.strategies.hf_model import response_logprobs
from rollcli.strategies.sampling import SamplingParams

PROMPTS = [[1, 17, 42, 99, 7], [1, 5, 6]]
SAMPLE = SamplingParams(n=4, max_new_tokens=16, temperature=1.0, seed=11)


def fp32_logprobs(model, gens) -> list[list[float]]:  # noqa: ANN001
    """`model`'s log-probs of each generation's tokens after its prompt (of `PROMPTS`)."""
    tensors = rollout_tensors(
        [PROMPTS[g.prompt_index] for g in gens], [g.token_ids for g in gens], 0
    )
    with torch.no_grad():
        lp, _ = response_logprobs(model, tensors, temperature=1.0)
    return [lp[i, : len(g.token_ids)].tolist() for i, g in enumerate(gens)]


def gaps(model, gens) -> torch.Tensor:  # noqa: ANN001
    """Each sampled token's engine log-prob less `model`'s."""
    ref = fp32_logprobs(model, gens)
    return torch.tensor(
        [a - b for g, r in zip(gens, ref, strict=True) for a, b in zip(g.logprobs, r, strict=True)]
    )


def engine_gaps(model_path: str, **low_precision: bool) -> torch.Tensor:
    """Sample `PROMPTS` with an hf engine holding low-precision copies (`int8=True` or
    `bf16=True`) and return each token's gap to the fp32 model; checks that every sample
    has its log-probs and that the model's weights and their names stayed as loaded (the
    trainer's sync writes them)."""
    from rollcli.strategies.hf_infer import HFInferEngine
    from rollcli.strategies.hf_model import load_causal_lm, load_tokenizer

    tok = load_tokenizer(model_path)
    fp32 = load_causal_lm(model_path, train=False)
    model = load_causal_lm(model_path, train=False)
    engine = HFInferEngine(model, [tok.eos_token_id], tok.pad_token_id, **low_precision)
    gens = engine.generate(PROMPTS, SAMPLE)
    assert len(gens) == 8 and all(len(g.logprobs) == len(g.token_ids) > 0 for g in gens)
    for (name, a), b in zip(fp32.state_dict().items(), model.state_dict().values(), strict=True):
        assert torch.equal(a, b) and b.dtype == a.dtype, name
    return gaps(fp32, gens)


def synced_gaps(model_path: str, **low_precision: bool) -> tuple[float, float]:
    """After a real weight sync of perturbed weights into an `ActorInferWorker` (with
    `int8=True` or `bf16_linears=True`), the mean |gap| of its samples to the new model's
    log-probs and to the old one's."""
    from weight_sync_pair import sync_into_worker

    from rollcli.strategies.hf_model import load_causal_lm
    from rollcli.workers.actor_infer import ActorInferArgs, ActorInferWorker

    infer = ActorInferWorker(ActorInferArgs(model_path, num_threads=1, **low_precision))
    old = load_causal_lm(model_path, train=False)
    trained = load_causal_lm(model_path, train=False)
    torch.manual_seed(1)
    with torch.no_grad():
        for p in trained.parameters():
            p.add_(0.05 * torch.randn_like(p))
    assert sync_into_worker(infer, trained) > 0
    gens = infer.engine.generate(PROMPTS, SAMPLE)
    return gaps(trained, gens).abs().mean().item(), gaps(old, gens).abs().mean().item()
