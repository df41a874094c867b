"""One episode of a multi-turn agent, as the driver sees it while it plays.

The episode keeps its conversation as token ids (`prompt_ids`, then `response_ids`:
the model's replies and the environment's turns in between) with `loss_mask` 1 exactly on
the model's tokens, `turn_spans` (where each reply sits in `response_ids`), and per turn
the reward, the env's `info` and the state the reply acted on (GiGPO groups by it). The
readable transcript (`messages`) is what the run's samples files hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rollcli.rollout.chat_turns import TurnFormat


@dataclass(frozen=True)
class EpisodeSpec:
    index: int  # position in the step's list of episodes
    group: int  # episodes of a group share `seed`
    seed: int


@dataclass(frozen=True)
class Limits:
    max_turns: int
    max_context_tokens: int
    max_new_tokens: int  # of one reply


def user_turn(result: dict[str, Any]) -> str:
    """The user message for an env `result`: the last step's outcome (after the first
    turn), then the observation.

    >>> user_turn({"observation": "P_\\n_G"})
    'P_\\n_G'
    >>> user_turn({"observation": "P_", "reward": -0.1, "info": {"action_is_valid": False}})
    'Reward -0.1. Invalid reply, nothing happened.\\nP_'

    An env that names its observation's role (`observation_role`, a tool env) words the
    whole observation itself: a tool result is shown as it is.

    >>> user_turn({"observation": "42", "reward": 0.0, "info": {"observation_role": "tool"}})
    '42'
    """
    obs = str(result.get("observation", ""))
    info = result.get("info")
    if info is None or "reward" not in result or "observation_role" in info:
        return obs
    note = f"Reward {float(result['reward']):g}."
    if not info.get("action_is_valid", True):
        note += " Invalid reply, nothing happened."
    return f"{note}\n{obs}"


@dataclass
class Episode:
    spec: EpisodeSpec
    prompt_ids: list[int] = field(default_factory=list)
    response_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    # the sampler's log-prob of each response token (0 on the env's turns); None once a reply
    # came without them (an engine that sends none)
    behaviour: list[float] | None = field(default_factory=list)
    turn_spans: list[tuple[int, int]] = field(default_factory=list)
    # an MoE sampler's experts at each token up to the last reply (its generation's record,
    # which holds the earlier turns' too: `[len, layers, k]`); None once a reply came
    # without one
    routing: Any = None
    rewards: list[float] = field(default_factory=list)
    infos: list[dict[str, Any]] = field(default_factory=list)
    state_keys: list[str] = field(default_factory=list)  # the state each reply acted on
    messages: list[dict[str, str]] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)  # legal actions now (random policy)
    state_key: str = ""
    last_reply_finished: bool = True  # False: the reply hit max_new_tokens (no EOS)
    done: bool = False
    end: str = ""  # terminated | truncated | max_turns | context | error
    error: str | None = None

    # ---- reading -----------------------------------------------------------------------
    def context_ids(self) -> list[int]:
        """The whole conversation so far: the next reply's prompt."""
        return self.prompt_ids + self.response_ids

    @property
    def turns(self) -> int:
        return len(self.turn_spans)

    @property
    def episode_return(self) -> float:
        return float(sum(self.rewards))

    @property
    def success(self) -> bool:
        return bool(self.infos and self.infos[-1].get("success"))

    @property
    def trainable(self) -> bool:
        """Episodes whose env crashed are kept in the samples but not trained on (the crash
        is not the model's doing), nor are episodes without a single reply."""
        return self.error is None and self.turns > 0

    # ---- playing -----------------------------------------------------------------------
    def start(self, result: dict[str, Any], fmt: TurnFormat, user_text: str) -> None:
        """The env's reset `result` arrived: build the first prompt."""
        if result.get("error"):
            self._finish("error", result["error"])
            return
        self.prompt_ids = fmt.first_prompt(user_text)
        self.messages = [{"role": "system", "content": fmt.system_prompt}, fmt.message(user_text)]
        self.actions = list(result.get("actions", []))
        self.state_key = str(result.get("state_key", ""))

    def add_reply(self, reply: dict[str, Any]) -> None:
        """The model's reply (`token_ids`, `text`, `finished`) becomes the next turn; `text`
        is the whole assistant turn (any reply prefix of the prompt included)."""
        start = len(self.response_ids)
        routing = reply.get("routed_experts")
        fed = len(self.context_ids()) + len(reply["token_ids"])
        self.routing = routing if routing is not None and len(routing) == fed else None
        self.response_ids += list(reply["token_ids"])
        self.loss_mask += [1] * len(reply["token_ids"])
        logprobs = reply.get("logprobs")
        if self.behaviour is not None and logprobs and len(logprobs) == len(reply["token_ids"]):
            self.behaviour += [float(x) for x in logprobs]
        else:
            self.behaviour = None
        self.turn_spans.append((start, len(self.response_ids)))
        self.state_keys.append(self.state_key)
        self.messages.append({"role": "assistant", "content": reply["text"]})
        self.last_reply_finished = bool(reply.get("finished", True))

    def observe(
        self, result: dict[str, Any], fmt: TurnFormat, limits: Limits, user_text: str
    ) -> None:
        """The env stepped on the last reply: record it, end the episode or open a turn."""
        self.rewards.append(float(result.get("reward", 0.0)))
        self.infos.append(dict(result.get("info", {})))
        if result.get("error"):
            self._finish("error", result["error"])
            return
        if result.get("terminated"):
            self._finish("terminated")
            return
        if result.get("truncated"):
            self._finish("truncated")
            return
        if self.turns >= limits.max_turns:
            self._finish("max_turns")
            return
        role = str(self.infos[-1].get("observation_role", "user"))  # "tool": a tool result
        env_ids = fmt.next_turn(user_text, self.last_reply_finished, role)
        needed = len(self.prompt_ids) + len(self.response_ids) + len(env_ids)
        if needed + limits.max_new_tokens > limits.max_context_tokens:
            self._finish("context")
            return
        self.response_ids += env_ids
        self.loss_mask += [0] * len(env_ids)
        if self.behaviour is not None:
            self.behaviour += [0.0] * len(env_ids)
        self.messages.append(fmt.message(user_text, role))
        self.actions = list(result.get("actions", []))
        self.state_key = str(result.get("state_key", ""))

    def _finish(self, end: str, error: str | None = None) -> None:
        self.done, self.end, self.error = True, end, error

    # ---- the samples file ----------------------------------------------------------------
    def record(self, env_name: str) -> dict[str, Any]:
        """One line of `samples/step-N.jsonl`: the whole transcript and what each turn did."""
        return {
            "env": env_name,
            "group": self.spec.group,
            "seed": self.spec.seed,
            "return": self.episode_return,
            "success": self.success,
            "turns": self.turns,
            "end": self.end,
            "error": self.error,
            "messages": self.messages,
            "steps": [
                {
                    "reward": r,
                    "action": info.get("action"),
                    "valid": info.get("action_is_valid"),
                    "effective": info.get("action_is_effective"),
                    "parse_reason": info.get("parse_reason"),
                }
                for r, info in zip(self.rewards, self.infos, strict=False)
            ],
        }
