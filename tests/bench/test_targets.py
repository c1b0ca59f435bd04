"""The decoding targets of ``make bench`` scale with the run's own machine-speed probe: the same
decoder on a machine half as fast must still meet them, and a decoder slower than the probe allows
must not."""
from __future__ import annotations

from bench.run import targets


def decode_rows(probe: float, greedy: float, beam: float) -> dict[str, tuple[str, bool]]:
    r = {"probe.start_tokens_per_s": probe, "decode.greedy_cached.sent_per_s": greedy,
         "decode.beam5_cached.sent_per_s": beam, "decode.greedy_uncached.sent_per_s": greedy / 10,
         "decode.beam5_uncached.sent_per_s": beam / 10}
    return {target.split(" ≥")[0]: (measured, met) for target, measured, met in targets(r)}


def test_decoding_targets_are_the_set_figures_scaled_by_the_probe():
    # set as 180 greedy / 60 beam sentences/s where the probe read 1,533 tokens/s
    at_half_speed = decode_rows(probe=1533 / 2, greedy=180 / 2 + 1, beam=60 / 2 + 1)
    assert at_half_speed["greedy (cached)"][1] and at_half_speed["beam 5 (cached)"][1]
    too_slow = decode_rows(probe=1533 / 2, greedy=180 / 2 - 1, beam=60 / 2 - 1)
    assert not too_slow["greedy (cached)"][1] and not too_slow["beam 5 (cached)"][1]
    fast_machine = decode_rows(probe=1533 * 2, greedy=200, beam=70)  # met on the old machine, not on this one
    assert not fast_machine["greedy (cached)"][1] and not fast_machine["beam 5 (cached)"][1]
    assert "target 90" in at_half_speed["greedy (cached)"][0]
    assert at_half_speed["beam 5 cached"][1]  # 10x uncached, the ratio target unchanged
