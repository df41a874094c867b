"""One agent-program episode as token ids, built from the chat requests the program sends.

An agent program (`agentic.agent`) talks to roll's OpenAI-compatible endpoint
(`rollcli.rollout.openai_server`) with plain ``messages`` lists. Re-rendering each request
with the chat template and re-tokenizing it would train on tokens the model never sampled
(a reply's text does not always tokenize back to the sampled ids, and templates rewrite
earlier turns). So the conversation is built the way the built-in environments build it
(`rollcli.rollout.chat_turns`): the first request is rendered once; every later request
must repeat the conversation so far (the earlier messages, then the assistant reply exactly
as the endpoint returned it) and add one ``tool`` or ``user`` message, of which only the new
part is rendered and appended to the sampled token ids. The episode therefore holds the
exact ids the engine sampled, with the loss mask on them, and a conversation an agent
writes turn by turn gives the same ids as the built-in tool environment would.

A request that rewrites history (edits or drops an earlier message or the reply) or adds
anything but one message cannot continue a token-exact episode: `ConversationError` (the
endpoint's HTTP 400, which the agent's client raises), and the episode's turns so far are
kept as they are.

Replies come back in OpenAI form: with ``tools`` in the request, a reply holding a
well-formed ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (the format of
`rollcli.envs.tools.call_format`) is returned as a ``tool_calls`` entry, the text before it
as ``content``; anything else is returned as text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rollcli.envs.tools.call_format import TOOL_CALL, parse_reply
from rollcli.rollout.chat_turns import TurnFormat
from rollcli.rollout.episode import Episode, Limits

OBSERVATION_ROLES = ("tool", "user")


class ConversationError(ValueError):
    """A request that cannot continue its episode (answered with HTTP 400)."""


@dataclass
class Formats:
    """Turn formats by (system prompt, tools): one per distinct first request, shared by a
    step's episodes (building one renders the chat template several times)."""

    tokenizer: Any
    cache: dict[str, TurnFormat] = field(default_factory=dict)

    def get(self, system_prompt: str, tools: list[dict[str, Any]]) -> TurnFormat:
        key = json.dumps([system_prompt, tools], sort_keys=True)
        if key not in self.cache:
            self.cache[key] = TurnFormat(self.tokenizer, system_prompt, tools=tools)
        return self.cache[key]


