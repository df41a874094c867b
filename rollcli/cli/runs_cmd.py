"""`roll runs ls | show RUN_ID`."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from rollcli.cli.run_arg import RUNS_DIR, find_run

app = typer.Typer(help="Runs on disk: list them, show one.", no_args_is_help=True)
out = Console()


def _fmt_duration(seconds: float | None) -> str:
    if not seconds or seconds < 0:
        return "-"
    minutes, sec = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{sec:02d}s"


def _fmt_started(stamp: float) -> str:
    """`14:05` today, `21 Nov` before."""
    same_day = time.strftime("%Y%m%d", time.localtime(stamp)) == time.strftime("%Y%m%d")
    return time.strftime("%H:%M" if same_day else "%d %b", time.localtime(stamp))


@app.command("ls")
def list_runs(runs_dir: Path = RUNS_DIR) -> None:
    """A table of the runs under the runs folder."""
    from rollcli.runs.run_dir import RunDir

    folders = (
        sorted(
            (p for p in runs_dir.iterdir() if (p / "recipe.yaml").exists()),
            key=lambda p: p.stat().st_mtime,
        )
        if runs_dir.is_dir()
        else []
    )
    rows = [_row(folder, RunDir(folder)) for folder in folders]
    # A run id is what users copy into `roll logs` / `roll resume`: it is never wrapped or
    # cut, nor are the short columns; only the model folds in a narrow terminal. The recipe
    # column is left out when every run id already starts with its recipe (the default ids).
    show_recipe = any(not r[0].startswith(r[1]) for r in rows)
    columns = ["run id", "recipe", "model", "status", "step", "reward", "val", "started", "took"]
    table = Table(
        title=f"runs in {runs_dir}",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    for i, col in enumerate(columns):
        if col == "recipe" and not show_recipe:
            continue
        if col == "model":
            table.add_column(col, overflow="fold", ratio=1, min_width=5)
        else:
            width = max([len(col)] + [len(r[i]) for r in rows])
            table.add_column(col, no_wrap=True, min_width=width)
    for r in rows:
        table.add_row(*(r if show_recipe else r[:1] + r[2:]))
    out.print(table)


def _row(folder: Path, run: Any) -> list[str]:
    st = run.read_status()
    metrics = run.read_metrics()
    reward = next((m["reward/mean"] for m in reversed(metrics) if "reward/mean" in m), None)
    val = next((m["val/accuracy"] for m in reversed(metrics) if "val/accuracy" in m), None)
    started = st.get("started")
    end = st.get("finished") or st.get("heartbeat")
    return [
        folder.name,
        str(st.get("recipe", "?")),
        str(st.get("model", "?")),
        run.effective_status(),
        f"{st.get('step', 0)}/{st.get('total_steps', '?')}",
        f"{reward:.3f}" if reward is not None else "-",
        f"{val:.3f}" if val is not None else "-",
        _fmt_started(started) if started else "-",
        _fmt_duration(end - started if started and end else None),
    ]


@app.command("show")
def show(
    run_id: str,
    runs_dir: Path = RUNS_DIR,
    as_json: bool = typer.Option(
        False, "--json", help="Print the status, the latest metrics and the memory as JSON."
    ),
) -> None:
    """Status of one run and each role's peak memory, planned and measured."""
    from rollcli.runs.peak_memory import read_memory
    from rollcli.runs.run_dir import RunDir

    folder = find_run(run_id, runs_dir)
    run = RunDir(folder)
    metrics = run.read_metrics()
    memory = read_memory(folder)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "run_id": folder.name,
                    "folder": str(folder),
                    **run.read_status(),
                    "last_metrics": metrics[-1] if metrics else None,
                    "memory": memory or None,
                },
                indent=2,
            )
        )
        return
    st = run.read_status()
    out.print(f"run      {folder.name}", markup=False, highlight=False)
    out.print(f"folder   {folder}", markup=False, highlight=False)
    for key, value in (
        ("recipe", st.get("recipe", "?")),
        ("model", st.get("model", "?")),
        ("status", run.effective_status()),
        ("step", f"{st.get('step', 0)}/{st.get('total_steps', '?')}"),
    ):
        out.print(f"{key:<8} {value}", markup=False, highlight=False)
    if st.get("error"):
        out.print(f"error    {st['error']}", markup=False, highlight=False)
    out.print(memory_table(memory) if memory.get("roles") else "no memory recorded (memory.json)")
    out.print("(`roll runs show --json` for the latest metrics)", style="dim", highlight=False)


def memory_table(memory: dict[str, Any]) -> Table:
    """Each role's peak memory per rank: planned, measured and measured / planned."""
    from rollcli.runs.peak_memory import OVER_PLAN, ratio

    what = {"pss": "PSS", "cuda": "torch peak allocated"}.get(memory.get("measure"), "?")
    table = Table(
        title=f"peak memory of one rank, MiB (measured: {what})",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        title_justify="left",
    )
    table.add_column("role")
    for col in ("planned", "measured", "ratio", "at step"):
        table.add_column(col, justify="right", no_wrap=True)
    for role, row in memory["roles"].items():
        r = ratio(row)
        shown = "-" if r is None else f"{r:.2f}"
        if r is not None and r > OVER_PLAN:
            shown = f"[red]{shown}[/]"
        step = row.get("at_step")
        table.add_row(
            role,
            _mib(row.get("planned_bytes")),
            _mib(row.get("measured_bytes")),
            shown,
            "-" if step is None else str(step),
        )
    return table


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:,.0f}"


@app.command("scan")
def scan(
    run_id: str,
    runs_dir: Path = RUNS_DIR,
    many: int = typer.Option(
        3, help="Flag a rewarded reply stating at least this many numbers not in its prompt."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the counts and examples as JSON."),
) -> None:
    """Scan a run's rewarded samples for reward hacking (cut-off or many-number replies)."""
    from rollcli.evaluation.reward_scan import ScanResult, run_samples, scan_rows
    from rollcli.runs.run_dir import RunDir

    folder = find_run(run_id, runs_dir)
    steps = run_samples(RunDir(folder).samples)
    if not steps:
        raise typer.BadParameter(
            f"run {folder.name} saved no samples (run.save_samples was false, or no step finished)",
            param_hint="RUN_ID",
        )
    result = scan_rows(steps, many=many)
    if as_json:
        typer.echo(json.dumps(result.summary(), indent=2))
        return
    table = Table(
        title=f"{folder.name}: flagged samples (rewarded / unrewarded)",
        box=box.SIMPLE_HEAD,
        show_edge=False,
    )
    table.add_column("flag")
    table.add_column("rewarded", justify="right")
    table.add_column("unrewarded", justify="right")
    for flag in ScanResult.FLAGS:
        table.add_row(
            flag,
            _share(result.rewarded.flagged.get(flag, 0), result.rewarded.samples),
            _share(result.unrewarded.flagged.get(flag, 0), result.unrewarded.samples),
        )
    out.print(table)
    out.print(
        f"{result.rewarded.samples} rewarded and {result.unrewarded.samples} unrewarded "
        f"samples over {len(steps)} steps; many_numbers = {many}+ numbers not in the prompt"
    )
    for ex in result.examples:
        out.print(
            f"[bold]step {ex['step']}[/] {', '.join(ex['flags'])} (answer {ex['answer']}): "
            f"{ex['response']!r}",
            markup=True,
            highlight=False,
        )


def _share(count: int, total: int) -> str:
    return f"{count}/{total} ({count / total:.1%})" if total else "0/0"
