"""Check that started clusters are the workers `roll plan --json` printed: the same roles in
the same order, ranks, the Ray CPUs each actor holds and the torch threads
each process runs with (asked in the worker processes themselves), and that each runs the
worker class of the runtime's worker table. Used on a bare
`build_clusters` (tests/pipelines/test_build_clusters.py) and on the clusters a training run
starts (tests/e2e/test_presets.py)."""

from __future__ import annotations

import pytest


def _process(worker) -> dict:
    """What a worker's process holds, asked in the process itself."""
    import ray
    import torch

    return {
        "worker": f"{type(worker).__module__}:{type(worker).__name__}",
        "cpus": ray.get_runtime_context().get_assigned_resources().get("CPU", 0.0),
        "threads": torch.get_num_threads(),
    }


def assert_clusters_are_planned(clusters, planned: list[dict], pipeline: str) -> None:
    import ray

    from rollcli.runtime.worker_table import worker_class

    assert list(clusters) == [w["role"] for w in planned]
    for w in planned:
        cluster = clusters[w["role"]]
        assert cluster.world_size == w["ranks"]
        seen = ray.get([a.__ray_call__.remote(_process) for a in cluster.workers])
        cls = worker_class(w["role"], pipeline)
        assert [s["worker"] for s in seen] == [f"{cls.__module__}:{cls.__name__}"] * w["ranks"]
        assert [s["cpus"] for s in seen] == pytest.approx(w["num_cpus"])
        if w["threads"] is not None:  # light roles (reward, env) set none
            assert [s["threads"] for s in seen] == [w["threads"]] * w["ranks"]
