"""Which columns of a dataset row hold the prompt, the answer, the responses: the `data.*_key`
settings, `data.prompt_template` and `data.answer_pattern`, applied to one row at a time.

Unset keys keep roll's own file schema: a `prompt` (text) or `messages` (a chat-message
list), an `answer` (or a code row's `tests`, an instruction row's `constraints`), DPO's
`chosen` / `rejected`, SFT's `messages` or `prompt` / `response`. A row that lacks what a
key names is an error naming the row, the key to set and the columns the row has.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from rollcli.config.data_section import DataConfig, MixDomainConfig, template_fields
from rollcli.data.prompts import DataError, answer_spec

Messages = tuple[dict[str, str], ...]


@dataclass(frozen=True)
class Columns:
    prompt_key: str | None = None
    prompt_template: str | None = None
    answer_key: str | None = None
    answer_pattern: str | None = None
    chosen_key: str | None = None
    rejected_key: str | None = None
    messages_key: str | None = None
    response_key: str | None = None
    # every column of the dataset, for error messages (rows may be read with fewer)
    available: tuple[str, ...] | None = None

    @classmethod
    def of(cls, section: DataConfig | MixDomainConfig) -> Columns:
        """The column keys of a `data` section, or of a `data.mix` domain (which maps the
        prompt and the answer only: its rows are rlvr's). Each key is read by its name, so
        a renamed one fails here instead of reading as unset.

        >>> Columns.of(DataConfig(source="file", path="t.jsonl", chosen_key="good")).chosen_key
        'good'
        """
        columns = cls(
            prompt_key=section.prompt_key,
            prompt_template=section.prompt_template,
            answer_key=section.answer_key,
            answer_pattern=section.answer_pattern,
        )
        if isinstance(section, DataConfig):
            columns = replace(
                columns,
                chosen_key=section.chosen_key,
                rejected_key=section.rejected_key,
                messages_key=section.messages_key,
                response_key=section.response_key,
            )
        return columns

    @property
    def mapped(self) -> bool:
        """Whether any key maps the columns (else roll's own schema applies)."""
        return any(
            getattr(self, k) is not None for k in self.__dataclass_fields__ if k != "available"
        )

    def names(self) -> set[str]:
        """The columns these keys read (with the schema's defaults)."""
        names = {"id", "tag", "prompt", "messages", "answer", "tests", "entry_point", "stub"}
        names |= {"constraints", "chosen", "rejected", "response"}
        names |= {v.split(".")[0] for k, v in vars(self).items() if k.endswith("_key") and v}
        if self.prompt_template:
            names |= set(template_fields(self.prompt_template))
        return names

    # ---- the prompt -------------------------------------------------------------------
    def prompt(self, row: dict[str, Any], where: str) -> Messages | None:
        """The row's prompt as chat messages, or None when it has no prompt column at all
        (the caller decides whether that is an error: DPO's transcripts carry theirs)."""
        if self.prompt_template is not None:
            return (user(fill_template(self.prompt_template, row, where, self)),)
        key = self.prompt_key
        if key is not None:
            if key not in row:
                raise self.missing(where, row, f"data.prompt_key = {key!r} names no column")
            return as_messages(row[key], where, f"data.prompt_key column {key!r}")
        if "messages" in row:
            return as_messages(row["messages"], where, "column 'messages'")
        if "prompt" in row:
            return as_messages(row["prompt"], where, "column 'prompt'")
        return None

    def is_chat(self, row: dict[str, Any]) -> bool:
        """Whether the row's prompt cell is a chat-message list (not text, nor a template).

        >>> Columns().is_chat({"prompt": [{"role": "user", "content": "hi"}]})
        True
        >>> Columns(prompt_key="question").is_chat({"question": "hi", "messages": []})
        False
        """
        if self.prompt_template is not None:
            return False
        key = self.prompt_key or ("messages" if "messages" in row else "prompt")
        return isinstance(row.get(key), list)

    def require_prompt(self, row: dict[str, Any], where: str) -> Messages:
        found = self.prompt(row, where)
        if found is None:
            raise self.missing(
                where,
                row,
                "no prompt: roll reads a 'prompt' (text) or 'messages' (chat) column; set "
                f"data.prompt_key{_example(self.names_of(row))} or data.prompt_template",
            )
        return found

    def names_of(self, row: dict[str, Any]) -> list[str]:
        """The dataset's columns (the row's, where they are not known), a struct column's
        fields by their dotted keys (`reward_model.ground_truth`)."""
        if self.available is not None:
            return sorted(self.available)
        fields = [f"{c}.{f}" for c, v in row.items() if isinstance(v, dict) for f in v]
        return sorted([*row, *fields])

    def missing(self, where: str, row: dict[str, Any], what: str) -> DataError:
        """The error for a row that lacks what a key names, with the dataset's columns."""
        return DataError(
            f"{where}: {what} (its columns: {', '.join(self.names_of(row)) or 'none'})"
        )

    # ---- the answer -------------------------------------------------------------------
    def answer(self, row: dict[str, Any], where: str) -> str | None:
        """The reference answer as text, with `answer_pattern` applied: None when the
        pattern does not match (the caller counts and leaves the row out)."""
        key = self.answer_key or "answer"
        row = with_field(row, key)
        if key not in row:
            if self.answer_key is None:
                spec = answer_spec(row)
                if spec is not None:
                    return spec
            hint = (
                f"data.answer_key = {key!r} names no column"
                if self.answer_key
                else (
                    "no 'answer' column (nor 'tests' or 'constraints', a code or an "
                    "instruction row's); set data.answer_key"
                )
            )
            raise self.missing(where, row, hint + _answer_example(self.names_of(row), key))
        text = as_text(row[key])
        if self.answer_pattern is None:
            return text
        found = re.search(self.answer_pattern, text, re.MULTILINE)
        return found.group(1).strip() if found else None


def with_field(row: dict[str, Any], key: str) -> dict[str, Any]:
    """`row` with a dotted key (`reward_model.ground_truth`: a field of a struct column, as
    verl-style datasets keep their answer) set from the struct, where the row has it.

    >>> with_field({"reward_model": {"ground_truth": "B"}}, "reward_model.ground_truth")["reward_model.ground_truth"]
    'B'
    """
    if key in row or "." not in key:
        return row
    value: Any = row
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return row
        value = value[part]
    return {**row, key: value}


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def as_text(value: Any) -> str:
    """A cell as text: strings as they are, numbers as written, anything else as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float, bool)):
        return str(value)
    return json.dumps(value)


def as_messages(value: Any, where: str, what: str) -> Messages:
    """A text cell as one user turn, a chat-message list as its messages."""
    if isinstance(value, str):
        return (user(value),)
    if isinstance(value, list) and value:
        out = []
        for m in value:
            if not isinstance(m, dict) or "role" not in m or "content" not in m:
                raise DataError(
                    f"{where}: {what} is a list, but not of chat messages "
                    "({'role': ..., 'content': ...})"
                )
            out.append({"role": str(m["role"]), "content": as_text(m["content"])})
        return tuple(out)
    raise DataError(f"{where}: {what} is neither text nor a chat-message list")


def fill_template(
    template: str, row: dict[str, Any], where: str, columns: Columns | None = None
) -> str:
    """`template` with each `{column}` replaced by the row's value (other braces kept).

    >>> fill_template("{question} Put it in \\\\boxed{}.", {"question": "1+1?"}, "row 1")
    '1+1? Put it in \\\\boxed{}.'
    """
    absent = [name for name in template_fields(template) if name not in row]
    if absent:
        what = f"data.prompt_template names {{{absent[0]}}}, not a column"
        raise (columns or Columns()).missing(where, row, what)
    return re.sub(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: as_text(row[m.group(1)]), template)


def missing(where: str, row: dict[str, Any], what: str) -> DataError:
    return Columns().missing(where, row, what)


# names datasets give their reference answer, in the order one is suggested
ANSWER_NAMES = ("answer", "ground_truth", "final_answer", "solution", "label", "target")


def _answer_example(names: list[str], key: str) -> str:
    """A `data.answer_key` to suggest: a column named like an answer, else a field of a
    struct column named so (`reward_model.ground_truth`, verl's layout): a dotted key
    reads it.

    >>> _answer_example(["prompt", "reward_model", "reward_model.ground_truth"], "answer")
    ' (e.g. data.answer_key=reward_model.ground_truth, a field of the struct column reward_model)'
    >>> _answer_example(["q", "solution"], "answer"), _answer_example(["q"], "answer")
    (' (e.g. data.answer_key=solution)', '')
    """
    for wanted in ANSWER_NAMES:
        found = [n for n in names if n.rsplit(".", 1)[-1] == wanted and n != key]
        if found:
            column = found[0].split(".")[0]
            inside = f", a field of the struct column {column}" if "." in found[0] else ""
            return f" (e.g. data.answer_key={found[0]}{inside})"
    return ""


# column names datasets give their prompt text, in the order one is suggested
PROMPT_NAMES = ("question", "problem", "prompt", "instruction", "query", "input", "text")


def _example(names: list[str]) -> str:
    """A `data.prompt_key` to suggest: a column named like a prompt."""
    found = [n for n in PROMPT_NAMES if n in names]
    return f" (e.g. data.prompt_key={found[0]})" if found else ""
