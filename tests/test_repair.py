"""Syntax-guided repair: finding the errors a completion brings in, and re-denoising only those tokens."""

from __future__ import annotations

from dataclasses import replace

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.documents.workspace import standalone
from dgemma_lsp.inline.context import build_context
from dgemma_lsp.inline.pipeline import Completion, execute, parse_guarded
from dgemma_lsp.inline.planning import prepare
from dgemma_lsp.inline.proposal import Proposal
from dgemma_lsp.inline.repair import ParseCheck, cut_points, introduced_errors, repair_request
from dgemma_lsp.runtime.options import CompletionOptions, Options
from engine import Candidate, InfillRequest, InfillResult, Timings

PYTHON = LanguageRegistry().grammar("python")
PREFIX = "def f(x):\n    return (x"
SUFFIX = ")\n\nprint(f(1))\n"


def test_a_completion_that_keeps_the_parse_has_no_introduced_errors():
    assert introduced_errors(PYTHON, PREFIX, " + 1", SUFFIX) == []


def test_an_extra_bracket_is_an_introduced_error_inside_the_completion():
    spans = introduced_errors(PYTHON, PREFIX, " + 1))", SUFFIX)
    assert spans and all(0 <= a < b <= len(" + 1))") for a, b in spans)


def test_errors_the_code_already_had_do_not_count():
    broken_prefix = "def f(x:\n    return (x"  # the file was broken before the completion
    assert introduced_errors(PYTHON, broken_prefix, " + 1", SUFFIX) == []


def test_an_error_on_a_line_that_parsed_counts_even_where_the_file_keeps_its_count_of_errors():
    # The line below has a stray `)`; `max(` before `compute(values)` opens a bracket that the stray one
    # then closes: the file still has one error, but now on the cursor's line, which parsed before.
    prefix, suffix = "total = ", "compute(values)\nfoo = bar)\n"
    check = ParseCheck(PYTHON, prefix, suffix)
    assert check.line_parsed and check.introduced("max(")
    assert check.introduced("1 + ") == []  # what keeps the line whole passes


def test_a_head_cut_for_the_parse_does_not_run_into_the_word_after_the_cursor():
    # `max(` breaks the line; its head `max` would make `maxcompute(values)`: nothing is left to offer.
    text = "total = compute(values)\nfoo = bar)\n"
    context = build_context(text, 8, count_tokens=lambda s: len(s) // 4 + 1, language_id="python")
    result = InfillResult((), 0, 0.0, "converged", Timings(0.0, 0.0, 0.0), 0, 0)
    offered = (Proposal("max(", 8, 0.9), Proposal("1 + ", 8, 0.9))
    check = ParseCheck(PYTHON, context.prefix, context.suffix)
    guarded = parse_guarded(check, Completion(offered, context, result))
    assert [p.text for p in guarded.proposals] == ["1 + "]


def test_cut_points_are_line_ends_then_word_ends_longest_first():
    assert cut_points("foo(a, b)\nbar()\n") == [10, 9, 8, 5, 3]  # line 1; then after ")", "b", "a", "foo"
    assert cut_points("x") == []


def test_what_breaks_the_parse_is_cut_to_its_longest_head_that_does_not():
    check = ParseCheck(PYTHON, PREFIX, SUFFIX)
    assert check.preserving_head(" + 1") == " + 1"  # nothing to cut
    assert check.preserving_head(" + 1))") == " + 1"
    assert check.preserving_head("))") == ""  # no head keeps the parse: not offered


def test_the_repair_request_fixes_every_token_outside_the_broken_spans():
    request = InfillRequest(prefix=PREFIX, suffix=SUFFIX, language="python")
    middle = " + 1))"
    token_spans = [(0, 2), (2, 4), (4, 5), (5, 6)]  # " +", " 1", ")", ")"
    fix = repair_request(request, middle, [(4, 6)], token_spans)
    assert fix.prefix == PREFIX and fix.suffix == SUFFIX  # never touched
    assert fix.seed_canvas == middle and fix.fixed_positions == (0, 1)
    assert fix.seed_noise == 1.0 and fix.max_steps is not None


class RecordingEngine:
    """The real tiny engine, recording every request it is given. Its first answer is replaced by a
    middle that breaks the parse in one place (a random model's noise breaks it everywhere or, when
    post-processing cuts it away, nowhere): the repair pass that follows is the real engine's."""

    def __init__(self, engine, first_answer: str, repair_answer: str | None = None) -> None:
        self.engine, self.requests, self.results = engine, [], []
        self.first_answer, self.repair_answer = first_answer, repair_answer

    def infill(self, request):
        self.requests.append(request)
        result = self.engine.infill(request)
        answer = self.first_answer if len(self.requests) == 1 else self.repair_answer
        if answer is not None:
            ids = tuple(self.engine.format.encode(answer))
            result = replace(result, candidates=(Candidate(answer, ids, tuple(0.5 for _ in ids)),))
        self.results.append(result)
        return result

    def token_spans(self, text):
        return self.engine.token_spans(text)

    def count_tokens(self, text):
        return self.engine.count_tokens(text)


def test_repair_keeps_prefix_suffix_and_fixed_tokens(tiny_engine):
    text = "def mean(values):\n    total = sum(values)\n    return total / len(values)\n"
    opened = standalone(text, "python", LanguageRegistry())
    cursor = text.index("sum(values)") + len("sum(values)")  # the file parses with nothing added here
    options = Options(completion=CompletionOptions(latency_budget_ms=0, max_steps=4))
    planned = prepare(opened.snapshot(), cursor, options, tiny_engine, 0.0)
    recording = RecordingEngine(tiny_engine, " + len(values]")  # "]" closes nothing: one broken place
    outcome = execute(planned, recording)
    assert len(recording.requests) == 2  # the first answer broke the parse, so a repair pass ran
    first, fix = recording.requests
    assert (fix.prefix, fix.suffix) == (first.prefix, first.suffix)
    # Whatever repair could not fix was cut: no proposal offered breaks the parse.
    check = ParseCheck(PYTHON, planned.context.prefix, planned.context.suffix)
    assert all(not check.introduced(p.text) and p.text.strip() for p in outcome.proposals)
    assert fix.fixed_positions and fix.seed_canvas
    seed_ids = tiny_engine.format.encode(fix.seed_canvas)
    if outcome.repaired:
        repaired_ids = tiny_engine.format.encode(outcome.proposals[0].text)
        assert all(repaired_ids[p] == seed_ids[p] for p in fix.fixed_positions if p < len(repaired_ids))


def test_a_repair_pass_that_is_not_kept_still_counts_as_the_engines_work(tiny_engine):
    # Its steps and time belong to the engine: dropped, the server's figures showed them as its own overhead.
    text = "def mean(values):\n    total = sum(values)\n    return total / len(values)\n"
    opened = standalone(text, "python", LanguageRegistry())
    cursor = text.index("sum(values)") + len("sum(values)")
    options = Options(completion=CompletionOptions(latency_budget_ms=0, max_steps=4))
    planned = prepare(opened.snapshot(), cursor, options, tiny_engine, 0.0)
    recording = RecordingEngine(tiny_engine, " + len(values]", repair_answer=" + len(values]]")
    outcome = execute(planned, recording)
    first, repair = recording.results
    assert not outcome.repaired and [p.text for p in outcome.proposals] == [" + len"]
    assert outcome.result.steps == first.steps + repair.steps
    assert outcome.result.timings.total_ms == first.timings.total_ms + repair.timings.total_ms
    assert outcome.result.candidates == first.candidates
