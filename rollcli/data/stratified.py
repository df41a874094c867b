"""A seeded sample of a dataset's rows, stratified by one column (`data.sample: {n, by}`).

The ROLL paper samples its RLVR data "by difficulty": 5,000 DeepMath-103K problems over its
`difficulty` column, 2,000 KodCode problems over `gpt_difficulty`. Here each distinct value
of the column (a number such as DeepMath's 4.5, or a label such as KodCode's `medium`) is one
stratum, and every stratum gets an equal share of the `n` rows: the rows are dealt round
robin, one from each stratum in the column's sorted order, each stratum's rows in a seeded
shuffle of their own. A stratum with fewer rows than its share gives all of them and the
others fill the rest, so the sample is as even over the difficulties as the data allows.

The sample is deterministic for a seed and prefix-stable: it is the first `n` of one fixed
deal, so a larger `n` keeps every row of a smaller one. A row whose column is empty (`None`)
is a stratum of its own, dealt last.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any


def _stratum_key(value: Any) -> tuple[int, Any]:
    """Sort strata: numbers by value, then text, then empty cells."""
    if value is None:
        return (2, "")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, float(value))
    return (1, str(value))


def strata(values: Sequence[Any]) -> dict[Any, list[int]]:
    """Row indices by the column's value, the values in sorted order.

    >>> strata(["hard", "easy", "hard", None, 2.5])
    {2.5: [4], 'easy': [1], 'hard': [0, 2], None: [3]}
    """
    by_value: dict[Any, list[int]] = {}
    for i, value in enumerate(values):
        by_value.setdefault(value, []).append(i)
    return {v: by_value[v] for v in sorted(by_value, key=_stratum_key)}


def stratified_order(values: Sequence[Any], seed: int) -> list[int]:
    """Every row index, in the order the sample takes them: round robin over the strata
    (sorted by value), each stratum in its own seeded shuffle.

    >>> values = ["b", "a", "b", "b"]
    >>> [values[i] for i in stratified_order(values, seed=0)]  # one of each stratum first
    ['a', 'b', 'b', 'b']
    """
    queues = []
    for k, rows in enumerate(strata(values).values()):
        rows = list(rows)
        random.Random(f"{seed}/{k}").shuffle(rows)
        queues.append(rows)
    order: list[int] = []
    depth = 0
    while len(order) < len(values):
        order += [q[depth] for q in queues if depth < len(q)]
        depth += 1
    return order


def stratified_sample(values: Sequence[Any], n: int, seed: int) -> list[int]:
    """The indices of `n` rows stratified by `values` (the column), in dataset order.

    >>> values = ["easy"] * 6 + ["medium"] * 3 + ["hard"] * 1
    >>> picked = stratified_sample(values, 7, seed=1)
    >>> sorted(values[i] for i in picked).count("hard"), len(picked)
    (1, 7)
    """
    return sorted(stratified_order(values, seed)[:n])


def counts(values: Sequence[Any], picked: Sequence[int]) -> dict[Any, int]:
    """How many picked rows each stratum holds (for the run's note).

    >>> counts(["a", "b", "a"], [0, 1])
    {'a': 1, 'b': 1}
    """
    out: dict[Any, int] = {}
    for i in picked:
        out[values[i]] = out.get(values[i], 0) + 1
    return {v: out[v] for v in sorted(out, key=_stratum_key)}
