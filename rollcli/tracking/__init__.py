"""Metric trackers beyond metrics.jsonl (TensorBoard)."""
