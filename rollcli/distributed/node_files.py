"""Files the driver names, as a worker on another node of a cluster finds them: the model
folder (`node_model_folder`)."""

from __future__ import annotations

from pathlib import Path

from rollcli.models.hub import snapshot_repo
from rollcli.models.loading import (
    ModelNotFoundError,
    resolve_model,
)
from rollcli.models.registry import get_model_spec


def node_model_folder(path: str | Path) -> Path:
    """The driver's model folder as seen on the node this worker runs on.

    The driver resolves `--model` on its own machine; on a cluster a worker may run on
    another one. A folder present here is used as is. The embedded model, its upcycled MoE
    and the tiny-random models are built from the installed package into each machine's own
    cache, so a missing `.../models/<name>` of theirs is built here again; a hub model's snapshot
    (`.../models--ORG--NAME/snapshots/<commit>`) is found in this node's Hugging Face
    cache, or downloaded into it, at that commit. Anything else must be on every node
    (a shared filesystem, or a copy at the same path): a worker that does not find it
    stops with one line naming the path and the node.
    """
    folder = Path(path)
    if (folder / "config.json").is_file():
        return folder
    hub = snapshot_repo(folder)
    if hub is not None and hub[2] == "model":  # the same commit, from this node's cache or hub
        repo, commit, _ = hub
        return resolve_model(f"{repo}@{commit}")
    if folder.parent.name == "models":
        try:
            spec = get_model_spec(folder.name)
        except KeyError:
            spec = None
        if spec is not None and spec.source in ("embedded", "upcycled", "random"):
            return resolve_model(spec.name)
    raise ModelNotFoundError(
        f"model folder {folder} is not on this node ({_node_name()}); put it on a filesystem "
        "every Ray node mounts at the same path, or copy it to that path on every node"
    )


def _node_name() -> str:
    import socket

    from rollcli.distributed.calls import node_address

    address = node_address()
    return f"{socket.gethostname()}, {address}" if address else socket.gethostname()
