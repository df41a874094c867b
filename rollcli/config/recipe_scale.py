"""A recipe's two scales: what its alias means on a CPU and on GPUs.

The shipped CPU recipes are sized for the embedded 135M model on 2 cores. A recipe may name
its at-scale form (`at_scale: rlvr-paper`): the paper's data, batch, lengths and loss for
a registry model on GPUs. An *alias* (`roll train rlvr`) picks by the run's devices: on
GPUs (`--gpus N`, `resources.gpus=N`) the at-scale recipe, on a CPU the recipe as written.
A recipe named in full (`rlvr-math`, `rlvr-paper`) or by file always runs as written, so
`make demo`, every CPU result and the GPU kit's own runs keep their settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml


@dataclass(frozen=True)
class ScaleChoice:
    """How an alias resolved on this run's devices (printed by `roll plan` / `--dry-run`)."""

    ref: str  # the alias typed
    written: str  # the recipe the alias belongs to (the CPU form)
    at_scale: str  # its at-scale form
    gpus: int  # 0: a CPU run, which keeps the written recipe

    @property
    def name(self) -> str:
        """The recipe that runs."""
        return self.at_scale if self.gpus > 0 else self.written

    def line(self) -> str:
        if self.gpus == 0:
            return (
                f"recipe {self.written}: `{self.ref}` on a CPU runs the CPU recipe; with "
                f"--gpus N it runs {self.at_scale} (the paper's settings at scale)"
            )
        many = "s" if self.gpus > 1 else ""
        return (
            f"recipe {self.at_scale}: `{self.ref}` on {self.gpus} GPU{many} runs the paper's "
            f"settings at scale; `roll train {self.written}` runs the CPU recipe as written"
        )


def requested_gpus(overrides: list[str], flags: dict[str, Any]) -> int:
    """The GPUs a command asks for, before the recipe is read: `--gpus` or
    `resources.gpus=N` (the last one wins, as when the overrides apply)."""
    gpus: Any = flags.get("resources.gpus")
    for item in overrides:
        key, _, value = item.partition("=")
        if key.strip() == "resources.gpus":
            gpus = value.strip()
    try:
        return int(gpus or 0)
    except ValueError:
        return 0  # the recipe's validation names the bad value


def scale_choice(ref: str, name: str, text: str, gpus: int) -> ScaleChoice | None:
    """How the alias `ref` of catalogue recipe `name` resolves with `gpus` GPUs, or None
    where there is no choice to make: named in full or by file, or no at-scale form."""
    raw = yaml.safe_load(text) or {}
    if ref == name or not isinstance(raw, dict) or not raw.get("at_scale"):
        return None
    if ref not in (raw.get("aliases") or []):
        return None  # a unique prefix (`rlvr-m`) names the recipe itself
    return ScaleChoice(ref=ref, written=name, at_scale=str(raw["at_scale"]), gpus=gpus)


def as_written_line(name: str, text: str, gpus: int) -> str | None:
    """Where a recipe named in full (or by a prefix, or a file copied from one) runs on GPUs
    as written, the line naming its at-scale form (`roll train webshop --gpus 8` trained
    the 12-step CPU recipe without a word about webshop-paper); None on a CPU or without one.

    >>> as_written_line("webshop", "at_scale: webshop-paper", 8)
    "recipe webshop on 8 GPUs runs as written (its CPU settings); the paper's settings at scale are webshop-paper: `roll train webshop-paper --gpus 8`"
    """
    raw = yaml.safe_load(text) or {}
    at_scale = raw.get("at_scale") if isinstance(raw, dict) else None
    if gpus <= 0 or not at_scale:
        return None
    many = "s" if gpus > 1 else ""
    return (
        f"recipe {name} on {gpus} GPU{many} runs as written (its CPU settings); the paper's "
        f"settings at scale are {at_scale}: `roll train {at_scale} --gpus {gpus}`"
    )


def scale_note(ref: str, overrides: list[str], flags: dict[str, Any]) -> str | None:
    """The line `roll plan`, `roll train` and `--dry-run` print where an alias chose between
    scales, or where a recipe with an at-scale form runs as written on GPUs."""
    from rollcli.config.catalogue import find_recipe

    name, text = find_recipe(ref)
    gpus = requested_gpus(overrides, flags)
    choice = scale_choice(ref, name, text, gpus)
    if choice is not None:
        return choice.line()
    return as_written_line(name, text, gpus)
