"""Multi-turn chat prompts as token ids: the system prompt, each observation a user turn
(or a tool turn), each model reply an assistant turn.

The conversation is built token by token, never re-tokenized: the model's sampled tokens
go into the training sample exactly as generated, and everything between two replies (the
end of the assistant turn, the next user or tool turn, the opening of the next assistant
turn) is rendered once from the tokenizer's chat template and appended. That is what lets
the loss mask cover exactly the model's tokens.

Example (ChatML, as SmolLM2 and Qwen use): after a reply that ended with ``<|im_end|>``
the environment's part is ``"\\n<|im_start|>user\\n{observation}<|im_end|>\\n<|im_start|>assistant\\n"``.

Tools (an env with `tool_schemas`, `rollcli.envs.tools`): where the chat template renders
``tools=`` (Qwen2.5: a ``# Tools`` section in the system turn) the schemas go to the
template and a tool result is a ``tool`` message, rendered as the template renders it
(Qwen2.5: ``<tool_response>`` inside a user turn). Where the template ignores ``tools=``
(SmolLM2) the tools and the call format are declared at the end of the system prompt
(`call_format.declare_tools`) and a tool result is a user turn wrapped the same way
(`call_format.tool_response`), so both kinds of model see one format. Whether a template
supports tools is read from what it renders, not from the model's name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rollcli.envs.tools.call_format import declare_tools, tool_response

_MARK = "\u2063MARK\u2063"  # a reply no template rewrites
_OBS = "\u2063OBS\u2063"
ROLES = ("user", "tool")  # the roles an observation may take (info["observation_role"])


class TurnFormat:
    """Token ids of the first prompt and of the environment's part of every later turn."""

    def __init__(
        self,
        tokenizer: Any,
        system_prompt: str,
        reply_prefix: str = "",
        user_suffix: str = "",
        tools: Sequence[dict[str, Any]] | None = None,
    ) -> None:
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(
                "the agentic pipeline needs a chat model: this tokenizer has no chat template"
            )
        self.tokenizer = tokenizer
        self.reply_prefix = reply_prefix  # opens every assistant turn (prompt side)
        self.user_suffix = user_suffix  # closes every user turn (not tool results)
        self.tools = list(tools or [])
        self.native_tools = bool(self.tools) and renders_tools(tokenizer, self.tools)
        if self.tools and not self.native_tools:
            declared = declare_tools(self.tools)
            system_prompt = f"{system_prompt}\n\n{declared}" if system_prompt else declared
        self.system_prompt = system_prompt  # as rendered (with any tool declaration)
        base = [
            {"role": "system", "content": "S"},
            {"role": "user", "content": "U"},
            {"role": "assistant", "content": _MARK},
        ]
        closed = self._render(base, generation_prompt=False)
        close = closed[closed.rindex(_MARK) + len(_MARK) :] if _MARK in closed else ""
        eos = tokenizer.eos_token or ""
        self.close_after_eos = close[len(eos) :] if eos and close.startswith(eos) else close
        self.close_after_cut = close
        # e.g. "<|im_start|>user\nOBS<|im_end|>\n<|im_start|>assistant\n"
        self.open_turn = self._open_turn(base, closed, "user")
        self.open_tool_turn = self._open_turn(base, closed, "tool") if self.native_tools else ""
        self._base, self._closed = base, closed

    def _open_turn(self, base: list[dict[str, str]], closed: str, role: str) -> str:
        """What the template adds after a closed assistant turn for an observation of
        `role`, up to the opening of the next assistant turn (`_OBS` for the content)."""
        full = self._render(base + [{"role": role, "content": _OBS}], generation_prompt=True)
        if not full.startswith(closed) or _MARK not in closed or _OBS not in full:
            raise ValueError(
                f"this tokenizer's chat template does not render a conversation as a prefix of "
                f"its continuation by a {role} turn, so multi-turn token ids cannot be built "
                "incrementally"
            )
        return full[len(closed) :]

    def _render(self, messages: list[dict[str, str]], generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            messages,
            tools=self.tools if self.native_tools else None,
            tokenize=False,
            add_generation_prompt=generation_prompt,
        )

    def first_prompt(self, observation: str) -> list[int]:
        """System prompt + the first observation + the opening of the assistant turn (and
        `reply_prefix`)."""
        text = self._render(
            [{"role": "system", "content": self.system_prompt}, self.message(observation)],
            generation_prompt=True,
        )
        return self.encode(text + self.reply_prefix)

    def prompt(self, messages: list[dict[str, str]]) -> list[int]:
        """A whole first request (`messages` as rendered: a system message holding
        `system_prompt`, then user / tool turns) + the opening of the assistant turn."""
        return self.encode(self.render_prompt(messages) + self.reply_prefix)

    def render_prompt(self, messages: list[dict[str, str]]) -> str:
        """The template's text for `messages` and the opening of the next assistant turn
        (without `reply_prefix`)."""
        return self._render(messages, generation_prompt=True)

    def next_turn(self, observation: str, reply_finished: bool, role: str = "user") -> list[int]:
        """What follows a reply: the end of its turn (its EOS when the reply was cut short),
        the observation as a `role` turn, the opening of the next assistant turn."""
        close = self.close_after_eos if reply_finished else self.close_after_cut
        return self.encode(close + self._opening(self.message(observation, role)))

    def _opening(self, message: dict[str, str]) -> str:
        """The template's text for `message` after a closed assistant turn, up to the
        opening of the next one (and `reply_prefix`): rendered with the message itself, so
        a template that rewrites contents (Llama 3's trims every message) is followed."""
        full = self._render([*self._base, message], generation_prompt=True)
        if not full.startswith(self._closed):  # the probe's framing, where this one breaks it
            opening = self.open_tool_turn if message["role"] == "tool" else self.open_turn
            return opening.replace(_OBS, message["content"]) + self.reply_prefix
        return full[len(self._closed) :] + self.reply_prefix

    def message(self, observation: str, role: str = "user") -> dict[str, str]:
        """The chat message an observation of `role` is rendered as (the transcript's)."""
        if role not in ROLES:
            raise ValueError(f"an observation's role is one of {', '.join(ROLES)}, got {role!r}")
        if role == "tool" and self.native_tools:
            return {"role": "tool", "content": observation}
        if role == "tool":
            return {"role": "user", "content": tool_response(observation)}
        return {"role": "user", "content": observation + self.user_suffix}

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])


def renders_tools(tokenizer: Any, tools: Sequence[dict[str, Any]]) -> bool:
    """Whether the chat template renders ``tools=`` (it changes the rendered prompt)."""
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    plain = tokenizer.apply_chat_template(messages, tokenize=False)
    return tokenizer.apply_chat_template(messages, tools=list(tools), tokenize=False) != plain
