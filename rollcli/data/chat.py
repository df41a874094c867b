"""Chat data for supervised fine-tuning: conversations, and which tokens the loss sees.

A file row is a conversation or a prompt / response pair (jsonl, `.jsonl.gz` or parquet):

    {"messages": [{"role": "user", "content": "2+3?"}, {"role": "assistant", "content": "5"}]}
    {"prompt": "2+3?", "response": "5"}

An optional `answer` (the reference final answer) lets validation score greedy answers;
`id` and `tag` are optional too. The loss covers the assistant turns only: each one is
located by rendering the chat template prefix by prefix (`tokenize_chat`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rollcli.data.columns import Columns, as_messages, as_text
from rollcli.data.prompts import DataError, Prompt

ROLES = ("system", "user", "assistant", "tool")


@dataclass(frozen=True)
class ChatExample:
    id: str
    messages: tuple[dict[str, str], ...]
    answer: str | None = None  # the reference final answer, when known
    tag: str = "math"

    @property
    def prompt_messages(self) -> tuple[dict[str, str], ...]:
        """The conversation up to its last assistant turn (what a model is asked)."""
        last = max(i for i, m in enumerate(self.messages) if m["role"] == "assistant")
        return self.messages[:last]


def worked_answer(question: str, answer: str) -> str:
    """A short answer in the form the math reward accepts (it ends with the final answer).

    >>> worked_answer("State the final answer to the following arithmetic problem: 4 - 1 =", "3")
    '4 - 1 = 3'
    >>> worked_answer("How many r are in 'strawberry'?", "3")
    'The answer is 3.'
    """
    text = question.strip()
    if text.endswith("="):
        return f"{text.rsplit(':', 1)[-1].strip()} {answer}"
    return f"The answer is {answer}."


def examples_from_prompts(prompts: list[Prompt]) -> list[ChatExample]:
    """SFT examples from generated problems (reasoning-gym): the generator's own answer,
    written out by `worked_answer`."""
    return [
        ChatExample(
            p.id,
            (*p.messages, {"role": "assistant", "content": worked_answer(_question(p), p.answer)}),
            p.answer,
            p.tag,
        )
        for p in prompts
    ]


def _question(prompt: Prompt) -> str:
    return prompt.messages[-1]["content"]


def chat_examples_from_rows(
    rows: list[dict[str, Any]],
    source: str,
    system_prompt: str | None = None,
    columns: Columns = Columns(),
) -> list[ChatExample]:
    """Parse `messages` or `prompt` / `response` rows (see the module docstring), or the
    columns `columns` names (`data.messages_key`, `data.prompt_key` / `prompt_template`
    with `data.response_key`, `data.answer_key`)."""
    out = []
    for n, row in enumerate(rows, 1):
        where = f"{source}: row {n}"
        msgs = tuple(_message(m, source, n) for m in _conversation(row, columns, where))
        if not any(m["role"] == "assistant" for m in msgs):
            raise DataError(f"{source}: row {n} has no assistant message to learn from")
        if system_prompt and msgs[0]["role"] != "system":
            msgs = ({"role": "system", "content": system_prompt}, *msgs)
        answer = columns.answer(row, where) if columns.answer_key else row.get("answer")
        out.append(
            ChatExample(
                str(row.get("id", f"row-{n}")),
                msgs,
                None if answer is None else str(answer),
                str(row.get("tag", "math")),
            )
        )
    return out


def _conversation(row: dict[str, Any], columns: Columns, where: str) -> list[Any]:
    """The row's messages: a conversation column, or a prompt and a response."""
    key = columns.messages_key
    if key is not None:
        if key not in row:
            raise columns.missing(where, row, f"data.messages_key = {key!r} names no column")
        return list(as_messages(row[key], where, f"column {key!r}"))
    mapped = columns.prompt_key or columns.prompt_template or columns.response_key
    if not mapped and "messages" in row:
        value = row["messages"]
        return list(value) if isinstance(value, list) else [value]
    response = columns.response_key or "response"
    if response in row and (mapped or "prompt" in row):
        prompt = columns.require_prompt(row, where)
        return [*prompt, {"role": "assistant", "content": as_text(row[response])}]
    raise columns.missing(
        where,
        row,
        "needs a conversation ('messages') or a prompt and a response ('prompt', "
        "'response'); set data.messages_key, or data.prompt_key and data.response_key",
    )


def _message(m: Any, source: str, n: int) -> dict[str, str]:
    if not isinstance(m, dict) or "role" not in m or "content" not in m:
        raise DataError(f"{source}: row {n}: each message needs 'role' and 'content'")
    if m["role"] not in ROLES:
        raise DataError(f"{source}: row {n}: unknown role {m['role']!r} (one of {ROLES})")
    return {"role": str(m["role"]), "content": str(m["content"])}


def chat_segments(tokenizer: Any, messages: tuple[dict[str, str], ...]) -> list[tuple[str, bool]]:
    """The rendered conversation as `(text, trained)` pieces; assistant turns are trained.

    Each assistant turn is the text between the template rendered up to it (with the
    generation prompt) and the template rendered through it, so the loss sees exactly what
    the model would generate: the reply and its end-of-turn token.
    """

    def render(msgs: tuple[dict[str, str], ...], gen: bool) -> str:
        text: str = tokenizer.apply_chat_template(
            list(msgs), tokenize=False, add_generation_prompt=gen
        )
        return text

    segments: list[tuple[str, bool]] = []
    done = ""
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        if i == 0:
            raise DataError("a conversation cannot start with an assistant message")
        start, end = render(messages[:i], True), render(messages[: i + 1], False)
        if not (start.startswith(done) and end.startswith(start)):
            raise DataError(
                "this model's chat template does not render a conversation prefix by prefix, "
                "so its assistant tokens cannot be located"
            )
        segments += [(start[len(done) :], False), (end[len(start) :], True)]
        done = end
    full = render(messages, False)
    if full.startswith(done) and len(full) > len(done):
        segments.append((full[len(done) :], False))
    return [(text, trained) for text, trained in segments if text]


def tokenize_chat(
    tokenizer: Any,
    messages: tuple[dict[str, str], ...],
    max_tokens: int,
) -> tuple[list[int], list[int], bool]:
    """`(token ids, loss mask, truncated)`: mask 1 on assistant tokens; cut to `max_tokens`."""
    ids: list[int] = []
    mask: list[int] = []
    for text, trained in chat_segments(tokenizer, messages):
        piece = tokenizer(text, add_special_tokens=False)["input_ids"]
        ids += piece
        mask += [int(trained)] * len(piece)
    truncated = len(ids) > max_tokens
    return ids[:max_tokens], mask[:max_tokens], truncated
