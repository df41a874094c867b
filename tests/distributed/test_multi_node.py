"""A run on a Ray cluster of several nodes: workers spread over the nodes, process groups
meet at the address of rank 0's node, and the model folder is found (or refused) on each.

The slow test starts two real Ray nodes on this machine with `ray.cluster_utils.Cluster`:
the head on the machine's address and a second node on 127.0.0.2 (another loopback
address), and runs `roll train --ray-address` through the real CLI with actor_train's two
data-parallel ranks on different nodes and actor_infer on the other node than actor_train's
rank 0; then kills the driver and resumes. Both nodes share this machine's filesystem and
cores: what it verifies is placement, addressing and the rendezvous across Ray nodes, not a
network between machines (docs/gpu.md, "Several nodes").
"""

from __future__ import annotations

import doctest
import re

import pytest
from roll_subprocess import roll

from rollcli.distributed import placement, stores
from rollcli.distributed.node_files import node_model_folder
from rollcli.models.loading import ModelNotFoundError, resolve_model

SMALL = [
    "rollout.batch_size=8",
    "rollout.group_size=4",
    "rollout.max_new_tokens=8",
    "data.val_size=4",
    "data.train_size=50",
    "train.micro_batch_size=2",
    "train.mini_batch_size=4",
    "train.num_workers=2",
    "run.eval_every=0",
    "algorithm.entropy_coef=0.01",  # random weights score 0: the entropy bonus still moves them
]


def test_ranks_spread_over_nodes_and_actor_infer_starts_on_another() -> None:
    assert doctest.testmod(placement).failed == 0
    train = placement.spread_nodes(0, 2, 3)
    infer = placement.spread_nodes(1, 2, 3)
    assert train == [0, 1] and infer == [1, 2]
    assert infer[0] != train[0]  # the weight sync crosses nodes


def test_outside_ray_the_store_address_is_the_loopback() -> None:
    from rollcli.distributed.ray_session import stop_ray

    stop_ray()  # outside Ray: not in the suite's shared session (tests/conftest.py)
    assert stores.node_address() == "127.0.0.1"


def test_a_model_folder_missing_on_a_node_is_one_line_naming_it(tmp_path) -> None:
    missing = tmp_path / "shared" / "qwen"
    with pytest.raises(ModelNotFoundError) as err:
        node_model_folder(missing)
    message = str(err.value)
    assert "\n" not in message and str(missing) in message
    assert "every Ray node" in message


def test_a_cached_builtin_model_is_built_again_on_a_node_without_it(tiny_model) -> None:
    elsewhere = "/home/someone-else/.cache/roll/models/tiny-random"  # the driver's cache
    assert node_model_folder(elsewhere) == resolve_model("tiny-random")
    assert node_model_folder(tiny_model) == tiny_model  # present here: used as is


@pytest.fixture(scope="module")
def two_nodes():
    """Two Ray nodes under a Ray temp folder of their own: `Cluster` writes its address to
    `$RAY_TMPDIR/ray/ray_current_cluster`, where a plain `ray.init()` of any other process
    on this machine (other test runs) would find it and try to join."""
    import os
    import shutil
    import tempfile

    from ray.cluster_utils import Cluster

    tmp = tempfile.mkdtemp(prefix="roll-mn-", dir="/tmp")  # short: Ray's socket paths
    before = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = tmp
    cluster = None
    try:
        cluster = Cluster(
            initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False}
        )
        cluster.add_node(num_cpus=2, node_ip_address="127.0.0.2")
        cluster.wait_for_nodes()
        yield cluster
    finally:
        if cluster is not None:
            cluster.shutdown()
        if before is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = before
        shutil.rmtree(tmp, ignore_errors=True)


def _nodes(events: str) -> dict[str, list[tuple[str, str]]]:
    """`worker nodes:` line of events.log -> {role: [(ip, node id prefix) per rank]}."""
    line = next(x for x in events.splitlines() if "worker nodes:" in x)
    out = {}
    for part in line.split("worker nodes:", 1)[1].split(";"):
        role, ranks = part.split(":", 1)
        out[role.strip()] = [tuple(r.strip().split("/")) for r in ranks.split(",")]
    return out


def _train(tmp_path, address: str, run_id: str, fault: str = ""):
    return roll(
        "train", "rlvr", "--model", "tiny-random", "--steps", "3", "--save-every", "1",
        "--runs-dir", str(tmp_path), "--run-id", run_id, "--ray-address", address, *SMALL,
        cwd=tmp_path, fault=fault,
    )  # fmt: skip


def _weights(folder):
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


@pytest.mark.slow  # three runs of three steps on two Ray nodes: about five minutes here
def test_two_node_run_spreads_syncs_and_resumes_exactly(tmp_path, tiny_model, two_nodes):
    from pathlib import Path

    import torch

    head_ip = two_nodes.head_node.node_ip_address
    shared = Path("/tmp/ray/ray_current_cluster")  # what other processes' ray.init() reads
    assert not shared.exists() or two_nodes.address not in shared.read_text()
    assert head_ip != "127.0.0.2"
    res = _train(tmp_path, two_nodes.address, "whole")
    assert res.returncode == 0, res.stderr[-3000:]
    events = (tmp_path / "whole" / "events.log").read_text()
    nodes = _nodes(events)
    train, infer = nodes["actor_train"], nodes["actor_infer"]
    assert len(train) == 2 and train[0][1] != train[1][1]  # DP ranks on different nodes
    assert infer[0][1] != train[0][1]  # the weight sync crosses nodes
    assert {ip for ip, _ in train} == {head_ip, "127.0.0.2"}
    # both groups meet at rank 0's node (the head, where the driver runs), not 127.0.0.1
    assert re.search(rf"weight sync over gloo at {re.escape(train[0][0])}:\d+", events)
    assert re.search(rf"data-parallel actor_train group at {re.escape(train[0][0])}:\d+", events)

    killed = _train(tmp_path, two_nodes.address, "cut", fault="kill@train:2")
    assert killed.returncode != 0
    res = roll("resume", "cut", "--runs-dir", str(tmp_path), cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "worker nodes:" in (tmp_path / "cut" / "events.log").read_text()
    whole = _weights(tmp_path / "whole" / "checkpoints" / "step-3")
    resumed = _weights(tmp_path / "cut" / "checkpoints" / "step-3")
    assert whole.keys() == resumed.keys()
    for name, tensor in whole.items():
        assert torch.equal(tensor, resumed[name]), name
