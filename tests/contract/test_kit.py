"""The scheme contract kit (``contract.kit``, ``nmt scheme check``): every registered scheme keeps the
contract, and each planted breach fails the check that names it — a bias that leaks into padded keys,
a cache that loses the step's position, a scheme that claims to be relative but adds absolute
positions, a bfloat16 path that overflows — in one line with its numbers, while the other checks hold."""
from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

from contract.kit import CHECKS, Outcome, run_checks
from models.positional import SCHEMES
from models.positional.base import PositionalEncoding, relative_positions
from models.positional.card import SchemeCard
from nmt.scheme import main as scheme_command
from utils.errors import UserError

FAST = [check for check in CHECKS if check != "training"]


class Slope(PositionalEncoding):
    """A sound scheme to plant breaches in: bias -w_h |j - i| (ALiBi with a learned slope per head)."""

    card = SchemeCard(summary="planted", relative=True)

    def __init__(self, kind, cfg):
        super().__init__(kind, cfg.d_model, cfg.n_heads)
        self.w = nn.Parameter(torch.full((cfg.n_heads,), 0.5))

    def score_bias(self, q, k, q_pos, k_pos):
        return (-self.w[:, None, None] * relative_positions(q_pos, k_pos).abs().to(q.dtype))[None]


class LeaksIntoPadding(Slope):
    """The bias scaled by the number of keys, padded ones included."""

    def score_bias(self, q, k, q_pos, k_pos):
        return super().score_bias(q, k, q_pos, k_pos) * (10.0 / k.size(-2))


class LosesTheStep(Slope):
    """The query positions counted from 0 in every call: right for the whole pass, wrong from the cache."""

    def score_bias(self, q, k, q_pos, k_pos):
        return super().score_bias(q, k, torch.arange(q_pos.numel()), k_pos)


class ClaimsRelative(Slope):
    """Relative by its card, yet adding an absolute ramp to the embeddings."""

    def embed(self, x, pos):
        return x + 0.1 * pos.to(x.dtype)[None, :, None]


class OverflowsInBf16(Slope):
    """Its bfloat16 path passes through float16, whose range ends at 65,504."""

    def score_bias(self, q, k, q_pos, k_pos):
        bias = super().score_bias(q, k, q_pos, k_pos)
        return (bias.half() * 1e5).to(q.dtype) if q.dtype == torch.bfloat16 else bias


def planted(monkeypatch, cls: type, name: str = "planted") -> str:
    monkeypatch.setitem(SCHEMES, name, cls)
    return name


@pytest.mark.parametrize("name", list(SCHEMES))
def test_every_registered_scheme_keeps_the_contract(name):
    outcomes = run_checks(name, only=FAST)
    assert [o.check for o in outcomes] == FAST
    assert [o for o in outcomes if o.passed is False] == []
    assert all("\n" not in o.detail for o in outcomes)
    shift = next(o for o in outcomes if o.check == "shift")
    assert (shift.passed is None) == (not SCHEMES[name].card.relative)  # tested exactly where the card says relative


@pytest.mark.parametrize("name", ["rope+t5", "fox+rope", "shaw+alibi"])
def test_combinations_keep_the_contract(name):
    assert [o for o in run_checks(name, only=FAST) if o.passed is False] == []


def test_a_sound_planted_scheme_passes_and_trains(monkeypatch):
    outcomes = {o.check: o for o in run_checks(planted(monkeypatch, Slope))}
    assert all(o.passed is not False for o in outcomes.values()), [o.line() for o in outcomes.values()]
    assert outcomes["shift"].passed and outcomes["training"].passed and outcomes["flex"].passed is None
    assert outcomes["export"].detail.startswith("refused in one line: scheme 'planted'")


@pytest.mark.parametrize("cls, check, said, also", [
    # a bias that counts every key also moves with the cache's growing key count and with a batch's padding
    (LeaksIntoPadding, "padding", "a 7-token source padded to 12: max |difference|", {"cache", "beam", "batch"}),
    # positions counted from 0 in each call: wrong from the cache (beam search's too) and blind to a shift
    (LosesTheStep, "cache", "step 1 of 6 from the cache: max |difference|", {"beam", "shift"}),
    (ClaimsRelative, "shift", "encoder self-attention at positions shifted by 5: max |difference|", set()),
    (OverflowsInBf16, "bf16", "max |bf16 - fp32| ", set()),  # -inf biases: attention on the diagonal alone
])
def test_each_planted_breach_fails_the_check_that_names_it(monkeypatch, cls, check, said, also):
    outcomes = {o.check: o for o in run_checks(planted(monkeypatch, cls), only=FAST)}
    assert outcomes[check].passed is False and said in outcomes[check].detail
    assert "\n" not in outcomes[check].line() and outcomes[check].line().startswith(f"FAIL  {check}")
    others = [o.check for o in outcomes.values() if o.passed is False and o.check != check]
    assert set(others) <= also, others


def test_a_check_that_raises_is_a_failure_naming_the_error(monkeypatch):
    class Raises(Slope):
        def score_bias(self, q, k, q_pos, k_pos):
            raise RuntimeError("shapes do not broadcast\nat line 3: (4, 7) vs (4, 6)")

    outcome = run_checks(planted(monkeypatch, Raises), only=["padding"])[0]
    assert outcome == Outcome("padding", False, "raised RuntimeError: at line 3: (4, 7) vs (4, 6)")


def test_a_card_claiming_relative_is_what_decides_the_shift_check(monkeypatch):
    monkeypatch.setattr(Slope, "card", dataclasses.replace(Slope.card, relative=False))
    assert run_checks(planted(monkeypatch, Slope), only=["shift"])[0].passed is None


def test_unknown_checks_and_schemes_are_one_line(monkeypatch):
    with pytest.raises(UserError, match=r"^unknown check\(s\) speed \(checks: padding, cache, "):
        run_checks("rope", only=["speed"])
    with pytest.raises(UserError, match=r"^unknown scheme\(s\) rotary \(registered: none, sinusoidal"):
        scheme_command(["check", "rotary"])


def test_the_command_prints_a_line_per_check_and_exits_1_on_a_failure(monkeypatch, capsys):
    assert scheme_command(["check", planted(monkeypatch, Slope), "--only", "padding", "cache"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("== planted: 2 of 2 checks hold (0 n/a), ")
    assert printed[1].startswith("   pass  padding") and printed[2].startswith("   pass  cache")
    assert scheme_command(["check", planted(monkeypatch, LosesTheStep, "lossy"), "--only", "cache"]) == 1
    assert "   FAIL  cache         step 1 of 6 from the cache" in capsys.readouterr().out
