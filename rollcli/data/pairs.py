"""Preference pairs for DPO: a prompt, a chosen response and a rejected one.

File rows (jsonl, `.jsonl.gz` or parquet), detected row by row:

    {"prompt": "2+3?", "chosen": "5", "rejected": "6"}
    {"messages": [{"role": "user", "content": "2+3?"}], "chosen": "5", "rejected": "6"}
    {"chosen": "\\n\\nHuman: 2+3?\\n\\nAssistant: 5", "rejected": "\\n\\nHuman: 2+3?\\n\\nAssistant: 6"}

The last is Anthropic HH-RLHF's format: whole transcripts whose final assistant turns
differ; the shared turns before them are the prompt. `chosen` / `rejected` may also be
message lists (the conversation through the final assistant turn). The default data needs
no file: generated problems with a verified-correct answer (chosen) and a wrong one.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

import torch

from rollcli.data.batch import Batch
from rollcli.data.chat import chat_segments, worked_answer
from rollcli.data.columns import Columns
from rollcli.data.micro_batch import length_groups, trim_padding
from rollcli.data.padding import rollout_tensors
from rollcli.data.prompts import Prompt

Messages = tuple[dict[str, str], ...]
NO_MAPPING = Columns()  # roll's own column names
_HH_TURN = re.compile(r"\n\n(Human|Assistant):[ \t]?")


@dataclass(frozen=True)
class PreferencePair:
    id: str
    prompt: Messages  # the conversation before the compared assistant turn
    chosen: str
    rejected: str


def parse_hh_transcript(text: str) -> list[dict[str, str]]:
    """Anthropic HH transcript → chat messages.

    >>> parse_hh_transcript("\\n\\nHuman: Hi there\\n\\nAssistant: Hello!")
    [{'role': 'user', 'content': 'Hi there'}, {'role': 'assistant', 'content': 'Hello!'}]
    """
    parts = _HH_TURN.split(text)
    roles = {"Human": "user", "Assistant": "assistant"}
    return [
        {"role": roles[parts[i]], "content": parts[i + 1].strip()}
        for i in range(1, len(parts) - 1, 2)
    ]


def _split_last_reply(messages: list[dict[str, str]]) -> tuple[Messages, str] | None:
    if len(messages) < 2 or messages[-1]["role"] != "assistant":
        return None
    return tuple(messages[:-1]), messages[-1]["content"]


def _messages(value: Any) -> Messages:
    """A prompt given as text (one user turn) or as a message list."""
    if isinstance(value, str):
        return ({"role": "user", "content": value},)
    return tuple({"role": str(m["role"]), "content": str(m["content"])} for m in value)


def pair_from_row(
    row: dict[str, Any], row_id: str, columns: Columns = NO_MAPPING, where: str = ""
) -> PreferencePair | None:
    """One pair from any supported row format (`columns` names its columns); None when the
    row is unusable (no final assistant turns, or transcripts whose shared part differs)."""
    chosen, rejected = row[columns.chosen_key or "chosen"], row[columns.rejected_key or "rejected"]
    prompt = columns.prompt(row, where or row_id)
    if isinstance(chosen, str) and isinstance(rejected, str):
        if prompt is not None:  # {prompt | messages, chosen, rejected}
            return PreferencePair(row_id, prompt, chosen, rejected)
        chosen, rejected = parse_hh_transcript(chosen), parse_hh_transcript(rejected)
    else:  # message lists through the final assistant turn (after an optional prompt)
        prefix = list(prompt) if prompt is not None else []
        chosen, rejected = prefix + list(_messages(chosen)), prefix + list(_messages(rejected))
    a, b = _split_last_reply(chosen), _split_last_reply(rejected)
    if a is None or b is None or a[0] != b[0]:
        return None
    return PreferencePair(row_id, a[0], a[1], b[1])


def pairs_from_rows(
    rows: list[dict[str, Any]],
    source: str,
    system_prompt: str | None = None,
    columns: Columns = NO_MAPPING,
) -> tuple[list[PreferencePair], int]:
    """`(pairs, rows skipped)`; a row without the chosen and rejected columns is an error."""
    pairs, skipped = [], 0
    keys = (columns.chosen_key or "chosen", columns.rejected_key or "rejected")
    for n, row in enumerate(rows, 1):
        absent = [k for k in keys if k not in row]
        if absent:
            key = "data.chosen_key" if absent[0] == keys[0] else "data.rejected_key"
            raise columns.missing(
                f"{source}: row {n}",
                row,
                f"no {absent[0]!r} column for the {key.split('.')[1].split('_')[0]} response; "
                f"set {key}",
            )
        pair = pair_from_row(row, str(row.get("id", f"row-{n}")), columns, f"{source}: row {n}")
        if pair is None:
            skipped += 1
            continue
        if system_prompt and pair.prompt[0]["role"] != "system":
            system = {"role": "system", "content": system_prompt}
            pair = PreferencePair(pair.id, (system, *pair.prompt), pair.chosen, pair.rejected)
        pairs.append(pair)
    return pairs, skipped


def verifiable_pairs(prompts: list[Prompt], seed: int) -> list[PreferencePair]:
    """Pairs from generated problems: the generator's answer (chosen) against a wrong one
    (rejected): an integer answer off by 1 to 3, else another problem's different answer.

    >>> p = Prompt("p1", ({"role": "user", "content": "Compute: 2 + 3 ="},), "5")
    >>> pair = verifiable_pairs([p], seed=0)[0]
    >>> pair.chosen, pair.rejected != pair.chosen
    ('2 + 3 = 5', True)
    """
    rng = random.Random(seed)
    answers = sorted({p.answer for p in prompts})
    pairs = []
    for p in prompts:
        wrong = _wrong_answer(p.answer, answers, rng)
        if wrong is None:
            continue
        question = p.messages[-1]["content"]
        pairs.append(
            PreferencePair(
                p.id, p.messages, worked_answer(question, p.answer), worked_answer(question, wrong)
            )
        )
    return pairs


def _wrong_answer(answer: str, answers: list[str], rng: random.Random) -> str | None:
    try:
        value = int(answer)
    except ValueError:
        others = [a for a in answers if a != answer]
        return rng.choice(others) if others else None
    return str(value + rng.choice((-3, -2, -1, 1, 2, 3)))


def tokenize_pair(
    tokenizer: Any,
    pair: PreferencePair,
    max_prompt_tokens: int,
    max_response_tokens: int,
) -> tuple[list[int], list[int], list[int]] | None:
    """`(prompt ids, chosen ids, rejected ids)` through the chat template (each response
    ends with the end-of-turn token); None when the prompt is longer than allowed.
    Responses are cut to `max_response_tokens`."""
    ids = pair_ids(tokenizer, pair, max_response_tokens)
    return None if len(ids[0]) > max_prompt_tokens else ids


def pair_ids(
    tokenizer: Any,
    pair: PreferencePair,
    max_response_tokens: int,
) -> tuple[list[int], list[int], list[int]]:
    """`tokenize_pair` without the prompt limit (the caller applies the overlong rule)."""
    out = []
    for reply in (pair.chosen, pair.rejected):
        segments = chat_segments(tokenizer, (*pair.prompt, {"role": "assistant", "content": reply}))
        trained = [i for i, (_, t) in enumerate(segments) if t][-1]
        prompt_text = "".join(text for text, _ in segments[:trained])
        out.append((prompt_text, segments[trained][0]))
    (prompt_text, chosen), (_, rejected) = out
    prompt_ids = tokenizer(prompt_text, add_special_tokens=False)["input_ids"]
    chosen_ids, rejected_ids = (
        tokenizer(text, add_special_tokens=False)["input_ids"][:max_response_tokens]
        for text in (chosen, rejected)
    )
    return prompt_ids, chosen_ids, rejected_ids


def pair_batch(pairs: list[tuple[list[int], list[int], list[int]]], pad_id: int) -> Batch:
    """The rollout layout (`rollcli.data.padding`) with each pair's rows adjacent: row
    `2i` is pair i's prompt + chosen response, row `2i + 1` its prompt + rejected one."""
    prompts = [prompt for prompt, _, _ in pairs for _ in range(2)]
    responses = [reply for _, chosen, rejected in pairs for reply in (chosen, rejected)]
    return Batch(rollout_tensors(prompts, responses, pad_id))


def pair_micro_batches(
    batch: Batch, size: int, max_tokens: int | None = None
) -> list[tuple[torch.Tensor, Batch]]:
    """Micro-batches of at most `size` pairs (both rows of a pair together, as the loss
    compares them; given `max_tokens`, at most that many padded tokens), pairs of similar
    length together, each trimmed of padding."""
    lengths = batch["attention_mask"].sum(dim=1).view(-1, 2).amax(dim=1)
    out = []
    for pairs in length_groups(lengths, size, max_tokens, rows_per_item=2):
        rows = torch.stack([2 * pairs, 2 * pairs + 1], dim=1).flatten()
        out.append((rows, trim_padding(batch.select(rows))))
    return out
