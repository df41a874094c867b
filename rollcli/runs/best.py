"""The best validation checkpoint of a run: `checkpoints/best.json` names it.

Each validation after step 0 that beats every earlier one (`collapse.validation_score`: the
accuracy, or minus the loss) gets a checkpoint of its step, and `best.json` is rewritten
(atomically) to name it. `prune` keeps that checkpoint whatever `run.keep_last` says, so a
run that collapses late still holds its best model; `roll export RUN_ID --best` exports it.
Step 0 (the model before training) is the bar a validation must beat, not a candidate.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

BEST_FILE = "best.json"


def read_best(checkpoints: Path) -> dict[str, Any] | None:
    """`{"step", "metric", "value", "score"}` of the run's best checkpoint (`score`: the
    value, higher is better), or None."""
    path = checkpoints / BEST_FILE
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def mark_best(checkpoints: Path, step: int, metric: str, value: float, score: float) -> None:
    """Name `step-<step>` (already written) the best checkpoint."""
    tmp = checkpoints / f".{BEST_FILE}.tmp"
    best = {"step": step, "metric": metric, "value": value, "score": score}
    tmp.write_text(json.dumps(best), encoding="utf-8")
    os.replace(tmp, checkpoints / BEST_FILE)


def improves(score: float, bar: float | None, best: dict[str, Any] | None) -> bool:
    """Does a validation `score` (higher is better) beat step 0's `bar` and the best so far?

    >>> improves(0.2, 0.05, None), improves(0.2, 0.05, {"score": 0.25}), improves(0.04, 0.05, None)
    (True, False, False)
    """
    if bar is not None and score <= bar:
        return False
    return best is None or score > float(best["score"])
