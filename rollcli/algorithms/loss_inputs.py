"""What every policy loss takes: one typed, frozen `PolicyLossInputs` (as prime-rl passes
one `LossInputs` to its loss), so every loss of `policy_loss.POLICY_LOSSES` has the same
signature `loss(inputs) -> (loss, metrics)` and the registry calls each the same way.

A loss reads the fields it needs and leaves the others: `pg` and `topr` have no clip,
only `ppo` and `raftpp` a dual clip (`policy_loss.compute_policy_loss` refuses one for the
others), and only `topr` reads the sampler's log-probs (its ratio is to them): each loss's
row of `config.loss_spec.LOSSES` says which. A knob left out takes the recipe's default,
read from the config layer, not a second default written here.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from rollcli.config.algorithm import AlgorithmConfig

_ALG = AlgorithmConfig()  # the recipe's defaults: an algorithm section that sets nothing


@dataclass(frozen=True)
class PolicyLossInputs:
    """The per-token tensors `[B, T]` of a (micro-)batch's responses and the loss's knobs.

    * `logprobs`: the policy being trained, with gradient;
    * `advantages`, `mask`: per token, `mask` 1 on the tokens the loss covers;
    * `old_logprobs`: `pi_old`, the policy at the start of this update, the ratio's
      denominator of ppo, gspo and raftpp; `None` on-policy (this forward's, detached:
      ratio 1). pg's ratio metrics read it too;
    * `behaviour_logprobs`: `mu`, the sampler's own (the engine's, where it sent them):
      topr's ratio is to them, else to `pi_old`;
    * `is_weights`: the off-policy correction's weights (`objective.off_policy_weights`),
      multiplied into the per-token loss, detached; for topr 1 where the correction keeps a
      token and 0 where it drops it;
    * `clip_low`, `clip_high`: the ratio's clip range `[1 - clip_low, 1 + clip_high]` (ppo,
      raftpp, gspo; the `gspo` preset sets the paper's 3e-4, 4e-4);
    * `dual_clip`: ppo's and raftpp's bound `c > 1` on negative-advantage tokens, or None;
    * `agg`, `norm_len`: the aggregation, see `rollcli.algorithms.aggregation`; left out,
      the recipe's `algorithm.loss_agg` default (`seq-mean-token-mean`).

    >>> import torch
    >>> PolicyLossInputs(torch.zeros(2, 3), torch.zeros(2, 3), torch.ones(2, 2))
    Traceback (most recent call last):
    ValueError: PolicyLossInputs.mask is [2, 2], not logprobs' [B, T] = [2, 3]
    """

    logprobs: Tensor
    advantages: Tensor
    mask: Tensor
    old_logprobs: Tensor | None = None
    behaviour_logprobs: Tensor | None = None
    is_weights: Tensor | None = None
    clip_low: float = _ALG.clip_low
    clip_high: float = _ALG.clip_high
    dual_clip: float | None = _ALG.dual_clip
    agg: str = _ALG.loss_agg
    norm_len: float | None = _ALG.loss_norm_len

    def __post_init__(self) -> None:
        shape = self.logprobs.shape
        for name in ("advantages", "mask", "old_logprobs", "behaviour_logprobs", "is_weights"):
            value = getattr(self, name)
            if value is not None and value.shape != shape:
                raise ValueError(
                    f"PolicyLossInputs.{name} is {list(value.shape)}, "
                    f"not logprobs' [B, T] = {list(shape)}"
                )
        if self.dual_clip is not None and self.dual_clip <= 1.0:
            raise ValueError(f"dual_clip must be > 1, got {self.dual_clip}")

    def old(self) -> Tensor:
        """`pi_old`'s log-probs, detached: `old_logprobs`, or on-policy `logprobs` itself."""
        anchor = self.logprobs if self.old_logprobs is None else self.old_logprobs
        return anchor.detach()

    def sampler(self) -> Tensor:
        """The sampler's log-probs, detached: `behaviour_logprobs`, else `pi_old` (`old`)."""
        if self.behaviour_logprobs is None:
            return self.old()
        return self.behaviour_logprobs.detach()
