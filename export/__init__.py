"""``python -m export``: a trained run in another inference engine's format (a command package)."""
