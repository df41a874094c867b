"""`spaced_cells=True`: FrozenLake's and Sokoban's grids with a space between cells, so a
BPE tokenizer cannot merge runs of cells (SmolLM2 reads ``P__`` as ``P`` + ``__``)."""

from __future__ import annotations

from rollcli.envs.frozenlake import FrozenLakeEnv
from rollcli.envs.sokoban.env import SokobanEnv
from rollcli.envs.symbols import grid_text, grid_text_length

SOKOBAN = "#####\n#P_O#\n#_X_#\n#####"  # player, floor, target, box (the default symbols)


def test_frozenlake_spaced_grid_is_the_plain_grid_with_spaces() -> None:
    plain = FrozenLakeEnv(desc=["SFH", "FFF", "HFG"])
    spaced = FrozenLakeEnv(desc=["SFH", "FFF", "HFG"], spaced_cells=True)
    obs, _ = spaced.reset(seed=0)
    assert plain.reset(seed=0)[0] == "P_O\n___\nO_G"
    assert obs == "P _ O\n_ _ _\nO _ G"
    assert spaced.observation_space.contains(obs)
    obs, *_ = spaced.step("<answer>Down</answer>")
    assert obs.splitlines()[-3:] == ["_ _ O", "P _ _", "O _ G"]
    assert spaced.observation_space.contains(obs)


def test_sokoban_spaced_grid_and_its_moves() -> None:
    env = SokobanEnv(layout=SOKOBAN, spaced_cells=True)
    obs, _ = env.reset(seed=0)
    assert obs == "# # # # #\n# P _ O #\n# _ X _ #\n# # # # #"
    assert env.observation_space.contains(obs)
    assert SokobanEnv(layout=SOKOBAN).reset(seed=0)[0] == SOKOBAN  # the default is unchanged


def test_grid_text_length_counts_the_separators() -> None:
    for rows, cols in [(1, 1), (3, 3), (6, 7)]:
        lines = ["x" * cols] * rows
        for spaced in (False, True):
            assert len(grid_text(lines, spaced)) == grid_text_length(rows, cols, spaced)
