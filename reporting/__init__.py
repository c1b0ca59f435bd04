"""report.md generated from the archive (``python -m nmt report``): the archived tables, groups,
cost files, benchmark and figures under ``report/``, and the hand-written readings of
``report/text/`` whose numbers are placeholders filled from them."""
