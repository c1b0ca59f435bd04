"""The contract a positional encoding must keep to serve in the suite, as checks that need no
reference implementation. Each check builds a tiny model with the scheme (d_model 32, 4 heads, 2+2
layers, the scheme in cross-attention too where it acts there), random but fixed weights, and returns
one ``Outcome``: passed, failed with the case and its numbers, or not applicable with the reason.

- ``padding``: padding a source with more pad tokens changes no logit (encoder self- and cross-attention
  ignore padded keys);
- ``cache``: decoding step by step from the cache gives the whole pass's logits;
- ``beam``: cross-attention with each sentence's memory shared by a group of hypotheses (beam search's
  layout) gives the whole pass on the repeated sources;
- ``batch``: a sentence alone gives its logits in a batch beside a longer one;
- ``bf16``: logits under bfloat16 autocast stay finite and within ``BF16_TOLERANCE`` of fp32's;
- ``shift``: where the card says the scheme is relative (``SchemeCard.relative``), the embeddings and
  attention computed at positions shifted by a constant equal those at the original positions (encoder
  and decoder self-attention);
- ``gradients``: one training loss's gradient is finite for every parameter;
- ``checkpoint``: the state dict holds the learned parameters and nothing the config rebuilds, and a
  model loaded from it gives the same logits;
- ``deterministic``: two evaluations of one batch are bit for bit equal;
- ``export``: the CTranslate2 export accepts the scheme, or refuses it in one line naming it;
- ``flex``: where the scheme declares a FlexAttention form, the flex kernel's attention equals SDPA's;
- ``training``: ``TRAINING_UPDATES`` updates on the built-in grammar lower the training loss to at most
  ``TRAINING_FACTOR`` of its first value.

``run_checks(name)`` runs them (or the named ones) in that order; ``contract.kit`` never imports a test.
"""
from __future__ import annotations

import io
import math
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from experiment.config import load_config
from models.attention import MultiHeadAttention
from models.positional import SCHEMES, build_positional, flex_form, scheme_names, scheme_parts
from models.transformer import Transformer
from search.ctranslate2 import check_exportable
from utils.errors import UserError
from utils.paths import CONFIGS

D_MODEL, HEADS, VOCAB, PAD, BOS, EOS = 32, 4, 24, 0, 1, 2
TOLERANCE = {"atol": 1e-5, "rtol": 1e-4}  # float32 sums in another order
BF16_TOLERANCE = 0.08  # |bf16 - fp32| <= 0.08 * (1 + max |fp32 logit|): bfloat16 keeps 8 bits of mantissa
TRAINING_UPDATES, TRAINING_FACTOR = 100, 0.8


@dataclass(frozen=True)
class Outcome:
    """One check's result: ``passed`` True, False, or None when the check does not apply (``detail`` says why)."""

    check: str
    passed: bool | None
    detail: str

    def line(self) -> str:
        mark = {True: "pass", False: "FAIL", None: "n/a "}[self.passed]
        return f"{mark}  {self.check:<13} {self.detail}"


def model_config(name: str, extra: tuple[str, ...] = ()):
    """The tiny model's config with scheme ``name`` (cross-attention on where every part acts there)."""
    cross = all(SCHEMES[n].card.cross_attention == "acts" for n in scheme_names(name))
    return load_config(None, [f"model.positional.name={name}", f"model.d_model={D_MODEL}", f"model.n_heads={HEADS}",
                              "model.d_ff=64", "model.n_encoder_layers=2", "model.n_decoder_layers=2",
                              "model.dropout=0.0", f"model.positional.cross_attention={str(cross).lower()}",
                              *extra]).model


def tiny_model(name: str, extra: tuple[str, ...] = (), seed: int = 0) -> Transformer:
    """The tiny model in evaluation mode, every parameter moved off its initial value (terms that start at
    zero, as XL's u and v, act too)."""
    torch.manual_seed(seed)
    model = Transformer(model_config(name, extra), VOCAB, VOCAB, pad_id=PAD, joint_vocab=True).eval()
    with torch.no_grad():
        for pe in (model.encoder_pe, model.decoder_pe, model.cross_pe):
            for p in pe.parameters():
                p.add_(torch.randn_like(p) * 0.05)
    return model


