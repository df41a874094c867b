"""`roll eval` for RLVR recipes: greedy accuracy (Wilson 95% interval) and, with `k > 1`,
pass@1 and pass@k from `k` samples at a temperature, on the held-out problems that training
validates on, with every problem's outcome.

The problems come from `load_prompt_sets`, the function training uses, with
`data.val_size = n`: for the recipe's seed they are the run's validation set (or its
first `n`, since validation sets are prefixes of one sequence). Generation and scoring run
in this process without Ray, through training's rollout scheduler: an hf-engine
`ActorInferWorker` and a `RewardWorker` held as plain objects, the classes training's
workers are.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from rollcli.config.recipe import RLVRRecipe
from rollcli.data.batch_keys import RESPONSE_MASK
from rollcli.data.prompt_sets import fit_prompts, load_prompt_data
from rollcli.distributed.local_group import LocalGroup
from rollcli.evaluation.stats import pass_at_k, wilson_interval
from rollcli.rewards.failures import check_reward_errors, reward_errors
from rollcli.rollout.prompt_scheduler import answer_all
from rollcli.strategies.sampling import SamplingParams

ProgressFn = Callable[[str, int, int], None]  # (phase, done, total)


@dataclass
class Sample:
    response: str
    correct: bool
    score: float
    tokens: int
    error: str | None = None  # the reward could not score it (then `score` is 0)


@dataclass
class ProblemOutcome:
    """One held-out problem: the greedy answer, and the `k` samples when asked for."""

    id: str
    prompt: str
    answer: str
    tag: str
    greedy: Sample
    samples: list[Sample] = field(default_factory=list)

    @property
    def correct(self) -> bool:
        return self.greedy.correct


@dataclass
class RLVREvalResult:
    recipe: str
    model: str
    problems: list[ProblemOutcome]
    k: int
    temperature: float

    def samples(self) -> list[Sample]:
        """Every scored answer: the greedy ones, then the `k` samples."""
        return [p.greedy for p in self.problems] + [s for p in self.problems for s in p.samples]

    def summary(self) -> dict[str, Any]:
        n = len(self.problems)
        errors, first = reward_errors([{"error": s.error} for s in self.samples()])
        right = sum(p.correct for p in self.problems)
        low, high = wilson_interval(right, n)
        out: dict[str, Any] = {
            "recipe": self.recipe,
            "model": self.model,
            "problems": n,
            "accuracy": right / n,
            "accuracy_ci95": [low, high],
            "mean_score": sum(p.greedy.score for p in self.problems) / n,
            "mean_response_tokens": sum(p.greedy.tokens for p in self.problems) / n,
            "reward_errors": errors,  # answers the reward failed on (scored 0)
            "reward_error": first,
        }
        if self.k > 1:
            hits = [sum(s.correct for s in p.samples) for p in self.problems]
            solved = sum(c > 0 for c in hits)
            out.update(
                k=self.k,
                temperature=self.temperature,
                pass_at_1=sum(pass_at_k(self.k, c, 1) for c in hits) / n,
                pass_at_k=sum(pass_at_k(self.k, c, self.k) for c in hits) / n,
                pass_at_k_ci95=list(wilson_interval(solved, n)),
            )
        return out

    def rows(self) -> list[dict[str, Any]]:
        """Each problem's outcome, for `--json`."""
        rows = []
        for p in self.problems:
            row = {
                "id": p.id,
                "prompt": p.prompt,
                "answer": p.answer,
                "tag": p.tag,
                "correct": p.correct,
                "score": p.greedy.score,
                "response": p.greedy.response,
                "response_tokens": p.greedy.tokens,
            }
            if p.greedy.error:
                row["reward_error"] = p.greedy.error
            if p.samples:
                row["samples_correct"] = sum(s.correct for s in p.samples)
                row["samples"] = [asdict(s) for s in p.samples]
            rows.append(row)
        return rows


def row_correct(row: dict[str, Any]) -> bool:
    """A scored rollout row's verdict (`RolloutResult.rows`): its reward result's `correct`
    field, else a full reward."""
    return bool(row.get("correct", row["reward"] >= 1.0))


