"""Data files from a run's samples (`runs/<id>/samples/step-N.jsonl`): rejection sampling.

`sft_rows` keeps the responses whose reward reached `min_reward` (verified correct: the math
reward scores 1.0 only for a correct, cleanly ended answer) as conversations for the sft
pipeline; `dpo_rows` pairs, per prompt, such a response with one that fell short, for the
dpo pipeline. Samples that hit the token limit before finishing are left out unless asked
for, and duplicates are kept once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from rollcli.data.prompts import DataError


def run_samples(run_dir: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """`(step, row)` for every sample of the run, in step order."""
    files = sorted(
        (run_dir / "samples").glob("step-*.jsonl"), key=lambda p: int(p.stem.split("-")[1])
    )
    if not files:
        raise DataError(f"run {run_dir.name!r} has no samples (samples/step-N.jsonl)")
    for path in files:
        step = int(path.stem.split("-")[1])
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                yield step, json.loads(line)


def _system_prompt(run_dir: Path) -> str | None:
    path = run_dir / "recipe.yaml"
    recipe = yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else {}
    return ((recipe or {}).get("data") or {}).get("system_prompt")


def _prompt_messages(prompt: str, system_prompt: str | None) -> list[dict[str, str]]:
    system = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return [*system, {"role": "user", "content": prompt}]


def _usable(row: dict[str, Any], include_unfinished: bool) -> bool:
    return not row.get("error") and (include_unfinished or row.get("finished", True))


def sft_rows(
    run_dir: Path,
    *,
    min_reward: float = 1.0,
    per_prompt: int | None = None,
    include_unfinished: bool = False,
) -> list[dict[str, Any]]:
    """Conversations `{messages, answer, tag, id}` of the verified samples (at most
    `per_prompt` distinct responses per prompt)."""
    system = _system_prompt(run_dir)
    seen: set[tuple[str, str]] = set()
    kept: dict[str, int] = {}
    out: list[dict[str, Any]] = []
    for step, row in run_samples(run_dir):
        if row["reward"] < min_reward or not _usable(row, include_unfinished):
            continue
        key = (row["prompt"], row["response"])
        if key in seen or (per_prompt is not None and kept.get(row["prompt"], 0) >= per_prompt):
            continue
        seen.add(key)
        kept[row["prompt"]] = kept.get(row["prompt"], 0) + 1
        out.append(
            {
                "id": f"{run_dir.name}-step{step}-{len(out)}",
                "messages": [
                    *_prompt_messages(row["prompt"], system),
                    {"role": "assistant", "content": row["response"]},
                ],
                "answer": row.get("answer"),
                "tag": row.get("tag", "math"),
            }
        )
    return out


def dpo_rows(
    run_dir: Path,
    *,
    min_reward: float = 1.0,
    per_prompt: int = 1,
    include_unfinished: bool = False,
) -> list[dict[str, Any]]:
    """Pairs `{messages, chosen, rejected, answer, id}`: per prompt, up to `per_prompt`
    pairs of a response that reached `min_reward` and a distinct one that did not."""
    system = _system_prompt(run_dir)
    good: dict[str, list[str]] = {}
    bad: dict[str, list[str]] = {}
    answers: dict[str, Any] = {}
    for _, row in run_samples(run_dir):
        if not _usable(row, include_unfinished):
            continue
        bucket = good if row["reward"] >= min_reward else bad
        responses = bucket.setdefault(row["prompt"], [])
        if row["response"] not in responses:
            responses.append(row["response"])
        answers.setdefault(row["prompt"], row.get("answer"))
    out: list[dict[str, Any]] = []
    for prompt, chosen in good.items():
        rejected = bad.get(prompt, [])
        for c, r in list(zip(chosen, rejected, strict=False))[:per_prompt]:
            out.append(
                {
                    "id": f"{run_dir.name}-{len(out)}",
                    "messages": _prompt_messages(prompt, system),
                    "chosen": c,
                    "rejected": r,
                    "answer": answers[prompt],
                }
            )
    return out


def write_jsonl(rows: list[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    path.write_text(text, encoding="utf-8")
