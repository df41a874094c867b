"""Anthropic HH-RLHF pairs (real data from ../shared/data, skipped where it is absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rollcli.config.data_section import DataConfig
from rollcli.data.offline_sets import load_pair_sets, tokenize_pairs

HH = (
    Path(__file__).resolve().parents[3]
    / "shared"
    / "data"
    / "hh-rlhf"
    / "harmless-base-test.jsonl.gz"
)
pytestmark = pytest.mark.skipif(not HH.exists(), reason=f"{HH} is not on this machine")


@pytest.fixture(scope="module")
def pairs():
    data = DataConfig(source="file", train_path=str(HH), val_size=64)
    return load_pair_sets(data, seed=0)


def test_every_hh_row_is_read_and_almost_all_become_pairs(pairs) -> None:
    train, val, skipped = pairs
    assert len(train) + len(val) + skipped == 2312
    assert len(val) == 64 and skipped < 25
    for pair in train[:200]:
        assert pair.prompt[-1]["role"] == "user"
        assert [m["role"] for m in pair.prompt[::2]] == ["user"] * len(pair.prompt[::2])
        assert "\n\nHuman:" not in pair.chosen and "\n\nAssistant:" not in pair.rejected


def test_hh_pairs_tokenize_through_the_chat_template(pairs, tiny_model) -> None:
    from rollcli.strategies.hf_model import load_tokenizer

    tokenizer = load_tokenizer(tiny_model)
    train, _, _ = pairs
    kept, note = tokenize_pairs(tokenizer, train[:300], 256, 128, "training")
    too_long = 300 - len(kept)
    assert len(kept) > 200 and too_long > 0
    assert (
        note
        == f"{too_long} of 300 training pairs over 256 tokens left out (data.max_prompt_tokens)"
    )
    prompt, chosen, rejected = kept[0]
    assert tokenizer.decode(prompt).endswith("<|im_start|>assistant\n")
    assert tokenizer.decode(chosen).endswith("<|im_end|>\n") or len(chosen) == 128
    assert chosen != rejected
