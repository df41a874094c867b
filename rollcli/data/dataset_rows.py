"""Rows of a dataset, read through the `datasets` library, wherever the dataset lives.

A dataset is named by a `path` (`data.path`, `data.val_path`, `roll reward --input`):
- a local file: jsonl / json / parquet / csv, compressed or not (`.jsonl.gz`); one split,
  `train`;
- a local folder of such files (splits from the file names, as `datasets` infers them:
  `train.jsonl`, `test.jsonl`, ...) or a hub repository's layout (a README's `configs`);
- a `save_to_disk` folder (one dataset, or a dataset dict of splits);
- a Hugging Face hub dataset, `ORG/NAME[@REVISION]` with `name` for its configuration:
  fetched by `huggingface_hub` into the standard cache (`HF_HOME`, `HF_HUB_OFFLINE`
  honoured; only the configuration's files where the dataset card lists them) and read from
  there, so a cached dataset reads offline as a local one does.

Each row is a dict of the columns it has (a column a row lacks is left out, not `None`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rollcli.data.prompts import DataError

FORMATS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}
COMPRESSED = (".gz", ".bz2", ".xz", ".zst")
_HUB_NAME = re.compile(r"^[\w.-]+(/[\w.-]+)?(@[\w./-]+)?$")

Kind = Literal["file", "folder", "saved", "hub"]


@dataclass(frozen=True)
class Source:
    """Where a dataset is and which of it to read; `key` names the recipe key in errors."""

    path: str
    name: str | None = None
    split: str = "train"
    key: str = "data.path"
    split_key: str = "data.split"

    def describe(self) -> str:
        """The path, with its configuration and split where it has them (a file has one)."""
        if Path(self.path).expanduser().is_file():
            return self.path
        config = f" ({self.name})" if self.name else ""
        return f"{self.path}{config}, split {self.split}"


def kind_of(path: str) -> Kind:
    """What `path` names; a local path wins over a hub name that reads the same."""
    local = Path(path).expanduser()
    if local.is_file():
        return "file"
    if local.is_dir():
        saved = (local / "dataset_dict.json").is_file() or (local / "state.json").is_file()
        return "saved" if saved else "folder"
    if _looks_like_file(path) or not _HUB_NAME.match(path):
        raise DataError(f"{path!r} does not exist (a data file, folder or hub dataset name)")
    return "hub"


def _looks_like_file(path: str) -> bool:
    name = Path(path).name
    return path.startswith((".", "/", "~")) or any(
        name.endswith(s) or name.endswith(s + c) for s in FORMATS for c in ("", *COMPRESSED)
    )


def hub_cached(source: Source) -> bool:
    """Whether a hub dataset is in the local cache (nothing is downloaded)."""
    return _hub_folder(source, download=False, quiet=True) is not None


@dataclass(frozen=True)
class RowSample:
    """`n` rows of a dataset stratified by column `by` (None: a plain seeded sample); `key`
    names the recipe key in errors (`data.mix.math.sample`)."""

    n: int
    by: str | None
    seed: int
    key: str = "data.sample"


def read_rows(
    source: Source, columns: set[str] | None = None, limit: int | None = None
) -> list[dict[str, Any]]:
    """The rows of `source` (only `columns` of them, where given; the first `limit`)."""
    return read_table(source, columns, limit)[0]


def read_table(
    source: Source,
    columns: set[str] | None = None,
    limit: int | None = None,
    sample: RowSample | None = None,
) -> tuple[list[dict[str, Any]], tuple[str, ...]]:
    """(`read_rows`, every column name of the dataset); `sample` picks its rows first."""
    dataset = load_split(source)
    names = column_names(dataset)
    if sample is not None:
        dataset = dataset.select(sampled_indices(dataset, sample, source))
    if columns is not None:
        keep = [c for c in dataset.column_names if c in columns]
        dataset = dataset.select_columns(keep)
    if limit is not None:
        dataset = dataset.select(range(min(limit, len(dataset))))
    rows = [{k: v for k, v in row.items() if v is not None} for row in dataset.to_list()]
    if not rows:
        raise DataError(f"{source.key}: {source.describe()} has no rows")
    return rows, names


def sampled_indices(dataset: Any, sample: RowSample, source: Source) -> list[int]:
    """The rows `sample` picks of `dataset` (in dataset order); one-line errors for a
    column the dataset lacks and for more rows asked than it has."""
    from rollcli.data.stratified import stratified_sample

    names = list(dataset.column_names)
    if sample.by is not None and sample.by not in names:
        raise DataError(
            f"{sample.key}.by = {sample.by!r} names no column of {source.describe()} (its "
            f"columns: {', '.join(names)})"
        )
    if sample.n > len(dataset):
        raise DataError(
            f"{sample.key}.n = {sample.n:,} but {source.describe()} has {len(dataset):,} rows; "
            f"lower {sample.key}.n (or remove {sample.key} to read every row)"
        )
    values = dataset[sample.by] if sample.by is not None else [None] * len(dataset)
    return stratified_sample(values, sample.n, sample.seed)


def column_names(dataset: Any) -> tuple[str, ...]:
    """Every column of `dataset`, and each field of a struct column by the dotted key that
    reads it (`reward_model.ground_truth`, verl's layout), for the messages that list
    them: a struct listed by its name alone gave no way to read inside it."""
    names: list[str] = []
    for name in dataset.column_names:
        names.append(name)
        feature = dataset.features.get(name)
        if isinstance(feature, dict):  # a struct (a list of structs, e.g. messages: not)
            names += [f"{name}.{field}" for field in feature]
    return tuple(names)


def load_split(source: Source) -> Any:
    """The `datasets.Dataset` of `source`'s split."""
    datasets = _quiet_datasets()
    kind = _kind(source)
    try:
        if kind == "saved":
            return _saved_split(
                datasets.load_from_disk(str(Path(source.path).expanduser())), source
            )
        if kind == "file":
            return _file_split(datasets, source)
        folder = Path(source.path).expanduser() if kind == "folder" else None
        if folder is None:
            folder = _hub_folder(source, download=True, quiet=False)
        return datasets.load_dataset(str(folder), source.name, split=source.split)
    except DataError:
        raise
    except ValueError as exc:
        raise _named(exc, source) from None
    except StopIteration:  # an empty file
        raise DataError(f"{source.key}: {source.describe()} has no rows") from None
    except Exception as exc:  # what `datasets` and pyarrow say of a file they cannot read
        cause = exc.__cause__ or exc
        raise DataError(
            f"{source.key}: cannot read {source.describe()}: {_parse_error(cause)}"
        ) from None


def _kind(source: Source) -> Kind:
    try:
        return kind_of(source.path)
    except DataError as exc:
        raise DataError(f"{source.key}: {exc}") from None


def _file_split(datasets: Any, source: Source) -> Any:
    path = Path(source.path).expanduser()
    stem = path.name
    for c in COMPRESSED:
        stem = stem.removesuffix(c)
    builder = FORMATS.get(Path(stem).suffix)
    if builder is None:
        raise DataError(
            f"{source.key}: {path.name} is not a data file roll reads (jsonl, json, parquet "
            f"or csv, optionally {', '.join(COMPRESSED)}-compressed)"
        )
    if source.split != "train":
        raise DataError(
            f"{source.split_key} = {source.split!r}: {path.name} is one file, so its one split "
            f"is 'train'; leave {source.split_key} out, or give a folder or hub dataset"
        )
    return datasets.load_dataset(builder, data_files=str(path), split="train")


def _saved_split(saved: Any, source: Source) -> Any:
    if hasattr(saved, "keys"):  # a DatasetDict
        if source.split not in saved:
            raise DataError(
                f"{source.split_key} = {source.split!r}: {source.path} has the splits "
                f"{', '.join(saved.keys())}"
            )
        return saved[source.split]
    if source.split != "train":
        raise DataError(
            f"{source.split_key} = {source.split!r}: {source.path} is one saved dataset "
            f"without splits; leave {source.split_key} out"
        )
    return saved


def _named(exc: ValueError, source: Source) -> DataError:
    """`datasets`' errors for a missing configuration or split, naming the key to set."""
    text = str(exc)
    configs = re.search(r"Please pick one among the available configs: \[(.*?)\]", text)
    if configs:
        names = configs.group(1).replace("'", "")
        return DataError(
            f"{source.key}: {source.path} has the configurations {names}; name one with "
            f"data.name, e.g. data.name={names.split(',')[0].strip()}"
        )
    missing = re.search(r"BuilderConfig '(.*?)' not found. Available: \[(.*?)\]", text)
    if missing:
        return DataError(
            f"data.name = {missing.group(1)!r}: {source.path} has the configurations "
            f"{missing.group(2).replace(chr(39), '')}"
        )
    split = re.search(r'Unknown split "(.*?)". Should be one of \[(.*?)\]', text)
    if split:
        return DataError(
            f"{source.split_key} = {split.group(1)!r}: {source.path} has the splits "
            f"{split.group(2).replace(chr(39), '')}"
        )
    return DataError(f"{source.key}: cannot read {source.describe()}: {_first_line(exc)}")


def _parse_error(exc: BaseException) -> str:
    """pyarrow's JSON error with the file's line number (it counts rows from 0).

    >>> _parse_error(ValueError("JSON parse error: Invalid value. in row 1"))
    'not valid JSON at line 2 (Invalid value.)'
    """
    text = _first_line(exc)
    found = re.match(r"JSON parse error: (.*?) in row (\d+)$", text)
    if found:
        return f"not valid JSON at line {int(found.group(2)) + 1} ({found.group(1)})"
    return text


def _first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[0].strip() if lines else type(exc).__name__


def _quiet_datasets() -> Any:
    """`datasets`, without its progress bars and info logs (roll reports what it read)."""
    import datasets

    datasets.disable_progress_bars()
    datasets.logging.set_verbosity(datasets.logging.CRITICAL)  # its errors are raised to us
    return datasets


def _hub_folder(source: Source, *, download: bool, quiet: bool) -> Path | None:
    """The local snapshot of a hub dataset: from the cache, else downloaded (`download`)."""
    from rollcli.models.hub import HubError, snapshot, split_revision

    repo, revision = split_revision(source.path)
    try:
        try:
            return snapshot(repo, revision, repo_type="dataset", download=False)
        except HubError:
            if not download:
                raise
        patterns = _config_patterns(repo, revision, source.name)
        return snapshot(repo, revision, repo_type="dataset", patterns=patterns)
    except HubError as exc:
        if quiet:
            return None
        raise DataError(f"{source.key}: {exc}") from None


def _config_patterns(repo: str, revision: str | None, name: str | None) -> list[str] | None:
    """The files of configuration `name` as the dataset card's `configs` lists them (with
    the card), so only what is read is downloaded; None (every file) when the card lists
    none."""
    from rollcli.models.hub import HubError, card_text

    try:
        text = card_text(repo, revision)
    except HubError:
        return None
    import yaml

    match = re.match(r"^---\s*\n(.*?)\n---", text or "", re.S)
    try:
        meta = yaml.safe_load(match.group(1)) if match else None
    except yaml.YAMLError:
        return None
    configs = (meta or {}).get("configs") if isinstance(meta, dict) else None
    if not isinstance(configs, list):
        return None
    chosen = [
        c
        for c in configs
        if isinstance(c, dict) and c.get("config_name", "default") == (name or "default")
    ]
    if len(chosen) != 1:
        return None
    files = chosen[0].get("data_files")
    paths = [f["path"] for f in files if isinstance(f, dict)] if isinstance(files, list) else []
    flat = [p for item in paths for p in (item if isinstance(item, list) else [item])]
    return ["README.md", *flat] if flat else None
