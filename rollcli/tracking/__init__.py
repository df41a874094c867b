"""Where a run's metrics go besides metrics.jsonl (`run.trackers`): TensorBoard, SwanLab,
W&B, one module each, behind the fan-out in fanout.py; registry.py names them without
importing them."""
