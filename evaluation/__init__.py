"""Evaluation on public fill-in-the-middle benchmarks: `python -m evaluation BENCH` (see cli.py).

benchmarks: the rows; metrics: exact match and edit similarity; execute: pass@1 in a subprocess;
runner: decode, post-process, score and summarise; cli: the command line and its table.
"""
