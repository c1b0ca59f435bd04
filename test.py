"""Score a run on test sets, or compare runs: ``python test.py ...`` is ``python -m nmt test ...``
(nmt/evaluate.py), with the same flags."""
from nmt.evaluate import main
from utils.cli import run_main

if __name__ == "__main__":
    run_main(main)
