from __future__ import annotations

import doctest

import pytest
import torch

import rollcli.data.batch
import rollcli.data.sampler
from rollcli.data.batch import Batch
from rollcli.data.padding import pad_left, position_ids_from_mask, rollout_tensors
from rollcli.data.sampler import PromptSampler


def test_doctests() -> None:
    for module in (rollcli.data.batch, rollcli.data.sampler):
        assert doctest.testmod(module).failed == 0


def test_batch_select_split_concat_keep_rows_aligned() -> None:
    b = Batch({"x": torch.arange(5), "m": torch.ones(5, 3)}, {"tag": list("abcde")}, {"step": 7})
    picked = b.select([4, 0])
    assert (
        picked["x"].tolist() == [4, 0] and picked["tag"] == ["e", "a"] and picked.meta["step"] == 7
    )
    parts = b.split(2)
    assert [len(p) for p in parts] == [2, 2, 1]
    assert Batch.concat(parts)["tag"] == list("abcde")
    assert [len(p) for p in b.chunk(3)] == [2, 2, 1]


def test_batch_rejects_misaligned_entries() -> None:
    with pytest.raises(ValueError, match="disagree on the batch size"):
        Batch({"x": torch.zeros(3)}, {"tag": ["a"]})
    b = Batch({"x": torch.zeros(3)})
    with pytest.raises(ValueError, match="has 2 rows, the batch has 3"):
        b.set("y", torch.zeros(2))


def test_concat_pads_2d_tensors_of_different_widths() -> None:
    a = Batch({"r": torch.ones(1, 2)})
    b = Batch({"r": torch.ones(1, 4)})
    assert Batch.concat([a, b])["r"].tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]


def test_rollout_layout_puts_every_response_at_the_prompt_width() -> None:
    t = rollout_tensors([[5, 6, 7], [8]], [[1, 2], [3, 4, 9]], pad_id=0)
    assert t["input_ids"].tolist() == [[5, 6, 7, 1, 2, 0], [0, 0, 8, 3, 4, 9]]
    assert t["attention_mask"].tolist() == [[1, 1, 1, 1, 1, 0], [0, 0, 1, 1, 1, 1]]
    assert t["response_mask"].tolist() == [[1, 1, 0], [1, 1, 1]]
    assert t["prompt_width"].tolist() == [3, 3]
    # positions skip left padding: the second row starts at 0 on its first real token
    assert t["position_ids"][1].tolist() == [0, 0, 0, 1, 2, 3]


def test_pad_left_and_positions() -> None:
    ids, mask = pad_left([[1], [2, 3]], pad_id=9)
    assert ids.tolist() == [[9, 1], [2, 3]]
    assert position_ids_from_mask(mask).tolist() == [[0, 0], [0, 1]]


def test_sampler_covers_every_prompt_once_per_epoch_and_resumes() -> None:
    s = PromptSampler(10, seed=3)
    first_epoch = s.next_indices(10)
    assert sorted(first_epoch) == list(range(10))
    second = s.next_indices(4)
    resumed = PromptSampler(10, seed=3)
    resumed.load_state_dict({"size": 10, "seed": 3, "epoch": 1, "position": 0})
    assert resumed.next_indices(4) == second
    assert second != first_epoch[:4]  # each epoch is reshuffled
