"""``nmt export --format hf``: a trained run as a `transformers` folder, loaded without the suite.

Native rows (sinusoidal, post-norm -> MarianMT, pre-norm -> Pegasus): the exported model's logits
are ours to 1e-5 on a test batch, and in a subprocess that cannot import the suite (another
folder, no PYTHONPATH, the hub offline) AutoTokenizer gives the suite's ids and greedy ``generate``
the suite's greedy outputs."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

from experiment.decode_config import DecodeConfig
from experiment.trained import load_run
from export.native import native_family, native_model
from models.marian_layout import model_permutation
from models.positional import SCHEMES
from nmt import evaluate, train
from search.greedy import max_lengths
from search.translate import translate
from tests.conftest import ROOT

LOGITS_TOLERANCE = 1e-5  # fp32: the permuted model sums in another order, nothing else differs
CLASSES = {"marian": "MarianMTModel", "pegasus": "PegasusForConditionalGeneration"}


def family_name(family: str) -> str:
    return {"marian": "MarianMT (post-norm)", "pegasus": "Pegasus (pre-norm)"}[family]


@pytest.fixture(scope="module")
def native_runs(runs) -> dict[str, object]:
    """The shared fixture's sinusoidal run (post-norm) and a pre-norm one of the same recipe."""
    pre = runs["sin1"].parent / "hf-prenorm"
    if not (pre / "checkpoints" / "best.pt").is_file():
        train.main(["--config", str(runs["sin1"].parent / "tiny.yaml"), "--run-dir", str(pre), "seed=1",
                    "model.norm_first=true"])
    return {"marian": runs["sin1"], "pegasus": pre}


def sources_of(run, n: int = 60) -> list[list[int]]:
    from data.corpus import load_corpus

    corpus = load_corpus(run.cfg.data, ["train"])["train"]
    return corpus.src[:n]


def test_the_permutation_puts_sines_first_then_cosines():
    # ours interleaves sin(w_i t), cos(w_i t) at 2i, 2i + 1; theirs holds the sines at i, the cosines at D/2 + i
    assert model_permutation(8).tolist() == [0, 2, 4, 6, 1, 3, 5, 7]


@pytest.mark.parametrize("family", ["marian", "pegasus"])
def test_the_native_model_computes_our_logits(native_runs, family):
    run = load_run(native_runs[family], "best", "cpu")
    assert native_family(run.model, run.tokenizer) == (family, "")
    theirs = native_model(family, run.model, run.tokenizer, run.cfg.model.positional.max_positions)
    tok = run.tokenizer
    ids = tok.encode_src(sources_of(run, 8))
    width = max(len(s) for s in ids) + 1
    src = torch.tensor([s + [tok.eos_id] + [tok.pad_id] * (width - len(s) - 1) for s in ids])
    tgt = torch.tensor([[tok.bos_id] + t for t in tok.encode_tgt(["a b c d e f g"] * 8)])
    with torch.no_grad():
        ours = run.model(src, tgt)
        exported = theirs(input_ids=src, attention_mask=src.ne(tok.pad_id), decoder_input_ids=tgt).logits
    assert ours.shape == exported.shape and ours.abs().max() > 1.0  # logits of a trained model, not of zeros
    assert (ours - exported).abs().max().item() <= LOGITS_TOLERANCE


LOADER = """
import json, sys
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
try:
    import models  # noqa: F401  the suite must not be importable here
    sys.exit("the suite is importable")
except ImportError:
    pass
folder, sources, limits = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
tok = AutoTokenizer.from_pretrained(folder)
model = AutoModelForSeq2SeqLM.from_pretrained(folder)
ids = [tok(s).input_ids for s in sources]
outputs = []
for s, limit in zip(sources, limits):
    batch = tok([s], return_tensors="pt")
    out = model.generate(**batch, num_beams=1, do_sample=False, max_new_tokens=limit + 1)[0].tolist()
    outputs.append(out)
print(json.dumps({"tokenizer": type(tok).__name__, "model": type(model).__name__, "ids": ids, "outputs": outputs,
                  "text": tok.batch_decode(outputs[:3], skip_special_tokens=True)}))
"""


