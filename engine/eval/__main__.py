import sys

from engine.eval.cli import main

sys.exit(main())
