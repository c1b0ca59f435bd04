"""The ``train`` section of the config: optimisation, batching and validation, read by
``training.loop`` and its engines and handlers (``data.pipeline.make_loader`` takes the batching
fields through its ``Batching`` protocol). It lives in ``experiment``, below its readers, so that
``experiment.config`` assembles the whole ``Config`` without importing upwards."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from utils.config import require


@dataclass
class TrainConfig:
    """Optimisation and batching."""

    optimizer: Literal["adam", "adamw"] = "adam"  # adamw: decoupled weight decay
    lr: float = 1.0  # with schedule inverse_sqrt: the factor in front of d_model^-0.5 * ...
    betas: list[float] = field(default_factory=lambda: [0.9, 0.98])  # Adam's moment decay rates
    eps: float = 1e-9  # Adam's denominator epsilon
    weight_decay: float = 0.0  # L2 (adam) or decoupled (adamw) weight decay
    # learning-rate schedule after the linear warm-up (linear and cosine end at 0 at max_steps)
    schedule: Literal["inverse_sqrt", "linear", "cosine", "warmup_exp", "constant"] = "inverse_sqrt"
    warmup_steps: int = 4000  # updates of linear warm-up
    label_smoothing: float = 0.1  # of the training loss
    max_tokens: int = 4096  # token budget per batch (padded source or target tokens)
    batch_size: int = 0  # sentences per batch; 0 uses max_tokens
    max_steps: int = 0  # 0: no step limit
    max_epochs: int = 20  # passes over the training split (max_steps may end training first)
    lr_decay: float = 0.95  # schedule warmup_exp: multiplier per epoch after warm-up
    clip_norm: float = 0.0  # 0: no gradient clipping
    accumulate: int = 1  # batches per optimizer update
    num_workers: int = 0  # DataLoader worker processes (0: in the training process)
    amp: Literal["auto", "none", "bf16", "fp16"] = "auto"  # auto: bf16 on CUDA when supported, fp32 on CPU
    compile: bool = False  # torch.compile the model
    # The step with no host in the loop (docs/training.md, "A step at the GPU's speed"); all three
    # are part of the recipe (tables refuse to mix runs that differ in them).
    static_shapes: bool = False  # batches padded to a few (rows, length) shapes (data.batching.STATIC_LENGTHS)
    fused_optimizer: bool = False  # Adam/AdamW's fused kernel (CPU and CUDA)
    cuda_graphs: bool = False  # on CUDA: each update captured once per batch shape and replayed (static_shapes)
    deterministic: bool = False  # torch.use_deterministic_algorithms
    eval_every: int = 0  # validate every N updates; 0: at the end of each epoch
    valid_bleu_sentences: int = 0  # greedy-translate this many validation sentences for BLEU; 0: all
    best_metric: Literal["bleu", "loss", "accuracy"] = "bleu"  # chooses best.pt and drives early stopping
    patience: int = 0  # stop after this many validations without improvement; 0: never
    keep_last: int = 3  # step_<N>.pt checkpoints kept besides last.pt and best.pt
    log_every: int = 50  # updates between log lines / TensorBoard points

    def __post_init__(self) -> None:
        require(self.lr >= 0, "lr", "0 or more (0 freezes the weights)", self.lr)
        require(len(self.betas) == 2 and all(0 <= b < 1 for b in self.betas), "betas", "two values in [0, 1)",
                self.betas)
        require(self.eps > 0, "eps", "positive", self.eps)
        require(self.weight_decay >= 0, "weight_decay", "0 or more", self.weight_decay)
        require(0 <= self.label_smoothing < 1, "label_smoothing", "in [0, 1)", self.label_smoothing)
        require(self.max_tokens >= 1, "max_tokens", "at least 1", self.max_tokens)
        require(self.lr_decay > 0, "lr_decay", "positive", self.lr_decay)
        require(self.max_epochs >= 1, "max_epochs", "at least 1", self.max_epochs)
        require(self.accumulate >= 1, "accumulate", "at least 1", self.accumulate)
        require(self.log_every >= 1, "log_every", "at least 1", self.log_every)
        if self.cuda_graphs:  # a captured update has fixed shapes, one batch, one arithmetic
            require(self.static_shapes, "cuda_graphs", "false unless train.static_shapes is true (each "
                    "batch shape is a new capture)", self.cuda_graphs)
            require(self.accumulate == 1, "cuda_graphs", "false with train.accumulate > 1", self.cuda_graphs)
            require(self.amp != "fp16", "cuda_graphs", "false with train.amp=fp16 (the loss scaler reads its "
                    "inf check on the host)", self.cuda_graphs)
        if self.static_shapes:
            require(self.batch_size == 0, "static_shapes", "false with train.batch_size > 0 (static shapes come "
                    "from the token budget)", self.static_shapes)
        for name in ("warmup_steps", "batch_size", "max_steps", "clip_norm", "num_workers", "eval_every",
                     "valid_bleu_sentences", "patience", "keep_last"):
            require(getattr(self, name) >= 0, name, "0 or more", getattr(self, name))
