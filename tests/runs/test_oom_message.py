"""A worker Ray kills for memory ends the run with one line that says what to lower."""

from __future__ import annotations

from rollcli.distributed.cluster import out_of_memory_message

# the tail of a real Ray 2.60 OutOfMemoryError (agentic-sokoban, micro-batch of 8 long rows)
RAY_TEXT = (
    "5 worker(s) were killed due to the node running low on memory.\n"
    "Top 10 memory users: PID\tMEM(GB)\tCOMMAND\n"
    "30497\t11.87\tray::ActorTrainWorker.train_step\n"
    "26665\t4.14\tray::ActorTrainWorker.train_step\n"
    "Refer to the documentation on how to address the out of memory issue: https://docs.ray.io"
)


def test_names_the_biggest_process_and_the_knobs() -> None:
    msg = out_of_memory_message(RuntimeError(RAY_TEXT), step=1)
    assert msg.startswith(
        "a worker ran out of memory in step 1 (ActorTrainWorker.train_step held 11.87 GB)"
    )
    assert "train.micro_batch_tokens" in msg and "roll resume" in msg
    assert "\n" not in msg and "docs.ray.io" not in msg


def test_without_a_process_table_it_still_says_what_to_lower() -> None:
    msg = out_of_memory_message(RuntimeError("killed"), step=3)
    assert msg.startswith("a worker ran out of memory in step 3; lower")
