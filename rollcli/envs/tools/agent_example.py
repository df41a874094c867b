"""An agent program for `agentic-tool-math-agent`: the tool-math task written as a plain
OpenAI-client program, the way an agent is written outside roll (docs/agents.md).

roll calls `run_episode(client, task)` once per episode with an ``openai.OpenAI`` client
pointed at its endpoint and the task (``prompt``, ``answer``, ``seed``); the program chats,
runs the calculator itself when the model calls it, judges the final answer and returns
the reward. It plays the built-in `tool` env's game: the same instructions and tool schema,
a tool result as a ``tool`` message, ``<answer>N</answer>`` judged exactly, 1 for a right
answer, -0.1 for each reply that neither calls the tool well nor answers (a malformed
call gets the env's error as a ``tool`` message), at most
`MAX_REPLIES` replies. So through roll's token-exact endpoint the model sees the same
tokens as in the built-in env, and the two ways of training can be compared.

Only ``openai`` and the calculator function are used; nothing of roll's pipeline.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rollcli.envs.tools.calculator import calculator
from rollcli.envs.tools.call_format import CALL_SHAPE, parse_reply
from rollcli.envs.tools.env import INSTRUCTIONS, NEITHER
from rollcli.envs.tools.tool import Tool

TOOLS = [Tool.from_function(calculator).schema]  # the JSON schema the env declares
MAX_REPLIES = 3
FORMAT_PENALTY = -0.1
ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)


def run_episode(client: Any, task: dict[str, Any]) -> float:
    """Play one task; the reward (see the module docstring)."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": task["prompt"]},
    ]
    penalty = 0.0
    for _ in range(MAX_REPLIES):
        reply = client.chat.completions.create(model="roll", messages=messages, tools=TOOLS)
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))  # sent back as it came
        if message.tool_calls:
            call = message.tool_calls[0]
            result, valid = _run_tool(call.function)
            penalty += 0.0 if valid else FORMAT_PENALTY
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
            continue
        if "<tool_call>" in (message.content or ""):  # a call the endpoint could not parse
            reason = parse_reply(message.content or "").error
            penalty += FORMAT_PENALTY
            messages.append({"role": "tool", "content": f"Error: {reason}; a call is {CALL_SHAPE}"})
            continue
        answers = ANSWER.findall(message.content or "")
        if answers and any(ch.isdigit() for ch in answers[-1]):
            right = answers[-1].strip().casefold() == task["answer"].casefold()
            return (1.0 if right else 0.0) + penalty
        penalty += FORMAT_PENALTY
        messages.append({"role": "user", "content": NEITHER})
    return penalty


def _run_tool(function: Any) -> tuple[str, bool]:
    """The calculator's result or an error line for the model, and whether the call was a
    valid one (a known tool with the arguments it takes; a calculator error is valid)."""
    if function.name != "calculator":
        return f"Error: there is no tool {function.name!r}; the tools: calculator", False
    arguments = json.loads(function.arguments)  # the endpoint sends only well-formed calls
    if set(arguments) != {"expression"} or not isinstance(arguments["expression"], str):
        return "Error: calculator takes one argument, expression (a string)", False
    try:
        return str(calculator(arguments["expression"])), True
    except Exception as exc:  # noqa: BLE001 - the model reads what went wrong
        return f"Error: calculator: {exc}", True
