"""What every positional scheme promises besides its formula (``test_attention_reference.py`` and
``test_positional.py`` check the formulas): the range and message of each option, the attention
kind it serves, the device and dtype it computes on, what its checkpoint holds, its initial
parameters, and what combinations and the randomized wrapper hand to their parts."""
from __future__ import annotations

import math

import pytest
import torch

from experiment.config import load_config
from models.attention import MultiHeadAttention
from models.positional import SCHEMES, adds_score_bias, build_positional, components, distance_profile
from models.positional.rotary import RotaryPositional
from models.positional.sinusoidal import sinusoidal_at
from models.positional.t5 import T5Positional
from tests.reference import reference_attention, scheme_terms, sinusoid
from utils.errors import ConfigError

D, H = 32, 4
KINDS = ["encoder", "decoder", "cross"]


def model_cfg(name: str, *extra: str, d_model: int = D, n_heads: int = H):
    # schemes that do not act in cross-attention (randomized, the self-attention-only ones) refuse it there
    cross = all(SCHEMES[n].card.cross_attention == "acts" for n in name.split("+"))
    return load_config(None, [f"model.positional.name={name}", f"model.d_model={d_model}",
                              f"model.n_heads={n_heads}", f"model.positional.cross_attention={str(cross).lower()}",
                              *extra]).model


def refused(overrides: list[str]) -> str:
    with pytest.raises(ConfigError) as err:
        load_config(None, overrides)
    return str(err.value)


# (scheme, option, the last accepted value, the first refused value, the rule the message states)
BOUNDS = [
    ("shaw", "max_distance", 1, 0, "at least 1"),
    ("nezha", "max_distance", 1, 0, "at least 1"),
    ("deberta", "max_distance", 1, 0, "at least 1"),
    ("t5", "num_buckets", 4, 3, "at least 4"),
    ("t5", "max_distance", 5, 4, "greater than num_buckets / 2 (4, the exact buckets)"),  # num_buckets=8
    ("fire", "hidden", 1, 0, "at least 1"),
    ("fire", "c_init", 0.5, 0.0, "positive (psi(x) = log(c x + 1) must grow)"),
    ("fire", "threshold_init", 0.5, 0.0, "positive (psi(L) divides)"),
    ("rope", "base", 1.5, 1.0, "greater than 1 (else every frequency is 1)"),
    ("xpos", "base", 1.5, 1.0, "greater than 1 (else every frequency is 1)"),
    ("xpos", "scale_base", 0.5, 0.0, "positive"),
    ("xpos", "gamma", 0.5, 0.0, "positive (zeta_0 = gamma / (1 + gamma) must not be 0)"),
    ("shape", "max_shift", 0, -1, "0 or more"),
    ("shape", "eval_shift", 0, -1, "0 or more"),
    ("cape", "max_global_shift", 0.0, -0.5, "0 or more"),
    ("cape", "max_local_shift", 0.0, -0.5, "0 or more"),
    ("cape", "max_global_scaling", 1.0, 0.5, "1 or more"),
    ("randomized", "max_length", 1, 0, "at least 1"),
    ("p_rope", "p", 1.0, 1.01, "in [0, 1] (the fraction of frequencies kept)"),
    ("p_rope", "p", 0.0, -0.01, "in [0, 1] (the fraction of frequencies kept)"),
    ("p_rope", "base", 1.5, 1.0, "greater than 1 (else every frequency is 1)"),
    ("p_rope", "train_length", 0, -1, "0 (p decides) or more (HoPE's rule)"),
    ("polar", "base", 1.5, 1.0, "greater than 1 (else every frequency is 1)"),
    ("dape_alibi", "hidden", 1, 0, "at least 1"),
    ("dape_kerple", "hidden", 1, 0, "at least 1"),
    ("dape_fire", "hidden", 1, 0, "at least 1"),
    ("cope", "max_positions", 2, 1, "at least 2 (positions 0 and 1 to interpolate)"),
]


