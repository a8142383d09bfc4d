"""A typing session through the real server over stdio: regions retyped as the typist does, each
pause's suggestion judged against the code that follows.

One server per workspace folder (its regions' files left out of the index: the buffer is the only
copy the server reads), its regions typed one after another in that session, so what the server
learns of the typist carries from one region to the next as it would in an editor.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from lsprotocol import types

from dgemma_lsp.documents.positions import LineIndex
from evaluation.bench.driver import BenchClient, plain
from evaluation.typing_sessions.regions import Region, excluded_from_index
from evaluation.typing_sessions.typist import Taken, judge, keys_of, keys_to_type

ANSWER_TIMEOUT_S = 60.0  # a generous bound on one answer (the budget is a few hundred ms)
INDEX_TIMEOUT_S = 600.0
SUGGESTION = "dgemma/suggestion"


@dataclass
class Pause:
    """One pause of the typist: what was shown and what they did with it."""

    region: str
    language: str
    at: int  # offset in the region
    latency_ms: float | None  # None: no answer within the bound, or an error
    shown: str  # "" when nothing was shown
    verdict: str  # whole, partial, wrong, or none (nothing shown)
    chars: int  # characters the typist took
    keys: int  # keys pressed to take them
    source: str | None = None  # where the server's answer came from (its status)
    truth: str = ""  # the region's rest, up to the first line break after the suggestion's length
    considered: list[dict] = field(default_factory=list)  # the server's dgemma/suggestion facts


@dataclass
class RegionLog:
    region: str
    language: str
    chars: int  # the region's characters
    keys: int  # keys that type it by hand
    pauses: list[Pause] = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)


class TypingClient(BenchClient):
    """The bench's client, also declaring (and keeping) the server's per-answer suggestion facts."""

    def __init__(self, facts: bool) -> None:
        super().__init__()
        self.facts: list[dict] = []
        self.declare_facts = facts

        @self.client.feature(SUGGESTION)
        def on_suggestion(params) -> None:
            self.facts.append(plain(params))

    def experimental(self) -> dict:
        return {"dgemma": {"status": True, "suggestion": self.declare_facts}}


def ghost_text(item: types.InlineCompletionItem, lines: LineIndex, cursor: int) -> str:
    """What an editor shows of an item at `cursor`: its text past what its range already holds."""
    text = item.insert_text if isinstance(item.insert_text, str) else item.insert_text.value
    if item.range is None:
        return text
    start = lines.offset_at(item.range.start.line, item.range.start.character, "utf-16")
    typed = lines.text[start:cursor]
    return text[len(typed) :] if text.startswith(typed) else ""


def _truth_for_record(rest: str, reach: int) -> str:
    """The region's rest as far as a suggestion `reach` characters long could reach, to the line's end."""
    end = rest.find("\n", reach)
    return rest if end < 0 else rest[:end]


async def type_region(bench: TypingClient, region: Region, version: int = 1) -> RegionLog:
    """Retype `region` in its file, pausing before each token and after each accept; returns what each
    pause showed and what the typist took."""
    uri = (region.folder / region.path).resolve().as_uri()
    typed = region.typed
    log = RegionLog(region.name, region.language_id, len(typed), keys_to_type(typed))
    lines = LineIndex(region.opened)
    bench.open(uri, region.language_id, region.opened)
    position = 0  # characters of the region typed so far
    keys, index = keys_of(typed), 0
    looks = False  # right after an accept the typist reads the next suggestion
    while position < len(typed) and index < len(keys):
        key = keys[index]
        if key.pause or looks:
            looks = False
            pause, taken = await _pause(bench, region, uri, lines, position)
            log.pauses.append(pause)
            if taken.chars:
                version += 1
                lines = bench.insert(uri, version, lines, region.start + position, pause.shown[: taken.chars])
                position += taken.chars
                keys, index, looks = keys_of(typed[position:]), 0, True
                continue
        version += 1
        lines = bench.insert(uri, version, lines, region.start + position, key.text)
        position += len(key.text)
        index += 1
    bench.close(uri)
    return log


async def _pause(
    bench: TypingClient, region: Region, uri: str, lines: LineIndex, position: int
) -> tuple[Pause, Taken]:
    """Ask for a suggestion at the cursor, wait for it, and judge it."""
    cursor = region.start + position
    rest = region.typed[position:]
    bench.facts.clear()
    statuses = len(bench.status)
    sent = time.monotonic()
    _, future = bench.request(uri, lines, cursor)
    try:
        answer = await asyncio.wait_for(future, ANSWER_TIMEOUT_S)
        latency = (time.monotonic() - sent) * 1000
    except (TimeoutError, Exception):
        answer, latency = None, None
    items = answer.items if answer is not None else []
    shown = ghost_text(items[0], lines, cursor) if items else ""
    taken = judge(shown, rest) if shown else Taken("none", 0, 0)  # type: ignore[arg-type]
    source = None
    if shown and len(bench.status) > statuses:
        last = bench.status[-1]
        source = last.get("lastSource") if isinstance(last, dict) else getattr(last, "lastSource", None)
    pause = Pause(
        region=region.name,
        language=region.language_id,
        at=position,
        latency_ms=latency,
        shown=shown,
        verdict=taken.verdict,
        chars=taken.chars,
        keys=taken.keys,
        source=source,
        truth=_truth_for_record(rest, max([len(shown), *_considered_lengths(bench.facts)])),
        considered=list(bench.facts),
    )
    return pause, taken


def _considered_lengths(facts: list[dict]) -> list[int]:
    return [len(item["facts"]["text"]) for message in facts for item in message.get("items", [])]


async def run_sessions(
    regions: list[Region],
    model: str,
    options: dict,
    facts: bool = False,
    on_region: Callable[[RegionLog], None] | None = None,
) -> list[RegionLog]:
    """Every region typed, one server per workspace folder (its regions' files left out of its index)."""
    by_folder: dict[Path, list[Region]] = {}
    for region in regions:
        by_folder.setdefault(region.folder, []).append(region)
    logs: list[RegionLog] = []
    for folder, group in by_folder.items():
        context = dict(options.get("context", {}))
        context["workspaceExclude"] = excluded_from_index(r.path for r in group)
        bench = TypingClient(facts)
        await bench.start(model, {**options, "context": context}, [folder])
        try:
            await _indexed(bench)
            for region in group:
                log = await type_region(bench, region)
                logs.append(log)
                if on_region is not None:
                    on_region(log)
        finally:
            await bench.stop()
    return logs


async def _indexed(bench: BenchClient) -> None:
    """Until the server says the workspace index is built (the sessions measure its steady state)."""
    deadline = time.monotonic() + INDEX_TIMEOUT_S
    while not any(line.startswith("indexed ") for line in bench.log_lines):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the workspace was not indexed within {INDEX_TIMEOUT_S:.0f}s")
        await asyncio.sleep(0.1)
