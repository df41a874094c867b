"""Show a Plan with rich: a device table, the verdict, problems, advice and notes."""

from __future__ import annotations

import textwrap

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from rollcli.planning.devices import format_indices
from rollcli.planning.planner import DevicePlan, Plan

_COLUMNS = ("weights", "grads", "optimizer", "activations", "kv_cache", "runtime", "total")
# Short headers and role names keep both tables readable in an 80-column terminal.
_HEADERS = {"optimizer": "optim", "activations": "activ", "kv_cache": "kv", "runtime": "proc"}
SHORT_ROLES = {"actor_train": "train", "actor_infer": "infer", "reference": "ref"}


def render_plan(plan: Plan) -> Group:
    """The plan as renderables (`console.print(render_plan(plan))`).

    GPUs with the same roles and memory share one row ("GPU 0-7"); memory is GiB per
    device at its peak phase.
    """
    parts: list[RenderableType] = [_table(plan), _roles_table(plan)]
    parts += [_workers_table(plan)] if plan.workers else []
    parts += [_verdict(plan)]
    parts += _section("problems", merge_gpu_lines(plan.problems), "red")
    parts += _section("advice", plan.advice, "yellow", numbered=True)
    parts += _section("notes", plan.notes, "dim")
    return Group(*parts)


def _table(plan: Plan) -> Table:
    title = escape(f"{plan.model_name} · {plan.mode}" if plan.model_name else plan.mode)
    title += " · GiB per device at its peak (* the role computing then)"
    table = Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    table.add_column("device", no_wrap=True)
    table.add_column("roles", overflow="fold", min_width=10)
    columns = _columns(plan)
    for name in columns:
        table.add_column(_HEADERS.get(name, name), justify="right", no_wrap=True)
    table.add_column("cap", justify="right")
    table.add_column("use", justify="right")
    for label, device in _grouped(plan):
        cells = [_gib(device.memory_bytes[name]) for name in columns]
        names = [
            _short(r) + ("*" if r == device.peak_role and len(device.roles) > 1 else "")
            for r in device.roles
        ]
        roles = " ".join(names) or "-"
        table.add_row(label, roles, *cells, _gib(device.capacity_bytes), _use(device))
    return table


def _columns(plan: Plan) -> tuple[str, ...]:
    """The memory columns, `runtime` only where some role is a host process (it counts)."""
    if any(m.active.runtime for m in plan.role_memory.values()):
        return _COLUMNS
    return tuple(c for c in _COLUMNS if c != "runtime")


def _short(role: str) -> str:
    return SHORT_ROLES.get(role, role)


def merge_gpu_lines(lines: list[str]) -> list[str]:
    """ "GPU 0 needs X ...", "GPU 1 needs X ..." (same text) become "GPU 0-1 need X ..."."""
    merged: dict[str, list[int]] = {}
    out: list[str] = []
    for line in lines:
        head, _, rest = line.partition(" needs ")
        if head.startswith("GPU ") and head[4:].isdigit() and rest:
            if rest not in merged:
                merged[rest] = []
                out.append(rest)
            merged[rest].append(int(head[4:]))
        else:
            out.append(line)
    return [
        (
            f"GPU {format_indices(merged[line])} needs {line}"
            if len(merged[line]) == 1
            else f"GPU {format_indices(merged[line])} each need "
            + line.replace(" its peak", " their peak").replace(" but has ", " but have ")
        )
        if line in merged
        else line
        for line in out
    ]


def _roles_table(plan: Plan) -> Table:
    """Per role, one rank's memory while it computes and what it leaves while idle."""
    on_host = plan.mode == "cpu"  # every role on the host: no devices column
    table = _titled(
        "per rank (a process on the host), by role (GiB)" if on_host else "per rank, by role (GiB)"
    )
    columns = _columns(plan)[:-1]
    text_columns = ("role", "layout") if on_host else ("role", "devices", "layout")
    for name in (*text_columns, *columns, "active", "idle"):
        text = name in ("role", "devices", "layout")
        table.add_column(
            _HEADERS.get(name, name),
            justify="left" if text else "right",
            overflow="fold" if text else "ellipsis",
            no_wrap=not text,
        )
    shared = {r for d in plan.judged if len(d.roles) > 1 for r in d.roles}
    for role, mem in plan.role_memory.items():
        where = plan.placements.get(role, "cpu")
        idle = _gib(mem.idle.total) if role in shared else "-"
        devices = "host" if where == "cpu" else format_indices(where)
        cells = [_gib(mem.active.as_dict()[name]) for name in columns]
        table.add_row(
            _short(role),
            *([] if on_host else [devices]),
            plan.layouts.get(role, ""),
            *cells,
            _gib(mem.active.total),
            idle,
        )
    return table