@pytest.mark.parametrize("scheme,option,ok,bad,rule", BOUNDS, ids=[f"{s}.{o}={b}" for s, o, _, b, _ in BOUNDS])
def test_each_option_accepts_its_bound_and_refuses_the_next_value_in_one_line(scheme, option, ok, bad, rule):
    base = [f"model.positional.name={scheme}", "model.positional.cross_attention=false",
            "model.positional.t5.num_buckets=8" if option == "max_distance" and scheme == "t5" else
            "model.positional.t5.max_distance=128"]
    key = f"model.positional.{scheme}.{option}"
    load_config(None, [*base, f"{key}={ok}"])
    assert refused([*base, f"{key}={bad}"]) == f"config key '{key}' in the command line must be {rule}, got {bad!r}"


def test_the_rules_between_sections_name_the_key_and_the_reason():
    suitable = [n for n in SCHEMES if n not in ("none", "randomized", "shape", "cape", "xl", "fox", "cope")]
    assert refused(["model.positional.name=randomized", "model.positional.randomized.base=xl"]) == (
        "config key 'model.positional.randomized.base' in the command line must be one of "
        f"{', '.join(suitable)}, got 'xl'")
    assert refused(["model.positional.name=randomized", "model.positional.cross_attention=true"]) == (
        "config key 'model.positional.cross_attention' in the command line must be false with randomized "
        "positions (source and target positions are drawn apart), got True")
    learnable = ["model.positional.name=randomized", "model.positional.randomized.base=learnable",
                 "model.positional.randomized.max_length=64"]
    load_config(None, [*learnable, "model.positional.max_positions=64"])
    assert refused([*learnable, "model.positional.max_positions=63"]) == (
        "config key 'model.positional.max_positions' in the command line must be at least "
        "model.positional.randomized.max_length (64) for a learnable base, got 63")
    assert refused(["model.positional.name=rope", "model.d_model=36", "model.n_heads=4"]) == (
        "config key 'model.d_model' in the command line must be a multiple of 2 * model.n_heads for rotary "
        "positions (an even head size; 36 / 4 heads = 9), got 36")


SCHEME_CASES = [(n, ()) for n in SCHEMES] + [("randomized", ("model.positional.randomized.base=shaw",)),
                                             ("shaw+alibi", ()), ("xl+t5", ())]
CASE_IDS = [n + "".join(f"[{e.split('=')[-1]}]" for e in extra) for n, extra in SCHEME_CASES]


@pytest.mark.parametrize("name,extra", SCHEME_CASES, ids=CASE_IDS)
def test_a_scheme_knows_its_kind_and_computes_on_the_positions_device(name, extra):
    """Built and run on the ``meta`` device (shapes only), any tensor a hook creates on the default
    device instead of its inputs' device fails: what a CUDA run would do, checked without a GPU."""
    cfg = model_cfg(name, *extra)
    for kind in KINDS:
        with torch.device("meta"):
            pe = build_positional(cfg, kind)
            att = MultiHeadAttention(D, H, cross=kind == "cross")
        assert pe.kind == kind and all(p.kind == kind for p in components(pe))
        x = torch.empty(2, 5, D, device="meta")
        for training in (True, False):
            pe.train(training)
            pos = pe.training_positions(torch.arange(5, device="meta")) if training else torch.arange(5, device="meta")
            y = pe.embed(x, pos) if kind != "cross" else x
            out, _, weights = att(y, pe, pos, torch.arange(5, device="meta"), memory=x if kind == "cross" else None,
                                  causal=kind == "decoder", need_weights=True)
            assert out.device.type == "meta" and weights.device.type == "meta" and out.shape == (2, 5, D)


