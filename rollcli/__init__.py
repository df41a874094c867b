"""roll: RL post-training of LLMs on Ray."""

__version__ = "0.1.0"
