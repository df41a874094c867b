"""Read offline SwanLab and W&B runs back with the libraries' own readers (test helper;
`from tracker_readers import ...`, tests/conftest.py puts this folder on sys.path).

W&B 0.31 ships no Python reader for its `.wandb` files (wandb-core reads them); SwanLab's
W&B converter carries the maintained one, so W&B files are read with it and W&B's protos."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def swanlab_records(run_folder: Path) -> list[Any]:
    """Every record of a SwanLab run folder's `run-*.swanlab` file."""
    from swanlab.proto.swanlab.record.v1.record_pb2 import Record
    from swanlab.sdk.internal.core_python.store import DataStoreReader

    reader = DataStoreReader()
    reader.open(next(run_folder.glob("*.swanlab")))
    out = []
    for data in reader:
        out.append(Record())
        out[-1].ParseFromString(data)
    return out


def swanlab_scalars(records: list[Any]) -> dict[tuple[str, int], float]:
    return {
        (r.scalar.key, r.scalar.step): r.scalar.value.number
        for r in records
        if r.HasField("scalar")
    }


def wandb_records(run_folder: Path) -> list[Any]:
    """Every record of a W&B offline run folder's `run-*.wandb` file."""
    from swanlab.converter.wb.wbdatastore import WBDataStoreReader
    from wandb.proto import wandb_internal_pb2 as pb

    out = []
    with WBDataStoreReader() as reader:
        reader.open(next(run_folder.glob("*.wandb")))
        while (data := reader.scan()) is not None:
            out.append(pb.Record())
            out[-1].ParseFromString(data)
    return out


def wandb_history(records: list[Any]) -> dict[tuple[str, int], Any]:
    """(key, step) -> value of every logged metric (W&B's own `_...` keys and the sample
    table's entries left out)."""
    out = {}
    for r in records:
        if r.WhichOneof("record_type") == "history":
            row = {
                i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item
            }
            out.update(
                {(k, row["_step"]): v for k, v in row.items() if not k.startswith(("_", "samples"))}
            )
    return out


def wandb_table_steps(records: list[Any], key: str = "samples") -> list[int]:
    """The steps at which a `wandb.Table` was logged under `key`."""
    return [
        row["_step"]
        for r in records
        if r.WhichOneof("record_type") == "history"
        and (
            row := {
                i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item
            }
        )
        and row.get(f"{key}/_type") == "table-file"
    ]


def wandb_run(records: list[Any]) -> Any:
    return next(r.run for r in records if r.WhichOneof("record_type") == "run")
