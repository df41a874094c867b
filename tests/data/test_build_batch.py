"""Samples from requests of different widths are re-padded into one training layout."""

from __future__ import annotations

from rollcli.rollout.result import build_batch


def test_build_batch_repads_samples_of_different_widths() -> None:
    batch = build_batch(
        [[5, 6, 7], [8]],
        [[1, 2], [3, 4, 9, 9]],
        [1.0, 0.0],
        [True, False],
        pad_id=0,
        fields={"tag": ["math", "code"], "behaviour_logprobs": [[-0.5, -1.0], [-1, -2, -3, -4]]},
    )
    # one prompt width (3) for every row, responses right-padded to the longest (4)
    assert batch["input_ids"].tolist() == [[5, 6, 7, 1, 2, 0, 0], [0, 0, 8, 3, 4, 9, 9]]
    assert batch["prompt_width"].tolist() == [3, 3]
    assert batch["response_mask"].tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]
    assert batch["scores"].tolist() == [1.0, 0.0]
    assert batch["finished"].tolist() == [True, False]
    assert batch["tag"] == ["math", "code"]
    # the sampler's log-probs sit under their response tokens, 0 on padding
    assert batch["behaviour_logprobs"].tolist() == [[-0.5, -1.0, 0, 0], [-1, -2, -3, -4]]
