"""The RL algorithm catalogue: pure functions of tensors and a mask.

Import from the module that holds each concept (nothing is re-exported here, so that a
function never shadows the module of the same name, as `value_loss` would). The named
presets (`PRESETS`, `resolve_algorithm`) are recipe defaults: `rollcli.config.presets`.

| module | holds |
| --- | --- |
| `masked` | `masked_sum`, `masked_mean`, `masked_var`, `masked_whiten` |
| `aggregation` | `aggregate_loss`, `LOSS_AGG_MODES` |
| `returns` | `gae`, `reinforce_return` |
| `group` | `grpo_advantages`, `rloo_advantages`, `normalize_scores` |
| `reinforce_pp` | `reinforce_pp_advantages`, `reinforce_pp_baseline_advantages` |
| `token_rewards` | `broadcast_to_tokens`, `token_rewards_from_scores` |
| `normalization` | `RunningMeanStd`, `clip_abs` |
| `advantages` | `compute_advantages`, `ADVANTAGE_ESTIMATORS` |
| `loss_inputs` | `PolicyLossInputs`: what every policy loss takes |
| `policy_loss` | `compute_policy_loss`, `POLICY_LOSSES` and the losses |
| `kl` | `kl_estimate`, `kl_loss`, `FixedKLController`, `AdaptiveKLController` |
| `value_loss` | `value_loss` |
| `entropy` | `entropy_from_logits`, `logprobs_from_logits` |
| `dapo` | `overlong_penalty`, `truncation_mask`, `groups_with_variance` |
| `off_policy` | `correction_weights` (TIS, MIS, IcePop), `mismatch_metrics` |
| `update_args` | `PolicyUpdateArgs`: the actor update's and the objective's arguments |
| `objective` | `rl_loss`, `rl_normalisers`: the RL objective of one policy step |
| `loss_metrics` | `metric_weights`, `Extreme`: how a loss reports its metrics |
"""
