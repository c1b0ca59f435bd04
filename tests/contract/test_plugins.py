"""Bring your own encoding: a scheme from outside the repository — a file a config or study names, or an
installed package's entry point — is refused in one line when it cannot serve (a name clash, a card
missing a field, a constructor of the wrong signature, a file that does not import), starts green from
``nmt scheme new``, and goes through ``nmt scheme check``, a tiny study beside sinusoidal and its tables like
a built-in, its version recorded in each manifest and kept apart in tables."""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import yaml

from contract.kit import CHECKS, run_checks
from experiment.config import load_config, model_identity, recipe_hash
from models.positional import SCHEMES, build_positional
from models.positional import plugins as plugin_registry
from studies.catalog import load_study
from tests.conftest import ROOT, TINY
from utils.errors import UserError

FAST = [check for check in CHECKS if check != "training"]

SLOPE = '''\
from dataclasses import dataclass

import torch

from models.positional import PositionalEncoding, SchemeCard


@dataclass
class Options:
    start: float = 0.5


class Slope(PositionalEncoding):
    """bias -w_h |j - i|, w_h learned from model.positional.{name}.start."""

    Options = Options
    card = SchemeCard(summary="learned-slope distance bias", paper="Tester 2026", relative=True)

    def __init__(self, kind, cfg):
        super().__init__(kind, cfg.d_model, cfg.n_heads)
        start = cfg.positional.options("{name}").start
        self.w = torch.nn.Parameter(torch.full((cfg.n_heads,), float(start)))

    def score_bias(self, q, k, q_pos, k_pos):
        distance = (k_pos[None, :] - q_pos[:, None]).abs().to(self.w.dtype)
        return (-self.w[:, None, None] * distance)[None]


SCHEMES = {{"{name}": Slope}}
'''


