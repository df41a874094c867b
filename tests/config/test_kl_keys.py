"""The KL keys whose meaning a recipe could get wrong, checked when the recipe loads:
`algorithm.kl_target` is per token (runs saved when its default was a per-sequence 6.0 still
resume, or are refused in one line), and k1 is refused in the loss."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rollcli.config.errors import ConfigError
from rollcli.config.loader import dump_recipe, load_recipe

ADAPTIVE = ["algorithm.kl_in=reward", "algorithm.kl_controller=adaptive"]


def _one_line_error(ref: str, overrides: list[str], **kwargs: bool) -> str:
    with pytest.raises(ConfigError) as err:
        load_recipe(ref, overrides, **kwargs)
    message = str(err.value)
    assert "\n" not in message
    return message


def test_the_adaptive_target_is_per_token_by_default() -> None:
    cfg, _ = load_recipe("rlvr-math", ADAPTIVE)
    assert cfg.algorithm.kl_target == 0.1


def test_a_per_sequence_target_is_refused_naming_the_per_token_unit() -> None:
    """TRL's and Ziegler et al.'s 6 nats: compared with a mean KL per token, never reached."""
    message = _one_line_error("rlvr-math", [*ADAPTIVE, "algorithm.kl_target=6"])
    assert "algorithm.kl_target = 6.0 nats is a per-sequence figure" in message
    assert "mean KL per response token" in message and "0.1" in message
    cfg, _ = load_recipe("rlvr-math", [*ADAPTIVE, "algorithm.kl_target=1.0"])  # the bound
    assert cfg.algorithm.kl_target == 1.0


def _saved_before(tmp_path: Path, **algorithm: object) -> str:
    """A run folder's recipe.yaml as runs saved it when `kl_target`'s default was 6.0
    (`dump_recipe` writes every key)."""
    cfg, _ = load_recipe("rlvr-math")
    raw = yaml.safe_load(dump_recipe(cfg))
    raw["algorithm"] |= {"kl_target": 6.0, **algorithm}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return str(path)


def test_a_run_saved_with_the_old_default_resumes_with_the_fixed_controller(tmp_path) -> None:
    """Its 6.0 was unused beside the fixed controller: dropped, so the run resumes."""
    cfg, _ = load_recipe(_saved_before(tmp_path), [], saved_run=True)
    assert (cfg.algorithm.kl_controller, cfg.algorithm.kl_target) == ("fixed", 0.1)


def test_a_saved_adaptive_run_at_6_is_refused_and_resumes_with_a_per_token_target(
    tmp_path,
) -> None:
    saved = _saved_before(tmp_path, kl_controller="adaptive", kl_in="reward")
    message = _one_line_error(saved, [], saved_run=True)
    assert "algorithm.kl_target = 6.0" in message
    cfg, _ = load_recipe(saved, ["algorithm.kl_target=0.1"], saved_run=True)
    assert cfg.algorithm.kl_target == 0.1


def test_k1_in_the_loss_is_refused_naming_k2_and_k3() -> None:
    """k1's gradient is grad log pi, whose expectation under the sampling policy is 0."""
    message = _one_line_error("rlvr-math", ["algorithm.kl_estimator=k1"])  # grpo: kl_in loss
    assert "k1 with kl_in: loss has zero expected gradient" in message
    assert "k3" in message and "k2" in message
    rloo = _one_line_error("rlvr-math", ["algorithm.name=rloo", "algorithm.kl_in=loss"])
    assert "kl_estimator k1" in rloo  # the preset's k1, moved into the loss


@pytest.mark.parametrize(
    "overrides",
    [
        ["algorithm.name=ppo"],  # k1 in the reward: allowed
        ["algorithm.kl_estimator=k1", "algorithm.kl_in=reward"],
        ["algorithm.kl_estimator=k2"],
        ["algorithm.kl_estimator=k1", "algorithm.kl_coef=0"],  # no KL term at all
    ],
)
def test_k1_in_the_reward_and_the_other_estimators_in_the_loss_load(overrides) -> None:
    load_recipe("rlvr-math", overrides)
