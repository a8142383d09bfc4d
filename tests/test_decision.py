"""The show-or-not decision: the facts it reads, its features, the sure part, what each eagerness shows."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from dgemma_lsp.inline.context import build_context
from dgemma_lsp.inline.decision import (
    FEATURE_NAMES,
    Decision,
    Facts,
    decide,
    facts_of,
    features_of,
    sure_part,
)
from dgemma_lsp.inline.evidence import Evidence, evidence_of
from dgemma_lsp.inline.habits import History
from dgemma_lsp.inline.proposal import Proposal
from engine import Candidate

TEXT = "def area(width, height):\n    result = width * height\n    return \n\nprint(area(2, 3))\n"
CURSOR = TEXT.index("return ") + len("return ")


def context():
    return build_context(TEXT, CURSOR, count_tokens=lambda s: len(s) // 4 + 1, language_id="python")


def proposal(text: str, confidence: tuple[float, ...], offsets: tuple[int, ...], origin: str = "model"):
    evidence = Evidence(confidence=confidence, offsets=offsets, steps=3)
    return Proposal(text, CURSOR, sum(confidence) / len(confidence), origin, evidence)


def test_the_evidence_of_a_post_processed_text_is_its_tokens_and_none_for_closers_it_gained():
    # Tokens "foo", "(", "a", ", b".
    candidate = Candidate("foo(a, b", (1, 2, 3, 4), (0.9, 0.8, 0.7, 0.6), offsets=(0, 3, 4, 5))
    evidence = evidence_of(candidate, "foo(a, b)", steps=4, deadline_cut=True)  # a closer was appended
    assert evidence.confidence == (0.9, 0.8, 0.7, 0.6) and evidence.steps == 4 and evidence.deadline_cut
    head = evidence_of(candidate, "foo(a", steps=4, deadline_cut=False)  # cut after "a"
    assert head.confidence == (0.9, 0.8, 0.7) and head.offsets == (0, 3, 4) and not head.deadline_cut


def test_evidence_head_keeps_the_tokens_that_start_before_the_cut_and_rest_shifts_them():
    evidence = Evidence(confidence=(0.9, 0.5, 0.8), offsets=(0, 4, 7), draft_kept=True)
    assert evidence.head(7).confidence == (0.9, 0.5) and not evidence.head(7).draft_kept
    assert evidence.head(99) is evidence
    rest = evidence.rest(5)  # typed through "xxxxx": the second token is half typed
    assert rest.confidence == (0.5, 0.8) and rest.offsets == (0, 2)


def test_the_sure_part_stops_before_the_first_doubtful_token_never_inside_a_word():
    # "total_count + offset": tokens "total", "_count", " +", " offset"; doubt at "_count".
    sure = sure_part(proposal("total_count + offset", (0.9, 0.2, 0.9, 0.9), (0, 5, 11, 13)), 0.5)
    assert sure.text == "total_count + offset"  # the cut would be inside the first word: nothing left
    cut = sure_part(proposal("total + offset * 2", (0.9, 0.9, 0.3, 0.9), (0, 5, 7, 14)), 0.5)
    assert cut.text == "total +" and cut.evidence.confidence == (0.9, 0.9)
    lines = sure_part(proposal("a = 1\nb = 2", (0.9, 0.9, 0.9, 0.1), (0, 2, 4, 6)), 0.5)
    assert lines.text == "a = 1"  # a doubt on a later line keeps the lines before it whole
    assert sure_part(proposal("x + y", (0.2, 0.9), (0, 1)), 0.5).text == "x + y"  # the first token stays


def test_the_sure_part_stops_where_the_lookups_occurrences_stop_agreeing():
    # "1, y)": tokens "1", ",", " y", ")", all sure; the occurrences agreed on "1," only.
    agreed = Evidence(confidence=(0.9, 0.9, 0.9, 0.9), offsets=(0, 1, 2, 4), agreed=2)
    cut = sure_part(Proposal("1, y)", CURSOR, 0.9, "lookup", agreed), 0.3)
    assert cut.text == "1," and cut.evidence.agreed == 0  # what is left is all agreed
    assert sure_part(Proposal("1, y)", CURSOR, 0.9, "lookup", agreed), 0.0).text == "1, y)"  # eager: whole
    doubtful = replace(agreed, confidence=(0.9, 0.2, 0.9, 0.9), offsets=(0, 1, 2, 4), agreed=4)
    assert sure_part(Proposal("1, y)", CURSOR, 0.9, "lookup", doubtful), 0.3).text == "1"  # the first cut
    two_lines = Evidence(confidence=(0.9, 0.9), offsets=(0, 6), agreed=9)
    assert sure_part(Proposal("a = 1\nb = 2", CURSOR, 0.9, "lookup", two_lines), 0.3).text == "a = 1"


def test_features_are_named_as_the_model_names_them_and_read_the_context():
    facts = facts_of(proposal("result", (0.8, 0.6), (0, 3)), context(), History("taken", 0.5, 0), "model")
    features = features_of(facts)
    assert set(features) <= set(FEATURE_NAMES), set(features) - set(FEATURE_NAMES)
    assert features["source_model"] == 1.0 and features["language_python"] == 1.0
    assert features["confidence_min"] == pytest.approx(0.6) and features["confidence_mean"] == pytest.approx(
        0.7
    )
    assert features["before_space"] == 1.0 and features["after_none"] == 1.0
    assert features["previous_taken"] == 1.0 and features["taken_rate"] == 0.5
    # "result" is on the line above (`result = width * height`'s first word is not the line): no repeat.
    assert features["repeats_nearby"] == 0.0
    repeat = facts_of(proposal("result = width * height", (0.8,), (0,)), context(), History(), "model")
    assert features_of(repeat)["repeats_nearby"] == 1.0


def test_facts_round_trip_through_json_as_the_typing_sessions_keep_them():
    facts = facts_of(
        proposal("result", (0.8, 0.6), (0, 3), "lookup"), context(), History("partly", 0.3, 2), "lookup"
    )
    again = Facts.from_json(json.loads(json.dumps(facts.to_json())))
    assert features_of(again) == pytest.approx(features_of(facts), abs=1e-4)


DECISION = {
    "weights": {"confidence_mean": 10.0},
    "bias": -5.0,
    "thresholds": {"balanced": 0.5, "quiet": 0.99},
}


def test_the_probability_is_the_logistic_of_the_weighted_features():
    decision = Decision.from_json(DECISION)
    assert decision.probability({"confidence_mean": 0.5}) == pytest.approx(0.5)
    assert decision.probability({"confidence_mean": 0.7}) == pytest.approx(1 / (1 + math.exp(-2.0)))
    assert decision.probability({"an unknown feature": 5.0}) == pytest.approx(1 / (1 + math.exp(5.0)))
    assert Decision.from_json({}) is None and Decision.from_json(None) is None


@pytest.mark.parametrize(
    ("eagerness", "shown"), [("eager", ["sure", "unsure"]), ("balanced", ["sure"]), ("quiet", [])]
)
def test_each_eagerness_shows_what_its_threshold_keeps(eagerness, shown):
    decision = Decision.from_json(DECISION)
    proposals = (proposal("sure", (0.8,), (0,)), proposal("unsure", (0.3,), (0,)))
    kept, considered = decide(proposals, context(), History(), decision, eagerness, "model")
    assert [p.text for p in kept] == shown
    assert [c.proposal.text for c in considered] == ["sure", "unsure"]  # every one is considered
    assert considered[0].probability == pytest.approx(1 / (1 + math.exp(-3.0)))


def test_the_value_weight_lets_a_long_likely_suggestion_pass_where_a_short_one_as_likely_does_not():
    decision = Decision.from_json({**DECISION, "thresholds": {"balanced": 0.8}, "value": {"balanced": 0.05}})
    # Both at probability 0.5: "result" scores 0.5 * (1 + 0.05 * 6) = 0.65, the long one (66) 2.15.
    long = "width * height + width * height * 2 + width * height * 3 + width"
    proposals = (proposal("result", (0.5,), (0,)), proposal(long, (0.5,), (0,)))
    kept, considered = decide(proposals, context(), History(), decision, "balanced", "model")
    assert [p.text for p in kept] == [long]
    assert decision.score(0.5, 1000, "balanced") == pytest.approx(0.5 * (1 + 0.05 * 80))
    assert decision.score(0.5, 1000, "quiet") == 0.5  # no value weight for quiet
    assert considered[0].probability == pytest.approx(0.5)  # the probability is reported, not the score


def test_without_a_decision_every_eagerness_shows_everything():
    proposals = (proposal("unsure", (0.01,), (0,)),)
    for eagerness in ("quiet", "balanced", "eager"):
        kept, considered = decide(proposals, context(), History(), None, eagerness, "model")
        assert kept == proposals and considered[0].probability is None


def test_identifiers_the_code_around_the_cursor_never_names_are_unseen():
    at = context()
    invented = facts_of(proposal("width * depth", (0.9, 0.9), (0, 5)), at, History(), "model")
    assert invented.unseen == ("depth",)  # `width` is a parameter above; `depth` is named nowhere
    features = features_of(invented)
    assert features["unseen_names"] == pytest.approx(math.log1p(1)) and features["unseen_first"] == 0.0
    assert features_of(invented.head(len("width")))["unseen_names"] == 0.0  # the head names only `width`
    # Mid-word, the first identifier is judged with what is typed of it: `res` + `ult` is `result`.
    text = TEXT.replace("return \n", "return res\n")
    typed = text.index("return res") + len("return res")
    inside = build_context(text, typed, count_tokens=lambda s: len(s) // 4 + 1, language_id="python")
    assert facts_of(proposal("ult", (0.9,), (0,)), inside, History(), "model").unseen == ()
    assert facts_of(proposal("ulting", (0.9,), (0,)), inside, History(), "model").unseen == ("ulting",)


def test_a_lookups_backing_is_read_from_its_evidence():
    backed = Evidence(confidence=(0.9,), offsets=(0,), lookup_key=12, lookup_seen=4, lookup_same_line=0.75)
    facts = facts_of(Proposal("height", CURSOR, 0.9, "lookup", backed), context(), History(), "model")
    features = features_of(facts)
    assert features["lookup_same_line"] == 0.75 and features["lookup_seen"] == pytest.approx(
        math.log1p(4) / math.log1p(16)
    )
    assert Facts.from_json(json.loads(json.dumps(facts.to_json()))) == facts
