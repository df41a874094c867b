"""A readable tail of a run: `events.log` and one compact line per `metrics.jsonl` step, merged
in time order, read incrementally so that `roll logs -f` can follow a live run.

Only complete lines (ending in a newline) are read: a line that a writer, or a kill, left half
written is skipped until it is complete, and a line that never parses is dropped.

A metrics row is placed by its `time` key (unix seconds, written with every row); a row without
one keeps its place among the rows. Within one second of an `events.log` stamp without
fractions (older runs), a step's own events (validation, time limit) come before its line and
all others after it.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from rollcli.runs.run_dir import RunDir
from rollcli.runs.step_time import training_step_s
from rollcli.tracking.peak import ShownPeak

LIVE_STATUSES = ("starting", "running")
# events a step logs before its own metrics row
STEP_EVENTS = ("validation:", "time limit")
ACTION_FRAC = "agentic/action_frac/"  # agentic: the share of turns that took each action
TOOL_ERROR = "env/tool_error/"  # tool envs: training episodes' tool errors, per kind (count)
_EVENT = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)  (.*)$")


@dataclass(frozen=True)
class LogLine:
    """One line of `roll logs`: an event or a step. `time` is unix seconds (None: unknown)."""

    time: float | None
    kind: str  # "event" or "step"
    text: str

    @property
    def stamp(self) -> str:
        return datetime.fromtimestamp(self.time).strftime("%H:%M:%S") if self.time else " " * 8

    def render(self) -> str:
        return f"{self.stamp}  {self.text}"


# a compact line (`format_step(width=...)`) leaves out the parts of highest rank first
RANKS = {
    "reward": 1, "val acc": 1, "time": 2, "before": 2, "kl": 3, "template drift": 3,
    "informative": 4, "tool errors": 4, "len": 5, "top": 5, "calls/ep": 6, "call valid": 6,
    "entropy": 7, "action H": 7, "moe": 8, "mismatch": 8, "mfu": 9,
}  # fmt: skip


def format_step(row: dict[str, Any], total_steps: int | None = None, width: int = 0) -> str:
    """The line of one metrics row: every part, or with `width` as many as fit in that many
    columns, the least telling left out first (`RANKS`: mfu first, the reward last).

    >>> format_step({"step": 3, "reward/mean": 0.5, "actor/kl": 0.0012, "time/step_s": 41.2}, 10)
    'step  3/10  reward 0.500  kl 0.0012  41.2 s'
    >>> format_step({"step": 3, "reward/mean": 0.5, "actor/kl": 0.0012, "time/step_s": 41.2},
    ...     10, width=34)
    'step  3/10  reward 0.500  41.2 s'
    >>> format_step({"step": 0, "val/accuracy": 0.296875}, 10)
    'step  0/10  val acc 0.297  (before training)'
    >>> format_step({"step": 2, "val/accuracy": 0.5, "val/sokoban/accuracy": 0.125})
    'step 2  val acc 0.500  val sokoban 0.125'
    >>> format_step({"step": 2, "val/accuracy": 0.75, "val/rewards/accuracy": 0.5})
    'step 2  val pref acc 0.750  reward acc 0.500'
    >>> format_step({"step": 4, "agentic/informative_groups": 0.5,
    ...     "agentic/action_frac/Left": 0.75, "agentic/action_frac/Up": 0.25})
    'step 4  informative 0.50  top Left 0.75'
    >>> format_step({"step": 5, "env/tool_calls_per_episode": 1.25, "env/tool_call_valid": 0.8,
    ...     "env/tool_errors": 16.0, "env/tool_error/malformed": 12.0, "env/tool_error/raised": 4.0})
    'step 5  calls/ep 1.25  call valid 0.80  tool errors 16 (malformed 12)'
    >>> format_step({"step": 6, "agentic/template_drift": 0.25,
    ...     "agentic/retokenize_drift": 0.5})
    'step 6  template drift 0.25'
    >>> format_step({"step": 2, "perf/generate_mfu": 0.0312, "perf/train_mfu": 0.254})
    'step 2  mfu gen 3.1% train 25.4%'
    >>> format_step({"step": 1, "rollout/mismatch_kl": 0.00031, "rollout/mismatch_ratio_min": 0.52,
    ...     "rollout/mismatch_ratio_max": 1.91})
    'step 1  mismatch kl 0.00031 r [0.52, 1.91]'
    >>> format_step({"step": 1, "moe/routing_agreement": 0.541, "moe/logprob_mismatch": 2.8e-07,
    ...     "moe/logprob_mismatch_unreplayed": 0.0218})
    'step 1  moe agree 0.541 gap 2.8e-07 (unreplayed 0.022)'
    >>> format_step({"step": 30, "time/step_s": 240.0, "time/validate_s": 59.0})
    'step 30  181.0 s (+59.0 s val)'
    """
    step = row.get("step", "?")
    if total_steps:
        head = f"step {step:>{len(str(total_steps))}}/{total_steps}"
    else:
        head = f"step {step}"
    parts = [(0, head), *_parts(row)]
    while width and len("  ".join(text for _, text in parts)) > width and len(parts) > 1:
        worst = max(range(1, len(parts)), key=lambda i: (parts[i][0], i))
        del parts[worst]
    return "  ".join(text for _, text in parts)


def _parts(row: dict[str, Any]) -> list[tuple[int, str]]:
    """(rank, text) of each part a row has, in the line's order."""
    parts: list[tuple[int, str]] = []
    fields = (
        ("reward/mean", "reward", "{:.3f}"),
        ("val/accuracy", "val acc", "{:.3f}"),
        ("actor/kl", "kl", "{:.4f}"),
        ("actor/entropy", "entropy", "{:.3f}"),
        ("response_length/mean", "len", "{:.1f}"),
        ("agentic/informative_groups", "informative", "{:.2f}"),
        ("agentic/first_action_entropy", "action H", "{:.2f}"),
        ("env/tool_calls_per_episode", "calls/ep", "{:.2f}"),
        ("env/tool_call_valid", "call valid", "{:.2f}"),
    )
    dpo = row.get("val/rewards/accuracy")  # DPO: its two accuracies, each by its name
    for key, label, fmt in fields:
        value = row.get(key)
        if isinstance(value, (int, float)):
            named = "val pref acc" if key == "val/accuracy" and dpo is not None else label
            parts.append((RANKS[label], f"{named} {fmt.format(value)}"))
        if key == "val/accuracy" and isinstance(dpo, (int, float)):
            parts.append((RANKS[label], f"reward acc {dpo:.3f}"))
        if key == "val/accuracy":  # agentic.val_env: the second env's success, by its name
            for name, other in cross_env_accuracy(row).items():
                parts.append((RANKS["val acc"], f"val {name} {other:.3f}"))
    actions = {k.rsplit("/", 1)[1]: v for k, v in row.items() if k.startswith(ACTION_FRAC)}
    if actions:  # the agentic policy's most frequent action: a collapse shows as 1.00
        top = max(actions, key=actions.__getitem__)
        parts.append((RANKS["top"], f"top {top} {actions[top]:.2f}"))
    errors = row.get("env/tool_errors")
    if isinstance(errors, (int, float)):  # a tool env: its errors and the most common kind
        kinds = {k.removeprefix(TOOL_ERROR): v for k, v in row.items() if k.startswith(TOOL_ERROR)}
        common = max(kinds, key=kinds.__getitem__) if kinds else None
        kind = f" ({common} {kinds[common]:g})" if errors and common and kinds[common] else ""
        parts.append((RANKS["tool errors"], f"tool errors {errors:g}{kind}"))
    drift = row.get("agentic/template_drift")
    if isinstance(drift, (int, float)) and drift > 0:  # the template renders other turns
        parts.append((RANKS["template drift"], f"template drift {drift:.2f}"))
    mfu = [
        f"{label} {100 * row[key]:.1f}%"
        for key, label in (
            ("perf/generate_mfu", "gen"),
            ("perf/forward_mfu", "fwd"),
            ("perf/train_mfu", "train"),
        )
        if isinstance(row.get(key), (int, float))
    ]
    if mfu:
        parts.append((RANKS["mfu"], "mfu " + " ".join(mfu)))
    gap = row.get("rollout/mismatch_kl")
    if isinstance(gap, (int, float)):  # sampler vs trainer: the KL and pi_old / mu's extremes
        low, high = row.get("rollout/mismatch_ratio_min"), row.get("rollout/mismatch_ratio_max")
        extremes = (
            f" r [{low:.2f}, {high:.2f}]"
            if isinstance(low, float | int) and isinstance(high, float | int)
            else ""
        )
        parts.append((RANKS["mismatch"], f"mismatch kl {gap:.2g}{extremes}"))
    agree = row.get("moe/routing_agreement")
    if isinstance(agree, (int, float)):  # an MoE model: routing agreement, the log-prob gap
        gap, bare = row.get("moe/logprob_mismatch"), row.get("moe/logprob_mismatch_unreplayed")
        text = f"moe agree {agree:.3f}"
        text += f" gap {gap:.2g}" if isinstance(gap, (int, float)) else ""
        text += f" (unreplayed {bare:.2g})" if isinstance(bare, (int, float)) else ""
        parts.append((RANKS["moe"], text))
    step_s = training_step_s(row)  # as the live line's s/step: validation apart
    if step_s is not None:
        val_s = row.get("time/validate_s")
        text = f"{step_s:.1f} s" + (f" (+{val_s:.1f} s val)" if val_s else "")
        parts.append((RANKS["time"], text))
    if row.get("step") == 0 and "reward/mean" not in row:
        parts.append((RANKS["before"], "(before training)"))
    return parts


