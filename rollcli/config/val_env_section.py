"""`agentic.val_env`: a second environment that validation also plays (cross-env transfer).

The ROLL paper trains on FrozenLake and validates on Sokoban too, and trains on SimpleSokoban
and validates on the larger and re-symbolled rooms: whether what a policy learned carries over
to an env it never trained on. A run with `val_env` validates on its training env as always
(`val/*`, the run's `val/accuracy`) and then on the second env, whose metrics carry its name:
`val/<name>/success_rate`, `val/<name>/accuracy` (= its success rate), ... (`roll logs` shows
`val <name>` beside `val acc`; `roll plot` draws it in the validation panel).

    agentic:
      env: frozenlake
      val_env:
        env: sokoban                       # any registered env
        env_kwargs: {dim_room: [6, 6], num_boxes: 1}
        episodes: 64                       # default: agentic.val_episodes
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, model_validator

from rollcli.config.sections import PositiveInt, Section

# metric names under `val/` that a val_env name would shadow
_TAKEN = ("tool_error", "accuracy", "n")
_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")


class ValEnvConfig(Section):
    """The second validation env: a registered env, its keyword arguments (on their own, not
    over `agentic.env_kwargs`: they are another env's), its episode count and the name its
    metrics carry (default: the env's)."""

    env: str
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    episodes: PositiveInt | None = None  # None: agentic.val_episodes
    name: str | None = None  # None: `env`

    @property
    def label(self) -> str:
        """The name in its metric keys, `val/<label>/...`."""
        return self.name or self.env

    @model_validator(mode="after")
    def _named(self) -> ValEnvConfig:
        """The metric name (whether `env` is registered is checked before anything starts,
        rollcli/launch/plugin_check.py)."""
        if not _NAME.match(self.label) or self.label in _TAKEN:
            raise ValueError(
                f"agentic.val_env.name = {self.label!r} cannot name metrics `val/<name>/...`: "
                f"use lower-case letters, digits, '-' or '_', not {', '.join(_TAKEN)}"
            )
        return self
