"""The `tool` environment: a task, a set of tools, and turns until a final answer.

Each episode draws a task from its seed (`tasks.TaskSource`) and shows its prompt. Every
reply is read by `call_format.parse_reply` and does one of:

- calls a tool: the arguments are checked against the tool's schema, the tool runs, and
  its result (cut to `max_result_chars`, head and tail kept) is the next observation, a
  ``tool`` message;
- answers: the task's judge scores the answer and the episode ends (reward 1 for a correct
  answer with the ``math`` judge, 0 for a wrong one);
- neither, or a call that cannot run: an error observation, and the episode goes on.

Nothing a model writes can crash an episode. Every failure is an observation starting
``Error:`` plus a kind in the step's ``info["tool_error"]``, which the pipeline counts
(``env/tool_errors`` and ``env/tool_error/<kind>``, `episode_metrics.tool_metrics`):

================  ========================================  =====================
kind              what happened                              format penalty
================  ========================================  =====================
``malformed``     ``<tool_call>`` JSON that does not parse   yes (invalid reply)
                  or is not ``{"name", "arguments"}``
``unknown_tool``  a name that is not one of the tools        yes (invalid reply)
``bad_arguments`` missing, extra or wrongly typed arguments  yes (invalid reply)
``raised``        the tool raised (a calculator given code)  no (a valid call)
``timeout``       the tool ran past `tool_timeout_s`         no (a valid call)
================  ========================================  =====================

A reply with neither a call nor an answer, and an answer without a number where the task
expects one, are invalid replies too (``action_is_valid`` False, `format_penalty`), with
an observation saying what to do. The episode is truncated after `max_steps` replies with
no further reward. The ``info`` keys are those of every roll env (`text_env`) plus
``tool_call`` (1 when the reply called a tool, well-formed or not), ``tool_error`` (a kind
above, or "") and ``observation_role`` (``tool`` or ``user``: how the pipeline renders the
next observation, `rollcli.rollout.chat_turns.TurnFormat`).

Example:
    >>> env = ToolEnv(tasks="arithmetic", max_steps=3)
    >>> obs, _ = env.reset(seed=7)
    >>> obs
    'What is 254 × 504 - 766?'
    >>> call = '<tool_call>{"name": "calculator", "arguments": {"expression": "254*504-766"}}</tool_call>'
    >>> obs, reward, terminated, truncated, info = env.step(call)
    >>> obs, reward, info["observation_role"]
    ('127250', 0.0, 'tool')
    >>> obs, reward, terminated, truncated, info = env.step("<answer>127250</answer>")
    >>> reward, terminated, info["success"]
    (1.0, True, True)
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium
from gymnasium import spaces

from rollcli.envs.registry import register_env
from rollcli.envs.text_env import MAX_REPLY_CHARS, reset_info
from rollcli.envs.tools.call_format import CALL_SHAPE, Reply, parse_reply
from rollcli.envs.tools.catalog import load_tools
from rollcli.envs.tools.tasks import TaskSource, ToolTask, arithmetic_expression
from rollcli.envs.tools.tasks import judge as make_judge
from rollcli.envs.tools.tool import ToolError

TOOL_ERRORS = ("malformed", "unknown_tool", "bad_arguments", "raised", "timeout")

INSTRUCTIONS = """\
Solve the user's task. You may call the tools you are given, one call per reply; the \
result comes back in the next message. When you know the final answer, reply with it \
inside answer tags, for example <answer>42</answer>."""

NEITHER = (
    "Error: your reply has neither a tool call nor a final answer. Call a tool with "
    f"<tool_call>{CALL_SHAPE}</tool_call>, or answer with <answer>...</answer>."
)


@dataclass(frozen=True)
class _Outcome:
    """What one reply did."""

    observation: str
    role: str = "tool"
    action: str | None = None
    valid: bool = True
    effective: bool = False
    error: str = ""  # a kind of TOOL_ERRORS, or ""
    reason: str = "ok"
    reward: float = 0.0
    terminated: bool = False