@pytest.fixture(autouse=True)
def registry_restored():
    """Every test leaves the registry as it found it: the other tests list the built-ins."""
    schemes, sources = dict(SCHEMES), dict(plugin_registry.SOURCES)
    yield
    SCHEMES.clear()
    SCHEMES.update(schemes)
    plugin_registry.SOURCES.clear()
    plugin_registry.SOURCES.update(sources)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def nmt(*args: str, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nmt", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **(env or {})}, timeout=timeout)


def refusal(tmp_path: Path, text: str, name: str = "bad_pe") -> str:
    """The one-line error of a config naming the plugin file ``text``."""
    path = write(tmp_path / f"{name}.py", text)
    with pytest.raises(UserError) as raised:
        load_config(None, [f"model.positional.plugins=[{json.dumps(str(path))}]"])
    message = str(raised.value)
    assert "\n" not in message and f"{name}.py" in message
    return message


def test_a_plugin_file_named_by_a_config_registers_relative_to_that_file_with_its_options(tmp_path):
    write(tmp_path / "pe" / "slope_pe.py", SLOPE.format(name="slope_pe"))
    config = write(tmp_path / "configs" / "exp.yaml", """\
        model:
          positional: {name: slope_pe, plugins: [../pe/slope_pe.py], slope_pe: {start: 0.25}}
        """)
    cfg = load_config(config).model
    assert cfg.positional.plugins == [str((tmp_path / "pe" / "slope_pe.py").resolve())]
    assert cfg.positional.options("slope_pe").start == 0.25
    module = build_positional(cfg, "encoder")
    assert module.w.tolist() == [0.25] * cfg.n_heads
    bias = module.score_bias(None, None, torch.arange(3), torch.arange(3))[0, 0]
    assert bias.tolist() == [[0.0, -0.25, -0.5], [-0.25, 0.0, -0.25], [-0.5, -0.25, 0.0]]  # -0.25 |j - i|
    with pytest.raises(UserError, match=r"unknown config key 'model.positional.slope_pe.stop'"):
        load_config(config, ["model.positional.slope_pe.stop=1"])


def test_where_the_file_lies_is_not_the_recipe_its_bytes_are(tmp_path):
    """Two copies of one plugin (a run's copy beside the file it trained from) share recipe and checkpoint
    identity; an edited copy does not."""
    first = write(tmp_path / "a" / "slope_pe.py", SLOPE.format(name="slope_pe"))
    second = write(tmp_path / "b" / "slope_pe.py", SLOPE.format(name="slope_pe"))
    edited = write(tmp_path / "c" / "slope_pe.py", SLOPE.format(name="slope_pe") + "# tuned\n")
    configs = [load_config(None, ["model.positional.name=slope_pe", f"model.positional.plugins=[{json.dumps(str(p))}]"])
               for p in (first, second, edited)]
    assert recipe_hash(configs[0]) == recipe_hash(configs[1]) != recipe_hash(configs[2])
    assert model_identity(configs[0]) == model_identity(configs[1])
    want = hashlib.sha256(first.read_bytes()).hexdigest()
    assert model_identity(configs[0])["positional"]["plugins"] == [want]
    assert plugin_registry.SOURCES["slope_pe"].sha256 == hashlib.sha256(edited.read_bytes()).hexdigest()  # the latest


def test_a_name_that_clashes_with_a_registered_scheme_is_refused(tmp_path):
    message = refusal(tmp_path, SLOPE.format(name="rope"))
    assert "scheme 'rope' clashes with the registered 'rope' (a built-in scheme" in message
    assert SCHEMES["rope"].__name__ == "RotaryPositional"
    write(tmp_path / "one" / "mine.py", SLOPE.format(name="mine"))
    plugin_registry.load_file(tmp_path / "one" / "mine.py")
    other = write(tmp_path / "two" / "other_file.py", SLOPE.format(name="mine"))
    with pytest.raises(UserError, match=r"scheme 'mine' clashes with the registered 'mine' \(the plugin sha256"):
        plugin_registry.load_file(other)


def test_a_card_missing_a_field_is_refused(tmp_path):
    message = refusal(tmp_path, SLOPE.format(name="bad_pe").replace('paper="Tester 2026", ', ""))
    assert "scheme 'bad_pe''s card is missing paper" in message
    no_card = SLOPE.format(name="bad_pe").replace('    card = SchemeCard(summary="learned-slope distance bias", '
                                                  'paper="Tester 2026", relative=True)\n', "")
    assert "declares no card = SchemeCard(...) of its own" in refusal(tmp_path, no_card)


def test_a_constructor_of_the_wrong_signature_is_refused(tmp_path):
    text = SLOPE.format(name="bad_pe").replace("def __init__(self, kind, cfg):", "def __init__(self, d_model, n_heads, "
                                                "max_len):")
    message = refusal(tmp_path, text)
    assert "constructor Slope(d_model, n_heads, max_len) must take (kind, model_cfg)" in message


def test_a_file_that_does_not_import_is_refused_with_its_error_and_line(tmp_path):
    text = SLOPE.format(name="bad_pe").replace("import torch\n", "import torch\nimport torch_extras_not_installed\n")
    message = refusal(tmp_path, text)
    assert message.endswith("bad_pe.py:4 does not import: ModuleNotFoundError: No module named "
                            "'torch_extras_not_installed'")
    broken = SLOPE.format(name="bad_pe").replace("    def score_bias(self, q, k, q_pos, k_pos):",
                                                 "    def score_bias(self, q, k, q_pos, k_pos)")
    assert "does not import: SyntaxError" in refusal(tmp_path, broken)
    assert "declares no schemes: it needs SCHEMES =" in refusal(tmp_path, "x = 1\n")
    assert "bad_pe" not in SCHEMES


def test_the_cli_says_a_refusal_in_one_line(tmp_path):
    path = write(tmp_path / "rope_again.py", SLOPE.format(name="rope"))
    done = nmt("scheme", "check", str(path), "--only", "padding")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "clashes with the registered 'rope'" in done.stderr


def test_all_means_the_built_in_schemes(tmp_path):
    plugin = write(tmp_path / "slope_pe.py", SLOPE.format(name="slope_pe"))
    write(tmp_path / "base.yaml", TINY.format(root=ROOT, cache=tmp_path / "cache"))
    study = write(tmp_path / "everything.yaml", f"""\
        config: base.yaml
        plugins: [{plugin.name}]
        schemes: all
        rows: {{mine: {{scheme: slope_pe}}}}
        seeds: [1]
        out: {tmp_path / 'runs'}
        """)
    loaded = load_study(study)
    builtin = ["none", "sinusoidal", "learnable", "rope", "alibi", "t5", "shaw", "xl", "deberta", "nezha", "xpos",
               "fire", "shape", "cape", "kerple", "randomized", "p_rope", "polar", "fox", "dape_alibi", "dape_kerple",
               "dape_fire", "cope", "fope"]  # models/positional/__init__.py's registry, in its order
    assert loaded.schemes == [*builtin, "mine"] and "slope_pe" in SCHEMES
    assert loaded.config("mine", 1).model.positional.plugins == [str(plugin.resolve())]


@pytest.mark.parametrize("kind", ["bias", "rotary", "embedding"])
def test_a_new_scheme_keeps_the_contract_as_written(tmp_path, kind):
    done = nmt("scheme", "new", f"my_{kind}", "--kind", kind, "--dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    source = (tmp_path / f"my_{kind}.py").read_text(encoding="utf-8")
    assert f'SCHEMES = {{"my_{kind}":' in source and "SchemeCard(" in source
    assert re.search(r"\(\w+, [^)]*\) -> ", source) or re.search(r"-> \(\w+, ", source)  # the hook's shapes stated
    names = plugin_registry.load_file(tmp_path / f"my_{kind}.py")
    assert names == [f"my_{kind}"]
    outcomes = run_checks(f"my_{kind}", (), FAST)
    assert [o.line() for o in outcomes if o.passed is False] == []
    assert sum(o.passed is True for o in outcomes) >= 8
    again = nmt("scheme", "new", f"my_{kind}", "--dir", str(tmp_path))
    assert again.returncode == 2 and "exists; nothing was written" in again.stderr
    assert nmt("scheme", "new", "rope", "--dir", str(tmp_path)).returncode == 2  # a registered name


def test_the_generated_test_file_runs_the_kit(tmp_path):
    assert nmt("scheme", "new", "my_table", "--kind", "embedding", "--dir", str(tmp_path)).returncode == 0
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(tmp_path / "test_my_table.py"), "-k", "not training"], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:]
    assert f"{len(FAST)} passed" in done.stdout


