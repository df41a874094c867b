"""`--model RUN_ID`: a run id (or run folder) as a model is its newest complete checkpoint."""

from __future__ import annotations

import pytest

from rollcli.config.errors import ConfigError
from rollcli.runs.checkpoint import MARKER, run_checkpoint


def test_a_run_id_or_folder_gives_its_newest_complete_checkpoint(tmp_path) -> None:
    run = tmp_path / "runs" / "rlvr-math-1"
    (run / "checkpoints" / "step-5").mkdir(parents=True)
    (run / "checkpoints" / "step-5" / MARKER).touch()
    (run / "checkpoints" / "step-10").mkdir()  # being written: no marker yet
    (run / "recipe.yaml").write_text("name: rlvr-math\n")
    newest = (run / "checkpoints" / "step-5").resolve()
    assert run_checkpoint("rlvr-math-1", tmp_path / "runs") == newest
    assert run_checkpoint(str(run), tmp_path / "elsewhere") == newest
    assert run_checkpoint("smollm2-135m", tmp_path / "runs") is None  # not a run


def test_a_run_without_a_checkpoint_is_refused_in_one_line(tmp_path) -> None:
    run = tmp_path / "young"
    run.mkdir()
    (run / "recipe.yaml").write_text("name: rlvr-math\n")
    with pytest.raises(ConfigError, match="run 'young' has no complete checkpoint yet") as err:
        run_checkpoint("young", tmp_path)
    assert "\n" not in str(err.value)
