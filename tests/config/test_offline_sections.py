"""The sft, dpo and distill sections: typed, frozen, strict, and only for their pipeline."""

from __future__ import annotations

import pytest

from rollcli.config.errors import ConfigError
from rollcli.config.loader import dump_recipe, load_recipe


@pytest.mark.parametrize("name", ["sft", "dpo", "distill", "distill-on-policy"])
def test_offline_recipes_resolve_and_round_trip(name, tmp_path) -> None:
    cfg, _ = load_recipe(name, [], {"train.steps": 3})
    assert cfg.pipeline == name.split("-")[0]
    path = tmp_path / "resolved.yaml"
    path.write_text(dump_recipe(cfg))
    assert load_recipe(str(path))[0] == cfg


@pytest.mark.parametrize(
    ("recipe", "override", "expected"),
    [
        ("sft", "sft.bach_size=4", "unknown key 'sft.bach_size' (did you mean 'sft.batch_size'?)"),
        ("dpo", "dpo.betta=0.2", "did you mean 'dpo.beta'?"),
        ("distill", "distill.topk=5", "did you mean 'distill.top_k'?"),
        ("dpo", "dpo.loss=hinge", "dpo.loss = 'hinge'"),
        ("distill", "distill.loss=kl", "distill.loss = 'kl'"),
        ("sft", "dpo.beta=0.2", "unknown key 'dpo': dpo.* applies to the dpo pipeline"),
        ("rlvr-math", "sft.packing=false", "unknown key 'sft': sft.* applies to the sft pipeline"),
        ("dpo", "dpo.loss=cdpo", "dpo.label_smoothing is 0"),
        ("dpo", "dpo.label_smoothing=0.1", "applies to dpo.loss=cdpo only"),
        ("dpo", "dpo.label_smoothing=0.5", "dpo.label_smoothing = 0.5"),
        ("sft", "train.mini_batch_size=4", "one optimizer step per sft.batch_size samples"),
        ("distill", "distill.skew_alpha=1.0", "distill.skew_alpha = 1.0"),
        ("distill-on-policy", "distill.sft_weight=0.1", "remove distill.sft_weight"),
        ("distill-on-policy", "distill.sample_temperature=0.7", "samples at rollout.temperature"),
        ("distill-on-policy", "rollout.group_size=4", "rollout.group_size does not apply"),
        ("distill-on-policy", "rollout.engine=vllm", "rollout.engine does not apply"),
        ("distill-on-policy", "distill.mode=offline", "distill.mode = 'offline'"),
    ],
)
def test_bad_offline_keys_fail_with_one_line(recipe, override, expected) -> None:
    with pytest.raises(ConfigError) as err:
        load_recipe(recipe, [override])
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_distill_takes_a_ready_student_or_a_layer_count_not_both() -> None:
    cfg, _ = load_recipe("distill", ["distill.student=tiny-random"])
    assert cfg.distill.student == "tiny-random" and cfg.distill.student_layers is None
    with pytest.raises(ConfigError, match="set only one of them"):
        load_recipe("distill", ["distill.student=tiny-random", "distill.student_layers=3"])


def test_conservative_dpo_with_its_smoothing_is_accepted() -> None:
    cfg, _ = load_recipe("dpo", ["dpo.loss=cdpo", "dpo.label_smoothing=0.1"])
    assert cfg.dpo.loss == "cdpo" and cfg.dpo.label_smoothing == 0.1


@pytest.mark.parametrize("name", ["distill-on-policy", "rlvr-math-lora"])
def test_recipes_built_on_rlvr_math_use_its_problems(name) -> None:
    """distill-on-policy distils an rlvr-math run and rlvr-math-lora is rlvr-math with
    adapters: their problems and held-out split must be rlvr-math's, or the student is
    scored on a set the teacher never trained for and LoRA is compared on another task."""
    assert load_recipe(name)[0].data == load_recipe("rlvr-math")[0].data
