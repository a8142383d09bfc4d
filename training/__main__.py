"""`python -m training`: the trainer's command line."""

from training.cli import main

main()
