"""``make mutation``: mutation testing (mutmut) of the science core, each module against its own tests.

    python -m tests.mutation [GROUP ...]        # default: every group; results in runs/mutation/

A group is a set of source files and the test files that check them (``GROUPS``). For each group
the working tree is copied to ``runs/mutation/<group>/`` with a ``setup.cfg`` that tells mutmut
which files to mutate and which tests to run; mutmut then runs, for every mutant, the tests of
that selection that reach the mutated function, stopping at the first failure. A mutant the tests
do not kill is either a gap (write a test that kills it) or equivalent: it cannot change what the
code computes. Equivalent mutants are listed with their reason in ``tests/mutation/equivalent.toml``,
keyed by function and mutated line (stable when other mutants are renumbered). The score of a group
is killed / (all - equivalent); the run writes the table to ``tests/mutation/score.md`` and exits
non-zero when a group is below ``TARGET`` or a survivor is neither killed nor listed.

mutmut reruns only what changed since its last run in the same folder, so a second run after a
small change takes seconds; delete ``runs/mutation/<group>`` to start a group afresh.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
EQUIVALENT = HERE / "equivalent.toml"
SCORE = HERE / "score.md"
TARGET = 0.90
# packages copied into the mutants folder as they are (imported by the code under test or its tests)
SOURCE_PACKAGES = ["models", "training", "search", "scoring"]
OTHER = ["nmt", "reporting", "experiment", "utils", "data", "tokenizer", "analysis", "export", "studies", "bench", "configs",
         "train.py", "inference.py", "test.py", "visualize.py", "README.md", "pyproject.toml", "docs", "Makefile"]
# tests that need trained runs (session fixtures) or subprocesses: minutes per mutant, so left out
SLOW = ["not length_study", "not reported_numbers", "not two_process"]


@dataclass(frozen=True)
class Group:
    name: str
    mutate: list[str]  # files (glob patterns) to mutate
    tests: list[str]  # test files that check them


# the schemes of 2024-2025: a group of their own, so that their mutants run without the first sixteen's
RECENT_SCHEMES = ["models/positional/p_rope.py", "models/positional/polar.py", "models/positional/fox.py",
                  "models/positional/dape.py", "models/positional/cope.py"]
# the schemes of 2025-26 (their options on older schemes run with those schemes' groups)
SCHEMES_2026 = ["models/positional/fope.py"]
POSITIONAL_TESTS = ["tests/models/positional/test_formulas.py", "tests/models/test_attention.py",
                    "tests/models/positional/test_randomized_schemes.py", "tests/models/positional/test_scheme_contracts.py"]
GROUPS = [
    # SSMax, log-n scaling and the rotary length factor are checked where they are specified (the 2026 options,
    # the length study's settings, test-time frequency scaling)
    Group("attention", ["models/attention.py", "models/attention_kernels.py", "models/logit_scaling.py"],
          ["tests/models/test_attention.py", "tests/models/test_attention_kernels.py", "tests/models/test_length_scaling.py",
           "tests/models/positional/test_schemes_2026.py", "tests/models/test_frequency_scaling.py"]),
    Group("positional", sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "models" / "positional").glob("*.py")
                               if p.relative_to(ROOT).as_posix() not in RECENT_SCHEMES + SCHEMES_2026), POSITIONAL_TESTS),
    Group("positional-2025", RECENT_SCHEMES, ["tests/models/positional/test_recent_schemes.py", *POSITIONAL_TESTS,
                                             "tests/models/test_frequency_scaling.py"]),  # PoPE and p-RoPE under PI/NTK/YaRN
    Group("positional-2026", SCHEMES_2026, ["tests/models/positional/test_schemes_2026.py", *POSITIONAL_TESTS]),
    Group("loss", ["training/loss.py"], ["tests/training/test_fast_training_paths.py", "tests/training/test_training_arithmetic.py"]),
    Group("beam", ["search/beam.py"], ["tests/search/test_decoding.py"]),
    Group("metrics", ["scoring/metrics.py", "scoring/evaluated.py", "scoring/significance.py",
                      "scoring/recipe.py", "scoring/compare.py", "scoring/ranking.py"],
          ["tests/scoring/test_statistics.py", "tests/scoring/test_ranking.py", "tests/scoring/test_replicates.py",
           # BLEU from sentence statistics (the vectorized bootstrap), and seed_summary through the family tables
           "tests/scoring/test_sufficient_statistics.py", "tests/scoring/test_families.py"]),
    Group("groups", ["scoring/groups.py"], ["tests/scoring/test_groups.py", "tests/scoring/test_replicates.py"]),
]


def setup_cfg(group: Group) -> str:
    lines = ["[mutmut]", "source_paths ="] + [f"    {p}" for p in SOURCE_PACKAGES]
    lines += ["only_mutate ="] + [f"    {p}" for p in group.mutate]
    lines += ["also_copy ="] + [f"    {p}" for p in OTHER]
    lines += ["pytest_add_cli_args_test_selection ="] + [f"    {t}" for t in group.tests]
    lines += ["    -k", f"    {' and '.join(SLOW)}", "process_isolation = forkserver", ""]
    return "\n".join(lines)


def prepare(group: Group) -> Path:
    """Copy the tracked and new (not ignored) files of the working tree into the group's folder,
    keeping mutmut's previous results (``mutants/``) so that it reruns only what changed."""
    folder = ROOT / "runs" / "mutation" / group.name
    folder.mkdir(parents=True, exist_ok=True)
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.splitlines()
    wanted = {name for name in files
              if not name.startswith(("report/", "tests/mutation/")) and (ROOT / name).is_file()}
    _remove_stale(folder, wanted)
    for name in sorted(wanted):
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists() or target.read_bytes() != (ROOT / name).read_bytes():
            shutil.copy2(ROOT / name, target)
    (folder / "setup.cfg").write_text(setup_cfg(group), encoding="utf-8")
    return folder


