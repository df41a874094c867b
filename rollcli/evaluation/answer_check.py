"""Held-out accuracy by generation for the offline pipelines: a worker answers held-out
prompts greedily with its own model and the recipe's reward function scores the answers."""

from __future__ import annotations

from typing import Any, Protocol

from rollcli.config.recipe import DistillRecipe, SFTRecipe
from rollcli.data.chat import ChatExample
from rollcli.distributed.cluster import Cluster
from rollcli.evaluation.stats import wilson_interval
from rollcli.rewards.failures import check_reward_errors, reward_errors
from rollcli.rewards.registry import load_reward_fn
from rollcli.rewards.runner import score_samples
from rollcli.strategies.sampling import SamplingParams


class Answerer(Protocol):
    """A worker that answers held-out prompts (sft's actor, distill's student or teacher)."""

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[dict]: ...


def answer_accuracy(
    cluster: Cluster,
    examples: list[ChatExample],
    prompt_ids: list[list[int]],
    *,
    max_new_tokens: int,
    reward_fn: str,
    reward_options: dict[str, Any],
    timeout_s: float,
    convention: str = "auto",
) -> dict[str, float]:
    """`accuracy` (the reward's `correct`, else score >= 1) with its 95% Wilson interval
    (`accuracy_ci_low`, `accuracy_ci_high`) and `n`, `response_length`, and
    `reward_errors` (the answers the reward failed on; `RewardFailedError` when it failed on
    every one)."""
    params = SamplingParams(n=1, max_new_tokens=max_new_tokens, temperature=0.0)
    gens = cluster.call_rank(0, Answerer.generate, prompt_ids, params)
    samples = [
        {
            "response": g["text"],
            "answer": examples[g["prompt_index"]].answer,
            "tag": examples[g["prompt_index"]].tag,
            "finished": g["finished"],
        }
        for g in gens
    ]
    fn = load_reward_fn(reward_fn)
    results = score_samples(fn, samples, reward_options, timeout_s, convention)
    check_reward_errors(reward_fn, results, "in validation", lambda _warning: None, 1.0)
    right = sum(float(r.get("correct", r["score"] >= 1.0)) for r in results)
    low, high = wilson_interval(round(right), len(results))
    return {
        "accuracy": right / len(results),
        "accuracy_ci_low": low,
        "accuracy_ci_high": high,
        "n": float(len(results)),
        "response_length": sum(len(g["token_ids"]) for g in gens) / len(gens),
        "reward_errors": float(reward_errors(results)[0]),
    }


def recipe_accuracy(
    cluster: Cluster,
    cfg: SFTRecipe | DistillRecipe,
    examples: list[ChatExample],
    prompt_ids: list[list[int]],
) -> dict[str, float]:
    """`answer_accuracy` with the recipe's held-out generation budget and reward."""
    r = cfg.rollout
    return answer_accuracy(
        cluster,
        examples,
        prompt_ids,
        max_new_tokens=r.val_max_new_tokens or r.max_new_tokens,
        reward_fn=cfg.reward.fn,
        reward_options=cfg.reward.worker_options,
        timeout_s=cfg.reward.timeout_s,
        convention=cfg.reward.convention,
    )
