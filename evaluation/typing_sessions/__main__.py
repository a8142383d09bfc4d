"""`python -m evaluation.typing_sessions fit RUNS... --out DECISION.json` (fit.py) and `curve RUNS...`
(curve.py); the sessions themselves run as `dgemma-lsp bench typing` (cli.py)."""

import sys

from evaluation.typing_sessions import curve, fit

COMMANDS = {"fit": fit.main, "curve": curve.main}
if sys.argv[1:2] == [] or sys.argv[1] not in COMMANDS:
    raise SystemExit("usage: python -m evaluation.typing_sessions fit|curve RUNS... [options]")
sys.exit(COMMANDS[sys.argv[1]](sys.argv[2:]))
