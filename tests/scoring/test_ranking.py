"""Kendall's tau-b and its p-value (scoring/ranking.py), checked against values worked out by hand
and against scipy.stats.kendalltau (scipy 1.x, printed once and written here), and the ranking table."""
from __future__ import annotations

import json
import math
import random

import pytest
import yaml

from experiment.config import load_config, to_dict
from scoring.ranking import _inversion_counts, compare_rankings, kendall_tau, scheme_bleu
from tests.conftest import evaluation_record
from utils.errors import UserError


def test_inversion_counts_are_the_mahonian_numbers():
    # permutations of 4 items by their number of inversions (OEIS A008302, row 4)
    assert _inversion_counts(4) == [1, 3, 5, 6, 5, 3, 1]
    assert sum(_inversion_counts(7)) == math.factorial(7)


def test_one_swapped_pair_of_four():
    # C = 5, D = 1: tau = 4/6. Orders of 4 with at most 1 inversion: 1 + 3 = 4 of 24, and as many with
    # at least 5: p = 8/24 (scipy: 0.3333333333333333).
    result = kendall_tau([1, 2, 3, 4], [1, 2, 4, 3])
    assert result.tau == pytest.approx(2 / 3) and result.p == pytest.approx(1 / 3) and result.method == "exact"


def test_a_reversed_order():
    # only the reversed and the identical order of 5 are as extreme: p = 2/120 (scipy: 0.016666666666666666)
    result = kendall_tau([1, 2, 3, 4, 5], [50, 40, 30, 20, 10])
    assert result.tau == pytest.approx(-1.0) and result.p == pytest.approx(2 / 120)


@pytest.mark.parametrize("x,y,tau,p", [
    # C = 5, D = 0, one pair tied in y: tau-b = 5 / sqrt(6 * 5)
    ([1, 2, 3, 4], [1, 1, 2, 3], 5 / math.sqrt(30), 0.07095149242730563),
    ([1, 2, 3, 4, 5, 6], [2, 1, 1, 4, 6, 6], 0.6445033866354897, 0.07945818974316925),
    # pairs tied in both lists (the variance's v1 term) and triples tied in both (its v2 term)
    ([1, 1, 2, 2, 3, 3, 4], [1, 2, 1, 2, 3, 4, 4], 0.7222222222222224, 0.036793366592844656),
    ([1, 1, 1, 2, 3, 4, 4, 4, 5, 6], [1, 2, 2, 2, 3, 5, 5, 5, 4, 6], 0.7948717948717948, 0.003278626283292942),
])
def test_ties_use_tau_b_and_the_tie_corrected_normal_approximation(x, y, tau, p):
    result = kendall_tau(x, y)
    assert result.method == "normal"
    assert result.tau == pytest.approx(tau, rel=1e-9) and result.p == pytest.approx(p, rel=1e-9)


def test_many_items_use_the_normal_approximation():
    random.seed(0)
    x = list(range(60))
    y = [i + random.gauss(0, 20) for i in x]
    result = kendall_tau(x, y)
    # scipy.stats.kendalltau on the same lists: 0.4700564971751412, p 1.117893055385035e-07
    assert result.method == "normal"
    assert result.tau == pytest.approx(0.4700564971751412, rel=1e-9) and result.p == pytest.approx(1.117893055385035e-07, rel=1e-6)


def test_exact_and_normal_p_agree_roughly_where_both_apply():
    random.seed(1)
    x = list(range(30))
    y = [i + random.gauss(0, 60) for i in x]  # p near 0.1: far in the tail the normal law is off by more
    exact = kendall_tau(x, y)
    assert exact.method == "exact"
    s = exact.tau * 30 * 29 / 2
    normal = math.erfc(abs(s) / math.sqrt(2 * 30 * 29 * 65 / 18))
    assert 0.02 < exact.p < 0.5 and exact.p == pytest.approx(normal, rel=0.05)


@pytest.mark.parametrize("x,y,message", [([1, 2], [1], "equally long"), ([1], [1], "at least 2"),
                                         ([1, 2, 3], [4, 4, 4], "ties every item")])
def test_undefined_correlations_are_one_line_errors(x, y, message):
    with pytest.raises(UserError, match=message):
        kendall_tau(x, y)


