"""A role, a rollout source, a policy loss or a precision is named in the module holding
its table (config/roles.py, config/pipeline_spec.py, config/loss_spec.py,
config/precision_spec.py) and read from there: elsewhere rollcli/ compares none with a
string literal (`tests/name_literals.py` is the scan; run it to print what it finds)."""

from __future__ import annotations

import typing
from pathlib import Path

from name_literals import TABLES, modules, name_comparisons

from rollcli.config import roles
from rollcli.config.pipeline_spec import SPECS, RolloutSource
from rollcli.config.precision_spec import (
    LOW_PRECISIONS,
    PRECISIONS,
    ROLLOUT_PRECISIONS,
    TRAIN_PRECISIONS,
)
from rollcli.config.sections import RolloutConfig, TrainConfig

# the comparisons left: words that are also a name, where they mean something else (a step
# result's `reward` key, an eval summary's `episodes` key, `algorithm.kl_in: reward`)
BOUND = 8


def _found() -> list[str]:
    return [line for path in modules() for line in name_comparisons(path)]


def test_names_are_compared_only_in_their_tables() -> None:
    held = _found()
    print(f"{len(held)} comparisons:")
    print("\n".join(held))
    assert len(held) <= BOUND, "read the name's table instead:\n" + "\n".join(held)


def test_the_scan_finds_what_it_looks_for(tmp_path: Path) -> None:
    """Each form it forbids, each kind of name, and a table's own names left alone."""
    (tmp_path / "config").mkdir()
    source = tmp_path / "branches.py"
    source.write_text(
        'if role == "actor_train": pass\n'
        'if spec.rollout in ("prompts", "episodes"): pass\n'
        'if "raftpp" != name: pass\n'
        'match precision:\n    case "bf16" | "fp8": pass\n'
        'if x not in ["teacher"]: pass\n'
        'if precision == "auto": pass\n',
        encoding="utf-8",
    )
    table = tmp_path / "config" / "loss_spec.py"
    table.write_text('if name == "raftpp": pass\nif role == "critic": pass\n', encoding="utf-8")
    lines = sorted(int(o.split(":")[1]) for o in name_comparisons(source, root=tmp_path))
    assert lines == [1, 2, 3, 5, 6]
    assert [o.split(": ")[1] for o in name_comparisons(table, root=tmp_path)] == ["role"]


def test_the_tables_hold_the_names_the_scan_looks_for() -> None:
    """The scan's names are the tables' rows: a new row is scanned for too."""
    assert TABLES["role"][1] == set(roles.ROLE_NAMES)
    assert TABLES["rollout source"][1] == set(typing.get_args(RolloutSource))
    assert {s.rollout for s in SPECS.values()} == set(typing.get_args(RolloutSource))
    assert TABLES["precision"][1] == set(PRECISIONS)
    rollout = typing.get_args(RolloutConfig.model_fields["precision"].annotation)
    train = typing.get_args(TrainConfig.model_fields["precision"].annotation)
    assert rollout == ("auto", *ROLLOUT_PRECISIONS)
    assert train == ("auto", *TRAIN_PRECISIONS)


def test_what_the_precision_rows_say() -> None:
    """The facts the code used to branch on by name (hand-listed)."""
    assert LOW_PRECISIONS == ("bf16", "int8", "fp8")  # `auto` corrects these rollouts (tis)
    assert {n: p.weight_bytes for n, p in PRECISIONS.items() if n != "fp8"} == {
        "fp32": 4,
        "bf16": 2,
        "bf16-mixed": 2,
        "int8": 4,  # the fp32 weights the sync writes, beside the int8 copies
    }
    assert [n for n, p in PRECISIONS.items() if p.bf16_compute] == ["bf16-mixed"]
    assert [n for n, p in PRECISIONS.items() if p.int8] == ["int8"]
    assert [n for n, p in PRECISIONS.items() if p.refusal] == ["fp8"]


def test_the_role_groups_are_the_role_tables() -> None:
    """config can not import the planner's role table (a layer above): the groups
    config/roles.py names are checked against it here."""
    from rollcli.planning import request
    from rollcli.planning.role_table import TABLE

    assert tuple(r.name for r in TABLE) == roles.ROLE_NAMES
    assert set(roles.FORWARD_ROLES) == set(request.FORWARD_ROLES)
    assert {r.name for r in TABLE if r.devices != r.name} == set(roles.VALIDATION_ENVS)
