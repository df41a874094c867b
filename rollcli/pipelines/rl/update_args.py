"""The actor's update arguments (`algorithms/update_args.py`) from a recipe."""

from __future__ import annotations

from rollcli.algorithms.update_args import PolicyUpdateArgs
from rollcli.config.algorithm import resolved_correction
from rollcli.config.pipeline_spec import spec_of
from rollcli.config.recipe import RLRecipe


def update_args(cfg: RLRecipe) -> PolicyUpdateArgs:
    """The update's arguments from the recipe's algorithm, train and rollout sections,
    with its off-policy correction against the sampler's log-probs."""
    alg, train, off = cfg.algorithm, cfg.train, cfg.algorithm.off_policy
    return PolicyUpdateArgs(
        policy_loss=alg.policy_loss,
        clip_low=alg.clip_low,
        clip_high=alg.clip_high,
        dual_clip=alg.dual_clip,
        loss_agg=alg.loss_agg,
        entropy_coef=alg.entropy_coef,
        kl_loss_coef=alg.kl_coef if alg.kl_in == "loss" else 0.0,
        kl_estimator=alg.kl_estimator,
        epochs=alg.ppo_epochs,
        mini_batch_size=train.mini_batch_size,
        micro_batch_size=train.micro_batch_size,
        micro_batch_tokens=train.micro_batch_tokens,
        # Dr. GRPO's constant: the generation budget (an agentic response spans turns:
        # there the batch's padded response width, see ActorTrainWorker.train_step)
        norm_len=alg.loss_norm_len
        or (cfg.rollout.max_new_tokens if spec_of(cfg).samples_prompts else None),
        temperature=cfg.rollout.temperature or 1.0,
        shared_prefix=cfg.shared_prefix,
        correction=resolved_correction(alg, cfg.rollout.precision),  # type: ignore[arg-type]
        correction_level=off.level,
        correction_cap=off.cap,
        correction_band=off.band,
        moe_aux_coef=alg.moe_aux_coef,
        moe_z_coef=alg.moe_z_coef,
    )
