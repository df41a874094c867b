"""`warmup:` of an agentic recipe: behaviour cloning of a scripted policy before RL.

`roll train` then plays `episodes` episodes of `policy` on training seeds (as `roll data
episodes` writes them), trains the recipe's model on them with the sft pipeline for `steps`
steps, and starts RL from that model; see `rollcli/launch/warmup.py`.
"""

from __future__ import annotations

from typing import Literal, get_args

from rollcli.config.sections import PositiveFloat, PositiveInt, Section

Policy = Literal["expert", "random"]  # the env's solver, or random legal moves
POLICIES: tuple[str, ...] = get_args(Policy)


class WarmupConfig(Section):
    """SFT on scripted episodes inside an agentic run (its `warmup/` sub-run)."""

    policy: Policy = "expert"
    episodes: PositiveInt = 800  # played on training seeds 0 .. episodes - 1
    val_episodes: PositiveInt = 32  # of those, held out for the warm-up's validation loss
    steps: PositiveInt = 16  # sft optimizer steps
    batch_size: PositiveInt = 16  # conversations per step
    lr: PositiveFloat = 5.0e-5
    # packed rows per forward / backward, at most `train.micro_batch_tokens` tokens in all
    micro_batch_size: PositiveInt = 4