def _remove_stale(folder: Path, wanted: set[str]) -> None:
    """Delete the copies (in the group's folder and in mutmut's ``mutants/``) of files that left the
    tree, e.g. tests that moved: mutmut never removes them, and a stale test module collides with
    its new namesake. mutmut's own bookkeeping (``*.meta``, stats, caches) stays."""
    for base in (folder, folder / "mutants"):
        for path in base.rglob("*"):
            relative = path.relative_to(base).as_posix()
            if (not path.is_file() or relative in wanted or relative.startswith(("mutants/", ".pytest_cache/"))
                    or "__pycache__" in relative or path.suffix == ".meta"
                    or path.name in ("setup.cfg", "mutmut-stats.json")):
                continue
            path.unlink()


def mutmut(folder: Path, *args: str, check: bool = True) -> str:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "mutmut", *args], cwd=folder, env=env, capture_output=True,
                          text=True)
    if check and proc.returncode != 0:
        sys.exit(f"mutmut {' '.join(args)} failed in {folder}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return proc.stdout


def mutated_line(folder: Path, mutant: str) -> str:
    """The line as the mutant has it (the first added line of ``mutmut show``), stripped."""
    shown = mutmut(folder, "show", mutant)
    added = [line[1:].strip() for line in shown.splitlines() if line.startswith("+") and not line.startswith("+++")]
    return added[0] if added else ""


def function_of(mutant: str) -> str:
    """``models.attention.xǁMultiHeadAttentionǁforward__mutmut_30`` -> ``models.attention.MultiHeadAttention.forward``."""
    module, _, rest = mutant.rpartition(".x")
    rest = re.sub(r"__mutmut_\d+$", "", rest)  # methods: ǁClassǁname, functions: _name
    return f"{module}.{rest.strip('ǁ').replace('ǁ', '.') if rest.startswith('ǁ') else rest[1:]}"


def equivalents() -> dict[tuple[str, str], str]:
    entries = tomllib.loads(EQUIVALENT.read_text(encoding="utf-8")).get("equivalent", [])
    return {(e["function"], e["mutated"]): e["reason"] for e in entries}


@dataclass
class Outcome:
    group: str
    total: int
    killed: int
    equivalent: int
    unexplained: list[tuple[str, str, str]]  # (mutant, function, mutated line)

    @property
    def score(self) -> float:
        return self.killed / max(self.total - self.equivalent, 1)


def statuses_of(folder: Path) -> dict[str, str]:
    """mutant name -> mutmut's status (killed, survived, timeout, ...) of the last run in ``folder``."""
    if not (folder / "mutants").is_dir():
        return {}
    return dict(line.strip().rsplit(": ", 1) for line in mutmut(folder, "results", "--all", "true").splitlines()
                if ": " in line)


def run_group(group: Group, known: dict[tuple[str, str], str], children: int) -> Outcome:
    folder = prepare(group)
    print(f"[mutation] {group.name}: mutmut in {folder.relative_to(ROOT)} ...", flush=True)
    # mutmut retests a mutant only when its function changed; a survivor of an earlier run may be
    # killed by a test written since, so earlier survivors are named again explicitly (mutants a stopped
    # run never reached are run by the first call anyway: not twice).
    earlier = [m for m, s in statuses_of(folder).items() if s not in ("killed", "timeout", "not checked")]
    mutmut(folder, "run", "--max-children", str(children))
    if earlier:
        mutmut(folder, "run", "--max-children", str(children), *earlier)
    statuses = statuses_of(folder)
    killed = sum(s in ("killed", "timeout") for s in statuses.values())
    equivalent, unexplained = 0, []
    for mutant, status in sorted(statuses.items()):
        if status in ("killed", "timeout"):
            continue
        key = (function_of(mutant), mutated_line(folder, mutant))
        if key in known:
            equivalent += 1
        else:
            unexplained.append((mutant, *key))
    return Outcome(group.name, len(statuses), killed, equivalent, unexplained)


def earlier_outcomes() -> dict[str, Outcome]:
    """The groups' rows of the score table as the last run wrote them (count columns only)."""
    if not SCORE.is_file():
        return {}
    rows = {}
    for line in SCORE.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 7 and cells[0] in {g.name for g in GROUPS}:
            total, killed, equivalent, _ = (int(c) for c in cells[2:6])
            rows[cells[0]] = Outcome(cells[0], total, killed, equivalent, [])
    return rows


def write_score(outcomes: list[Outcome]) -> None:
    """The score table of ``outcomes``; groups not run now keep the row of their last run."""
    now = {o.group: o for o in outcomes}
    outcomes = [now.get(g.name) or earlier_outcomes().get(g.name) for g in GROUPS]
    outcomes = [o for o in outcomes if o is not None]
    lines = ["# Mutation score of the science core", "",
             "Written by `make mutation` (mutmut; `tests/mutation/__main__.py`). Score = killed / (mutants - "
             "equivalent); equivalent mutants and their reasons: `tests/mutation/equivalent.toml`. "
             "`python -m tests.mutation GROUP` rewrites its group's row and keeps the others' from their last run.", "",
             "| group | files | mutants | killed | equivalent | not killed | score |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    files = {g.name: ", ".join(g.mutate) for g in GROUPS}
    for o in outcomes:
        lines.append(f"| {o.group} | {files[o.group]} | {o.total} | {o.killed} | {o.equivalent} | "
                     f"{len(o.unexplained)} | {100 * o.score:.1f}% |")
    total = sum(o.total for o in outcomes)
    killed, equivalent = sum(o.killed for o in outcomes), sum(o.equivalent for o in outcomes)
    unexplained = sum(len(o.unexplained) for o in outcomes)
    lines.append(f"| all | | {total} | {killed} | {equivalent} | {unexplained} | "
                 f"{100 * killed / max(total - equivalent, 1):.1f}% |")
    SCORE.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutation", description=__doc__.split("\n")[0])
    parser.add_argument("groups", nargs="*", choices=[[]] + [g.name for g in GROUPS], default=[],
                        help="groups to run (default: all)")
    parser.add_argument("--children", type=int, default=os.cpu_count() or 1, help="mutants tested at once")
    args = parser.parse_args(argv)
    chosen = [g for g in GROUPS if not args.groups or g.name in args.groups]
    known = equivalents()
    outcomes = [run_group(g, known, args.children) for g in chosen]
    for o in outcomes:
        print(f"[mutation] {o.group}: {o.total} mutants, {o.killed} killed, {o.equivalent} equivalent, "
              f"score {100 * o.score:.1f}%")
        for mutant, function, line in o.unexplained:
            print(f"    not killed, not listed: {mutant}\n        {function}: {line}")
    write_score(outcomes)
    failed = [o for o in outcomes if o.unexplained or o.score < TARGET]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