def evaluate_rlvr(
    cfg: RLVRRecipe,
    recipe: str,
    model: str,
    model_path: str,
    *,
    n: int | None,
    seed: int,
    k: int = 1,
    temperature: float = 1.0,
    num_threads: int = 1,
    on_progress: ProgressFn | None = None,
) -> RLVREvalResult:
    """`n` held-out problems of `cfg` (drawn with data seed `seed`) answered greedily by
    the model in `model_path`, and `k` samples each at `temperature` when `k > 1`. A reward
    that fails on every answer raises `RewardFailedError` with its first error (an accuracy
    of zeros would read as a model that answers nothing); the summary counts the failures."""
    from rollcli.workers.actor_infer import ActorInferArgs, ActorInferWorker
    from rollcli.workers.reward import RewardArgs, RewardWorker

    prompts = held_out_problems(cfg, n, seed)
    worker = ActorInferWorker(
        ActorInferArgs(model_path, num_threads=num_threads, seed=seed, engine="hf")
    )
    prompts, ids, _ = fit_prompts(
        worker.tokenizer, prompts, cfg.data.max_prompt_tokens, what="held-out prompts"
    )
    reward = RewardWorker(
        RewardArgs(
            cfg.reward.fn,
            options=cfg.reward.worker_options,
            timeout_s=cfg.reward.timeout_s,
            convention=cfg.reward.convention,
        )
    )
    r = cfg.rollout
    budget = r.val_max_new_tokens or r.max_new_tokens
    greedy = _answer(
        worker,
        reward,
        prompts,
        ids,
        SamplingParams(n=1, max_new_tokens=budget, temperature=0.0, seed=seed),
        "greedy: tokens",
        on_progress,
    )
    sampled: list[list[Sample]] = [[] for _ in prompts]
    if k > 1:
        params = SamplingParams(n=k, max_new_tokens=budget, temperature=temperature, seed=seed)
        flat = _answer(worker, reward, prompts, ids, params, f"{k} samples: tokens", on_progress)
        sampled = [flat[i * k : (i + 1) * k] for i in range(len(prompts))]
    problems = [
        ProblemOutcome(p.id, p.messages[-1]["content"], p.answer, p.tag, g, s)
        for p, g, s in zip(prompts, greedy, sampled, strict=True)
    ]
    result = RLVREvalResult(recipe, model, problems, k, temperature)
    rows = [{"error": s.error} for s in result.samples()]
    check_reward_errors(cfg.reward.fn, rows, f"of {model} in evaluation", lambda _w: None, 1.0)
    return result


def held_out_problems(cfg: RLVRRecipe, n: int | None, seed: int) -> list:
    """The first `n` validation problems of `cfg`'s data drawn with seed `seed` (None: as
    many as the run validates: `data.val_size`, or its default)."""
    from rollcli.rewards.conventions import reward_columns

    columns = reward_columns(cfg.reward)  # what the reward asks for
    return load_prompt_data(cfg.data.model_copy(update={"val_size": n}), seed, columns).val


def _answer(worker, reward, prompts, ids, params, phase, on_progress) -> list[Sample]:  # noqa: ANN001
    """Generate `params.n` answers per prompt and score them, in prompt-major order, through
    training's rollout scheduler on the two workers held here (`LocalGroup`)."""
    groups = LocalGroup("actor_infer", [worker]), LocalGroup("reward", [reward])
    pad_id = worker.tokenizer.pad_token_id
    with _polling(worker, phase, on_progress):
        result = answer_all(*groups, pad_id, prompts, ids, params, request_prefix=f"{phase}-")
    lengths = result.batch[RESPONSE_MASK].sum(dim=1).tolist()
    return [
        Sample(
            row["response"],
            row_correct(row),
            float(row["reward"]),
            int(tokens),
            row.get("error"),
        )
        for row, tokens in zip(result.rows, lengths, strict=True)
    ]


@contextlib.contextmanager
def _polling(worker, phase: str, on_progress: ProgressFn | None) -> Iterator[None]:  # noqa: ANN001
    """Report the engine's (tokens generated, token budget) every half second while the
    worker generates in this thread, as the pipeline polls its ranks."""
    if on_progress is None:
        yield
        return
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(0.5):
            done, total = worker.progress()
            on_progress(phase, done, total or 1)

    thread = threading.Thread(target=poll, name="eval-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
