"""The ROLL paper's env variants are settings of the existing envs: LargerSokoban (8x8 rooms,
two boxes) and SokobanDifferentGridVocab (ROLL's other symbol set); FrozenLake's slippery ice
is tests/envs/test_frozenlake.py's, the recipes' settings tests/config/test_val_env.py's."""

from __future__ import annotations

from rollcli.envs import make

# ROLL's grid_lookup of SokobanDifferentGridVocab, by our symbol names
ROLL_VOCAB = {
    "wall": "W", "floor": ".", "target": "G", "box_on_target": "C", "box": "B",
    "player": "A", "player_on_target": "@",
}  # fmt: skip


def test_an_8x8_two_box_room_in_the_other_symbols_is_solved_by_its_moves() -> None:
    env = make("sokoban", dim_room=[8, 8], num_boxes=2, symbols=ROLL_VOCAB, max_steps=500)
    for seed in range(5):
        obs, _ = env.reset(seed=seed)
        rows = obs.strip().split("\n")[-8:]  # the grid is the observation's last 8 lines
        assert [len(r) for r in rows] == [8] * 8
        cells = set("".join(rows))
        assert cells <= set("W.GCBA@") and {"W", "B"} <= cells
        assert sum(r.count("B") + r.count("C") for r in rows) == 2  # two boxes
        assert not cells & set("#_OX√PS")  # none of the default symbols
        assert "W wall" in env.instructions and "A player" in env.instructions
        info = {}
        for move in env.solution:  # the parser reads the moves whatever the grid's glyphs
            _, _, terminated, _, info = env.step(f"<answer>{move}</answer>")
            assert info["action_is_valid"]
            if terminated:
                break
        assert info["success"] and info["boxes_on_target"] == 2
