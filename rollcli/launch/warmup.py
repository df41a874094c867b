"""An agentic run's warm-up: SFT on scripted episodes, then RL from the SFT model.

With `warmup:` in an agentic recipe, `roll train` first plays `warmup.episodes` episodes
of `warmup.policy` on training seeds (exactly what `roll data episodes` writes, in the RL
chat format), then runs the sft pipeline on them as a sub-run in `RUN/warmup/` (its own
recipe, metrics, events and checkpoints, as `roll train sft data.path=FILE` would), and
starts RL from the sub-run's final checkpoint. A resumed run finishes an unfinished warm-up
first and reuses a finished one; the episodes file is written once. The launcher runs the
sub-run (`launch.py`); this module only builds what it runs.
"""

from __future__ import annotations

from pathlib import Path

from rollcli.config.errors import ConfigError
from rollcli.config.recipe import AgenticRecipe, SFTRecipe
from rollcli.runs.checkpoint import latest_checkpoint
from rollcli.runs.run_dir import RunDir
from rollcli.runtime.display_protocol import Display

WARMUP_RUN = "warmup"  # the sub-run's folder inside the RL run's folder
EPISODES_FILE = "episodes.jsonl"


def warmup_recipe(cfg: AgenticRecipe, episodes: Path, runs_dir: Path) -> SFTRecipe:
    """The sft recipe of `cfg`'s warm-up, training on the conversations in `episodes`, its
    run in `runs_dir` (the RL run's folder)."""
    warmup = cfg.warmup
    assert warmup is not None
    return SFTRecipe.model_validate(
        {
            "name": f"{cfg.name}-warmup",
            "description": f"warm-up of {cfg.name}: SFT on {warmup.policy} episodes",
            "pipeline": "sft",
            "model": cfg.model,
            "seed": cfg.seed,
            "data": {
                "path": str(episodes),
                "val_size": warmup.val_episodes,
            },
            "sft": {
                "batch_size": warmup.batch_size,
                # an episode never outgrows the RL run's context
                "max_tokens": cfg.agentic.max_context_tokens,
                "packing": True,
                "val_generate": False,  # no reward fn for conversations; validation is the loss
            },
            "train": {
                "steps": warmup.steps,
                "lr": warmup.lr,
                "micro_batch_size": warmup.micro_batch_size,
                "micro_batch_tokens": cfg.train.micro_batch_tokens,
                "strategy": cfg.train.strategy,
                "gradient_checkpointing": cfg.train.gradient_checkpointing,
            },
            "resources": cfg.resources.model_dump(),
            "run": {
                "runs_dir": str(runs_dir),
                "run_id": WARMUP_RUN,
                "eval_every": 0,  # validate at the start and the end
                "save_every": 0,
                "trackers": list(cfg.run.trackers),
                "peak_flops": cfg.run.peak_flops,
            },
        }
    )


def warmup_episodes(cfg: AgenticRecipe, folder: Path, run: RunDir, display: Display) -> Path:
    """The warm-up's conversations: `warmup.data`, else the episodes file in `folder`,
    played once (a resumed warm-up reuses it)."""
    assert cfg.warmup is not None
    if cfg.warmup.data is not None:
        return Path(cfg.warmup.data)
    episodes = folder / EPISODES_FILE
    if not episodes.exists():
        from rollcli.launch.scripted_episodes import write_episodes

        display.phase(f"warm-up: playing {cfg.warmup.episodes} {cfg.warmup.policy} episodes")
        write_episodes(
            cfg, episodes, policy=cfg.warmup.policy, n=cfg.warmup.episodes, seed=0,
            on_progress=display.generation,
        )  # fmt: skip
        run.log_event(f"warm-up: wrote {cfg.warmup.episodes} {cfg.warmup.policy} episodes")
    return episodes


def warmup_checkpoint(folder: Path, run: RunDir) -> str:
    """The finished warm-up's last checkpoint: the model RL starts from."""
    checkpoint = latest_checkpoint(folder / "checkpoints")
    if checkpoint is None:  # a finished sft run always saves its last step
        raise RuntimeError(f"the warm-up in {folder} finished without a checkpoint")
    run.log_event(f"warm-up done: RL starts from {checkpoint}")
    return str(checkpoint.resolve())


def check_warmup(cfg: AgenticRecipe) -> None:
    """A warm-up that can run: its data file exists, or its policy can play the recipe's
    env (an expert must solve the tasks). Refused before anything starts, naming the keys
    that change it."""
    warmup = cfg.warmup
    if warmup is None:
        return
    alternatives = (
        "set warmup=null (RL from the model as it is) or warmup.data=FILE (your own "
        "conversations in the RL chat format)"
    )
    if warmup.data is not None:
        if not Path(warmup.data).is_file():
            raise ConfigError(
                f"warmup.data: no file {warmup.data!r}; give one, or set warmup=null (RL "
                "from the model as it is)"
            )
        return
    if warmup.policy != "expert":
        return
    from rollcli.envs.registry import build_env
    from rollcli.rollout.agentic_setup import env_kwargs
    from rollcli.rollout.episode_scheduler import has_expert

    try:
        env = build_env(cfg.agentic.env, env_kwargs(cfg.agentic))
    except (TypeError, ValueError) as exc:  # the env's own refusal of its settings
        raise ConfigError(f"agentic.env_kwargs: {exc}") from None
    if not has_expert(env):
        raise ConfigError(
            f"warmup.policy expert: environment {cfg.agentic.env!r} has no expert to play the "
            f"warm-up; {alternatives}, or warmup.policy=random"
        )
    env.reset(seed=0)
    try:
        env.expert_reply() if hasattr(env, "expert_reply") else env.expert_action()
    except ValueError as exc:
        raise ConfigError(
            f"warmup.policy expert: {exc}, so the warm-up cannot play this recipe's tasks; "
            f"{alternatives}"
        ) from None