def package(tmp_path: Path) -> Path:
    """A package whose entry point (group nmt.schemes) names a scheme, installed with pip into a folder."""
    source = tmp_path / "ep_package"
    write(source / "pyproject.toml", """\
        [build-system]
        requires = ["setuptools"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "nmt-ep-slope"
        version = "0.3.1"

        [project.entry-points."nmt.schemes"]
        ep_slope = "nmt_ep_slope:Slope"
        """)
    write(source / "nmt_ep_slope" / "__init__.py", SLOPE.format(name="ep_slope"))
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
                           "--no-build-isolation", "--target", str(site), str(source)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return site


def test_a_plugin_file_and_an_installed_package_go_through_check_a_study_and_its_tables(tmp_path):
    site = package(tmp_path)
    env = {"PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    plugin = write(tmp_path / "study" / "slope_pe.py", SLOPE.format(name="slope_pe"))
    checked = nmt("scheme", "check", str(plugin), "ep_slope", "--only", "padding", "cache", "shift", env=env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "== slope_pe: 3 of 3 checks hold" in checked.stdout and "== ep_slope: 3 of 3 checks hold" in checked.stdout

    write(tmp_path / "study" / "base.yaml", TINY.format(root=ROOT, cache=tmp_path / "cache"))
    study = write(tmp_path / "study" / "mine.yaml", f"""\
        config: base.yaml
        plugins: [slope_pe.py]
        schemes: [sinusoidal, slope_pe, ep_slope]
        seeds: [1, 2]
        overrides: [train.max_steps=30, train.eval_every=30]
        out: {tmp_path / 'runs'}
        archive: {tmp_path / 'archive'}
        families:
          mine-vs-sinusoidal: {{baseline: sinusoidal, rows: [slope_pe, ep_slope], declared: 2026-11-29T09:00Z}}
        """)
    done = nmt("study", str(study), "--executor", "inline", env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    archive = tmp_path / "archive"
    digest = hashlib.sha256(plugin.read_bytes()).hexdigest()
    for seed_folder in ("slope_pe", "slope_pe-seed2"):
        run = archive / seed_folder
        assert (run / "plugins" / "slope_pe.py").read_bytes() == plugin.read_bytes()  # the run keeps its plugin
        assert yaml.safe_load((run / "config.yaml").read_text())["model"]["positional"]["plugins"] == [
            "plugins/slope_pe.py"]
        manifest = json.loads((run / "manifest.json").read_text())
        assert manifest["plugins"] == {"slope_pe": {"file": "slope_pe.py", "sha256": digest}}
    manifest = json.loads((archive / "ep_slope" / "manifest.json").read_text())
    assert manifest["plugins"] == {"ep_slope": {"package": "nmt-ep-slope", "version": "0.3.1"}}
    assert json.loads((archive / "sinusoidal" / "manifest.json").read_text())["plugins"] is None
    family = (archive / "family_mine-vs-sinusoidal_test.md").read_text(encoding="utf-8")
    rows = {line.split(" | ")[0].strip("| ") for line in family.splitlines() if line.startswith("| ")}
    assert {"slope_pe", "ep_slope"} <= rows
    assert f"Plugin schemes: ep_slope: nmt-ep-slope 0.3.1; slope_pe: slope_pe.py sha256 {digest[:12]}." in family
    page = (tmp_path / "runs" / "index.html").read_text(encoding="utf-8")  # the explorer page shows it as a row
    assert "slope_pe" in page and "ep_slope" in page
    translated = nmt("translate", "--run", str(tmp_path / "runs" / "slope_pe"), "--greedy", "Je la vois.", env=env)
    assert translated.returncode == 0, translated.stderr[-2000:]

    # another version of the plugin in one run: the tables refuse the mix unless the study declares it
    run = archive / "slope_pe-seed2"
    edited = plugin.read_text(encoding="utf-8") + "# retuned\n"
    (run / "plugins" / "slope_pe.py").write_text(edited, encoding="utf-8")
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["plugins"]["slope_pe"]["sha256"] = hashlib.sha256(edited.encode()).hexdigest()
    (run / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    refused = nmt("study", str(study), "--table", env=env)
    assert refused.returncode == 2
    assert "two versions of the plugin scheme 'slope_pe'" in refused.stderr and "mixed_plugins: true" in refused.stderr
    allowed = nmt("study", str(study), "--table", "study.mixed_plugins=true", env=env)
    assert allowed.returncode == 0, allowed.stderr[-2000:]
    assert "versions mixed as declared" in (archive / "comparison_test.md").read_text(encoding="utf-8")
