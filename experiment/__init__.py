"""One experiment: its whole config (``config``), its run directory (``run_dir``), checkpoints
(``checkpoint``) and the trained model a run directory holds (``trained``)."""
