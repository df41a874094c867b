"""Data: the batch type, padding, prompt sources."""
