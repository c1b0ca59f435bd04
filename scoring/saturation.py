"""The caption's sentence on where a table's schemes saturate: past a clipping distance, a bucket
limit or a clamp a scheme no longer tells positions apart, and past its training lengths a learned
table holds untrained rows — so on inputs longer than training, that is the design speaking
(each scheme card's ``saturation``, read from each row's own config; the schemes stay as trained).
"""
from __future__ import annotations

from pathlib import Path

from experiment.run_dir import load_run_config
from models.positional import saturation_note


def saturation_caption(rows: dict[str, Path]) -> str:
    """One sentence naming each row (label -> one of its run folders) whose scheme saturates, and
    where; empty when none does."""
    notes = {label: note for label, run_dir in rows.items() if (note := saturation_note(load_run_config(run_dir).model))}
    if not notes:
        return ""
    return ("Where a scheme saturates (as trained; long inputs go past it): "
            + "; ".join(f"`{label}` {note}" for label, note in sorted(notes.items())) + ".")
