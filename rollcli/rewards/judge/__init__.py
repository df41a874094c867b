"""LLM-as-a-judge rewards: an OpenAI-compatible HTTP endpoint, or a local transformers model."""
