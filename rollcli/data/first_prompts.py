"""The first few training prompts of a recipe's data, read cheaply: what the checks before
a run call the reward on (`rollcli.launch.reward_check`).

A dataset's first rows (through the recipe's column keys, with the columns the reward
reads), a generator's first seeded problems, each `data.mix` domain's first ones tagged
with the domain. Not the training order (that is the sampler's), and no validation split.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from typing import Any

from rollcli.config.data_section import DataConfig
from rollcli.data.columns import Columns
from rollcli.data.dataset_prompts import dataset_prompts
from rollcli.data.prompts import Prompt, humaneval_prompts, ifeval_prompts, reasoning_gym_prompts

ROWS_READ = 64  # rows read of a dataset to find `n` whose answer the pattern matches


def first_prompts(
    data: DataConfig, seed: int, n: int, reward_columns: Collection[str] = ()
) -> list[Prompt]:
    """Up to `n` prompts of `data` (of each domain of `data.mix`), as training reads them."""
    if data.source == "mix":
        from rollcli.data.prompt_sets import DATASET_FIELDS

        out: list[Prompt] = []
        for domain, d in data.mix.items():  # each domain as `_mix_sets` reads it
            dataset = {k: getattr(d, k) for k in DATASET_FIELDS} if d.source == "file" else {}
            sub = DataConfig(
                source=d.source,
                task=d.task,
                task_args=d.task_args,
                system_prompt=data.system_prompt,
                prompt_suffix=d.prompt_suffix or data.prompt_suffix,
                **dataset,
            )
            found = _first(sub, seed, n, reward_columns, f"data.mix.{domain}.")
            out += [replace(p, id=f"{domain}/{p.id}", tag=domain) for p in found]
        return out
    return _first(data, seed, n, reward_columns, "data.")


def _first(
    data: DataConfig, seed: int, n: int, reward_columns: Collection[str], at: str
) -> list[Prompt]:
    kwargs: dict[str, Any] = dict(system_prompt=data.system_prompt, suffix=data.prompt_suffix)
    if data.source == "file":
        from rollcli.data.prompt_sets import train_source

        prompts, _ = dataset_prompts(
            train_source(data, at),
            Columns.of(data),
            **kwargs,
            reward_columns=reward_columns,
            limit=ROWS_READ,
        )
        return prompts[:n]
    if data.source == "humaneval":
        return humaneval_prompts(**kwargs)[:n]
    if data.source == "ifeval":
        return ifeval_prompts(n, seed, **kwargs)
    return reasoning_gym_prompts(data.task, data.task_args, n, seed, **kwargs)
