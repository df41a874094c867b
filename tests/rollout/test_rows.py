"""The boundary where a scheduled request's answer from actor_infer becomes typed rows:
a real `ActorInferWorker` (tiny random model) and a real `RewardWorker` as plain objects,
their answers converted by `ScoredRequest.from_wire`."""

from __future__ import annotations

import pytest

from rollcli.rollout.rows import GenerationRow, ScoredRequest
from rollcli.strategies.sampling import SamplingParams
from rollcli.workers.actor_infer import ActorInferArgs, ActorInferWorker
from rollcli.workers.reward import RewardArgs, RewardWorker

PROMPTS = [[1, 5, 9], [1, 7]]


@pytest.fixture(scope="module")
def infer(tiny_model) -> ActorInferWorker:  # noqa: ANN001
    return ActorInferWorker(ActorInferArgs(str(tiny_model)))


def test_a_finished_request_becomes_its_rows_scores_and_spans(infer) -> None:  # noqa: ANN001
    params = SamplingParams(n=2, max_new_tokens=4, temperature=1.0, seed=3)
    done = infer.generate_request(PROMPTS, params, "0:0")
    reward = RewardWorker(RewardArgs("math"))
    meta = [{"answer": "2", "tag": "t", "prompt": "p"}, {"answer": "4", "tag": "t", "prompt": "q"}]
    scored = [
        reward.score_sample({**meta[g["prompt_index"]], "response": g["text"]})
        for g in done["gens"]
    ]

    req = ScoredRequest.from_wire(done, scored)

    assert not req.aborted
    assert (req.gen_start, req.gen_end) == (done["gen_start"], done["gen_end"])
    assert [g.prompt_index for g in req.gens] == [0, 0, 1, 1]
    assert [g.token_ids for g in req.gens] == [g["token_ids"] for g in done["gens"]]
    assert [g.text for g in req.gens] == [g["text"] for g in done["gens"]]
    assert [g.finished for g in req.gens] == [g["finished"] for g in done["gens"]]
    assert [g.logprobs for g in req.gens] == [g.get("logprobs") for g in done["gens"]]
    assert list(req.results) == [s["result"] for s in scored]
    assert all(0.0 <= r["score"] <= 1.0 for r in req.results)
    assert list(req.reward_spans) == [(s["start"], s["end"]) for s in scored]
    assert all(start <= end for start, end in req.reward_spans)


def test_an_aborted_request_has_no_rows(infer) -> None:  # noqa: ANN001
    infer.abort(["1:0"])
    done = infer.generate_request(PROMPTS, SamplingParams(max_new_tokens=4), "1:0")
    req = ScoredRequest.from_wire(done, None)
    assert req.aborted and req.gens == () and req.results == () and req.reward_spans == ()


def test_scores_must_match_the_rows_one_to_one(infer) -> None:  # noqa: ANN001
    done = infer.generate_request(PROMPTS, SamplingParams(max_new_tokens=4), "2:0")
    one = {"result": {"score": 0.0}, "start": 0.0, "end": 0.0}
    with pytest.raises(ValueError, match="needs its samples' scores"):
        ScoredRequest.from_wire(done, None)
    with pytest.raises(ValueError):  # zip(strict=True): a score missing
        ScoredRequest.from_wire(done, [one])


def test_a_row_moves_by_its_ranks_offset_and_an_unknown_key_fails() -> None:
    row = {"prompt_index": 1, "token_ids": [4, 2], "text": "hi", "finished": True}
    assert GenerationRow.from_wire(row, offset=3) == GenerationRow(4, [4, 2], "hi", True)
    with pytest.raises(TypeError, match="surprise"):
        GenerationRow.from_wire({**row, "surprise": 1})