@pytest.mark.parametrize("name,extra", SCHEME_CASES, ids=CASE_IDS)
def test_a_bfloat16_model_computes_in_bfloat16(name, extra):
    """A model cast to bfloat16 as a whole (weights and activations): every hook's output meets the
    activations in their dtype (no float32 table leaks into a bf16 product or promotes the output),
    and the result is the float64 reference to bf16 rounding."""
    cfg = model_cfg(name, *extra, "model.positional.shaw.max_distance=2", "model.positional.t5.num_buckets=8",
                    "model.positional.t5.max_distance=6", "model.positional.fire.threshold_init=3.0")
    for kind in ("encoder", "decoder"):
        torch.manual_seed(0)
        pe, att = build_positional(cfg, kind).eval(), MultiHeadAttention(D, H).eval()
        with torch.no_grad():
            # FoPE's series coefficients live near the identity (harmonics of sigma / sqrt(K) at the start):
            # moved by 0.3 its C and S would reach twice RoPE's unit circle and the logits four times their size,
            # beyond what this tolerance allows any scheme; they move by 0.05
            for n, p in [*pe.named_parameters(), *att.named_parameters()]:
                p.add_(torch.randn_like(p) * (0.05 if n.endswith("_coefficients") else 0.3))
        x = torch.randn(2, 6, D)
        pos = list(range(6))
        want, _ = reference_attention(att, scheme_terms(name, pe, cfg, kind, pos, pos), x, None, pos, pos, None,
                                      causal=kind == "decoder")
        embedded = pe.embed(torch.zeros(1, 6, D), torch.arange(6)).double()
        pe, att = pe.to(torch.bfloat16), att.to(torch.bfloat16)
        with torch.no_grad():
            xb = x.to(torch.bfloat16)
            assert pe.embed(xb, torch.arange(6)).dtype == torch.bfloat16
            torch.testing.assert_close(pe.embed(torch.zeros(1, 6, D, dtype=torch.bfloat16), torch.arange(6)).double(),
                                       embedded, atol=0.02, rtol=0.02)
            for need_weights in (False, True):
                out, _, _ = att(xb, pe, torch.arange(6), torch.arange(6), causal=kind == "decoder",
                                need_weights=need_weights)
                assert out.dtype == torch.bfloat16
                torch.testing.assert_close(out.double(), want, atol=0.15, rtol=0.05)


def _stats(t: torch.Tensor) -> tuple[float, float]:
    return t.float().mean().item(), t.float().std().item()


def test_initial_parameters_follow_each_papers_initialisation():
    """Scale and shape of each learned table at initialisation (the table's parameter count is the
    table's "parameters" column): means within 4 standard errors, spreads within 5%."""
    dh = D // H

    def close(t: torch.Tensor, mean: float, std: float) -> None:
        m, s = _stats(t)
        assert abs(m - mean) < 4 * std / math.sqrt(t.numel()) and abs(s - std) < 0.05 * std, (m, s, mean, std)

    torch.manual_seed(0)
    learnable = build_positional(model_cfg("learnable", "model.positional.max_positions=2048"), "encoder")
    assert learnable.table.weight.shape == (2048, D)
    close(learnable.table.weight, 0.0, 0.02)  # N(0, 0.02) as BERT's position table
    t5 = build_positional(model_cfg("t5", "model.positional.t5.num_buckets=1024", "model.positional.t5.max_distance=2048",
                                         "model.n_heads=8"), "encoder")
    assert t5.bias.weight.shape == (1024, 8)
    close(t5.bias.weight, 0.0, 0.02)
    k = 100
    shaw = build_positional(model_cfg("shaw", f"model.positional.shaw.max_distance={k}"), "encoder")
    assert shaw.key_table.shape == shaw.value_table.shape == (2 * k + 1, dh)  # distances -k..k
    close(shaw.key_table, 0.0, dh ** -0.5)
    close(shaw.value_table, 0.0, dh ** -0.5)
    keys_only = build_positional(model_cfg("shaw", "model.positional.shaw.values=false"), "encoder")
    assert keys_only.value_table is None and not keys_only.has_value_term
    nezha = build_positional(model_cfg("nezha", "model.positional.nezha.values=false"), "encoder")
    assert nezha.value_table is None and not nezha.has_value_term
    deberta = build_positional(model_cfg("deberta", "model.positional.deberta.max_distance=256"), "encoder")
    assert deberta.table.shape == (512, D)
    close(deberta.table, 0.0, 0.02)
    xl = build_positional(model_cfg("xl", "model.d_model=256"), "encoder")
    assert xl.w_r.bias is None
    close(xl.w_r.weight, 0.0, math.sqrt(6 / 512) / math.sqrt(3))  # Xavier uniform: U(-a, a), a = sqrt(6 / 2D)
    assert not xl.u.any() and not xl.v.any()  # the global biases start at zero


