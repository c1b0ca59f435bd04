"""The explorer page (``visualize explore``) opened in headless Chromium: it loads without errors,
the controls change what is drawn, a shown weight is the model's attention for that cell, hovering
highlights across panels, and the comparison table sorts by the clicked column."""
from __future__ import annotations

import json
import re

import pytest
import torch

from experiment.trained import load_run
from nmt import visualize
from tests.conftest import ROOT, TINY

SENTENCES = ["Le chat regarde la femme.", "Nous aimons la voiture rouge.", "Je la regarde.",
             "Le garçon lave la petite voiture que la femme regarde."]


@pytest.fixture(scope="module")
def two_layer_run(tmp_path_factory):
    """A 2-layer, 2-head sinusoidal run (60 updates: it need not translate well, only attend)."""
    from nmt import train

    folder = tmp_path_factory.mktemp("explorer")
    config = folder / "tiny.yaml"
    config.write_text(TINY.format(root=ROOT, cache=folder / "cache"), encoding="utf-8")
    run_dir = folder / "sin2layers"
    train.main(["--config", str(config), "--run-dir", str(run_dir), "seed=1", "train.max_steps=60",
                "train.eval_every=60", "model.n_encoder_layers=2", "model.n_decoder_layers=2"])
    return run_dir


@pytest.fixture(scope="module")
def page_file(two_layer_run, runs, tmp_path_factory):
    folder = tmp_path_factory.mktemp("page")
    src = folder / "src.txt"
    src.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    out = folder / "page.html"
    visualize.main(["explore", "--runs", str(two_layer_run), str(runs["rope1"]), "--src", str(src), "--out", str(out)])
    return out


def cells(page, run: int) -> dict[tuple[int, int], float]:
    """(row, column) -> the weight a panel shows."""
    found = page.eval_on_selector_all(
        f'svg.heatmap[data-run="{run}"] rect.cell',
        "cells => cells.map(c => [Number(c.dataset.row), Number(c.dataset.col), Number(c.dataset.weight)])")
    return {(r, c): w for r, c, w in found}


def choose(page, **choices) -> None:
    for control, value in choices.items():
        page.select_option(f"#{control}", str(value))


def test_the_page_loads_without_errors_and_shows_two_runs_side_by_side(page_file, open_page):
    page, errors = open_page(page_file)
    assert errors == []
    assert page.locator("svg.heatmap").count() == 2
    assert page.locator("#sentence option").count() == len(SENTENCES)
    assert page.locator("#head option").all_inner_texts() == ["mean of heads", "0", "1"]
    assert page.locator("#layer option").all_inner_texts() == ["0", "1"]
    # self-contained: no script, style, picture or link fetched from anywhere
    html = page_file.read_text(encoding="utf-8")
    assert not re.search(r'(src|href)="(https?:)?//', html)


def test_choosing_another_sentence_kind_layer_or_head_changes_the_drawn_cells(page_file, open_page):
    page, errors = open_page(page_file)
    choose(page, sentence=0, kind="encoder", layer=0, head=0)
    first = cells(page, 0)
    for change in ({"head": 1}, {"layer": 1}, {"kind": "cross"}, {"sentence": 3}):
        choose(page, **change)
        now = cells(page, 0)
        assert now and now != first, change
        first = now
    assert errors == []


def test_a_shown_weight_is_the_models_attention_for_that_cell(page_file, two_layer_run, open_page):
    page, _ = open_page(page_file)
    run = load_run(two_layer_run, "best")
    tok, model = run.tokenizer, run.model
    sentence = 3
    choose(page, sentence=sentence, kind="encoder", layer=1, head=1)
    src = torch.tensor([tok.encode_src([SENTENCES[sentence]])[0] + [tok.eos_id]])
    with torch.no_grad():
        encoder = model.encode(src, need_weights=True).weights[1][0, 1]  # layer 1, head 1: (S, S)
    shown = cells(page, 0)
    assert len(shown) == encoder.numel()
    for (r, c), w in shown.items():
        assert abs(w - float(encoder[r, c])) <= 0.0005 + 1e-7, (r, c)
    # cross attention, teacher-forced on the translation the panel shows
    choose(page, kind="cross", layer=0, head="mean")
    translation = page.locator('.panel[data-run="0"] .translation').inner_text()
    tgt = torch.tensor([[tok.bos_id] + tok.encode_tgt([translation])[0]])
    with torch.no_grad():
        decoded = model.decode(tgt, model.start_decoding(model.encode(src)), need_weights=True)
    cross = decoded.weights["cross"][0][0].mean(0)  # mean of the heads: (T, S)
    shown = cells(page, 0)
    assert len(shown) == cross.numel()
    for (r, c), w in shown.items():  # a mean of rounded weights: within a rounding step
        assert abs(w - float(cross[r, c])) <= 0.001, (r, c)
    # the readout on hover names the same weight
    page.hover('svg.heatmap[data-run="0"] rect.cell[data-row="1"][data-col="2"]')
    assert page.locator("#readout").inner_text().endswith(f"weight {shown[(1, 2)]:.3f}")


