"""The run folder `runs/<run-id>/` and everything written into it while a run goes.

recipe.yaml          the resolved recipe
status.json          status, step, host, pid, heartbeat (every step and every 30 s)
metrics.jsonl        one JSON object per step
events.log           human-readable events (start, validation, checkpoints, errors)
memory.json          each role's peak memory beside the plan's (rollcli.runs.peak_memory)
samples/step-N.jsonl prompt, response, reward, answer of every sample
checkpoints/step-N/  policy as a Hugging Face folder + training state
tensorboard/         TensorBoard event files        } the trackers of run.trackers
swanlab/, wandb/     offline SwanLab / W&B runs     } (rollcli.tracking)
trackers.log         what the tracker libraries print
"""

from __future__ import annotations

import json
import math
import os
import socket
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

STATUS_FILE = "status.json"
HEARTBEAT_S = 30.0
# A `running` run whose heartbeat is older than this is dead even if its pid is taken.
STALE_AFTER_S = 10 * HEARTBEAT_S


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
        self._status_lock = threading.Lock()

    @classmethod
    def create(cls, runs_dir: str | Path, run_id: str, recipe_yaml: str) -> RunDir:
        root = Path(runs_dir) / run_id
        if (root / "metrics.jsonl").exists() and (root / "metrics.jsonl").stat().st_size:
            raise FileExistsError(
                f"run folder {root} already holds a run; continue it with `roll resume {run_id}` "
                "(or --resume auto), pick another --run-id, or remove the folder"
            )
        run = cls(root)
        for folder in (run.root, run.checkpoints, run.samples):
            folder.mkdir(parents=True, exist_ok=True)
        _atomic_write_text(run.root / "recipe.yaml", recipe_yaml)
        return run

    # ---- append-only logs ------------------------------------------------------------
    def log_metrics(self, metrics: dict[str, Any]) -> None:
        """Append one row; `time` (unix seconds) is added unless the row has it. It is cut
        to the millisecond, as `events.log` stamps are (not rounded: a row rounded up could
        seem to come after an event written just after it)."""
        now = math.floor(time.time() * 1000) / 1000
        row = {**metrics, "time": metrics.get("time", now)}
        with (self.root / "metrics.jsonl").open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(row, default=float) + "\n")
            fh.flush()

    def log_event(self, message: str) -> None:
        stamp = datetime.now().strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        with (self.root / "events.log").open("a", encoding="utf-8") as fh:
            fh.write(f"{stamp}  {message}\n")

    def write_samples(self, step: int, rows: list[dict[str, Any]]) -> None:
        text = "".join(json.dumps(r, ensure_ascii=False, default=float) + "\n" for r in rows)
        _atomic_write_text(self.samples / f"step-{step}.jsonl", text)

    # ---- status ----------------------------------------------------------------------
    def write_status(self, status: str | None = None, **fields: Any) -> None:
        """Update status.json (`status=None` keeps the current status: a heartbeat)."""
        with self._status_lock:
            data = self.read_status()
            data.update(fields)
            data.update(
                status=status or data.get("status", "unknown"),
                host=socket.gethostname(),
                pid=os.getpid(),
                heartbeat=time.time(),
                updated=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            )
            _atomic_write_text(self.root / STATUS_FILE, json.dumps(data, indent=2))

    def start_heartbeat(self, every_s: float = HEARTBEAT_S) -> threading.Event:
        """Refresh the heartbeat from a daemon thread until the returned event is set."""
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(every_s):
                self.write_status()

        threading.Thread(target=beat, name="roll-heartbeat", daemon=True).start()
        return stop

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
        if status not in ("running", "starting"):
            return status
        stale = time.time() - float(data.get("heartbeat", 0)) > STALE_AFTER_S
        here = data.get("host") in (None, socket.gethostname())
        if stale or (here and not _pid_alive(data.get("pid"))):
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

    # ---- rewinding to a checkpoint -----------------------------------------------------
    def rewind(self, step: int, metrics_lines: int) -> None:
        """Forget what was logged after checkpoint `step`: those steps will run again."""
        path = self.root / "metrics.jsonl"
        if path.exists():
            lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
            _atomic_write_text(path, "".join(lines[:metrics_lines]))
        for sample_file in self.samples.glob("step-*.jsonl"):
            if int(sample_file.stem[len("step-") :]) > step:
                sample_file.unlink()


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
