"""Config files: inheritance, overrides, validation errors, and the shipped YAML files."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from experiment.config import Config, dump_config, from_dict, load_config
from tests.conftest import ROOT
from utils.errors import ConfigError


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_inheritance_deep_merges_parents_in_order(tmp_path):
    write(tmp_path / "a.yaml", "seed: 3\nmodel: {d_model: 64, n_heads: 2}\ntrain: {lr: 0.5}\n")
    write(tmp_path / "b.yaml", "model: {n_heads: 4}\n")
    child = write(tmp_path / "c.yaml", "base: [a.yaml, b.yaml]\nmodel: {d_ff: 99}\n")
    cfg = load_config(child)
    assert (cfg.seed, cfg.model.d_model, cfg.model.n_heads, cfg.model.d_ff) == (3, 64, 4, 99)
    assert cfg.train.lr == 0.5
    assert cfg.model.n_encoder_layers == Config().model.n_encoder_layers  # untouched default


def test_nested_base_and_cycle(tmp_path):
    (tmp_path / "sub").mkdir()
    write(tmp_path / "root.yaml", "model: {d_model: 32}\n")
    write(tmp_path / "sub" / "mid.yaml", "base: ../root.yaml\nmodel: {n_heads: 2}\n")
    leaf = write(tmp_path / "sub" / "leaf.yaml", "base: mid.yaml\n")
    cfg = load_config(leaf)
    assert (cfg.model.d_model, cfg.model.n_heads) == (32, 2)
    write(tmp_path / "x.yaml", "base: y.yaml\n")
    write(tmp_path / "y.yaml", "base: x.yaml\n")
    with pytest.raises(ConfigError, match="cycle"):
        load_config(tmp_path / "x.yaml")


def test_overrides_parse_yaml_values_and_win(tmp_path):
    f = write(tmp_path / "a.yaml", "train: {lr: 0.5}\n")
    cfg = load_config(f, ["train.lr=3e-4", "train.betas=[0.9, 0.999]", "model.norm_first=true",
                          "data.test_splits=[a, b]", "data.synthetic.train.size=7"])
    assert cfg.train.lr == pytest.approx(3e-4)
    assert cfg.train.betas == [0.9, 0.999]
    assert cfg.model.norm_first is True
    assert cfg.data.test_splits == ["a", "b"]
    assert cfg.data.synthetic["train"].size == 7
    # the other default splits survive a partial override of one of them
    assert cfg.data.synthetic["validation"].size == Config().data.synthetic["validation"].size


def test_unknown_key_names_key_file_and_suggestion(tmp_path):
    write(tmp_path / "parent.yaml", "model: {d_model: 8}\n")
    f = write(tmp_path / "exp.yaml", "base: parent.yaml\nmodel:\n  n_head: 3\n")
    with pytest.raises(ConfigError) as err:
        load_config(f)
    msg = str(err.value)
    assert "model.n_head" in msg and str(f) in msg and "n_heads" in msg
    assert "\n" not in msg


def test_unknown_key_from_parent_names_the_parent(tmp_path):
    parent = write(tmp_path / "parent.yaml", "train: {warmup: 10}\n")
    f = write(tmp_path / "exp.yaml", "base: parent.yaml\nseed: 2\n")
    with pytest.raises(ConfigError) as err:
        load_config(f)
    assert str(parent) in str(err.value) and "warmup_steps" in str(err.value)


def test_an_error_names_the_file_and_line_relative_to_the_working_folder(tmp_path, monkeypatch):
    """The key's own line in the file that set it (a parent's line for a parent's key), the file as the
    user would type it from the working folder."""
    (tmp_path / "configs").mkdir()
    write(tmp_path / "configs" / "parent.yaml", "seed: 1\ntrain:\n  lr: 0.5\n  warmup: 10\n")
    child = write(tmp_path / "configs" / "exp.yaml", "base: parent.yaml\n\nmodel:\n  d_model: 8\n  n_head: 3\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"^unknown config key 'model.n_head' in configs/exp\.yaml:5; did you mean"):
        load_config(child)
    write(child, "base: parent.yaml\n")
    with pytest.raises(ConfigError, match=r"^unknown config key 'train.warmup' in configs/parent\.yaml:4; did you mean "
                                          r"'warmup_steps'"):
        load_config(child)
    write(child, "model:\n  d_model: 8\n  n_heads: 3\n")  # a value rule broken: the line of the key
    with pytest.raises(ConfigError, match=r"'model.n_heads' in configs/exp\.yaml:3 must be a divisor"):
        load_config(child)


def test_a_section_misspelt_on_the_command_line_is_the_command_line_s(tmp_path):
    f = write(tmp_path / "exp.yaml", "model:\n  positional:\n    name: rope\n")
    with pytest.raises(ConfigError, match=r"^unknown config key 'model.positonal' in the command line; did you mean "
                                          r"'positional'\?$"):
        load_config(f, ["model.positonal.name=alibi"])


@pytest.mark.parametrize("asked, suggested", [
    ("configs/multi30k/bst.yaml", "configs/multi30k/best.yaml"),  # a file misspelt: its neighbour
    ("configs/multi3k/best.yaml", "configs/multi30k/best.yaml"),  # a folder misspelt: one level down
    ("configs/multi30k/zzzz.yaml", None),  # nothing close
    ("/no-such-folder-here/best.yaml", None),  # nothing of it exists: no walk of the disk
])
def test_a_missing_config_file_suggests_its_nearest_neighbour(tmp_path, monkeypatch, asked, suggested):
    (tmp_path / "configs" / "multi30k").mkdir(parents=True)
    write(tmp_path / "configs" / "multi30k" / "best.yaml", "seed: 1\n")
    monkeypatch.chdir(tmp_path)
    hint = f"; did you mean {re.escape(suggested)}\\?" if suggested else ""
    with pytest.raises(ConfigError, match=rf"^config file not found: {re.escape(asked)}{hint}$"):
        load_config(asked)


def test_an_unknown_scheme_suggests_the_nearest_registered_ones():
    with pytest.raises(ConfigError, match=r"'alibj' is unknown; did you mean 'alibi'\? known: none, sinusoidal"):
        load_config(None, ["model.positional.name=rope+alibj"])


@pytest.mark.parametrize("override, expected", [
    ("model.d_model=big", "int"),
    ("model.d_model=1.5", "int"),
    ("train.lr=[1]", "float"),
    ("model.tie_embeddings=3", "bool"),
    ("model.activation=swish", "'relu'"),
    ("train.betas=0.9", "list of float"),
    ("data.synthetic=3", "mapping"),
])
def test_wrong_type_names_key_expected_type_and_value(override, expected):
    key, value = override.split("=")
    with pytest.raises(ConfigError) as err:
        load_config(None, [override])
    msg = str(err.value)
    assert key in msg and expected in msg and value in msg and "command line" in msg


def test_int_is_accepted_for_float():
    assert load_config(None, ["train.lr=2"]).train.lr == 2.0


def test_invalid_yaml_names_file_and_line(tmp_path):
    f = write(tmp_path / "bad.yaml", "model:\n  d_model: 8\n  n_heads: [1, 2\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml line \d+"):
        load_config(f)


def test_resolved_config_round_trips(tmp_path):
    cfg = load_config(ROOT / "configs" / "multi30k" / "base.yaml", ["seed=5"])
    saved = write(tmp_path / "config.yaml", dump_config(cfg))
    assert load_config(saved) == cfg


def test_base_yaml_holds_transformer_base():
    cfg = load_config(ROOT / "configs" / "base.yaml")
    m, t = cfg.model, cfg.train
    assert (m.d_model, m.n_heads, m.n_encoder_layers, m.n_decoder_layers, m.d_ff) == (512, 8, 6, 6, 2048)
    assert m.dropout == 0.1 and t.label_smoothing == 0.1
    assert t.betas == [0.9, 0.98] and t.eps == 1e-9
    assert t.schedule == "inverse_sqrt" and t.warmup_steps == 4000
    assert cfg.data.source == "iwslt2017"


@pytest.mark.parametrize("path", sorted((ROOT / "configs").rglob("*.yaml")), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shipped_config_loads(path):
    cfg = load_config(path)
    assert cfg == from_dict(__import__("yaml").safe_load(dump_config(cfg)))


def test_cli_error_is_one_line_exit_2(tmp_path):
    f = write(tmp_path / "exp.yaml", "model: {d_modle: 8}\n")
    proc = subprocess.run([sys.executable, "train.py", "--config", str(f), "--data-only"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert "model.d_modle" in lines[0] and "d_model" in lines[0]


def test_a_family_base_config_trains_into_a_folder_named_after_the_scheme():
    # one configs/<family>/base.yaml for every scheme: the run folder takes the scheme's name
    from models.positional import SCHEMES
    from nmt import train

    assert train.default_run_dir(ROOT / "configs" / "multi30k" / "base.yaml", "rope") == Path("runs/multi30k/rope")
    assert train.default_run_dir(ROOT / "configs" / "multi30k" / "best.yaml", "alibi") == Path("runs/multi30k/best")
    assert train.default_run_dir(ROOT / "configs" / "base.yaml", "t5") == Path("runs/t5")
    assert not [p for p in (ROOT / "configs").rglob("*.yaml") if p.stem in SCHEMES]  # no per-scheme copies


def test_one_decoding_config_from_yaml_to_the_command_line():
    """decode is one dataclass: its rules hold for the YAML section (naming the key and file) and for
    the values a command sets on top (naming the flag); values a command leaves out keep the run's."""
    from experiment.decode_config import DecodeConfig, resolve_settings
    from utils.errors import UserError

    with pytest.raises(ConfigError, match=r"'decode.nbest' in the command line must be between 1 and beam \(5\), got 6"):
        load_config(None, ["decode.nbest=6"])
    with pytest.raises(ConfigError, match=r"'decode.stopping' .* must be exact or first_k, got 'early'"):
        load_config(None, ["decode.stopping=early"])
    run = load_config(None, ["decode.beam=4", "decode.nbest=3", "decode.batch_size=7"]).decode
    assert resolve_settings(run) == run
    assert resolve_settings(run, beam=2) == DecodeConfig(beam=2, nbest=2, batch_size=7)  # nbest fits the beam
    assert resolve_settings(run, greedy=True) == DecodeConfig(beam=1, nbest=1, batch_size=7)
    assert resolve_settings(run, nbest=1, stopping="first_k", batch_size=2) == DecodeConfig(
        beam=4, nbest=1, batch_size=2, stopping="first_k")
    with pytest.raises(UserError, match=r"^--nbest must be between 1 and beam \(4\), got 5$"):
        resolve_settings(run, nbest=5)
    with pytest.raises(UserError, match=r"^--stopping must be exact or first_k, got 'early'$"):
        resolve_settings(run, stopping="early")
    with pytest.raises(UserError, match="--greedy and --beam"):
        resolve_settings(run, beam=3, greedy=True)
