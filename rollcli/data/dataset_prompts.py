"""RLVR prompts from a dataset (`data.path`): its rows through the column keys
(`rollcli.data.columns`), with the system prompt and suffix of the recipe, and the columns
the reward function asks for."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from pathlib import Path
from typing import Any

from rollcli.data.columns import Columns, user
from rollcli.data.dataset_rows import RowSample, Source, kind_of, read_table
from rollcli.data.prompts import DataError, Prompt, default_tag
from rollcli.rewards.conventions import ALL_COLUMNS


def source_label(source: Source) -> str:
    """A short name for prompt ids and messages: a file's stem, else `NAME-SPLIT`."""
    try:
        if kind_of(source.path) == "file":
            return Path(source.path).stem
    except DataError:
        pass
    return f"{Path(source.path.partition('@')[0]).name}-{source.split}"


def dataset_prompts(
    source: Source,
    columns: Columns,
    *,
    system_prompt: str | None = None,
    suffix: str = "",
    reward_columns: Collection[str] = (),
    limit: int | None = None,
    sample: RowSample | None = None,
) -> tuple[list[Prompt], int]:
    """(the prompts of `source`'s rows, how many rows `data.answer_pattern` left out). A
    row without a prompt or an answer column is an error naming the row and the key.
    `sample` reads only the rows it picks (`data.sample`)."""
    every = ALL_COLUMNS in reward_columns  # a TRL reward with **kwargs reads every column
    read = None if every else columns.names() | set(reward_columns)
    rows, names = read_table(source, read, limit, sample)
    return prompts_from_rows(
        rows,
        replace(columns, available=names),
        f"{source.key} ({source.describe()})",
        source_label(source),
        system_prompt=system_prompt,
        suffix=suffix,
        reward_columns=reward_columns,
    )


def prompts_from_rows(
    rows: list[dict[str, Any]],
    columns: Columns,
    where: str,
    label: str,
    *,
    system_prompt: str | None = None,
    suffix: str = "",
    reward_columns: Collection[str] = (),
) -> tuple[list[Prompt], int]:
    prompts, unmatched = [], 0
    every = ALL_COLUMNS in reward_columns
    for n, row in enumerate(rows, 1):
        at = f"{where}: row {n}"
        messages = columns.require_prompt(row, at)
        answer = columns.answer(row, at)
        if answer is None:
            unmatched += 1
            continue
        prompts.append(
            Prompt(
                str(row.get("id", f"{label}-{n}")),
                with_system(with_suffix(messages, suffix), system_prompt),
                answer,
                default_tag(row),
                {k: v for k, v in row.items() if every or k in reward_columns},
                columns.is_chat(row),
            )
        )
    if not prompts:
        raise DataError(
            f"{where}: data.answer_pattern = {columns.answer_pattern!r} matches the answer of "
            f"none of its {len(rows)} rows (the first: {_cut(columns, rows[0])}); fix the "
            "pattern or data.answer_key"
        )
    return prompts, unmatched


def with_suffix(messages: tuple[dict[str, str], ...], suffix: str) -> tuple[dict[str, str], ...]:
    """A one-turn text prompt with `data.prompt_suffix` appended (a chat is kept as it is)."""
    if not suffix or len(messages) != 1 or messages[0]["role"] != "user":
        return messages
    return (user(f"{messages[0]['content']} {suffix}".strip()),)


def with_system(
    messages: tuple[dict[str, str], ...], system_prompt: str | None
) -> tuple[dict[str, str], ...]:
    """`data.system_prompt` first, unless the conversation opens with its own."""
    if not system_prompt or messages[0]["role"] == "system":
        return messages
    return ({"role": "system", "content": system_prompt}, *messages)


def _cut(columns: Columns, row: dict[str, Any]) -> str:
    text = str(row.get(columns.answer_key or "answer", ""))
    return repr(text if len(text) <= 60 else "..." + text[-57:])


def file_prompts(path: str, *, system_prompt: str | None = None, suffix: str = "") -> list[Prompt]:
    """The prompts of a data file in roll's own schema (no column keys), every row."""
    return dataset_prompts(Source(path), Columns(), system_prompt=system_prompt, suffix=suffix)[0]
