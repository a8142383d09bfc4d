"""The gate choice on a calibration curve: the precision goal first, else the most accepted characters."""

from __future__ import annotations

import json

from evaluation.calibrate import NEXT_TOKEN_GRID, GatePoint, choose
from evaluation.cli import main


def point(mean: int, offered: float, precision: float, chars: float, single: int) -> GatePoint:
    return GatePoint(mean, 0, offered, precision, precision, chars, single)


def test_the_goal_reached_with_the_most_accepted_characters_wins():
    curve = [point(0, 0.9, 0.3, 4.0, 140), point(50, 0.5, 0.62, 2.5, 60), point(90, 0.2, 0.8, 1.0, 25)]
    assert choose(curve, 162).min_mean_confidence_percent == 50


def test_below_the_goal_no_accepted_character_is_given_up_for_precision():
    # The last campaign export: 65% offered a little more precision (25% against 22.5%, both far from
    # the goal) and cost a quarter of the accepted characters.
    curve = [point(0, 0.93, 0.2, 4.2, 79), point(45, 0.81, 0.225, 4.2, 70), point(65, 0.58, 0.25, 3.1, 52)]
    assert choose(curve, 162).min_mean_confidence_percent == 45


def test_among_equal_accepted_characters_a_handful_of_lucky_offers_does_not_win():
    # 2 of 5 (40%) supports less than 40 of 120 (33%): the Wilson lower bounds are 12% and 25%.
    few, many = point(95, 0.03, 0.4, 3.0, 5), point(50, 0.75, 1 / 3, 3.0, 120)
    assert few.supported_precision < many.supported_precision
    assert choose([point(0, 0.9, 0.2, 3.0, 140), few, many], 162).min_mean_confidence_percent == 50


def test_a_goal_reached_on_a_handful_of_offers_is_not_reached():
    # The step-13,188 export's curve: 4 right of 6 at 95% (offering 10% of the time) against the most
    # accepted characters at 60% (31% of 65 right).
    curve = [point(0, 0.95, 0.25, 4.86, 80), point(60, 0.85, 0.31, 4.86, 65), point(95, 0.1, 0.67, 0.51, 6)]
    assert choose(curve, 162).min_mean_confidence_percent == 60
    assert choose([*curve, point(90, 0.3, 0.62, 2.0, 40)], 162).min_mean_confidence_percent == 90


def test_points_offering_fewer_than_five_completions_never_count():
    curve = [point(0, 0.9, 0.2, 4.0, 140), point(95, 0.01, 1.0, 0.1, 2)]
    assert choose(curve, 162).min_mean_confidence_percent == 0


def test_a_fixed_gate_is_held_and_the_others_are_chosen_on_real_decodes(tiny_model_dir, tmp_path):
    # The tiny random checkpoint through the pipeline on three calibration rows: the figures mean
    # nothing, the search does; the model's earlier mean gate is held while the next-token gate is chosen.
    out = tmp_path / "calibration.json"
    common = ["heldout", "--language", "python-calibration", "--limit", "3", "--model", str(tiny_model_dir)]
    common += ["--threads", "1", "--budget-ms", "0", "--max-steps", "2", "--calibrate", str(out)]
    assert main([*common, "--fix-gate", "min_mean_confidence_percent=40"]) == 0
    found = json.loads(out.read_text())
    assert found["min_mean_confidence_percent"] == 40
    assert found["fixed"] == {"min_mean_confidence_percent": 40}
    assert {p["min_mean_confidence_percent"] for p in found["curve"]} == {40}
    assert {p["min_next_token_confidence_percent"] for p in found["curve"]} == set(NEXT_TOKEN_GRID)
    assert found["open_gates"]["min_mean_confidence_percent"] == 0
    assert main([*common, "--fix-gate", "min_vibes_percent=40"]) == 2
    assert main([*common, "--fix-gate", "min_mean_confidence_percent=140"]) == 2
    assert main([*common, "--fix-gate", "forty"]) == 2
