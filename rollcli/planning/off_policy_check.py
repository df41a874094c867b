"""The off-policy correction as planning sees it: what `algorithm.off_policy.correction:
auto` resolves to (the line `roll plan` prints) and the engines whose log-probs would bias
the importance weights (refused before anything starts).
"""

from __future__ import annotations

from rollcli.config.algorithm import resolved_correction
from rollcli.config.errors import ConfigError
from rollcli.config.loss_spec import LOSSES
from rollcli.config.pipeline_spec import spec_of
from rollcli.config.recipe import RecipeConfig, rollout_of
from rollcli.config.strategy_spec import ENGINES


def correction_line(cfg: RecipeConfig) -> str | None:
    """What `algorithm.off_policy.correction: auto` applies when that is a correction
    (`tis` for a low-precision rollout, `config.algorithm.resolved_correction`); None where
    the recipe names its correction, has no policy update, or auto applies none."""
    alg = getattr(cfg, "algorithm", None)
    if alg is None or not spec_of(cfg).engine or alg.off_policy.correction != "auto":
        return None
    correction = resolved_correction(alg, rollout_of(cfg).precision)
    if correction == "none":
        return None
    return (
        f"algorithm.off_policy.correction auto → {correction} (rollout.precision "
        f"{rollout_of(cfg).precision}: the engine's weights are not the trainer's; none turns it off)"
    )


def check_behaviour_logprobs(cfg: RecipeConfig, engine: str) -> None:
    """`algorithm.off_policy.correction` weighs tokens by `pi_old / mu`, with `pi_old` the trainer's
    temperature-only log-prob, and `policy_loss: topr` tapers `pi_theta / mu` whatever the
    correction (`LossSpec.tapers`). The hf engine reports `mu` under that same distribution;
    vllm (`processed_logprobs`) and sglang report it under the top-k / top-p truncated one
    (vLLM has no temperature-only mode: `raw_logprobs` leave the temperature out), which
    biases every weight below 1 (mean 0.906 at top_p 0.9): refused."""
    alg = getattr(cfg, "algorithm", None)
    rollout = rollout_of(cfg)
    truncated = rollout.top_p < 1.0 or rollout.top_k > 0
    if ENGINES[engine].exact_logprobs or not truncated or alg is None:
        return
    if LOSSES[alg.policy_loss].tapers:
        raise ConfigError(
            f"algorithm.policy_loss {alg.policy_loss} with rollout.top_p = {rollout.top_p} / "
            f"top_k = {rollout.top_k}: its ratio is to the {engine} engine's log-probs, which are "
            "of the truncated distribution; set rollout.top_p: 1 and rollout.top_k: 0, or "
            "use rollout.engine: hf"
        )
    correction = resolved_correction(alg, rollout.precision)
    if correction == "none":
        return
    chosen = (
        "" if alg.off_policy.correction == correction else " (auto, for this rollout.precision)"
    )
    raise ConfigError(
        f"algorithm.off_policy.correction {correction}{chosen} with rollout.top_p = {rollout.top_p} / top_k = {rollout.top_k}: "
        f"the {engine} engine reports log-probs under the truncated distribution, not the "
        "trainer's, so the importance weights would be biased; set rollout.top_p: 1 and "
        "rollout.top_k: 0, use rollout.engine: hf, or set algorithm.off_policy.correction: none"
    )
