"""A scheme's card: the facts about a positional encoding that are not its arithmetic — what it
is, its paper, where the suite departs from it, how an export writes it, what its picture plots,
and what it does in cross-attention — as one frozen value beside its math (the class keeps the math
and kernel hooks). docs/schemes.md, the report's scheme list, the CTranslate2 export, the pictures
and the config's cross-attention rule read it."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, get_args

CrossAttention = Literal["acts", "absent", "refused"]
# how CTranslate2's Transformer spec expresses a scheme (search.ctranslate2); "base": as the scheme it evaluates as
ExportForm = Literal["embeddings", "rotary", "relative_position", "relative_attention_bias", "base"]
# the groups a figure or table of every scheme draws them in: where they act, or the schemes of 2024-25 apart
Kind = Literal["absolute", "rotary", "relative", "2024–25"]
KINDS: tuple[str, ...] = get_args(Kind)


@dataclass(frozen=True)
class SchemeCard:
    """title: how prose names it ("RoPE", "learned absolute positions"; "": its registered name in code
    font), the subject or object of the report's claims; summary: one line of what the scheme is;
    paper: the work it follows, by its key in the suite's bibliography (``reporting/works.yaml``, the first
    author's name: ``vaswani``; a plugin, whose work is not there, writes ``Authors Year``); deviation:
    where the suite departs from the paper ("" for nowhere); acts_on: where it acts when its hooks do
    not say (None: read off the hooks it overrides); export_form: how CTranslate2's
    Transformer spec expresses it (``embeddings``, ``rotary``, ``relative_position``, ``relative_attention_bias``, ``base`` — it evaluates as another
    scheme; None: it cannot be exported); profile_label: what its distance profile plots (None: the
    hook's default label); cross_attention: ``acts`` (its terms apply there when
    ``model.positional.cross_attention`` is true), ``absent`` (it has nothing to do there: it only
    adds to the embeddings) or ``refused`` (defined for self-attention: the config must keep it off);
    reductions: the published schemes it (or one of its options) stands for, with the derivation
    (docs/schemes.md lists them; "" for none); kind: the group figures and tables draw it in
    (``KINDS``; None: read off where it acts, ``models.positional.scheme_kind``).

    The facts that depend on a model's config are small functions of it (``cfg``: the ``ModelConfig``):
    saturation: where the scheme stops telling positions apart, or leaves them untrained — a phrase
    for a long-input table's caption ("relative distances clip at ±16"; None: it does neither);
    evaluates_as: the registered scheme whose arithmetic it does at evaluation (None: its own; a
    scheme that names one holds that scheme's module as ``base``). profile: its distance profile
    ``(module, max_distance, query) -> DistanceProfile`` where the hooks cannot give it (a
    content-dependent table; None: read off the hooks, ``models.positional.profile``).
    scales_frequencies: it rotates by frequencies that test-time scaling (``model.length_scaling.rotary``:
    PI, NTK, YaRN) rescales; the config refuses that setting for the others. relative: its attention
    reads positions only through their differences (or not at all), so shifting every position by one
    constant changes nothing (``contract.kit``'s shift check holds it to that)."""

    title: str = ""
    summary: str = ""
    paper: str = ""
    deviation: str = ""
    acts_on: str | None = None
    export_form: str | None = None
    profile_label: str | None = None
    cross_attention: CrossAttention = "acts"
    reductions: str = ""
    saturation: Callable[[Any], str] | None = None
    evaluates_as: Callable[[Any], str] | None = None
    profile: Callable[[Any, int, int], Any] | None = None
    scales_frequencies: bool = False
    relative: bool = False
    kind: Kind | None = None

    def __post_init__(self) -> None:
        """The facts with a closed set of values hold one of them (a plugin's card is checked here too)."""
        for name, allowed, value in (("export_form", get_args(ExportForm), self.export_form),
                                     ("cross_attention", get_args(CrossAttention), self.cross_attention),
                                     ("kind", KINDS, self.kind)):
            if value is not None and value not in allowed:
                raise ValueError(f"SchemeCard {name}={value!r}: one of {', '.join(map(repr, allowed))}"
                                 f"{'' if name == 'cross_attention' else ' or None'}")
