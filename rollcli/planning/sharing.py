"""Which roles share which GPUs: a plan's GPUs grouped by the set of roles on them.

GPUs that host the same roles peak alike, so the planner judges each group once; a plan of
100,000 GPUs costs a handful of groups, not 100,000 peak searches. The grouping depends
only on the mappings and the cluster's shape, and is cached on them: the advice ladder
re-plans one placement with other knobs many times and walks the GPUs once.

>>> [(g.roles, g.gpus) for g in group_gpus((("train", (0, 1, 2)), ("infer", (2, 3))), 5, 4)]
[(('train',), [0, 1]), (('train', 'infer'), [2]), (('infer',), [3]), ((), [4])]
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from rollcli.planning.devices import format_indices

MAX_GPUS = 1 << 17  # 131,072: beyond the largest clusters; a plan of this many takes ~1 s


@dataclass(frozen=True)
class GpuGroup:
    """GPUs (ascending) that host exactly `roles` (in the plan's role order; () = idle),
    their indices as text ("0-7") and how many of them sit on each node."""

    roles: tuple[str, ...]
    gpus: list[int]
    label: str
    per_node: dict[int, int]


@lru_cache(maxsize=16)
def group_gpus(
    placed: tuple[tuple[str, tuple[int, ...]], ...], num_gpus: int, node_size: int
) -> list[GpuGroup]:
    """Group GPUs 0..num_gpus-1 by the roles placed on them (`placed`: (role, GPU indices)
    for each GPU role, in the plan's order). The groups are in order of their first GPU."""
    masks = [0] * num_gpus  # bit i: role i of `placed` is on the GPU
    for bit, (_, gpus) in enumerate(placed):
        for gpu in gpus:
            masks[gpu] |= 1 << bit
    if masks.count(masks[0]) == num_gpus:  # the usual case: every role on every GPU
        by_mask = {masks[0]: list(range(num_gpus))}
    else:
        by_mask = {}
        for gpu, mask in enumerate(masks):
            by_mask.setdefault(mask, []).append(gpu)
    return [
        GpuGroup(
            tuple(role for bit, (role, _) in enumerate(placed) if mask >> bit & 1),
            gpus,
            format_indices(gpus),
            dict(Counter(g // node_size for g in gpus)),
        )
        for mask, gpus in by_mask.items()
    ]


@lru_cache(maxsize=64)
def spans_nodes(gpus: tuple[int, ...], group_size: int, node_size: int) -> bool:
    """Whether some run of `group_size` consecutive entries of `gpus` (a tensor-parallel
    group) crosses a node boundary."""
    return any(
        len({g // node_size for g in gpus[i : i + group_size]}) > 1
        for i in range(0, len(gpus), group_size)
    )
