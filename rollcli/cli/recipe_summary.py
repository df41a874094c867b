"""What a recipe trains, in a few lines: the model, the data (each domain of a mix with its
dataset, share and sample), the batch, the lengths and the loss. `roll plan` and
`roll train --dry-run` print it above the plan, so the settings that apply (a CPU recipe
or its at-scale form) are read at a glance."""

from __future__ import annotations

from typing import Any

from rollcli.config.loss_spec import LOSSES
from rollcli.config.pipeline_spec import spec_of


def summary_lines(cfg: Any) -> list[str]:
    """The recipe's training settings for an RL recipe (rlvr or agentic); none otherwise."""
    spec = spec_of(cfg)  # prompts (rlvr), episodes (agentic) or a fixed data set
    if not spec.algorithm:
        return []
    train = cfg.train
    lines = [f"trains {cfg.model} for {train.steps} steps at lr {train.lr:g} ({cfg.name})"]
    if spec.samples_prompts:
        lines += _data_lines(cfg.data)
        sampling = cfg.rollout
        prompts = sampling.batch_size // sampling.group_size
        lines.append(
            f"batch: {prompts} prompts x {sampling.group_size} samples = {sampling.batch_size} "
            f"a step; prompts up to {cfg.data.max_prompt_tokens} tokens, responses up to "
            f"{sampling.max_new_tokens}"
        )
    else:
        lines += _agentic_lines(cfg)
    lines.append(_loss_line(cfg.algorithm))
    return lines


def _data_lines(data: Any) -> list[str]:
    if data.source != "mix":
        return [f"data: {_where(data)}{_sample(data)}"]
    total = sum(d.ratio for d in data.mix.values())
    return [f"data: a mix of {len(data.mix)} domains, by share of the prompts"] + [
        f"  {name} {100 * d.ratio / total:.0f}%: {_where(d)}{_sample(d)}"
        for name, d in data.mix.items()
    ]


def _where(data: Any) -> str:
    if data.source == "file":
        config = f" ({data.name})" if data.name else ""
        return f"{data.path}{config}"
    if data.source == "reasoning_gym":
        return f"reasoning_gym {data.task}"
    return data.source


def _sample(data: Any) -> str:
    sample = getattr(data, "sample", None)
    if sample is None:
        return ""
    by = f" by {sample.by}" if getattr(sample, "by", None) else ""
    return f", {sample.n:,} sampled{by}"


def _agentic_lines(cfg: Any) -> list[str]:
    agentic = cfg.agentic
    kwargs = ", ".join(f"{k}={v}" for k, v in agentic.env_kwargs.items())
    env = f"env: {agentic.env}" + (f" ({kwargs})" if kwargs else "")
    return [env, agentic.scale_line(cfg.rollout.max_new_tokens)]


def _loss_line(algorithm: Any) -> str:
    loss = f"loss: {algorithm.policy_loss} on {algorithm.advantage} advantages"
    if LOSSES[algorithm.policy_loss].clipped:
        loss += f" (clip {algorithm.clip_low:g}/{algorithm.clip_high:g}"
        loss += f", dual clip {algorithm.dual_clip:g})" if algorithm.dual_clip else ")"
    clips = [
        f"{what} clip {value:g}"
        for what, value in (
            ("reward", algorithm.reward_clip),
            ("advantage", algorithm.advantage_clip),
        )
        if value is not None
    ]
    kl = f"kl {algorithm.kl_coef:g} in the {algorithm.kl_in}" if algorithm.kl_coef else "no kl"
    return "; ".join([loss, *clips, kl])
