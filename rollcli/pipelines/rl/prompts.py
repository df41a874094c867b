"""RLVR's rollout source: prompts → `group_size` sampled answers each → rule rewards.

Generation and reward go through the prompt scheduler (`rollcli.rollout.prompt_scheduler`),
with dynamic sampling. With `rollout.max_staleness = k > 0` the rollouts of the next k steps
are already running while a step trains (async mode): they use weights up to k steps old,
which an off-policy correction (`algorithm.off_policy`) corrects for. With
`rollout.partial` a step trains on the groups that have ended and the unfinished samples
continue in the next rollout (`rollcli.rollout.partial_rollout`), which starts before the
step trains when `max_staleness >= 2` (a continued sample is then two steps old when it
trains) and after it otherwise. A checkpoint holds the prompt sampler, the rollouts already
started, finished, and the paused samples, so a resumed run repeats the uninterrupted one
exactly.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rollcli.config.algorithm import resolved_correction
from rollcli.config.recipe import RLVRRecipe
from rollcli.data.batch_keys import RESPONSE_MASK
from rollcli.data.prepared import prompt_data
from rollcli.data.prompts import Prompt
from rollcli.data.sampler import PromptSampler
from rollcli.evaluation.rlvr_eval import row_correct
from rollcli.evaluation.stats import wilson_interval
from rollcli.pipelines.rl.source import step_sampling
from rollcli.rewards.conventions import reward_columns
from rollcli.rewards.failures import check_reward_errors, reward_errors
from rollcli.rollout.partial_rollout import PartialPool, PartialRollout
from rollcli.rollout.prompt_scheduler import (
    PendingRollout,
    RolloutScheduler,
    SchedulerOptions,
    answer_all,
)
from rollcli.rollout.result import RolloutResult
from rollcli.runs.checkpoint import load_tensors_file
from rollcli.runtime.run_control import RunControl, report_data_notes
from rollcli.strategies.sampling import SamplingParams

if TYPE_CHECKING:
    from rollcli.runtime.workers_setup import Clusters

AHEAD_FILE = "rollouts_ahead.pt"  # async mode: finished rollouts of the steps after it
PARTIAL_FILE = "partial_pool.pt"  # partial rollouts: the samples in flight (paused)


class PromptSource:
    flop_account = True

    def __init__(self, cfg: RLVRRecipe, ctl: RunControl) -> None:
        self.cfg = cfg
        self.ctl = ctl
        self.group_size = cfg.rollout.group_size
        self.batch_size = cfg.rollout.batch_size
        # async mode: rollouts started ahead of their step (step -> pending or finished)
        self.ahead: dict[int, PendingRollout | PartialRollout | RolloutResult] = {}
        self.pool = PartialPool()  # partial rollouts: the groups in flight

    def load(self, tokenizer: Any) -> None:
        cfg = self.cfg
        self.ctl.ui.phase("loading data")
        self.pad_id = tokenizer.pad_token_id
        data = prompt_data(cfg.data, cfg.seed, tokenizer, reward_columns(cfg.reward))
        self.train_prompts, self.val_prompts = data.train, data.val
        self.train_ids, self.val_ids = data.train_ids, data.val_ids
        report_data_notes(self.ctl, data.notes)
        self.sampler = PromptSampler(len(self.train_prompts), cfg.seed)
        correction = resolved_correction(cfg.algorithm, cfg.rollout.precision)
        if cfg.rollout.max_staleness and correction == "none":
            self.ctl.run.log_event(
                f"async rollout (rollout.max_staleness={cfg.rollout.max_staleness}) without "
                "algorithm.off_policy.correction: samples from older weights are not reweighted"
            )

    def describe(self) -> str:
        return f"{len(self.train_prompts):,} train / {len(self.val_prompts):,} validation prompts"

    def attach(self, clusters: Clusters, version: int) -> None:
        self.infer, self.reward = clusters.actor_infer, clusters.reward
        self.scheduler = RolloutScheduler(self.infer, self.reward, self.pad_id, self.draw)
        self.scheduler.version = version
        self.ahead = {}  # rollouts of the workers just replaced are gone

    def before_sync(self, version: int) -> None:
        """Requests sent from now on are generated with the weights after step `version`."""
        self.scheduler.version = version

    # ---- the rollout -------------------------------------------------------------------
    def draw(self, num_prompts: int) -> tuple[list[Prompt], list[list[int]]]:
        """The next prompts from the seeded sampler (and their token ids)."""
        indices = self.sampler.next_indices(num_prompts)
        return [self.train_prompts[i] for i in indices], [self.train_ids[i] for i in indices]

    def rollout(self, step: int) -> RolloutResult:
        """The step's scored samples. Async mode: this step's rollout was started up to
        `max_staleness` steps earlier; the rollouts of the steps after it are started now,
        before this one trains."""
        pending = self.ahead.pop(step, None) or self._start(step)
        ahead = min(step + self.lead, self.cfg.train.steps)
        result = self._collect(pending)
        for later in range(step + 1, ahead + 1):
            if later not in self.ahead:
                self.ahead[later] = self._start(later)
        check_reward_errors(
            self.cfg.reward.fn, result.rows, f"at step {step}", self.ctl.run.log_event
        )
        return result

    @property
    def lead(self) -> int:
        """Steps a rollout starts ahead of its step: `max_staleness`; partial rollouts one
        step when `max_staleness >= 2`, else none (the staleness left bounds continuations)."""
        r = self.cfg.rollout
        return min(1, r.max_staleness - 1) if r.partial else r.max_staleness

    def _start(self, step: int) -> PendingRollout | PartialRollout:
        cfg = self.cfg
        if cfg.rollout.partial:  # `step - 1`: the weights step `step` trains
            return PartialRollout(
                self.scheduler,
                self.sampling(step),
                self._options(),
                self.pool,
                step - 1,
                cfg.rollout.max_staleness,
            )
        return self.scheduler.start(self.sampling(step), self._options())

    def _options(self) -> SchedulerOptions:
        cfg = self.cfg
        return SchedulerOptions(
            group_size=cfg.rollout.group_size,
            num_groups=cfg.rollout.prompts_per_step,
            request_groups=cfg.rollout.request_groups,
            dynamic_sampling=cfg.algorithm.dynamic_sampling,
            oversample=cfg.rollout.oversample,
            max_resample_rounds=cfg.algorithm.max_resample_rounds,
        )

    def _collect(self, pending: PendingRollout | PartialRollout | RolloutResult) -> RolloutResult:
        if isinstance(pending, RolloutResult):  # finished earlier (restored from a checkpoint)
            return pending
        return pending.result(self.ctl.ui.generation, self.ctl.phase)

    def sampling(self, step: int) -> SamplingParams:
        return step_sampling(self.cfg.rollout, self.cfg.seed, step, n=self.group_size)

    # ---- validation --------------------------------------------------------------------
    def validate(self) -> dict[str, float]:
        """Greedy answers to the held-out prompts, through the rollout scheduler; the
        samples the reward failed on are counted (`val/reward_errors`)."""
        r = self.cfg.rollout
        params = SamplingParams(
            n=1, max_new_tokens=r.val_max_new_tokens or r.max_new_tokens, temperature=0.0
        )
        t0 = time.perf_counter()
        result = answer_all(
            self.infer,
            self.reward,
            self.pad_id,
            self.val_prompts,
            self.val_ids,
            params,
            self.ctl.ui.generation,
            request_prefix="val-",
        )
        rows = result.rows
        # a reward that fails on every held-out sample stops the run; on some, a warning
        check_reward_errors(self.cfg.reward.fn, rows, "in validation", self.ctl.run.log_event, 0)
        right = sum(row_correct(row) for row in rows)
        accuracy = right / len(rows)
        low, high = wilson_interval(right, len(rows))
        self.ctl.run.log_event(
            f"validation: accuracy {accuracy:.3f} (95% CI {low:.3f}-{high:.3f}) on "
            f"{len(rows)} held-out prompts (greedy)"
        )
        return {
            "val/accuracy": accuracy,
            "val/accuracy_ci_low": low,
            "val/accuracy_ci_high": high,
            "val/n": float(len(rows)),
            "val/reward_mean": sum(row["reward"] for row in rows) / len(rows),
            "val/reward_errors": float(reward_errors(rows)[0]),
            "val/response_length": float(result.batch[RESPONSE_MASK].sum(dim=1).float().mean()),
            "time/validate_s": time.perf_counter() - t0,
        }

    # ---- checkpoints -------------------------------------------------------------------
    def finish_ahead(self) -> None:
        """Async mode: finish the rollouts started for later steps, in step order. Dynamic
        sampling may draw more prompts while they finish (top-ups), so this comes before
        the sampler's position is read."""
        self.ahead = {k: self._collect(v) for k, v in sorted(self.ahead.items())}

    def state_dict(self) -> dict[str, Any]:
        """The sampler after the rollouts ahead drew their last prompts (a resumed run
        gets those rollouts finished from `files` and must not draw their prompts again)."""
        self.finish_ahead()
        return {"sampler": self.sampler.state_dict()}

    def files(self) -> dict[str, Any] | None:
        """Async mode: the rollouts already started for later steps, finished now."""
        self.finish_ahead()
        ahead = {step: result.to_plain() for step, result in self.ahead.items()}
        files: dict[str, Any] = {AHEAD_FILE: ahead} if ahead else {}
        if self.cfg.rollout.partial:
            files[PARTIAL_FILE] = self.pool.to_plain()
        return files or None

    def load_state_dict(self, state: dict[str, Any] | None, checkpoint: Path | None) -> None:
        self.sampler = PromptSampler(len(self.train_prompts), self.cfg.seed)
        self.ahead = {}
        self.pool = PartialPool()
        if state is None or checkpoint is None:
            return
        self.sampler.load_state_dict(state["sampler"])
        ahead = checkpoint / AHEAD_FILE
        saved = load_tensors_file(ahead) if ahead.exists() else {}
        self.ahead = {step: RolloutResult.from_plain(r) for step, r in saved.items()}
        paused = checkpoint / PARTIAL_FILE
        if paused.exists():
            self.pool = PartialPool.from_plain(load_tensors_file(paused))