def test_embedding_schemes_add_their_table_to_the_tokens():
    """embed(x, pos) = x + PE(pos): the sinusoid of the formula, or the learned row."""
    x = torch.randn(2, 5, D)
    pos = torch.arange(5)
    learnable = build_positional(model_cfg("learnable"), "encoder")
    torch.testing.assert_close(learnable.embed(x, pos), x + learnable.table.weight[:5][None])
    sinusoidal = build_positional(model_cfg("sinusoidal"), "encoder")
    want = torch.tensor([sinusoid(p, D) for p in range(5)], dtype=torch.float32)
    torch.testing.assert_close(sinusoidal.embed(x, pos), x + want[None], atol=1e-6, rtol=0)


def test_sinusoids_stay_exact_at_far_positions():
    """Angles in float64: at position 10^5 a float32 frequency would be off by ~10^-3 radians."""
    positions = torch.tensor([0, 1, 4_097, 65_537, 100_003, -70_001])
    table = sinusoidal_at(positions, 64)
    want = torch.tensor([sinusoid(float(p), 64) for p in positions.tolist()], dtype=torch.float64)
    torch.testing.assert_close(table.double(), want, atol=1e-6, rtol=0)


def test_a_combination_hands_every_hook_to_its_parts_in_order():
    cfg = model_cfg("rope+t5")
    pe = build_positional(cfg, "decoder").train()
    assert [type(p) for p in components(pe)] == [RotaryPositional, T5Positional]
    torch.testing.assert_close(pe.training_positions(torch.arange(7)), torch.arange(7))


def test_randomized_draws_a_sorted_subset_and_shows_its_bases_profile():
    cfg = model_cfg("randomized", "model.positional.randomized.base=t5", "model.positional.randomized.max_length=40")
    pe = build_positional(cfg, "encoder")
    torch.manual_seed(0)
    drawn = [pe.training_positions(torch.arange(6)) for _ in range(200)]
    for d in drawn:
        assert d.shape == (6,) and (d[1:] > d[:-1]).all() and 0 <= d.min() and d.max() < 40
    assert len({tuple(d.tolist()) for d in drawn}) > 150 and max(int(d.max()) for d in drawn) >= 35
    assert pe.training_positions(torch.arange(50)).tolist() == list(range(50))  # longer than L: all of 0..T-1
    mine, base = distance_profile(pe, 8, 20), distance_profile(pe.base, 8, 20)
    assert torch.equal(mine.offsets, base.offsets) and torch.equal(mine.values, base.values)
    assert mine.label == base.label and len(mine.offsets) == 17
    default = distance_profile(pe)
    assert default.offsets.tolist() == list(range(-64, 65))
    # FIRE's bias depends on the query's position (its log normaliser): the defaults must be the base's
    fire = build_positional(model_cfg("randomized", "model.positional.randomized.base=fire",
                                      "model.positional.fire.threshold_init=8.0"), "encoder")
    for args in ((), (8, 100)):
        mine, base = distance_profile(fire, *args), distance_profile(fire.base, *args)
        assert torch.equal(mine.offsets, base.offsets) and torch.equal(mine.values, base.values)
    assert not torch.equal(distance_profile(fire, 8, 100).values, distance_profile(fire, 8, 8).values)


