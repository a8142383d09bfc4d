"""The figures of typing sessions, per language and overall: how often a suggestion is shown, how
much of what is shown is taken, how much of the code it writes, and how fast it comes."""

from __future__ import annotations

from collections.abc import Iterable

from dgemma_lsp.runtime.stats import percentile
from evaluation.typing_sessions.session import RegionLog
from evaluation.typing_sessions.typist import keys_to_type


def figures(logs: Iterable[RegionLog]) -> dict:
    """One block of figures over the regions' pauses."""
    logs = list(logs)
    pauses = [p for log in logs for p in log.pauses]
    shown = [p for p in pauses if p.shown]
    whole = [p for p in shown if p.verdict == "whole"]
    partial = [p for p in shown if p.verdict == "partial"]
    chars = sum(log.chars for log in logs)
    keys = sum(log.keys for log in logs)
    saved = sum(keys_to_type(p.shown[: p.chars]) - p.keys for p in whole + partial)
    latencies = [p.latency_ms for p in pauses if p.latency_ms is not None]
    return {
        "regions": len(logs),
        "pauses": len(pauses),
        "shown_share": _share(len(shown), len(pauses)),
        "accepted_share": _share(len(whole) + len(partial), len(shown)),
        "whole_share": _share(len(whole), len(shown)),
        "partial_share": _share(len(partial), len(shown)),
        "wrong_share": _share(len(shown) - len(whole) - len(partial), len(shown)),
        "wrong_per_pause": _share(len(shown) - len(whole) - len(partial), len(pauses)),
        "chars_written_share": _share(sum(p.chars for p in whole + partial), chars),
        "keys_saved_share": _share(saved, keys),
        "one_in": round(len(shown) / (len(whole) + len(partial)), 1) if whole or partial else None,
        "latency_p50_ms": percentile(latencies, 50),
        "latency_p95_ms": percentile(latencies, 95),
        "unanswered": len(pauses) - len(latencies),
        "sources": _count(p.source or "?" for p in shown),
    }


def by_language(logs: list[RegionLog]) -> dict[str, dict]:
    """Figures per language, then `all`."""
    languages = sorted({log.language for log in logs})
    blocks = {language: figures(log for log in logs if log.language == language) for language in languages}
    blocks["all"] = figures(logs)
    return blocks


def _share(part: float, whole: float) -> float | None:
    return round(part / whole, 4) if whole else None


def _count(values: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return dict(sorted(counts.items()))


ROWS = (
    ("pauses", "pauses", "{}"),
    ("shown at pauses", "shown_share", "{:.1%}"),
    ("taken of shown (whole + partly)", "accepted_share", "{:.1%}"),
    ("  whole", "whole_share", "{:.1%}"),
    ("  partly", "partial_share", "{:.1%}"),
    ("wrong of shown", "wrong_share", "{:.1%}"),
    ("wrong ghost text per pause", "wrong_per_pause", "{:.1%}"),
    ("code written by taken suggestions", "chars_written_share", "{:.1%}"),
    ("keystrokes saved", "keys_saved_share", "{:.1%}"),
    ("one suggestion taken in", "one_in", "{}"),
    ("latency p50 / p95 ms", None, ""),
)


def table(blocks: dict[str, dict]) -> str:
    """The figures as a text table, a column per language and one for all."""
    names = list(blocks)
    header = ["", *names]
    rows = [header]
    for label, key, fmt in ROWS:
        cells = [label]
        for name in names:
            block = blocks[name]
            if key is None:
                p50, p95 = block["latency_p50_ms"], block["latency_p95_ms"]
                cells.append("-" if p50 is None else f"{p50:.0f} / {p95:.0f}")
            else:
                value = block[key]
                cells.append("-" if value is None else fmt.format(value))
        rows.append(cells)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row))
        for row in rows
    )
