"""The Hugging Face hub, through `huggingface_hub`: models and datasets by repository id.

A repository is `ORG/NAME`, optionally `@REVISION` (a branch, tag or commit). Files live in
the standard cache (`$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`),
laid out as `models--ORG--NAME/snapshots/<commit>/` with `refs/<branch>` naming the commit,
so what another tool downloaded is found here and the other way round. `HF_HUB_OFFLINE=1`
keeps every call to the cache. Both are read when a call is made, not at import. A failure
is one `HubError` line that says what to do (`hf auth login`, `hf download`, offline mode).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

RepoType = Literal["model", "dataset"]
# repository ids as the hub allows them: ORG/NAME, letters, digits, `-`, `_`, `.`
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_TRUE = ("1", "ON", "YES", "TRUE")
# what a model download leaves out: other frameworks' weights, duplicate and original copies
MODEL_IGNORE = (
    "*.pth",
    "*.pt",
    "*.gguf",
    "*.onnx",
    "*.h5",
    "*.msgpack",
    "*.ot",
    "*.ckpt",
    "*.tflite",
    "original/*",
    "onnx/*",
    "openvino/*",
    "coreml/*",
)


class HubError(ValueError):
    """A repository this machine cannot get; the message is one line naming the fix."""


def split_revision(ref: str) -> tuple[str, str | None]:
    """`ORG/NAME@REV` → (`ORG/NAME`, `REV`); no `@`: revision None (the main branch).

    >>> split_revision("Qwen/Qwen2.5-0.5B-Instruct@v1.0")
    ('Qwen/Qwen2.5-0.5B-Instruct', 'v1.0')
    """
    repo, sep, revision = ref.partition("@")
    return repo, (revision or None) if sep else None


def is_repo_id(ref: str) -> bool:
    """Whether `ref` reads as a hub repository id (`ORG/NAME[@REV]`); a local path that
    exists is never one (the caller checks that first).

    >>> is_repo_id("Qwen/Qwen2.5-0.5B-Instruct"), is_repo_id("./models/x"), is_repo_id("x")
    (True, False, False)
    """
    repo, revision = split_revision(ref)
    return bool(_REPO_ID.match(repo)) and not repo.startswith(".") and revision != ""


def offline() -> bool:
    """HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) as it is now; unset, as `huggingface_hub`
    read it when it was imported."""
    from huggingface_hub import constants

    env = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return env.upper() in _TRUE if env else bool(constants.HF_HUB_OFFLINE)


def hub_cache() -> Path:
    """The hub cache as `huggingface_hub` finds it, from the environment as it is now."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface"
    )
    return Path(home).expanduser() / "hub"


def snapshot(
    repo: str,
    revision: str | None = None,
    *,
    repo_type: RepoType = "model",
    download: bool = True,
    patterns: list[str] | None = None,
    refresh: bool = False,
) -> Path:
    """The local snapshot folder of `repo` at `revision`: from the cache, else downloaded
    (with a progress bar) unless `download` is false or the hub is offline. `refresh`:
    ask the hub even where the cache has a snapshot (that misses files)."""
    from huggingface_hub import snapshot_download

    kwargs: dict[str, Any] = dict(
        repo_type=repo_type, revision=revision, cache_dir=str(hub_cache())
    )
    try:
        if not refresh:
            return Path(snapshot_download(repo, local_files_only=True, **kwargs))
        raise FileNotFoundError(repo)
    except Exception as exc:  # not cached (or incomplete): download, where allowed
        if not download or offline():
            raise _hub_error(exc, repo, revision, repo_type) from None
        unreachable = _unresolvable()
        if unreachable is not None:  # not 5 retries of a name that does not resolve
            raise _hub_error(unreachable, repo, revision, repo_type) from None
    ignore = list(MODEL_IGNORE) if repo_type == "model" else None
    if repo_type == "model" and _has_safetensors(repo, revision):
        ignore = [*MODEL_IGNORE, "*.bin"]  # the same weights twice
    try:
        return Path(
            snapshot_download(repo, allow_patterns=patterns, ignore_patterns=ignore, **kwargs)
        )
    except Exception as exc:
        raise _hub_error(exc, repo, revision, repo_type) from None


def cached_file(
    repo: str, filename: str, revision: str | None = None, repo_type: RepoType = "model"
) -> Path | None:
    """A file of `repo` from the cache, or None; never downloads."""
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(
        repo, filename, cache_dir=str(hub_cache()), revision=revision, repo_type=repo_type
    )
    return Path(found) if isinstance(found, str) else None


