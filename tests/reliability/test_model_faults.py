"""Model faults through the real server and pytest-lsp's real client: each broken model folder (or
a device that is not there) gives one window/showMessage error naming the problem and its fix,
the server stays up and answers completions with an empty list, and completions resume once
workspace/didChangeConfiguration points back to a good model, without a restart."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from lsprotocol import types

from dgemma_lsp.runtime.stats import MODEL_SOURCES
from tests.lsp_session import inline, lsp_session, open_document, wait_until
from tests.reliability import faults

URI = "file:///faults/example.py"
SOURCE = "import os\n\ndef shorten(text, width):\n    words = text.split()\n    \n    return words\n"

# fault -> (how to build its model folder, what the message must name: the problem, then the fix)
FAULTS: dict[str, tuple[Callable[[Path, Path], Path] | None, tuple[str, ...]]] = {
    "missing safetensors": (
        faults.missing_weights,
        ("has no .safetensors weights", "copy the checkpoint's weights"),
    ),
    "truncated safetensors": (
        faults.truncated_weights,
        ("truncated or corrupt", "download the checkpoint again"),
    ),
    "corrupt safetensors": (
        faults.corrupt_weights,
        ("truncated or corrupt", "download the checkpoint again"),
    ),
    "pickle weights only": (faults.pickle_weights, ("pytorch_model.bin", "Convert them to safetensors")),
    "another architecture (GPT-2)": (faults.other_architecture, ("gpt2", "DiffusionGemma checkpoint folder")),
    "tokenizer larger than the model": (
        faults.larger_tokenizer,
        ("1512 tokens but the model only 512", "tokenizer.json saved with these weights"),
    ),
    "no such folder": (None, ("not found", "set the model option")),
    "device cuda on a CPU-only torch": (None, ("sees no CUDA GPU", "use device 'cpu'")),
}


async def test_each_model_fault_is_shown_and_completions_resume_without_restart(
    tiny_model_dir: Path, tmp_path: Path, figures: dict
) -> None:
    good = {"dgemma": {"model": str(tiny_model_dir), "device": "cpu"}}
    reported: dict[str, str] = {}
    inserted = offered = 0
    # No deadline: what the tiny model writes then does not depend on how busy the machine is.
    options = {"device": "cpu", "completion": {"latencyBudgetMs": 0}}
    async with lsp_session(tiny_model_dir, options=options) as (client, _):
        open_document(client, URI, SOURCE)
        assert (await inline(client, URI, 4, 4)).items
        process = client._server  # the same process serves from the first fault to the last
        for name, (build, expected) in FAULTS.items():
            if name.startswith("device") and torch.cuda.is_available():
                continue  # here "cuda" is there: that fault exists on CPU-only machines (like CI)
            if name == "no such folder":
                settings = {"model": str(tmp_path / "nowhere")}
            elif name.startswith("device"):
                settings = {"model": str(tiny_model_dir), "device": "cuda"}
            else:
                assert build is not None
                settings = {"model": str(build(tiny_model_dir, tmp_path / name.replace(" ", "-")))}
            shown, logged = len(client.messages), len(client.log_messages)
            client.workspace_did_change_configuration(
                types.DidChangeConfigurationParams(settings={"dgemma": {"device": "cpu", **settings}})
            )
            await wait_until(lambda shown=shown: len(client.messages) > shown, what=f"the message for {name}")
            message = client.messages[shown]
            reported[name] = message.message
            assert message.type == types.MessageType.Error, (name, message)
            for part in expected:
                assert part in message.message, (name, part, message.message)
            assert len(client.messages) == shown + 1, "one message per fault, not a popup per request"
            # The same message is in the log, and the status bar says why.
            assert any(m.message in message.message for m in client.log_messages[logged:])
            assert client.statuses[-1].state == "failed" and client.statuses[-1].error
            # Up and answering: no model, so an empty list.
            answer = await inline(client, URI, 4, 4)
            assert answer is not None and list(answer.items) == [], name

            logged = len(client.log_messages)
            client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=good))
            await wait_until(
                lambda logged=logged: model_loaded_since(client, logged), what=f"the good model after {name}"
            )
            change_line(client, URI, name)
            inserted += 1
            statuses = len(client.statuses)
            resumed = await inline(client, URI, 4 + inserted, 4)  # the empty line, moved down
            assert resumed is not None, name
            # Answered by the model again (the text changed: not the cache); a random tiny model's
            # answer may be cut to nothing by post-processing, so items are counted, not required.
            last = client.statuses[-1]
            assert len(client.statuses) > statuses and last.state == "ready"
            assert last.lastSource in MODEL_SOURCES  # the model ran: its row or a draft's
            offered += bool(resumed.items)
            assert process.returncode is None
    assert offered >= len(reported) // 2, f"completions after only {offered} of {len(reported)} corrections"
    figures["model faults injected"] = len(reported)
    figures["model faults: completions offered after correcting"] = f"{offered} of {len(reported)}"
    for name, text in reported.items():
        short = text.replace(str(tmp_path), "<tmp>").replace(str(tiny_model_dir), "<tiny model>")
        figures[f"fault '{name}' reported as"] = short


def model_loaded_since(client, index: int) -> bool:
    return any("loaded in" in m.message for m in client.log_messages[index:])


_versions: dict[str, int] = {}


def change_line(client, uri: str, name: str) -> None:
    """A new comment on the first line: the completion after a fault is the model's, not the cache's."""
    version = _versions[uri] = _versions.get(uri, 1) + 1
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(
                        start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)
                    ),
                    text=f"# after {name}\n",
                )
            ],
        )
    )
