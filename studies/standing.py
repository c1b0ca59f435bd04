"""Whether a study's family of hypotheses is confirmatory or exploratory, and which of its declared
pairs have runs to test: the sentences a family's caption and the report's claims carry. A family is
confirmatory when declared (and, in a study that declares them, its test sets too) before the first
of its runs started; rows added after its declaration and rows without runs yet are named.
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path

from scoring.loaded import LoadedRun, folder_of, manifest_of
from studies.catalog import Study


def family_standing(study: Study, name: str, runs: Sequence[LoadedRun | Path], other_runs: Sequence[LoadedRun | Path] = (),
                    testsets: Sequence[str] = ()) -> str:
    """Whether family ``name`` was declared before the first of ``runs`` (and ``other_runs``, an
    interaction's other study) started — confirmatory — or after, exploratory: the sentence a
    family's caption and the report's claims carry; "" for a family with no declared time. In a
    study that declares its test sets (``test_sets``), the family is confirmatory on the primary
    ones alone (``testsets``: those its table reads; the secondary ones make it exploratory), and
    only where the test sets too were declared before the first run."""
    family = study.families.get(name)
    if family is None:
        return ""
    declared, sets = family.declared, study.test_standing
    secondary = [t for t in testsets if sets is not None and not sets.is_primary(t)]
    if secondary:
        return (f"Exploratory: {', '.join(secondary)} {'is a secondary test set' if len(secondary) == 1 else 'are secondary test sets'} "
                f"(the confirmatory tests are read on {', '.join(sets.primary)}, declared {sets.declared:%Y-%m-%d %H:%M} "
                f"UTC: {sets.why.rstrip('.')}); no claim of the abstract rests on it")
    if sets is not None and sets.declared > declared:
        declared = sets.declared  # confirmatory only if the test sets were fixed before the runs as well
    starts = [dt.datetime.fromisoformat(s) for s in (manifest_of(r).started for r in [*runs, *other_runs]) if s]
    when = f"{declared:%Y-%m-%d %H:%M} UTC" + (f" with its test sets ({', '.join(testsets)})" if sets else "")
    if not starts:
        return f"Confirmatory: declared {when}, before any run"
    first = min(starts).astimezone(dt.UTC)
    if declared < first:
        return f"Confirmatory: declared {when}, before the first run ({first:%Y-%m-%d %H:%M} UTC)"
    return (f"Exploratory: declared {when}, after the first run ({first:%Y-%m-%d %H:%M} UTC), with results in view; "
            "no claim of the abstract rests on it")


def rows_with_runs(study: Study, name: str, testsets: Sequence[str], pairs: list[tuple[str, str]],
                   labels: dict[Path, str], runs: Sequence[LoadedRun | Path],
                   other_runs: Sequence[LoadedRun | Path]) -> tuple[list[tuple[str, str]], str]:
    """The family's pairs whose rows both have runs here (and in an interaction's other study), and its
    standing sentence on ``testsets`` (the sets its table reads), which names the declared rows left out for want of runs — a scheme registered
    after the study's runs (``schemes: all``), until its runs are archived; Holm's m counts the pairs tested."""
    here = {labels[folder_of(r)] for r in runs}
    there = {labels[folder_of(r)] for r in other_runs} if other_runs else here
    tested = [(a, b) for a, b in pairs if {a, b} <= here & there]
    notes = [family_standing(study, name, runs, other_runs, testsets), added_note(study, name, tested)]
    missing = sorted({label for pair in pairs for label in pair} - (here & there))
    if missing:
        print(f"[{study.name}] family '{name}' on {' + '.join(testsets)}: left out {', '.join(missing)} (no runs yet)", flush=True)
        left = len(pairs) - len(tested)
        notes.append(f"Also declared, without runs yet and so left out: {', '.join(f'`{m}`' for m in missing)} "
                     f"({left} {'hypothesis' if left == 1 else 'hypotheses'}; Holm over the {len(tested)} tested)")
    return tested, ". ".join(note for note in notes if note)


def added_note(study: Study, name: str, tested: list[tuple[str, str]]) -> str:
    """The sentence naming the tested rows that joined the study (``added``) after family ``name`` was
    declared: Holm's m of the family as declared did not count their hypotheses ("" for none)."""
    family = study.families.get(name)
    declared = family.declared if family is not None else None

    def row(label: str) -> str:  # a variant's row <row>+<variant> joined with its row
        head, _, tail = label.rpartition("+")
        return head if head and tail in study.variants else label

    late = {row(label): when for pair in tested for label in pair
            if (when := study.added.get(row(label))) is not None and (declared is None or when > declared)}
    if not late:
        return ""
    count = sum(1 for pair in tested if any(row(label) in late for label in pair))
    rows = ", ".join(f"`{label}` ({when:%Y-%m-%d %H:%M} UTC)" for label, when in sorted(late.items()))
    return (f"Added later, after the family was declared: {rows}; Holm's m counts their {count} "
            f"{'hypothesis' if count == 1 else 'hypotheses'} beside the {len(tested) - count} declared")
