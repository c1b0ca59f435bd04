"""A scheme's card: the facts about a positional encoding that are not its arithmetic — what it
is, its paper, where the suite departs from it, how an export writes it, what its picture plots,
and what it does in cross-attention — as one frozen value beside its math (the class keeps the math
and kernel hooks). docs/schemes.md, the report's scheme list, the CTranslate2 export, the pictures
and the config's cross-attention rule read it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

CrossAttention = Literal["acts", "absent", "refused"]


@dataclass(frozen=True)
class SchemeCard:
    """summary: one line of what the scheme is; paper: the work it follows (``Authors Year``, the
    report's references resolve it); deviation: where the suite departs from the paper ("" for
    nowhere); acts_on: where it acts when its hooks do not say (None: read off the hooks it
    overrides); export_form: how CTranslate2's Transformer spec expresses it (``embeddings``,
    ``rotary``, ``relative_position``, ``relative_attention_bias``, ``base`` — it evaluates as another
    scheme; None: it cannot be exported); profile_label: what its distance profile plots (None: the
    hook's default label); cross_attention: ``acts`` (its terms apply there when
    ``model.positional.cross_attention`` is true), ``absent`` (it has nothing to do there: it only
    adds to the embeddings) or ``refused`` (defined for self-attention: the config must keep it off)."""

    summary: str = ""
    paper: str = ""
    deviation: str = ""
    acts_on: str | None = None
    export_form: str | None = None
    profile_label: str | None = None
    cross_attention: CrossAttention = "acts"
