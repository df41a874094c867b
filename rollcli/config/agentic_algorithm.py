"""The `algorithm:` keys the agentic pipeline cannot apply, each with why (one place).

The agentic pipeline computes advantages through rlvr's stage
(`rollcli.pipelines.rl.advantages`) and updates the policy with the same worker and
arguments, so every other key means the same as in rlvr (docs/agentic.md has the table).
The refused ones need a part the episode source does not have: rlvr's prompt re-sampling
(dynamic sampling) and a single reply to shape by length (overlong). GAE trains a critic on
the episode's model tokens (the environment's turns in between are masked, and GAE skips
masked positions); `off_policy` reweights episodes played ahead (`rollout.max_staleness`)
against the sampler's log-probs. A key that only tunes a feature that is off (lam without
GAE, max_resample_rounds without dynamic sampling, ...) is refused for every pipeline by
`AlgorithmConfig`, so no key is silently ignored. Pure: imports only the config.
"""

from __future__ import annotations

from rollcli.config.algorithm import AlgorithmConfig


def agentic_algorithm_refusal(alg: AlgorithmConfig) -> str | None:
    """One line naming the first key of `alg` the agentic pipeline cannot apply, or None.

    >>> agentic_algorithm_refusal(AlgorithmConfig(name="rloo", advantage="rloo")) is None
    True
    >>> agentic_algorithm_refusal(AlgorithmConfig(dynamic_sampling=True)).split(":")[0]
    'algorithm.dynamic_sampling'
    """
    preset = f" (set by algorithm.name = {alg.name})" if alg.name != "grpo" else ""
    if alg.dynamic_sampling:
        return (
            f"algorithm.dynamic_sampling{preset}: re-sampling prompts whose group has one score "
            "is rlvr's; the agentic pipeline plays a fixed set of episodes per step, so remove it"
        )
    if alg.overlong_buffer > 0:
        return (
            f"algorithm.overlong_buffer{preset}: the overlong penalty shapes one reply against "
            "rollout.max_new_tokens, and an agentic episode is many replies; remove it"
        )
    return None
