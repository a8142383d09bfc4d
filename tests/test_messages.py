"""The custom messages are defined once on the server, and both editors read the same fields."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from dgemma_lsp.lsp import messages

EDITORS = Path(__file__).resolve().parent.parent / "editors"


def fields(cls) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def typescript_interface(name: str) -> set[str]:
    source = (EDITORS / "vscode" / "src" / "protocol.ts").read_text()
    body = re.search(rf"export interface {name} \{{(.*?)\n\}}", source, re.DOTALL).group(1)
    return set(re.findall(r"^\s+(\w+)\??:", body, re.MULTILINE))


def test_the_status_notification_has_the_same_fields_in_vscode_and_neovim():
    lua = (EDITORS / "nvim" / "lua" / "dgemma" / "lsp.lua").read_text()
    annotated = set(
        re.findall(r"^---@field (\w+)", lua.split("---@class dgemma.Status", 1)[1].split("\n\n")[0], re.M)
    )
    handler = lua.split("local function on_status", 1)[1].split("log.debug(", 1)[0]
    read = set(re.findall(r"(\w+) = clean\(result\.(\w+)\)", handler))
    assert typescript_interface("ServerStatus") == fields(messages.Status)
    assert annotated == fields(messages.Status)
    assert {ours for ours, theirs in read} | {"state"} == fields(messages.Status)
    assert all(ours == theirs for ours, theirs in read)


def test_next_edit_results_and_method_names_agree():
    assert typescript_interface("NextEdit") == fields(messages.NextEditResult)
    protocol = (EDITORS / "vscode" / "src" / "protocol.ts").read_text()
    assert f'"{messages.STATUS}"' in protocol and f'"{messages.NEXT_EDIT}"' in protocol
    preview = (EDITORS / "nvim" / "lua" / "dgemma" / "preview.lua").read_text()
    assert f'"{messages.NEXT_EDIT}"' in preview and "result.newText" in preview and "result.range" in preview


def test_next_edit_params_are_checked_like_typed_ones():
    ok = {"textDocument": {"uri": "file:///a.py"}, "position": {"line": 1, "character": 2}}
    assert messages.NextEditParams.parse(ok) == messages.NextEditParams("file:///a.py", 1, 2)
    bad_params = (
        None,
        {"position": {}},
        {"textDocument": {"uri": ["x"]}, "position": {"line": 0, "character": 0}},
        {"textDocument": {"uri": "u"}, "position": {"line": 1.5, "character": 0}},
        {"textDocument": {"uri": "u"}, "position": {"line": -1, "character": 0}},
    )
    for bad in bad_params:
        try:
            messages.NextEditParams.parse(bad)
        except ValueError as err:
            assert messages.NEXT_EDIT in str(err)
        else:
            raise AssertionError(f"accepted {bad!r}")
    assert messages.wants_reset({"reset": True}) and not messages.wants_reset(None)


def test_both_editors_declare_the_notifications_they_read():
    # The server sends dgemma/status only to a client whose capabilities say it handles it.
    name = messages.STATUS.removeprefix(f"{messages.CAPABILITY}/")
    assert messages.client_handles({messages.CAPABILITY: {name: True}}, messages.STATUS)
    assert not messages.client_handles(None, messages.STATUS)
    assert not messages.client_handles({messages.CAPABILITY: {name: "yes"}}, messages.STATUS)
    protocol = (EDITORS / "vscode" / "src" / "protocol.ts").read_text()
    vscode = re.search(rf"EXPERIMENTAL_CAPABILITIES = {{ {messages.CAPABILITY}: {{([^}}]*)}} }}", protocol)
    # no confidence in VS Code: an inline suggestion cannot be drawn in parts (its README)
    assert vscode and re.findall(r"(\w+): true", vscode[1]) == [name, "resolving"]
    lua = (EDITORS / "nvim" / "lua" / "dgemma" / "lsp.lua").read_text()
    nvim = re.search(rf"experimental = {{ {messages.CAPABILITY} = {{([^}}]*)}} }}", lua)
    # resolving and confidence only where the plugin draws its own ghost text (the extmarks backend)
    assert nvim and re.findall(r"(\w+) = \w+", nvim[1]) == [name, "resolving", "confidence"]
    assert f"{name} = true" in nvim[1]
