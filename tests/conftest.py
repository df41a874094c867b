"""Shared fixtures: the tiny-random model folder (built once per session, in a temp cache)
and the suite's one local Ray session.

This folder goes on sys.path so test modules can import shared helpers
(`from roll_subprocess import roll`, `from roll_in_process import cli`), and the folders of
the test rewards and agent programs go on sys.path and PYTHONPATH.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import huggingface_hub.constants  # noqa: F401 - read once here, before a test sets HF_HUB_OFFLINE
import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
# The test rewards and agent programs that runs in this process name (`reward.fn`,
# `agentic.agent`: e2e/coin_rewards.py, runs/faulty_rewards.py, agentic/endpoint_agent.py,
# ...) and e2e/planned_workers.py's probe: importable here, and by the workers of the Ray
# session this process starts (they inherit its environment).
CODE_FOLDERS = [str(HERE / "e2e"), str(HERE / "runs"), str(HERE / "agentic")]
sys.path[1:1] = CODE_FOLDERS
os.environ["PYTHONPATH"] = os.pathsep.join(
    [*CODE_FOLDERS, *filter(None, [os.environ.get("PYTHONPATH")])]
)


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    from rollcli.models.loading import resolve_model

    return resolve_model("tiny-random")


@pytest.fixture(scope="session")
def tiny_moe_model() -> Path:
    """tiny-random-moe's folder: a 2-layer Qwen3-MoE, 4 experts, top-2."""
    from rollcli.models.loading import resolve_model

    return resolve_model("tiny-random-moe")


@pytest.fixture(scope="session")
def _ray_session_owner():
    yield
    from rollcli.distributed.ray_session import stop_ray

    stop_ray()


@pytest.fixture(scope="module")
def ray_session(_ray_session_owner) -> None:
    """The local Ray session (2 CPUs) that the modules using it share: started by the first,
    stopped when the test session ends, not once per module (~5 s each). Idempotent: a
    module that stopped Ray (a test of its own session) leaves the next to start it again.
    Each module kills the workers it starts."""
    from rollcli.distributed.ray_session import start_ray

    start_ray(num_cpus=2)
