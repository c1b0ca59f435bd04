"""Learning-rate schedules as multipliers of ``train.lr`` for ``torch.optim.lr_scheduler.LambdaLR``.

- ``inverse_sqrt`` (Vaswani et al. 2017, eq. 3): d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
- ``linear``: linear warm-up to 1, then linear decay to 0 at ``max_steps``
- ``cosine``: linear warm-up, then half a cosine to 0 at ``max_steps``
- ``warmup_exp`` (the seed project's): linear warm-up over ``warmup_steps``, then multiplied by
  ``decay`` once per epoch (``steps_per_epoch`` updates)
- ``constant``: linear warm-up, then 1
"""
from __future__ import annotations

import math
from collections.abc import Callable

from experiment.config import Config
from utils.errors import ConfigError


def lr_lambda(cfg: Config, steps_per_epoch: int) -> Callable[[int], float]:
    """Multiplier of ``train.lr`` after ``step`` optimizer updates (LambdaLR counts from 0)."""
    t = cfg.train
    warmup = max(1, t.warmup_steps)
    kind = t.schedule
    if kind in ("linear", "cosine") and t.max_steps <= 0:
        raise ConfigError(f"train.schedule={kind} needs train.max_steps > 0 (where the decay ends)")

    def warm(step: int) -> float:
        return min(1.0, step / warmup)

    if kind == "inverse_sqrt":
        scale = cfg.model.d_model ** -0.5
        return lambda s: scale * min(max(s, 1) ** -0.5, max(s, 1) * warmup ** -1.5)
    if kind == "linear":
        return lambda s: warm(s) if s < warmup else max(0.0, (t.max_steps - s) / max(1, t.max_steps - warmup))
    if kind == "cosine":
        return lambda s: (
            warm(s)
            if s < warmup
            else 0.5 * (1 + math.cos(math.pi * min(1.0, (s - warmup) / max(1, t.max_steps - warmup))))
        )
    if kind == "warmup_exp":
        return lambda s: warm(s) * t.lr_decay ** (s // max(1, steps_per_epoch))
    return warm  # constant
