"""Whether this environment has the `agents` extra that an agent program's run needs (its
OpenAI-compatible endpoint and the client the program uses)."""

from __future__ import annotations

EXTRA_HINT = "pip install 'roll-rl[agents]' (fastapi, uvicorn, openai)"


def require_agent_extra() -> None:
    """One line naming the extra when an agent run lacks it (ValueError: a recipe error)."""
    import importlib.util

    missing = [m for m in ("fastapi", "uvicorn", "openai") if importlib.util.find_spec(m) is None]
    if missing:
        raise ValueError(f"agentic.agent needs {', '.join(missing)}: {EXTRA_HINT}")
