import sys

from dgemma_lsp.cli import main

sys.exit(main())