def sentences(lengths: list[int], total: int, seed: int = 1) -> torch.Tensor:
    """(B, total) token ids: sentence b has lengths[b] tokens (the last EOS), then padding."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, VOCAB, (len(lengths), total), generator=g)
    for b, n in enumerate(lengths):
        ids[b, n - 1], ids[b, n:] = EOS, PAD
    return ids


def targets(rows: int, length: int = 6, seed: int = 2) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    tgt = torch.randint(3, VOCAB, (rows, length), generator=g)
    tgt[:, 0] = BOS
    return tgt


def differs(got: torch.Tensor, want: torch.Tensor) -> str | None:
    """None when the two agree within ``TOLERANCE``, else the largest difference."""
    if torch.allclose(got, want, **TOLERANCE):
        return None
    return f"max |difference| {(got - want).abs().max().item():.3g} (tolerance {TOLERANCE['atol']:g} + {TOLERANCE['rtol']:g} x |value|)"


def stepwise_logits(model: Transformer, src: torch.Tensor, tgt: torch.Tensor, group: int = 1) -> torch.Tensor:
    """Logits (B·group, T, V) of targets ``tgt`` decoded one token a step from the cache, each source
    row's memory shared by ``group`` consecutive target rows (beam search's layout)."""
    cache, steps = model.start_decoding(model.encode(src), group=group), []
    for t in range(tgt.size(1)):
        out = model.decode(tgt[:, t:t + 1], cache)
        cache, steps = out.cache, steps + [out.logits]
    return torch.cat(steps, 1)


def check_padding(name: str, extra: tuple[str, ...]) -> Outcome:
    model, tgt = tiny_model(name, extra), targets(1)
    src = sentences([7], 7)
    padded = torch.cat([src, torch.full((1, 5), PAD)], 1)
    with torch.no_grad():
        problem = differs(model(padded, tgt), model(src, tgt))
    return Outcome("padding", problem is None, problem and f"a 7-token source padded to 12: {problem}"
                   or "a 7-token source padded to 12 gives the same logits (encoder and cross-attention)")


def check_cache(name: str, extra: tuple[str, ...]) -> Outcome:
    model, src, tgt = tiny_model(name, extra), sentences([7, 5], 7), targets(2)
    with torch.no_grad():
        whole, stepped = model(src, tgt), stepwise_logits(model, src, tgt)
    for t in range(tgt.size(1)):
        problem = differs(stepped[:, t], whole[:, t])
        if problem:
            return Outcome("cache", False, f"step {t} of {tgt.size(1)} from the cache: {problem}")
    return Outcome("cache", True, f"{tgt.size(1)} steps from the cache give the whole pass's logits")


def check_beam(name: str, extra: tuple[str, ...]) -> Outcome:
    model, src, group = tiny_model(name, extra), sentences([7, 5], 7), 3
    tgt = targets(2 * group)
    with torch.no_grad():
        whole, stepped = model(src.repeat_interleave(group, 0), tgt), stepwise_logits(model, src, tgt, group)
    problem = differs(stepped, whole)
    return Outcome("beam", problem is None, problem and f"{group} hypotheses a sentence on one memory row: {problem}"
                   or f"{group} hypotheses a sentence sharing one memory row give the whole pass")


def check_batch(name: str, extra: tuple[str, ...]) -> Outcome:
    model, src, tgt = tiny_model(name, extra), sentences([10, 6], 10), targets(2)
    with torch.no_grad():
        together = model(src, tgt)
        alone = model(src[1:, :6], tgt[1:])
    problem = differs(together[1], alone[0])
    return Outcome("batch", problem is None, problem and f"a 6-token sentence beside a 10-token one: {problem}"
                   or "a sentence alone gives its logits in a batch beside a longer one")


def check_bf16(name: str, extra: tuple[str, ...]) -> Outcome:
    model, src, tgt = tiny_model(name, extra), sentences([9, 6], 9), targets(2)
    with torch.no_grad():
        want = model(src, tgt)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            got = model(src, tgt).float()
    if not torch.isfinite(got).all():
        return Outcome("bf16", False, f"{int((~torch.isfinite(got)).sum())} logits not finite under bfloat16 autocast")
    error, bound = (got - want).abs().max().item(), BF16_TOLERANCE * (1 + want.abs().max().item())
    return Outcome("bf16", error <= bound, f"max |bf16 - fp32| {error:.3g} (bound {bound:.3g})")


def check_shift(name: str, extra: tuple[str, ...]) -> Outcome:
    if not all(SCHEMES[n].card.relative for n in scheme_names(name)):
        return Outcome("shift", None, "the card does not say the scheme is relative (SchemeCard.relative)")
    cfg = model_config(name, extra)
    torch.manual_seed(3)
    x = torch.randn(2, 7, D_MODEL)
    for kind, causal in (("encoder", False), ("decoder", True)):
        pe = build_positional(cfg, kind).eval()
        with torch.no_grad():
            for p in pe.parameters():
                p.add_(torch.randn_like(p) * 0.05)
            att = MultiHeadAttention(D_MODEL, HEADS).eval()
            pos = torch.arange(7)
            want, _, _ = att(pe.embed(x, pos), pe, pos, pos, causal=causal)
            for shift in (5, 40):
                moved = pos + shift
                got, _, _ = att(pe.embed(x, moved), pe, moved, moved, causal=causal)
                problem = differs(got, want)
                if problem:
                    return Outcome("shift", False, f"{kind} self-attention at positions shifted by {shift}: {problem}")
    return Outcome("shift", True, "attention at positions shifted by 5 and 40 equals attention at 0..6 (encoder, "
                                  "decoder)")


def check_gradients(name: str, extra: tuple[str, ...]) -> Outcome:
    model, src, tgt = tiny_model(name, extra).train(), sentences([8, 6], 8), targets(2)
    logits = model(src, tgt[:, :-1])
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tgt[:, 1:].reshape(-1))
    loss.backward()
    bad = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is not None
           and not torch.isfinite(p.grad).all()]
    if bad:
        return Outcome("gradients", False, f"not finite: {', '.join(bad[:3])}{' ...' if len(bad) > 3 else ''}")
    count = sum(1 for p in model.parameters() if p.requires_grad)
    return Outcome("gradients", True, f"finite for all {count} parameter tensors")


def check_checkpoint(name: str, extra: tuple[str, ...]) -> Outcome:
    cfg = model_config(name, extra)
    for kind in ("encoder", "decoder", "cross"):
        pe = build_positional(cfg, kind)
        saved, learned = set(pe.state_dict()), {n for n, _ in pe.named_parameters()}
        if saved != learned:
            extra_keys = sorted(saved - learned) or sorted(learned - saved)
            return Outcome("checkpoint", False, f"the {kind}'s state dict holds {', '.join(extra_keys[:3])} beside its "
                                                f"learned parameters (a table the config rebuilds must not be saved)")
    model, src, tgt = tiny_model(name, extra), sentences([7], 7), targets(1)
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    again = Transformer(cfg, VOCAB, VOCAB, pad_id=PAD, joint_vocab=True).eval()
    again.load_state_dict(torch.load(buffer, weights_only=True))
    with torch.no_grad():
        same = torch.equal(model(src, tgt), again(src, tgt))
    return Outcome("checkpoint", same, "learned parameters only; reloaded, the same logits" if same
                   else "a model loaded from the state dict gives other logits")


def check_deterministic(name: str, extra: tuple[str, ...]) -> Outcome:
    model, src, tgt = tiny_model(name, extra), sentences([8, 5], 8), targets(2)
    with torch.no_grad():
        same = torch.equal(model(src, tgt), model(src, tgt))
    return Outcome("deterministic", same, "two evaluations of one batch are equal bit for bit" if same
                   else "two evaluations of one batch differ (randomness left on in evaluation?)")


def check_export(name: str, extra: tuple[str, ...]) -> Outcome:
    try:  # as users train it: self-attention only unless ``extra`` says otherwise
        check_exportable(model_config(name, ("model.positional.cross_attention=false", *extra)))
    except UserError as err:
        one_line = "\n" not in str(err) and scheme_parts(name)[0] in str(err)
        return Outcome("export", one_line, f"refused in one line: {err}" if one_line
                       else f"refused without one line naming the scheme: {str(err)[:120]!r}")
    return Outcome("export", True, "CTranslate2 expresses it")


def check_flex(name: str, extra: tuple[str, ...]) -> Outcome:
    parts = scheme_names(name)
    if not all(flex_form(SCHEMES[n]).startswith("score_mod") for n in parts):
        return Outcome("flex", None, "the scheme declares no FlexAttention form")
    cfg = model_config(name, extra)
    torch.manual_seed(4)
    x = torch.randn(2, 6, D_MODEL)
    pos = torch.arange(6)
    for kind, causal in (("encoder", False), ("decoder", True)):
        pe = build_positional(cfg, kind).eval()
        sdpa = MultiHeadAttention(D_MODEL, HEADS).eval()
        flex = MultiHeadAttention(D_MODEL, HEADS, kernel="flex").eval()
        flex.load_state_dict(sdpa.state_dict())
        with torch.no_grad(), warnings.catch_warnings():
            # uncompiled on purpose (any CPU): the same arithmetic as the fused kernel, without its build time
            warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
            want, _, _ = sdpa(x, pe, pos, pos, causal=causal)
            got, _, _ = flex(x, pe, pos, pos, causal=causal)
        problem = differs(got, want)
        if problem:
            return Outcome("flex", False, f"{kind}: FlexAttention against SDPA: {problem}")
    return Outcome("flex", True, "FlexAttention's attention equals SDPA's (encoder, decoder)")


def check_training(name: str, extra: tuple[str, ...]) -> Outcome:
    from training.loop import train  # noqa: PLC0415 (the one check that trains: imported when run)

    cross = all(SCHEMES[n].card.cross_attention == "acts" for n in scheme_names(name))
    overrides = [f"model.positional.name={name}", f"model.d_model={D_MODEL}", f"model.n_heads={HEADS}", "model.d_ff=64",
                 f"model.positional.cross_attention={str(cross).lower()}", *extra,
                 f"train.max_steps={TRAINING_UPDATES}", f"train.eval_every={TRAINING_UPDATES}", "train.log_every=10",
                 "train.warmup_steps=10", "train.max_tokens=800", "data.synthetic.train.size=2000",
                 "data.synthetic.validation.size=20", "data.synthetic.test.size=10", "data.synthetic.test_long.size=10",
                 "tokenizer.vocab_size=300", "train.valid_bleu_sentences=20"]
    with tempfile.TemporaryDirectory() as folder:
        cfg = load_config(CONFIGS / "synthetic" / "base.yaml",
                          [*overrides, f"data.cache_dir={folder}/cache"])
        train(cfg, Path(folder) / "run")
        losses = [r["loss"] for r in _training_points(Path(folder) / "run")]
    if len(losses) < 2 or not all(math.isfinite(v) for v in losses):
        return Outcome("training", False, f"training losses {losses}")
    ratio = losses[-1] / losses[0]
    return Outcome("training", ratio <= TRAINING_FACTOR, f"{TRAINING_UPDATES} updates on the grammar: loss "
                   f"{losses[0]:.2f} at update 10 -> {losses[-1]:.2f} ({ratio:.2f} of it; at most {TRAINING_FACTOR})")


def _training_points(run: Path) -> list[dict]:
    from experiment.run_dir import read_metrics_log  # noqa: PLC0415

    return [r for r in read_metrics_log(run) if r.get("kind") == "train"]


CHECKS: dict[str, Callable[[str, tuple[str, ...]], Outcome]] = {
    "padding": check_padding, "cache": check_cache, "beam": check_beam, "batch": check_batch, "bf16": check_bf16,
    "shift": check_shift, "gradients": check_gradients, "checkpoint": check_checkpoint,
    "deterministic": check_deterministic, "export": check_export, "flex": check_flex, "training": check_training}


def run_checks(name: str, extra: tuple[str, ...] = (), only: list[str] | None = None) -> list[Outcome]:
    """Every check (or those named in ``only``) on scheme ``name`` with config overrides ``extra``; a check
    that raises is a failed check naming the error's last line."""
    unknown = [c for c in only or [] if c not in CHECKS]
    if unknown:
        raise UserError(f"unknown check(s) {', '.join(unknown)} (checks: {', '.join(CHECKS)})")
    outcomes = []
    for check in only or list(CHECKS):
        try:
            outcomes.append(CHECKS[check](name, tuple(extra)))
        except UserError:
            raise
        except Exception as err:  # noqa: BLE001 (a scheme's own error is the check's finding)
            last = (str(err).strip().splitlines() or [type(err).__name__])[-1]
            outcomes.append(Outcome(check, False, f"raised {type(err).__name__}: {last}"))
    return outcomes
