"""The display of a run: on a terminal, rich's live step bar with ETA, generation bar, latest
reward and validation accuracy; where stderr is a file or a pipe (a log, `nohup`), plain
progress lines instead (`cli/progress.py`: a step line at each tenth of the run and the
current phase at least every 30 s); and the end-of-run summary table."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from rollcli.cli.progress import ProgressLines, console_lines, duration
from rollcli.config.errors import wrap
from rollcli.runs.step_eta import StepEta
from rollcli.runs.step_time import StepTimes, training_step_s

WIDTH = 80  # messages are wrapped to fit (or the terminal, where narrower)


class RichDisplay:
    def __init__(
        self,
        console: Console,
        clock: Callable[[], float] = time.monotonic,
        heartbeat: bool = True,  # plain lines: the latest state every 30 s (cli/progress.py)
    ) -> None:
        self.console = console
        self.clock = clock
        self.heartbeat = heartbeat
        self.eta = StepEta(total_steps=0)  # the time left (runs/step_eta.py), per run
        self.plain = not console.is_terminal  # lines, not a live bar (which a file never sees)
        self.lines: ProgressLines | None = None
        self.total_steps = 0
        self.done_steps = 0
        self.phase_text = ""
        self.steps = Progress(
            TextColumn("[bold]step"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("eta {task.fields[eta]}"),  # runs/step_eta.py: steady, not rich's
            console=console,
        )
        self.gen = Progress(
            TextColumn("  {task.description}", markup=False),
            BarColumn(),
            TextColumn("{task.percentage:>3.0f}%"),
            console=console,
        )
        self.status = Text("")
        self.stepping = False  # a step's phase came since the run started (else: baseline)
        self.step_task: TaskID | None = None
        self.gen_task = self.gen.add_task("starting", total=1)
        self.live: Live | None = None
        self.latest: dict[str, Any] = {}
        self.val: dict[str, Any] | None = None  # the latest validation metrics

    def _ensure_live(self) -> None:
        if self.plain:
            if self.lines is None:
                self.lines = console_lines(self.console, clock=self.clock, heartbeat=self.heartbeat)
            return
        if self.live is None:
            self.live = Live(
                Group(self.steps, self.gen, self.status), console=self.console, refresh_per_second=4
            )
            self.live.start()

    def start(
        self,
        *,
        run_id: str,
        run_dir: str,
        total_steps: int,
        start_step: int,
        engine: str,
        eval_every: int = 0,
    ) -> None:
        # two lines, the folder on its own and never broken by rich: a long path at 80
        # columns split "(engine: hf)" across lines (the terminal may still wrap the path)
        self.console.print(
            f"[bold]roll[/] run [cyan]{escape(run_id)}[/]  (engine: {escape(engine)})"
        )
        self.console.print(Text(f"  → {run_dir}"), soft_wrap=True)
        self._ensure_live()
        if self.step_task is not None:  # a second run on this display (a recipe's warm-up)
            self.steps.remove_task(self.step_task)
            self.latest, self.val = {}, None
        self.step_task = self.steps.add_task(
            "train", total=total_steps, completed=start_step, eta="-"
        )
        self.total_steps, self.done_steps = total_steps, start_step
        self.stepping = False
        self.eta = StepEta(total_steps=total_steps, eval_every=eval_every)
        self.eta.start(start_step, self.clock())
        if self.lines is not None:
            # where the rate counts from
            self.lines.update("step", start_step, total_steps, seconds_each=True)

    def phase(self, text: str) -> None:
        self._ensure_live()
        self.stepping = self.stepping or (self.step_task is not None and text != "validating")
        self.gen.update(self.gen_task, description=text, completed=0, total=1)
        self.phase_text = text
        if self.lines is not None:
            self.lines.update(self._phase_task(), 0, 0, tenths=False)

    def generation(self, done: int, total: int) -> None:
        self.gen.update(self.gen_task, completed=done, total=max(total, 1))
        if self.lines is not None:
            self.lines.update(self._phase_task(), done, max(total, 1), tenths=False)

    def _phase_task(self) -> str:
        """`step 5/40: generating` (the step under way), or the phase alone before a run.
        A validation belongs to the step it ends (the last one's: `step 1/1: validating`,
        which read `step 0/1` before); only the one before any step is step 0's baseline."""
        if self.step_task is None:
            return self.phase_text
        step = self.done_steps + 1
        if not self.stepping and self.phase_text == "validating":
            step = self.done_steps  # the baseline, as its `step 0: validation accuracy` says
        return f"step {step}/{self.total_steps}: {self.phase_text}"

    def step_done(self, step: int, metrics: dict[str, Any]) -> None:
        if "val/accuracy" in metrics:
            self.val = metrics
            headline = Text.assemble(f"  step {step}: ", (val_headline(metrics), "bold"))
            self.console.print(headline)
        self.eta.step_done(step, metrics, self.clock())
        left = self.eta.seconds_left()
        if step > 0 and self.step_task is not None:
            eta = duration(left) if left is not None else "-"
            self.steps.update(self.step_task, completed=step, eta=eta)
            self.latest = metrics
        parts = []
        if "reward/mean" in self.latest:
            parts.append(f"reward {self.latest['reward/mean']:.3f}")
        if "response_length/mean" in self.latest:
            parts.append(f"length {self.latest['response_length/mean']:.1f}")
        step_s = training_step_s(self.latest)  # the training step, without its validation
        if step_s is not None:
            parts.append(f"{step_s:.1f} s/step")
        if self.val is not None:
            parts.append(val_headline(self.val, short=True))
        self.status = Text("  " + " · ".join(parts))
        if self.live is not None:
            self.live.update(Group(self.steps, self.gen, self.status))
        if self.lines is not None and step > 0:
            self.done_steps = step
            # the step's time is the line's rate (validation included); the eta counts
            # steps and validations apart (runs/step_eta.py)
            notes = [p for p in parts if not p.endswith("s/step")]
            self.lines.update(
                "step", step, self.total_steps, notes=notes, seconds_each=True, eta_s=left
            )

    def message(self, text: str) -> None:
        """`text` wrapped to 80 columns, its continuation lines two spaces further in."""
        body = text.lstrip(" ")
        lead = text[: len(text) - len(body)]
        width = min(WIDTH, self.console.width)
        self.console.print(
            lead + wrap(body, lead, width, indent=lead + "  "), markup=False, soft_wrap=True
        )

    def close(self) -> None:
        if self.lines is not None:
            self.lines.close()
            self.lines = None
        if self.live is not None:
            # before training started there is nothing worth keeping on screen
            self.live.transient = self.step_task is None
            self.gen.update(self.gen_task, description="done", completed=1, total=1)
            self.live.stop()  # (only a terminal has a live bar: a file gets lines)
            self.live = None


