"""The tool-call format: how a reply calls a tool or answers, and how tools and their
results are written into a conversation whose chat template has no tool support.

One format for every model, the one Qwen2.5's (and Hermes') chat template teaches: a call
is a JSON object inside tags,
``<tool_call>{"name": "calculator", "arguments": {"expression": "2 * 3"}}</tool_call>``,
and its result comes back inside ``<tool_response>...</tool_response>``. A template that
supports ``tools=`` declares the tools and renders ``tool`` messages itself; for one that
does not (SmolLM2) `declare_tools` writes the same format into the system prompt and
`tool_response` wraps the result of a user turn the way Qwen's template wraps it.

A reply is one of (`parse_reply`):

- a tool call: the first ``<tool_call>`` block (any later ones in the reply are not run);
- a final answer: no tool call, and an ``<answer>...</answer>`` block (the last one);
- malformed: a ``<tool_call>`` block that is not ``{"name": ..., "arguments": {...}}``
  JSON, or one left unclosed;
- neither (plain text).

Examples:
    >>> parse_reply('<tool_call>{"name": "calculator", "arguments": {"expression": "2*3"}}</tool_call>')
    Reply(kind='call', call=ToolCall(name='calculator', arguments={'expression': '2*3'}), answer=None, error='', calls=1)
    >>> parse_reply("It is <answer> 6 </answer>").answer
    '6'
    >>> parse_reply('<tool_call>{"name": "calculator", "arguments": {"expression": }</tool_call>').error
    'the tool call is not valid JSON (Expecting value at character 51)'
    >>> parse_reply("I think it is six.").kind
    'none'
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
CALL_SHAPE = '{"name": <tool name>, "arguments": <JSON object>}'


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Reply:
    kind: Literal["call", "answer", "malformed", "none"]
    call: ToolCall | None = None
    answer: str | None = None
    error: str = ""  # why a tool call is malformed
    calls: int = 0  # <tool_call> blocks in the reply (only the first is run)


def parse_reply(text: str) -> Reply:
    """What the reply `text` does: call a tool, answer, or neither (see the module)."""
    blocks = TOOL_CALL.findall(text)
    if blocks:
        call, error = _parse_call(blocks[0])
        kind: Literal["call", "malformed"] = "call" if call is not None else "malformed"
        return Reply(kind, call=call, error=error, calls=len(blocks))
    if "<tool_call>" in text:
        return Reply("malformed", error="the <tool_call> is not closed by </tool_call>", calls=1)
    answers = ANSWER.findall(text)
    if answers:
        return Reply("answer", answer=answers[-1].strip())
    return Reply("none")


def _parse_call(block: str) -> tuple[ToolCall | None, str]:
    try:
        data = json.loads(block)
    except json.JSONDecodeError as exc:
        return None, f"the tool call is not valid JSON ({exc.msg} at character {exc.pos})"
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return None, f"a tool call is {CALL_SHAPE}"
    arguments = data.get("arguments", {})
    if isinstance(arguments, str):  # OpenAI-style: the arguments as a JSON string
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return None, "the tool call's arguments are a string that is not JSON"
    if not isinstance(arguments, dict):
        return None, f"a tool call's arguments are a JSON object: {CALL_SHAPE}"
    return ToolCall(data["name"], arguments), ""


def declare_tools(schemas: Sequence[dict[str, Any]]) -> str:
    """The system-prompt text that declares `schemas` and the call format, for a chat
    template without tool support (the same format a Qwen2.5 template declares).

    >>> print(declare_tools([{"type": "function", "function": {"name": "f"}}]))
    # Tools
    <BLANKLINE>
    You can call these tools, whose signatures are inside <tools></tools>:
    <tools>
    {"type": "function", "function": {"name": "f"}}
    </tools>
    <BLANKLINE>
    To call a tool, reply with a JSON object inside <tool_call></tool_call> tags:
    <tool_call>
    {"name": <tool name>, "arguments": <JSON object>}
    </tool_call>
    The result comes back inside <tool_response></tool_response>.
    """
    lines = "\n".join(json.dumps(s, ensure_ascii=False) for s in schemas)
    return (
        "# Tools\n\nYou can call these tools, whose signatures are inside <tools></tools>:\n"
        f"<tools>\n{lines}\n</tools>\n\n"
        "To call a tool, reply with a JSON object inside <tool_call></tool_call> tags:\n"
        f"<tool_call>\n{CALL_SHAPE}\n</tool_call>\n"
        "The result comes back inside <tool_response></tool_response>."
    )


def tool_response(result: str) -> str:
    """A tool result as the content of a user turn (a template without tool support).

    >>> tool_response("6")
    '<tool_response>\\n6\\n</tool_response>'
    """
    return f"<tool_response>\n{result}\n</tool_response>"