def fetch_file(
    repo: str, filename: str, revision: str | None = None, repo_type: RepoType = "model"
) -> Path:
    """A file of `repo`: from the cache, else downloaded (a small one: `config.json`)."""
    from huggingface_hub import hf_hub_download

    found = cached_file(repo, filename, revision, repo_type)
    if found is not None:
        return found
    unreachable = None if offline() else _unresolvable()
    if unreachable is not None:
        raise _hub_error(unreachable, repo, revision, repo_type)
    try:
        return Path(
            hf_hub_download(
                repo,
                filename,
                revision=revision,
                repo_type=repo_type,
                cache_dir=str(hub_cache()),
                local_files_only=offline(),
            )
        )
    except Exception as exc:
        raise _hub_error(exc, repo, revision, repo_type) from None


def card_text(repo: str, revision: str | None = None) -> str | None:
    """A dataset's card (README.md), from the cache or the hub; None when it has none."""
    from huggingface_hub.errors import EntryNotFoundError

    try:
        return fetch_file(repo, "README.md", revision, "dataset").read_text(encoding="utf-8")
    except HubError as exc:
        if isinstance(exc.__context__, EntryNotFoundError):
            return None
        raise


def snapshot_repo(folder: Path) -> tuple[str, str, RepoType] | None:
    """(repo id, commit, type) of a folder inside the hub cache's layout, else None.

    >>> snapshot_repo(Path("/c/hub/models--Qwen--Qwen2.5-0.5B/snapshots/abc123"))
    ('Qwen/Qwen2.5-0.5B', 'abc123', 'model')
    """
    parts = folder.parts
    if len(parts) < 3 or parts[-2] != "snapshots":
        return None
    kind, _, name = parts[-3].partition("--")
    if kind not in ("models", "datasets") or "--" not in name:
        return None
    return name.replace("--", "/", 1), parts[-1], "model" if kind == "models" else "dataset"


def _unresolvable() -> OSError | None:
    """The error of resolving the hub's host name, when it does not resolve (a machine
    without a network answers at once; the hub's client would retry for ~25 s)."""
    import socket
    from urllib.parse import urlparse

    from huggingface_hub import constants

    host = urlparse(constants.ENDPOINT).hostname or ""
    try:
        socket.getaddrinfo(host, 443)
    except OSError as exc:
        return exc
    return None


def _has_safetensors(repo: str, revision: str | None) -> bool:
    from huggingface_hub import HfApi

    try:
        files = HfApi().list_repo_files(repo, revision=revision)
    except Exception:  # the download that follows reports what is wrong
        return False
    return any(f.endswith(".safetensors") for f in files)


def _hub_error(exc: Exception, repo: str, revision: str | None, repo_type: RepoType) -> HubError:
    """One line for why `repo` cannot be had, and what to do about it."""
    from huggingface_hub.errors import (
        GatedRepoError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    what = "dataset" if repo_type == "dataset" else "model"
    flag = " --repo-type dataset" if repo_type == "dataset" else ""
    at = f"@{revision}" if revision else ""
    cause = exc.__cause__ or exc.__context__
    if isinstance(exc, GatedRepoError) or isinstance(cause, GatedRepoError):
        return HubError(
            f"the {what} {repo} is gated on the Hugging Face Hub: accept its terms on its page, "
            "then `hf auth login` (or set HF_TOKEN)"
        )
    if isinstance(exc, RevisionNotFoundError) or isinstance(cause, RevisionNotFoundError):
        return HubError(f"the {what} {repo} has no revision {revision!r} on the Hugging Face Hub")
    if isinstance(exc, RepositoryNotFoundError) or isinstance(cause, RepositoryNotFoundError):
        return HubError(
            f"the {what} {repo} is not on the Hugging Face Hub (a private one needs `hf auth "
            "login`); check the name"
        )
    where = f"the Hugging Face cache ({hub_cache()})"
    if offline():
        return HubError(
            f"the {what} {repo}{at} is not in {where} and HF_HUB_OFFLINE is set: `hf download "
            f"{repo}{flag}` where the hub is reachable (into this cache), or unset HF_HUB_OFFLINE"
        )
    reason = type(cause or exc).__name__
    if isinstance(exc, OSError) and not isinstance(exc, FileNotFoundError):  # a host name
        reason = f"{exc.strerror or exc}"
    return HubError(
        f"cannot download the {what} {repo}{at} ({reason}: the hub is unreachable?) and it is "
        f"not in {where}; `hf download {repo}{flag}` where the hub is reachable, set HF_HOME "
        f"to a cache that has it, or give a local folder"
    )
