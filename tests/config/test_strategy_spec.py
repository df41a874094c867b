"""The strategy and engine table is the one place that names a training strategy's or a
rollout engine's facts: the config's choices, the planner's tuples and the pipelines'
strategies are its rows, its builders exist, and no module compares a name with a string
literal or keys a dict by one (the rows are asked instead)."""

from __future__ import annotations

import ast
import doctest
import importlib.util
import typing
from pathlib import Path

import pytest

import rollcli
import rollcli.config.strategy_spec
from rollcli.config.parallel import PARALLEL_STRATEGIES
from rollcli.config.pipeline_spec import ALL_STRATEGIES, SPECS
from rollcli.config.sections import RolloutConfig, TrainConfig
from rollcli.config.strategy_spec import (
    AUTO,
    AUTO_ENGINE,
    AUTO_STRATEGY,
    ENGINE_CHOICES,
    ENGINES,
    FALLBACK_ENGINE,
    STRATEGIES,
    STRATEGY_CHOICES,
    strategies_where,
)
from rollcli.planning.backends import BACKENDS
from rollcli.planning.request import INFER_STRATEGIES, ROLES, TRAIN_STRATEGIES, default_strategy

PACKAGE = Path(rollcli.__file__).parent
TABLE = PACKAGE / "config" / "strategy_spec.py"
NAMES = set(STRATEGIES) | set(ENGINES)
# a variable, attribute or call whose name says it holds a strategy or an engine
NAMED = ("strategy", "engine")


def _literals(node: ast.AST) -> list[ast.Constant]:
    """The string constants a comparison operand is or holds (`"hf"`, `("hf", "auto")`)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _says_strategy(node: ast.AST) -> bool:
    text = ast.unparse(node).lower()
    return any(word in text for word in NAMED)


def _offences(path: Path, root: Path = PACKAGE) -> list[str]:
    """`path`'s comparisons of a row's name with a literal, dicts keyed by one, and
    comparisons of a strategy or engine variable with a literal that is no choice at all."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            named = any(_says_strategy(o) for o in operands if not _literals(o))
            for const in (c for o in operands for c in _literals(o)):
                if const.value in NAMES or (named and const.value not in (AUTO, "")):
                    found.append(f"{const.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Dict):
            for key in node.keys:
                if isinstance(key, ast.Constant) and key.value in NAMES:
                    found.append(f"{key.lineno}: dict keyed by {key.value!r}")
    return [f"{path.relative_to(root)}:{line}" for line in found]


def test_no_module_compares_a_strategy_or_engine_name() -> None:
    """Not in config, planning, strategies, workers, runtime, launch, nor anywhere else in
    the package: a name there either has a row (ask the row) or is unknown to the table."""
    found = [
        offence
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != TABLE
        for offence in _offences(path)
    ]
    assert not found, "ask the row (config/strategy_spec.py) instead:\n" + "\n".join(found)


def test_the_scan_finds_what_it_looks_for(tmp_path: Path) -> None:
    """The check above fails on each kind of branch it forbids (and lets `auto` be)."""
    source = tmp_path / "branches.py"
    source.write_text(
        'if strategy == "hf": pass\n'
        'if cfg.rollout.engine in ("vllm", "auto"): pass\n'
        'ENGINE = {"sglang": 1}\n'
        'if req.resolved_strategy != "colossal": pass\n'
        'if engine == "auto": pass\n',
        encoding="utf-8",
    )
    lines = sorted(int(o.split(":")[1]) for o in _offences(source, root=tmp_path))
    assert lines == [1, 2, 3, 4]


def test_the_config_choices_are_the_rows_and_auto() -> None:
    assert typing.get_args(TrainConfig.model_fields["strategy"].annotation) == STRATEGY_CHOICES
    assert typing.get_args(RolloutConfig.model_fields["engine"].annotation) == ENGINE_CHOICES
    assert STRATEGY_CHOICES == ("auto", "hf", "fsdp2", "deepspeed", "megatron")
    assert ENGINE_CHOICES == ("auto", "hf", "vllm", "sglang")
    assert ALL_STRATEGIES == STRATEGY_CHOICES
    assert AUTO_STRATEGY in STRATEGIES and {AUTO_ENGINE, FALLBACK_ENGINE} <= set(ENGINES)


def test_the_planner_and_the_pipelines_name_only_rows() -> None:
    assert set(TRAIN_STRATEGIES) == set(STRATEGIES)
    assert set(INFER_STRATEGIES) == set(ENGINES)
    assert {default_strategy(role) for role in ROLES} <= NAMES
    for spec in SPECS.values():
        assert set(spec.strategies) <= set(STRATEGY_CHOICES), spec.name
    assert set(PARALLEL_STRATEGIES) <= NAMES
    from rollcli.strategies.train_engines import TRAIN_STRATEGIES as built_by_train_engines

    assert built_by_train_engines == tuple(STRATEGIES)


def test_what_the_rows_say() -> None:
    """The facts the code used to branch on, by name (hand-listed)."""
    assert strategies_where(lora=True) == ("hf", "fsdp2")
    assert strategies_where(owns_bf16=False) == ("hf",)
    assert strategies_where(skips_rows=True) == strategies_where(rank_token_budget=True) == ("hf",)
    assert strategies_where(fully_sharded=True) == ("fsdp2",)
    assert strategies_where(shared_prefix=False) == ("megatron",)
    assert [n for n, s in STRATEGIES.items() if s.refusal] == ["megatron"]
    assert [n for n, s in STRATEGIES.items() if s.checkpoint_dir] == ["fsdp2", "deepspeed"]
    assert [n for n, e in ENGINES.items() if e.sleeps] == ["vllm", "sglang"]
    assert [n for n, e in ENGINES.items() if e.gpu_only] == ["sglang"]
    assert [n for n, e in ENGINES.items() if e.turn_cache] == ["hf"]
    assert doctest.testmod(rollcli.config.strategy_spec).failed == 0


@pytest.mark.parametrize(
    "target",
    [s.trainer for s in STRATEGIES.values()]
    + [e.engine_class for e in ENGINES.values() if e.engine_class],
)
def test_the_builders_exist(target: str) -> None:
    """Each row's trainer or engine class is defined where it says (read, not imported:
    vllm's and sglang's modules import their packages)."""
    module, name = target.split(":")
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    defined = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    assert name in defined, target


def test_the_backends_rows_need_are_known() -> None:
    for row in (*STRATEGIES.values(), *ENGINES.values()):
        assert row.backend is None or row.backend in BACKENDS, row.name
    assert BACKENDS["deepspeed"].install == STRATEGIES["deepspeed"].install_hint


def test_make_trainer_calls_what_the_rows_name() -> None:
    """`make_trainer` is written as imports and calls (a walk follows them to AdamW); what it
    imports and calls must be each row's `trainer`, and nothing else."""
    from rollcli.strategies import train_engines

    source = Path(train_engines.__file__).read_text(encoding="utf-8")
    (make,) = [
        n for n in ast.parse(source).body
        if isinstance(n, ast.FunctionDef) and n.name == "make_trainer"
    ]  # fmt: skip
    imported = {
        alias.name: node.module
        for node in ast.walk(make)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    called = {
        f"{imported[n.func.id]}:{n.func.id}"
        for n in ast.walk(make)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in imported
    }
    assert called == {s.trainer for s in STRATEGIES.values()}
