"""`python -m training.corpus`: the corpus builder's command line."""

import sys

from training.corpus.cli import main

sys.exit(main())
