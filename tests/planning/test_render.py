from rich.console import Console

from rollcli.models.registry import get_model_spec
from rollcli.planning import PlanInput, RoleRequest, gpu_memory, make_plan
from rollcli.planning.render import render_plan


def _text(plan) -> str:
    console = Console(width=160, record=True, color_system=None)
    console.print(render_plan(plan))
    return console.export_text()


def test_render_fitting_plan():
    roles = [
        RoleRequest("actor_train", "0-3", zero_stage=3),
        RoleRequest("actor_infer", "4-7", gpu_memory_utilization=0.9),
    ]
    plan = make_plan(
        PlanInput(get_model_spec("qwen2.5-7b"), 8, gpu_memory_bytes=gpu_memory("h100"), roles=roles)
    )
    text = _text(plan)
    assert "GPU 0-3" in text and "GPU 4-7" in text
    assert "deepspeed zero3 dp=4" in text
    assert "fits: peak" in text


def test_render_advice():
    roles = [RoleRequest("actor_train", "0", seq_len=4096)]
    plan = make_plan(
        PlanInput(
            get_model_spec("qwen2.5-72b"), 1, gpu_memory_bytes=gpu_memory("h100"), roles=roles
        )
    )
    text = _text(plan)
    assert "does not fit" in text
    assert "advice:" in text and "1. " in text
