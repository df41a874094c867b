"""Model registry and loading."""