def test_the_ranking_table_gives_ranks_gaps_and_their_change():
    short = {"sinusoidal": 40.0, "rope": 45.0, "alibi": 42.0, "none": 30.0, "only-short": 1.0}
    long = {"rope": 50.0, "sinusoidal": 49.0, "alibi": 51.0, "none": 35.0}
    table = compare_rankings(short, long, ("800", "1984"))
    rows = [line.split(" | ") for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    # ordered by the second comparison; "only-short" is in one comparison only
    assert [r[0].strip("| ") for r in rows] == ["alibi", "rope", "sinusoidal", "none"]
    alibi = rows[0]
    assert alibi[1:8] == ["2", "42.00", "+2.00", "1", "51.00", "+2.00", "+0.00 |"]
    rope = rows[1]
    assert rope[1:8] == ["1", "45.00", "+5.00", "2", "50.00", "+1.00", "-4.00 |"]
    assert rows[2][7] == "— |"
    # orders (rope, alibi, sinusoidal, none) and (alibi, rope, sinusoidal, none): one swap of four
    assert "of these 4 schemes: 0.667, two-sided p = 0.33 (exact" in table


def test_the_ranking_table_needs_the_baseline_and_two_shared_schemes():
    with pytest.raises(UserError) as raised:
        compare_rankings({"rope": 1.0, "alibi": 2.0}, {"rope": 1.0, "alibi": 3.0}, ("a", "b"))
    assert str(raised.value) == "the baseline 'sinusoidal' is not in both comparisons (shared: rope, alibi)"
    with pytest.raises(UserError, match="share 1 scheme"):
        compare_rankings({"sinusoidal": 1.0}, {"sinusoidal": 1.0}, ("a", "b"))


def test_scheme_bleu_is_the_mean_over_seeds(tmp_path):
    runs = []
    for name, scheme, bleu in (("rope", "rope", 40.0), ("rope-seed2", "rope", 43.0), ("t5", "t5", 39.5)):
        run = tmp_path / name
        (run / "eval" / "test").mkdir(parents=True)
        tree = to_dict(load_config(None))
        tree["model"]["positional"]["name"] = scheme
        (run / "config.yaml").write_text(yaml.safe_dump(tree), encoding="utf-8")
        (run / "eval" / "test" / "results.json").write_text(json.dumps(evaluation_record(bleu=bleu)), encoding="utf-8")
        for name in ("hyps.txt", "refs.txt"):
            (run / "eval" / "test" / name).write_text("a cat\n", encoding="utf-8")
        runs.append(run)
    assert scheme_bleu(runs, "test") == {"rope": 41.5, "t5": 39.5}
    with pytest.raises(UserError, match="has no results for test set 'valid'"):
        scheme_bleu(runs, "valid")


def test_two_items_and_the_exact_limit():
    # n = 2: one pair; both orders of 2 are as extreme as any: p = 2 * (1/2) = 1
    result = kendall_tau([1, 2], [3, 4])
    assert result.tau == 1.0 and result.p == 1.0 and result.method == "exact"
    # up to EXACT_UP_TO items without ties the p-value is exact, beyond it the normal approximation
    from scoring.ranking import EXACT_UP_TO

    y = list(range(EXACT_UP_TO))
    y[0], y[1] = y[1], y[0]
    assert kendall_tau(list(range(EXACT_UP_TO)), y).method == "exact"
    assert kendall_tau(list(range(EXACT_UP_TO + 1)), y + [EXACT_UP_TO]).method == "normal"


def test_an_exact_p_value_at_the_centre_is_capped_at_one():
    # n = 4, D = 3 of 6 pairs (tau 0): orders with at most 3 inversions are 1+3+5+6 = 15 of 24,
    # twice that is 30/24 > 1: a probability, so 1
    x, y = [1, 2, 3, 4], [2, 4, 1, 3]
    discordant = sum((x[i] - x[j]) * (y[i] - y[j]) < 0 for i in range(4) for j in range(i + 1, 4))
    assert discordant == 3
    result = kendall_tau(x, y)
    assert result.tau == 0.0 and result.p == 1.0


def test_the_error_for_a_fully_tied_ranking_is_worded_exactly():
    with pytest.raises(UserError) as raised:
        kendall_tau([1, 2, 3], [4, 4, 4])
    assert str(raised.value) == "Kendall's tau is undefined when one ranking ties every item"


@pytest.mark.parametrize("tied", [False, True])
def test_the_ranking_table_is_markdown_with_its_header_and_footnote(tied):
    first = {"sinusoidal": 40.0, "rope": 45.0, "alibi": 42.0}
    second = {"sinusoidal": 49.0, "rope": 50.0, "alibi": 50.0 if tied else 51.0}
    table = compare_rankings(first, second, ("800", "1984"))
    lines = table.split("\n")
    assert lines[0] == ("| scheme | rank (800) | BLEU (800) | vs sinusoidal | rank (1984) | BLEU (1984) "
                        "| vs sinusoidal | gap change |")
    assert lines[1] == "|" + "|".join([" --- "] * 8) + "|"
    assert lines[4].startswith("| ") and lines[5] == "" and lines[6].startswith("Kendall's tau-b")  # 3 rows, a gap
    assert table.endswith("minus the first's.\n") and not table.endswith("\n\n")
    method = "normal approximation, tie-corrected" if tied else "exact permutation distribution"
    assert f"({method}). BLEU: each scheme's mean over its seeds" in table


def test_a_comparison_that_ties_every_scheme_says_the_correlation_is_undefined():
    # a study stopped too early: every scheme at BLEU 0 in its first seed; the table is still written
    first = {"sinusoidal": 0.0, "rope": 0.0, "mine": 0.0}
    second = {"sinusoidal": 0.4, "rope": 0.0, "mine": 0.2}
    table = compare_rankings(first, second, ("seed 1 alone", "mean over all seeds"))
    assert ("Kendall's tau-b between the two orders of these 3 schemes: undefined, every scheme has the same BLEU "
            "in seed 1 alone. BLEU: each scheme's mean over its seeds") in table
    assert "| mine | " in table and "p = " not in table
