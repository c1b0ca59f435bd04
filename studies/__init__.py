"""Studies: the positional-encoding comparisons (``python -m studies demo | multi30k | iwslt2017``)."""
