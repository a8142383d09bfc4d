"""Links judged by what they point to, and secrets by every name they go by: a link inside the folder to
an ignored file or to a secret, `.env`-prefixed names and folders named for secrets and keys are never
opened, though the rest of the folder is read."""

from __future__ import annotations

import os

import pytest

from tests.lsp_session import wait_until
from tests.repository.attacks import REMOTE, Audit, indexed_lines, session, workspace, write

pytestmark = pytest.mark.adversarial

SECRETS = (
    ".env_prod.py", ".env-local.sh", "config/.env_test.ts", "secrets/db.py", "credentials/aws.py",
    ".secrets/token.py", ".ssh/config.py", "deploy/keys/signing.py", ".aws/profile.py", ".gnupg/agent.py",
    "app/private_keys/rsa.py",
)  # fmt: skip
TARGETS = ("scratch/notes.py", "secrets.py", "node_modules/pkg/index.js")
LINKS = {
    "notes_link.py": "scratch/notes.py",
    "config_link.py": "secrets.py",
    "pkg_link.js": "node_modules/pkg/index.js",
}


async def test_links_and_secrets_are_judged_by_what_they_are(tmp_path):
    root = workspace(tmp_path)
    write(root, ".gitignore", "scratch/\n")
    for relative in (*SECRETS, *TARGETS):
        write(root, relative)
    for link, target in LINKS.items():
        os.symlink(root / target, root / link)
    audit = Audit(tmp_path / "opened.log")
    options = {"context": {"workspace": True}}
    async with session(audit.command(), REMOTE, [root], options) as client:
        await wait_until(lambda: indexed_lines(client), what="the workspace index")
    opened, resolved = set(audit.opened()), root.resolve()
    assert str(resolved / "report" / "helpers.py") in opened  # the rest is read
    for relative in (*SECRETS, *TARGETS, *LINKS):
        assert str(resolved / relative) not in opened, relative
