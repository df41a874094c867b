"""A prompt rollout's metrics, whole rollouts (`prompt_scheduler.py`) or partial ones
(`partial_rollout.py`): the rewards of every sample scored this step, the trained batch's
lengths, and the generation's throughput, time and row occupancy.
"""

from __future__ import annotations

from typing import Any

import torch

from rollcli.data.batch import Batch
from rollcli.data.batch_keys import FINISHED, RESPONSE_MASK, SCORES


def rollout_metrics(
    batch: Batch,
    results: list[dict[str, Any]],
    tokens: int,
    intervals: list[tuple[float, float]],
    spans: list[tuple[float, float]],
    occupancy: list[tuple[int, int] | None],
) -> dict[str, float]:
    """`reward/*` are over every sample scored this step (`results`: groups dynamic sampling
    dropped included), so they follow the policy whatever the filter keeps;
    `reward/kept_mean` is the mean over the batch that trains (the kept groups), and the
    length metrics are the batch's. `tokens`: generated this step over the requests'
    wall-clock `intervals`; `spans`: the rewards' intervals; `occupancy`: each request's
    (rows that decoded, row slots) over its decode steps, when the engine counts them
    (`rollout/rows_busy`: the hf engine)."""
    lengths = batch[RESPONSE_MASK].sum(dim=1)
    scores = torch.tensor([float(r["score"]) for r in results])
    parts = {}
    for key in sorted({k for r in results for k in r if k not in ("score", "error")}):
        values = [float(r[key]) for r in results if isinstance(r.get(key), (int, float))]
        if values:
            parts[f"reward/{key}"] = sum(values) / len(values)
    # a partial step whose groups had all ended in earlier calls sent no request
    gen_start = min((start for start, _ in intervals), default=0.0)
    gen_end = max((end for _, end in intervals), default=0.0)
    gen_s = max(gen_end - gen_start, 1e-9)
    reward_s = sum(end - start for start, end in spans)
    overlap = sum(max(0.0, min(end, gen_end) - max(start, gen_start)) for start, end in spans)
    out = {
        "reward/mean": float(scores.mean()) if len(scores) else 0.0,
        "reward/std": float(scores.std()) if len(scores) > 1 else 0.0,
        "reward/errors": float(sum(1 for r in results if r.get("error"))),
        "reward/kept_mean": float(batch[SCORES].mean()),
        **parts,
        "response_length/mean": float(lengths.float().mean()),
        "response_length/max": float(lengths.max()),
        "response_length/truncated_frac": float((~batch[FINISHED]).float().mean()),
        "rollout/tokens_per_s": tokens / gen_s if intervals else 0.0,
        "time/generate_s": gen_s if intervals else 0.0,
        "time/reward_s": reward_s,
        "time/reward_overlap_s": overlap,
    }
    counted = [o for o in occupancy if o is not None]
    if counted and sum(slots for _, slots in counted):
        out["rollout/rows_busy"] = sum(b for b, _ in counted) / sum(s for _, s in counted)
    return out
