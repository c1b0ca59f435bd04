"""Translation search: greedy and beam search over a ``Transformer`` with its key/value cache
(``greedy``, ``beam``), the decoding settings resolved once (``settings``), and ``translate``,
the one routine every command uses to turn tokenized sources into ranked hypotheses."""
