"""The RL pipeline (`pipeline: rlvr` and `pipeline: agentic`): one step over two rollout
sources. `pipeline.py` holds the step; `prompts.py` (prompts, sampled answers, rule rewards)
and `episodes.py` (multi-turn episodes in environments) are the sources."""