def summary_table(
    run_id: str,
    run_dir: str,
    final: dict[str, Any],
    first_val: dict[str, Any] | None,
    wall_s: float,
    steps: StepTimes | None = None,
    ended: str = "finished",
) -> Table:
    """The end-of-run table, titled how the run `ended` ("finished", "stopped at step 3 of
    10"). Its `mean step time` is the live line's `s/step`: the training step without
    validation, which has its own row (`runs/step_time.py`)."""
    table = Table(title=f"run {escape(run_id)} {escape(ended)}", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    table.add_row("run folder", escape(run_dir))
    table.add_row("steps", str(final.get("step", "?")))
    if first_val is not None:
        for name, value in val_figures(first_val):
            table.add_row(f"{name} at step {first_val.get('step', 0)}", value)
    if "val/accuracy" in final:
        for name, value in val_figures(final):
            table.add_row(f"{name} at the end", value)
    if "reward/mean" in final:
        table.add_row("reward at the last step", f"{final['reward/mean']:.3f}")
    if "response_length/mean" in final:
        table.add_row("response length (tokens)", f"{final['response_length/mean']:.1f}")
    if steps is not None and steps.mean_step_s is not None:
        table.add_row("mean step time", f"{steps.mean_step_s:.1f} s (no validation)")
    if steps is not None and steps.validations:
        runs = "validation" if steps.validations == 1 else "validations"
        table.add_row("validation time", f"{steps.validate_s:.0f} s ({steps.validations} {runs})")
    table.add_row("wall time", f"{wall_s / 60:.1f} min (setup included)")
    return table


# DPO logs two held-out accuracies (pipelines/dpo.py): `val/accuracy`, the share of pairs
# whose chosen response the policy finds more likely (summed log-probs; meaningful from
# step 0), and `val/rewards/accuracy`, the share whose implicit reward beta·log(pi/ref)
# ranks chosen first (TRL's `rewards/accuracies`; 0 at step 0). Each is named, side by side.
DPO_REWARD_ACCURACY = "val/rewards/accuracy"


def val_figures(metrics: dict[str, Any]) -> list[tuple[str, str]]:
    """The validation figures of a metrics line, each with its name.

    >>> val_figures({"val/accuracy": 0.7, "val/rewards/accuracy": 0.55})
    [('val preference accuracy (log-probs)', '0.700'), ('val implicit-reward accuracy', '0.550')]
    >>> val_figures({"val/accuracy": 0.5})
    [('val accuracy', '0.500')]
    """
    if DPO_REWARD_ACCURACY in metrics:
        return [
            ("val preference accuracy (log-probs)", val_accuracy_text(metrics)),
            ("val implicit-reward accuracy", f"{metrics[DPO_REWARD_ACCURACY]:.3f}"),
        ]
    return [("val accuracy", val_accuracy_text(metrics))]


def val_headline(metrics: dict[str, Any], short: bool = False) -> str:
    """The validation as a step's line says it (`short`: as the live status line does).

    >>> val_headline({"val/accuracy": 0.7, "val/rewards/accuracy": 0.55})
    'preference accuracy 0.700 (summed log-probs), implicit-reward accuracy 0.550'
    >>> val_headline({"val/accuracy": 0.7, "val/rewards/accuracy": 0.55}, short=True)
    'val pref acc 0.700 · reward acc 0.550'
    >>> val_headline({"val/accuracy": 0.5}), val_headline({"val/accuracy": 0.5}, short=True)
    ('validation accuracy 0.500', 'val acc 0.500')
    """
    text = val_accuracy_text(metrics, short=short)
    if DPO_REWARD_ACCURACY not in metrics:
        return f"val acc {text}" if short else f"validation accuracy {text}"
    reward = f"{metrics[DPO_REWARD_ACCURACY]:.3f}"
    if short:
        return f"val pref acc {text} · reward acc {reward}"
    return f"preference accuracy {text} (summed log-probs), implicit-reward accuracy {reward}"


def val_accuracy_text(metrics: dict[str, Any], short: bool = False) -> str:
    """Validation accuracy with its 95% interval and size where they were logged.

    >>> m = {"val/accuracy": 0.7, "val/accuracy_ci_low": 0.64, "val/accuracy_ci_high": 0.755, "val/n": 256}
    >>> val_accuracy_text(m)
    '0.700 (95% CI 0.640-0.755, n=256)'
    >>> val_accuracy_text(m, short=True)
    '0.700 [0.640, 0.755]'
    >>> val_accuracy_text({"val/accuracy": 0.5})
    '0.500'
    """
    text = f"{metrics['val/accuracy']:.3f}"
    if "val/accuracy_ci_low" not in metrics:
        return text
    low, high = metrics["val/accuracy_ci_low"], metrics["val/accuracy_ci_high"]
    if short:
        return f"{text} [{low:.3f}, {high:.3f}]"
    return f"{text} (95% CI {low:.3f}-{high:.3f}, n={int(metrics['val/n'])})"
