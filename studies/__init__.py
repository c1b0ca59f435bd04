"""Studies: the positional-encoding comparisons (``python -m nmt study demo | multi30k | iwslt2017``)."""
