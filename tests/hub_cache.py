"""Hugging Face hub-cache layouts built on disk, as `huggingface_hub` writes them, for the
offline tests of hub models and datasets: `<cache>/models--ORG--NAME/` (or `datasets--`)
with `blobs/<sha256>`, `snapshots/<commit>/<file>` symlinks to the blobs and
`refs/main` naming the commit. Test modules import it as `from hub_cache import ...`
(tests/conftest.py puts this folder on sys.path)."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def cache_repo(
    cache: Path,
    repo: str,
    files: dict[str, Path],
    *,
    repo_type: str = "model",
    commit: str = COMMIT,
    ref: str = "main",
) -> Path:
    """`repo` in the hub cache `cache` (`$HF_HOME/hub`) holding `files` (name in the
    repository -> a local file to copy); returns the snapshot folder."""
    base = cache / f"{repo_type}s--{repo.replace('/', '--')}"
    snapshot = base / "snapshots" / commit
    for name, source in files.items():
        data = source.read_bytes()
        blob = base / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        if not blob.exists():
            shutil.copyfile(source, blob)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.exists() or link.is_symlink():
            link.unlink()
        os.symlink(os.path.relpath(blob, link.parent), link)
    refs = base / "refs"
    refs.mkdir(parents=True, exist_ok=True)
    (refs / ref).write_text(commit)
    return snapshot


def cache_model_folder(cache: Path, repo: str, folder: Path, **kwargs: str) -> Path:
    """A local Hugging Face model folder as hub repository `repo` in `cache`."""
    files = {p.name: p for p in folder.iterdir() if p.is_file()}
    return cache_repo(cache, repo, files, **kwargs)
