"""Show or not: the probability that the user takes a suggestion, and the eagerness that sets the bar.

The probability is a logistic model over features the server already has (where the suggestion came
from and how far a lookup's other occurrences agree with it, the engine's confidence profile of it,
its length, the names it invents, the characters around the cursor, the language, whether it repeats
nearby code, what the user did with the last ones), fitted on typing
sessions (`python -m evaluation.typing_sessions fit`) and shipped beside the model's weights
(decision.json). At run time it is a dot product: a few microseconds on the event loop or the worker.

`eager` shows every suggestion the pipeline keeps (the behaviour before the decision existed);
`balanced` and `quiet` hide those whose score is below their thresholds (the probability, weighted
up by the characters it would write where that eagerness says so), and cut a suggestion to its sure
part: before the token where the engine's confidence drops, and no further than its lookup's
occurrences agree.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from dgemma_lsp.inline.context import CompletionContext
from dgemma_lsp.inline.evidence import Evidence
from dgemma_lsp.inline.habits import OUTCOMES, History
from dgemma_lsp.inline.proposal import Proposal

SOURCES = ("model", "lookup", "structure", "next_token", "typed_through", "cache", "speculative")
LANGUAGES = ("python", "typescript", "lua")
VALUE_CHARS = 80  # a longer suggestion's score counts this many of its characters
NEARBY_LINES = 8  # code lines above and below the cursor's that a suggestion may repeat
_LINE_CLIP = 48  # characters of the cursor's line kept either side of it
_SUFFIX_HEAD = 200
_WORD = re.compile(r"\w")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w+")
_TRAILING_WORD = re.compile(r"\w+$")
_OPERATOR = "=+-*/%<>!&|^~"
_OPENERS = "([{"
_CLOSERS = ")]}"


@dataclass(frozen=True)
class Facts:
    """Everything the decision reads of one suggestion: plain data, so that the typing sessions that
    fit it can keep it and recompute the features of a cut suggestion exactly as the server would."""

    text: str
    source: str
    language: str
    mode: str  # single_line, multi_line, block
    evidence: Evidence
    line_prefix: str  # the cursor's line before it (its last _LINE_CLIP characters)
    line_suffix: str  # and after it (its first _LINE_CLIP)
    nearby: tuple[str, ...]  # the code lines around the cursor's, stripped
    suffix_head: str  # the start of the code after the cursor
    history: History
    typed: int = 0  # characters of it typed through since it was first shown
    unseen: tuple[str, ...] = ()  # its identifiers that the code around the cursor never names

    def head(self, chars: int) -> Facts:
        """The facts of the suggestion cut to its first `chars` characters."""
        return replace(self, text=self.text[:chars], evidence=self.evidence.head(chars))

    def to_json(self) -> dict:
        evidence, history = self.evidence, self.history
        return {
            **{k: getattr(self, k) for k in ("text", "source", "language", "mode", "line_prefix")},
            "line_suffix": self.line_suffix,
            "nearby": list(self.nearby),
            "suffix_head": self.suffix_head,
            "typed": self.typed,
            "unseen": list(self.unseen),
            "evidence": {
                "confidence": [round(c, 4) for c in evidence.confidence],
                "offsets": list(evidence.offsets),
                "head_confidence": [round(c, 4) for c in evidence.head_confidence],
                "draft_kept": evidence.draft_kept,
                "lookup_key": evidence.lookup_key,
                "found_in": evidence.found_in,
                "lookup_seen": evidence.lookup_seen,
                "lookup_same_line": round(evidence.lookup_same_line, 4),
                "lookup_same_word": round(evidence.lookup_same_word, 4),
                "agreed": evidence.agreed,
                "steps": evidence.steps,
                "deadline_cut": evidence.deadline_cut,
            },
            "history": {
                "previous": history.previous,
                "taken_rate": round(history.taken_rate, 4),
                "streak": history.streak,
            },
        }

    @classmethod
    def from_json(cls, raw: Mapping) -> Facts:
        evidence, history = raw["evidence"], raw["history"]
        return cls(
            text=raw["text"],
            source=raw["source"],
            language=raw["language"],
            mode=raw["mode"],
            evidence=Evidence(
                confidence=tuple(evidence["confidence"]),
                offsets=tuple(evidence["offsets"]),
                head_confidence=tuple(evidence["head_confidence"]),
                draft_kept=evidence["draft_kept"],
                lookup_key=evidence["lookup_key"],
                found_in=evidence["found_in"],
                lookup_seen=evidence.get("lookup_seen", 0),
                lookup_same_line=evidence.get("lookup_same_line", 0.0),
                lookup_same_word=evidence.get("lookup_same_word", 0.0),
                agreed=evidence.get("agreed", 0),
                steps=evidence["steps"],
                deadline_cut=evidence["deadline_cut"],
            ),
            line_prefix=raw["line_prefix"],
            line_suffix=raw["line_suffix"],
            nearby=tuple(raw["nearby"]),
            suffix_head=raw["suffix_head"],
            history=History(history["previous"], history["taken_rate"], history["streak"]),
            typed=raw.get("typed", 0),
            unseen=tuple(raw.get("unseen", ())),
        )


def facts_of(proposal: Proposal, context: CompletionContext, history: History, source: str) -> Facts:
    """The facts of `proposal`, offered at `context`."""
    return Facts(
        text=proposal.text,
        source=source,
        language=context.language or "",
        mode=context.mode,
        evidence=proposal.evidence,
        line_prefix=context.line_prefix[-_LINE_CLIP:],
        line_suffix=context.line_suffix[:_LINE_CLIP],
        nearby=nearby_lines(context),
        suffix_head=context.suffix[:_SUFFIX_HEAD],
        history=history,
        typed=proposal.typed,
        unseen=unseen_identifiers(proposal.text, context),
    )


def unseen_identifiers(text: str, context: CompletionContext) -> tuple[str, ...]:
    """The identifiers of `text` that the code around the cursor (the model's windows) never names: a
    suggestion that invents names is likelier wrong. The first one continues a word the cursor is in."""
    unseen = []
    for match in _IDENTIFIER.finditer(text):
        name = match.group(0)
        whole = name
        if match.start() == 0 and (typed := _TRAILING_WORD.search(context.line_prefix)):
            whole = typed.group(0) + name
        if whole not in context.prefix and whole not in context.suffix:
            unseen.append(name)
    return tuple(unseen)


def nearby_lines(context: CompletionContext) -> tuple[str, ...]:
    """The code lines above and below the cursor's (NEARBY_LINES each way), stripped."""
    above = context.prefix.rsplit("\n", NEARBY_LINES + 1)[1:-1]
    below = context.suffix.split("\n", NEARBY_LINES + 1)[1 : NEARBY_LINES + 1]
    return tuple(line.strip() for line in (*above, *below) if line.strip())


def _char_class(char: str) -> str:
    if not char:
        return "none"
    if _WORD.match(char):
        return "word"
    if char.isspace():
        return "space"
    if char in _OPENERS:
        return "opener"
    if char in _CLOSERS:
        return "closer"
    if char in _OPERATOR:
        return "operator"
    return {
        ".": "dot",
        ",": "comma",
        ":": "colon",
        ";": "colon",
        '"': "quote",
        "'": "quote",
        "`": "quote",
    }.get(char, "other")


BEFORE_CLASSES = ("word", "space", "opener", "closer", "operator", "dot", "comma", "colon", "quote")
AFTER_CLASSES = ("none", "word", "closer", "space", "other")


def features_of(facts: Facts) -> dict[str, float]:
    """The decision's inputs, by name (a feature missing from a fitted model weighs nothing)."""
    text, evidence = facts.text, facts.evidence
    confidence = evidence.confidence or (0.0,)
    lowest = min(confidence)
    mean = sum(confidence) / len(confidence)
    drop = next((i for i, c in enumerate(confidence) if c < 0.5), len(confidence))
    head = evidence.head_confidence
    prefix = facts.line_prefix
    before = prefix[-1:] if prefix else ""
    after = facts.line_suffix[:1]
    after_class = _char_class(after) if after else "none"
    stripped = text.strip()
    first_line = text.split("\n", 1)[0].strip()
    history = facts.history
    values: dict[str, float] = {
        f"source_{facts.source}": 1.0,
        f"language_{facts.language if facts.language in LANGUAGES else 'other'}": 1.0,
        "multi_line": float(facts.mode != "single_line"),
        "confidence_mean": mean,
        "confidence_min": lowest,
        "confidence_first": confidence[0],
        "confidence_last": confidence[-1],
        "confidence_below_half": sum(c < 0.5 for c in confidence) / len(confidence),
        "confidence_drop_at": drop / len(confidence),
        "mean_log_confidence": sum(math.log(max(c, 1e-4)) for c in confidence) / len(confidence),
        "unscored": float(not evidence.confidence),
        "head_scored": float(bool(head)),
        "head_mean": sum(head) / len(head) if head else 0.0,
        "head_min": min(head) if head else 0.0,
        "draft_kept": float(evidence.draft_kept),
        "lookup_key": math.log1p(evidence.lookup_key) / math.log1p(256),
        f"found_in_{evidence.found_in or 'none'}": 1.0,
        "steps": math.log1p(evidence.steps),
        "deadline_cut": float(evidence.deadline_cut),
        "chars": math.log1p(len(text)) / math.log1p(256),
        "tokens": math.log1p(len(evidence.offsets)) / math.log1p(64),
        "lines": float(text.count("\n")),
        "typed": math.log1p(facts.typed) / math.log1p(64),
        "has_word": float(bool(_WORD.search(text))),
        "starts_with_space": float(text[:1].isspace()),
        f"before_{_char_class(before) if before else 'line_start'}": 1.0,
        "at_line_start": float(not prefix.strip()),
        "mid_word": float(bool(before) and bool(_WORD.match(before)) and bool(_WORD.match(text[:1]))),
        f"after_{after_class if after_class in AFTER_CLASSES else 'other'}": 1.0,
        "repeats_nearby": float(bool(first_line) and first_line in facts.nearby),
        "in_suffix": float(len(stripped) > 2 and stripped in facts.suffix_head),
        f"previous_{history.previous}": 1.0,
        **_novelty(facts, text, prefix),
        "taken_rate": history.taken_rate,
        "streak": math.log1p(history.streak) / math.log1p(16),
    }
    # Interactions the logistic model cannot form alone: how much confidence says depends on the row.
    for source in ("lookup", "next_token", "model", "structure"):
        if facts.source == source:
            values[f"confidence_mean_x_{source}"] = mean
    if head:
        values["head_mean_x_next_token"] = values["head_mean"]
    return values


def _novelty(facts: Facts, text: str, prefix: str) -> dict[str, float]:
    """How much the suggestion invents, and how much the lookup that drafted it is backed."""
    evidence = facts.evidence
    names = _IDENTIFIER.findall(text)
    unseen = [name for name in facts.unseen if name in names]
    typed = len(prefix.strip())
    return {
        "unseen_names": math.log1p(len(unseen)),
        "unseen_first": float(bool(names) and names[0] in unseen),
        "names": math.log1p(len(names)),
        "typed_on_line": math.log1p(typed) / math.log1p(_LINE_CLIP),
        "key_on_line": math.log1p(min(evidence.lookup_key, typed)) / math.log1p(_LINE_CLIP),
        "lookup_seen": math.log1p(evidence.lookup_seen) / math.log1p(16),
        "lookup_same_line": evidence.lookup_same_line,
        "lookup_same_word": evidence.lookup_same_word,
    }


FEATURE_NAMES = tuple(
    [f"source_{s}" for s in SOURCES]
    + [f"language_{language}" for language in (*LANGUAGES, "other")]
    + [
        "multi_line", "confidence_mean", "confidence_min", "confidence_first", "confidence_last",
        "confidence_below_half", "confidence_drop_at", "mean_log_confidence", "unscored", "head_scored",
        "head_mean", "head_min", "draft_kept", "lookup_key",
    ]
    + [f"found_in_{where}" for where in ("document", "open", "repository", "none")]
    + ["steps", "deadline_cut", "chars", "tokens", "lines", "typed", "has_word", "starts_with_space"]
    + [f"before_{c}" for c in (*BEFORE_CLASSES, "other", "line_start")]
    + ["at_line_start", "mid_word"]
    + [f"after_{c}" for c in AFTER_CLASSES]
    + ["repeats_nearby", "in_suffix"]
    + [f"previous_{o}" for o in OUTCOMES]
    + ["taken_rate", "streak"]
    + ["unseen_names", "unseen_first", "names", "typed_on_line", "key_on_line"]
    + ["lookup_seen", "lookup_same_line", "lookup_same_word"]
    + [f"confidence_mean_x_{s}" for s in ("lookup", "next_token", "model", "structure")]
    + ["head_mean_x_next_token"]
)  # fmt: skip


@dataclass(frozen=True)
class Decision:
    """A fitted show-or-not model: logistic weights by feature name, and each eagerness' settings."""

    weights: Mapping[str, float]
    bias: float
    thresholds: Mapping[str, float]  # eagerness -> the least score shown (absent: all shown)
    sure: Mapping[str, float]  # eagerness -> cut before the first later token below this confidence
    # eagerness -> what each character a taken suggestion would write adds to its score (absent: nothing)
    value: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def from_json(cls, raw: Mapping | None) -> Decision | None:
        """The decision shipped with a model (its decision.json), or None when it has none."""
        if not raw:
            return None
        return cls(
            weights={str(k): float(v) for k, v in raw["weights"].items()},
            bias=float(raw["bias"]),
            thresholds={str(k): float(v) for k, v in raw.get("thresholds", {}).items()},
            sure={str(k): float(v) for k, v in raw.get("sure", {}).items()},
            value={str(k): float(v) for k, v in raw.get("value", {}).items()},
        )

    def probability(self, features: Mapping[str, float]) -> float:
        weights = self.weights
        z = self.bias + sum(value * weights.get(name, 0.0) for name, value in features.items())
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))

    def score(self, probability: float, chars: int, eagerness: str) -> float:
        """What an eagerness' threshold is compared with: the probability of being taken, weighted up by
        what a taken suggestion writes (up to VALUE_CHARS), so that a long likely one outranks a short
        one as likely: the same share taken with more of the code written."""
        return probability * (1.0 + self.value.get(eagerness, 0.0) * min(chars, VALUE_CHARS))

    def shows(self, probability: float, eagerness: str, chars: int) -> bool:
        return self.score(probability, chars, eagerness) >= self.thresholds.get(eagerness, 0.0)


