"""The run folder `runs/<run-id>/` and everything written into it while a run goes.

    recipe.yaml          the resolved recipe
    status.json          status, step, pid, heartbeat (updated every step)
    metrics.jsonl        one JSON object per step
    events.log           human-readable events (start, validation, checkpoints, errors)
    samples/step-N.jsonl prompt, response, reward, answer of every sample
    checkpoints/step-N/  policy as a Hugging Face folder + training state
    tensorboard/         TensorBoard event files
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

STATUS_FILE = "status.json"


def new_run_id(recipe_name: str) -> str:
    return f"{recipe_name}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


class RunDir:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.checkpoints = self.root / "checkpoints"
        self.samples = self.root / "samples"

    @classmethod
    def create(cls, runs_dir: str | Path, run_id: str, recipe_yaml: str) -> RunDir:
        root = Path(runs_dir) / run_id
        if (root / "metrics.jsonl").exists() and (root / "metrics.jsonl").stat().st_size:
            raise FileExistsError(
                f"run folder {root} already holds a run; pick another --run-id or remove the folder"
            )
        run = cls(root)
        for folder in (run.root, run.checkpoints, run.samples):
            folder.mkdir(parents=True, exist_ok=True)
        _atomic_write_text(run.root / "recipe.yaml", recipe_yaml)
        return run

    # ---- append-only logs ------------------------------------------------------------
    def log_metrics(self, metrics: dict[str, Any]) -> None:
        with (self.root / "metrics.jsonl").open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(metrics, default=float) + "\n")
            fh.flush()

    def log_event(self, message: str) -> None:
        stamp = datetime.now().strftime("%Y-%m-%d %H:%M:%S")
        with (self.root / "events.log").open("a", encoding="utf-8") as fh:
            fh.write(f"{stamp}  {message}\n")

    def write_samples(self, step: int, rows: list[dict[str, Any]]) -> None:
        text = "".join(json.dumps(r, ensure_ascii=False, default=float) + "\n" for r in rows)
        _atomic_write_text(self.samples / f"step-{step}.jsonl", text)

    # ---- status ----------------------------------------------------------------------
    def write_status(self, status: str, **fields: Any) -> None:
        data = self.read_status()
        data.update(fields)
        data.update(
            status=status,
            pid=os.getpid(),
            heartbeat=time.time(),
            updated=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        )
        _atomic_write_text(self.root / STATUS_FILE, json.dumps(data, indent=2))

    def read_status(self) -> dict[str, Any]:
        path = self.root / STATUS_FILE
        if not path.exists():
            return {}
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            return {}

    def effective_status(self) -> str:
        """The recorded status, or `killed` for a `running` run whose process is gone."""
        data = self.read_status()
        status = data.get("status", "unknown")
        if status in ("running", "starting") and not _pid_alive(data.get("pid")):
            return "killed"
        return status

    def read_metrics(self) -> list[dict[str, Any]]:
        path = self.root / "metrics.jsonl"
        if not path.exists():
            return []
        rows = []
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut by a kill
        return rows


def _pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
