"""Translate with a trained run: ``python inference.py ...`` is ``python -m nmt translate ...``
(nmt/translate.py), with the same flags."""
from nmt.translate import main
from utils.cli import run_main

if __name__ == "__main__":
    run_main(main)
