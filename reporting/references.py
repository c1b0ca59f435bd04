"""The report's references: each work it cites, with its year (a reading holds no digit, so the years
live in the bibliography, ``reporting/works.yaml``, and a work's key is its first author's name).
``{{cite KEY ...}}`` in a reading renders ``(Koehn 2004; Clark et al. 2011)``; the
``{{references}}`` directive lists every work cited in the report plus the papers of the registered
schemes (``models.positional.SCHEMES``), by author."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from utils.errors import UserError


@dataclass(frozen=True)
class Work:
    authors: str  # as cited: "Koehn", "Clark et al."
    year: int
    title: str
    venue: str

    @property
    def cited(self) -> str:
        return f"{self.authors} {self.year}"


BIBLIOGRAPHY = Path(__file__).with_name("works.yaml")  # each work under its key, the first author's name


def read_works(path: Path = BIBLIOGRAPHY) -> dict[str, Work]:
    """The bibliography at ``path``, key -> ``Work``, in the file's order; an entry without its four fields is
    a one-line error naming it."""
    tree = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    works = {}
    for key, fields in tree.items():
        try:
            works[key] = Work(**fields)
        except TypeError as err:
            raise UserError(f"{path}: the work '{key}' needs authors, year, title and venue ({err})") from None
    return works


WORKS = read_works()


def scheme_work(paper: str) -> str:
    """A registered scheme card's ``paper``, checked to be a key of the bibliography (every built-in
    card names its work by key); anything else is a one-line error."""
    if paper not in WORKS:
        raise UserError(f"the scheme paper '{paper}' is not a key of the bibliography ({BIBLIOGRAPHY.name}: "
                        f"{', '.join(WORKS)})")
    return paper


def cited_paper(paper: str) -> str:
    """How prose names a scheme card's paper: its entry's ``Authors Year`` for a key of the bibliography,
    a plugin's own text as written (its work is not in the suite's bibliography)."""
    return WORKS[paper].cited if paper in WORKS else paper


def cite(keys: list[str]) -> str:
    """``(Koehn 2004; Clark et al. 2011)`` for ``keys``; an unknown key is a one-line error."""
    unknown = [k for k in keys if k not in WORKS]
    if unknown or not keys:
        raise UserError(f"cite names unknown work '{unknown[0] if unknown else ''}' (known: {', '.join(WORKS)})")
    return "(" + "; ".join(WORKS[k].cited for k in keys) + ")"


def reference_list(keys: list[str]) -> str:
    """A Markdown list of the works ``keys`` (each once), by author then year."""
    chosen = sorted(dict.fromkeys(keys), key=lambda k: (WORKS[k].authors.lower(), WORKS[k].year))
    return "".join(f"- {WORKS[k].authors} ({WORKS[k].year}). {WORKS[k].title}. *{WORKS[k].venue}*.\n" for k in chosen)
