"""Scoring: metrics (``metrics``), test-set evaluation of a trained run (``evaluate``) and the
comparison table across runs (``compare``)."""