@pytest.mark.parametrize("family", ["marian", "pegasus"])
def test_the_folder_loads_without_the_suite_and_generates_our_greedy_outputs(native_runs, family, tmp_path):
    out, run_dir = tmp_path / "hf", tmp_path / "run"
    shutil.copytree(native_runs[family], run_dir)  # evaluated here: the card reports its score
    evaluate.main(["--run", str(run_dir)])
    done = subprocess.run([sys.executable, "-m", "nmt", "export", "--run", str(run_dir), "--format", "hf",
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert {p.name for p in out.iterdir()} >= {"config.json", "generation_config.json", "model.safetensors",
                                               "source.spm", "target.spm", "vocab.json", "tokenizer_config.json",
                                               "README.md"}
    run = load_run(native_runs[family], "best", "cpu")
    tok, texts = run.tokenizer, sources_of(run)
    ids = tok.encode_src(texts)
    settings = DecodeConfig(beam=1, max_len_a=run.cfg.decode.max_len_a, max_len_b=run.cfg.decode.max_len_b)
    ours = [h[0].tokens for h in translate(run.model, ids, tok, settings)]
    limits = max_lengths(torch.tensor([len(s) + 1 for s in ids]), settings.max_len_a, settings.max_len_b).tolist()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"HF_HUB_OFFLINE": "1"}
    loaded = subprocess.run([sys.executable, "-c", LOADER, str(out), json.dumps(texts), json.dumps(limits)],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert loaded.returncode == 0, loaded.stderr
    found = json.loads(loaded.stdout.strip().splitlines()[-1])
    assert (found["tokenizer"], found["model"]) == ("MarianTokenizer", CLASSES[family])
    assert found["ids"] == [s + [tok.eos_id] for s in ids]  # the suite's ids, eos appended as its batches do
    ended = [i for i, hyp in enumerate(ours) if len(hyp) < limits[i]]  # ours closed by eos, not by its limit
    assert len(ended) >= 50 and len({tuple(ours[i]) for i in ended}) >= 30  # outputs that depend on the input
    for i in ended:
        assert found["outputs"][i] == [tok.bos_id, *ours[i], tok.eos_id], i
    assert found["text"] == [tok.decode_tgt(h) for h in ours[:3]]
    card = (out / "README.md").read_text(encoding="utf-8")
    record = json.loads((run_dir / "eval" / "test" / "results.json").read_text(encoding="utf-8"))
    assert f"| `test` | {record['bleu']:.2f} | {record['n_sentences']} | `{record['signature']}` |" in card
    assert "Arithmetic: every run CPU" in card and f"{family_name(family)} class: it loads without the suite" in card
    generation = json.loads((out / "generation_config.json").read_text(encoding="utf-8"))
    assert generation["decoder_start_token_id"] == tok.bos_id and generation["num_beams"] == run.cfg.decode.beam
    assert sorted(generation["suppress_tokens"]) == sorted([tok.pad_id, tok.bos_id])


SUITE_LOADER = """
import json, sys
import export.suite_model  # noqa: F401  registers the suite's classes with the Auto classes
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, pipeline
folder, sources, limits = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
tok = AutoTokenizer.from_pretrained(folder)
model = AutoModelForSeq2SeqLM.from_pretrained(folder)
outputs = [model.generate(**tok([s], return_tensors="pt"), num_beams=1, do_sample=False,
                          max_new_tokens=limit + 1)[0].tolist() for s, limit in zip(sources, limits)]
translate = pipeline("nmt-translation", model=folder)
texts = [translate(s, num_beams=1, max_new_tokens=limit + 1)["translation_text"] for s, limit in zip(sources, limits)]
print(json.dumps({"model": type(model).__name__, "outputs": outputs, "pipeline": texts}))
"""


@pytest.mark.parametrize("scheme", ["rope1", "learn1"])
def test_another_scheme_exports_in_the_suites_classes_and_generates_and_pipelines_our_greedy_outputs(runs, scheme, tmp_path):
    out = tmp_path / "hf"
    done = subprocess.run([sys.executable, "-m", "nmt", "export", "--run", str(runs[scheme]), "--format", "hf",
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    run = load_run(runs[scheme], "best", "cpu")
    assert config["model_type"] == "nmt-suite" and config["suite"]["model"]["positional"]["name"] == \
        run.cfg.model.positional.name and "trust_remote_code" not in json.dumps(config) and "auto_map" not in config
    tok, texts = run.tokenizer, sources_of(run, 40)
    ids = tok.encode_src(texts)
    settings = DecodeConfig(beam=1, max_len_a=run.cfg.decode.max_len_a, max_len_b=run.cfg.decode.max_len_b)
    ours = [h[0].tokens for h in translate(run.model, ids, tok, settings)]
    limits = max_lengths(torch.tensor([len(s) + 1 for s in ids]), settings.max_len_a, settings.max_len_b).tolist()
    loaded = subprocess.run([sys.executable, "-c", SUITE_LOADER, str(out), json.dumps(texts), json.dumps(limits)],
                            cwd=ROOT, env=os.environ | {"HF_HUB_OFFLINE": "1"}, capture_output=True, text=True,
                            timeout=300)
    assert loaded.returncode == 0, loaded.stderr
    found = json.loads(loaded.stdout.strip().splitlines()[-1])
    assert found["model"] == "NmtSuiteModel"
    ended = [i for i, hyp in enumerate(ours) if len(hyp) < limits[i]]
    assert len(ended) >= 30 and len({tuple(ours[i]) for i in ended}) >= 20
    for i in ended:
        assert found["outputs"][i] == [tok.bos_id, *ours[i], tok.eos_id], i
        assert found["pipeline"][i] == tok.decode_tgt(ours[i]), i  # pipeline("nmt-translation"): the same text


def test_a_folder_of_an_unknown_scheme_or_a_newer_suite_is_refused_in_one_line(runs, tmp_path):
    from export.suite_model import NmtSuiteConfig, check_loadable, suite_config
    from utils.errors import UserError

    config = suite_config(load_run(runs["rope1"], "best", "cpu")).to_dict()
    newer = NmtSuiteConfig(**{**config, "suite_version": "99.0.0"})
    with pytest.raises(UserError, match=r"^this folder was written by suite 99.0.0, newer than the installed "):
        check_loadable(newer)
    tree = json.loads(json.dumps(config["suite"]))
    tree["model"]["positional"]["name"] = "moon"
    with pytest.raises(UserError, match=r"^this folder's scheme moon is not registered in the installed suite"):
        check_loadable(NmtSuiteConfig(**{**config, "suite": tree}))


def test_quantization_is_refused_for_a_transformers_folder(runs, tmp_path):
    quantized = subprocess.run([sys.executable, "-m", "nmt", "export", "--run", str(runs["sin1"]), "--format", "hf",
                                "--out", str(tmp_path / "no"), "--quantization", "int8"], cwd=ROOT, capture_output=True,
                               text=True, timeout=300)
    assert quantized.returncode == 2 and quantized.stderr.strip() == (
        "error: --quantization is for --format ctranslate2 (transformers folders hold float32 weights)")
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_every_scheme_survives_save_and_from_pretrained_with_the_same_logits(scheme, tmp_path):
    """Random weights, every registered scheme: the suite-form model saved and loaded back by
    AutoModelForSeq2SeqLM gives the same logits (the buffers no checkpoint holds — ALiBi's slopes,
    rotary frequencies — recomputed: `transformers` builds the model without running their
    initialisation; without ``restore_buffers`` ALiBi, p-RoPE, DAPE-ALiBi and FoPE differ, NEZHA and
    xPos give NaN)."""
    from transformers import AutoModelForSeq2SeqLM

    import export.suite_model  # noqa: F401  the Auto classes' registration
    from experiment.config import load_config, own_tree
    from export.suite_model import NmtSuiteConfig, NmtSuiteModel

    cfg = load_config(None, [f"model.positional.name={scheme}", "model.d_model=32", "model.n_heads=4", "model.d_ff=64",
                             "model.n_encoder_layers=1", "model.n_decoder_layers=1"])
    torch.manual_seed(0)
    model = NmtSuiteModel(NmtSuiteConfig(suite=own_tree(cfg), src_vocab_size=40, tgt_vocab_size=40, pad_token_id=0,
                                         bos_token_id=2, eos_token_id=3, decoder_start_token_id=2))
    for parameter in model.model.parameters():
        torch.nn.init.normal_(parameter, 0.0, 0.2)
    model.eval().save_pretrained(tmp_path)
    again = AutoModelForSeq2SeqLM.from_pretrained(tmp_path).eval()
    src, tgt = torch.tensor([[5, 6, 7, 8, 3], [9, 10, 3, 0, 0]]), torch.tensor([[2, 11, 12, 13], [2, 14, 15, 16]])
    with torch.no_grad():
        before = model(input_ids=src, attention_mask=src.ne(0), decoder_input_ids=tgt).logits
        after = again(input_ids=src, attention_mask=src.ne(0), decoder_input_ids=tgt).logits
    assert type(again) is NmtSuiteModel and torch.isfinite(before).all() and before.abs().max() > 0.1
    assert torch.equal(before, after)


def test_test_time_settings_are_carried_in_the_config_and_computed_alike(runs, tmp_path):
    """YaRN and log-n on the rope run (the training lengths from its manifest): config.json carries
    them, and on a batch with a source over twice the training length, where both act, the
    exported model's logits are the suite's under the same settings (and not the plain run's)."""
    from transformers import AutoModelForSeq2SeqLM

    import export.suite_model  # noqa: F401  the Auto classes' registration
    from experiment.manifest import read_manifest

    settings = ["model.length_scaling.rotary=yarn", "model.length_scaling.logn=true"]
    out = tmp_path / "hf"
    done = subprocess.run([sys.executable, "-m", "nmt", "export", "--run", str(runs["rope1"]), "--format", "hf",
                           "--out", str(out), *settings], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    carried = json.loads((out / "config.json").read_text(encoding="utf-8"))["suite"]["model"]["length_scaling"]
    longest = read_manifest(runs["rope1"]).longest_training_tokens
    assert carried["rotary"] == "yarn" and carried["logn"] is True
    assert (carried["train_source_tokens"], carried["train_target_tokens"]) == (longest["source"], longest["target"])
    plain = load_run(runs["rope1"], "best", "cpu")
    scaled = load_run(runs["rope1"], "best", "cpu", overrides=[
        f"model.length_scaling.train_source_tokens={longest['source']}",
        f"model.length_scaling.train_target_tokens={longest['target']}", *settings])
    tok, texts = plain.tokenizer, sources_of(plain, 12)
    ids = tok.encode_src([" ".join(texts[:6]), *texts[6:]])
    assert len(ids[0]) + 1 > 2 * longest["source"]
    width = max(len(s) for s in ids) + 1
    src = torch.tensor([s + [tok.eos_id] + [tok.pad_id] * (width - len(s) - 1) for s in ids])
    tgt = torch.tensor([[tok.bos_id] + t for t in tok.encode_tgt([" ".join(texts[:6])] * len(ids))])
    model = AutoModelForSeq2SeqLM.from_pretrained(out).eval()
    with torch.no_grad():
        ours, before = scaled.model(src, tgt), plain.model(src, tgt)
        theirs = model(input_ids=src, attention_mask=src.ne(tok.pad_id), decoder_input_ids=tgt).logits
    assert (ours - theirs).abs().max().item() <= LOGITS_TOLERANCE
    assert (ours[0] - before[0]).abs().max().item() > 1e-2  # the settings act on the long sentence


def test_a_sinusoidal_run_with_a_test_time_setting_exports_in_the_suites_classes(runs, tmp_path):
    done = subprocess.run([sys.executable, "-m", "nmt", "export", "--run", str(runs["sin1"]), "--format", "hf",
                           "--out", str(tmp_path / "hf"), "model.length_scaling.logn=true"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    config = json.loads((tmp_path / "hf" / "config.json").read_text(encoding="utf-8"))
    assert config["model_type"] == "nmt-suite" and config["suite"]["model"]["length_scaling"]["logn"] is True


def test_a_setting_the_run_cannot_take_is_refused_in_one_line(runs, tmp_path):
    done = subprocess.run([sys.executable, "-m", "nmt", "export", "--run", str(runs["learn1"]), "--format", "hf",
                           "--out", str(tmp_path / "hf"), "model.length_scaling.rotary=yarn"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "length_scaling.rotary" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "hf").exists()
