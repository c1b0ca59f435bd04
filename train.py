"""Train a config into a run directory: ``python train.py ...`` is ``python -m nmt train ...``
(nmt/train.py), with the same flags."""
from nmt.train import main
from utils.cli import run_main

if __name__ == "__main__":
    run_main(main)