def test_hovering_a_cell_highlights_its_row_and_column_in_every_panel(page_file, open_page):
    page, _ = open_page(page_file)
    choose(page, sentence=0, kind="encoder", layer=0, head="mean")
    page.hover('svg.heatmap[data-run="0"] rect.cell[data-row="2"][data-col="1"]')
    for run in (0, 1):
        panel = f'svg.heatmap[data-run="{run}"]'
        row_y = float(page.get_attribute(f"{panel} rect.cell[data-row='2'][data-col='0']", "y"))
        col_x = float(page.get_attribute(f"{panel} rect.cell[data-row='0'][data-col='1']", "x"))
        assert page.get_attribute(f"{panel} .row-band", "visibility") == "visible"
        assert float(page.get_attribute(f"{panel} .row-band", "y")) == row_y
        assert float(page.get_attribute(f"{panel} .col-band", "x")) == col_x
        assert page.locator(f"{panel} text.hl").count() == 2  # the row's token and the column's


def test_a_run_without_the_chosen_layer_says_so(page_file, open_page):
    page, errors = open_page(page_file)
    choose(page, kind="decoder", layer=1, head=0)  # the rope run has one decoder layer
    assert page.locator("svg.heatmap").count() == 1
    assert "1 layers" in page.locator('.panel[data-run="1"] .missing').inner_text()
    assert errors == []


def test_the_stored_weights_are_rounded_attention_rows(page_file):
    data = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>',
                                page_file.read_text(encoding="utf-8"), re.S).group(1))
    assert [r["scheme"] for r in data["runs"]] == ["sinusoidal", "rope"]
    for run in data["runs"]:
        for sentence in run["sentences"]:
            src = len(sentence["tokens"]["src"])
            tgt = len(sentence["tokens"]["tgt_out"])
            for kind, (rows, cols) in {"encoder": (src, src), "decoder": (tgt, tgt), "cross": (tgt, src)}.items():
                for layer in sentence["attention"][kind]:
                    for head in layer:
                        assert len(head) == rows * cols
                        for r in range(rows):  # each row a distribution, in thousandths
                            assert abs(sum(head[r * cols:(r + 1) * cols]) - 1000) <= cols / 2 + 1
                if kind == "decoder":  # causal: nothing above the diagonal
                    assert all(head[r * cols + c] == 0 for r in range(rows) for c in range(r + 1, cols))
        assert {p["stack"] for p in run["profiles"]} == {"encoder", "decoder"}


def test_the_table_sorts_by_the_clicked_column_and_a_scheme_opens_its_run(two_layer_run, runs, tmp_path, open_page):
    from analysis.explorer import explore

    table = tmp_path / "comparison_test.csv"
    table.write_text("scheme,seeds,BLEU,p vs sinusoidal\n"
                     "rope,1,12.50,0.200\nsinusoidal,1,30.25,—\nalibi,1,4.75,0.010\n", encoding="utf-8")
    out = explore([two_layer_run, runs["rope1"]], SENTENCES[:2], tmp_path / "index.html", "Study 'x'", [table])
    page, errors = open_page(out)

    def column(i: int) -> list[str]:
        return page.eval_on_selector_all("table.comparison tbody tr", f"rows => rows.map(r => r.cells[{i}].textContent)")

    page.click("table.comparison th:nth-child(3)")  # BLEU, ascending
    assert column(0) == ["alibi", "rope", "sinusoidal"]
    page.click("table.comparison th:nth-child(3)")  # descending
    assert column(2) == ["30.25", "12.50", "4.75"]
    page.click("table.comparison th:nth-child(4)")  # p: the baseline's "—" last
    assert column(0) == ["alibi", "rope", "sinusoidal"]
    page.click("table.comparison th:nth-child(1)")  # by name
    assert column(0) == ["alibi", "rope", "sinusoidal"]
    page.click("table.comparison td a.scheme >> text=rope")
    assert page.locator(".panel h3").all_inner_texts() == ["rope1 (rope)"]
    assert errors == []


def test_bad_input_is_one_line(runs, tmp_path, capsys):
    from nmt.__main__ import main
    from utils.cli import run_main

    for argv, expected in ((["--src", str(tmp_path / "missing.txt")], "no such file"),
                           (["--src", __file__, "--sentences", "0"], "--sentences must be at least 1")):
        with pytest.raises(SystemExit) as stop:
            run_main(lambda argv=argv: main(["visualize", "explore", "--runs", str(runs["sin1"]),
                                             "--out", str(tmp_path / "p.html"), *argv]))
        assert stop.value.code != 0
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and expected in err[0]
    assert not (tmp_path / "p.html").exists()
