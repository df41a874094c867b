"""Public models people post-train, with numbers from their config.json (planning only)."""

from __future__ import annotations

CATALOG: list = []
