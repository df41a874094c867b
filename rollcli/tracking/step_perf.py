"""A step's FLOP account: the useful FLOPs of each phase and `perf/*` metrics.

`perf/<phase>_gflop` is what the FLOP model (`tracking/flops.py`) counts for the tokens the
phase computed for the batch the step trains on; `perf/<phase>_mfu` is that over
`time/<phase>_s x perf/peak_gflops x devices` (the share of the machine's measured matmul
peak the phase reached: 1.0 is every device multiplying at its peak the whole time). A phase
that runs faster than the peak raises it (`tracking/peak.py`), so the MFU stays at most 1.0.
Samples that generated but were not trained on (groups dynamic sampling dropped, requests
it aborted) are not useful work: they lower `generate_mfu`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rollcli.data.batch_keys import PROMPT_WIDTH, RESPONSE_MASK
from rollcli.tracking.flops import FlopModel, Group, train_factor
from rollcli.tracking.peak import raise_machine_peak, raised_peak, run_peak, write_peak

if TYPE_CHECKING:
    from rollcli.data.batch import Batch
    from rollcli.runs.run_dir import RunDir

PHASES = ("generate", "forward", "train")


def rollout_groups(batch: Batch) -> list[Group]:
    """The batch's rows grouped by identical prompt tokens (a GRPO group), with each
    row's real prompt and response lengths (padding is not counted)."""
    width = int(batch[PROMPT_WIDTH][0])
    prompt_lens = batch["attention_mask"][:, :width].sum(dim=1).tolist()
    response_lens = batch[RESPONSE_MASK].sum(dim=1).long().tolist()
    ids = batch["input_ids"][:, :width]
    groups: dict[tuple[int, ...], list[int]] = {}
    for row, (p, r) in enumerate(zip(prompt_lens, response_lens, strict=True)):
        groups.setdefault(tuple(ids[row, width - p :].tolist()), []).append(r)
    return [Group(len(prompt), tuple(rs)) for prompt, rs in groups.items()]


@dataclass(frozen=True)
class RLStepWork:
    """What an RL step runs, beyond its tokens: the forward passes of phase 2 and the
    training passes of phase 4."""

    reference: bool  # ref log-probs (a reference worker, or actor_train with adapters off)
    old_logprobs: bool
    critic: bool
    epochs: int
    shared_prefix: bool
    lora: bool

    def flops(self, model: FlopModel, groups: list[Group]) -> dict[str, float]:
        """Useful FLOPs of the generate, forward and train phases."""
        actor = model.logprobs(groups, shared_prefix=self.shared_prefix)
        critic = model.logprobs(groups, shared_prefix=self.shared_prefix, head=False)
        forward = actor * (self.reference + self.old_logprobs) + critic * self.critic
        train = self.epochs * train_factor(frozen_weights=self.lora) * actor
        train += self.epochs * train_factor(frozen_weights=False) * critic * self.critic
        return {"generate": model.generate(groups), "forward": forward, "train": train}


def perf_metrics(
    flops: dict[str, float],
    seconds: dict[str, float],
    peak_flops: float,
    devices: dict[str, int] | None = None,
) -> dict[str, float]:
    """`perf/peak_gflops`, and per phase `perf/<phase>_gflop` and `perf/<phase>_mfu`
    (useful FLOPs / (seconds x peak x devices)); a phase without a time logs no MFU.

    >>> perf_metrics({"train": 6e9}, {"train": 2.0}, peak_flops=10e9)
    {'perf/peak_gflops': 10.0, 'perf/train_gflop': 6.0, 'perf/train_mfu': 0.3}
    """
    out = {"perf/peak_gflops": peak_flops / 1e9}
    for phase, count in flops.items():
        out[f"perf/{phase}_gflop"] = count / 1e9
        t = seconds.get(phase)
        if t:
            out[f"perf/{phase}_mfu"] = count / (t * peak_flops * (devices or {}).get(phase, 1))
    return out


