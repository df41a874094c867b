"""`roll runs ls | show RUN_ID | scan RUN_ID` (`rm` and `gc`: runs_disk_cmd.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rollcli.cli.errors import err_console, fail
from rollcli.cli.run_arg import RUNS_DIR, find_run
from rollcli.cli.runs_disk_cmd import gc, rm

app = typer.Typer(
    help="Runs on disk: list them, show one, remove runs, delete old checkpoints.",
    no_args_is_help=True,
)
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
def list_runs(ctx: typer.Context, runs_dir: Path = RUNS_DIR) -> None:
    """A table of the runs under the runs folder."""
    from rollcli.runs.run_dir import RunDir

    if not runs_dir.is_dir():
        source = ctx.get_parameter_source("runs_dir")
        given = source is not None and source.name != "DEFAULT"
        if given or runs_dir.exists():  # a typo in --runs-dir is not an empty list
            what = "is a file, not a folder" if runs_dir.exists() else "does not exist"
            fail(f"runs folder {runs_dir} {what}", "pass --runs-dir FOLDER that holds the runs")
        err_console.print(
            f"no runs yet: {runs_dir}/ does not exist (roll train creates it)", markup=False
        )
        return
    folders = sorted(
        (p for p in runs_dir.iterdir() if (p / "recipe.yaml").exists()),
        key=lambda p: p.stat().st_mtime,
    )
    rows = [_row(folder, RunDir(folder)) for folder in folders]
    columns = ["run id", "recipe", "model", "status", "step", "reward", "val", "started", "took"]
    # The recipe column is left out when every run id already starts with its recipe (the
    # default ids).
    if not any(not r[0].startswith(r[1]) for r in rows):
        columns.remove("recipe")
    shown = fitting_columns(columns, rows, out.width)
    table = Table(
        title=escape(f"runs in {runs_dir}"),
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    others = [c for c in shown if c != "model"]
    model_room = out.width - sum(_width(rows, c) for c in others) - GAP * len(others)
    for col in shown:
        # nothing wraps: a folded model name (`smoll`/`m2-13`/`5m`) was unreadable, and a run
        # id is what users copy into `roll logs` / `roll resume`; a long model path ends in
        # "…" (the whole path is in `roll runs show`)
        if col == "model":
            table.add_column(
                col, no_wrap=True, overflow="ellipsis", max_width=max(MIN_MODEL, model_room)
            )
        else:
            table.add_column(col, no_wrap=True, min_width=_width(rows, col))
    for r in rows:
        table.add_row(*(escape(r[ALL_COLUMNS.index(col)]) for col in shown))
    out.print(table)


ALL_COLUMNS = ["run id", "recipe", "model", "status", "step", "reward", "val", "started", "took"]
# dropped in this order while the table is wider than the terminal; the model then gets
# what is left (at least MIN_MODEL characters, its end cut with "…")
GIVE_WAY = ("started", "took", "recipe")
MIN_MODEL = 12
GAP = 2  # between two columns


def fitting_columns(columns: list[str], rows: list[list[str]], width: int) -> list[str]:
    """The columns of `roll runs ls` that fit `width`: the optional ones give way, in the
    order of GIVE_WAY, until the others fit with at least MIN_MODEL characters of model.

    >>> rows = [["rlvr-math-20261127-091830", "rlvr-math", "smollm2-135m", "finished",
    ...          "30/30", "0.500", "0.250", "09:18", "6m40s"]]
    >>> cols = ["run id", "model", "status", "step", "reward", "val", "started", "took"]
    >>> fitting_columns(cols, rows, 90) == cols
    True
    >>> fitting_columns(cols, rows, 80)
    ['run id', 'model', 'status', 'step', 'reward', 'val', 'took']
    >>> fitting_columns(cols, rows, 70)
    ['run id', 'model', 'status', 'step', 'reward', 'val']
    """

    def need(cols: list[str]) -> int:
        widths = [
            min(MIN_MODEL, _width(rows, c)) if c == "model" else _width(rows, c) for c in cols
        ]
        return sum(widths) + GAP * (len(cols) - 1)

    shown = list(columns)
    for col in GIVE_WAY:
        if need(shown) <= width:
            break
        if col in shown:
            shown.remove(col)
    return shown


def _width(rows: list[list[str]], col: str) -> int:
    """The column's widest cell or its header."""
    i = ALL_COLUMNS.index(col)
    return max([len(col)] + [len(r[i]) for r in rows])


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
        short_model(str(st.get("model", "?"))),
        run.effective_status(),
        f"{st.get('step', 0)}/{st.get('total_steps', '?')}",
        f"{reward:.3f}" if reward is not None else "-",
        f"{val:.3f}" if val is not None else "-",
        _fmt_started(started) if started else "-",
        _fmt_duration(end - started if started and end else None),
    ]


def short_model(model: str) -> str:
    """A model as `roll runs ls` shows it: as it was given (a registry name, a hub id
    `ORG/NAME`, a relative folder: `me/tiny` was shown as `tiny`), but a run's checkpoint
    as `step-N of RUN-ID` (so a cut end still shows the step) and an absolute folder by its
    last part (`roll runs show` has the whole path).

    >>> short_model("smollm2-135m"), short_model("me/tiny"), short_model("Qwen/Qwen2.5-7B@main")
    ('smollm2-135m', 'me/tiny', 'Qwen/Qwen2.5-7B@main')
    >>> short_model("/work/runs/rlvr-math-20261127-091830/checkpoints/step-30")
    'step-30 of rlvr-math-20261127-091830'
    >>> short_model("/home/me/models/Qwen2.5-0.5B-Instruct/")
    'Qwen2.5-0.5B-Instruct'
    """
    parts = [p for p in model.split("/") if p]
    if len(parts) >= 3 and parts[-2] == "checkpoints":
        return f"{parts[-1]} of {parts[-3]}"
    if model.startswith(("/", "~")) and parts:
        return parts[-1]
    return model


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

    what = {"pss": "PSS", "cuda": "torch peak allocated"}.get(str(memory.get("measure")), "?")
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
        3,
        min=1,
        help="Flag a rewarded reply stating at least this many numbers not in its prompt.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the counts and examples as JSON."),
) -> None:
    """Scan a run's rewarded samples for reward hacking (cut-off, format-only or many-number
    replies)."""
    from rollcli.evaluation.reward_scan import ScanResult, run_samples, scan_rows
    from rollcli.runs.run_dir import RunDir

    folder = find_run(run_id, runs_dir)
    steps = run_samples(RunDir(folder).samples)
    if not steps:
        fail(
            f"run {folder.name} saved no samples",
            "run.save_samples was false, or no step finished",
        )
    result = scan_rows(steps, many=many)
    if as_json:
        typer.echo(json.dumps(result.summary(), indent=2))
        return
    table = Table(
        title=f"{escape(folder.name)}: flagged samples (rewarded / unrewarded)",
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
        f"samples over {len(steps)} steps (rewarded: paid anything; format_only: paid, not "
        f"correct); many_numbers = {many}+ numbers not in the prompt"
    )
    for ex in result.examples:
        out.print(
            f"[bold]step {ex['step']}[/] "
            + escape(f"{', '.join(ex['flags'])} (answer {ex['answer']}): {ex['response']!r}"),
            markup=True,
            highlight=False,
        )


def _share(count: int, total: int) -> str:
    return f"{count}/{total} ({count / total:.1%})" if total else "0/0"


app.command("rm")(rm)
app.command("gc")(gc)
