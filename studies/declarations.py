"""A study's stated times read together with its files' history: a family (or the pre-registration, or
the test sets) counts as declared from the first commit whose version of the file holds that section,
so a ``declared:`` time earlier than that commit claims what the history cannot show and is refused
in one line (``check_declared_times``; the tables call it before they write a standing).

Read with ``git``: each commit of the file, oldest first, parsed as YAML (its own sections, not its
``base:``'s: each file's history dates what it states). Outside a git work tree, in a shallow clone
(whose oldest commits are missing, so every section would look younger than it is), or without git,
nothing can be read and nothing is refused; a section not committed yet is not refused either (it is
checked once committed)."""
from __future__ import annotations

import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import yaml

from studies.catalog import Declaration, Study
from utils.errors import ConfigError


@dataclass(frozen=True)
class Commit:
    sha: str
    when: datetime  # the commit time, UTC


def _git(folder: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _sections(text: str) -> set[str]:
    """The dated sections a version of a study file holds (``families.<name>``, ``preregistration``, ``test_sets``)."""
    try:
        tree = yaml.safe_load(text)
    except yaml.YAMLError:
        return set()
    if not isinstance(tree, dict):
        return set()
    families = tree.get("families")
    return {*(f"families.{name}" for name in (families if isinstance(families, dict) else {})),
            *(key for key in ("preregistration", "test_sets") if isinstance(tree.get(key), dict))}


def first_commits(path: Path) -> dict[str, Commit]:
    """For the study file at ``path``, the first commit holding each dated section it has ever held
    ({} where the history cannot be read: module doc)."""
    folder = path.parent
    if _git(folder, "rev-parse", "--is-shallow-repository") != "false\n":
        return {}
    log = _git(folder, "log", "--reverse", "--format=%H %cI", "--", path.name)
    first: dict[str, Commit] = {}
    for line in (log or "").splitlines():
        sha, when = line.split()
        text = _git(folder, "show", f"{sha}:./{path.name}")
        for section in _sections(text or "") - set(first):
            first[section] = Commit(sha, datetime.fromisoformat(when).astimezone(UTC))
    return first


def late_declarations(declarations: tuple[Declaration, ...]) -> list[tuple[Declaration, Commit]]:
    """Each stated time earlier than the first commit of its file that holds its section, with that commit."""
    late, histories = [], {}
    for declaration in declarations:
        if declaration.source is None:
            continue
        if declaration.source not in histories:
            histories[declaration.source] = first_commits(declaration.source)
        commit = histories[declaration.source].get(declaration.key)
        if commit is not None and declaration.when < commit.when:
            late.append((declaration, commit))
    return late


def check_declared_times(study: Study) -> None:
    """Refuse (one line) a study whose file states a time earlier than the commit that first holds it."""
    late = late_declarations(study.declarations)
    if late:
        declaration, commit = late[0]
        raise ConfigError(f"{declaration.source}: '{declaration.key}.declared' {declaration.when:%Y-%m-%d %H:%M:%S} UTC "
                          f"is earlier than the commit that first holds it ({commit.sha[:10]}, "
                          f"{commit.when:%Y-%m-%d %H:%M:%S} UTC): a declaration counts from its commit; state that "
                          "time or a later one")