@dataclass(frozen=True)
class Considered:
    """A suggestion the decision looked at: its facts, its probability of being taken, the verdict."""

    proposal: Proposal
    facts: Facts
    probability: float | None  # None: no decision shipped for the model
    shown: bool


def sure_length(text: str, evidence: Evidence, threshold: float) -> int:
    """How much of `text` is sure: up to the first token after its first whose confidence is below
    `threshold`, and no further than the head every occurrence of its lookup's match went on with; cut
    on a line break or a word's start (never inside a word); all of it when neither cuts it, when the
    threshold is 0 (eager), or when the cut would leave nothing."""
    if threshold <= 0:
        return len(text)
    cuts = [evidence.agreed] if 0 < evidence.agreed < len(text) else []
    confidence = evidence.confidence
    drop = next((i for i in range(1, len(confidence)) if confidence[i] < threshold), None)
    if drop is not None:
        cuts.append(evidence.offsets[drop])
    if not cuts:
        return len(text)
    cut = min(cuts)
    newline = text.rfind("\n", 0, cut)
    if newline > 0:
        cut = newline  # a later line's doubt: keep the lines before it whole
    else:
        while 0 < cut < len(text) and _WORD.match(text[cut - 1]) and _WORD.match(text[cut]):
            cut -= 1  # not inside a word
    head = text[:cut].rstrip(" \t")
    return len(head) if head.strip() else len(text)


