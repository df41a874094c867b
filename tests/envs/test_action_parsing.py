"""Parsing a model's reply into an action name."""

from __future__ import annotations

import pytest

from rollcli.envs.action_parsing import ParsedAction, parse_action

MOVES = ["Up", "Down", "Left", "Right"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<answer>Up</answer>", "Up"),
        ("<answer>up</answer>", "Up"),
        ("<answer>UP</answer>", "Up"),
        ("<ANSWER> Left </ANSWER>", "Left"),
        ("<answer>\n  right.\n</answer>", "Right"),
        ("<answer>'Down'</answer>", "Down"),
        ("<answer>**Down**!</answer>", "Down"),
        ("<answer>[Left]</answer>", "Left"),
        ("thinking <answer>Up</answer> wait, better <answer>Down</answer>", "Down"),
        ("<think>maybe <answer>Up</answer>?</think>\n<answer>Right</answer>", "Right"),
    ],
)
def test_valid_answers(text: str, expected: str) -> None:
    assert parse_action(text, MOVES) == ParsedAction(expected, True, "ok")


@pytest.mark.parametrize(
    ("text", "reason_part"),
    [
        ("Up", "no answer"),
        ("<answer>Up", "no answer"),
        ("<answer></answer>", "empty answer"),
        ("<answer> ... </answer>", "empty answer"),
        ("<answer>jump</answer>", "unknown action 'jump'"),
        ("<answer>Up Left</answer>", "unknown action"),
        ("<answer>Upward</answer>", "unknown action"),
        ("<answer>Up</answer> then <answer>fly</answer>", "unknown action 'fly'"),
    ],
)
def test_invalid_answers(text: str, reason_part: str) -> None:
    parsed = parse_action(text, MOVES)
    assert parsed.action is None and parsed.valid is False
    assert reason_part in parsed.reason


def test_non_text_is_invalid() -> None:
    parsed = parse_action(None, MOVES)  # type: ignore[arg-type]
    assert not parsed.valid and "expected text" in parsed.reason


def test_custom_pattern_uses_the_last_match_and_its_first_group() -> None:
    text = "Action: up\nAction: left"
    assert parse_action(text, MOVES, pattern=r"action:\s*(\w+)").action == "Left"
    # Without a group, the whole match is the answer.
    assert parse_action("go Down now", MOVES, pattern=r"down|up").action == "Down"
    assert parse_action("go now", MOVES, pattern=r"down|up").valid is False


def test_no_pattern_takes_the_whole_reply() -> None:
    assert parse_action("  right  ", MOVES, pattern=None).action == "Right"
    assert parse_action("<answer>right</answer>", MOVES, pattern=None).valid is False


def test_multi_word_action_names_match_with_any_spacing() -> None:
    assert parse_action("<answer>no   OP</answer>", ["No op"]).action == "No op"
