"""The oracle-length decode (``decode.oracle_length``, a control of the length study): every
hypothesis exactly as long as its reference — end of sentence never chosen before that length, the
hypothesis closed at it — checked against an exhaustive search and a greedy loop written here."""
from __future__ import annotations

import itertools

import pytest
import torch

from experiment.decode_config import DecodeConfig, DecodeRecord
from search.beam import beam_search
from search.greedy import greedy_search
from search.translate import translate
from tests.search.test_decoding import BANNED, BOS, EOS, RandomLM, model
from utils.errors import UserError


def best_of_length(lm: RandomLM, sentence: int, length: int, count: int) -> list[tuple[float, list[int]]]:
    """Every sequence of exactly ``length`` real tokens (no eos), by its summed log-probability, best first."""
    real = [t for t in range(lm.vocab) if t not in BANNED and t != EOS]
    scored = [(sum(lm.log_probs(sentence, seq[:i])[t] for i, t in enumerate(seq)), list(seq))
              for seq in itertools.product(real, repeat=length)]
    return sorted(scored, key=lambda s: -s[0])[:count]


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_an_unpruned_beam_finds_the_best_outputs_of_exactly_the_reference_length(alpha):
    for trial in range(6):
        lm = RandomLM(6, seed=200 + trial)  # 3 real tokens besides eos
        lengths = torch.tensor([1, 3, 2])
        beam = 3 ** 2  # every live prefix of the longest output kept: nothing pruned
        src = torch.zeros(3, 1, dtype=torch.long)
        found = beam_search(lm, src, BOS, EOS, beam=beam, nbest=3, len_penalty=alpha, max_len_a=0.0, max_len_b=1,
                            use_cache=False, banned_ids=BANNED, exact_lengths=lengths)
        for sentence, length in enumerate(lengths.tolist()):
            expected = best_of_length(lm, sentence, length, 3)
            assert [h.tokens for h in found[sentence]] == [tokens for _, tokens in expected], (trial, sentence)
            assert [h.log_prob for h in found[sentence]] == pytest.approx([s for s, _ in expected], abs=1e-5)
            assert all(len(h.tokens) == length for h in found[sentence])


def test_greedy_takes_the_best_token_but_eos_until_the_reference_length():
    for trial in range(6):
        lm = RandomLM(7, seed=300 + trial)
        lengths = [4, 1, 6]
        src = torch.zeros(3, 1, dtype=torch.long)
        found = greedy_search(lm, src, BOS, EOS, 0.0, 2, use_cache=False, banned_ids=BANNED,
                              exact_lengths=torch.tensor(lengths))
        for sentence, length in enumerate(lengths):
            prefix: list[int] = []
            for _ in range(length):  # the loop written out: argmax over the tokens that are not eos
                log_probs = lm.log_probs(sentence, tuple(prefix))
                prefix.append(max((t for t in range(lm.vocab) if t != EOS and t not in BANNED),
                                  key=lambda t: log_probs[t]))
            assert found[sentence] == prefix, (trial, sentence)


def test_without_the_oracle_eos_ends_outputs_early_where_the_oracle_goes_on():
    """The control changes something: on the same model, outputs stop at eos without it."""
    lm = RandomLM(6, seed=7, sharpness=0.5)
    src = torch.zeros(8, 1, dtype=torch.long)
    plain = greedy_search(lm, src, BOS, EOS, 0.0, 6, use_cache=False, banned_ids=BANNED)
    oracle = greedy_search(lm, src, BOS, EOS, 0.0, 6, use_cache=False, banned_ids=BANNED,
                           exact_lengths=torch.full((8,), 6))
    assert any(len(p) < 6 for p in plain) and all(len(o) == 6 for o in oracle)


class Tokens:
    """The little of a tokenizer that ``translate`` uses."""

    pad_id, bos_id, eos_id = 0, BOS, EOS

    def decode_tgt(self, ids: list[int]) -> str:
        return " ".join(map(str, ids))


def test_translate_keeps_each_sentence_its_own_length_whatever_the_batching():
    m = model(vocab=8)
    sources = [[4, 5, 6][:n] + [7] * max(0, n - 3) for n in (3, 1, 5, 2, 4)]  # sorted by length, 2 a batch
    lengths = [2, 9, 1, 3, 12]  # past the usual limit (max_len_b 1) too
    for beam in (1, 3):
        settings = DecodeConfig(beam=beam, batch_size=2, max_len_a=0.0, max_len_b=1, oracle_length=True)
        out = translate(m, sources, Tokens(), settings, target_lengths=lengths)
        assert [len(hyps[0].tokens) for hyps in out] == lengths
        assert all(EOS not in hyps[0].tokens for hyps in out)
    with pytest.raises(UserError, match="only an evaluation .* can use it"):
        translate(m, sources, Tokens(), settings)


def test_the_record_names_the_oracle_and_its_rule_differs_from_the_usual_decode():
    usual, oracle = DecodeConfig(), DecodeConfig(oracle_length=True)
    assert "oracle_length" not in DecodeRecord.of(usual, 0).tree()  # records before the option read the same
    assert DecodeRecord.of(oracle, 0).tree()["oracle_length"] is True
    assert DecodeRecord.of(usual, 0).rule() != DecodeRecord.of(oracle, 0).rule()
    old = {k: v for k, v in DecodeRecord.of(usual, 0).tree().items()}
    assert DecodeRecord.from_tree(old).rule() == DecodeRecord.of(usual, 0).rule()


def test_an_evaluation_decodes_each_sentence_to_its_references_token_length(runs, tmp_path, monkeypatch):
    import shutil

    import search.evaluate
    from experiment.trained import load_run
    from search.evaluate import evaluate_run

    run_dir = tmp_path / "run"
    shutil.copytree(runs["sin1"], run_dir, ignore=shutil.ignore_patterns("eval"))
    run = load_run(run_dir, "best", "cpu")
    sources = ["le chat dort .", "la femme regarde le chien noir .", "il mange ."]
    references = ["the cat sleeps .", "the woman looks at the black dog .", "he eats ."]
    seen = {}

    def spy(*args, **kwargs):
        found = translate(*args, **kwargs)
        seen["lengths"], seen["tokens"] = args[6], [len(hyps[0].tokens) for hyps in found]
        return found

    monkeypatch.setattr(search.evaluate, "translate", spy)
    result = evaluate_run(run, "oracle", sources, references, DecodeConfig(beam=3, oracle_length=True))
    wanted = [len(ids) for ids in run.tokenizer.encode_tgt(references)]
    assert seen["lengths"] == wanted and seen["tokens"] == wanted
    assert result.record.decode.oracle_length is True
