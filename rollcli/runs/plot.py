"""One PNG of a run's curves: train reward, validation accuracy, KL, entropy, response length,
step time and each phase's share of the matmul peak (`perf/*_mfu`) against the step, and for
a tool env's run its tool use (calls per episode, the share of calls that ran, each kind of
error per call). A panel whose metric the run did not log says so; the tool panel is left
out of runs without tools.

Drawn with matplotlib's object API on the Agg canvas: no pyplot, no global backend switch.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rollcli.runs.collapse import first_trips
from rollcli.runs.log_tail import cross_env_accuracy
from rollcli.runs.metric_series import Row, rolling_mean, rows_with, series
from rollcli.tracking.peak import ShownPeak

if TYPE_CHECKING:
    from matplotlib.figure import Figure


# the phases that make up `time/step_s`, bottom to top of the step-time panel
STEP_PHASES = (
    ("time/rollout_s", "play episodes"),  # agentic: generation and env steps together
    ("time/generate_s", "generate"),
    ("time/reward_s", "reward"),
    ("time/forward_s", "ref/old log-probs"),
    ("time/train_s", "train"),
    ("time/weight_sync_s", "weight sync"),
    ("time/validate_s", "validate"),
)

# the phases whose useful FLOPs over time x peak `perf/<phase>_mfu` logs
MFU_PHASES = (
    ("generate", "generate", "gen"),
    ("forward", "ref/old log-probs", "fwd"),
    ("train", "train", "train"),
)


@dataclass(frozen=True)
class Panel:
    title: str
    key: str
    ylabel: str
    draw: Callable[[Any, list[Row], str], str]  # draws, returns the title's "last value" part
    missing: str  # why the metric may be absent
    only_if_logged: bool = False  # a run without the metric leaves the panel's place empty
    also: tuple[str, ...] = ()  # other metrics the panel draws: any of them logged draws it

    def logged(self, rows: list[Row]) -> bool:
        return any(series(rows, k)[1] for k in (self.key, *self.also))


def _last(values: list[float], fmt: str) -> str:
    return f"last {fmt.format(values[-1])}"


def _draw_curve(
    ax: Any, rows: list[Row], key: str, fmt: str = "{:.3g}", label: str = "per step"
) -> str:
    """The metric per step; past 30 points faint, with a trailing mean drawn over it."""
    steps, values = series(rows, key)
    many = len(values) > 30
    ax.plot(
        steps,
        values,
        color="tab:blue",
        alpha=0.35 if many else 1.0,
        marker=None if many else "o",
        markersize=3,
        label=label,
    )
    if many:
        window = max(5, len(values) // 20)
        ax.plot(
            steps, rolling_mean(values, window), color="tab:blue", lw=2, label=f"mean of {window}"
        )
        ax.legend(fontsize=9, loc="best")
    return _last(values, fmt)


def _draw_reward(ax: Any, rows: list[Row], key: str) -> str:
    return _draw_curve(ax, rows, key, "{:.3f}")


def _draw_kl(ax: Any, rows: list[Row], key: str) -> str:
    """KL to the reference; the sampler-vs-trainer gap (`rollout/mismatch_kl`) beside it."""
    label = (
        _draw_curve(ax, rows, key, "{:.4f}", label="to reference") if series(rows, key)[1] else ""
    )
    steps, values = series(rows, MISMATCH_KL)
    if values:
        ax.plot(
            steps, values, color="tab:red", marker="o", markersize=3, label="sampler vs trainer"
        )
        ax.legend(fontsize=9, loc="best")
        label += f"{', ' if label else 'last '}mismatch {values[-1]:.2g}"
    return label


MISMATCH_KL = "rollout/mismatch_kl"


def _draw_entropy(ax: Any, rows: list[Row], key: str) -> str:
    """Every token's entropy; an agentic run's first action token's too (its collapse to one
    move shows there first)."""
    label = _draw_curve(ax, rows, key, "{:.3f}", label="all tokens")
    steps, values = series(rows, "agentic/first_action_entropy")
    if values:
        ax.plot(steps, values, color="tab:orange", marker="o", markersize=3, label="first action")
        ax.legend(fontsize=9, loc="best")
        label += f", action {values[-1]:.3f}"
    return label


def _draw_validation(ax: Any, rows: list[Row], key: str) -> str:
    steps, values = series(rows, key)
    ax.plot(steps, values, color="tab:green", marker="o", markersize=5, lw=2)
    if len(steps) <= 12:
        for x, y in zip(steps, values, strict=True):
            ax.annotate(
                f"{y:.2f}",
                (x, y),
                textcoords="offset points",
                xytext=(0, 7),
                ha="center",
                fontsize=9,
            )
    ax.set_ylim(-0.02, 1.08)
    label = f"{values[0]:.3f} → {values[-1]:.3f}" if len(values) > 1 else _last(values, "{:.3f}")
    names = sorted({name for row in rows for name in cross_env_accuracy(row)})
    for name in names:  # agentic.val_env: the second env's success, its own curve
        other_steps, other = series(rows, f"val/{name}/accuracy")
        ax.plot(other_steps, other, ls="--", marker="s", markersize=4, label=f"{name} (val_env)")
        label += f", {name} {other[-1]:.3f}"
    if names:
        ax.lines[0].set_label("training env")
        ax.legend(fontsize=9, loc="best")
    reward_steps, reward = series(rows, "val/rewards/accuracy")
    if reward:  # DPO: the implicit-reward accuracy beside the log-prob preference accuracy
        ax.plot(reward_steps, reward, ls="--", marker="s", markersize=4, label="implicit reward")
        ax.lines[0].set_label("preference (log-probs)")
        ax.legend(fontsize=9, loc="best")
        label += f", implicit reward {reward[-1]:.3f}"
    return label


def _draw_length(ax: Any, rows: list[Row], key: str) -> str:
    label = _draw_curve(ax, rows, key, "{:.1f}", label="mean")
    steps, values = series(rows, "response_length/max")
    if values:
        ax.plot(steps, values, color="tab:gray", ls="--", lw=1, label="max")
        ax.legend(fontsize=9, loc="best")
    return label


def _draw_step_time(ax: Any, rows: list[Row], key: str) -> str:
    """The phases of each step stacked (bars, or areas past 60 steps), the total as a line."""
    steps, total = series(rows, key)
    timed = rows_with(rows, key)
    phases = [(k, name) for k, name in STEP_PHASES if any(k in r for r in timed)]
    stacks = [[float(r.get(k) or 0.0) for r in timed] for k, _ in phases]
    labels = [name for _, name in phases]
    if len(steps) > 60:
        if stacks:
            ax.stackplot(steps, *stacks, labels=labels, alpha=0.8)
    else:
        bottom = [0.0] * len(steps)
        for heights, label in zip(stacks, labels, strict=True):
            ax.bar(steps, heights, width=0.8, bottom=bottom, label=label, alpha=0.8)
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    ax.plot(steps, total, color="black", lw=1.2, label="whole step")
    ax.legend(fontsize=8, loc="upper left", ncol=2, framealpha=0.8)
    ax.set_ylim(0, max(total) * 1.35)  # room for the legend above the bars
    return f"mean {sum(total) / len(total):.1f} s"


def _draw_mfu(ax: Any, rows: list[Row], key: str) -> str:
    """One line per phase, in percent of the measured matmul peak (raised where a phase ran
    faster: `ShownPeak`, which the title says)."""
    shown, raised = ShownPeak(), False
    rescaled = []
    for row in rows:
        row, note = shown.rescale(row)
        rescaled.append(row)
        raised = raised or note is not None
    rows = rescaled
    last = []
    for phase, label, short in MFU_PHASES:
        steps, values = series(rows, f"perf/{phase}_mfu")
        if values:
            percent = [100 * v for v in values]
            marker = "o" if len(steps) <= 30 else None
            ax.plot(steps, percent, marker=marker, markersize=3, label=label)
            last.append(f"{short} {percent[-1]:.1f}%")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=9, loc="best")
    return " ".join(last) + (", peak raised" if raised else "")


def _draw_tools(ax: Any, rows: list[Row], key: str) -> str:
    """Training episodes' tool calls per episode, the share of calls that ran, and each kind
    of tool error per call (the kinds that occurred)."""
    label = _draw_curve(ax, rows, key, "{:.2f}", label="calls per episode")
    steps, valid = series(rows, "env/tool_call_valid")
    if valid:
        ax.plot(steps, valid, color="tab:green", marker="o", markersize=3, label="calls that ran")
        label += f", valid {valid[-1]:.2f}"
    kinds = sorted({k for row in rows for k in row if k.startswith("env/tool_error/")})
    for kind in kinds:
        kept = [r for r in rows_with(rows, kind) if r.get("env/tool_calls")]
        if any(r[kind] for r in kept):
            per_call = [r[kind] / r["env/tool_calls"] for r in kept]
            name = kind.rsplit("/", 1)[1]
            ax.plot([r["step"] for r in kept], per_call, ls="--", lw=1, label=f"{name} per call")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8, loc="best")
    return label


def _draw_moe(ax: Any, rows: list[Row], key: str) -> str:
    """An MoE run's routing agreement (left) and the trainer-vs-sampler log-prob gap with
    and, where logged, without replay (right, log scale)."""
    label = _draw_curve(ax, rows, key, "{:.3f}", label="routing agreement")
    ax.set_ylim(0, 1.02)
    right = ax.twinx()
    for name, style, text, short in (
        ("moe/logprob_mismatch", "-", "log-prob gap", "gap"),
        ("moe/logprob_mismatch_unreplayed", "--", "gap without replay", "unreplayed"),
    ):
        steps, values = series(rows, name)
        if values and all(v > 0 for v in values):
            right.plot(steps, values, ls=style, color="tab:red", marker=".", label=text)
            right.set_yscale("log")
            label += f", {short} {values[-1]:.1g}"
    right.set_ylabel("|trainer - sampler| log-prob", fontsize=10)
    ax.legend(fontsize=8, loc="lower left")
    if right.lines:
        right.legend(fontsize=8, loc="lower right")
    return label


PANELS = (
    Panel(
        "train reward", "reward/mean", "mean reward", _draw_reward, "no rollout steps logged yet"
    ),
    Panel(
        "validation accuracy",
        "val/accuracy",
        "accuracy (greedy)",
        _draw_validation,
        "no validation ran",
    ),
    Panel(
        "KL to reference",
        "actor/kl",
        "KL per token",
        _draw_kl,
        "logged when algorithm.kl_coef > 0",
        also=(MISMATCH_KL,),
    ),
    Panel(
        "entropy",
        "actor/entropy",
        "nats per token",
        _draw_entropy,
        "not logged by this run",
    ),
    Panel(
        "response length",
        "response_length/mean",
        "tokens",
        _draw_length,
        "not logged by this run",
    ),
    Panel("step time", "time/step_s", "seconds", _draw_step_time, "no training step finished yet"),
    Panel(
        "MFU",
        "perf/train_mfu",
        "% of measured matmul peak",
        _draw_mfu,
        "logged by rlvr and sft runs (docs/performance.md)",
    ),
    Panel(
        "tool use",
        "env/tool_calls_per_episode",
        "per episode / share",
        _draw_tools,
        "logged by tool environments (docs/agents.md)",
        only_if_logged=True,
    ),
    Panel(
        "MoE routing",
        "moe/routing_agreement",
        "share of top-k sets agreeing",
        _draw_moe,
        "logged by MoE models (docs/moe.md)",
        only_if_logged=True,
    ),
)


def _say_missing(ax: Any, panel: Panel) -> None:
    ax.set_title(panel.title, fontsize=13)
    for y, text, size in (
        (0.55, f"no '{panel.key}' in metrics", 12),
        (0.42, f"({panel.missing})", 10),
    ):
        ax.text(
            0.5,
            y,
            text,
            ha="center",
            va="center",
            fontsize=size,
            color="dimgray",
            transform=ax.transAxes,
        )
    ax.set_xticks([])
    ax.set_yticks([])


def draw_run(rows: list[Row], *, title: str, subtitle: str = "") -> Figure:
    """The figure of `rows` (metrics.jsonl): seven panels in two rows of four, 2000 x 900
    pixels, the eighth place a tool env's tool use (empty for other runs)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(20, 9), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    fig.suptitle(f"{title}\n{subtitle}" if subtitle else title, fontsize=15)
    axes = fig.subplots(2, 4)
    shown = [p for p in PANELS if not p.only_if_logged or series(rows, p.key)[1]]
    for ax in axes.flat[len(shown) :]:
        fig.delaxes(ax)
    all_steps = [row["step"] for row in rows if isinstance(row.get("step"), int)]
    xlim = (min(all_steps) - 0.5, max(all_steps) + 0.5) if all_steps else None
    trips = first_trips(rows)
    if trips:  # red dashed lines at the steps where a collapse signal first tripped
        marks = ", ".join(f"{name} (step {step})" for name, step in trips.items())
        fig.suptitle(f"{fig.get_suptitle()}\ncollapse signals: {marks}", fontsize=15, color="C3")
    for ax, panel in zip(axes.flat, shown, strict=False):
        ax.tick_params(labelsize=10)
        if not panel.logged(rows):
            _say_missing(ax, panel)
            continue
        last = panel.draw(ax, rows, panel.key)
        for step in sorted(set(trips.values())):
            ax.axvline(step, color="C3", linestyle="--", alpha=0.6)
        ax.set_title(f"{panel.title}  ({last})", fontsize=13)
        ax.set_xlabel("step", fontsize=11)
        ax.set_ylabel(panel.ylabel, fontsize=11)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if xlim:
            ax.set_xlim(*xlim)  # the same steps under every panel
        ax.grid(alpha=0.3)
    return fig


def plot_run(rows: list[Row], out: Path, *, title: str, subtitle: str = "") -> Path:
    """Draw `rows` into the PNG `out`, written atomically (temporary file, then rename)."""
    fig = draw_run(rows, title=title, subtitle=subtitle)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}.png")
    fig.savefig(tmp, format="png")
    os.replace(tmp, out)
    return out
