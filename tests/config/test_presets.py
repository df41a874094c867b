"""Presets resolve into a valid config; every preset runs through the catalogue."""

import subprocess
import sys
import typing
from pathlib import Path

import pydantic
import pytest
import torch

from rollcli.algorithms.advantages import compute_advantages
from rollcli.algorithms.kl import kl_estimate
from rollcli.algorithms.loss_inputs import PolicyLossInputs
from rollcli.algorithms.policy_loss import compute_policy_loss
from rollcli.config.algorithm import AlgorithmConfig, PresetName
from rollcli.config.presets import PRESETS, resolve_algorithm


def test_every_named_preset_exists():
    assert set(PRESETS) == set(typing.get_args(PresetName))


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_resolves_and_sets_its_keys(name):
    cfg = resolve_algorithm({"name": name})
    assert cfg.name == name
    for key, value in PRESETS[name].items():
        assert getattr(cfg, key) == value


def test_default_is_grpo_and_model_defaults_are_grpo():
    assert resolve_algorithm({}) == AlgorithmConfig()
    assert resolve_algorithm({}).advantage == "grpo"


def test_user_keys_win_over_preset():
    cfg = resolve_algorithm({"name": "dapo", "clip_high": 0.3, "kl_coef": 0.01})
    assert (cfg.clip_high, cfg.kl_coef, cfg.dynamic_sampling) == (0.3, 0.01, True)


def test_unknown_preset_suggests_closest():
    with pytest.raises(ValueError, match="did you mean 'dapo'"):
        resolve_algorithm({"name": "dapoo"})
    with pytest.raises(ValueError, match="did you mean 'rloo'"):
        resolve_algorithm({"name": "rlooo"})


@pytest.mark.parametrize(
    "bad",
    [
        {"clip_ratio": 0.2},  # unknown knob
        {"clip_low": 0.0},
        {"clip_high": -0.1},
        {"dual_clip": 1.0},
        {"gamma": 1.5},
        {"lam": -0.1},
        {"kl_coef": -0.001},
        {"advantage": "ppo"},
        {"name": "gspo", "dual_clip": 3.0},  # dual clip only for ppo / raftpp
        {"value_clip": 0.2},  # grpo has no critic
        {"kl_coef": 0.0, "kl_controller": "adaptive"},
    ],
)
def test_invalid_values_are_rejected(bad):
    with pytest.raises(pydantic.ValidationError):
        resolve_algorithm(bad)


def test_frozen_and_properties():
    ppo = resolve_algorithm({"name": "ppo"})
    assert ppo.needs_critic and ppo.needs_reference
    dapo = resolve_algorithm({"name": "dapo"})
    assert not dapo.needs_critic and not dapo.needs_reference
    with pytest.raises(pydantic.ValidationError):
        dapo.clip_high = 0.5


def test_presets_import_without_torch():
    code = "import sys, rollcli.config.presets; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_each_preset_runs_one_loss_step(name):
    cfg = resolve_algorithm({"name": name})
    torch.manual_seed(0)
    batch, length, group = 4, 5, 2
    mask = torch.ones(batch, length)
    mask[1, 3:] = 0
    logp = (-torch.rand(batch, length)).requires_grad_(True)
    old, ref = logp.detach() - 0.01, logp.detach() + 0.02
    kl = kl_estimate(old, ref, cfg.kl_estimator) if cfg.kl_in == "reward" else None
    adv, _ = compute_advantages(
        cfg.advantage,
        scores=torch.tensor([1.0, 0.0, 0.0, 1.0]),
        values=torch.rand(batch, length) if cfg.needs_critic else None,
        mask=mask,
        kl=kl,
        kl_coef=cfg.kl_coef,
        group_size=group,
        gamma=cfg.gamma,
        lam=cfg.lam,
        norm_std=cfg.norm_std,
        whiten=cfg.whiten_advantages,
    )
    inputs = PolicyLossInputs(
        logprobs=logp,
        advantages=adv,
        mask=mask,
        old_logprobs=old,
        clip_low=cfg.clip_low,
        clip_high=cfg.clip_high,
        dual_clip=cfg.dual_clip,
        agg=cfg.loss_agg,
    )
    loss, metrics = compute_policy_loss(cfg.policy_loss, inputs)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logp.grad).all()
    assert logp.grad.abs().sum() > 0
    assert metrics["pg_loss"] == pytest.approx(loss.item())


def test_docs_cover_every_knob_and_preset():
    text = (Path(__file__).parents[2] / "docs" / "algorithms.md").read_text()
    for field in AlgorithmConfig.model_fields:
        assert f"`algorithm.{field}`" in text, field
    for name in PRESETS:
        assert f"| `{name}` |" in text, name
