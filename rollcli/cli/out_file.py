"""Output paths a command writes (`roll recipes cp`, `roll data ...`): checked
before any work, so a typo in a folder name is one line, not a traceback after minutes."""

from __future__ import annotations

from pathlib import Path

from rollcli.cli.errors import fail


def check_writable(path: Path, *, makes_folders: bool = False) -> None:
    """Refuse a file path that is a folder or whose folder does not exist (unless the
    command creates it, `makes_folders`) or is a file."""
    if path.is_dir():
        fail(f"{path} is a folder, not a file", "give a file path inside it")
    parent = next((p for p in path.parents if p.exists()), Path("."))
    if not parent.is_dir():
        fail(f"cannot write {path}: {parent} is a file, not a folder", "give another path")
    if not makes_folders and parent != path.parent:
        fail(
            f"cannot write {path}: folder {path.parent} does not exist",
            f"create it first: mkdir -p {path.parent}",
        )


def write_text(path: Path, text: str) -> None:
    """Write `text` to `path`; a refusal by the system (permissions, a full disk) is one line."""
    check_writable(path)
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        fail(f"cannot write {path}: {exc.strerror or exc}", "pick a path you can write to")
