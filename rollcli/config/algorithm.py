"""`algorithm:` section of a recipe: every RL-algorithm knob, typed and frozen.

The recipe names a preset (`algorithm.name`, see `rollcli.config.presets`) and may
override any knob; `resolve_algorithm` merges the two and validates them here. This
module imports only pydantic and the loss and precision tables (`loss_spec.py`,
`precision_spec.py`), so the CLI can validate a recipe without torch.
The formulas behind each knob are in `docs/algorithms.md`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rollcli.config.loss_spec import LOSSES, PolicyLossName, losses_where
from rollcli.config.precision_spec import PRECISIONS
from rollcli.models.replay_modes import RouterReplay

PresetName = Literal[
    "ppo",
    "grpo",
    "drgrpo",
    "dapo",
    "rloo",
    "reinforce_pp",
    "reinforce_pp_baseline",
    "gspo",
    "topr",
    "raftpp",
    "reinforce",
]
AdvantageName = Literal["gae", "reinforce", "grpo", "rloo", "reinforce_pp", "reinforce_pp_baseline"]
LossAggMode = Literal[
    "token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"
]
NormMode = Literal["group", "batch", "running", "none"]
KLEstimator = Literal["k1", "k2", "k3", "abs"]
CorrectionName = Literal["auto", "none", "tis", "mis", "icepop"]
# the adaptive KL controller's target is a mean KL per response token; above this it is a
# per-sequence figure (Ziegler et al. 2019 and TRL sum a response: 6 nats) and is refused
KL_TARGET_PER_TOKEN_MAX = 1.0
# `kl_target`'s default before it was per token: every run saved then writes it
OLD_KL_TARGET_DEFAULT = 6.0


class OffPolicyConfig(BaseModel):
    """`algorithm.off_policy`: correcting the policy loss for the sampler `mu` differing from
    the trainer's `pi_old` (formulas and papers: `rollcli.algorithms.off_policy`). `band` also
    sets which ratios `rollout/mismatch_outside_band` counts, whatever the correction."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    correction: CorrectionName = Field(
        "auto",
        description="auto (tis for a bf16 / int8 / fp8 rollout with ppo, gspo or raftpp; "
        "else none) | none | tis | mis | icepop (tis not with topr)",
    )
    level: Literal["token", "sequence"] = Field("token", description="tis and mis: ratio per")
    cap: float = Field(2.0, gt=0.0, description="tis: truncate at; mis: drop above")
    band: tuple[float, float] = Field((0.5, 2.0), description="icepop: keep ratios within")

    @model_validator(mode="after")
    def _check(self) -> OffPolicyConfig:
        low, high = self.band
        if not 0 < low <= 1 <= high:
            raise ValueError(f"band = {list(self.band)} must satisfy 0 < low <= 1 <= high")
        fields = OffPolicyConfig.model_fields
        if self.correction == "auto" and (
            self.cap != fields["cap"].default or self.level != fields["level"].default
        ):
            raise ValueError(
                "cap and level set the correction tis or mis, and correction: auto picks one "
                "only for a low-precision rollout; name it, e.g. correction: tis"
            )
        if self.cap != fields["cap"].default and self.correction not in ("tis", "mis"):
            raise ValueError(
                f"cap applies to correction tis or mis, not {self.correction!r}; remove cap"
                + (" (icepop keeps ratios within band)" if self.correction == "icepop" else "")
            )
        if self.level != "token" and self.correction not in ("tis", "mis"):
            raise ValueError(
                f"level: {self.level} applies to correction tis or mis, not "
                f"{self.correction!r}; remove level"
            )
        return self

    def unread_knobs(self) -> set[str]:
        """`cap` and `level` tune tis and mis (which `auto` may pick); `band` is always read.

        >>> sorted(OffPolicyConfig(correction="icepop").unread_knobs())
        ['cap', 'level']
        """
        return set() if self.correction in ("auto", "tis", "mis") else {"cap", "level"}


