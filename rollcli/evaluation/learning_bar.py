"""The learning bar: how a recipe's runs over several seeds are judged (docs/evaluation.md).

Three verdicts, each from per-seed figures of held-out problems answered greedily:

- **The floor, per seed**: the trained model asked as the recipe asks answers at least twice
  the base model's share, the exact McNemar test of the two on the same problems has
  p < 0.05 in the trained model's favour, and the run's final validation is not below its
  step 0. Collapse flags are reported, never failing.
- **The claim, over seeds**: `d_s` = trained accuracy (as the recipe asks) minus the base
  model's accuracy asked for `\\boxed{}` (the better prompt, so a gain a prompt would give is
  not counted); a two-sided one-sample t-test of the `d_s` against 0 has p < 0.01 and a
  positive mean, printed with its 95% interval.
- **A change against a reference** (precision, engine, schedule, rollout mode): the paired
  differences of trained accuracy on the seeds both arms ran; non-inferior when the 95%
  t-interval's lower bound is above -0.05.

Per-seed significance of the claim (each seed separately above the `\\boxed{}` base) was the
bar before: with rlvr-math's plateau at ~0.30 and a seed spread of ~0.035 against a per-seed
threshold of ~0.25-0.26, one or two seeds in nine missed it by chance in every arm measured.

A seed's figures come from its per-problem outcomes (`SeedOutcomes`) or, for runs whose
answers were not kept, from the figures a table recorded (`SeedFigures` directly; without
the McNemar counts the floor's p is bounded from the accuracies alone: `mcnemar_bound`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rollcli.evaluation.stats import mcnemar_exact, t_interval

FLOOR_RATIO = 2.0
FLOOR_ALPHA = 0.05
CLAIM_ALPHA = 0.01
MARGIN = -0.05


@dataclass(frozen=True)
class SeedFigures:
    """What the bar reads of one seed: accuracies on its `n` held-out problems, the McNemar
    counts of trained vs base as the recipe asks (`wins`: only the trained model right;
    `None` where a table did not record them) and the run's validation at step 0 and last."""

    n: int
    base: float
    base_boxed: float
    trained: float
    wins: int | None = None
    losses: int | None = None
    val_first: float | None = None
    val_last: float | None = None
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class SeedOutcomes:
    """One seed's per-problem outcomes (0 or 1, the same problems in the same order)."""

    base: list[int]
    base_boxed: list[int]
    trained: list[int]
    val_curve: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        sizes = {len(self.base), len(self.base_boxed), len(self.trained)}
        if len(sizes) != 1 or not self.base:
            raise ValueError(
                "base, base_boxed and trained need one outcome per held-out problem each, "
                f"the same number; got {len(self.base)}, {len(self.base_boxed)}, "
                f"{len(self.trained)}"
            )

    def figures(self) -> SeedFigures:
        n = len(self.base)
        wins = sum(t and not b for t, b in zip(self.trained, self.base, strict=True))
        losses = sum(b and not t for t, b in zip(self.trained, self.base, strict=True))
        curve = self.val_curve
        return SeedFigures(
            n=n,
            base=sum(self.base) / n,
            base_boxed=sum(self.base_boxed) / n,
            trained=sum(self.trained) / n,
            wins=wins,
            losses=losses,
            val_first=curve[0] if curve else None,
            val_last=curve[-1] if curve else None,
        )


