"""The suite's `transformers` classes decode through the suite's key/value cache: ``generate`` feeds one
token a step, and what it scores is what the model gives the whole output at once. Checked for every
registered scheme on a padded batch of an untrained model (no tie between candidates matters: the
scores along the chosen path are recomputed without the cache, not the choices compared)."""
from __future__ import annotations

import pytest
import torch

from experiment.config import load_config, own_tree
from models.positional import SCHEMES

VOCAB, PAD, BOS, EOS = 40, 0, 1, 2
NEW_TOKENS = 12
TOLERANCE = 1e-4  # float32 sums of NEW_TOKENS log-probabilities, cached against recomputed


def suite_model(scheme: str):
    import export.suite_model as suite

    cfg = load_config(None, ["model.d_model=32", "model.d_ff=64", "model.n_heads=4", "model.n_encoder_layers=2",
                             "model.n_decoder_layers=2", "model.dropout=0.0", f"model.positional.name={scheme}"])
    config = suite.NmtSuiteConfig(suite=own_tree(cfg), src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, joint_vocab=True,
                                  pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS, decoder_start_token_id=BOS)
    torch.manual_seed(0)
    return suite.NmtSuiteModel(config).eval()


def padded_batch() -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    src = torch.randint(3, VOCAB, (3, 9), generator=g)
    for row, length in ((1, 6), (2, 4)):
        src[row, length - 1], src[row, length:] = EOS, PAD
    src[0, -1] = EOS
    return src


def recomputed_log_probs(model, src: torch.Tensor, sequences: torch.Tensor) -> torch.Tensor:
    """(B, T - 1): each chosen token's log-probability, the whole output fed at once without a cache."""
    with torch.no_grad():
        logits = model(input_ids=src, attention_mask=src.ne(PAD), decoder_input_ids=sequences[:, :-1],
                       use_cache=False).logits
    return torch.log_softmax(logits.float(), -1).gather(-1, sequences[:, 1:, None])[..., 0]


def fed(model) -> list[tuple[int, int, int]]:
    """Records, for every call of the suite's decoder: the width of the target it is given, its rows, and
    the rows of the source it reads (the cache's memory: one per sentence when grouped)."""
    calls, decode = [], model.model.decode

    def recorded(tgt, cache, **kw):
        calls.append((tgt.size(1), tgt.size(0), cache.memory.padding_mask.size(0)))
        return decode(tgt, cache, **kw)

    model.model.decode = recorded
    return calls


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_generate_feeds_one_token_a_step_and_scores_what_the_whole_output_gives(scheme):
    model, src = suite_model(scheme), padded_batch()
    calls = fed(model)
    common = dict(input_ids=src, attention_mask=src.ne(PAD), do_sample=False, max_new_tokens=NEW_TOKENS,
                  suppress_tokens=[EOS], return_dict_in_generate=True)  # every output exactly NEW_TOKENS long
    greedy = model.generate(**common, num_beams=1, output_logits=True)
    assert calls == [(1, 3, 3)] * NEW_TOKENS
    assert greedy.sequences.shape == (3, NEW_TOKENS + 1)
    stepwise = torch.log_softmax(torch.stack(greedy.logits, 1).float(), -1)  # (B, T, V), one step at a time, cached
    chosen = stepwise.gather(-1, greedy.sequences[:, 1:, None])[..., 0]
    assert (chosen - recomputed_log_probs(model, src, greedy.sequences)).abs().max() <= TOLERANCE

    for use_cache in (True, False):
        calls.clear()
        beam = model.generate(**common, num_beams=4, length_penalty=0.0, output_scores=True, use_cache=use_cache)
        # 3 sentences x 4 hypotheses, each sentence's source held once; without the cache the whole prefix each step
        assert calls == [(1 if use_cache else t, 12, 3) for t in range(1, NEW_TOKENS + 1)]
        # a hypothesis carried with another's cache scores differently from its own output fed whole
        whole = recomputed_log_probs(model, src, beam.sequences).sum(1)
        assert (beam.sequences_scores - whole).abs().max() <= TOLERANCE

    calls.clear()
    uncached = model.generate(**common, num_beams=1, use_cache=False)
    assert calls == [(t, 3, 3) for t in range(1, NEW_TOKENS + 1)]
    assert uncached.sequences.shape == greedy.sequences.shape


def test_rows_that_are_not_copies_of_one_sentence_are_not_grouped():
    """The source is held once per sentence only where the rows are runs of copies, as `transformers`
    expands them for beams; any other layout is decoded row by row, as given."""
    from export.suite_model import _grouped
    from models.transformer import EncoderOutput

    states = torch.arange(24.0).view(4, 3, 2)
    padding = torch.zeros(4, 3, dtype=torch.bool)
    copies = EncoderOutput(states[[0, 0, 2, 2]], padding)
    once, group = _grouped(copies, 2)
    assert group == 2 and torch.equal(once.states, states[[0, 2]]) and once.padding_mask.shape == (2, 3)
    for rows, size in (([0, 1, 2, 3], 2), ([0, 0, 0, 2], 2), ([0, 0, 2, 2], 3)):
        memory = EncoderOutput(states[rows], padding)
        kept, group = _grouped(memory, size)
        assert group == 1 and kept is memory
    differing_padding = EncoderOutput(states[[0, 0, 2, 2]], torch.tensor([[0, 0, 0], [0, 0, 1], [0, 0, 0], [0, 0, 0]],
                                                                          dtype=torch.bool))
    assert _grouped(differing_padding, 2)[1] == 1
