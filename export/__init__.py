"""``python -m nmt export``: a trained run in another inference engine's format (a command package)."""
