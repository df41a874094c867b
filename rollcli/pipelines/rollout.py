"""Rollout stage: generate responses for prompts on actor_infer, score them on reward.

Returns a `Batch` in the training layout (see `rollcli.data.padding`) with the rewards,
and the per-sample rows written to `samples/step-N.jsonl`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from rollcli.data.batch import Batch, chunk_bounds
from rollcli.data.padding import rollout_tensors
from rollcli.data.prompts import Prompt
from rollcli.distributed.cluster import Cluster
from rollcli.strategies.hf_infer import SamplingParams

ProgressFn = Callable[[int, int], None]
PhaseFn = Callable[[str], None]


@dataclass
class RolloutResult:
    batch: Batch
    rows: list[dict[str, Any]]
    metrics: dict[str, float]


def generate(
    infer: Cluster,
    prompt_ids: list[list[int]],
    params: SamplingParams,
    on_progress: ProgressFn | None,
) -> list[dict]:
    """Generate on every actor_infer rank (prompts split across ranks), polling progress."""
    import ray

    refs = infer.dispatch_async("generate", prompt_ids, params=params)
    offsets = [start for start, _ in chunk_bounds(len(prompt_ids), infer.world_size)]
    pending = list(refs)
    while pending:
        _, pending = ray.wait(pending, num_returns=len(pending), timeout=0.5)
        if on_progress is not None:
            progress = infer.poll("progress")
            done = sum(p[0] for p in progress)
            total = sum(p[1] for p in progress) or 1
            on_progress(done if pending else total, total)
    results = ray.get(refs)
    out = []
    for offset, part in zip(offsets, results, strict=True):
        for gen in part:
            gen["prompt_index"] += offset
            out.append(gen)
    return out


def score(reward: Cluster, samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return reward.dispatch("score", samples)


def build_batch(
    prompt_ids: list[list[int]],
    response_ids: list[list[int]],
    scores: list[float],
    finished: list[bool],
    pad_id: int,
    fields: dict[str, list[Any]],
) -> Batch:
    """The training layout of samples; token ids are kept as fields so batches from
    different rounds can be merged and re-padded (see `merge_rollouts`)."""
    tensors = rollout_tensors(prompt_ids, response_ids, pad_id)
    tensors["scores"] = torch.tensor(scores, dtype=torch.float32)
    tensors["finished"] = torch.tensor(finished, dtype=torch.bool)
    if fields.get("behaviour_logprobs"):  # the sampler's log-probs, laid out like responses
        width = tensors["response_mask"].shape[1]
        behaviour = torch.zeros(len(response_ids), width)
        for i, lp in enumerate(fields["behaviour_logprobs"]):
            behaviour[i, : len(lp)] = torch.tensor(lp, dtype=torch.float32)
        tensors["behaviour_logprobs"] = behaviour
    return Batch(
        tensors, {**fields, "prompt_ids": list(prompt_ids), "response_ids": list(response_ids)}
    )


def merge_rollouts(parts: list[Batch], pad_id: int) -> Batch:
    """One batch from batches padded to different widths (e.g. dynamic-sampling rounds)."""
    fields = {k: [x for p in parts for x in p.fields[k]] for k in parts[0].fields}
    scores = [float(x) for p in parts for x in p["scores"]]
    finished = [bool(x) for p in parts for x in p["finished"]]
    prompt_ids, response_ids = fields.pop("prompt_ids"), fields.pop("response_ids")
    return build_batch(prompt_ids, response_ids, scores, finished, pad_id, fields)


def run_rollout(
    infer: Cluster,
    reward: Cluster,
    prompts: list[Prompt],
    prompt_ids: list[list[int]],
    pad_id: int,
    params: SamplingParams,
    on_progress: ProgressFn | None = None,
    on_phase: PhaseFn | None = None,
) -> RolloutResult:
    """Generate `params.n` samples per prompt and score them; `on_phase` hears "generate"
    and "reward" as each part starts."""
    on_phase = on_phase or (lambda _: None)
    on_phase("generate")
    t0 = time.perf_counter()
    gens = generate(infer, prompt_ids, params, on_progress)
    gen_s = time.perf_counter() - t0
    samples = []
    for g in gens:
        p = prompts[g["prompt_index"]]
        samples.append(
            {
                "response": g["text"],
                "answer": p.answer,
                "tag": p.tag,
                "prompt": p.messages[-1]["content"],
            }
        )
    on_phase("reward")
    t1 = time.perf_counter()
    results = score(reward, samples)
    reward_s = time.perf_counter() - t1

    batch = build_batch(
        [prompt_ids[g["prompt_index"]] for g in gens],
        [g["token_ids"] for g in gens],
        [r["score"] for r in results],
        [g["finished"] for g in gens],
        pad_id,
        {
            "tag": [p["tag"] for p in samples],
            "prompt_id": [prompts[g["prompt_index"]].id for g in gens],
            **(
                {"behaviour_logprobs": [g["logprobs"] for g in gens]}
                if all("logprobs" in g for g in gens)
                else {}
            ),
        },
    )
    scores, lengths = batch["scores"], batch["response_mask"].sum(dim=1)
    n_tokens = int(lengths.sum())
    errors = sum(1 for r in results if r.get("error"))
    metrics = {
        "reward/mean": float(scores.mean()),
        "reward/std": float(scores.std()) if len(scores) > 1 else 0.0,
        "reward/errors": float(errors),
        "response_length/mean": float(lengths.float().mean()),
        "response_length/max": float(lengths.max()),
        "response_length/truncated_frac": float((~batch["finished"]).float().mean()),
        "rollout/tokens_per_s": n_tokens / max(gen_s, 1e-9),
        "time/generate_s": gen_s,
        "time/reward_s": reward_s,
    }
    for key in sorted({k for r in results for k in r if k not in ("score", "error")}):
        values = [float(r[key]) for r in results if isinstance(r.get(key), (int, float))]
        if values:
            metrics[f"reward/{key}"] = sum(values) / len(values)
    rows = [
        {
            **s,
            "reward": r["score"],
            **{k: v for k, v in r.items() if k != "score"},
            "finished": g["finished"],
        }
        for s, r, g in zip(samples, results, gens, strict=True)
    ]
    return RolloutResult(batch, rows, metrics)


def run_dynamic_rollout(
    infer: Cluster,
    reward: Cluster,
    draw: Callable[[int], tuple[list[Prompt], list[list[int]]]],
    pad_id: int,
    params: SamplingParams,
    num_groups: int,
    max_rounds: int,
    on_progress: ProgressFn | None = None,
    on_phase: PhaseFn | None = None,
) -> RolloutResult:
    """DAPO's dynamic sampling: keep only groups whose rewards differ, draw more prompts
    until `num_groups` groups are kept or `max_rounds` extra rounds ran.

    A group whose samples all score the same has zero advantage under any group baseline,
    so it would only dilute the batch. If the cap is hit the batch is smaller than asked.
    """
    from rollcli.algorithms.dapo import groups_with_variance

    n = params.n
    kept: list[RolloutResult] = []
    have = dropped = rounds = 0
    totals: dict[str, float] = {}
    while have < num_groups and rounds <= max_rounds:
        prompts, ids = draw(num_groups - have if rounds else num_groups)
        result = run_rollout(infer, reward, prompts, ids, pad_id, params, on_progress, on_phase)
        for key in ("time/generate_s", "time/reward_s", "reward/errors"):
            totals[key] = totals.get(key, 0.0) + result.metrics[key]
        keep = groups_with_variance(result.batch["scores"], n)
        dropped += int((~keep).sum())
        take = keep.nonzero().flatten()[: num_groups - have].tolist()
        rows = [g * n + j for g in take for j in range(n)]
        if rows:
            kept.append(
                RolloutResult(
                    result.batch.select(rows), [result.rows[i] for i in rows], result.metrics
                )
            )
            have += len(take)
        rounds += 1
    if not kept:  # every group agreed: fall back to the last round so the step still logs
        kept = [result]
    batch = merge_rollouts([k.batch for k in kept], pad_id)
    metrics = dict(kept[-1].metrics)
    scores = batch["scores"]
    metrics.update(totals)
    metrics.update(
        {
            "reward/mean": float(scores.mean()),
            "reward/std": float(scores.std()) if len(scores) > 1 else 0.0,
            "rollout/dropped_groups": float(dropped),
            "rollout/sample_rounds": float(rounds),
            "rollout/kept_groups": float(have),
        }
    )
    return RolloutResult(batch, [r for k in kept for r in k.rows], metrics)
