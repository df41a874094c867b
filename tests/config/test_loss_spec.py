"""The policy-loss table is the one place that names a loss's traits: the config's choices
are its rows, each row's `objective` is the function `compute_policy_loss` calls, and the
traits the code reads are the ones the losses' own formulas have (hand-listed here)."""

from __future__ import annotations

import doctest
import inspect
import typing

import rollcli.config.loss_spec
from rollcli.algorithms import policy_loss
from rollcli.config.algorithm import AlgorithmConfig, resolved_correction
from rollcli.config.loss_spec import LOSS_NAMES, LOSSES, PolicyLossName, losses_where


def test_the_rows_are_the_config_choices() -> None:
    assert typing.get_args(PolicyLossName) == LOSS_NAMES
    assert typing.get_args(AlgorithmConfig.model_fields["policy_loss"].annotation) == LOSS_NAMES


def test_each_row_names_its_objective() -> None:
    """`objective` is a function of `algorithms/policy_loss.py`, the one `POLICY_LOSSES` (and
    so `compute_policy_loss`) calls for that name, with the losses' one signature."""
    assert set(policy_loss.POLICY_LOSSES) == set(LOSSES)
    for name, spec in LOSSES.items():
        fn = getattr(policy_loss, spec.objective)
        assert policy_loss.POLICY_LOSSES[name] is fn, name
        assert list(inspect.signature(fn).parameters) == ["x"], name


def test_what_the_rows_say() -> None:
    """The facts the code used to branch on by name."""
    assert losses_where(clipped=True) == ("ppo", "gspo", "raftpp")
    assert losses_where(dual_clip=True) == ("ppo", "raftpp")
    assert losses_where(sampler_ratio=True) == ("topr", "pg")
    assert losses_where(tapers=True) == ("topr",)
    assert losses_where(positive_only=True) == ("raftpp",)
    assert [n for n, s in LOSSES.items() if s.refused] == ["topr"]
    assert doctest.testmod(rollcli.config.loss_spec).failed == 0


def test_the_config_reads_the_rows() -> None:
    for name, spec in LOSSES.items():
        knobs = AlgorithmConfig(policy_loss=name, kl_coef=0.0).unread_knobs()
        assert ("clip_low" in knobs) is not spec.clipped, name
        assert ("dual_clip" in knobs) is not spec.dual_clip, name
        alg = AlgorithmConfig(policy_loss=name)
        assert (resolved_correction(alg, "int8") == "none") is spec.sampler_ratio, name
