"""Multi-turn chat prompts as token ids: the system prompt, each observation a user turn,
each model reply an assistant turn.

The conversation is built token by token, never re-tokenized: the model's sampled tokens
go into the training sample exactly as generated, and everything between two replies (the
end of the assistant turn, the next user turn, the opening of the next assistant turn) is
rendered once from the tokenizer's chat template and appended. That is what lets the loss
mask cover exactly the model's tokens.

Example (ChatML, as SmolLM2 and Qwen use): after a reply that ended with ``<|im_end|>``
the environment's part is ``"\\n<|im_start|>user\\n{observation}<|im_end|>\\n<|im_start|>assistant\\n"``.
"""

from __future__ import annotations

from typing import Any

_MARK = "\u2063MARK\u2063"  # a reply no template rewrites
_OBS = "\u2063OBS\u2063"


class TurnFormat:
    """Token ids of the first prompt and of the environment's part of every later turn."""

    def __init__(
        self, tokenizer: Any, system_prompt: str, reply_prefix: str = "", user_suffix: str = ""
    ) -> None:
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(
                "the agentic pipeline needs a chat model: this tokenizer has no chat template"
            )
        self.tokenizer = tokenizer
        self.system_prompt = system_prompt
        self.reply_prefix = reply_prefix  # opens every assistant turn (prompt side)
        self.user_suffix = user_suffix  # closes every user turn
        base = [
            {"role": "system", "content": "S"},
            {"role": "user", "content": "U"},
            {"role": "assistant", "content": _MARK},
        ]
        closed = self._render(base, generation_prompt=False)
        full = self._render(base + [{"role": "user", "content": _OBS}], generation_prompt=True)
        if not full.startswith(closed) or _MARK not in closed or _OBS not in full:
            raise ValueError(
                "this tokenizer's chat template does not render a conversation as a prefix of "
                "its continuation, so multi-turn token ids cannot be built incrementally"
            )
        close = closed[closed.rindex(_MARK) + len(_MARK) :]  # e.g. "<|im_end|>\n"
        eos = tokenizer.eos_token or ""
        self.close_after_eos = close[len(eos) :] if eos and close.startswith(eos) else close
        self.close_after_cut = close
        self.open_turn = full[
            len(closed) :
        ]  # e.g. "<|im_start|>user\nOBS<|im_end|>\n<|im_start|>assistant\n"

    def _render(self, messages: list[dict[str, str]], generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=generation_prompt
        )

    def first_prompt(self, observation: str) -> list[int]:
        """System prompt + the first observation + the opening of the assistant turn (and
        `reply_prefix`)."""
        text = self._render(
            [
                {"role": "system", "content": self.system_prompt},
                {"role": "user", "content": observation + self.user_suffix},
            ],
            generation_prompt=True,
        )
        return self.encode(text + self.reply_prefix)

    def next_turn(self, observation: str, reply_finished: bool) -> list[int]:
        """What follows a reply: the end of its turn (its EOS when the reply was cut short),
        the observation as a user turn, the opening of the next assistant turn."""
        close = self.close_after_eos if reply_finished else self.close_after_cut
        return self.encode(
            close + self.open_turn.replace(_OBS, observation + self.user_suffix) + self.reply_prefix
        )

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
