"""Security: no network, no remote code, no pickle, no file the client did not send, no code in logs.

The session test runs the real server under an audit hook (tests/reliability/audited_server.py)
that records every socket connect, name lookup and file open of the whole process.
"""

from __future__ import annotations

import ast
import json
import pickle
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

import dgemma_lsp
import engine
from dgemma_lsp.repository.files import user_git_files
from tests.reliability import faults
from tests.reliability.wire import RawServer

AUDITED = Path(__file__).with_name("audited_server.py")
PACKAGES = [Path(dgemma_lsp.__file__).parent, Path(engine.__file__).parent]
DOC_MARKER = "QZX_document_marker_7f3a"  # in the text the client sends
DISK_MARKER = "QZX_disk_marker_91c2"  # in the same file on disk, which the server must not read
NETWORK_EVENTS = {
    "socket.connect", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo", "socket.gethostbyname",
    "socket.gethostbyaddr", "http.client.connect", "urllib.Request",
}  # fmt: skip


def source_files() -> list[Path]:
    return sorted(p for package in PACKAGES for p in package.rglob("*.py"))


def test_trust_remote_code_is_never_passed() -> None:
    """No call in the server or the engine passes trust_remote_code, nor builds it as a key."""
    found = []
    for path in source_files():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "trust_remote_code":
                found.append(f"{path}:{node.value.lineno}")
            elif isinstance(node, ast.Constant) and node.value == "trust_remote_code":
                found.append(f"{path}:{node.lineno}")  # a dict key or getattr name
    assert len(source_files()) > 20
    assert found == []