def mcnemar_bound(trained: float, base: float, n: int) -> float:
    """The largest exact McNemar p that accuracies `trained` > `base` on the same `n`
    problems allow. The net `d` = wins - losses is fixed by them and p grows with the
    discordant pairs; the losses are at most the base model's right answers (and the pairs
    at most `n`), so the worst case has that many.

    >>> mcnemar_bound(0.5, 0.0, 10)  # base right on none: 5 wins, 0 losses, 2 / 2^5
    0.0625
    >>> mcnemar_bound(0.3, 0.1, 10)  # d = 2, at most 1 loss: 3 / 1, 2 * 5 / 16
    0.625
    """
    d = round((trained - base) * n)
    if d <= 0:
        return 1.0
    most_losses = min(round(base * n), (n - d) // 2)
    return max(mcnemar_exact(d + c, c) for c in range(most_losses + 1))


@dataclass(frozen=True)
class Floor:
    met: bool
    p: float
    p_bounded: bool  # p is `mcnemar_bound`'s (no counts recorded)
    why: str


def floor(fig: SeedFigures) -> Floor:
    """The per-seed floor: trained >= 2x base, McNemar p < 0.05 its way, validation kept.

    >>> floor(SeedFigures(n=256, base=0.047, base_boxed=0.19, trained=0.25, wins=57,
    ...                   losses=5, val_first=0.047, val_last=0.25)).met
    True
    """
    if fig.wins is not None and fig.losses is not None:
        p, bounded = mcnemar_exact(fig.wins, fig.losses), False
        ahead = fig.wins > fig.losses
    else:
        p, bounded = mcnemar_bound(fig.trained, fig.base, fig.n), True
        ahead = fig.trained > fig.base
    why = []
    if fig.trained < FLOOR_RATIO * fig.base or fig.trained == 0:
        why.append(f"{fig.trained:.3f} < {FLOOR_RATIO:g}x base {fig.base:.3f}")
    if not (ahead and p < FLOOR_ALPHA):
        why.append(f"McNemar p {p:.2g}")
    if fig.val_first is not None and fig.val_last is not None and fig.val_last < fig.val_first:
        why.append(f"validation {fig.val_first:.3f} -> {fig.val_last:.3f}")
    return Floor(not why, p, bounded, "; ".join(why))


@dataclass(frozen=True)
class MeanTest:
    """A mean of per-seed values with its 95% t-interval and two-sided p against 0."""

    mean: float
    low: float
    high: float
    p: float
    seeds: int


def claim(figures: dict[str, SeedFigures]) -> MeanTest:
    """The test over seeds of `d_s` = trained - base asked for `\\boxed{}`."""
    return _mean_test([f.trained - f.base_boxed for f in figures.values()])


def change(arm: dict[str, SeedFigures], reference: dict[str, SeedFigures]) -> MeanTest:
    """Paired differences of trained accuracy, `arm` minus `reference`, on common seeds."""
    common = [s for s in arm if s in reference]
    if len(common) < 2:
        raise ValueError(
            f"a change needs 2 or more seeds that both arms ran; common seeds: {common or 'none'}"
        )
    return _mean_test([arm[s].trained - reference[s].trained for s in common])


def _mean_test(values: list[float]) -> MeanTest:
    mean, low, high, p = t_interval(values)
    return MeanTest(mean, low, high, p, len(values))


@dataclass(frozen=True)
class Verdict:
    floors: dict[str, Floor]
    claim: MeanTest | None
    change: MeanTest | None

    @property
    def floor_met(self) -> bool:
        return all(f.met for f in self.floors.values())

    @property
    def claim_met(self) -> bool:
        return self.claim is not None and self.claim.p < CLAIM_ALPHA and self.claim.mean > 0

    @property
    def change_met(self) -> bool | None:
        return None if self.change is None else self.change.low > MARGIN

    @property
    def met(self) -> bool:
        return self.floor_met and self.claim_met and self.change_met is not False


def judge(
    figures: dict[str, SeedFigures], reference: dict[str, SeedFigures] | None = None
) -> Verdict:
    """The three verdicts for one arm (the change only with a `reference`)."""
    floors = {seed: floor(f) for seed, f in figures.items()}
    over = claim(figures) if len(figures) >= 2 else None
    versus = change(figures, reference) if reference is not None else None
    return Verdict(floors, over, versus)


def render(verdict: Verdict, against: str | None = None) -> str:
    """The verdicts as the lines `bench/learning.py` prints under its table."""
    missed = [s for s, f in verdict.floors.items() if not f.met]
    lines = [
        f"floor (each seed: >= {FLOOR_RATIO:g}x base, McNemar p < {FLOOR_ALPHA}, validation "
        f"kept): {len(verdict.floors) - len(missed)}/{len(verdict.floors)} seeds "
        + (
            "met"
            if not missed
            else "missed by " + ", ".join(f"{s} ({verdict.floors[s].why})" for s in missed)
        )  # fmt: skip
    ]
    c = verdict.claim
    if c is None:
        lines.append("over seeds: needs 2 or more seeds")
    else:
        lines.append(
            f"over seeds (trained - base asked for \\boxed{{}}): mean {c.mean:+.3f} "
            f"[{c.low:+.3f}, {c.high:+.3f}], t-test p = {c.p:.2g} over {c.seeds} seeds: "
            + ("met" if verdict.claim_met else f"missed (needs p < {CLAIM_ALPHA}, mean > 0)")
        )
    if verdict.change is not None:
        d = verdict.change
        lines.append(
            f"against {against or 'the reference'} (paired, trained): {d.mean:+.3f} "
            f"[{d.low:+.3f}, {d.high:+.3f}] over {d.seeds} seeds: "
            + ("non-inferior" if verdict.change_met else f"lower bound under {MARGIN}")
        )
    lines.append(f"learning bar: {'met' if verdict.met else 'missed'}")
    return "\n".join(lines)
