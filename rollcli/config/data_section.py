"""The `data` section of a recipe: where prompts, pairs or conversations come from, which
columns hold what, and the mixed-domain (`data.mix`) domains. docs/data.md is its page."""

from __future__ import annotations

import re
from typing import Any, Literal, TypeVar

from pydantic import Field, model_validator

from rollcli.config.sections import PositiveFloat, PositiveInt, Section

GENERATED = ("reasoning_gym", "humaneval", "ifeval")
# the keys that map a dataset's columns, and the columns they default to
COLUMN_KEYS = {
    "prompt_key": "prompt (text) or messages (a chat-message list)",
    "prompt_template": "none",
    "answer_key": "answer (or a code row's tests, an instruction row's constraints)",
    "answer_pattern": "none",
}
DATASET_KEYS = ("name", "split", "val_split", "val_path", "sample", *COLUMN_KEYS)
GENERATOR_KEYS = ("task", "task_args")
# the keys only some data sources read, by source (every other key is read by all): a dataset's
# location and columns, a generator's task, a mix's domains. `roll train --dry-run` prints
# only the chosen source's (`unread_keys`, config/applicable.py)
SOURCE_KEYS: dict[str, tuple[str, ...]] = {
    "file": ("path", *DATASET_KEYS),
    "reasoning_gym": GENERATOR_KEYS,
    "humaneval": (),
    "ifeval": (),
    "mix": ("mix",),
}
_TEMPLATE_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def template_fields(template: str) -> list[str]:
    """The columns a `data.prompt_template` names, in order: `{name}` fields (any other
    brace, such as `\\boxed{}`, is kept as written).

    >>> template_fields("{question}\\nPut the final answer in \\\\boxed{}.")
    ['question']
    """
    return _TEMPLATE_FIELD.findall(template)


class SampleConfig(Section):
    """`data.sample`: a seeded sample of `n` training rows, stratified by column `by` (an
    equal share per distinct value, `rollcli.data.stratified`; unset: a plain seeded sample).
    The ROLL paper's "5,000 sampled by difficulty" is `{n: 5000, by: difficulty}`."""

    n: PositiveInt
    by: str | None = None
    seed: int | None = None  # None: the recipe's seed


class _Dataset(Section):
    """A dataset read through the `datasets` library, and how its columns map to a prompt
    and an answer (shared by `data` and each `data.mix` domain)."""

    path: str | None = None  # hub dataset name, local file, folder, or save_to_disk folder
    name: str | None = None  # the hub dataset's configuration (`main` for openai/gsm8k)
    split: str = "train"
    val_path: str | None = None
    val_split: str | None = None  # validation from this split (of val_path, else of path)
    prompt_key: str | None = None  # None: `prompt` (text) or `messages` (a chat list)
    prompt_template: str | None = None  # `{column}` fields, e.g. "{question}\nAnswer:"
    answer_key: str | None = None  # None: `answer` (or `tests` / `constraints`)
    answer_pattern: str | None = None  # one group, e.g. '####\s*(.+)$' (GSM8K)
    sample: SampleConfig | None = None  # n training rows, stratified by a column (`by`)

    @model_validator(mode="before")
    @classmethod
    def _train_path_is_path(cls, data: Any) -> Any:
        """`train_path` is the older name of `path` (recipes and saved runs use it)."""
        if isinstance(data, dict) and "train_path" in data:
            data = dict(data)
            train_path = data.pop("train_path")
            if data.get("path") is not None and train_path is not None:
                raise ValueError(
                    "train_path and path name the same thing (train_path is the older name); "
                    "set only path"
                )
            if train_path is not None:
                data["path"] = train_path
        return data

    def dataset_problem(self, at: str) -> str | None:
        """What is wrong with the dataset keys, whatever the pipeline; `at` prefixes keys."""
        if self.path is None:
            given = [k for k in DATASET_KEYS if getattr(self, k) != _DEFAULTS[k]]
            if given:
                return (
                    f"{at}{given[0]} applies to a dataset read from {at}path (a hub dataset, a "
                    f"file or a folder), and {at}path is not set; set it or remove "
                    f"{at}{given[0]}"
                )
            return None
        if self.prompt_key is not None and self.prompt_template is not None:
            return (
                f"{at}prompt_template names its columns itself ({{column}} fields); set "
                f"{at}prompt_key or {at}prompt_template, not both"
            )
        if self.prompt_template is not None and not template_fields(self.prompt_template):
            return (
                f"{at}prompt_template = {self.prompt_template!r} names no column; write the "
                f"prompt's columns as {{column}}, e.g. '{{question}}\\nAnswer:'"
            )
        if self.answer_pattern is not None:
            try:
                groups = re.compile(self.answer_pattern).groups
            except re.error as exc:
                return f"{at}answer_pattern = {self.answer_pattern!r} is not a regular expression ({exc})"
            if groups != 1:
                return (
                    f"{at}answer_pattern = {self.answer_pattern!r} has {groups} groups; it needs "
                    f"exactly one, the answer, e.g. '####\\s*(.+)$'"
                )
        same_source = self.val_path is None or self.val_path == self.path
        if same_source and (self.val_split or ("train" if self.val_path else None)) == self.split:
            key = f"{at}val_split" if self.val_split else f"{at}val_path"
            return (
                f"{key}: validation would be {at}split = {self.split!r} of {self.path}, the "
                f"training data itself; give another split or file, or leave {key} out "
                f"(validation is then held out of training)"
            )
        return None


