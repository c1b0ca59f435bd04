"""Row labels (``scoring.evaluated.group_labels``): rows of one scheme are told apart by the settings in which
they differ — an evaluation variant's row (``rope+oracle``) by its scheme's options too, which the length
study's ``rope+oracle`` and ``rope-learned+oracle`` need (one folded into the other before) — and two rows
that would still share a label are refused in one line rather than merged."""
from __future__ import annotations

import pytest
import yaml

from experiment.config import load_config, to_dict
from scoring.evaluated import group_labels
from scoring.loaded import load_run
from utils.errors import UserError


def run(tmp_path, name: str, *overrides: str):
    folder = tmp_path / name
    folder.mkdir()
    tree = to_dict(load_config(None, ["model.positional.name=rope", *overrides]))
    (folder / "config.yaml").write_text(yaml.safe_dump(tree), encoding="utf-8")
    return load_run(folder)


def test_variant_rows_of_one_scheme_are_told_apart_by_that_schemes_options(tmp_path):
    groups = {"a": ("rope+oracle", run(tmp_path, "rope+oracle")),
              "b": ("rope+oracle", run(tmp_path, "rope-learned+oracle", "model.positional.rope.learn_frequencies=true")),
              "c": ("rope+oracle", run(tmp_path, "rope-ssmax+oracle", "model.softmax=ssmax"))}
    labels = group_labels(groups)
    assert labels["a"] == "rope+oracle (model.positional.rope.learn_frequencies=False, model.softmax=softmax)"
    assert labels["b"] == "rope+oracle (model.positional.rope.learn_frequencies=True, model.softmax=softmax)"
    assert labels["c"] == "rope+oracle (model.positional.rope.learn_frequencies=False, model.softmax=ssmax)"


def test_another_schemes_options_never_label_a_row(tmp_path):
    groups = {"a": ("rope", run(tmp_path, "rope")),
              "b": ("rope", run(tmp_path, "rope-shaw8", "model.positional.shaw.max_distance=8", "model.softmax=ssmax"))}
    assert group_labels(groups) == {"a": "rope (model.softmax=softmax)", "b": "rope (model.softmax=ssmax)"}


def test_two_rows_that_would_share_a_label_are_refused(tmp_path):
    # b and c differ only in another scheme's option, which a label leaves out: both would be "rope (ssmax)"
    groups = {"a": ("rope", run(tmp_path, "rope")),
              "b": ("rope", run(tmp_path, "rope-ssmax-shaw8", "model.positional.shaw.max_distance=8", "model.softmax=ssmax")),
              "c": ("rope", run(tmp_path, "rope-ssmax", "model.softmax=ssmax"))}
    with pytest.raises(UserError, match=r"^two rows would share the label 'rope \(model.softmax=ssmax\)' \(.*rope-ssmax-shaw8 and "):
        group_labels(groups)