def test_a_checkpoint_asking_for_its_own_code_loads_without_running_it(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    from engine import load_engine

    folder = faults.remote_code(tiny_model_dir, tmp_path / "remote-code")
    assert "auto_map" in json.loads((folder / "config.json").read_text())
    loaded = load_engine(str(folder), device="cpu")
    assert loaded.info.family  # it loaded, as the DiffusionGemma class the engine names itself
    assert not (folder / "REMOTE_CODE_RAN").exists(), "the checkpoint's modeling_remote.py was imported"
    loaded.close()


class _Boom:
    """Unpickling this writes a file: a stand-in for what a hostile .bin could run."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').write('pickle ran')",))


def audit_events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def allowed_open(path: str, roots: list[Path]) -> bool:
    if path.startswith(("/proc/", "/sys/", "/dev/")):
        return True  # the OS describing the process and machine (torch, psutil-like reads): no user data
    if path.startswith("__editable__.") and path.endswith(".__path_hook__"):
        return True  # pip's editable-install finder, named as a path entry: not a file
    resolved = Path(path).resolve()
    if any(resolved.is_relative_to(root) for root in roots):
        return True
    if resolved in user_git_files():
        return True  # git's configuration and global excludes: the workspace's ignore rules
    # tempfile's first call probes the temp folder by writing and deleting a random file of its own.
    return resolved.parent == Path(tempfile.gettempdir()).resolve() and not resolved.exists()


def test_a_whole_session_stays_local_reads_only_its_own_and_its_workspaces_files_and_logs_no_code(
    tiny_model_dir: Path, tmp_path: Path, figures: dict
) -> None:
    # The model folder: the tiny checkpoint with hostile pickles planted beside its safetensors.
    model = shutil.copytree(tiny_model_dir, tmp_path / "model")
    pickle_ran = tmp_path / "PICKLE_RAN"
    for name in ("pytorch_model.bin", "model.pt"):
        (model / name).write_bytes(pickle.dumps(_Boom(pickle_ran)))
    # A workspace on disk: the document the client edits, with other text than it sends, and another.
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    document = workspace / "secret.py"
    document.write_text(f"API_KEY = '{DISK_MARKER}'\n")
    (workspace / "neighbour.py").write_text(f"# {DISK_MARKER}\n")
    logs = tmp_path / "logs"
    logs.mkdir()
    audit, log_file, stderr = logs / "audit.jsonl", logs / "server.log", logs / "stderr.log"

    server = RawServer(
        ["--stdio", "--log-file", str(log_file)],
        stderr_path=stderr,
        command=[sys.executable, str(AUDITED), str(audit)],
    )
    server.request(
        "initialize",
        {
            "processId": None,
            "rootUri": workspace.as_uri(),
            "workspaceFolders": [{"uri": workspace.as_uri(), "name": "workspace"}],
            "capabilities": {"textDocument": {"inlineCompletion": {}}},
            "initializationOptions": {
                "model": str(model),
                "device": "cpu",
                "completion": {"latencyBudgetMs": 0},  # answers independent of the machine's load
                "rewrite": {"latencyBudgetMs": 0},
            },
        },
        timeout=120,
    )
    server.notify("initialized", {})
    server.wait_for_model()
    uri = document.as_uri()
    text = f"import os\n\ndef token():\n    secret = '{DOC_MARKER}'\n    \n    return secret\n"
    server.open(uri, text)
    shown: list[str] = []  # every piece of code the server answered with

    def ask(method: str, params: dict) -> dict:
        answer = server.request(method, params, timeout=60)
        assert "result" in answer, answer
        shown.extend(_texts(answer["result"]))
        return answer["result"]

    before_completions = len(log_file.read_text())
    for line, character in ((4, 4), (3, 12), (5, 11)):
        ask("textDocument/inlineCompletion", server.inline_params(uri, line, character))
    at = {"line": 3, "character": 4}
    actions = ask(
        "textDocument/codeAction",
        {"textDocument": {"uri": uri}, "range": {"start": at, "end": at}, "context": {"diagnostics": []}},
    )
    for action in actions or []:
        ask("codeAction/resolve", action)
    ask("dgemma/nextEdit", {"textDocument": {"uri": uri}, "position": at})
    # Input that goes wrong, carrying the marker: errors get logged, the text must not be.
    server.notify(
        "textDocument/didOpen",
        {
            "textDocument": {
                "uri": "file:///x.py",
                "languageId": "python",
                "version": "one",
                "text": DOC_MARKER,
            }
        },
    )
    inverted = {"start": {"line": 3, "character": 0}, "end": {"line": 1, "character": 0}}
    server.change(uri, 2, [{"range": inverted, "text": DOC_MARKER}])
    server.request("textDocument/inlineCompletion", {"textDocument": {"uri": uri}, "position": DOC_MARKER})
    server.open(uri, text.replace("import os", f"import os  # {DOC_MARKER}"))
    ask("textDocument/inlineCompletion", server.inline_params(uri, 4, 4))
    quiet = log_file.read_text()

    # Positive control: with debugLog on, what the server sends is logged, so the check above can see.
    server.notify("workspace/didChangeConfiguration", {"settings": {"dgemma": {"debugLog": True}}})
    server.change(uri, 3, [{"range": {"start": at, "end": at}, "text": "x"}])
    loud = ask("textDocument/inlineCompletion", server.inline_params(uri, 4, 4))
    assert server.close() == 0

    events = audit_events(audit)
    network = [e for e in events if e["event"] in NETWORK_EVENTS]
    opened = sorted({e["path"] for e in events if e["event"] == "open"})
    roots = [model, *PACKAGES, Path(sys.prefix), Path(sys.base_prefix), log_file, workspace]
    figures["security: files opened by the server in a session"] = len(opened)
    figures["security: network events (connect, lookups, sends)"] = len(network)
    assert len(opened) > 100, "the audit hook saw the imports: it was installed"
    assert network == []
    assert [p for p in opened if not allowed_open(p, roots)] == []
    # The workspace index reads the folder's code, never a file whose name says it is a secret (the
    # document itself here: its buffer is what counts).
    read = {Path(p).resolve() for p in opened if Path(p).resolve().is_relative_to(workspace.resolve())}
    assert read == {(workspace / "neighbour.py").resolve()}
    assert not [p for p in opened if p.endswith((".bin", ".pt"))], "opened a pickle"
    assert not pickle_ran.exists()

    logged = quiet + stderr.read_text(errors="replace")
    notified = json.dumps(server.messages("window/logMessage") + server.messages("window/showMessage"))
    assert DOC_MARKER not in logged and DOC_MARKER not in notified
    assert DISK_MARKER not in logged
    # Distinctive texts only: a run of dashes or a short word can be in any log line by chance.
    code = {t for t in shown if len(t.strip()) >= 6 and sum(c.isalnum() for c in t) >= 3}
    assert code, "the session produced completions to look for"
    # Only what was logged from the first completion on: a short completion can occur by chance in
    # the startup lines (pygls logs the client's capabilities), which hold no completion.
    since = quiet[before_completions:]
    assert [t for t in code if json.dumps(t)[1:-1] in since] == [], "completions logged with debugLog off"
    # With debugLog on, the answers are in the log: the checks above would have seen them.
    after = log_file.read_text()[len(quiet) :]
    assert '"items"' in after
    assert all(json.dumps(t)[1:-1] in after for t in _texts(loud))


def _texts(result: object) -> list[str]:
    """insertText and newText values anywhere in a result."""
    if isinstance(result, dict):
        own = [v for k, v in result.items() if k in ("insertText", "newText") and isinstance(v, str)]
        return own + [t for v in result.values() for t in _texts(v)]
    if isinstance(result, list):
        return [t for v in result for t in _texts(v)]
    return []


@pytest.mark.parametrize("suffix", [".bin", ".pt"])
def test_pickle_only_checkpoints_are_refused_without_being_read(
    tiny_model_dir: Path, tmp_path: Path, suffix: str
) -> None:
    from engine import EngineError, load_engine

    folder = faults.missing_weights(tiny_model_dir, tmp_path / "pickled")
    ran = tmp_path / "PICKLE_RAN"
    (folder / f"weights{suffix}").write_bytes(pickle.dumps(_Boom(ran)))
    with pytest.raises(EngineError, match=rf"only pickle weights \(weights\{suffix}\).*refused.*safetensors"):
        load_engine(str(folder), device="cpu")
    assert not ran.exists()
