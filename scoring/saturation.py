"""The caption's sentence on where a table's schemes saturate: past a clipping distance, a bucket
limit or a clamp a scheme no longer tells positions apart, and past its training lengths a learned
table holds untrained rows — so on inputs longer than training, that is the design speaking
(each scheme card's ``saturation``, read from each row's own config; the schemes stay as trained).
"""
from __future__ import annotations

from models.positional import saturation_note
from scoring.loaded import LoadedRun


def saturation_caption(rows: dict[str, LoadedRun]) -> str:
    """One sentence naming each row (label -> one of its runs) whose scheme saturates, and where; empty
    when none does."""
    notes = {label: note for label, run in rows.items() if (note := saturation_note(run.config.model))}
    if not notes:
        return ""
    return ("Where a scheme saturates (as trained; long inputs go past it): "
            + "; ".join(f"`{label}` {note}" for label, note in sorted(notes.items())) + ".")
