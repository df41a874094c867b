"""`warmup:` of an agentic recipe: behaviour cloning of a scripted policy before RL.

`roll train` then plays `episodes` episodes of `policy` on training seeds (as `roll data
episodes` writes them), or reads your own conversations from `data` (a jsonl of `messages`
in the RL chat format, e.g. what `roll data episodes` writes), trains the recipe's model on
them with the sft pipeline for `steps` steps, and starts RL from that model; see
`rollcli/launch/warmup.py`. `warmup: null` (or `warmup.steps=0`) is RL from the model as it
is; `--model RUN_ID` starts from another run's checkpoint (docs/agentic.md).
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import model_validator

from rollcli.config.sections import PositiveFloat, PositiveInt, Section

Policy = Literal["expert", "random"]  # the env's solver, or random legal moves
POLICIES: tuple[str, ...] = get_args(Policy)


class WarmupConfig(Section):
    """SFT on scripted episodes inside an agentic run (its `warmup/` sub-run)."""

    policy: Policy = "expert"
    episodes: PositiveInt = 800  # played on training seeds 0 .. episodes - 1
    # your own warm-up conversations instead of playing `policy` (then `episodes` and
    # `policy` do not apply)
    data: str | None = None
    val_episodes: PositiveInt = 32  # of those, held out for the warm-up's validation loss
    steps: PositiveInt = 16  # sft optimizer steps
    batch_size: PositiveInt = 16  # conversations per step
    lr: PositiveFloat = 5.0e-5
    # packed rows per forward / backward, at most `train.micro_batch_tokens` tokens in all
    micro_batch_size: PositiveInt = 4

    @model_validator(mode="after")
    def _data_or_played(self) -> WarmupConfig:
        if self.data is None:
            return self
        fields = type(self).model_fields
        for key in ("policy", "episodes"):
            if getattr(self, key) != fields[key].default:
                raise ValueError(
                    f"warmup.{key} chooses the episodes the warm-up plays, and warmup.data "
                    f"names your own; set one of them (remove warmup.{key})"
                )
        return self
