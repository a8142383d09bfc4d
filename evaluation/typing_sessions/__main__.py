"""`python -m evaluation.typing_sessions fit RUNS... --out DECISION.json` (fit.py); the sessions
themselves run as `dgemma-lsp bench typing` (cli.py)."""

import sys

from evaluation.typing_sessions import fit

if sys.argv[1:2] != ["fit"]:
    raise SystemExit("usage: python -m evaluation.typing_sessions fit RUNS... [--out decision.json]")
sys.exit(fit.main(sys.argv[2:]))
