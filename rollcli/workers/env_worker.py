"""env: a worker that hosts many environment instances and steps them on request.

The driver sends a batch of `(slot, seed)` resets or `{slot: reply}` steps and gets one
result dict per slot back: the observation, reward, termination, the env's `info`, a key of
the state (identical states have equal keys: GiGPO groups by them), the legal actions (for
the random baseline) and `error`. An exception inside an environment ends that episode
with the error kept; it never takes the worker, or the run, down.

`env` is a registered name (`rollcli.envs.registry`) or a `"package.module:factory"`.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Any

from rollcli.envs.registry import build_env

# info values kept in results (and samples files): plain JSON scalars only
_SCALARS = (str, int, float, bool, type(None))
_SEARCH_PLACEHOLDER = "search[<keywords>]"


def system_prompt(env: Any) -> str:
    """The rules, symbols and answer format the env describes for the model."""
    return str(getattr(env, "instructions", "") or "")


def env_tools(env: Any) -> list[dict[str, Any]]:
    """The JSON schemas of the tools the env offers (a tool env's `tool_schemas`), for the
    chat template; none for other envs."""
    return list(getattr(env, "tool_schemas", None) or [])


@dataclass(frozen=True)
class EnvArgs:
    """`env`: a registered name or `"package.module:factory"`; `env_kwargs`: the env's own
    keyword arguments (the recipe's `agentic.env_kwargs`, validation's variant of them:
    `rollout/agentic_setup.py`)."""

    env: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)


class EnvWorker:
    def __init__(self, args: EnvArgs) -> None:
        self.env_name = args.env
        self.env_kwargs = dict(args.env_kwargs)
        self.envs: dict[int, Any] = {}
        self.probe = build_env(args.env, self.env_kwargs)  # fails here on bad kwargs, not mid-run

    def instructions(self) -> str:
        return system_prompt(self.probe)

    def tools(self) -> list[dict[str, Any]]:
        return env_tools(self.probe)

    def reset(self, items: list[tuple[int, int]]) -> dict[int, dict[str, Any]]:
        """Start an episode in each `slot` with its `seed` (a fresh env instance per slot)."""
        out = {}
        for slot, seed in items:
            try:
                env = build_env(self.env_name, self.env_kwargs)
                self.envs[slot] = env
                obs, info = env.reset(seed=int(seed))
                out[slot] = self._result(env, obs, info)
            except Exception as exc:  # noqa: BLE001 - contained: the episode ends
                self.envs.pop(slot, None)
                out[slot] = {"observation": "", "error": _describe(exc), "terminated": True}
        return out

    def step(self, replies: dict[int, str]) -> dict[int, dict[str, Any]]:
        """Step each slot's env with the model's reply text."""
        out = {}
        for slot, text in replies.items():
            env = self.envs.get(slot)
            try:
                if env is None:
                    raise RuntimeError(f"slot {slot} has no running episode")
                obs, reward, terminated, truncated, info = env.step(text)
                res = self._result(env, obs, info)
                res.update(reward=float(reward), terminated=bool(terminated))
                res["truncated"] = bool(truncated)
            except Exception as exc:  # noqa: BLE001 - contained: the episode ends
                res = {"observation": "", "reward": 0.0, "info": {}, "error": _describe(exc)}
                res["terminated"] = True
            if res.get("terminated") or res.get("truncated"):
                self.envs.pop(slot, None)
            out[slot] = res
        return out

    def release(self, slots: list[int]) -> None:
        """Drop the envs of `slots` (episodes the driver ended early)."""
        for slot in slots:
            self.envs.pop(slot, None)

    def _result(self, env: Any, obs: Any, info: dict[str, Any]) -> dict[str, Any]:
        return {
            "observation": str(obs),
            "info": {k: v for k, v in info.items() if isinstance(v, _SCALARS)},
            "state_key": str(env.get_state_key()) if hasattr(env, "get_state_key") else str(obs),
            "actions": _legal_actions(env, info),
            "error": None,
        }


def _legal_actions(env: Any, info: dict[str, Any]) -> list[str]:
    """Actions a random agent may take here; a search box gets the instruction's words."""
    actions = list(info.get("available_actions") or getattr(env, "action_names", []) or [])
    if _SEARCH_PLACEHOLDER in actions:
        from rollcli.envs.webshop.oracle import search_query

        goal = getattr(env, "goal", None)
        query = search_query(goal.instruction) if goal is not None else "item"
        actions = [f"search[{query}]" if a == _SEARCH_PLACEHOLDER else a for a in actions]
    return actions


def _describe(exc: BaseException) -> str:
    last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    where = f" at {last[0].filename.rsplit('/', 1)[-1]}:{last[0].lineno}" if last else ""
    return f"{type(exc).__name__}: {exc}{where}"
