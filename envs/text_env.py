"""`TextEnv`: the `reset/step` plumbing shared by text environments with a fixed action set.

A subclass describes its game (how to start an episode, what an action does); this base
class parses the model's reply into an action, applies the format penalty to replies that
do not parse, counts steps against `max_steps`, and builds the `info` dict that every
environment returns:

=====================  =========================================================
``action``             the parsed action name, or None
``action_is_valid``    the reply parsed to a legal action
``action_is_effective``  the action changed the state
``success``            the task is solved
``format_penalty``     the penalty included in this step's reward (0.0 if valid)
``parse_reason``       "ok", or why the reply did not parse
``steps``              steps taken in this episode
=====================  =========================================================

An invalid reply leaves the state unchanged but still counts as a step, so every episode
ends within `max_steps`; its reward is the subclass's ``idle_reward`` (the reward of a step
that changes nothing, e.g. Sokoban's step penalty) plus ``format_penalty``.

Instances are not shared between threads: build one environment per worker or per episode.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium
from gymnasium import spaces

from rollcli.envs.action_parsing import DEFAULT_ANSWER_PATTERN, parse_action

# Replies longer than this are still parsed; the bound only describes the action space.
MAX_REPLY_CHARS = 100_000


@dataclass(frozen=True)
class Transition:
    """What a legal action did: returned by `TextEnv._apply`."""

    reward: float
    effective: bool
    terminated: bool
    success: bool
    extra: dict[str, Any] = field(default_factory=dict)


class TextEnv(gymnasium.Env):
    """Base class: text observations, text actions, a fixed list of action names.

    Subclasses set `action_names`, implement `instructions`, `render_text`, `_start`
    (begin an episode) and `_apply` (perform one legal action), and may override
    `get_state_key`, `idle_reward` and `_extra_info`.
    """

    metadata = {"render_modes": ["ansi"]}
    action_names: list[str] = []

    def __init__(
        self,
        *,
        max_steps: int,
        format_penalty: float = -0.1,
        answer_pattern: str | None = DEFAULT_ANSWER_PATTERN,
        render_mode: str | None = "ansi",
    ) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {max_steps}")
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be 'ansi' or None, got {render_mode!r}")
        self.max_steps = int(max_steps)
        self.format_penalty = float(format_penalty)
        self.answer_pattern = answer_pattern
        self.render_mode = render_mode
        self.action_space = spaces.Text(MAX_REPLY_CHARS, min_length=0)
        self._steps = 0
        self._active = False

    # ----- to be provided by subclasses -------------------------------------------------
    @property
    def instructions(self) -> str:
        """The rules, the symbols and the answer format, for the model's system prompt."""
        raise NotImplementedError

    def render_text(self) -> str:
        """The current state as text (the observation)."""
        raise NotImplementedError

    def _start(self, options: dict[str, Any]) -> None:
        """Begin a new episode; draw any randomness from `self.np_random`."""
        raise NotImplementedError

    def _apply(self, action: str) -> Transition:
        """Perform the legal action `action` and describe what happened."""
        raise NotImplementedError

    @property
    def idle_reward(self) -> float:
        """The reward of a step that changes nothing (before any format penalty)."""
        return 0.0

    def _extra_info(self) -> dict[str, Any]:
        """Game-specific entries added to every `info` dict."""
        return {}

    # ----- the gymnasium API ------------------------------------------------------------
    def get_state_key(self) -> str:
        """A hashable rendering of the state: equal keys mean identical states (GiGPO)."""
        return self.render_text()

    def render(self) -> str | None:  # type: ignore[override]
        return self.render_text() if self.render_mode == "ansi" else None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._steps = 0
        self._start(dict(options or {}))
        self._active = True
        info = reset_info(**self._extra_info())
        return self.render_text(), info

    def step(self, action_text: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if not self._active:
            raise RuntimeError("call reset() before step(), and again after an episode ends")
        parsed = parse_action(action_text, self.action_names, self.answer_pattern)
        self._steps += 1
        if parsed.valid and parsed.action is not None:
            outcome = self._apply(parsed.action)
            penalty = 0.0
        else:
            outcome = Transition(self.idle_reward, effective=False, terminated=False, success=False)
            penalty = self.format_penalty
        truncated = not outcome.terminated and self._steps >= self.max_steps
        self._active = not (outcome.terminated or truncated)
        info = {
            "action": parsed.action,
            "action_is_valid": parsed.valid,
            "action_is_effective": outcome.effective,
            "success": outcome.success,
            "format_penalty": penalty,
            "parse_reason": parsed.reason,
            "steps": self._steps,
            **self._extra_info(),
            **outcome.extra,
        }
        reward = float(outcome.reward + penalty)
        return self.render_text(), reward, outcome.terminated, truncated, info


def reset_info(**extra: Any) -> dict[str, Any]:
    """The `info` every text env returns from `reset`: no action taken yet, plus `extra`."""
    return {
        "action": None,
        "action_is_valid": True,
        "action_is_effective": False,
        "success": False,
        "format_penalty": 0.0,
        "parse_reason": "",
        "steps": 0,
        **extra,
    }
