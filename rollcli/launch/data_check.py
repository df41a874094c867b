"""The data a recipe reads, checked before anything starts.

`check_data` (by `roll plan`, `roll train --dry-run`, `roll doctor` and `roll train`
itself, through `check_recipe`): every dataset the recipe names exists, and its first rows
are read through the recipe's column keys, so a missing column, an answer pattern that
matches nothing or validation that is the training data itself is refused in one message
naming the file, the row and the key to set, before Ray starts. A hub dataset that is not
in the local cache cannot be read here: it is named in a note ("will be downloaded").

`prepare_data` (by `roll train`, before Ray starts, for datasets and `data.overlong:
error`): the whole data read and tokenized as the pipeline will train on it
(`rollcli.data.prepared`; the pipeline gets the same objects back), so an overlong prompt
under `data.overlong=error`, or a data set the overlong rule empties, stops the run there.
A generated source's validation problems are drawn there too (`check_generated_data`), so
a `data.val_size` the generator cannot give is refused as a dataset's is.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from rollcli.config.pipeline_spec import PROMPTS, spec_of
from rollcli.config.recipe import DPORecipe, RLVRRecipe

if TYPE_CHECKING:
    from rollcli.config.data_section import DataConfig
    from rollcli.config.recipe import RecipeConfig
    from rollcli.data.dataset_rows import Source

FIRST_ROWS = 64  # rows read of each source by the check


def check_data(cfg: RecipeConfig) -> list[str]:
    """Raise what training would refuse of the recipe's datasets; return the notes (a hub
    dataset that `roll train` will download)."""
    data = getattr(cfg, "data", None)
    if data is None:
        return []
    notes: list[str] = []
    for at, section in _datasets(data):
        notes += _check_dataset(cfg, data, section, at)
    return list(dict.fromkeys(notes))  # a dataset whose two splits are read: one note


def _datasets(data: DataConfig) -> list[tuple[str, Any]]:
    """(key prefix, section) of each dataset: `data`, or the file domains of `data.mix`."""
    if data.source == "file":
        return [("data.", data)]
    if data.source == "mix":
        return [(f"data.mix.{d}.", m) for d, m in data.mix.items() if m.source == "file"]
    return []


def _check_dataset(cfg: RecipeConfig, data: DataConfig, section: Any, at: str) -> list[str]:
    from rollcli.data.dataset_rows import hub_cached, kind_of
    from rollcli.data.prompt_sets import train_source, val_source
    from rollcli.data.prompts import DataError

    notes, firsts = [], []
    train = train_source(section, at)
    for source in filter(None, (train, val_source(section, at))):
        try:
            kind = kind_of(source.path)
        except DataError as exc:
            raise DataError(f"{source.key}: {exc}") from None
        if kind == "hub" and not hub_cached(source):
            notes.append(
                f"the hub dataset {source.path} is not in the Hugging Face cache; `roll "
                "train` downloads it (its columns are checked then)"
            )
            continue
        if source is train and getattr(section, "sample", None) is not None:
            _check_sample(section, source, cfg.seed, at)
        firsts.append(_first_prompts(cfg, data, section, source))
    if len(firsts) == 2 and firsts[0] and firsts[0] == firsts[1]:
        key = f"{at}val_path" if section.val_path else f"{at}val_split"
        raise DataError(
            f"{key}: the first {len(firsts[0])} validation rows are the first training rows "
            "(the same data?); give held-out data, or leave it out (validation is then held "
            "out of training)"
        )
    return notes


def _check_sample(section: Any, source: Source, seed: int, at: str) -> None:
    """`data.sample` can be drawn: its column exists and the rows suffice (the sample's
    index, not its rows, is computed here)."""
    from rollcli.data.dataset_rows import load_split, sampled_indices
    from rollcli.data.prompt_sets import row_sample

    sample = row_sample(section, seed, at)
    assert sample is not None
    sampled_indices(load_split(source), sample, source)


def _first_prompts(cfg: RecipeConfig, data: DataConfig, section: Any, source: Source) -> list:
    """The first rows of `source` as the pipeline reads them (an error names the row and
    the key); their prompts, to compare validation with training."""
    from rollcli.data.chat import chat_examples_from_rows
    from rollcli.data.columns import Columns
    from rollcli.data.dataset_prompts import prompts_from_rows
    from rollcli.data.dataset_rows import read_table
    from rollcli.data.pairs import pairs_from_rows

    rows, names = read_table(source, limit=FIRST_ROWS)
    columns = replace(Columns.of(section), available=names)
    where = f"{source.key} ({source.describe()})"
    items = spec_of(cfg).data_items
    if items == "pairs":
        pairs, _ = pairs_from_rows(rows, where, data.system_prompt, columns)
        return [p.prompt for p in pairs]
    if items == "chats":
        return [ex.messages for ex in chat_examples_from_rows(rows, where, None, columns)]
    prompts, _ = prompts_from_rows(rows, columns, where, "row")
    return [p.messages for p in prompts]


def prepare_data(cfg: RecipeConfig, model_path: str) -> None:
    """Read and tokenize the whole data as the pipeline will (once: the pipeline gets it
    back), for a dataset or under `data.overlong: error`; raises what training would."""
    data = getattr(cfg, "data", None)
    items = spec_of(cfg).data_items
    if data is None or items is None:
        return
    check_generated_data(cfg)
    reads_files = data.source == "file" or any(m.source == "file" for m in data.mix.values())
    if not reads_files and data.overlong != "error":
        return
    from rollcli.data import prepared
    from rollcli.strategies.hf_model import load_tokenizer

    tokenizer = load_tokenizer(_tokenizer_path(cfg, model_path))
    if items == PROMPTS:
        from rollcli.rewards.conventions import reward_columns

        assert isinstance(cfg, RLVRRecipe)  # the spec's pipeline whose rows are prompts
        columns = reward_columns(cfg.reward)
        prepared.prompt_data(data, cfg.seed, tokenizer, columns)
    elif items == "pairs":
        assert isinstance(cfg, DPORecipe)  # the spec's pipeline whose rows are pairs
        prepared.pair_data(data, cfg.seed, tokenizer, cfg.dpo.max_response_tokens)
    else:  # chats: sft's or distill's max_tokens
        max_tokens = getattr(cfg, cfg.pipeline).max_tokens
        prepared.chat_data(data, cfg.seed, tokenizer, max_tokens, f"{cfg.pipeline}.max_tokens")


def check_generated_data(cfg: RecipeConfig) -> None:
    """Raise what drawing a generated source's validation problems would (too few distinct
    ones for data.val_size); it needs no model, so a dry run checks it even where
    `roll train` downloads the model first."""
    data = getattr(cfg, "data", None)
    if data is None or not spec_of(cfg).reads_prompts:
        return
    from rollcli.data.prompt_sets import check_generated

    check_generated(data, cfg.seed)


def _tokenizer_path(cfg: RecipeConfig, model_path: str) -> str:
    """The tokenizer the pipeline tokenizes with: distillation's student's (a copy of the
    teacher's when the student is built from it)."""
    student = getattr(getattr(cfg, "distill", None), "student", None)
    if student is None:
        return model_path
    from rollcli.models.loading import resolve_model

    return str(resolve_model(student))