def phase_rates(
    flops: dict[str, float], seconds: dict[str, float], devices: dict[str, int] | None = None
) -> dict[str, float]:
    """FLOP/s per device of each phase that has a time.

    >>> phase_rates({"train": 6e9, "forward": 1e9}, {"train": 2.0}, {"train": 3})
    {'train': 1000000000.0}
    """
    return {
        phase: count / (seconds[phase] * (devices or {}).get(phase, 1))
        for phase, count in flops.items()
        if seconds.get(phase)
    }


@dataclass
class RunPerf:
    """A run's FLOP model and peak; `step_metrics` turns a step's FLOPs and times into
    `perf/*`. `devices`: GPUs per phase (one device, the machine, on a CPU run). `run`: the
    run folder, told when a phase beats the peak (an event, and the new `perf_peak.json`)."""

    model: FlopModel
    peak_flops: float
    devices: dict[str, int] = field(default_factory=dict)
    run: RunDir | None = None
    peak: dict[str, Any] = field(default_factory=dict)  # the perf_peak.json record

    @classmethod
    def start(
        cls,
        run: RunDir,
        model_path: str,
        configured: float | None,
        measure_peak: Callable[[], dict[str, Any]],
    ) -> RunPerf:
        """The model's FLOP numbers (its config.json) and the run's peak: `configured`
        (run.peak_flops), the run folder's, or `measure_peak()` (actor_train's rank 0:
        its `matmul_peak`)."""
        from rollcli.planning.model_spec import model_spec

        peak = run_peak(run.root, configured, measure_peak)
        where = f" ({peak['device']}, {peak['dtype']})" if "device" in peak else ""
        if peak.get("cached"):  # an earlier run's probe on this machine
            home, file = str(Path.home()), peak["cache_file"]
            file = "~" + file[len(home) :] if file.startswith(home + "/") else file
            where = f" at {peak['measured_at']} ({peak['device']}, {peak['dtype']}; {file})"
        run.log_event(
            f"perf: matmul peak {peak['flops'] / 1e9:.1f} GFLOP/s per device, {peak['source']}"
            f"{where}; perf/*_mfu divide by it"
        )
        model = FlopModel.from_spec(model_spec(model_path))
        return cls(model, float(peak["flops"]), run=run, peak=peak)

    def step_metrics(self, flops: dict[str, float], metrics: Mapping[str, Any]) -> dict[str, float]:
        """`perf_metrics` with each phase's time read from the step's `time/<phase>_s`; a
        phase faster than the peak raises it first (`tracking/peak.py`)."""
        seconds = {p: metrics.get(f"time/{p}_s") or 0.0 for p in flops}
        old = self.peak_flops
        self.peak_flops, phase = raised_peak(old, phase_rates(flops, seconds, self.devices))
        if phase is not None:
            self._record_raise(metrics.get("step"), phase, old)
        return perf_metrics(flops, seconds, self.peak_flops, self.devices)

    def _record_raise(self, step: Any, phase: str, old: float) -> None:
        new = self.peak_flops / 1e9
        where = f"step {step}'s" if step is not None else "a step's"
        first = self.peak.get("measured_flops", self.peak.get("flops", old))
        self.peak = {
            **{k: v for k, v in self.peak.items() if k not in ("flops", "source")},
            "flops": self.peak_flops,
            "source": f"raised: {where} {phase} phase ran at {new:.1f} GFLOP/s",
            "measured_flops": first,
            "measured_source": self.peak.get("measured_source", self.peak.get("source")),
        }
        if "cache_file" in self.peak:
            raise_machine_peak(self.peak["cache_file"], self.peak_flops, self.peak["source"])
        if self.run is None:
            return
        write_peak(self.run.root, self.peak)
        self.run.log_event(
            f"perf: {where} {phase} phase ran at {new:.1f} GFLOP/s per device, faster than the "
            f"matmul peak of {old / 1e9:.1f} (a probe on a busy machine reads low); the peak "
            f"is raised to {new:.1f} GFLOP/s, so perf/*_mfu stays at most 100%"
        )
