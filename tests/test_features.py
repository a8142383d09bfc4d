"""The feature measurements run end to end on the tiny model (three rows each)."""

from __future__ import annotations

import json

from evaluation.bench.features import main


def test_every_feature_measure_reports_its_figures(tiny_model_dir, tmp_path):
    out = tmp_path / "features.json"
    assert main(["all", "--model", str(tiny_model_dir), "--limit", "3", "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    assert set(figures["anchoring"]) >= {"plain", "anchored"}
    assert figures["anchoring"]["plain"]["n"] == figures["anchoring"]["anchored"]["n"] >= 1
    assert figures["repair"]["n"] >= 1 and 0 <= figures["repair"]["rate_with"] <= 1
    thresholds = [row["min_mean_confidence_percent"] for row in figures["confidence"]["by_threshold"]]
    assert thresholds[0] == 0 and figures["confidence"]["by_threshold"][0]["offered_share"] == 1.0
    shares = [row["offered_share"] for row in figures["confidence"]["by_threshold"]]
    assert shares == sorted(shares, reverse=True)  # a higher threshold never offers more
    assert figures["typing"]["n"] >= 1 and figures["typing"]["steps_fresh"] >= 1
    drafts = figures["drafts"]
    assert drafts["lines"] >= 5000 and drafts["cursors"] == 300 and 0 < drafts["with_a_draft"] <= 1
    assert 0 < drafts["p50_ms"] <= drafts["p95_ms"] <= drafts["max_ms"]
