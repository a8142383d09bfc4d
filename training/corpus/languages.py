"""The languages the corpus holds, and how a file's path (or #! line) names its language."""

from __future__ import annotations

import re
from pathlib import Path

ALL_LANGS = ("python", "javascript", "typescript", "go", "rust", "lua", "c", "cpp", "java", "bash")

# Extension -> language. ".h" is decided per source (C unless the source says C++).
EXTENSIONS: dict[str, str] = {
    ".py": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".tsx": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".go": "go",
    ".rs": "rust",
    ".lua": "lua",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".hxx": "cpp",
    ".java": "java",
    ".sh": "bash",
    ".bash": "bash",
}

_SHEBANGS = (("node", "javascript"), ("python", "python"), ("lua", "lua"), ("bash", "bash"), ("sh", "bash"))


def language_of(path: str, cpp_headers: bool = False, head: bytes = b"") -> str | None:
    """Language by extension; an extensionless script by its #! line."""
    lower = path.lower()
    if lower.endswith(".d.ts"):
        return "typescript"
    suffix = Path(lower).suffix
    lang = EXTENSIONS.get(suffix)
    if lang == "c" and suffix == ".h" and cpp_headers:
        return "cpp"
    if lang is None and not suffix and head.startswith(b"#!"):
        words = re.findall(r"[a-z]+", head.split(b"\n", 1)[0].decode("latin-1").lower())
        for word, shebang_lang in _SHEBANGS:
            if word in words:
                return shebang_lang
    return lang
