"""A resolved recipe as `roll train --dry-run` prints it: only the keys its chosen variants
read.

A run saves every key (`loader.dump_recipe`: recipe.yaml, which `roll resume` reads back),
and printed the same way a `mix` or `file` data source showed the generator's
`task: chain_sum`, so a 7B run on the paper's mix seemed to train two-digit sums. Here each
section leaves out what its own table says the chosen variant does not read:

- `data` and each `data.mix` domain: the keys of the other sources (`SOURCE_KEYS`) and of
  the other pipelines' rows (`ITEM_KEYS`), `DataConfig.unread_keys`;
- `algorithm`: the knobs of the features it does not use (`READ_WHEN`, `unread_knobs`),
  and `off_policy`'s;
- `devices`: the placements of roles the recipe does not run (`pipeline_spec.roles_run`),
  and `critic:` without a critic;
- on-policy distillation's `rollout`: the keys its sampling does not read
  (`recipe.ON_POLICY_ROLLOUT_KEYS`).

A key left out is at its default wherever setting it is refused (a role's placement, a data
key of another source, most algorithm knobs), so nothing a recipe sets is hidden.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from rollcli.config.devices_section import RolePlacement
from rollcli.config.pipeline_spec import devices_key, roles_run, spec_of
from rollcli.config.roles import CRITIC
from rollcli.config.sections import RolloutConfig

WIDTH = 80


def applicable(cfg: Any) -> dict[str, Any]:
    """`cfg` as plain data, less the keys no chosen variant of it reads."""
    out: dict[str, Any] = cfg.model_dump(mode="json")
    data = getattr(cfg, "data", None)
    if data is not None:
        _drop(out["data"], data.unread_keys(spec_of(cfg).data_items))
        for name, domain in data.mix.items():
            _drop(out["data"]["mix"][name], domain.unread_keys())
    algorithm = getattr(cfg, "algorithm", None)
    if algorithm is not None:
        _drop(out["algorithm"], algorithm.unread_knobs())
        _drop(out["algorithm"]["off_policy"], algorithm.off_policy.unread_knobs())
    run = {devices_key(role) for role in roles_run(cfg)}
    placements = type(cfg.devices).model_fields.items()
    _drop(
        out["devices"],
        {k for k, f in placements if f.annotation is RolePlacement and k not in run},
    )
    if CRITIC not in run:
        out.pop("critic", None)
    distill = getattr(cfg, "distill", None)
    if distill is not None and distill.mode == "on_policy":
        from rollcli.config.recipe import ON_POLICY_ROLLOUT_KEYS

        _drop(out["rollout"], set(RolloutConfig.model_fields) - set(ON_POLICY_ROLLOUT_KEYS))
    return out


def applicable_yaml(cfg: Any, width: int = WIDTH) -> str:
    """`applicable(cfg)` as YAML whose lines fit `width` columns where its words allow."""
    return fitted_yaml(applicable(cfg), width)


def fitted_yaml(data: dict[str, Any], width: int = WIDTH) -> str:
    """`data` as YAML, its long strings wrapped so each line fits `width` columns.

    PyYAML breaks a string at the first space past its `width`, so the line ends one word
    later (a `description:` reached 84 columns): the width it is given leaves room for the
    longest word of a string it may break (and its quotes). A string of one word is never
    broken: a long path stays whole.

    >>> text = fitted_yaml({"description": "the ROLL paper's RLVR mix (DeepMath, KodCode, general reasoning) at GPU scale"}, 40)
    >>> max(len(line) for line in text.splitlines()) <= 40
    True
    """
    words = [len(w) for w in re.findall(r"\S+", _strings(data))] or [0]
    best = max(width - max(words) - 3, 20)
    text: str = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=best)
    return text


def _strings(value: Any) -> str:
    """The strings of several words in `value`, joined."""
    if isinstance(value, str):
        return value if len(value.split()) > 1 else ""
    if isinstance(value, dict):
        return " ".join(_strings(v) for v in value.values())
    if isinstance(value, list):
        return " ".join(_strings(v) for v in value)
    return ""


def _drop(section: dict[str, Any], keys: set[str]) -> None:
    for key in keys:
        section.pop(key, None)
