"""Dynamic-sampling rounds are padded differently; merging must rebuild one layout."""

from __future__ import annotations

from rollcli.pipelines.rollout import build_batch, merge_rollouts


def test_merge_repads_rounds_of_different_widths() -> None:
    a = build_batch([[5, 6, 7]], [[1, 2]], [1.0], [True], pad_id=0, fields={"tag": ["math"]})
    b = build_batch([[8]], [[3, 4, 9, 9]], [0.0], [False], pad_id=0, fields={"tag": ["code"]})
    merged = merge_rollouts([a, b], pad_id=0)
    # one prompt width (3) for every row, responses right-padded to the longest (4)
    assert merged["input_ids"].tolist() == [[5, 6, 7, 1, 2, 0, 0], [0, 0, 8, 3, 4, 9, 9]]
    assert merged["prompt_width"].tolist() == [3, 3]
    assert merged["response_mask"].tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]
    assert merged["scores"].tolist() == [1.0, 0.0]
    assert merged["finished"].tolist() == [True, False]
    assert merged["tag"] == ["math", "code"]
