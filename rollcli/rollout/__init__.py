"""Rollout: generating for a step's prompts (RLVR) and playing episodes (agentic).

The pipelines (`rollcli.pipelines`) call this package with flat arguments: it never reads
a recipe. Import from the module that holds each concept (nothing is re-exported here):

| module | holds |
| --- | --- |
| `prompt_scheduler` | `RolloutScheduler`, `PendingRollout`: a step's prompt groups as generation requests, scored as they end, dynamic sampling, async steps |
| `rows` | `GenerationRow`, `ScoredRequest`: what a request brings back from actor_infer, typed at the one place it arrives |
| `result` | `RolloutResult` (a step's batch, rows and metrics), `build_batch` (the training layout) |
| `generate` | plain generation on every actor_infer rank and scoring on reward (validation) |
| `episode_scheduler` | `play_episodes` and its policies: many episodes, env workers and the model at once (Ray actors or plain objects) |
| `episode` | `Episode`, `EpisodeSpec`, `Limits`: one multi-turn episode as it is played |
| `chat_turns` | `TurnFormat`: multi-turn chat prompts as token ids, never re-tokenized |
"""
