"""CTranslate2 export (``python -m nmt export``) and engine (``inference.py --engine ctranslate2``):
parity with the PyTorch model on tiny trained runs of every exportable scheme."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from experiment.decode_config import DecodeConfig
from experiment.trained import load_run
from nmt import train
from search.ctranslate2 import CTranslate2Translator, export_ctranslate2, exportable_schemes
from search.translate import translate
from tests.conftest import ROOT
from utils.errors import UserError

# |log-probability difference| per target token. The exported model scores a given target as ours
# does to ~1e-5 (CTranslate2's score_batch); the scores its search returns differ more (measured up
# to 1.0e-3 per token on these tiny models; its decoding kernels), with the same tokens.
MODEL_TOLERANCE = 1e-4
SEARCH_TOLERANCE = 2e-3


# beside every exportable scheme with its defaults: post-norm, SHAPE decoding at a shift, randomized
# over a rotary base (its default base is sinusoidal)
VARIANTS = {"sinusoidal-postnorm": ["model.norm_first=false"],
            "shape-shifted": ["model.positional.name=shape", "model.positional.shape.eval_shift=3"],
            "randomized-rope": ["model.positional.name=randomized", "model.positional.randomized.base=rope"]}


@pytest.fixture(scope="module")
def scheme_runs(runs) -> dict[str, object]:
    """Tiny trained runs of every exportable scheme, and a post-norm one, with the shared fixture's
    recipe (conftest.TINY: a model that translates, so its outputs differ from sentence to
    sentence and two engines cannot agree by both giving one output; about 6 s each)."""
    config = runs["sin1"].parent / "tiny.yaml"
    out = {}
    for name in (*exportable_schemes(), *VARIANTS):
        overrides = VARIANTS.get(name, [f"model.positional.name={name}"])
        out[name] = runs["sin1"].parent / f"ct2-{name}"
        if not (out[name] / "checkpoints" / "best.pt").is_file():
            train.main(["--config", str(config), "--run-dir", str(out[name]), *overrides])
    return out


def sources_of(run, n: int = 60) -> list[list[int]]:
    from data.corpus import load_corpus

    corpus = load_corpus(run.cfg.data, ["train"])["train"]  # enough sentences; parity is about the engine
    return run.tokenizer.encode_src(corpus.src[:n])


@torch.no_grad()
def log_prob(run, src: list[int], tokens: list[int], banned: bool = True) -> float:
    """Teacher-forced log-probability of tokens + eos under our model; with ``banned`` the softmax
    is taken over the tokens the search may produce (CTranslate2 suppresses pad and bos before
    its softmax, so its search's log-probabilities are renormalised over the rest)."""
    tok = run.tokenizer
    target = tokens + [tok.eos_id]
    logits = run.model(torch.tensor([src + [tok.eos_id]]), torch.tensor([[tok.bos_id] + target[:-1]]))[0].float()
    if banned:
        logits[:, [tok.pad_id, tok.bos_id]] = float("-inf")
    return torch.log_softmax(logits, -1)[torch.arange(len(target)), torch.tensor(target)].sum().item()


@pytest.mark.parametrize("name", [*exportable_schemes(), *VARIANTS])
def test_ctranslate2_greedy_output_equals_ours(scheme_runs, tmp_path, name):
    run = load_run(scheme_runs[name], "best", "cpu")
    assert run.cfg.model.positional.name in exportable_schemes()
    assert set(exportable_schemes()) >= {"none", "sinusoidal", "learnable", "rope", "t5", "shaw", "nezha", "shape",
                                         "cape", "randomized"}
    engine = CTranslate2Translator(export_ctranslate2(run, tmp_path / "ct2"), run.tokenizer)
    sources = sources_of(run)
    settings = DecodeConfig(beam=1, max_len_a=run.cfg.decode.max_len_a, max_len_b=run.cfg.decode.max_len_b)
    ours = translate(run.model, sources, run.tokenizer, settings)
    theirs = translate(run.model, sources, run.tokenizer, settings, engine=engine)
    assert len(sources) >= 50
    assert len({tuple(h[0].tokens) for h in ours}) >= 30  # the model really depends on its input
    assert [h[0].tokens for h in theirs] == [h[0].tokens for h in ours]
    tok = run.tokenizer
    scored = engine.translator.score_batch([tok.src_pieces(s + [tok.eos_id]) for s in sources[:20]],
                                           [tok.tgt_pieces(h[0].tokens) for h in ours[:20]])
    for src, hyps, result in zip(sources, ours, scored):
        target = hyps[0].tokens
        assert abs(sum(result.log_probs) - log_prob(run, src, target, banned=False)) <= MODEL_TOLERANCE * (len(target) + 1)
    # the scores of its beam search (length penalty 0: log-probabilities) against our model's
    beam = DecodeConfig(beam=2, len_penalty=0.0, max_len_a=run.cfg.decode.max_len_a,
                          max_len_b=run.cfg.decode.max_len_b)
    for src, hyps in zip(sources[:20], engine.search(sources[:20], beam)):
        tokens, score = hyps[0]
        if len(tokens) < int((len(src) + 1) * beam.max_len_a + beam.max_len_b):  # ended with eos
            assert abs(score - log_prob(run, src, tokens)) <= SEARCH_TOLERANCE * (len(tokens) + 1)


def test_export_command_writes_a_loadable_model_and_refuses_other_schemes(runs, tmp_path):
    import ctranslate2

    out = tmp_path / "exported"
    done = subprocess.run([sys.executable, "-m", "nmt", "export", "--run", str(runs["sin1"]), "--format", "ctranslate2",
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert ctranslate2.Translator(str(out)).translate_batch([["▁je", "</s>"]], max_decoding_length=3)
    config = runs["sin1"].parent / "tiny.yaml"
    alibi = runs["sin1"].parent / "ct2-alibi"
    if not (alibi / "checkpoints" / "best.pt").is_file():
        train.main(["--config", str(config), "--run-dir", str(alibi), "train.max_steps=2", "train.eval_every=2",
                    "model.positional.name=alibi"])
    refused = subprocess.run([sys.executable, "-m", "nmt", "export", "--run", str(alibi), "--format", "ctranslate2",
                              "--out", str(tmp_path / "no")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.strip() == (
        "error: scheme 'alibi' cannot be exported to CTranslate2; its Transformer spec expresses none, sinusoidal, "
        "learnable, rope, t5, shaw, nezha, shape, cape, randomized (self-attention only; a scheme of form 'base' "
        "over one of the others)")
    assert not (tmp_path / "no").exists()


def test_randomized_exports_as_its_base_or_refuses_with_it():
    from experiment.config import load_config
    from search.ctranslate2 import check_exportable

    for base in ("sinusoidal", "rope", "t5", "shaw", "nezha", "learnable"):
        check_exportable(load_config(None, ["model.positional.name=randomized",
                                            f"model.positional.randomized.base={base}"]).model)
    for base in ("alibi", "xpos", "kerple"):
        with pytest.raises(UserError, match=f"^scheme 'randomized' over '{base}' cannot be exported to CTranslate2"):
            check_exportable(load_config(None, ["model.positional.name=randomized",
                                                f"model.positional.randomized.base={base}"]).model)
    with pytest.raises(UserError, match="^nezha without the value term"):
        check_exportable(load_config(None, ["model.positional.name=randomized", "model.positional.randomized.base=nezha",
                                            "model.positional.nezha.values=false"]).model)


def test_inference_with_ctranslate2_prints_what_the_torch_engine_prints(runs):
    lines = "Je la vois.\nNous aimons la voiture rouge.\n\nIl ne mange pas.\n"

    def infer(*extra):
        done = subprocess.run([sys.executable, "inference.py", "--run", str(runs["rope1"]), "--greedy", *extra],
                              cwd=ROOT, input=lines, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout

    torch_out = infer("--engine", "torch")
    assert infer("--engine", "ctranslate2") == torch_out
    assert infer() == torch_out  # auto: CTranslate2 for greedy search of an exportable scheme
    assert (runs["rope1"] / "ctranslate2" / "best" / "model.bin").is_file()  # exported on first use, cached
    assert len(torch_out.splitlines()) == 4


def test_auto_takes_ctranslate2_only_where_it_prints_what_torch_prints(scheme_runs, monkeypatch):
    from search.engines import choose_engine

    rope = load_run(scheme_runs["rope"], "best", "cpu")
    greedy, beam = DecodeConfig(beam=1), DecodeConfig(beam=3)
    chosen = choose_engine(rope, greedy)
    assert chosen.name == "ctranslate2" and isinstance(chosen.engine, CTranslate2Translator)
    assert chosen.line() == "engine: ctranslate2 (auto: greedy search of an exportable scheme, same output as torch)"
    assert choose_engine(rope, beam).name == "torch" and "beam search" in choose_engine(rope, beam).reason
    assert choose_engine(rope, greedy, "torch").engine is None
    assert choose_engine(rope, beam, "ctranslate2").name == "ctranslate2"  # asked for: whatever the search
    alibi = load_run(scheme_runs["sinusoidal"], "best", "cpu")
    alibi.cfg.model.positional.name = "alibi"  # the choice reads the config only
    fallback = choose_engine(alibi, greedy)
    assert fallback.name == "torch" and "scheme 'alibi' cannot be exported" in fallback.reason
    with pytest.raises(UserError, match="scheme 'alibi' cannot be exported"):
        choose_engine(alibi, greedy, "ctranslate2")

    def unwritable(run):
        from utils.errors import ResourceError

        raise ResourceError(f"cannot write {run.run_dir / 'ctranslate2'}: Read-only file system; choose a writable folder")

    monkeypatch.setattr("search.ctranslate2.exported_model", unwritable)
    assert choose_engine(rope, greedy).name == "torch" and "Read-only file system" in choose_engine(rope, greedy).reason
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None)
    assert choose_engine(rope, greedy).reason == "auto: the ctranslate2 package is not installed"


def test_test_command_on_auto_scores_greedy_search_as_the_torch_engine_does(scheme_runs):
    import json

    run_dir = scheme_runs["t5"]

    def evaluate(*extra) -> tuple[str, dict, str]:
        done = subprocess.run([sys.executable, "test.py", "--run", str(run_dir), "--beam", "1", *extra], cwd=ROOT,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        folder = run_dir / "eval" / "test"
        return (folder / "hyps.txt").read_text(encoding="utf-8"), json.loads(
            (folder / "results.json").read_text(encoding="utf-8")), done.stderr

    torch_hyps, torch_results, torch_err = evaluate("--engine", "torch")
    auto_hyps, auto_results, auto_err = evaluate()
    assert "engine: torch (asked for)" in torch_err and "engine: ctranslate2 (auto:" in auto_err
    assert (torch_results["engine"], auto_results["engine"]) == ("torch", "ctranslate2")
    assert auto_hyps == torch_hyps and len(set(auto_hyps.splitlines())) > 10
    assert auto_results["bleu"] == torch_results["bleu"]