_DEFAULTS = {k: f.default for k, f in _Dataset.model_fields.items()}


class DataConfig(_Dataset):
    """Where prompts come from (every pipeline with data: rlvr, dpo, sft, distill).

    `path` reads a dataset through the `datasets` library: a hub dataset name (`name` for
    its configuration), a local jsonl / json / parquet / csv file (`.gz` too), a folder of
    them, or a `save_to_disk` folder; setting it selects `source: file`. Validation is
    `val_split` (of `path`), `val_path` (its `val_split`, default `train`), or the last
    `val_size` distinct prompts held out of training. The column keys map a dataset as it
    is (docs/data.md). `source: reasoning_gym` draws seeded problems (`task`, `task_args`);
    `humaneval`, `ifeval` and `mix` (by domain) are the other generated sources.
    """

    source: Literal["reasoning_gym", "file", "humaneval", "ifeval", "mix"] = "reasoning_gym"
    task: str = "chain_sum"
    task_args: dict[str, int | float | str | bool | list[str]] = Field(default_factory=dict)
    # generated sources: problems drawn (default 2000); a dataset: a seeded sample of its
    # training rows (default all)
    train_size: PositiveInt | None = None
    # validation problems: a generated source or a held-out slice draws this many distinct
    # ones (default 256); a validation file or split is sampled to this many (default all)
    val_size: PositiveInt | None = None
    system_prompt: str | None = None
    prompt_suffix: str = ""
    max_prompt_tokens: PositiveInt = 256
    overlong: Literal["drop", "error"] = "drop"  # a prompt over max_prompt_tokens
    # dpo: the preferred and the rejected response (text, or messages through the reply)
    chosen_key: str | None = None  # None: `chosen`
    rejected_key: str | None = None  # None: `rejected`
    # sft and distill: a conversation, or a prompt (prompt_key / template) and a response
    messages_key: str | None = None  # None: `messages`
    response_key: str | None = None  # None: `response`

    mix: dict[str, MixDomainConfig] = Field(default_factory=dict)  # source: mix, by domain tag

    @model_validator(mode="before")
    @classmethod
    def _path_selects_file(cls, data: Any) -> Any:
        return _path_selects_file(data)

    @model_validator(mode="after")
    def _file_needs_path(self) -> DataConfig:
        return _checked_source(self, "data.")

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

    def pipeline_problem(self, pipeline: str) -> str | None:
        """A data key that `pipeline` would not read (`None`: every key set applies)."""
        from rollcli.config.pipeline_spec import pipelines_where, spec_of

        items = spec_of(pipeline).data_items
        for key, readers in ITEM_KEYS.items():
            if getattr(self, key) is not None and items not in readers:
                names = [p for r in readers for p in pipelines_where(data_items=r)]
                return (
                    f"data.{key} applies to the {' and '.join(names)} pipeline"
                    f"{'s' if len(names) > 1 else ''}, and this recipe's pipeline is "
                    f"{pipeline!r}; remove it"
                )
        if items == "chats" and self.max_prompt_tokens != _MAX_PROMPT_DEFAULT:
            return (
                f"data.max_prompt_tokens applies to rlvr and dpo; {pipeline} cuts each sample "
                f"at {pipeline}.max_tokens and leaves out one with no reply token within it "
                "(data.overlong), so set that instead"
            )
        return None

    def unread_keys(self, items: str | None) -> set[str]:
        """The keys that neither this section's `source` nor a pipeline whose rows become
        `items` reads (left out of the recipe `roll train --dry-run` prints).

        >>> sorted(DataConfig(path="a.jsonl").unread_keys("prompts"))[:5]
        ['chosen_key', 'messages_key', 'mix', 'rejected_key', 'response_key']
        >>> {"task", "path", "answer_key"} <= DataConfig(source="mix", mix={"m": {"ratio": 1}}).unread_keys("prompts")
        True
        """
        unread = unread_by_source(self, self.source)
        unread |= {key for key, readers in ITEM_KEYS.items() if items not in readers}
        if items == "chats":
            unread.add("max_prompt_tokens")
        return unread


