"""A tmux pane captured with its colours (`capture-pane -e`) -> HTML -> PNG with headless Chromium."""

from __future__ import annotations

import html
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

_BASIC = ["#000000", "#cd0000", "#00cd00", "#cdcd00", "#0000ee", "#cd00cd", "#00cdcd", "#e5e5e5",
          "#7f7f7f", "#ff0000", "#00ff00", "#ffff00", "#5c5cff", "#ff00ff", "#00ffff", "#ffffff"]  # fmt: skip
FG, BG = "#d0d0d0", "#1c1c1c"


def _color256(n: int) -> str:
    if n < 16:
        return _BASIC[n]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return f"#{steps[n // 36]:02x}{steps[(n // 6) % 6]:02x}{steps[n % 6]:02x}"
    level = 8 + (n - 232) * 10
    return f"#{level:02x}{level:02x}{level:02x}"


def styled(text: str) -> Iterator[tuple[str, dict[str, str]]]:
    """The runs of `text` (a pane captured with `capture-pane -e`) with the CSS style each is drawn in."""
    style: dict[str, str] = {}
    for part in re.split(r"(\x1b\[[0-9;]*m)", text):
        if not part.startswith("\x1b["):
            if part:
                yield part, dict(style)
            continue
        codes = [int(c) if c else 0 for c in part[2:-1].split(";")]
        i = 0
        while i < len(codes):
            code = codes[i]
            if code == 0:
                style = {}
            elif code == 1:
                style["font-weight"] = "bold"
            elif code == 3:
                style["font-style"] = "italic"
            elif code in (4, 9):
                style["text-decoration"] = "underline" if code == 4 else "line-through"
            elif code == 7:
                style["filter"] = "invert(1)"
            elif code in (38, 48) and i + 2 < len(codes) and codes[i + 1] == 5:
                style["color" if code == 38 else "background"] = _color256(codes[i + 2])
                i += 2
            elif code in (38, 48) and i + 4 < len(codes) and codes[i + 1] == 2:
                r, g, b = codes[i + 2 : i + 5]
                style["color" if code == 38 else "background"] = f"#{r:02x}{g:02x}{b:02x}"
                i += 4
            elif 30 <= code <= 37 or 90 <= code <= 97:
                style["color"] = _BASIC[code - 30 if code < 90 else code - 82]
            elif 40 <= code <= 47 or 100 <= code <= 107:
                style["background"] = _BASIC[code - 40 if code < 100 else code - 92]
            elif code == 39:
                style.pop("color", None)
            elif code == 49:
                style.pop("background", None)
            i += 1


def colours(line: str) -> list[tuple[str, str]]:
    """Each character of one captured line with the colour it is drawn in ("default": the terminal's)."""
    return [(char, style.get("color", "default")) for part, style in styled(line) for char in part]


def ansi_to_html(text: str) -> str:
    out = []
    for part, style in styled(text):
        css = ";".join(f"{k}:{v}" for k, v in style.items())
        out.append(f'<span style="{css}">{html.escape(part)}</span>')
    body = "".join(out)
    return (
        f"<html><body style='margin:0;background:{BG}'><pre style='margin:8px;color:{FG};"
        f"font:15px/1.3 DejaVu Sans Mono,monospace'>{body}</pre></body></html>"
    )


def screenshot(ansi: str, png: Path, chromium: Path, width: int, height: int) -> None:
    page = png.with_suffix(".html")
    page.write_text(ansi_to_html(ansi))
    subprocess.run(
        [str(chromium), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--window-size={width},{height}", f"--screenshot={png}", page.as_uri()],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    page.unlink()
