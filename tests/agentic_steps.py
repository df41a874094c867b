"""What an agentic step does to a batch between the rollout and the update, as the pipeline
runs it: the episode source's step term (`set_step_advantages`, in `EpisodeSource`), then
the pipeline's advantage stage (`add_advantages`) with the source's group size."""

from __future__ import annotations

from rollcli.pipelines.rl.advantages import add_advantages
from rollcli.pipelines.rl.episode_batch import set_step_advantages


def agentic_step_advantages(  # noqa: ANN201
    alg,  # noqa: ANN001
    batch,  # noqa: ANN001
    *,
    group_size: int,
    mode: str,
    max_new_tokens: int,
    kl_ctl,  # noqa: ANN001
    running=None,  # noqa: ANN001
    step_weight: float = 1.0,
    step_gamma: float = 0.95,
):
    set_step_advantages(batch, mode, step_weight, step_gamma, alg.norm_std)
    return add_advantages(
        alg,
        batch,
        group_size=group_size,
        max_new_tokens=max_new_tokens,
        kl_ctl=kl_ctl,
        running=running,
    )