@register_env("tool", description="solve a task by calling tools (calculator, python, yours)")
class ToolEnv(gymnasium.Env):
    """Tasks solved with tools (see the module docstring).

    Args:
        tools: built-in tool names (``calculator``, ``python``) and user tools as
            ``"package.module:function"``.
        tasks: the task source, ``arithmetic`` or ``"package.module:function"``.
        task_kwargs: keyword arguments for the task source (``arithmetic``: ``kinds``).
        judge: how a final answer is scored: ``math``, ``exact`` or
            ``"package.module:function"`` of ``(answer, expected)``.
        max_steps: replies before the episode is truncated.
        format_penalty: reward added for an invalid reply (see the table above).
        tool_timeout_s: a tool call's time limit (the ``python`` sandbox's wall clock).
        max_result_chars: longest tool result shown; a longer one keeps its head and tail.
        layouts: ``train`` / ``validation`` draw only tasks of that split (set by the
            pipeline); ``all`` draws any.
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(
        self,
        tools: Sequence[str] = ("calculator",),
        tasks: str = "arithmetic",
        task_kwargs: Mapping[str, Any] | None = None,
        judge: str = "math",
        max_steps: int = 4,
        format_penalty: float = -0.1,
        tool_timeout_s: float = 10.0,
        max_result_chars: int = 1000,
        layouts: str = "all",
        render_mode: str | None = "ansi",
    ) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {max_steps}")
        if tool_timeout_s <= 0:
            raise ValueError(f"tool_timeout_s must be positive, got {tool_timeout_s}")
        if max_result_chars < 20:
            raise ValueError(f"max_result_chars must be at least 20, got {max_result_chars}")
        self.tools = {t.name: t for t in load_tools(tools, tool_timeout_s)}
        self.tool_schemas = [t.schema for t in self.tools.values()]
        self.source = TaskSource(tasks, task_kwargs, layouts)
        self.source.task(0)  # a task source that fails does so here, not mid-run
        self.judge = make_judge(judge)
        self.max_steps = int(max_steps)
        self.format_penalty = float(format_penalty)
        self.tool_timeout_s = float(tool_timeout_s)
        self.max_result_chars = int(max_result_chars)
        self.render_mode = render_mode
        self.action_names = [*self.tools, "answer"]
        self.action_space = spaces.Text(MAX_REPLY_CHARS, min_length=0)
        self.task: ToolTask | None = None
        self._results: list[str] = []  # results of the calls that ran (the state)
        self._steps = 0
        self._active = False

    @property
    def instructions(self) -> str:
        """The system prompt; the tools themselves are declared by the chat template, or
        by `TurnFormat` where the template cannot."""
        return INSTRUCTIONS

    def render_text(self) -> str:
        return self._require_task().prompt

    def render(self) -> str | None:
        return self.render_text() if self.render_mode == "ansi" else None

    def get_state_key(self) -> str:
        """The task and the results obtained so far (GiGPO groups equal states)."""
        return "\n".join([self._require_task().prompt, *self._results])

    def expert_reply(self) -> str:
        """The reply a solver writes now, for `roll data episodes --policy expert` and an
        agentic recipe's warm-up: on an arithmetic task ("What is <expression>?",
        `tasks.arithmetic`) a call of the calculator on the expression as the prompt writes
        it (without a calculator, of python printing it), then, once a call has returned,
        its result as the final answer. A task of another shape, or an env with neither
        tool, has no expert: ValueError.

        >>> env = ToolEnv(tasks="arithmetic")
        >>> _ = env.reset(seed=7)
        >>> print(env.expert_reply())
        <tool_call>
        {"name": "calculator", "arguments": {"expression": "254 × 504 - 766"}}
        </tool_call>
        >>> _ = env.step(env.expert_reply())
        >>> env.expert_reply()
        '<answer>127250</answer>'
        """
        task = self._require_task()
        if self._results:
            return f"<answer>{self._results[-1].strip()}</answer>"
        expression = arithmetic_expression(task.prompt)
        if expression is None:
            raise ValueError(
                f"the tool env's expert solves arithmetic tasks ('What is <expression>?'), "
                f"not {task.prompt[:60]!r}"
            )
        if "calculator" in self.tools:
            call = {"name": "calculator", "arguments": {"expression": expression}}
        elif "python" in self.tools:
            code = f"print({expression.replace('×', '*')})"
            call = {"name": "python", "arguments": {"code": code}}
        else:
            raise ValueError("the tool env's expert calls calculator or python; add one to tools")
        return f"<tool_call>\n{json.dumps(call, ensure_ascii=False)}\n</tool_call>"

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        task_seed = seed if seed is not None else int(self.np_random.integers(2**31))
        self.task = self.source.task(task_seed)
        self._results, self._steps, self._active = [], 0, True
        return self.task.prompt, reset_info(tool_call=0, tool_error="", observation_role="user")

    def step(self, action_text: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if not self._active:
            raise RuntimeError("call reset() before step(), and again after an episode ends")
        self._steps += 1
        reply = parse_reply(str(action_text))
        if reply.kind in ("call", "malformed"):
            outcome = self._call(reply)
        elif reply.kind == "answer":
            outcome = self._answer(str(reply.answer))
        else:
            outcome = _Outcome(NEITHER, "user", valid=False, reason="no tool call and no answer")
        observation = outcome.observation
        if reply.calls > 1:
            observation += "\n(only the first tool call of a reply is run)"
        penalty = 0.0 if outcome.valid else self.format_penalty
        truncated = not outcome.terminated and self._steps >= self.max_steps
        self._active = not (outcome.terminated or truncated)
        info = {
            **reset_info(),
            "action": outcome.action,
            "action_is_valid": outcome.valid,
            "action_is_effective": outcome.effective,
            "success": outcome.terminated and outcome.reward >= 1.0,
            "format_penalty": penalty,
            "parse_reason": outcome.reason,
            "steps": self._steps,
            "tool_call": int(reply.kind in ("call", "malformed")),
            "tool_error": outcome.error,
            "observation_role": outcome.role,
        }
        return observation, outcome.reward + penalty, outcome.terminated, truncated, info

    # ---- one reply ---------------------------------------------------------------------
    def _call(self, reply: Reply) -> _Outcome:
        if reply.call is None:
            return _error("malformed", f"{reply.error}; a call is {CALL_SHAPE}", valid=False)
        name, arguments = reply.call.name, reply.call.arguments
        tool = self.tools.get(name)
        if tool is None:
            known = ", ".join(self.tools)
            return _error("unknown_tool", f"there is no tool {name!r}; the tools: {known}", False)
        problem = tool.check_arguments(arguments)
        if problem is not None:
            return _error("bad_arguments", f"{name}: {problem}", valid=False)
        try:
            result = tool.call(arguments, self.tool_timeout_s)
        except TimeoutError as exc:
            return _error("timeout", f"{name}: {exc}", valid=True, action=name)
        except Exception as exc:  # noqa: BLE001 - a tool's failure is the model's observation
            text = str(exc) if isinstance(exc, ToolError) else f"{type(exc).__name__}: {exc}"
            return _error("raised", f"{name}: {self._cut(text)}", valid=True, action=name)
        text = self._cut(_as_text(result)) or "(no output)"
        self._results.append(text)
        return _Outcome(text, "tool", action=name, effective=True)

    def _answer(self, answer: str) -> _Outcome:
        task = self._require_task()
        if task.numeric and not any(ch.isdigit() for ch in answer):
            message = f"Error: the answer {answer[:80]!r} holds no number; answer with a number."
            return _Outcome(message, "user", valid=False, reason="the answer holds no number")
        reward = self.judge(answer, task.answer)
        return _Outcome(
            task.prompt, "user", "answer", effective=True, reward=reward, terminated=True
        )

    def _cut(self, text: str) -> str:
        """`text` cut to `max_result_chars`, keeping its head and its tail (where a
        traceback says what went wrong)."""
        if len(text) <= self.max_result_chars:
            return text
        half = (self.max_result_chars - 40) // 2
        return f"{text[:half]}\n... ({len(text) - 2 * half} characters cut) ...\n{text[-half:]}"

    def _require_task(self) -> ToolTask:
        if self.task is None:
            raise RuntimeError("call reset() first")
        return self.task


def _error(kind: str, message: str, valid: bool, action: str | None = None) -> _Outcome:
    return _Outcome(f"Error: {message}", "tool", action, valid, error=kind, reason=message)


def _as_text(result: Any) -> str:
    if isinstance(result, str):
        return result
    try:
        return json.dumps(result, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(result)
