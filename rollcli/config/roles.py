"""The names of the roles a run's workers play, one constant each, and the groups of them
the code asks about.

A role is named here and nowhere else: config, the planner, the pipelines and the launcher
compare a role with these constants (`role == ACTOR_INFER`), never with a string literal
(tests/config/test_name_literals.py); `planning/role_table.py` gives each role its worker
class, its resources and what it holds. Which roles a recipe runs is its pipeline's
(`pipeline_spec.roles_run`).

Imports nothing from roll.
"""

from __future__ import annotations

from typing import Final

ACTOR_TRAIN: Final = "actor_train"  # trains the policy
ACTOR_INFER: Final = "actor_infer"  # samples from it: the rollout engine
REFERENCE: Final = "reference"  # the frozen reference policy's log-probs (the KL penalty)
CRITIC: Final = "critic"  # the value model (GAE)
TEACHER: Final = "teacher"  # distillation's teacher
REWARD: Final = "reward"  # scores rlvr's samples
ENV: Final = "env"  # agentic's training environments
ENV_VAL: Final = "env_val"  # its validation environments
ENV_CROSS: Final = "env_cross"  # a second validation environment (agentic.val_env)

ROLE_NAMES: tuple[str, ...] = (
    ACTOR_TRAIN,
    ACTOR_INFER,
    REFERENCE,
    CRITIC,
    TEACHER,
    REWARD,
    ENV,
    ENV_VAL,
    ENV_CROSS,
)
# the roles whose forwards score the training sequences (the shared-prefix layout packs a
# group's samples in one row for them)
SEQUENCE_ROLES = (ACTOR_TRAIN, REFERENCE, CRITIC)
# the roles holding a frozen copy of a model for forwards only
FORWARD_ROLES = (REFERENCE, TEACHER)
# validation environments, placed with the training ones (`devices.env`)
VALIDATION_ENVS = (ENV_VAL, ENV_CROSS)
