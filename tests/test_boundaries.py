"""What runs in the editor never imports training or evaluation code, and the engine never imports the
server: checked on the source (every module's imports) and on a running completion (sys.modules)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = ("dgemma_lsp", "engine")
# The command line's `eval` and `bench` subcommands hand over to evaluation/ (imported only then).
ENTRY_POINTS = {ROOT / "dgemma_lsp" / "cli.py"}


def imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_runtime_modules_import_neither_training_nor_evaluation():
    offenders = []
    for package in RUNTIME:
        for path in (ROOT / package).rglob("*.py"):
            if path in ENTRY_POINTS:
                continue
            for name in imported(path):
                top = name.split(".")[0]
                if top in ("training", "evaluation") or (package == "engine" and top == "dgemma_lsp"):
                    offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not offenders, offenders


def test_a_completion_loads_no_training_or_evaluation_module(tiny_model_dir):
    script = f"""
import sys
from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.documents.workspace import standalone
from dgemma_lsp.inline.pipeline import complete
from dgemma_lsp.lsp.server import create_server
from dgemma_lsp.runtime.options import Options
from engine import load_engine
create_server()
engine = load_engine({str(tiny_model_dir)!r}, device="cpu", threads=1)
complete(standalone("x = \\n", "python", LanguageRegistry()).snapshot(), 4, Options(), engine)
print(sorted(m for m in sys.modules if m.split(".")[0] in ("training", "evaluation")))
"""
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