class AlgorithmConfig(BaseModel):
    """The RL algorithm of a run. Field defaults are the `grpo` preset."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: PresetName = Field("grpo", description="preset the other defaults came from")

    # Advantage estimation.
    advantage: AdvantageName = Field("grpo", description="advantage estimator")
    gamma: float = Field(1.0, ge=0.0, le=1.0, description="discount factor")
    lam: float = Field(1.0, ge=0.0, le=1.0, description="GAE lambda")
    norm_std: bool = Field(True, description="divide group-centred scores by the group std")
    norm_mode: NormMode = Field("none", description="score normalisation before the estimator")
    reward_clip: float | None = Field(None, gt=0, description="clamp scores to [-c, c]")
    advantage_clip: float | None = Field(None, gt=0, description="clamp advantages to [-c, c]")
    whiten_advantages: bool = Field(False, description="whiten advantages over the batch")

    # Policy loss.
    policy_loss: PolicyLossName = Field("ppo", description="policy-gradient loss")
    clip_low: float = Field(0.2, gt=0.0, lt=1.0, description="ratio clip below: 1 - clip_low")
    clip_high: float = Field(0.2, gt=0.0, description="ratio clip above: 1 + clip_high")
    dual_clip: float | None = Field(None, gt=1.0, description="dual-clip bound c > 1")
    loss_agg: LossAggMode = Field("seq-mean-token-mean", description="loss aggregation")
    loss_norm_len: int | None = Field(
        None, gt=0, description="constant divisor of seq-mean-token-sum-norm (None = T)"
    )
    entropy_coef: float = Field(0.0, ge=0.0, description="entropy bonus weight")
    value_clip: float | None = Field(None, gt=0, description="critic value clip (gae only)")
    ppo_epochs: int = Field(1, ge=1, description="passes over each batch")

    # KL to the reference policy.
    kl_coef: float = Field(0.001, ge=0.0, description="KL weight (0 = no reference model)")
    kl_estimator: KLEstimator = Field("k3", description="per-token KL estimator")
    kl_in: Literal["reward", "loss"] = Field("loss", description="where the KL penalty goes")
    kl_controller: Literal["fixed", "adaptive"] = Field("fixed", description="KL coef schedule")
    kl_target: float = Field(
        0.1,
        gt=0.0,
        description="adaptive controller target: the mean KL per response token (nats; "
        "verl's 0.1), not per sequence",
    )
    kl_horizon: float = Field(10000.0, gt=0.0, description="adaptive controller horizon")

    # Sampling and length shaping (DAPO) and off-policy correction.
    dynamic_sampling: bool = Field(False, description="drop zero-variance groups, top up")
    max_resample_rounds: int = Field(3, ge=0, description="top-up rounds per step")
    overlong_buffer: float = Field(
        0.0, ge=0.0, lt=1.0, description="soft overlong buffer, fraction of max length; 0 = off"
    )
    overlong_penalty: float = Field(1.0, ge=0.0, description="penalty at the length limit")
    mask_truncated: bool = Field(False, description="drop truncated samples from the loss")
    off_policy: OffPolicyConfig = Field(
        default_factory=OffPolicyConfig, description="sampler-vs-trainer correction"
    )

    # Mixture-of-experts models (docs/moe.md).
    router_replay: RouterReplay = Field(
        "off",
        description="MoE routing replay: R3 the sampler's experts, R2 the old policy's",
    )

    moe_aux_coef: float | None = Field(
        None,
        ge=0.0,
        description="MoE load-balancing loss weight (None: the model's router_aux_loss_coef)",
    )
    moe_z_coef: float = Field(0.0, ge=0.0, description="MoE router z-loss weight (0 = off)")

    @field_validator("router_replay", mode="before")
    @classmethod
    def _off_from_yaml(cls, value: object) -> object:
        """YAML reads a bare `off` as false: `router_replay: off` means off."""
        return "off" if value is False else value

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: object) -> object:
        """`tis_cap` became `off_policy`. A run saved before writes `tis_cap: null` (off):
        it resumes with `off_policy: {correction: none}`; a cap is refused with its new
        spelling. `kl_target`'s default was 6.0 before it was stated per token: a run saved
        then with the fixed controller writes it unused, and it is dropped (with the
        adaptive controller it is kept, and refused below as a per-sequence figure)."""
        if (
            isinstance(data, dict)
            and data.get("kl_target") == OLD_KL_TARGET_DEFAULT
            and data.get("kl_controller", "fixed") == "fixed"
        ):
            data = {k: v for k, v in data.items() if k != "kl_target"}
        if isinstance(data, dict) and "tis_cap" in data and data["tis_cap"] is None:
            data = {k: v for k, v in data.items() if k != "tis_cap"}
            data.setdefault("off_policy", {"correction": "none"})
        if isinstance(data, dict) and "tis_cap" in data:
            cap = data["tis_cap"]
            raise ValueError(
                f"algorithm.tis_cap is now algorithm.off_policy: {{correction: tis, cap: {cap}}} "
                f"(override: algorithm.off_policy.correction=tis algorithm.off_policy.cap={cap})"
            )
        return data

    @model_validator(mode="after")
    def _check_combinations(self) -> AlgorithmConfig:
        loss = LOSSES[self.policy_loss]
        if self.dual_clip is not None and not loss.dual_clip:
            raise ValueError(
                f"dual_clip applies to policy_loss {' or '.join(losses_where(dual_clip=True))}, "
                f"not {self.policy_loss!r}"
            )
        if self.value_clip is not None and self.advantage != "gae":
            raise ValueError("value_clip needs a critic: set advantage: gae or drop value_clip")
        if self.lam != _default("lam") and self.advantage != "gae":
            raise ValueError(
                f"algorithm.lam = {self.lam} is GAE's lambda, and advantage "
                f"{self.advantage!r} has none; set advantage: gae or remove algorithm.lam"
            )
        if self.off_policy.correction in loss.refused:
            raise ValueError(loss.refused[self.off_policy.correction])
        if self.kl_in == "loss" and self.kl_estimator == "k1" and self.kl_coef > 0:
            raise ValueError(
                "algorithm.kl_estimator k1 with kl_in: loss has zero expected gradient "
                "(E[grad log pi] = 0); use kl_estimator k3 (unbiased) or k2, or kl_in: reward"
            )
        if self.kl_controller == "adaptive" and self.kl_coef == 0:
            raise ValueError("kl_controller: adaptive needs kl_coef > 0 as its starting value")
        if self.kl_controller == "adaptive" and self.kl_in == "loss":
            raise ValueError(
                "algorithm.kl_controller = adaptive sets the coefficient of a KL in the reward; "
                "with kl_in: loss it would stay algorithm.kl_coef, so set kl_in: reward or "
                "remove it"
            )
        if self.kl_controller == "adaptive" and self.kl_target > KL_TARGET_PER_TOKEN_MAX:
            raise ValueError(
                f"algorithm.kl_target = {self.kl_target} nats is a per-sequence figure (Ziegler "
                "et al., TRL); the adaptive controller targets the mean KL per response token: "
                "divide by the response length, e.g. 0.1 (verl's)"
            )
        if self.kl_controller == "fixed" and (
            self.kl_target != _default("kl_target") or self.kl_horizon != _default("kl_horizon")
        ):
            raise ValueError(
                "algorithm.kl_target / kl_horizon tune kl_controller: adaptive, and this "
                "recipe's controller is fixed; set kl_controller: adaptive or remove them"
            )
        if not self.dynamic_sampling and self.max_resample_rounds != _default(
            "max_resample_rounds"
        ):
            raise ValueError(
                "algorithm.max_resample_rounds tunes dynamic sampling, which is off; set "
                "algorithm.dynamic_sampling: true or remove algorithm.max_resample_rounds"
            )
        if self.overlong_buffer == 0 and self.overlong_penalty != _default("overlong_penalty"):
            raise ValueError(
                f"algorithm.overlong_penalty = {self.overlong_penalty} applies within "
                "algorithm.overlong_buffer, which is 0 (off); set overlong_buffer > 0 or remove "
                "algorithm.overlong_penalty"
            )
        return self

    @property
    def needs_critic(self) -> bool:
        """A value model is trained only for GAE."""
        return self.advantage == "gae"

    def unread_knobs(self) -> set[str]:
        """The knobs this algorithm does not read (`READ_WHEN`): left out of the recipe
        `roll train --dry-run` prints.

        >>> sorted(AlgorithmConfig(policy_loss="pg", kl_coef=0.0).unread_knobs())[:4]
        ['clip_high', 'clip_low', 'dual_clip', 'kl_controller']
        """
        return {knob for knob, reads in READ_WHEN.items() if not reads(self)}

    @property
    def kl_in_reward(self) -> bool:
        """The KL penalty is taken from the reward (`kl_in: reward`), not added to the loss."""
        return self.kl_in == "reward"

    @property
    def needs_reference(self) -> bool:
        """A reference model forward pass is needed only for a KL penalty."""
        return self.kl_coef > 0


# The knobs a run reads only where another knob chose what they tune (every other knob is
# always read): `unread_knobs`. `_check_combinations` refuses most of them set away from
# their default where unread (lam, value_clip, dual_clip, kl_target, kl_horizon,
# max_resample_rounds, overlong_penalty); a preset's KL settings stay when a recipe sets
# kl_coef: 0.
READ_WHEN: dict[str, Callable[[AlgorithmConfig], bool]] = {
    "lam": lambda a: a.advantage == "gae",
    "value_clip": lambda a: a.advantage == "gae",
    "clip_low": lambda a: LOSSES[a.policy_loss].clipped,
    "clip_high": lambda a: LOSSES[a.policy_loss].clipped,
    "dual_clip": lambda a: LOSSES[a.policy_loss].dual_clip,
    "loss_norm_len": lambda a: a.loss_agg == "seq-mean-token-sum-norm",
    "kl_estimator": lambda a: a.kl_coef > 0,
    "kl_in": lambda a: a.kl_coef > 0,
    "kl_controller": lambda a: a.kl_coef > 0,
    "kl_target": lambda a: a.kl_controller == "adaptive",
    "kl_horizon": lambda a: a.kl_controller == "adaptive",
    "max_resample_rounds": lambda a: a.dynamic_sampling,
    "overlong_penalty": lambda a: a.overlong_buffer > 0,
}


def _default(key: str) -> object:
    """A knob's default: a knob left at it may sit beside a feature that is off."""
    return AlgorithmConfig.model_fields[key].default


def resolved_correction(algorithm: AlgorithmConfig, rollout_precision: str) -> str:
    """The off-policy correction a run applies: `algorithm.off_policy.correction`, with
    `auto` resolved: `tis` for a bf16 / int8 / fp8 rollout (on rlvr-math's learning suite,
    int8 rollout without a correction collapsed or damaged 2 seeds of 9, with `tis` none,
    docs/performance.md), else `none`. Not for pg and topr (`LossSpec.sampler_ratio`): beside
    ppo's clipped ratio to `pi_old` the weight `pi_old / mu` only covers the engine's small
    gap, while pg's weight is its whole ratio `pi_theta / mu` (another algorithm, off-policy
    REINFORCE: named, not picked) and topr already tapers `pi_theta / mu`.

    >>> alg = AlgorithmConfig()
    >>> resolved_correction(alg, "int8"), resolved_correction(alg, "fp32")
    ('tis', 'none')
    """
    chosen = algorithm.off_policy.correction
    if chosen != "auto":
        return chosen
    row = PRECISIONS.get(rollout_precision)  # None: auto
    low = row is not None and row.low
    if low and not LOSSES[algorithm.policy_loss].sampler_ratio:
        return "tis"
    return "none"
