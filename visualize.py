"""Pictures of attention and of the positional encodings: ``python visualize.py ...`` is ``python -m nmt visualize ...``
(nmt/visualize.py), with the same flags."""
from nmt.visualize import main
from utils.cli import run_main

if __name__ == "__main__":
    run_main(main)