def sure_part(proposal: Proposal, threshold: float) -> Proposal:
    """The proposal cut to its sure part (`sure_length`)."""
    length = sure_length(proposal.text, proposal.evidence, threshold)
    if length == len(proposal.text):
        return proposal
    return replace(proposal, text=proposal.text[:length], evidence=proposal.evidence.head(length))


def decide(
    proposals: tuple[Proposal, ...],
    context: CompletionContext,
    history: History,
    decision: Decision | None,
    eagerness: str,
    source: str,
) -> tuple[tuple[Proposal, ...], tuple[Considered, ...]]:
    """The proposals to show at `eagerness` (each cut to its sure part first where that eagerness
    says so), and every one considered, with its facts and probability."""
    threshold = decision.sure.get(eagerness, 0.0) if decision is not None and eagerness != "eager" else 0.0
    considered: list[Considered] = []
    for proposal in proposals:
        cut = sure_part(proposal, threshold)
        facts = facts_of(cut, context, history, proposal.origin if source == "model" else source)
        probability = decision.probability(features_of(facts)) if decision is not None else None
        shown = (
            eagerness == "eager"
            or probability is None
            or decision.shows(probability, eagerness, len(cut.text))
        )
        considered.append(Considered(cut, facts, probability, shown))
    return tuple(c.proposal for c in considered if c.shown), tuple(considered)