@pytest.mark.parametrize("name", list(SCHEMES))
def test_a_scheme_declares_whether_it_adds_a_logit_bias(name):
    """``adds_score_bias()`` (read by the benchmark's targets instead of a list of names) says what
    ``score_bias`` does (randomized: its default base, sinusoidal, adds none)."""
    pe = build_positional(model_cfg(name), "encoder")
    q, k = torch.randn(1, H, 5, D // H), torch.randn(1, H, 5, D // H)
    bias = pe.score_bias(q, k, torch.arange(5), torch.arange(5))
    state = pe.token_state(torch.randn(1, 5, D))  # fox: a bias from the layer input's gates
    assert (state is None) == (pe.state_width == 0)
    from_state = None if state is None else pe.state_bias(state, torch.arange(5), torch.arange(5))
    assert (bias is not None or from_state is not None) == adds_score_bias(SCHEMES[name])


@pytest.mark.parametrize("name", ["fox", "fox+rope", "alibi+fox", "fox+fox", "rope+t5"])
@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_a_token_state_is_as_wide_as_the_scheme_declares(name, kind):
    """Attention caches ``token_state`` beside the keys; a combination's state is its parts' side by
    side, so its ``state_width`` is theirs summed (FoX: two gate sets in the encoder, one in the decoder)."""
    pe = build_positional(model_cfg(name), kind)
    state = pe.token_state(torch.randn(2, 5, D))
    per_fox = 2 if kind == "encoder" else 1
    assert pe.state_width == per_fox * name.split("+").count("fox")
    assert state is None if pe.state_width == 0 else state.shape == (2, H, 5, pe.state_width)


def test_the_docs_show_the_scheme_table_of_the_registry():
    """docs/schemes.md's table is generated from what each registered class declares: a scheme added,
    or a capability changed, without regenerating it fails here."""
    from models.positional import scheme_table
    from reporting.references import cited_paper
    from tests.conftest import ROOT

    table = scheme_table(cited_paper)
    assert table in (ROOT / "docs" / "schemes.md").read_text(encoding="utf-8"), "regenerate: python -m nmt docs"
    assert table.count("\n") == len(SCHEMES) + 2 and all(s.card.summary and s.card.paper for s in SCHEMES.values())
    acts = {line.split(" | ")[0].strip("| `"): line.split(" | ")[2] for line in table.splitlines()[2:]}
    assert acts == WHERE_IT_ACTS


# where each scheme acts, as its paper puts it (a new scheme adds its line: ARCHITECTURE.md, adding a scheme)
WHERE_IT_ACTS = {
    "none": "—", "sinusoidal": "embeddings", "learnable": "embeddings", "shape": "embeddings", "cape": "embeddings",
    "rope": "q, k", "xpos": "q, k", "p_rope": "q, k", "polar": "q, k", "fope": "q, k",
    "alibi": "logits", "t5": "logits", "xl": "logits", "deberta": "logits", "fire": "logits", "kerple": "logits",
    "fox": "logits", "dape_alibi": "logits", "dape_kerple": "logits", "dape_fire": "logits", "cope": "logits",
    "shaw": "logits + values", "nezha": "logits + values", "randomized": "the base's"}


def test_a_scheme_names_where_it_saturates_from_its_own_options():
    """The long-input tables' captions read each scheme's limit off its options (values set here, not
    the defaults): clipped distances, the last bucket, the clamp, the training draw, the table."""
    from models.positional import saturation_note

    expected = {
        ("shaw", "model.positional.shaw.max_distance=7"): "relative distances clip at ±7",
        ("nezha", "model.positional.nezha.max_distance=9"): "relative distances clip at ±9",
        ("deberta", "model.positional.deberta.max_distance=20"): "relative distances clip at ±20",
        ("t5", "model.positional.t5.max_distance=40"): "distances of 40 and more share the last bucket",
        ("cope", "model.positional.cope.max_positions=12"): "contextual positions clamp at 11",
        ("randomized", "model.positional.randomized.max_length=50"): "training draws positions from 0 to 49 only",
        ("learnable", "model.positional.max_positions=300"): "a table of 300 positions, those past the training "
                                                             "lengths untrained",
    }
    for (name, option), note in expected.items():
        assert saturation_note(model_cfg(name, option)) == note, name
    for name in ("sinusoidal", "rope", "alibi", "kerple", "fire", "xl", "fox", "polar"):
        assert saturation_note(model_cfg(name)) is None, name
    assert saturation_note(model_cfg("learnable+t5", "model.positional.max_positions=300",
                                     "model.positional.t5.max_distance=40")) == (
        "a table of 300 positions, those past the training lengths untrained; distances of 40 and more share the "
        "last bucket")


def test_the_scheme_class_keeps_the_math_and_the_card_the_facts():
    """PositionalEncoding holds its hooks, kernel flags and config (18 members); what used to be
    methods beside them lives on the card or in models/positional/profile.py, and a scheme that still
    defines one of those methods is caught here (nothing would call it)."""
    from models.positional.base import PositionalEncoding

    own = [k for k in vars(PositionalEncoding) if not (k.startswith("__") and k.endswith("__")) or k == "__init__"]
    assert len(own) <= 18, own
    retired = {"saturation", "evaluates_as", "exported", "profile", "distance_profile", "embedding_table",
               "scales_frequencies", "components"}
    for name, scheme in SCHEMES.items():
        for cls in scheme.__mro__:
            assert not retired & set(vars(cls)), f"{name}: {cls.__name__} defines {retired & set(vars(cls))}"
    # the rotary family scales its frequencies; nothing else does (PI, NTK and YaRN refuse the others)
    assert {n for n, s in SCHEMES.items() if s.card.scales_frequencies} == {"rope", "xpos", "p_rope", "polar"}


def test_randomized_evaluates_and_is_exported_as_its_base():
    from models.positional import evaluated, evaluated_scheme

    cfg = model_cfg("randomized", "model.positional.randomized.base=alibi")
    pe = build_positional(cfg, "decoder")
    assert evaluated_scheme(SCHEMES["randomized"], cfg) == "alibi" and evaluated(pe) is pe.base
    rope = build_positional(model_cfg("rope"), "decoder")
    assert evaluated_scheme(SCHEMES["rope"], model_cfg("rope")) == "rope" and evaluated(rope) is rope


def test_each_scheme_is_drawn_in_the_kind_its_card_or_its_hooks_give():
    """Figures group the schemes by kind: the card's own (the schemes of 2024-25, written here from
    their papers' years), else where the scheme acts."""
    from models.positional import KINDS, scheme_kind

    recent = {"p_rope", "polar", "fox", "dape_alibi", "dape_kerple", "dape_fire", "cope", "fope"}
    by_place = {"embeddings": "absolute", "—": "absolute", "the base's": "absolute", "q, k": "rotary",
                "logits": "relative", "logits + values": "relative"}
    for name in SCHEMES:
        assert scheme_kind(name) == ("2024–25" if name in recent else by_place[WHERE_IT_ACTS[name]]), name
    assert KINDS == ("absolute", "rotary", "relative", "2024–25")


@pytest.mark.parametrize("fact, value", [("export_form", "rotory"), ("kind", "2023"), ("cross_attention", "maybe")])
def test_a_card_with_a_fact_outside_its_set_is_refused(fact, value):
    from models.positional.card import SchemeCard

    with pytest.raises(ValueError, match=f"SchemeCard {fact}='{value}': one of"):
        SchemeCard(**{fact: value})
