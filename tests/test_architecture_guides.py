"""ARCHITECTURE.md's guides ("Adding a scheme", "a study", "a data source", "a metric", "a table", "a claim")
walked: every file they name exists, and each edit they ask for names the file and the name that
the change needs (the registry, table or list a new entry goes into), defined at the top level of
that file. A registry moved or renamed without its guide fails here."""
from __future__ import annotations

import ast
import re

import pytest

from tests.conftest import ROOT

GUIDE_TITLES = ["Adding a scheme", "Adding a study", "Adding a data source", "Adding a metric", "Adding a table",
                "Adding a claim to the report"]

# guide -> (file, name) of each edit a new entry needs (and the type it fills), written from the code as it is
EDITS = {
    "Adding a scheme": [("models/positional/registry.py", "SCHEMES"), ("models/positional/card.py", "SchemeCard"),
                        ("reporting/works.yaml", None), ("tests/reference.py", "REFERENCES"),
                        ("tests/models/positional/test_scheme_contracts.py", "WHERE_IT_ACTS")],
    "Adding a study": [("studies/catalog.py", "StudyDeclaration"), ("studies/catalog.py", "ReportDeclaration"),
                       ("reporting/sources.py", "STUDIES")],
    "Adding a data source": [("data/corpus.py", "SOURCES")],
    "Adding a metric": [("scoring/table_metrics.py", "METRICS")],
    "Adding a table": [("studies/table_kinds.py", "TESTSET_TABLES"), ("studies/table_kinds.py", "STUDY_TABLES")],
    "Adding a claim to the report": [("reporting/comparatives.py", None), ("studies/standing.py", "family_standing")],
}


def guides() -> dict[str, str]:
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    sections = re.split(r"^#{2,3} ", text, flags=re.M)
    found = {s.split("\n", 1)[0].strip(): s.split("\n", 1)[1] for s in sections[1:]}
    return {title: found[title] for title in GUIDE_TITLES if title in found}


def top_level_names(path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_every_guide_is_there():
    assert list(guides()) == GUIDE_TITLES


PACKAGES = ("analysis", "bench", "contract", "data", "experiment", "export", "models", "nmt", "reporting", "scoring",
            "search", "studies", "tokenizer", "training", "utils")


NOT_MODULES = {"nmt.schemes"}  # dotted names that are no module: the entry-point group of installed schemes


def resolve_dotted(dotted: str) -> bool:
    """``pkg.module[.name...]`` names a module file of the checkout and, after it, a name at its top."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:cut])
        file = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if file.is_file():
            return cut == len(parts) or parts[cut] in top_level_names(file)
    return False


@pytest.mark.parametrize("title", GUIDE_TITLES)
def test_every_file_and_module_a_guide_names_exists(title):
    text = guides()[title]
    paths = {p for p in re.findall(r"`([\w./-]+\.(?:py|md|yaml|toml))`", text) if "<" not in p}
    paths |= {p.split("#")[0] for p in re.findall(r"\]\(([\w./-]+\.md)(?:#[\w-]+)?\)", text)}
    dotted = {d for d in re.findall(r"`([a-z_]+(?:\.\w+)+)`", text)
              if d.split(".")[0] in PACKAGES and d not in NOT_MODULES}
    assert paths or dotted, f"{title}: names no file or module"
    missing = [p for p in paths if not (ROOT / p).exists() and not (ROOT / "docs" / p).exists()]
    assert not missing, f"{title} names files that are not there: {missing}"
    unresolved = sorted(d for d in dotted if not resolve_dotted(d))
    assert not unresolved, f"{title} names modules or names that are not there: {unresolved}"


@pytest.mark.parametrize("title", GUIDE_TITLES)
def test_each_edit_is_named_in_its_guide_and_defined_where_it_says(title):
    text = guides()[title]
    for path, name in EDITS[title]:
        file = ROOT / path
        assert file.is_file(), path
        module = path.removesuffix(".py").replace("/", ".")
        assert path in text or f"`{module}" in text, f"{title}: does not name {path}"
        if name is not None:
            assert re.search(rf"\b{name}\b", text), f"{title}: does not name {name}"
            assert name in top_level_names(file), f"{name} is no longer defined at the top of {path}"


def test_a_new_scheme_reaches_every_list_the_guide_names():
    """The scheme guide's lists are keyed by the registry's names: the same set in each."""
    from models.positional import SCHEMES
    from reporting.references import WORKS
    from tests.models.positional.test_scheme_contracts import WHERE_IT_ACTS
    from tests.reference import REFERENCES

    assert set(REFERENCES) == set(SCHEMES) == set(WHERE_IT_ACTS)
    # a card's paper is the key of its entry in WORKS (the paper's first author: vaswani)
    missing = {name: s.card.paper for name, s in SCHEMES.items() if s.card.paper not in WORKS}
    assert not missing, f"papers without an entry in the bibliography (reporting/works.yaml): {missing}"
