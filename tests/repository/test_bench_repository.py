"""`python -m evaluation.bench.repository` builds the index the server's way and prints its figures."""

from __future__ import annotations

import json
from pathlib import Path

from evaluation.bench.repository import assemble, main


def test_the_repository_bench_measures_a_folder_it_assembled(tmp_path: Path, capsys) -> None:
    folder = assemble(tmp_path / "repo", 60)
    assert len(list(folder.rglob("*.py"))) == 60
    out = tmp_path / "figures.json"
    assert main(["--folder", str(folder), "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    assert 0 < figures["files"] <= 60 and figures["windows"] > figures["files"]
    assert figures["build_s"] >= 0 and figures["traced_mb"] > 0
    for name in ("retrieval_new_cursor", "retrieval_typing", "lookup_draft"):
        assert 0 <= figures[name]["p50_ms"] <= figures[name]["p95_ms"]
    assert "retrieval_typing" in capsys.readouterr().out
