"""Recipes typed by `pipeline:`: each pipeline's recipe has only the sections it reads, so a
section of another pipeline is an unknown key, named with the pipeline it belongs to."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rollcli.config.catalogue import catalogue
from rollcli.config.errors import ConfigError
from rollcli.config.loader import dump_recipe, load_recipe
from rollcli.config.recipe import (
    RECIPE_TYPES,
    AgenticRecipe,
    DistillRecipe,
    DPORecipe,
    RLVRRecipe,
    SFTRecipe,
)

COMMON = {"name", "pipeline", "description", "aliases", "at_scale", "model", "seed"}
COMMON |= {"train", "resources", "devices", "run"}
SECTIONS = {
    RLVRRecipe: {"algorithm", "rollout", "data", "critic", "reward"},
    AgenticRecipe: {"algorithm", "rollout", "critic", "agentic", "warmup"},
    DPORecipe: {"data", "dpo"},
    SFTRecipe: {"data", "sft", "rollout", "reward"},
    DistillRecipe: {"data", "distill", "rollout", "reward"},
}


def test_each_pipeline_has_only_the_sections_it_reads() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "recipes.md").read_text(encoding="utf-8")
    for recipe_type, own in SECTIONS.items():
        assert set(recipe_type.model_fields) == COMMON | own, recipe_type.__name__
        pipeline = recipe_type.model_fields["pipeline"].annotation.__args__[0]
        row = next(line for line in doc.splitlines() if line.startswith(f"| {pipeline} |"))
        assert set(row.split("|")[2].replace("`", "").replace(" ", "").split(",")) == own


@pytest.mark.parametrize("name", [e.name for e in catalogue()])
def test_every_shipped_recipe_loads_as_its_pipelines_type(name: str, tmp_path) -> None:
    cfg, _ = load_recipe(name)
    assert type(cfg) is RECIPE_TYPES[cfg.pipeline] and type(cfg) in SECTIONS
    saved = tmp_path / "recipe.yaml"
    saved.write_text(dump_recipe(cfg))
    assert set(yaml.safe_load(saved.read_text())) == set(type(cfg).model_fields)
    assert load_recipe(str(saved))[0] == cfg  # the resolved recipe round-trips


@pytest.mark.parametrize(
    ("recipe", "override", "expected"),
    [
        ("rlvr-math", "dpo.beta=0.2", "unknown key 'dpo': dpo.* applies to the dpo pipeline"),
        ("sft", "agentic.env=sokoban", "unknown key 'agentic': agentic.* applies to the agentic"),
        ("dpo", "algorithm.kl_coef=0.1", "algorithm.* applies to the rlvr and agentic pipelines"),
        ("dpo", "rollout.temperature=0.5", "rollout.* applies to the rlvr, agentic, sft and"),
        ("agentic-sokoban", "data.val_size=8", "unknown key 'data'"),
        ("agentic-sokoban", "reward.fn=math", "reward.* applies to the rlvr, sft and distill"),
        ("sft", "critic.lr=1e-5", "critic.* applies to the rlvr and agentic pipelines"),
    ],
)
def test_a_section_of_another_pipeline_is_an_unknown_key(recipe, override, expected) -> None:
    with pytest.raises(ConfigError) as err:
        load_recipe(recipe, [override])
    message = str(err.value)
    assert expected in message and "\n" not in message
    pipeline = load_recipe(recipe)[0].pipeline
    assert f"this recipe's pipeline is {pipeline!r}; remove it" in message


def test_pipeline_and_misspelt_keys_keep_the_usual_hints() -> None:
    with pytest.raises(ConfigError, match=r"pipeline = 'rlv' \(did you mean 'rlvr'\?\); choose"):
        load_recipe("rlvr-math", ["pipeline=rlv"])
    with pytest.raises(ConfigError, match=r"unknown key 'trian' \(did you mean 'train'\?\)"):
        load_recipe("sft", ["trian.lr=1e-5"])
    with pytest.raises(ConfigError, match=r"did you mean 'rollout.max_new_tokens'"):
        load_recipe("distill", ["rollout.max_new_token=8"])
    with pytest.raises(ConfigError, match="unknown key 'dpo.betta' .did you mean 'dpo.beta'"):
        load_recipe("dpo", ["dpo.betta=0.2"])


def test_a_run_saved_before_typed_recipes_still_resumes(tmp_path) -> None:
    """Such a run's recipe.yaml lists every section (its pipeline never read the others)."""
    cfg, _ = load_recipe("sft", [], {"train.steps": 3})
    old = yaml.safe_load(dump_recipe(cfg))
    old |= {"algorithm": {"name": "grpo", "kl_coef": 0.001}, "critic": {"lr": 1e-5}}
    old |= {"agentic": {"env": "frozenlake"}, "dpo": {"beta": 0.1}, "distill": {"top_k": 0}}
    saved = tmp_path / "recipe.yaml"
    saved.write_text(yaml.safe_dump(old))
    with pytest.raises(ConfigError, match=r"unknown key '\w+'.* \(and 4 more problems\)"):
        load_recipe(str(saved))  # as a recipe a user wrote: refused
    assert load_recipe(str(saved), saved_run=True)[0] == cfg
    resumed, _ = load_recipe(str(saved), ["train.steps=5"], saved_run=True)
    assert resumed.train.steps == 5
    with pytest.raises(ConfigError, match="unknown key 'dpo'"):  # a new override is checked
        load_recipe(str(saved), ["dpo.beta=0.3"], saved_run=True)
