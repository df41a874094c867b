"""What the hf engine's decode keeps beside its samples: an MoE model's routing record of a
decode call (`DecodeRoutes`), and whether the decode runs over a static cache
(`static_choice`: not for MoE models, whose routing is recorded each step).
"""

from __future__ import annotations

import torch

from rollcli.models.moe_routing import unset_like
from rollcli.strategies.sampling import Generation


class DecodeRoutes:
    """An MoE engine's record of one decode call: each sample's prompt routing (shared by a
    prompt's `n` samples) and the experts of each token fed after it, joined into
    `Generation.routed_experts` when the sample ends. Does nothing for a dense model."""

    def __init__(self, prompts: list[torch.Tensor] | None, n: int, samples: int) -> None:
        self.prompts, self.n = prompts, n
        self.steps: list[list[torch.Tensor]] = [[] for _ in range(samples)]

    def step(self, alive: list[int], recorded: torch.Tensor | None) -> None:
        """`recorded`: a decode step's `[rows, 1, layers, k]`, row r being sample alive[r]."""
        if recorded is None:
            return
        for row, j in enumerate(alive):
            self.steps[j].append(recorded[row, 0])

    def fed(self, j: int) -> torch.Tensor | None:
        """Sample j's experts at every token fed so far (its prompt's, then its reply's)."""
        if self.prompts is None:
            return None
        prompt = self.prompts[j // self.n]
        return torch.cat([prompt, *(s[None] for s in self.steps[j])])

    def close(self, j: int, gen: Generation) -> None:
        """The sample ended: its last token was never fed (UNSET)."""
        fed = self.fed(j)
        if fed is not None:
            gen.routed_experts = torch.cat([fed, unset_like(fed, 1)])


def static_choice(model: torch.nn.Module, wanted: bool | None) -> tuple[bool, str | None]:
    """(whether the engine decodes with a static cache, why not where it does not)."""
    if wanted is False:
        return False, "static_decode=False"
    from rollcli.models.moe_routing import moe_routers

    if moe_routers(model):  # the CUDA graphs would not run the routing record's hooks
        if wanted:
            raise ValueError(
                "static_decode=True: an MoE model's routing is recorded each decode step, "
                "which a static cache's CUDA graphs cannot do; leave static_decode unset"
            )
        return False, "an MoE model (its routing is recorded each step)"
    if wanted is None and next(model.parameters()).device.type != "cuda":
        return False, "not on a CUDA device"
    from rollcli.strategies.hf_static_decode import static_refusal

    refusal = static_refusal(model)
    if refusal is not None and wanted:
        raise ValueError(
            f"static_decode=True: this model cannot decode with a static cache: {refusal}"
        )
    return refusal is None, refusal
