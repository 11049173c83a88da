"""A secret committed by mistake in a tracked file is masked before embedding and FTS, its key
kept; ai-index --status warns naming the file and line."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.index.conftest import embed_inputs, make_settings, run_index
from tests.support.repos import make_repo
from varaverk.masking.documents import mask_secrets
from varaverk.masking.shapes import MASK

TEMPLATE = """\
# Notify settings template
# NOTIFY_URL: where alerts go.
NOTIFY_URL="https://ntfy.example.lan/harbor"
# NOTIFY_API_TOKEN: the relay's token (keep it in Configurations/, not here).
NOTIFY_API_TOKEN="CANARY-committed-5a7b91"
# NOTIFY_PASSWORD_FILE: a path, not a secret.
NOTIFY_PASSWORD_FILE="/boot/config/notify.pass"
# NOTIFY_RETRIES: attempts before giving up.
NOTIFY_RETRIES="3"
"""
README = """\
# Relay

Set the relay up with `curl -H "Authorization: Bearer CANARYbearer0123456789xyz" https://x`.
The stored key is `Zq8xLm3KpR7tYw2NvB5cHd9FgJ4sAe6U` (rotated yearly).
Checksum of the image: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08.
"""
CANARIES = ("CANARY-committed-5a7b91", "CANARYbearer0123456789xyz",
            "Zq8xLm3KpR7tYw2NvB5cHd9FgJ4sAe6U")


def test_mask_keeps_keys_placeholders_and_paths():
    masked = mask_secrets(TEMPLATE)
    assert f'NOTIFY_API_TOKEN="{MASK}"' in masked.text
    assert 'NOTIFY_PASSWORD_FILE="/boot/config/notify.pass"' in masked.text
    assert 'NOTIFY_RETRIES="3"' in masked.text and "NOTIFY_URL=\"https://ntfy" in masked.text
    assert masked.hits == ((5, "NOTIFY_API_TOKEN"),)
    assert mask_secrets('TOKEN=""\nKEY="${OTHER}"\nPASS=<your password>\n').hits == ()
    shapes = mask_secrets('{"password": "hunter2-x"}\nuri: mysql://u:pw-123@db/x\nALARM_PIN=4711\n')
    assert [line for line, _ in shapes.hits] == [1, 2, 3]
    assert "hunter2-x" not in shapes.text and "pw-123" not in shapes.text
    assert "4711" not in shapes.text


# Documentation about secrets and settings: each line names a secret-looking key or command
# without holding a secret, and was once masked and warned about.
NOT_SECRETS = """\
AI_TOKEN_RETAIN_ROWS="20000"
SESSION_KEY_ROTATE_DAYS=30
AI_CONF_READ_KEYS="MIRROR_MAX_DELETE_PCT MOVER_STOP_TIMEOUT"
| a secret committed by mistake | `tests/test_committed_secret.py::test_never_embedded` |
redaction covers ``mysql -pX``, ``mysql -p$DB_PASS`` and `mysql -p`, then prompts
whatever the quoting: ``KEY=X``, ``KEY='X Y'``, ``PASSWORD="A B C"``
"""


def test_documentation_about_secrets_is_not_masked():
    masked = mask_secrets(NOT_SECRETS)
    assert masked.hits == () and masked.text == NOT_SECRETS
    real = mask_secrets("mysql -uroot -pS3cr3t-db db\n`mysql -pHunter2x`\nALARM_PIN=4711\n"
                        "ADMIN_PASSWORD=20261201\nsecret::alpha-bravo-9\n"
                        "DB_PASSWORD='correct horse'\n")
    assert [line for line, _ in real.hits] == [1, 2, 3, 4, 6]
    assert "S3cr3t-db" not in real.text and "Hunter2x" not in real.text
    assert "20261201" not in real.text


def test_committed_secret_never_embedded_nor_in_fts(tmp_path, model_server):
    repo = make_repo(tmp_path / "r", {"Deployment/notify.conf.template": TEMPLATE,
                                      "Docs/README-Relay.md": README})
    settings = make_settings(repo, tmp_path, model_server)
    proc = run_index(settings)
    assert proc.returncode == 0, proc.stderr
    sent = "\n".join(embed_inputs(model_server))
    with sqlite3.connect(settings.index_path) as db:
        stored = "\n".join(t for (t,) in db.execute("SELECT text || context FROM chunks"))
        fts = "\n".join(t for (t,) in db.execute("SELECT text FROM chunks_fts"))
        hit = db.execute("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?",
                         ('"5a7b91"',)).fetchone()[0]
    for canary in CANARIES:
        assert canary not in sent and canary not in stored and canary not in fts
    assert hit == 0
    assert "NOTIFY_API_TOKEN" in stored and MASK in stored  # the documentation still reads
    assert "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" in stored
    log = (settings.ai_log_dir / "ai-index.log").read_text()
    assert "Deployment/notify.conf.template: line 5: masked a secret-looking value" in log
    assert all(c not in log for c in CANARIES)
    status = run_index(settings, "--status")
    assert ("warning: Deployment/notify.conf.template: masked secret-looking values on line 5 "
            "(NOTIFY_API_TOKEN)") in status.stdout
    assert "warning: Docs/README-Relay.md: masked secret-looking values on lines 3, 4" \
        in status.stdout
    info = json.loads(run_index(settings, "--status", "--json").stdout)
    assert {m["path"] for m in info["masked"]} == {"Deployment/notify.conf.template",
                                                   "Docs/README-Relay.md"}
    # A second run keeps the warning (the row is unchanged, not re-read).
    assert run_index(settings).returncode == 0
    assert "notify.conf.template: masked" in run_index(settings, "--status").stdout


SCRIPT = """\
#!/usr/bin/env bash
# PURPOSE
#   Rotate the relay's credentials.
# OPERATIONAL MODEL
#   Asks the relay for a new token.
# DESIGN PRINCIPLES
#   One request.
# OPERATIONAL SAFEGUARDS
#   Fails closed.
# CONFIGURATION
#   NOTIFY_API_TOKEN="CANARY-header-77c1d2" is what the relay answered once.
# RUNTIME MODES
#   No flags.
set -eu
NOTIFY_API_TOKEN="$(cat /run/secrets/notify)"
password="hunter2-in-the-body"
curl -u "relay:$password" https://relay.example.lan/rotate
"""


def test_only_indexed_lines_are_warned_about(tmp_path, model_server):
    # A script's body is never indexed, so a value masked there is no finding: warning about
    # it buried the real ones (a repository's own code gave hundreds of such lines).
    repo = make_repo(tmp_path / "r", {"Tools/rotate_relay": SCRIPT})
    (repo / "Tools/rotate_relay").chmod(0o755)
    settings = make_settings(repo, tmp_path, model_server)
    proc = run_index(settings)
    assert proc.returncode == 0, proc.stderr
    log = (settings.ai_log_dir / "ai-index.log").read_text()
    assert "Tools/rotate_relay: line 11: masked a secret-looking value" in log
    assert "line 15" not in log and "line 16" not in log
    assert "CANARY-header-77c1d2" not in "\n".join(embed_inputs(model_server))


def test_this_repository_indexes_without_a_masked_value(tmp_path):
    """README command 1 indexes this repository: nothing in what it would embed looks like a
    secret (a warning there is either a committed secret or a false alarm a newcomer sees).
    The README's table of secret shapes holds made-up examples in code: information only."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        pytest.skip("not a git clone: nothing tracked to index")
    proc = run_index(make_settings(root, tmp_path), "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "tracked files" in proc.stdout
    masked = [line for line in proc.stderr.splitlines() if "masked" in line]
    assert [line for line in masked if "masked a documentation example" not in line] == []
    assert {line.split(": line")[0] for line in masked} <= {"ai-index: README.md"}
