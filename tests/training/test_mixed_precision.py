"""The mixed-precision training path (what CUDA runs under ``train.amp``), exercised on CPU with
``torch.autocast("cpu", dtype=torch.bfloat16)``: every scheme's update gives a finite loss that
falls on a batch it is fitting, and the logits come out of autocast in bfloat16."""
from __future__ import annotations

import pytest
import torch

from data.batching import Batch
from experiment.config import load_config
from models.positional import SCHEMES
from models.transformer import Transformer
from training.engine import train_loss

PAD, BOS, EOS, VOCAB = 0, 2, 3, 40


def _batch() -> Batch:
    g = torch.Generator().manual_seed(0)
    tgt = torch.randint(4, VOCAB, (6, 7), generator=g)
    tgt[:, -1] = EOS
    tgt[0, 4:] = PAD
    src = torch.randint(4, VOCAB, (6, 9), generator=g)
    src[1, 6:] = PAD
    tgt_in = torch.cat([torch.full((6, 1), BOS), tgt[:, :-1]], 1).masked_fill(
        torch.cat([torch.zeros(6, 1, dtype=torch.bool), tgt[:, :-1].eq(PAD)], 1), PAD)
    return Batch(src, tgt_in, tgt, torch.arange(6))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_bf16_autocast_update_is_finite_and_learns(scheme):
    torch.manual_seed(0)
    cfg = load_config(None, ["model.d_model=32", "model.n_heads=4", "model.n_encoder_layers=1",
                             "model.n_decoder_layers=1", "model.d_ff=64", "model.dropout=0.0",
                             f"model.positional.name={scheme}"]).model
    model = Transformer(cfg, VOCAB, VOCAB, pad_id=PAD, joint_vocab=True).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    batch = _batch()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert model(batch.src, batch.tgt_in).dtype == torch.bfloat16
    losses = []
    for _ in range(30):
        loss, ntokens = train_loss(model, batch, PAD, 0.1, torch.bfloat16)
        assert ntokens == int(batch.tgt_out.ne(PAD).sum()) and torch.isfinite(loss)
        optimizer.zero_grad(set_to_none=True)
        (loss / ntokens).backward()
        assert all(p.grad is None or torch.isfinite(p.grad).all() for p in model.parameters())
        optimizer.step()
        losses.append(loss.item() / ntokens)
    assert losses[-1] < 0.6 * losses[0], (scheme, losses[0], losses[-1])


@pytest.mark.parametrize("scheme", [s for s in SCHEMES if s != "learnable"])  # learnable: a hard limit
def test_positions_past_max_positions_follow_the_model_dtype(scheme):
    """``max_positions`` bounds only learned tables: a float64 model built with 8, fed 12
    positions, gives the same float64 outputs as one built with 64 (no scheme but learnable
    may depend on the setting, e.g. through a cached table that runs out)."""
    def build(max_positions):
        torch.manual_seed(0)
        cfg = load_config(None, ["model.d_model=32", "model.n_heads=4", "model.n_encoder_layers=1",
                                 "model.n_decoder_layers=1", "model.d_ff=64", "model.dropout=0.0",
                                 f"model.positional.max_positions={max_positions}",
                                 f"model.positional.name={scheme}"]).model
        return Transformer(cfg, VOCAB, VOCAB, pad_id=PAD, joint_vocab=True).double().eval()

    short, long = build(8), build(64)
    long.load_state_dict(short.state_dict())
    g = torch.Generator().manual_seed(1)
    src, tgt = torch.randint(4, VOCAB, (2, 12), generator=g), torch.randint(4, VOCAB, (2, 11), generator=g)
    with torch.no_grad():
        out_short, out_long = short(src, tgt), long(src, tgt)
    assert out_short.dtype == torch.float64
    assert torch.allclose(out_short, out_long, atol=1e-10)
