"""Analysis: the numbers and pictures that explain runs and schemes — attention maps and their
statistics (``attention``), positional-encoding pictures (``pe``), training curves and BLEU by
length (``results``), parameter counts (``parameters``); matplotlib lives in ``pictures``."""
