"""The `data` section of a recipe: where prompts, pairs or sequences come from, and the
mixed-domain (`data.mix`) domains."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from rollcli.config.sections import PositiveFloat, PositiveInt, Section


class DataConfig(Section):
    """Where prompts come from.

    `source: reasoning_gym` draws seeded problems from a reasoning-gym generator (`task` and
    `task_args`); `source: file` reads `train_path` / `val_path` (jsonl or parquet, one
    object a line with `prompt` or `messages`, `answer`, optional `tag`).
    """

    source: Literal["reasoning_gym", "file", "humaneval", "ifeval", "mix"] = "reasoning_gym"
    task: str = "chain_sum"
    task_args: dict[str, int | float | str | bool | list[str]] = Field(default_factory=dict)
    train_path: str | None = None
    val_path: str | None = None
    train_size: PositiveInt = 2000
    val_size: PositiveInt = 256  # distinct held-out problems, none of them in training
    system_prompt: str | None = None
    prompt_suffix: str = ""
    max_prompt_tokens: PositiveInt = 256

    mix: dict[str, MixDomainConfig] = Field(default_factory=dict)  # source: mix, by domain tag

    @model_validator(mode="after")
    def _file_needs_path(self) -> DataConfig:
        if self.source == "file" and not self.train_path:
            raise ValueError("data.source is 'file' but data.train_path is not set")
        _paths_need_file(self.source, self.train_path, self.val_path, "data.")
        return self

    @model_validator(mode="after")
    def _mix_needs_domains(self) -> DataConfig:
        if self.source == "mix" and not self.mix:
            raise ValueError(
                "data.source is 'mix' but data.mix is empty; give each domain a ratio and a "
                "source, e.g. data.mix.math = {ratio: 0.5, source: reasoning_gym, task: chain_sum}"
            )
        if self.source != "mix" and self.mix:
            raise ValueError(f"data.mix applies to data.source = 'mix' (it is {self.source!r})")
        return self


class MixDomainConfig(Section):
    """One domain of `data.source: mix`: its share of the prompts and where they come from.

    The domain's name (its key in `data.mix`) becomes every one of its prompts' `tag`, which
    `reward.fn: mix` routes to that domain's reward (`reward.routes`). Sizes are
    `data.train_size` and `data.val_size` split by ratio (at least one each); a source with
    fewer training prompts (HumanEval) repeats them, so the pool keeps the ratios.
    """

    ratio: PositiveFloat
    source: Literal["reasoning_gym", "file", "humaneval", "ifeval"]
    task: str = "chain_sum"
    task_args: dict[str, int | float | str | bool | list[str]] = Field(default_factory=dict)
    train_path: str | None = None
    val_path: str | None = None
    prompt_suffix: str = ""

    @model_validator(mode="after")
    def _file_needs_path(self) -> MixDomainConfig:
        if self.source == "file" and not self.train_path:
            raise ValueError("source is 'file' but train_path is not set")
        _paths_need_file(self.source, self.train_path, self.val_path, "")
        return self


def _paths_need_file(source: str, train_path: str | None, val_path: str | None, at: str) -> None:
    """A data file named for a source that reads none would be silently unused: refused."""
    for key, path in (("train_path", train_path), ("val_path", val_path)):
        if path is not None and source != "file":
            raise ValueError(
                f"{at}{key} applies to {at}source = 'file' (it is {source!r}), so {path!r} "
                f"would not be read; add {at}source=file or remove {at}{key}"
            )