def _titled(title: str) -> Table:
    return Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )


def _workers_table(plan: Plan) -> Table:
    """The workers each role starts: the clusters `roll train` builds (role_table.py)."""
    table = _titled("workers (Ray CPUs and torch threads each)")
    for name in ("role", "workers", "cpus", "threads"):
        table.add_column(name, justify="left" if name == "role" else "right")
    for w in plan.workers:
        cpus = sorted(set(w.num_cpus))
        table.add_row(
            w.role,
            str(w.ranks),
            "/".join(f"{c:g}" for c in cpus),
            "-" if w.threads is None else str(w.threads),
        )
    return table


def _grouped(plan: Plan) -> list[tuple[str, DevicePlan]]:
    """One row per run of consecutive GPUs in a group (same roles, so same memory)."""
    rows: list[tuple[list[int], DevicePlan]] = []
    for gpus, device in plan.gpu_groups:
        if gpus[-1] - gpus[0] + 1 == len(gpus):  # ascending and unique: one run
            rows.append((gpus, device))
            continue
        start = 0
        for i, gpu in enumerate(gpus):  # split a group at its gaps: "GPU 0-3", "GPU 6-7"
            if i + 1 == len(gpus) or gpus[i + 1] != gpu + 1:
                rows.append((gpus[start : i + 1], device))
                start = i + 1
    rows.sort(key=lambda row: row[0][0])
    out = [(f"GPU {format_indices(ids)}", device) for ids, device in rows]
    out += [("host", plan.host)] if plan.host else []
    return out


def _verdict(plan: Plan) -> Text:
    peak = plan.peak_device
    where = ""
    if peak is not None:
        name = "the host" if peak.id == "cpu" else f"GPU {peak.id}"
        where = f": peak {_gib(peak.memory_bytes['total'])} of {_gib(peak.capacity_bytes)} GiB on {name}"
    if plan.fits:
        return Text(f"fits{where}", style="bold green")
    return Text(f"does not fit{where}", style="bold red")


def _section(
    title: str, lines: list[str], style: str, numbered: bool = False
) -> list[RenderableType]:
    if not lines:
        return []
    width = len(f"{len(lines)}.") if numbered else 1
    out: list[RenderableType] = [Text(f"{title}:", style="bold")]
    for i, line in enumerate(lines, 1):
        bullet = f"{i}.".rjust(width) if numbered else "-"
        out.append(Hanging(f"  {bullet} ", line, style))
    return out


def render_lines(lines: list[str]) -> Group:
    """Lines wrapped like the advice: a line's leading spaces are its indent, and its
    continuation lines hang under its text."""
    out = []
    for line in lines:
        text = line.lstrip(" ")
        lead = line[: len(line) - len(text)]
        out.append(Hanging(lead, text, hang=2))
    return Group(*out)


class Hanging:
    """`lead` then `text`, wrapped to the console's width under the text's first word (a
    hanging indent), at spaces only: a `key=value` or `--flag` is never split over two
    lines (one longer than a whole line runs past the edge rather than break)."""

    def __init__(self, lead: str, text: str, style: str = "", hang: int = 0) -> None:
        """`hang`: continuation lines start this much further in than `lead`'s width."""
        self.lead, self.text, self.style, self.hang = lead, text, style, hang

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        indent = " " * (len(self.lead) + self.hang)
        lines = textwrap.wrap(
            self.text,
            width=max(options.max_width - len(indent), 20),
            break_long_words=False,
            break_on_hyphens=False,
        )
        for n, line in enumerate(lines or [""]):
            yield Text((self.lead if n == 0 else indent) + line, style=self.style, no_wrap=True)


def _gib(n: int | None) -> str:
    if n is None:
        return "?"
    return f"{n / 1024**3:.1f}"


def _use(device: DevicePlan) -> Text:
    if not device.capacity_bytes:
        return Text("?")
    share = device.memory_bytes["total"] / device.capacity_bytes
    style = "red" if share > 1 else "yellow" if share > 0.9 else "green"
    return Text(f"{share:.0%}", style=style)