class AgentConversation:
    """The episode an agent program's requests build (see the module docstring)."""

    def __init__(self, episode: Episode, formats: Formats, limits: Limits) -> None:
        self.episode = episode
        self.formats = formats
        self.limits = limits
        self.fmt: TurnFormat | None = None
        self.tools: list[dict[str, Any]] = []
        self.sent: list[dict[str, Any]] = []  # the conversation as the program must repeat it

    # ---- a request ---------------------------------------------------------------------
    def prompt(self, messages: Any, tools: Any = None) -> list[int]:
        """The next reply's prompt ids for a request's `messages` (and `tools`), after
        checking that it continues the episode; the episode records the new turn."""
        ep = self.episode
        if ep.done:
            raise ConversationError(f"this episode has ended ({ep.end}); start no new turn")
        msgs = [normal_message(m, i) for i, m in enumerate(_as_list(messages, "messages"))]
        tools = _as_list(tools, "tools") if tools is not None else []
        if not msgs:
            raise ConversationError("messages is empty: send at least one user message")
        if not self.sent:
            return self._first(msgs, tools)
        if tools != self.tools:
            raise ConversationError(
                "tools differ from the episode's first request: an episode keeps one set of "
                "tools (the prompt that declared them is already sampled from)"
            )
        return self._next(msgs)

    def _first(self, msgs: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[int]:
        if msgs[-1]["role"] not in OBSERVATION_ROLES:
            raise ConversationError(
                f"the last message is {msgs[-1]['role']!r}; a request ends with a user or "
                "tool message for the model to answer"
            )
        if any(m["role"] in ("assistant", "system") for m in msgs[1:]):
            raise ConversationError(
                "the first request holds an assistant message or a late system message; roll "
                "trains on replies the engine sampled, so a conversation starts with one "
                "optional system message and user / tool messages"
            )
        has_system = msgs[0]["role"] == "system"
        self.fmt = self.formats.get(msgs[0]["content"] if has_system else "", tools)
        self.tools = tools
        turns = msgs[1:] if has_system else msgs
        transcript = [self.fmt.message(m["content"], m["role"]) for m in turns]
        if has_system or self.fmt.system_prompt:  # none given: the template's default
            transcript = [{"role": "system", "content": self.fmt.system_prompt}, *transcript]
        ids = self.fmt.prompt(transcript)
        self._fits(len(ids))
        self.episode.prompt_ids = ids
        self.episode.messages = transcript
        self.sent = msgs
        return ids

    def _next(self, msgs: list[dict[str, Any]]) -> list[int]:
        ep, fmt = self.episode, self.fmt
        assert fmt is not None
        known = len(self.sent)
        for i, (old, new) in enumerate(zip(self.sent, msgs, strict=False)):
            if old != new:
                what = "the assistant reply" if old["role"] == "assistant" else "message"
                raise ConversationError(
                    f"{what} {i} differs from what this episode holds: a request repeats "
                    "the conversation so far unchanged (the reply exactly as returned) and "
                    "adds one tool or user message"
                )
        added = msgs[known:]
        if len(msgs) < known or len(added) != 1 or added[0]["role"] not in OBSERVATION_ROLES:
            raise ConversationError(
                f"this episode holds {known} messages; a request repeats them and adds exactly "
                f"one tool or user message (got {len(msgs)} messages)"
            )
        if ep.turns >= self.limits.max_turns:
            ep.done, ep.end = True, "max_turns"
            raise ConversationError(
                f"the episode reached agentic.max_turns = {self.limits.max_turns} replies"
            )
        new = added[0]
        env_ids = fmt.next_turn(new["content"], ep.last_reply_finished, new["role"])
        self._fits(len(ep.context_ids()) + len(env_ids))
        ep.response_ids += env_ids
        ep.loss_mask += [0] * len(env_ids)
        if ep.behaviour is not None:
            ep.behaviour += [0.0] * len(env_ids)
        ep.messages.append(fmt.message(new["content"], new["role"]))
        self.sent = msgs
        return ep.context_ids()

    def _fits(self, prompt_tokens: int) -> None:
        limit = self.limits.max_context_tokens
        if prompt_tokens + self.limits.max_new_tokens > limit:
            self.episode.done, self.episode.end = True, "context"
            raise ConversationError(
                f"the conversation ({prompt_tokens} tokens) plus a reply "
                f"({self.limits.max_new_tokens}) exceeds agentic.max_context_tokens = {limit}"
            )

    # ---- the reply ---------------------------------------------------------------------
    def reply(self, gen: dict[str, Any]) -> dict[str, Any]:
        """Record the engine's reply (`token_ids`, `text`, `finished`, `logprobs`) as the
        next turn; the assistant message the endpoint returns."""
        ep = self.episode
        ep.add_reply(gen)
        text = str(gen["text"])
        parsed = parse_reply(text) if self.tools else None
        info: dict[str, Any] = {"action_is_valid": True}
        if parsed is not None:
            info["tool_call"] = int(parsed.calls > 0)
            info["tool_error"] = "malformed" if parsed.kind == "malformed" else ""
            info["action_is_valid"] = parsed.kind != "malformed"
        ep.infos.append(info)
        ep.rewards.append(0.0)
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if parsed is not None and parsed.kind == "call" and parsed.call is not None:
            before = text[: TOOL_CALL.search(text).start()].strip()  # type: ignore[union-attr]
            call_id = f"call_{ep.spec.index}_{ep.turns}"
            message = {
                "role": "assistant",
                "content": before or None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {
                            "name": parsed.call.name,
                            "arguments": json.dumps(parsed.call.arguments, ensure_ascii=False),
                        },
                    }
                ],
            }
        self.sent = [*self.sent, normal_message(message, len(self.sent))]
        return message

    def finish(self, reward: float, error: str | None = None) -> None:
        """The program returned `reward` (or failed with `error`): the episode's outcome."""
        ep = self.episode
        if error is not None and not ep.done:
            ep.done, ep.end, ep.error = True, "error", error
            return
        if ep.rewards:
            ep.rewards[-1] += float(reward)
            ep.infos[-1]["success"] = float(reward) > 0
        if not ep.done:
            ep.done, ep.end = True, "terminated"


def normal_message(message: Any, index: int) -> dict[str, Any]:
    """A chat message reduced to what decides its tokens: role, content text and tool calls
    (name and parsed arguments), so an echoed reply compares equal however the client
    serialised it (``content: None``, argument JSON spacing, extra null fields)."""
    if not isinstance(message, dict):
        raise ConversationError(f"message {index} is not an object")
    role = message.get("role")
    if role not in ("system", "user", "assistant", "tool"):
        raise ConversationError(
            f"message {index} has role {role!r}; roll's endpoint takes system, user, "
            "assistant and tool messages"
        )
    out: dict[str, Any] = {"role": role, "content": _content_text(message.get("content"), index)}
    calls = message.get("tool_calls") or []
    if calls:
        if role != "assistant":
            raise ConversationError(f"message {index}: only an assistant message has tool_calls")
        out["tool_calls"] = [_call(c, index) for c in _as_list(calls, "tool_calls")]
    return out


def _content_text(content: Any, index: int) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: text only
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text":
                raise ConversationError(
                    f"message {index}: a content part is not text; roll's endpoint serves a "
                    "text model"
                )
            texts.append(str(part.get("text", "")))
        return "".join(texts)
    raise ConversationError(f"message {index}: content is {type(content).__name__}, not text")


def _call(call: Any, index: int) -> tuple[str, Any]:
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise ConversationError(f"message {index}: a tool call has no function name")
    arguments = fn.get("arguments", "{}")
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
    except json.JSONDecodeError:
        raise ConversationError(f"message {index}: a tool call's arguments are not JSON") from None
    return (fn["name"], parsed)


def _as_list(value: Any, name: str) -> list[Any]:
    if not isinstance(value, list):
        raise ConversationError(f"{name} must be a list, got {type(value).__name__}")
    return value
