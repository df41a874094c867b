"""The metrics a trainer's `update` reports: means of what each micro-batch's loss returns.

A loss function returns its metrics as floats or as `(value, weight)` pairs. A float is
averaged over the micro-batches that report it (weight 1 each). A pair is a weighted mean
over every micro-batch of the update (all mini-batches and epochs):

    metric = sum_m w_m v_m / sum_m w_m

With `v_m` a micro-batch's token mean and `w_m` its token count, that is the token mean
of the whole batch, however it is split into micro-batches (an unweighted mean of
uneven micro-batches is not: a 1-token micro-batch would weigh as much as a 500-token
one). With `world_size > 1` the weighted sums are all-reduced over the data-parallel ranks
(one collective per `update`: every rank must report the same weighted keys), so every
rank reports the mean over the whole batch. A key whose weights sum to 0 is left out.

An `Extreme` is a micro-batch's smallest or largest value (the sampler-vs-trainer ratio's
extremes): the update reports the smallest or largest over every micro-batch (and rank).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from rollcli.algorithms.loss_metrics import Extreme, Metric


class StepMetrics:
    """Accumulates micro-batch metrics; `means()` gives the update's metrics.

    >>> m = StepMetrics()
    >>> m.add({"entropy": (1.0, 3.0), "lr": 0.1})
    >>> m.add({"entropy": (2.0, 1.0), "lr": 0.3})
    >>> m.means()
    {'entropy': 1.25, 'lr': 0.2}
    >>> m.add({"ratio_max": Extreme(3.0, "max")})
    >>> m.add({"ratio_max": Extreme(2.0, "max")})
    >>> m.means()["ratio_max"]
    3.0
    """

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.weights: dict[str, float] = {}
        self.weighted: set[str] = set()
        self.extremes: dict[str, Extreme] = {}

    def add(self, metrics: Mapping[str, Metric]) -> None:
        for key, metric in metrics.items():
            if isinstance(metric, Extreme):
                seen = self.extremes.get(key)
                pick = min if metric.op == "min" else max
                value = float(metric.value) if seen is None else pick(seen.value, metric.value)
                self.extremes[key] = Extreme(value, metric.op)
                continue
            if isinstance(metric, tuple):
                value, weight = float(metric[0]), float(metric[1])
                self.weighted.add(key)
                if weight == 0.0:  # no tokens: its value (often NaN) must not count
                    value = 0.0
            else:
                value, weight = float(metric), 1.0
            self.sums[key] = self.sums.get(key, 0.0) + value * weight
            self.weights[key] = self.weights.get(key, 0.0) + weight

    def means(self, world_size: int = 1) -> dict[str, float]:
        if world_size > 1 and self.weighted:
            self._all_reduce_weighted()
        if world_size > 1 and self.extremes:
            self._all_reduce_extremes()
        means = {k: self.sums[k] / self.weights[k] for k in self.sums if self.weights[k] > 0}
        return {**means, **{k: e.value for k, e in self.extremes.items()}}

    def _all_reduce_extremes(self) -> None:
        """One MAX all-reduce: maxima as they are, minima negated."""
        import torch.distributed as dist

        keys = sorted(self.extremes)
        signs = [1.0 if self.extremes[k].op == "max" else -1.0 for k in keys]
        flat = torch.tensor(
            [s * self.extremes[k].value for s, k in zip(signs, keys, strict=True)],
            dtype=torch.float64,
        )
        device = "cuda" if dist.get_backend() == "nccl" else "cpu"
        on_device = flat.to(device)
        dist.all_reduce(on_device, op=dist.ReduceOp.MAX)
        flat = on_device.cpu()
        for i, (s, k) in enumerate(zip(signs, keys, strict=True)):
            self.extremes[k] = Extreme(s * float(flat[i]), self.extremes[k].op)

    def _all_reduce_weighted(self) -> None:
        import torch.distributed as dist

        keys = sorted(self.weighted)
        flat = torch.tensor(
            [self.sums[k] for k in keys] + [self.weights[k] for k in keys], dtype=torch.float64
        )
        # nccl reduces only device tensors; gloo the CPU's
        device = "cuda" if dist.get_backend() == "nccl" else "cpu"
        on_device = flat.to(device)
        dist.all_reduce(on_device)
        flat = on_device.cpu()
        for i, k in enumerate(keys):
            self.sums[k], self.weights[k] = float(flat[i]), float(flat[len(keys) + i])
