"""Worker calls name methods by reference: the Protocols the rollout and the data-parallel
group call through match the worker classes, and a method given as a string is refused."""

from __future__ import annotations

import inspect

import pytest

from rollcli.distributed.calls import Done, get, method_name, submit, wait_any
from rollcli.distributed.data_parallel import TrainRank
from rollcli.evaluation.answer_check import Answerer
from rollcli.rollout.worker_api import EnvHost, InferenceWorker, Scorer
from rollcli.runtime.checkpointer import Stateful
from rollcli.workers.actor_infer import ActorInferWorker
from rollcli.workers.actor_train import ActorTrainWorker
from rollcli.workers.critic import CriticWorker
from rollcli.workers.distill import TeacherWorker
from rollcli.workers.env_worker import EnvWorker
from rollcli.workers.reward import RewardWorker
from rollcli.workers.sft_train import SFTTrainWorker

IMPLEMENTS = [
    (InferenceWorker, ActorInferWorker),
    (EnvHost, EnvWorker),
    (Scorer, RewardWorker),
    (TrainRank, ActorTrainWorker),
    (Stateful, ActorTrainWorker),
    (Stateful, CriticWorker),
    (Answerer, SFTTrainWorker),
    (Answerer, TeacherWorker),
]


def _parameters(fn) -> list[str]:  # noqa: ANN001
    """Its parameters, less the one Ray adds to a class it has made an actor class."""
    return [p for p in inspect.signature(fn).parameters if p != "_ray_trace_ctx"]


def _methods(protocol: type) -> list[str]:
    return [n for n, v in vars(protocol).items() if inspect.isfunction(v) and n[0] != "_"]


@pytest.mark.parametrize(("protocol", "worker"), IMPLEMENTS, ids=lambda c: c.__name__)
def test_each_protocol_method_is_the_workers_with_its_parameters(protocol, worker) -> None:  # noqa: ANN001
    assert _methods(protocol)
    for name in _methods(protocol):
        assert _parameters(getattr(worker, name)) == _parameters(getattr(protocol, name)), name


def test_a_method_named_by_a_string_is_refused() -> None:
    with pytest.raises(TypeError, match="by reference"):
        method_name("generate")
    assert method_name(EnvWorker.step) == "step"


def test_calls_on_plain_objects_run_at_once() -> None:
    class Adder:
        def add(self, a: int, b: int) -> int:
            return a + b

    handle = submit(Adder(), Adder.add, 2, b=3)
    assert isinstance(handle, Done) and wait_any([handle]) == [handle]
    assert get(handle) == 5 and get([handle, submit(Adder(), Adder.add, 1, 1)]) == [5, 2]
