"""The recipe a dry run prints: only the keys its chosen variants read (config/applicable.py),
while the run folder keeps every key."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from rollcli.config.applicable import applicable, fitted_yaml
from rollcli.config.catalogue import catalogue
from rollcli.config.data_section import DataConfig, MixDomainConfig
from rollcli.config.devices_section import RolePlacement
from rollcli.config.errors import ConfigError
from rollcli.config.loader import load_recipe
from rollcli.config.sections import CriticConfig, RolloutConfig


def _left_out(full: dict[str, Any], shown: dict[str, Any], at: str = "") -> dict[str, Any]:
    """Every dotted key of `full` that `shown` leaves out, with its value."""
    out: dict[str, Any] = {}
    for key, value in full.items():
        if key not in shown:
            out[f"{at}{key}"] = value
        elif isinstance(value, dict) and isinstance(shown[key], dict):
            out |= _left_out(value, shown[key], f"{at}{key}.")
    return out


def _default(key: str) -> Any:
    """The default of a data, mix-domain, placement, critic or rollout key (dotted path)."""
    parts = key.split(".")
    if parts[0] == "critic":
        return CriticConfig().model_dump(mode="json")
    if parts[0] == "devices":
        return RolePlacement().model_dump(mode="json")
    if parts[0] == "rollout":  # on-policy distillation's sampling
        return RolloutConfig.model_fields[parts[1]].get_default(call_default_factory=True)
    section = MixDomainConfig if parts[1] == "mix" and len(parts) == 4 else DataConfig
    field = section.model_fields[parts[-1]]
    return field.get_default(call_default_factory=True)


@pytest.mark.parametrize("name", [entry.name for entry in catalogue()])
def test_what_a_recipe_leaves_out_is_at_its_default(name: str) -> None:
    """Nothing a catalogue recipe sets disappears from the dry run: a data key, a placement
    or the critic left out holds its default (an algorithm knob left out is one its
    feature does not read: `READ_WHEN`)."""
    try:
        cfg, _ = load_recipe(name)
    except ConfigError as exc:  # an optional extra this machine lacks (agents)
        if "pip install" not in str(exc):
            raise
        pytest.skip(str(exc))
    left = _left_out(cfg.model_dump(mode="json"), applicable(cfg))
    for key, value in left.items():
        if key.startswith("algorithm."):
            knob = key.split(".")[-1]
            section = cfg.algorithm.off_policy if ".off_policy." in key else cfg.algorithm
            assert knob in section.unread_knobs(), key
            continue
        assert value == _default(key), (key, value)


def test_a_mix_shows_its_domains_not_a_generator_task() -> None:
    cfg, _ = load_recipe("rlvr-paper")
    shown = applicable(cfg)
    assert "task" not in shown["data"] and "task_args" not in shown["data"]
    assert "path" not in shown["data"] and "answer_key" not in shown["data"]
    assert shown["data"]["source"] == "mix" and shown["data"]["train_size"] == 12500
    math = shown["data"]["mix"]["math_rule"]
    assert "task" not in math and math["path"] == "zwhe99/DeepMath-103K"
    # the rows of other pipelines: dpo's pairs, sft's chats
    assert not {"chosen_key", "rejected_key", "messages_key", "response_key"} & set(shown["data"])
    # no KL (kl_coef 0): no reference, no KL knobs; no critic without gae
    assert "kl_estimator" not in shown["algorithm"] and shown["algorithm"]["kl_coef"] == 0
    assert "reference" not in shown["devices"] and "critic" not in shown
    assert set(shown["devices"]) >= {"actor_train", "actor_infer", "reward", "nodes"}
    # what the run saves keeps every key (recipe.yaml, which resume reads)
    assert cfg.model_dump(mode="json")["data"]["task"] == "chain_sum"


def test_a_generator_shows_its_task_and_a_file_its_columns() -> None:
    cfg, _ = load_recipe("rlvr-math")
    shown = applicable(cfg)["data"]
    assert shown["task"] == "chain_sum" and "path" not in shown and "prompt_key" not in shown
    assert "kl_estimator" in applicable(cfg)["algorithm"]  # kl_coef 0.001: read

    cfg, _ = load_recipe("rlvr-math", ["data.path=my/data.jsonl"])
    shown = applicable(cfg)["data"]
    assert shown["path"] == "my/data.jsonl" and "prompt_key" in shown and "task" not in shown


def test_a_loss_shows_its_own_knobs() -> None:
    pg, _ = load_recipe("rlvr-math", ["algorithm.policy_loss=pg"])
    assert not {"clip_low", "clip_high", "dual_clip"} & set(applicable(pg)["algorithm"])
    gae, _ = load_recipe("rlvr-math", ["algorithm.name=ppo"])
    shown = applicable(gae)
    assert shown["algorithm"]["lam"] == 0.95 and "critic" in shown
    assert "critic" in shown["devices"]


def test_long_strings_wrap_within_80_columns() -> None:
    description = "the ROLL paper's RLVR mix (DeepMath, KodCode, general reasoning) at GPU scale"
    text = fitted_yaml({"name": "rlvr-paper", "description": description})
    assert max(len(line) for line in text.splitlines()) <= 80  # 84 before
    assert yaml.safe_load(text)["description"] == description
