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
``shaping``            the progress-shaping term included in this step's reward
``no_effect_penalty``  the penalty included for a legal move that changed nothing
=====================  =========================================================

An invalid reply leaves the state unchanged but still counts as a step, so every episode
ends within `max_steps`; its reward is the subclass's ``idle_reward`` (the reward of a step
that changes nothing, e.g. Sokoban's step penalty) plus ``format_penalty``.

Options that make an environment teach (all off by default):

- ``shaping="progress"``: potential-based shaping (Ng, Harada & Russell 1999). Every step,
  including an invalid reply, adds ``F = gamma * phi(s') - phi(s)`` to the reward, where
  `potential` is the subclass's progress measure and ``phi(s') = 0`` when `s'` ends the
  episode (terminal states have potential 0, the convention that keeps the optimal policy
  unchanged). Over an episode the discounted sum of the terms telescopes to
  ``gamma**T * phi(s_T) - phi(s_0)``: a constant for a given start (which a group baseline
  cancels) plus the potential of where a truncated episode stopped.
- ``no_effect_feedback=True``: a legal move that changed nothing (into a wall, a box
  against a wall, off the edge) starts the next observation with a line saying so and why.
- ``no_effect_penalty``: reward added to such a move (0, none, by default).
- ``layouts="train"`` / ``"validation"``: draw only layouts of that split (see
  `rollcli.envs.layout_split`), so validation maps never occur in training. A fixed layout
  (a subclass's `layout_key` returns None) is used as given.

Instances are not shared between threads: build one environment per worker or per episode.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium
from gymnasium import spaces

from rollcli.envs.action_parsing import DEFAULT_ANSWER_PATTERN, parse_action
from rollcli.envs.layout_split import LAYOUTS, MAX_DRAWS, layout_split

# Replies longer than this are still parsed; the bound only describes the action space.
MAX_REPLY_CHARS = 100_000
SHAPINGS = ("none", "progress")


@dataclass(frozen=True)
class Transition:
    """What a legal action did: returned by `TextEnv._apply`."""

    reward: float
    effective: bool
    terminated: bool
    success: bool
    extra: dict[str, Any] = field(default_factory=dict)
    note: str = ""  # why an action without effect changed nothing, e.g. "there is a wall"


class TextEnv(gymnasium.Env):
    """Base class: text observations, text actions, a fixed list of action names.

    Subclasses set `action_names`, implement `instructions`, `render_text`, `_start`
    (begin an episode) and `_apply` (perform one legal action), and may override
    `get_state_key`, `idle_reward`, `_extra_info`, `potential` (for shaping) and
    `layout_key` (for split layouts).

    Args:
        max_steps: steps before the episode is truncated.
        format_penalty: reward added for a reply that does not parse to an action.
        answer_pattern: regex locating the answer in a reply (see `parse_action`).
        render_mode: ``"ansi"`` (`render` returns the text) or None.
        shaping, shaping_gamma, no_effect_feedback, no_effect_penalty, layouts: the
            teaching options in this module's docstring.

    These options, with their defaults, are written here only: a subclass's ``__init__``
    names its own arguments, takes ``**options`` and forwards them with
    ``super().__init__(**options)``; its published signature (what `inspect.signature`, and
    so `rollcli.rollout.agentic_setup.env_parameters`, reads to know which `env_kwargs` an env
    takes) then names every option (`with_text_env_options`). A subclass may instead name
    each option itself and forward them with ``super().__init__(**text_env_options(locals()))``.
    """

    metadata = {"render_modes": ["ansi"]}
    action_names: list[str] = []

    def __init__(
        self,
        *,
        max_steps: int = 100,
        format_penalty: float = -0.1,
        answer_pattern: str | None = DEFAULT_ANSWER_PATTERN,
        render_mode: str | None = "ansi",
        shaping: str = "none",
        shaping_gamma: float = 1.0,
        no_effect_feedback: bool = False,
        no_effect_penalty: float = 0.0,
        layouts: str = "all",
    ) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {max_steps}")
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be 'ansi' or None, got {render_mode!r}")
        if shaping not in SHAPINGS:
            raise ValueError(f"shaping must be one of {', '.join(SHAPINGS)}, got {shaping!r}")
        if shaping != "none" and type(self).potential is TextEnv.potential:
            raise ValueError(f"shaping={shaping!r}: {type(self).__name__} defines no potential")
        if not 0.0 <= shaping_gamma <= 1.0:
            raise ValueError(f"shaping_gamma must be in [0, 1], got {shaping_gamma}")
        checked_no_effect_penalty(no_effect_penalty)
        if layouts not in LAYOUTS:
            raise ValueError(f"layouts must be one of {', '.join(LAYOUTS)}, got {layouts!r}")
        if layouts != "all" and type(self).layout_key is TextEnv.layout_key:
            raise ValueError(f"layouts={layouts!r}: {type(self).__name__} cannot split layouts")
        self.shaping = shaping
        self.shaping_gamma = float(shaping_gamma)
        self.no_effect_feedback = bool(no_effect_feedback)
        self.no_effect_penalty = checked_no_effect_penalty(no_effect_penalty)
        self.layouts = layouts
        self.max_steps = int(max_steps)
        self.format_penalty = float(format_penalty)
        self.answer_pattern = answer_pattern
        self.render_mode = render_mode
        self.action_space = spaces.Text(MAX_REPLY_CHARS, min_length=0)
        self._steps = 0
        self._active = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is not None:
            init.__signature__ = with_text_env_options(inspect.signature(init))

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

    def potential(self) -> float:
        """Progress of the current state for ``shaping="progress"`` (higher is closer to
        solved; 0 at the goal)."""
        raise NotImplementedError

    def layout_key(self) -> str | None:
        """Text identifying the episode's start layout (None: a fixed layout, not split)."""
        return None

    # ----- the gymnasium API ------------------------------------------------------------
    def get_state_key(self) -> str:
        """A hashable rendering of the state: equal keys mean identical states (GiGPO)."""
        return self.render_text()

    def render(self) -> str | None:
        return self.render_text() if self.render_mode == "ansi" else None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._steps = 0
        self._start(dict(options or {}))
        if self.layouts != "all":
            self._draw_split_layout(dict(options or {}))
        self._active = True
        info = reset_info(**self._extra_info())
        return self.render_text(), info

    def step(self, action_text: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if not self._active:
            raise RuntimeError("call reset() before step(), and again after an episode ends")
        parsed = parse_action(action_text, self.action_names, self.answer_pattern)
        self._steps += 1
        shaped = self.shaping != "none"
        potential_before = self.potential() if shaped else 0.0
        if parsed.valid and parsed.action is not None:
            outcome = self._apply(parsed.action)
            penalty = 0.0
        else:
            outcome = Transition(self.idle_reward, effective=False, terminated=False, success=False)
            penalty = self.format_penalty
        idle_move = parsed.valid and not outcome.effective
        no_effect = self.no_effect_penalty if idle_move else 0.0
        shaping = 0.0
        if shaped:  # terminal states have potential 0
            after = 0.0 if outcome.terminated else self.potential()
            shaping = self.shaping_gamma * after - potential_before
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
            "shaping": shaping,
            "no_effect_penalty": no_effect,
            **self._extra_info(),
            **outcome.extra,
        }
        reward = float(outcome.reward + penalty + no_effect + shaping)
        obs = self.render_text()
        if self.no_effect_feedback and idle_move and outcome.note:
            obs = f"{outcome.note}\n{obs}"
        return obs, reward, outcome.terminated, truncated, info

    def _draw_split_layout(self, options: dict[str, Any]) -> None:
        """Draw layouts until one of `self.layouts`'s split comes up."""
        for _ in range(MAX_DRAWS):
            key = self.layout_key()
            if key is None or layout_split(key) == self.layouts:
                return
            self._start(options)
        raise RuntimeError(
            f"no {self.layouts} layout in {MAX_DRAWS} draws: this map family has too few "
            "distinct layouts to split; use a larger map or layouts='all'"
        )


# What every text env takes (the keyword arguments of `TextEnv.__init__`), in its order.
TEXT_ENV_OPTIONS: tuple[str, ...] = tuple(inspect.signature(TextEnv.__init__).parameters)[1:]


def with_text_env_options(signature: inspect.Signature) -> inspect.Signature:
    """`signature` (a subclass's ``__init__``) with its ``**options`` replaced by `TextEnv`'s
    options, keyword-only with their defaults; unchanged if it takes no ``**`` argument."""
    params = list(signature.parameters.values())
    if not params or params[-1].kind is not inspect.Parameter.VAR_KEYWORD:
        return signature
    named = {p.name for p in params}
    options = inspect.signature(TextEnv.__init__).parameters.values()
    return signature.replace(parameters=params[:-1] + [p for p in options if p.name not in named])


def text_env_options(values: Mapping[str, Any]) -> dict[str, Any]:
    """`TextEnv`'s options picked from a subclass's ``locals()`` at the top of its
    ``__init__``, for ``super().__init__(**text_env_options(locals()))``. A subclass still
    names each option in its own signature: that signature is how roll knows which
    `env_kwargs` an env takes (`rollcli.rollout.agentic_setup.env_parameters`)."""
    missing = [name for name in TEXT_ENV_OPTIONS if name not in values]
    if missing:
        raise TypeError(
            f"a TextEnv subclass must take every TextEnv option; {missing[0]!r} is missing"
        )
    return {name: values[name] for name in TEXT_ENV_OPTIONS}


def checked_no_effect_penalty(penalty: float) -> float:
    """`penalty` as a float; a positive one (a reward for doing nothing) is refused."""
    if penalty > 0:
        raise ValueError(f"no_effect_penalty must be 0 or negative, got {penalty}")
    return float(penalty)


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
        "shaping": 0.0,
        "no_effect_penalty": 0.0,
        **extra,
    }