def unread_by_source(section: Any, source: str) -> set[str]:
    """The keys of `section` (`data` or a `data.mix` domain) that only other sources read."""
    others = {key for keys in SOURCE_KEYS.values() for key in keys}
    return (others - set(SOURCE_KEYS[source])) & set(type(section).model_fields)


# the data keys that only some pipelines read, by what their rows become (`data_items`)
ITEM_KEYS = {
    "chosen_key": ("pairs",),
    "rejected_key": ("pairs",),
    "messages_key": ("chats",),
    "response_key": ("chats",),
    "answer_key": ("prompts", "chats"),
    "answer_pattern": ("prompts", "chats"),
}
_MAX_PROMPT_DEFAULT = DataConfig.model_fields["max_prompt_tokens"].default


class MixDomainConfig(_Dataset):
    """One domain of `data.source: mix`: its share of the prompts and where they come from
    (a generator, or a dataset with the same keys as `data`).

    The domain's name (its key in `data.mix`) becomes every one of its prompts' `tag`, which
    `reward.fn: mix` routes to that domain's reward (`reward.routes`). Sizes are
    `data.train_size` and `data.val_size` split by ratio (at least one each); a source with
    fewer training prompts (HumanEval) repeats them, so the pool keeps the ratios.
    """

    ratio: PositiveFloat
    source: Literal["reasoning_gym", "file", "humaneval", "ifeval"] = "reasoning_gym"
    task: str = "chain_sum"
    task_args: dict[str, int | float | str | bool | list[str]] = Field(default_factory=dict)
    prompt_suffix: str = ""

    @model_validator(mode="before")
    @classmethod
    def _path_selects_file(cls, data: Any) -> Any:
        return _path_selects_file(data)

    @model_validator(mode="after")
    def _file_needs_path(self) -> MixDomainConfig:
        return _checked_source(self, "")

    def unread_keys(self) -> set[str]:
        """The keys only other sources read (`SOURCE_KEYS`)."""
        return unread_by_source(self, self.source)


def _path_selects_file(data: Any) -> Any:
    """Setting `path` (or `train_path`) selects the dataset reader (`source: file`)."""
    named = isinstance(data, dict) and (data.get("path") or data.get("train_path")) is not None
    if named and "source" not in data:
        data = {**data, "source": "file"}
    return data


_Source = TypeVar("_Source", "DataConfig", "MixDomainConfig")


def _checked_source(section: _Source, at: str) -> _Source:
    """`data` (or a `data.mix` domain, `at` ""): a dataset where the source reads one, the
    dataset keys right, no generator key beside a dataset."""
    if section.source == "file" and not section.path:
        raise ValueError(
            f"{at}source is 'file' but {at}path is not set; give a hub dataset name, a file "
            f"or a folder, e.g. {at}path=openai/gsm8k"
        )
    if section.path is not None and section.source != "file":
        raise ValueError(
            f"{at}path applies to {at}source = 'file' (it is {section.source!r}), so "
            f"{section.path!r} would not be read; remove {at}source ({at}path selects the "
            f"file reader) or {at}path"
        )
    problem = section.dataset_problem(at)
    if problem:
        raise ValueError(problem)
    _generator_keys_need_generator(section, section.source, at)
    return section


def _generator_keys_need_generator(section: Section, source: str, at: str) -> None:
    """`task` / `task_args` set for a source that generates nothing from them would be
    silently unused (and left out of the dry run's recipe): refused. A mix's domains take
    their own."""
    if source == "reasoning_gym":
        return
    fields = type(section).model_fields
    for key in GENERATOR_KEYS:
        if getattr(section, key) != fields[key].get_default(call_default_factory=True):
            own = f" (each domain takes its own: {at}mix.NAME.{key})" if source == "mix" else ""
            raise ValueError(
                f"{at}{key} applies to {at}source = 'reasoning_gym' (it is {source!r}), so it "
                f"would not be used; remove {at}{key}{own}"
            )
