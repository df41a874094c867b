"""Shared helpers for the sandbox tests: host-side checks run after each hostile program."""

from __future__ import annotations

import glob
import os

import pytest

from rollcli.rewards.sandbox import detect_isolation
from rollcli.rewards.sandbox.process import _UID_BASE, _UID_SPAN


def pytest_collection_modifyitems(config, items):
    """Every sandbox test needs network+mount namespaces; skip them all without."""
    if detect_isolation()["strong"]:
        return
    skip = pytest.mark.skip(reason="no network+mount namespaces here (see docs/sandbox.md)")
    for item in items:
        if "tests/sandbox/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(skip)


def sandbox_processes() -> list[int]:
    """Host pids still running as a sandbox uid (there must be none)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                uid = os.stat(f"/proc/{name}").st_uid
            except OSError:
                continue
            if _UID_BASE <= uid < _UID_BASE + _UID_SPAN:
                found.append(int(name))
    return found


def leftover_cgroups() -> list[str]:
    return glob.glob("/sys/fs/cgroup/**/roll-sandbox-*", recursive=True)


@pytest.fixture
def host_clean():
    """Assert the host holds no sandbox process or cgroup after the test."""
    yield
    assert sandbox_processes() == []
    assert leftover_cgroups() == []
