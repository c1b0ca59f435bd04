"""Test-time frequency scaling of rotary schemes for inputs longer than training's
(``model.length_scaling.rotary``): position interpolation, NTK-aware scaling and YaRN, with the
factor s of each sentence (dynamic: its source's length over the longest training source, never
below 1, so a sentence within the training lengths decodes as trained).

A rotary scheme turns position m into angles m theta_i, theta_i = base^(-e_i) with exponents e_i in
[0, 1) (RoPE: e_i = 2i/Dh, one per pair; PoPE: c/Dh, one per channel). The methods replace theta_i,
per sentence, by:

- ``pi`` (Chen et al. 2023, position interpolation): theta_i / s, i.e. positions m / s;
- ``ntk`` (NTK-aware scaling, bloc97 2023): the base raised to base * s^(1 / e_max), e_max the largest
  exponent, so the lowest frequency is interpolated by s and the highest kept (RoPE: base *
  s^(Dh / (Dh - 2)));
- ``yarn`` (Peng et al. 2023, arXiv 2309.00071, "NTK-by-parts" + temperature): per frequency a ramp
  gamma(r) = clamp((r - alpha) / (beta - alpha), 0, 1) on r = n_train / lambda_i, lambda_i = 2 pi /
  theta_i the wavelength: theta_i' = (1 - gamma) theta_i / s + gamma theta_i (wavelengths longer
  than the training length interpolated, short ones kept), and the logits multiplied by 1/t with
  sqrt(1/t) = 0.1 ln s + 1, applied as a factor on the rotated queries and keys alike.

Shapes: exponents (F,), factor (B,) -> frequencies (B, F); positions (T,) -> angles (B, T, F).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class FrequencyScaling:
    """One attention kind's scaling: ``method`` (pi, ntk, yarn), ``n_train`` the longest training
    sequence in tokens on the keys' side (YaRN's ramp reads wavelengths against it), YaRN's ramp
    bounds ``alpha`` < ``beta``."""

    method: str
    n_train: int
    alpha: float = 1.0
    beta: float = 32.0

    def frequencies(self, base: float, exponents: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
        """exponents (F,) e_i of theta_i = base^(-e_i), factor (B,) s >= 1 -> (B, F) float64 scaled theta_i'."""
        exponents = exponents.to(torch.float64)
        theta = base ** -exponents  # (F,)
        s = factor.to(device=exponents.device, dtype=torch.float64)[:, None]  # (B, 1)
        if self.method == "pi":
            return theta / s
        if self.method == "ntk":
            return theta * s ** (-exponents / exponents.max())
        ratio = self.n_train * theta / (2 * math.pi)  # training length over wavelength, r_i
        gamma = ((ratio - self.alpha) / (self.beta - self.alpha)).clamp(0.0, 1.0)
        return (1 - gamma) * theta / s + gamma * theta

    def magnitude(self, factor: torch.Tensor) -> torch.Tensor:
        """(B,) float32 factor on the rotated queries and keys: YaRN's sqrt(1/t) = 0.1 ln s + 1 (logits x
        its square); 1 for the others."""
        if self.method != "yarn":
            return torch.ones_like(factor, dtype=torch.float32)
        return (0.1 * torch.log(factor.float()) + 1.0)

    def angles(self, positions: torch.Tensor, base: float, exponents: torch.Tensor,
               factor: torch.Tensor) -> torch.Tensor:
        """positions (T,) -> (B, T, F) float32 angles m theta_i' of each sentence."""
        theta = self.frequencies(base, exponents, factor)
        return (positions.to(torch.float64)[None, :, None] * theta[:, None, :]).to(torch.float32)


def frequency_scaling(cfg, kind: str) -> FrequencyScaling | None:
    """The scaling a rotary module of attention ``kind`` applies in the model ``cfg`` (``ModelConfig``),
    None when ``model.length_scaling.rotary`` is none; the run's training lengths unknown is a
    one-line error (an evaluation variant fills them in from the run's manifest)."""
    scaling = cfg.length_scaling
    if scaling.rotary == "none":
        return None
    setting = f"rotary={scaling.rotary}"
    scaling.train_tokens("source", setting)  # every kind's factor s is the sentence's, from its source
    n_train = scaling.train_tokens("target" if kind == "decoder" else "source", setting)
    return FrequencyScaling(scaling.rotary, n_train, scaling.yarn_alpha, scaling.yarn_beta)


def sentence_factor(padding_mask: torch.Tensor, n_train: int) -> torch.Tensor:
    """padding_mask (B, S) True at padding -> (B,) float32 s = max(1, real source tokens / n_train)."""
    return ((~padding_mask).sum(-1).float() / n_train).clamp(min=1.0)