def cross_env_accuracy(row: dict[str, Any]) -> dict[str, float]:
    """`val/<name>/accuracy` of a row by name: the success of `agentic.val_env`, the env a run
    validates on beside its training env.

    >>> cross_env_accuracy({"val/accuracy": 0.5, "val/sokoban/accuracy": 0.25})
    {'sokoban': 0.25}
    >>> cross_env_accuracy({"val/accuracy": 0.5, "val/rewards/accuracy": 0.25})  # DPO's
    {}
    """
    return {
        key.split("/")[1]: value
        for key, value in row.items()
        if key.startswith("val/")
        and key.endswith("/accuracy")
        and key.count("/") == 2
        and key != "val/rewards/accuracy"  # DPO's implicit-reward accuracy, no env
        and isinstance(value, (int, float))
    }


def parse_event(line: str, previous: float | None) -> tuple[float | None, str]:
    """`(unix time, message)` of an `events.log` line; a line without a stamp keeps `previous`."""
    match = _EVENT.match(line)
    if not match:
        return previous, line
    fmt = "%Y-%m-%d %H:%M:%S.%f" if "." in match.group(1) else "%Y-%m-%d %H:%M:%S"
    stamp = datetime.strptime(match.group(1), fmt).timestamp()
    return stamp, match.group(2)


class _LineReader:
    """Complete lines appended to a file since the last call (a half-written tail waits)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def read_new(self) -> list[str]:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return []
        if size < self.offset:  # truncated (a resume cut the file back): read it again
            self.offset = 0
        if size == self.offset:
            return []
        with self.path.open("rb") as fh:
            fh.seek(self.offset)
            data = fh.read(size - self.offset)
        end = data.rfind(b"\n")
        if end < 0:
            return []
        self.offset += end + 1
        return data[: end + 1].decode("utf-8", errors="replace").splitlines()


class RunTail:
    """Reads a run's events and metrics incrementally; `poll()` returns the new lines."""

    def __init__(self, run: RunDir, step_width: int = 0) -> None:
        """`step_width`: the columns a step line may take (0: every part, however long)."""
        self.run = run
        self.step_width = step_width
        self.events = _LineReader(run.root / "events.log")
        self.metrics = _LineReader(run.root / "metrics.jsonl")
        self.last_event_time: float | None = None
        self.peak = ShownPeak()  # MFUs an older run logged above 100% show against a raised peak

    def total_steps(self) -> int | None:
        total = self.run.read_status().get("total_steps")
        return int(total) if isinstance(total, (int, float)) and total > 0 else None

    def poll(self) -> list[LogLine]:
        """New complete lines of both files, merged by time."""
        events = []
        for line in self.events.read_new():
            if not line.strip():
                continue
            stamp, message = parse_event(line, self.last_event_time)
            self.last_event_time = stamp
            events.append(LogLine(stamp, "event", message))
        rows = []
        for line in self.metrics.read_new():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a kill and never completed
            if isinstance(row, dict):
                rows.append(row)
        total = self.total_steps()
        steps = []
        for row, when in zip(rows, self._row_times(rows), strict=True):
            shown, note = self.peak.rescale(row)
            if note is not None:
                steps.append(LogLine(when, "event", f"perf: {note}"))
            steps.append(LogLine(when, "step", format_step(shown, total, self.step_width)))
        return merge(events, steps)

    @staticmethod
    def _row_times(rows: list[dict[str, Any]]) -> list[float | None]:
        return [r["time"] if isinstance(r.get("time"), (int, float)) else None for r in rows]


def merge(events: list[LogLine], steps: list[LogLine]) -> list[LogLine]:
    """Both lists (each already in order) merged by time; a line of unknown time keeps its
    place in its own list."""
    out: list[LogLine] = []
    i = j = 0
    while i < len(events) and j < len(steps):
        if _event_first(events[i], steps[j]):
            out.append(events[i])
            i += 1
        else:
            out.append(steps[j])
            j += 1
    return out + events[i:] + steps[j:]


def _event_first(event: LogLine, step: LogLine) -> bool:
    """Whether `event` was written before `step`. `events.log` stamps are cut to the
    millisecond (whole seconds in older runs); within one such tick only the events a step
    logs before its metrics row (its validation, the time limit) precede it."""
    if event.time is None or step.time is None:
        return True
    tick = 1.0 if event.time.is_integer() else 0.001
    if event.time + tick <= step.time:
        return True
    if event.time > step.time:
        return False
    return event.text.startswith(STEP_EVENTS)


def follow(
    tail: RunTail,
    emit: Callable[[LogLine], None],
    *,
    poll_s: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Emit new lines as they appear until the run is no longer starting or running; returns
    the final status (`finished`, `failed`, `interrupted`, `killed`, ...)."""
    while True:
        status = tail.run.effective_status()  # read before the files: their last lines count
        for line in tail.poll():
            emit(line)
        if status not in LIVE_STATUSES:
            return status
        sleep(poll_s)
